//! Client ops into JSON-RPC requests: turns, steering, approvals, modes and slash commands.

use super::*;

impl Codex {
    pub(super) async fn handle_op(&mut self, op: Object) -> bool {
        let name = op
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let result: Result<(), String> = match name.as_str() {
            "shutdown" => return false,
            "user_message" => match Message::from_op(&op) {
                Ok(message) => return self.user_message(message).await,
                Err(e) => Err(e),
            },
            "command" => {
                let text = op.get("input").and_then(Value::as_str).unwrap_or("").trim();
                return self.command(text.to_string()).await;
            }
            "steer" => return self.steer().await,
            "interrupt" => return self.interrupt().await,
            "approve" => match (Answer::from_op(&op), hunk_choice(&op)) {
                (Ok(answer), Ok(hunks)) => return self.approve(answer, hunks).await,
                (Err(e), _) | (_, Err(e)) => Err(e),
            },
            // The provider is a start flag: the process restarts on the same thread.
            "set_gateway" => return self.set_gateway(&op).await,
            "set_approval_mode" => match mode_of(&op) {
                Ok(mode) => return self.set_mode(mode).await,
                Err(e) => Err(e),
            },
            "mcp_list" => return self.mcp_list().await,
            "mcp_reconnect" => match op.get("name").and_then(Value::as_str) {
                // Codex reloads its MCP servers as a whole: the named one reconnects with them.
                Some(name) if !name.trim().is_empty() => {
                    return self
                        .request(Request::McpReload, "config/mcpServer/reload", Value::Null)
                        .await;
                }
                _ => Err("mcp_reconnect requires name".into()),
            },
            "mcp_login" => match op.get("name").and_then(Value::as_str) {
                Some(name) if !name.trim().is_empty() => {
                    let mut params = json!({ "name": name });
                    if let Some(thread) = &self.thread {
                        params["threadId"] = json!(thread);
                    }
                    let kind = Request::McpLogin(name.to_string());
                    return self.request(kind, "mcpServer/oauth/login", params).await;
                }
                _ => Err("mcp_login requires name".into()),
            },
            "rename" => match (op.get("title").and_then(Value::as_str), self.thread.clone()) {
                (Some(title), Some(thread)) => {
                    let params = json!({"threadId": thread, "name": title});
                    return self
                        .request(Request::Plain("thread/name/set"), "thread/name/set", params)
                        .await;
                }
                _ => Ok(()),
            },
            "set_attended" | "snapshot" | "tui" => Ok(()),
            "decide_action" | "mcp_set" | "mcp_remove" | "continue" | "mcp_toggle" => {
                Err(format!("{name} is not available in Codex sessions"))
            }
            "agent_runs" => {
                // Children Codex saved since (another client on the same thread) count too.
                if let Some(thread) = self.thread.clone() {
                    self.agents.load_saved(&self.codex_home, &thread);
                }
                let runs = self.agents.event();
                return self.sink.answer(runs).await;
            }
            "subagent_transcript" => match op.get("agent_id").and_then(Value::as_str) {
                Some(id) if !id.trim().is_empty() => {
                    return self.subagent_transcript(id.to_string()).await;
                }
                _ => Err("subagent_transcript requires agent_id".into()),
            },
            _ => Err(format!("unknown op: {name}")),
        };
        match result {
            Ok(()) => true,
            Err(message) => self.emit(error(message)).await,
        }
    }

    /// Asks Codex for its MCP servers as this thread sees them; answered with `mcp_servers`.
    pub(super) async fn mcp_list(&mut self) -> bool {
        let mut params = json!({});
        if let Some(thread) = &self.thread {
            params["threadId"] = json!(thread);
        }
        self.request(Request::McpList, "mcpServerStatus/list", params)
            .await
    }

    async fn user_message(&mut self, message: Message) -> bool {
        if self.busy || self.thread.is_none() {
            let events = self.queue.push(message);
            return self.emit_all(events).await;
        }
        self.start_turn(message).await
    }

