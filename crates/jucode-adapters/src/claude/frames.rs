//! Stream-json frames and control traffic from the CLI into serve-v2 events.

use super::*;

impl Claude {
    pub(super) async fn on_frame(
        &mut self,
        frame: Value,
        input: &mut mpsc::UnboundedReceiver<Input>,
    ) -> bool {
        let kind = frame.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "control_response" => self.on_control_response(&frame["response"]).await,
            "control_request" => self.on_control_request(&frame).await,
            "control_cancel_request" => {
                if let Some(id) = frame.get("request_id").and_then(Value::as_str)
                    && let Some(call) = self.approvals.find(|p| p.request_id == id)
                {
                    let call = call.to_string();
                    self.approvals.withdraw(&call);
                }
                if let Some(id) = frame.get("request_id").and_then(Value::as_str)
                    && let Some(call) = self.elicitations.find(|e| e.request_id == id)
                {
                    let call = call.to_string();
                    self.elicitations.withdraw(&call);
                }
                true
            }
            "system" => self.on_system(&frame).await,
            "stream_event" => self.on_stream(&frame).await,
            "assistant" => self.on_assistant(&frame).await,
            "user" => self.on_user(&frame).await,
            "result" => self.on_result(&frame, input).await,
            "prompt_suggestion" => match frame.get("suggestion").and_then(Value::as_str) {
                Some(text) if !text.trim().is_empty() => {
                    self.emit(event("prompt_suggestion", json!({ "text": text })))
                        .await
                }
                _ => true,
            },
            "rate_limit_event" => {
                let fields = frame.get("rate_limit_info").cloned().unwrap_or(json!({}));
                self.sink.state(event("rate_limit", fields)).await
            }
            other => {
                tracing::debug!("claude frame not translated: {other}");
                true
            }
        }
    }

    async fn on_control_response(&mut self, response: &Value) -> bool {
        let Some(id) = response.get("request_id").and_then(Value::as_str) else {
            return true;
        };
        let Some(request) = self.requests.remove(id) else {
            return true;
        };
        if response.get("subtype").and_then(Value::as_str) == Some("error") {
            let message = response.get("error").map(text_of).unwrap_or_default();
            match &request {
                Request::TaskOutput(task) => {
                    let e = event("task_output", json!({"task_id": task, "error": message}));
                    return self.emit(e).await;
                }
                Request::SideQuestion(question) => {
                    return self.emit(extras::side_error(question, &message)).await;
                }
                Request::Flags(settings) if settings.get("fastMode").is_some() => {
                    let status = self.model_status();
                    return self
                        .emit(info(format!("Claude Code refused fast mode: {message}")))
                        .await
                        && self.sink.answer(status).await;
                }
                _ => {}
            }
            let what = match &request {
                Request::Initialize => "initialize",
                Request::McpStatus => "mcp_status",
                Request::SetModel(_) => "set_model",
                Request::SetMode(_) => "set_permission_mode",
                Request::Plain(name) | Request::McpChange(name) => name,
                Request::TaskOutput(_) => "get_task_output",
                Request::PermissionRules => "list_permission_rules",
                Request::ContextUsage => "get_context_usage",
                Request::SideQuestion(_) => "side_question",
                Request::Flags(_) => "apply_flag_settings",
                Request::GetSettings => "get_settings",
            };
            return self
                .emit(error(format!("Claude Code refused {what}: {message}")))
                .await;
        }
        let body = response.get("response").cloned().unwrap_or(Value::Null);
        match request {
            Request::Initialize => {
                // Questions an MCP server asked before we (re)attached.
                let pending = response
                    .get("pending_elicitation_requests")
                    .or(body.get("pending_elicitation_requests"))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for frame in &pending {
                    let request = &frame["request"];
                    if request.get("subtype").and_then(Value::as_str) == Some("elicitation")
                        && let Some(id) = frame.get("request_id").and_then(Value::as_str)
                        && !self.elicitation(id, request).await
                    {
                        return false;
                    }
                }
                if let Some(models) = body.get("models").and_then(Value::as_array) {
                    self.models = models.clone();
                }
                if let Some(state) = body.get("fast_mode_state").and_then(Value::as_str) {
                    self.fast_state = Some(state.to_string());
                }
                self.fast_disabled_reason = body
                    .get("fast_mode_disabled_reason")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                if let Some(version) = body.get("claude_code_version").and_then(Value::as_str) {
                    self.version = Some(version.to_string());
                }
                let commands: Vec<Value> = body
                    .get("commands")
                    .and_then(Value::as_array)
                    .map(|c| c.iter().map(command_entry).collect())
                    .unwrap_or_default();
                let list = event("command_list", json!({ "commands": commands }));
                let model = self.model_status();
                let startup = self.startup_event();
                if !(self.sink.state(startup).await
                    && self.sink.state(model).await
                    && self.sink.state(list).await)
                {
                    return false;
                }
                // The session's own settings, again after a restart.
                match self.flags.settings() {
                    Some(settings) => self.apply_flags(settings).await,
                    None => true,
                }
            }
            Request::TaskOutput(task) => self.emit(extras::task_output(&task, &body)).await,
            Request::PermissionRules => self.emit(extras::permission_rules(&body)).await,
            Request::ContextUsage => self.emit(extras::context_breakdown(&body)).await,
            Request::SideQuestion(question) => {
                self.emit(extras::side_answer(&question, &body)).await
            }
            Request::Flags(settings) => self.flags_applied(&settings).await,
            Request::GetSettings => {
                let applied = extras::applied(&body);
                if let Some(effort) = applied.effort {
                    self.options.effort = Some(effort);
                }
                if applied.ultracode.is_some() {
                    self.flags.ultracode = applied.ultracode;
                }
                if applied.ultracode_available.is_some() {
                    self.ultracode_available = applied.ultracode_available;
                }
                if let Some(on) = applied.thinking_summaries {
                    self.flags.thinking = Some(on);
                }
                let status = self.model_status();
                self.sink.answer(status).await
            }
            Request::McpStatus => {
                let servers = body.get("mcpServers").cloned().unwrap_or(json!([]));
                let servers: Vec<Value> = servers
                    .as_array()
                    .map(|s| s.iter().map(mcp_entry).collect())
                    .unwrap_or_default();
                // Asked for: always send, even when unchanged.
                let list = event("mcp_servers", json!({ "servers": servers }));
                self.sink.emit(list.clone()).await && self.sink.state(list).await
            }
            Request::SetModel(model) => {
                self.model = model;
                let status = self.model_status();
                self.sink.state(status).await
            }
            Request::SetMode(mode) => {
                self.mode = mode;
                let events = vec![
                    status(&format!("approval mode: {}", mode.as_str())),
                    event("approval_mode", json!({ "mode": mode.as_str() })),
                ];
                self.emit_all(events).await
            }
            Request::McpChange(_) => {
                self.control(Request::McpStatus, json!({"subtype": "mcp_status"}))
                    .await
            }
            Request::Plain(_) => true,
        }
    }

    async fn on_control_request(&mut self, frame: &Value) -> bool {
        let id = frame
            .get("request_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let request = &frame["request"];
        let subtype = request.get("subtype").and_then(Value::as_str).unwrap_or("");
        if subtype == "elicitation" {
            return self.elicitation(&id, request).await;
        }
        if subtype != "can_use_tool" {
            let _ = self
                .write(&json!({
                    "type": "control_response",
                    "response": {"subtype": "error", "request_id": id,
                                 "error": format!("{subtype} is not supported by this client")},
                }))
                .await;
            return true;
        }
        let tool = request
            .get("tool_name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let input = request.get("input").cloned().unwrap_or(json!({}));
        let call_id = request
            .get("tool_use_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| id.clone());
        if self.mode == ApprovalMode::FullAccess {
            let _ = self
                .respond(&id, json!({"behavior": "allow", "updatedInput": input}))
                .await;
            return true;
        }
        let name = claude_tool_name(tool);
        let summary = summarize(tool, &input, request);
        let mut roots = vec![self.cwd.clone()];
        roots.extend(self.extra_dirs.iter().cloned());
        let edit = crate::claude_hunks::for_tool(tool, &input, &self.cwd, &roots);
        let hunks = edit
            .as_ref()
            .map(|e| serde_json::to_value(&e.hunks).unwrap_or(Value::Null))
            .unwrap_or(Value::Null);
        let suggestions = request
            .get("permission_suggestions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let shown = json!({
            "call_id": call_id,
            "name": name,
            "summary": summary,
            "subagent_id": request.get("agent_id").and_then(Value::as_str),
            "hunks": hunks,
            "scopes": ["session", "project", "user"],
        });
        self.approvals.open(
            call_id.clone(),
            Permission {
                request_id: id,
                tool_name: tool.to_string(),
                input,
                suggestions,
                edit,
                shown: shown.clone(),
            },
        );
        let card = event("approval_request", shown);
        self.emit(card).await
    }

    async fn on_system(&mut self, frame: &Value) -> bool {
        match frame.get("subtype").and_then(Value::as_str).unwrap_or("") {
            "init" => {
                if let Some(model) = frame.get("model").and_then(Value::as_str) {
                    self.model = Some(model.to_string());
                }
                if let Some(version) = frame.get("claude_code_version").and_then(Value::as_str) {
                    self.version = Some(version.to_string());
                }
                if let Some(state) = frame.get("fast_mode_state").and_then(Value::as_str) {
                    self.fast_state = Some(state.to_string());
                }
                if let Some(reason) = frame
                    .get("fast_mode_disabled_reason")
                    .and_then(Value::as_str)
                {
                    self.fast_disabled_reason = Some(reason.to_string());
                }
                let tools: Vec<&str> = frame
                    .get("tools")
                    .and_then(Value::as_array)
                    .map(|t| t.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let servers: Vec<Value> = frame
                    .get("mcp_servers")
                    .and_then(Value::as_array)
                    .map(|s| {
                        s.iter()
                            .map(|server| {
                                let mut entry = mcp_entry(server);
                                let name = server.get("name").and_then(Value::as_str).unwrap_or("");
                                let prefix = format!("mcp__{name}__");
                                let own: Vec<Value> = tools
                                    .iter()
                                    .filter_map(|t| t.strip_prefix(prefix.as_str()))
                                    .map(|t| json!({"name": t, "description": ""}))
                                    .collect();
                                entry["tools"] = Value::Array(own);
                                entry
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let startup = self.startup_event();
                let model = self.model_status();
                let mcp = event("mcp_servers", json!({ "servers": servers }));
                self.sink.state(startup).await
                    && self.sink.state(model).await
                    && self.sink.state(mcp).await
            }
            "session_title_changed" => match frame.get("title").and_then(Value::as_str) {
                Some(title) if !title.trim().is_empty() => {
                    self.emit(event("session_title", json!({ "title": title })))
                        .await
                }
                _ => true,
            },
            "status" if frame.get("status").and_then(Value::as_str) == Some("requesting") => {
                self.emit(event("connecting", json!({}))).await
            }
            "model_refusal_fallback" => self.model_fallback(frame).await,
            "elicitation_complete" => {
                let id = frame.get("elicitation_id").and_then(Value::as_str);
                let open = id.and_then(|id| {
                    self.elicitations
                        .find(|e| e.elicitation_id.as_deref() == Some(id))
                        .map(str::to_string)
                });
                // The server has what it asked for: a card still open is answered for the user.
                if let Some(call) = open
                    && let Some(e) = self.elicitations.withdraw(&call)
                    && !self
                        .respond(&e.request_id, json!({"action": "accept"}))
                        .await
                {
                    return false;
                }
                let server = frame
                    .get("mcp_server_name")
                    .and_then(Value::as_str)
                    .unwrap_or("an MCP server");
                self.emit(info(format!(
                    "{server}: the request in the browser is complete"
                )))
                .await
            }
            "api_retry" => {
                let fields = json!({
                    "attempt": frame.get("attempt"),
                    "max_attempts": frame.get("max_retries").or(frame.get("max_attempts")),
                    "delay_ms": frame.get("retry_delay_ms").or(frame.get("delay_ms")),
                    "reason": frame.get("error").map(text_of),
                });
                self.emit(event("retrying", fields)).await
            }
            "task_started" => {
                if self.runs.task_started(frame) && !self.runs_changed().await {
                    return false;
                }
                let id = frame.get("task_id").and_then(Value::as_str).unwrap_or("");
                self.tasks.retain(|t| t["id"] != id);
                self.tasks.push(json!({
                    "id": id,
                    "kind": frame.get("task_type").or(frame.get("kind")).and_then(Value::as_str).unwrap_or("task"),
                    "description": frame.get("description").and_then(Value::as_str).unwrap_or(""),
                }));
                let tasks = event("background_tasks", json!({ "tasks": self.tasks }));
                self.emit(tasks).await
            }
            "task_progress" | "task_updated" => {
                let changed =
                    if frame.get("subtype").and_then(Value::as_str) == Some("task_progress") {
                        self.runs.task_progress(frame)
                    } else {
                        self.runs.task_updated(frame)
                    };
                if changed && !self.runs_changed().await {
                    return false;
                }
                let fields = json!({
                    "task_id": frame.get("task_id"),
                    "message": frame.get("description").or(frame.get("message")).or(frame.get("summary")).map(text_of),
                });
                self.emit(event("task_progress", fields)).await
            }
            "task_notification" => {
                if self.runs.task_notification(frame) && !self.runs_changed().await {
                    return false;
                }
                let id = frame
                    .get("task_id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let kind = self
                    .tasks
                    .iter()
                    .find(|t| t["id"] == id.as_str())
                    .and_then(|t| t["kind"].as_str())
                    .unwrap_or("task")
                    .to_string();
                self.tasks.retain(|t| t["id"] != id.as_str());
                let events = vec![
                    event("background_tasks", json!({ "tasks": self.tasks })),
                    event(
                        "task_done",
                        json!({
                            "task_id": id,
                            "kind": kind,
                            "status": frame.get("status"),
                            "summary": frame.get("summary").map(text_of),
                        }),
                    ),
                ];
                self.emit_all(events).await
            }
            _ => true,
        }
    }

    async fn on_stream(&mut self, frame: &Value) -> bool {
        let parent = frame.get("parent_tool_use_id").and_then(Value::as_str);
        let ev = &frame["event"];
        match ev.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => {
                if parent.is_none()
                    && let Some(id) = ev.pointer("/message/id").and_then(Value::as_str)
                {
                    self.streamed.insert(id.to_string());
                }
                true
            }
            "content_block_start" => {
                let block = &ev["content_block"];
                match block.get("type").and_then(Value::as_str).unwrap_or("") {
                    "text" if parent.is_none() => {
                        self.emit(event("assistant_start", json!({}))).await
                    }
                    "thinking" if parent.is_none() && self.thinking_shown() => {
                        self.emit(event("thinking_start", json!({}))).await
                    }
                    "tool_use" => self.tool_start(block, parent).await,
                    _ => true,
                }
            }
            "content_block_delta" if parent.is_none() => {
                let delta = &ev["delta"];
                match delta.get("type").and_then(Value::as_str).unwrap_or("") {
                    "text_delta" => {
                        let text = delta.get("text").and_then(Value::as_str).unwrap_or("");
                        self.emit(event("assistant_delta", json!({ "delta": text })))
                            .await
                    }
                    "thinking_delta" if self.thinking_shown() => {
                        let text = delta.get("thinking").and_then(Value::as_str).unwrap_or("");
                        self.emit(event("reasoning_delta", json!({ "delta": text })))
                            .await
                    }
                    _ => true,
                }
            }
            _ => true,
        }
    }

    /// `system/model_refusal_fallback`: the model refused and the turn went to another. With
    /// scope `session` (or none, older CLIs) the session's model is now the fallback.
    async fn model_fallback(&mut self, frame: &Value) -> bool {
        let field = |snake: &str, camel: &str| {
            frame
                .get(snake)
                .or(frame.get(camel))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let from = field("original_model", "originalModel");
        let to = field("fallback_model", "fallbackModel");
        let reason = field("api_refusal_category", "apiRefusalCategory")
            .or_else(|| field("trigger", "trigger"))
            .unwrap_or_else(|| "refusal".into());
        let scope = field("scope", "scope").unwrap_or_else(|| "session".into());
        let fallback = event(
            "model_fallback",
            json!({"from": from, "to": to, "reason": reason, "scope": scope,
                   "message": frame.get("content").map(text_of)}),
        );
        if !self.emit(fallback).await {
            return false;
        }
        if scope == "session"
            && let Some(to) = to
        {
            self.model = Some(to);
            let status = self.model_status();
            return self.sink.state(status).await;
        }
        true
    }

    /// Thinking summaries turned off (`/thinking off`) are not shown even if some still come.
    fn thinking_shown(&self) -> bool {
        self.flags.thinking != Some(false)
    }

    async fn tool_start(&mut self, block: &Value, parent: Option<&str>) -> bool {
        let Some(id) = block.get("id").and_then(Value::as_str) else {
            return true;
        };
        if !self.started_tools.insert(id.to_string()) {
            return true;
        }
        let tool = block.get("name").and_then(Value::as_str).unwrap_or("");
        let name = claude_tool_name(tool);
        self.tools.insert(id.to_string(), name.clone());
        let mut fields = json!({"call_id": id, "name": name});
        if let Some(parent) = parent {
            // The subagent's own id (as in subagent_lifecycle), its Task call's until named.
            let agent = self.runs.agent_of_call(parent).unwrap_or(parent);
            fields["subagent"] = json!(agent);
        }
        self.emit(event("tool_start", fields)).await
    }

    async fn on_assistant(&mut self, frame: &Value) -> bool {
        let parent = frame.get("parent_tool_use_id").and_then(Value::as_str);
        let message = &frame["message"];
        let streamed = message
            .get("id")
            .and_then(Value::as_str)
            .is_some_and(|id| self.streamed.contains(id));
        let blocks = message
            .get("content")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut runs_changed = false;
        for block in &blocks {
            if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                runs_changed |= match parent {
                    Some(parent) => self.runs.subagent_tool_call(parent),
                    None => self.runs.tool_use(
                        block.get("id").and_then(Value::as_str).unwrap_or(""),
                        block.get("name").and_then(Value::as_str).unwrap_or(""),
                        block.get("input").unwrap_or(&Value::Null),
                    ),
                };
            }
            let ok = match block.get("type").and_then(Value::as_str).unwrap_or("") {
                "tool_use" => self.tool_start(block, parent).await,
                // Without partial messages the text comes only here.
                "text" if parent.is_none() && !streamed => {
                    let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                    self.emit(event("assistant_start", json!({}))).await
                        && self
                            .emit(event("assistant_delta", json!({ "delta": text })))
                            .await
                }
                "thinking" if parent.is_none() && !streamed && self.thinking_shown() => {
                    let text = block.get("thinking").and_then(Value::as_str).unwrap_or("");
                    self.emit(event("reasoning_delta", json!({ "delta": text })))
                        .await
                }
                _ => true,
            };
            if !ok {
                return false;
            }
        }
        if runs_changed && !self.runs_changed().await {
            return false;
        }
        if let Some(kind) = frame.get("error").and_then(Value::as_str) {
            return self.emit(error(format!("Claude Code: {kind}"))).await;
        }
        true
    }

    async fn on_user(&mut self, frame: &Value) -> bool {
        let Some(blocks) = frame.pointer("/message/content").and_then(Value::as_array) else {
            return true;
        };
        for block in blocks.clone() {
            if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                continue;
            }
            let id = block
                .get("tool_use_id")
                .and_then(Value::as_str)
                .unwrap_or("");
            let name = self.tools.get(id).cloned().unwrap_or_else(|| "tool".into());
            self.approvals.withdraw(id);
            let text = text_of(block.get("content").unwrap_or(&Value::Null));
            let is_error = block
                .get("is_error")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let ended_run = self.runs.tool_result(
                id,
                is_error,
                &text,
                frame.get("tool_use_result").unwrap_or(&Value::Null),
            );
            let output = json!({
                "call_id": id,
                "name": name,
                "output": text,
                "is_error": is_error,
            });
            if !self.emit(event("tool_output", output)).await {
                return false;
            }
            if ended_run && !self.runs_changed().await {
                return false;
            }
        }
        true
    }

    async fn on_result(
        &mut self,
        frame: &Value,
        input: &mut mpsc::UnboundedReceiver<Input>,
    ) -> bool {
        self.conversation_saved = true;
        let usage = &frame["usage"];
        let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        let cached = n(usage, "cache_read_input_tokens");
        let input_tokens =
            n(usage, "input_tokens") + n(usage, "cache_creation_input_tokens") + cached;
        let mut events = vec![event(
            "usage",
            json!({
                "input_tokens": input_tokens,
                "cached_input_tokens": cached,
                "output_tokens": n(usage, "output_tokens"),
                "reasoning_tokens": usage.pointer("/output_tokens_details/thinking_tokens").and_then(Value::as_u64).unwrap_or(0),
            }),
        )];
        if let Some(state) = frame.get("fast_mode_state").and_then(Value::as_str) {
            self.fast_state = Some(state.to_string());
        }
        if let Some(models) = frame.get("modelUsage").and_then(Value::as_object)
            && let Some(first) = models.values().next()
        {
            self.context_window = first.get("contextWindow").and_then(Value::as_u64);
            self.max_output_tokens = first.get("maxOutputTokens").and_then(Value::as_u64);
        }
        let reason = frame
            .get("terminal_reason")
            .and_then(Value::as_str)
            .unwrap_or("");
        let subtype = frame.get("subtype").and_then(Value::as_str).unwrap_or("");
        if reason.starts_with("aborted") {
            events.push(info("request interrupted"));
            events.push(status("interrupted"));
        } else if subtype != "success"
            || frame.get("is_error").and_then(Value::as_bool) == Some(true)
        {
            let message = frame
                .get("errors")
                .filter(|e| e.as_array().is_some_and(|a| !a.is_empty()))
                .or(frame.get("result"))
                .map(text_of)
                .unwrap_or_else(|| subtype.to_string());
            events.push(error(format!("Claude Code: {}", truncate(&message, 2000))));
        }
        events.push(status("ready"));
        self.busy = false;
        self.approvals.take_all();
        let model = self.model_status();
        if !self.emit_all(events).await || !self.sink.state(model).await {
            return false;
        }
        if let Some(mode) = self.pending_mode {
            return self.restart(mode, input).await;
        }
        if self.gateway.pending {
            return self.restart(self.mode, input).await;
        }
        self.next_queued().await
    }
}
