//! What the agent writes: answers to our requests, `session/update` notifications as events,
//! and the agent's own requests (permissions, `fs/*`, `terminal/*`).

use super::*;

/// The largest file `fs/read_text_file` returns.
const READ_MAX: u64 = 16 * 1024 * 1024;

impl Acp {
    pub(super) async fn handle_frame(&mut self, frame: Value) -> bool {
        let method = frame
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        match (method, frame.get("id").cloned()) {
            (Some(method), Some(id)) => self.on_agent_request(&method, id, &frame["params"]).await,
            (Some(method), None) => {
                if method == "session/update" {
                    self.on_update(&frame["params"]["update"]).await
                } else {
                    true
                }
            }
            (None, Some(id)) => self.on_response(id, &frame).await,
            (None, None) => true,
        }
    }

    async fn on_response(&mut self, id: Value, frame: &Value) -> bool {
        let Some(kind) = id.as_u64().and_then(|id| self.requests.remove(&id)) else {
            return true;
        };
        if let Some(message) = crate::rpc_error(frame) {
            return match kind {
                Request::Initialize | Request::NewSession => {
                    self.sink
                        .exited(Some(format!(
                            "{} could not open a session: {message}",
                            self.label
                        )))
                        .await;
                    false
                }
                Request::Prompt => {
                    self.busy = false;
                    self.emit_all(vec![
                        error(format!("{}: {message}", self.label)),
                        status("ready"),
                    ])
                    .await
                        && self.next_queued().await
                }
                Request::SetMode(_) => self.emit(error(format!("{}: {message}", self.label))).await,
            };
        }
        let result = frame.get("result").cloned().unwrap_or(Value::Null);
        match kind {
            Request::Initialize => {
                self.image_prompts = result
                    .pointer("/agentCapabilities/promptCapabilities/image")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let version = result
                    .pointer("/agentInfo/version")
                    .cloned()
                    .unwrap_or(Value::Null);
                let startup = event(
                    "startup",
                    json!({"version": version, "session_id": null, "profile_dir": null, "config_path": null,
                           "cwd": self.cwd.display().to_string(), "model": null, "context_window": null}),
                );
                let cwd = self.cwd.display().to_string();
                self.sink.state(startup).await
                    && self
                        .request(
                            Request::NewSession,
                            "session/new",
                            json!({"cwd": cwd, "mcpServers": []}),
                        )
                        .await
            }
            Request::NewSession => {
                let Some(session) = result.get("sessionId").and_then(Value::as_str) else {
                    self.sink
                        .exited(Some(format!(
                            "{} answered session/new without a sessionId",
                            self.label
                        )))
                        .await;
                    return false;
                };
                self.agent_session = Some(session.to_string());
                self.modes = result
                    .pointer("/modes/availableModes")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_string))
                    .collect();
                let current = result
                    .pointer("/modes/currentModeId")
                    .and_then(Value::as_str);
                let wanted = mode_id(self.mode);
                // Start in the mode asked for when the agent has it (claude-agent-acp starts
                // in `auto`, where no prompt reaches the client).
                if current != Some(wanted) && self.modes.iter().any(|m| m == wanted) {
                    let params = json!({"sessionId": session, "modeId": wanted});
                    return self
                        .request(Request::SetMode(self.mode), "session/set_mode", params)
                        .await;
                }
                self.session_ready().await
            }
            Request::SetMode(mode) => {
                self.mode = mode;
                if self.opening {
                    return self.session_ready().await;
                }
                self.emit(event("approval_mode", json!({ "mode": mode.as_str() })))
                    .await
            }
            Request::Prompt => {
                self.busy = false;
                self.in_message = false;
                let mut events = Vec::new();
                // `usage` is optional in ACP: without it the event carries no counters
                // (absent, not zero).
                let counters = match result.get("usage") {
                    Some(usage) if usage.is_object() => {
                        let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
                        json!({"input_tokens": n("inputTokens"), "cached_input_tokens": n("cachedReadTokens"),
                               "cache_write_input_tokens": n("cachedWriteTokens"),
                               "output_tokens": n("outputTokens"), "reasoning_tokens": n("thoughtTokens")})
                    }
                    _ => json!({}),
                };
                events.push(event("usage", counters));
                match result
                    .get("stopReason")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                {
                    "cancelled" => {
                        events.push(info("request interrupted"));
                        events.push(status("interrupted"));
                    }
                    "refusal" => events.push(error(format!("{} refused the request", self.label))),
                    "max_tokens" | "max_turn_requests" => events.push(info(format!(
                        "{} stopped: {}",
                        self.label, result["stopReason"]
                    ))),
                    _ => {}
                }
                events.push(status("ready"));
                self.approvals.take_all();
                self.emit_all(events).await && self.next_queued().await
            }
        }
    }

    async fn session_ready(&mut self) -> bool {
        self.opening = false;
        let mode = event("approval_mode", json!({ "mode": self.mode.as_str() }));
        self.sink.state(mode).await && self.next_queued().await
    }

    async fn next_queued(&mut self) -> bool {
        if self.busy {
            return true;
        }
        match self.queue.pop() {
            Some((message, pending)) => self.emit(pending).await && self.start_turn(message).await,
            None => true,
        }
    }

    async fn on_update(&mut self, update: &Value) -> bool {
        let kind = update
            .get("sessionUpdate")
            .and_then(Value::as_str)
            .unwrap_or("");
        match kind {
            "agent_message_chunk" => {
                let text = update
                    .pointer("/content/text")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let mut events = Vec::new();
                if !self.in_message {
                    self.in_message = true;
                    events.push(event("assistant_start", json!({})));
                }
                events.push(event("assistant_delta", json!({ "delta": text })));
                self.emit_all(events).await
            }
            "agent_thought_chunk" => {
                let text = update
                    .pointer("/content/text")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                self.emit(event("reasoning_delta", json!({ "delta": text })))
                    .await
            }
            "tool_call" => {
                self.in_message = false;
                let id = update
                    .get("toolCallId")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let name = tool_name(update);
                self.tools.insert(id.clone(), name.clone());
                if let Some(terminal) = embedded_terminal(update) {
                    self.call_terminals.insert(id.clone(), terminal);
                }
                let mut events = vec![event("tool_start", json!({"call_id": id, "name": name}))];
                if let Some(done) = self.finished(&id, update) {
                    events.push(done);
                }
                self.emit_all(events).await
            }
            "tool_call_update" => {
                let id = update
                    .get("toolCallId")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                if let Some(terminal) = embedded_terminal(update) {
                    self.call_terminals.insert(id.clone(), terminal);
                }
                if let Some(done) = self.finished(&id, update) {
                    self.approvals.withdraw(&id);
                    return self.emit(done).await;
                }
                true
            }
            "plan" => {
                let plan: Vec<Value> = update
                    .get("entries")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|e| json!({"step": e.get("content").map(text_of).unwrap_or_default(), "status": e.get("status")}))
                    .collect();
                self.sink
                    .state(event("plan", json!({ "plan": plan })))
                    .await
            }
            "available_commands_update" => {
                let commands: Vec<Value> = update
                    .get("availableCommands")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        json!({"command": format!("/{}", c.get("name").map(text_of).unwrap_or_default()),
                               "marker": "acp", "args": c.pointer("/input/hint").map(text_of).unwrap_or_default(),
                               "description": c.get("description").map(text_of).unwrap_or_default()})
                    })
                    .collect();
                self.sink
                    .state(event("command_list", json!({ "commands": commands })))
                    .await
            }
            _ => true,
        }
    }

    /// A `tool_output` when a tool call update says the call is done.
    fn finished(&mut self, id: &str, update: &Value) -> Option<Event> {
        let status = update.get("status").and_then(Value::as_str)?;
        if status != "completed" && status != "failed" {
            return None;
        }
        let name = self.tools.remove(id).unwrap_or_else(|| "tool".into());
        // A call the user refused shows as the Codex adapter shows a declined one.
        if self.denied.remove(id) && status == "failed" {
            return Some(event(
                "tool_output",
                json!({"call_id": id, "name": name, "output": "declined by the user", "is_error": true}),
            ));
        }
        let output = update
            .get("rawOutput")
            .filter(|o| !o.is_null())
            .map(text_of)
            .or_else(|| {
                update
                    .get("content")
                    .and_then(Value::as_array)
                    .map(|blocks| {
                        blocks
                            .iter()
                            .filter_map(|b| b.pointer("/content/text").and_then(Value::as_str))
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
            })
            .filter(|o| !o.is_empty())
            .or_else(|| self.terminal_output(id, update))
            .unwrap_or_default();
        Some(event(
            "tool_output",
            json!({"call_id": id, "name": name, "output": truncate(&output, 100_000), "is_error": status == "failed"}),
        ))
    }

    async fn on_agent_request(&mut self, method: &str, id: Value, params: &Value) -> bool {
        match method {
            "session/request_permission" => {
                let call = &params["toolCall"];
                let call_id = call.get("toolCallId").and_then(Value::as_str).unwrap_or("").to_string();
                let options = params.get("options").and_then(Value::as_array).cloned().unwrap_or_default();
                let always = options.iter().any(|o| o.get("kind").and_then(Value::as_str) == Some("allow_always"));
                let name = self.tools.get(&call_id).cloned().unwrap_or_else(|| tool_name(call));
                let summary = call
                    .get("title")
                    .map(text_of)
                    .unwrap_or_else(|| truncate(&call.get("rawInput").map(Value::to_string).unwrap_or_default(), 400));
                self.approvals.open(call_id.clone(), Permission { id, options });
                let scopes = if always { json!(["session"]) } else { json!([]) };
                self.emit(event(
                    "approval_request",
                    json!({"call_id": call_id, "name": name, "summary": summary, "subagent_id": null,
                           "hunks": null, "scopes": scopes}),
                ))
                .await
            }
            "fs/read_text_file" => {
                let result = self.read_file(params);
                self.answer(id, result).await
            }
            "fs/write_text_file" => {
                let result = self.write_file(params);
                self.answer(id, result).await
            }
            m if m.starts_with("terminal/") => match self.terminals.request(m, &id, params) {
                Some(result) => self.answer(id, result).await,
                None => true,
            },
            _ => {
                self.write(json!({"id": id, "error": {"code": -32601, "message": format!("{method} is not supported by this client")}}))
                    .await
            }
        }
    }

    /// The output of a terminal a finished tool call embeds, when it said nothing else.
    fn terminal_output(&mut self, id: &str, update: &Value) -> Option<String> {
        let shown = self.call_terminals.remove(id);
        let terminal = embedded_terminal(update).or(shown)?;
        self.terminals.output_of(&terminal)
    }

    async fn answer(&mut self, id: Value, result: Result<Value, String>) -> bool {
        match result {
            Ok(result) => self.write(json!({"id": id, "result": result})).await,
            Err(message) => {
                self.write(json!({"id": id, "error": {"code": -32000, "message": message}}))
                    .await
            }
        }
    }

    fn read_file(&self, params: &Value) -> Result<Value, String> {
        let path = params
            .get("path")
            .and_then(Value::as_str)
            .ok_or("path is required")?;
        let resolved = inside(Path::new(path), std::slice::from_ref(&self.cwd))
            .ok_or_else(|| format!("{path} is outside the session's directory"))?;
        let meta = std::fs::metadata(&resolved).map_err(|e| format!("{path}: {e}"))?;
        if meta.len() > READ_MAX {
            return Err(format!("{path} is larger than {READ_MAX} bytes"));
        }
        let text = std::fs::read_to_string(&resolved).map_err(|e| format!("{path}: {e}"))?;
        let line = params
            .get("line")
            .and_then(Value::as_u64)
            .unwrap_or(1)
            .max(1);
        let limit = params.get("limit").and_then(Value::as_u64);
        let content = if line == 1 && limit.is_none() {
            text
        } else {
            let skip = usize::try_from(line - 1).unwrap_or(usize::MAX);
            let take = limit
                .and_then(|l| usize::try_from(l).ok())
                .unwrap_or(usize::MAX);
            text.split_inclusive('\n').skip(skip).take(take).collect()
        };
        Ok(json!({ "content": content }))
    }

    fn write_file(&self, params: &Value) -> Result<Value, String> {
        let path = params
            .get("path")
            .and_then(Value::as_str)
            .ok_or("path is required")?;
        let content = params
            .get("content")
            .and_then(Value::as_str)
            .ok_or("content is required")?;
        let resolved = inside(Path::new(path), std::slice::from_ref(&self.cwd))
            .ok_or_else(|| format!("{path} is outside the session's directory"))?;
        std::fs::write(&resolved, content).map_err(|e| format!("{path}: {e}"))?;
        Ok(Value::Null)
    }
}