    /// The turn's input items, the notes on images left out, and the echo naming the rest.
    fn input_items(&self, message: &Message) -> (Vec<Value>, Vec<Event>, Event) {
        let mut items = vec![json!({"type": "text", "text": message.content, "text_elements": []})];
        let mut notes = Vec::new();
        let mut refused = Vec::new();
        for path in &message.images {
            match inside(std::path::Path::new(path), &self.image_roots) {
                Some(p) => items.push(json!({"type": "localImage", "path": p})),
                None => {
                    refused.push(path.clone());
                    notes.push(info(format!(
                        "image not attached: {path}: images must be files in the session's directories or uploads"
                    )))
                }
            }
        }
        (items, notes, message.event_without(&refused))
    }

    pub(super) async fn start_turn(&mut self, message: Message) -> bool {
        let Some(thread) = self.thread.clone() else {
            return true;
        };
        let (items, notes, echo) = self.input_items(&message);
        if !self.emit_all(notes).await
            || !self.emit(echo).await
            || !self.emit(event("connecting", json!({}))).await
        {
            return false;
        }
        self.busy = true;
        self.turn = None;
        self.interrupt_asked = false;
        self.usage = None;
        let (approval, sandbox) = self.policies();
        let mut params = json!({
            "threadId": thread,
            "input": items,
            "approvalPolicy": approval,
            "sandboxPolicy": sandbox,
        });
        if let Some(model) = &self.model {
            params["model"] = json!(model);
        }
        if let Some(fast) = self.fast {
            params["serviceTier"] = json!(if fast { FAST_TIER } else { "default" });
        }
        if let Some(thinking) = self.thinking {
            params["summary"] = json!(if thinking { "auto" } else { "none" });
        }
        self.request(Request::TurnStart, "turn/start", params).await
    }

    async fn steer(&mut self) -> bool {
        let (Some(thread), Some(turn)) = (self.thread.clone(), self.turn.clone()) else {
            return true;
        };
        if !self.busy || self.queue.is_empty() {
            return true;
        }
        let messages = self.queue.drain();
        let mut input = Vec::new();
        let mut events = vec![status("steering"), self.queue.pending_event()];
        for message in &messages {
            let (items, notes, echo) = self.input_items(message);
            input.extend(items);
            events.extend(notes);
            events.push(echo);
        }
        let params = json!({"threadId": thread, "input": input, "expectedTurnId": turn});
        self.emit_all(events).await
            && self
                .request(Request::Plain("turn/steer"), "turn/steer", params)
                .await
    }

    pub(super) async fn interrupt(&mut self) -> bool {
        if !self.busy {
            return true;
        }
        self.approvals.take_all();
        match (self.thread.clone(), self.turn.clone()) {
            (Some(thread), Some(turn)) => {
                let params = json!({"threadId": thread, "turnId": turn});
                self.request(Request::Plain("turn/interrupt"), "turn/interrupt", params)
                    .await
            }
            _ => {
                self.interrupt_asked = true;
                true
            }
        }
    }

    async fn approve(&mut self, answer: Answer, hunks: Option<Vec<String>>) -> bool {
        let pending = match self.approvals.take(&answer.call_id) {
            Taken::Open(p) => p,
            Taken::AlreadyAnswered => return true,
            Taken::Unknown => return self.emit(no_open_approval(&answer.call_id)).await,
        };
        // Codex applies a change whole: a choice of some hunks only cannot be honoured.
        if let (Kind::File { hunks: all }, Some(chosen), true) =
            (&pending.kind, &hunks, answer.allow)
            && all.iter().any(|h| !chosen.contains(h))
        {
            let card = event("approval_request", pending.shown.clone());
            self.approvals.open(answer.call_id.clone(), pending);
            return self
                .emit(error(
                    "Codex applies a file change whole: allow it without hunks, or with all of them",
                ))
                .await
                && self.emit(card).await;
        }
        let result = answer_body(&pending.kind, &answer);
        match result {
            Ok(result) => self.reply(pending.id, result).await,
            Err(message) => {
                self.write(
                    &json!({"id": pending.id, "error": {"code": -32000, "message": message}}),
                )
                .await
            }
        }
    }

