//! Turns: streaming the model, the tool loop, titles and compaction.

use super::*;

impl Ctx {
    /// Streams one model response, retrying before anything was shown.
    async fn stream(
        &self,
        client: &ModelClient,
        config: &Config,
        req: Request<'_>,
    ) -> Result<Completion, ModelError> {
        let mut attempt = 0u32;
        loop {
            let error = match client.open(req).await {
                Ok(mut stream) => {
                    let (mut thinking, mut answering) = (false, false);
                    let outcome = loop {
                        match stream.next().await {
                            Ok(Some(deltas)) => {
                                for delta in deltas {
                                    match delta {
                                        Delta::Reasoning(d) => {
                                            if !thinking {
                                                thinking = true;
                                                self.emit("thinking_start", json!({})).await;
                                            }
                                            self.emit("reasoning_delta", json!({"delta": d})).await;
                                        }
                                        Delta::Text(d) => {
                                            if !answering {
                                                answering = true;
                                                self.emit("assistant_start", json!({})).await;
                                            }
                                            self.emit("assistant_delta", json!({"delta": d})).await;
                                        }
                                    }
                                }
                            }
                            Ok(None) => break Ok(()),
                            Err(e) => break Err((e, thinking || answering)),
                        }
                    };
                    match outcome {
                        Ok(()) => return Ok(stream.finish()),
                        // Output already shown cannot be taken back: no retry then.
                        Err((e, true)) => return Err(e),
                        Err((e, false)) => e,
                    }
                }
                Err(e) => e,
            };
            if !error.retryable() || attempt >= config.retry_attempts {
                return Err(error);
            }
            attempt += 1;
            let delay = backoff(config.retry_base_delay_ms, attempt);
            self.emit(
                "retrying",
                json!({
                    "attempt": attempt,
                    "max_attempts": config.retry_attempts,
                    "reason": error.reason(),
                    "delay_ms": delay,
                }),
            )
            .await;
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
    }

    /// A whole turn: the model, its tool calls, until it answers without calling tools.
    pub(super) async fn turn(self: Arc<Self>, input: TurnInput) {
        let latest = match &input {
            TurnInput::User(content, images) => {
                let mut event = json!({"content": content});
                if !images.is_empty() {
                    event["images"] = json!(images);
                }
                {
                    let mut state = self.state();
                    state.turns += 1;
                    if state.first_request.is_none() {
                        state.first_request = Some(content.clone());
                    }
                }
                // Saved before it is echoed: the daemon takes the echo as the session having
                // the message, and checks the saved log for one it never saw echoed.
                self.push_message(Message::User {
                    content: content.clone(),
                    images: images.clone(),
                })
                .await;
                self.emit("user_message", event).await;
                Some(content.clone())
            }
            TurnInput::Continue => None,
            TurnInput::Compact => {
                self.manual_compaction().await;
                self.status("ready").await;
                return;
            }
        };
        let config = match self.config() {
            Ok(config) => config,
            Err(e) => {
                self.emit_model_status(false).await;
                self.error(e.to_string()).await;
                self.status("ready").await;
                return;
            }
        };
        self.emit_model_status(false).await;
        let client = match ModelClient::new(&config) {
            Ok(c) => c,
            Err(e) => {
                self.error(e.to_string()).await;
                self.status("ready").await;
                return;
            }
        };
        let model = self.model_for(&config);
        let (window, max_out) = Ctx::window_for(&config, &model);
        // Compact before the request when the last one came close to the window.
        let near_full = self.state().context_tokens > window.saturating_sub(max_out) * 8 / 10;
        if near_full {
            self.compact(&client, &model, max_out, 1).await;
        }
        let system = self.system_prompt().await;
        self.mcp_settled().await;
        let mut usage = Usage::default();
        let mut reply = String::new();
        let mut images = Images::new();
        loop {
            self.emit("connecting", json!({})).await;
            // Servers may connect or go away between requests.
            let specs = self.tool_specs();
            let messages = self.state().messages.clone();
            images = load_images(images, &messages).await;
            let completion = self
                .stream(
                    &client,
                    &config,
                    Request {
                        model: &model,
                        system: &system,
                        messages: &messages,
                        tools: &specs,
                        max_tokens: max_out,
                        images: &images,
                    },
                )
                .await;
            let completion = match completion {
                Ok(c) => c,
                Err(e) => {
                    self.error(e.to_string()).await;
                    break;
                }
            };
            usage.add(completion.usage);
            self.state().context_tokens =
                completion.usage.input_tokens + completion.usage.output_tokens;
            if !completion.text.is_empty() {
                reply = completion.text.clone();
            }
            let calls = completion.tool_calls.clone();
            self.push_message(Message::Assistant {
                content: completion.text,
                reasoning: completion.reasoning,
                signature: completion.signature,
                tool_calls: completion.tool_calls,
            })
            .await;
            if calls.is_empty() {
                break;
            }
            for call in &calls {
                let message = self.handle_call(call).await;
                self.push_message(message).await;
            }
        }
        self.emit(
            "usage",
            json!({
                "input_tokens": usage.input_tokens,
                "cached_input_tokens": usage.cached_input_tokens,
                "output_tokens": usage.output_tokens,
                "reasoning_tokens": usage.reasoning_tokens,
            }),
        )
        .await;
        let tokens = self.state().context_tokens;
        self.emit(
            "context_usage",
            json!({"tokens": tokens, "tokenizer": "api", "cost": 0.0}),
        )
        .await;
        self.status("ready").await;
        if let Some(latest) = latest {
            let turns = self.state().turns;
            if title_due(turns) {
                let ctx = self.clone();
                tokio::spawn(async move { ctx.retitle(&latest, &reply).await });
            }
        }
    }

    async fn retitle(&self, latest: &str, reply: &str) {
        let Ok(config) = self.config() else { return };
        let (first, current) = {
            let state = self.state();
            (
                state.first_request.clone().unwrap_or_default(),
                state.title.clone(),
            )
        };
        let project = self
            .cwd
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let request = prompt::title_request(&project, current.as_deref(), &first, latest, reply);
        let answer =
            crate::model::ask_title_model(&config, prompt::TITLE_SYSTEM, &request, 32).await;
        let title = match answer {
            Ok(text) => prompt::clean_title(&text),
            Err(e) => {
                tracing::warn!(session = %self.session, "title request failed: {e}");
                None
            }
        };
        let Some(title) = title else { return };
        self.state().title = Some(title.clone());
        self.record(Record::Title {
            title: title.clone(),
            at: now_ms(),
        })
        .await;
        self.emit("session_title", json!({"title": title})).await;
    }

    async fn manual_compaction(&self) {
        let config = match self.config() {
            Ok(c) => c,
            Err(e) => {
                self.emit("compaction_failed", json!({"error": e.to_string()}))
                    .await;
                return;
            }
        };
        let client = match ModelClient::new(&config) {
            Ok(c) => c,
            Err(e) => {
                self.emit("compaction_failed", json!({"error": e.to_string()}))
                    .await;
                return;
            }
        };
        let model = self.model_for(&config);
        let max_out = Ctx::window_for(&config, &model).1;
        self.compact(&client, &model, max_out, 0).await;
    }

    /// Replaces the context with a model-written summary plus the last `keep` messages.
    async fn compact(&self, client: &ModelClient, model: &str, max_out: u64, keep: usize) {
        let mut messages = self.state().messages.clone();
        if messages.len() <= keep {
            self.emit(
                "compaction_failed",
                json!({"error": "there is nothing to compact yet"}),
            )
            .await;
            return;
        }
        self.emit("compaction_start", json!({})).await;
        self.status("compacting").await;
        let tail = messages.split_off(messages.len() - keep);
        messages.push(Message::User {
            content: prompt::COMPACT_REQUEST.into(),
            images: vec![],
        });
        let result: Result<(String, u64), ModelError> = async {
            let mut stream = client
                .open(Request {
                    model,
                    system: prompt::COMPACT_SYSTEM,
                    messages: &messages,
                    tools: &[],
                    max_tokens: max_out,
                    images: &NO_IMAGES,
                })
                .await?;
            let mut chars = 0usize;
            let mut reported = 0u64;
            while let Some(deltas) = stream.next().await? {
                for delta in deltas {
                    if let Delta::Text(t) = delta {
                        chars += t.len();
                    }
                }
                // About four characters a token, reported every ~100 tokens.
                let estimate = (chars / 4) as u64;
                if estimate >= reported + 100 {
                    reported = estimate;
                    self.emit("compaction_progress", json!({"output_tokens": estimate}))
                        .await;
                }
            }
            let completion = stream.finish();
            Ok((completion.text, completion.usage.output_tokens))
        }
        .await;
        match result {
            Ok((summary, output_tokens)) if !summary.trim().is_empty() => {
                self.emit(
                    "compaction_progress",
                    json!({"output_tokens": output_tokens}),
                )
                .await;
                {
                    let mut state = self.state();
                    let mut compacted = vec![Message::User {
                        content: prompt::summary_message(&summary),
                        images: vec![],
                    }];
                    compacted.extend(tail);
                    state.messages = compacted;
                    state.context_tokens = output_tokens;
                }
                self.record(Record::Compaction {
                    summary,
                    keep,
                    at: now_ms(),
                })
                .await;
                self.emit("compaction_end", json!({})).await;
            }
            Ok(_) => {
                self.emit(
                    "compaction_failed",
                    json!({"error": "the model wrote an empty summary"}),
                )
                .await
            }
            Err(e) => {
                self.emit("compaction_failed", json!({"error": e.to_string()}))
                    .await
            }
        }
    }
}