    async fn set_mode(&mut self, mode: ApprovalMode) -> bool {
        if mode == ApprovalMode::FullAccess {
            // Full access would not have asked: the open prompts are allowed.
            for (call, pending) in self.approvals.take_all() {
                let allow = Answer {
                    call_id: call,
                    allow: true,
                    always: false,
                    always_scope: None,
                    answers: None,
                };
                if let Ok(result) = answer_body(&pending.kind, &allow) {
                    self.reply(pending.id, result).await;
                }
            }
        }
        if self.busy {
            self.next_mode = Some(mode);
            return self
                .emit(event(
                    "approval_mode_pending",
                    json!({ "mode": mode.as_str() }),
                ))
                .await;
        }
        self.mode = mode;
        self.emit_all(vec![
            status(&format!("approval mode: {}", mode.as_str())),
            event("approval_mode", json!({ "mode": mode.as_str() })),
        ])
        .await
    }

    async fn command(&mut self, text: String) -> bool {
        let mut words = text.split_whitespace();
        let word = words.next().unwrap_or("");
        let rest: Vec<&str> = words.collect();
        if JUCODE_ONLY.contains(&word) {
            return self
                .emit(error(format!(
                    "{word} is only available in jucode sessions"
                )))
                .await;
        }
        match word {
            "/model" if rest.is_empty() => {
                self.request(Request::ModelList, "model/list", json!({}))
                    .await
            }
            "/model" => {
                // Codex takes the model per turn, like the mode.
                self.model = Some(rest.join(" "));
                let status = self.model_status();
                self.sink.state(status).await
            }
            "/fast" | "/thinking" => {
                let current = if word == "/fast" {
                    self.fast_on()
                } else {
                    self.thinking_on()
                };
                let on = match rest.as_slice() {
                    [] => !current,
                    ["on"] => true,
                    ["off"] => false,
                    _ => {
                        return self.emit(error(format!("usage: {word} [on|off]"))).await;
                    }
                };
                // Both go into the next turn/start (Codex keeps them for later turns).
                if word == "/fast" {
                    self.fast = Some(on);
                } else {
                    self.thinking = Some(on);
                }
                let status = self.model_status();
                self.sink.answer(status).await
            }
            "/login" => {
                let params = json!({"type": "chatgptDeviceCode"});
                self.request(Request::Login, "account/login/start", params)
                    .await
            }
            "/effort" | "/btw" => {
                self.emit(error(format!(
                    "{word} is not supported by this daemon's Codex adapter yet"
                )))
                .await
            }
            _ => {
                self.user_message(Message {
                    content: text,
                    images: Vec::new(),
                })
                .await
            }
        }
    }

    pub(super) fn model_status(&self) -> Event {
        let fast = self.fast_on();
        event(
            "model_status",
            json!({
                "provider": self.provider.as_deref().unwrap_or("openai"),
                "model": self.model,
                "reasoning_effort": self.effort,
                "context_window": null,
                "context_limit": null,
                "max_output_tokens": null,
                "reasoning_efforts": [],
                "state": "ready",
                "fast": fast,
                "fast_state": if fast { "on" } else { "off" },
                "thinking_summaries": self.thinking_on(),
            }),
        )
    }

    /// Fast mode: as the user set it, else as Codex's own config starts the thread.
    fn fast_on(&self) -> bool {
        self.fast
            .unwrap_or_else(|| self.service_tier.as_deref() == Some(FAST_TIER))
    }

    /// Reasoning summaries are shown unless the user turned them off.
    fn thinking_on(&self) -> bool {
        self.thinking.unwrap_or(true)
    }
}
