//! Client ops into stream-json frames and control requests.

use super::*;

impl Claude {
    /// Handles one op; `false` stops the session.
    pub(super) async fn on_op(
        &mut self,
        op: Object,
        input: &mut mpsc::UnboundedReceiver<Input>,
    ) -> bool {
        let name = op
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let result = match name.as_str() {
            "shutdown" => return false,
            "user_message" => match Message::from_op(&op) {
                Ok(message) => return self.user_message(message).await,
                Err(e) => Err(e),
            },
            "command" => {
                let text = op.get("input").and_then(Value::as_str).unwrap_or("").trim();
                return self.command(text.to_string()).await;
            }
            "interrupt" => return self.interrupt().await,
            "approve" => match (Answer::from_op(&op), hunk_choice(&op)) {
                (Ok(answer), Ok(hunks)) => return self.approve(answer, hunks).await,
                (Err(e), _) | (_, Err(e)) => Err(e),
            },
            "set_gateway" => return self.set_gateway(&op, input).await,
            "set_approval_mode" => match mode_of(&op) {
                Ok(mode) => return self.set_mode(mode, input).await,
                Err(e) => Err(e),
            },
            "mcp_list" => {
                return self
                    .control(Request::McpStatus, json!({"subtype": "mcp_status"}))
                    .await;
            }
            "mcp_toggle" => {
                let name = op.get("name").and_then(Value::as_str);
                let enabled = op.get("enabled").and_then(Value::as_bool);
                match (name, enabled) {
                    (Some(name), Some(enabled)) => {
                        let request = json!({"subtype": "mcp_toggle", "serverName": name, "enabled": enabled});
                        return self
                            .control(Request::McpChange("mcp_toggle"), request)
                            .await;
                    }
                    _ => Err("mcp_toggle requires name and enabled".to_string()),
                }
            }
            "mcp_reconnect" => match op.get("name").and_then(Value::as_str) {
                Some(name) => {
                    let request = json!({"subtype": "mcp_reconnect", "serverName": name});
                    return self
                        .control(Request::McpChange("mcp_reconnect"), request)
                        .await;
                }
                None => Err("mcp_reconnect requires name".to_string()),
            },
            "stop_task" => match op.get("task_id").and_then(Value::as_str) {
                Some(task) => {
                    let request = json!({"subtype": "stop_task", "task_id": task});
                    return self.control(Request::Plain("stop_task"), request).await;
                }
                None => Err("stop_task requires task_id".to_string()),
            },
            // The daemon's own bookkeeping: Claude sessions never defer and keep no snapshot.
            "set_attended" | "snapshot" | "tui" => Ok(()),
            "rename" => match op.get("title").and_then(Value::as_str).map(str::trim) {
                Some(title) if !title.is_empty() => {
                    let request = json!({"subtype": "rename_session", "title": title,
                                         "source": "host", "session_id": self.session});
                    return self
                        .control(Request::Plain("rename_session"), request)
                        .await;
                }
                _ => Err("rename requires a title".to_string()),
            },
            "steer" | "decide_action" | "mcp_set" | "mcp_remove" | "continue" => {
                Err(format!("{name} is not available in Claude Code sessions"))
            }
            "task_output" => match op.get("task_id").and_then(Value::as_str) {
                Some(task) => {
                    let request = json!({"subtype": "get_task_output", "task_id": task});
                    return self
                        .control(Request::TaskOutput(task.to_string()), request)
                        .await;
                }
                None => Err("task_output requires task_id".to_string()),
            },
            "permission_rules" => {
                let request = json!({"subtype": "list_permission_rules"});
                return self.control(Request::PermissionRules, request).await;
            }
            "context_usage" => {
                // `full` asks the API to count every row; the summary answers locally.
                let detail = match op.get("detail").and_then(Value::as_str) {
                    Some("full") => "full",
                    _ => "summary",
                };
                let request = json!({"subtype": "get_context_usage", "detail": detail});
                return self.control(Request::ContextUsage, request).await;
            }
            "agent_runs" => {
                self.runs.load_saved(&self.config_dir, &self.session);
                let runs = self.runs.event();
                return self.sink.answer(runs).await;
            }
            "subagent_transcript" => match op.get("agent_id").and_then(Value::as_str) {
                Some(id) => return self.subagent_transcript(id.to_string()).await,
                None => Err("subagent_transcript requires agent_id".to_string()),
            },
            _ => Err(format!("unknown op: {name}")),
        };
        match result {
            Ok(()) => true,
            Err(message) => self.emit(error(message)).await,
        }
    }

    /// One subagent's conversation, from the file Claude Code keeps for it. Only ids found in
    /// this session's subagents directory are read.
    async fn subagent_transcript(&mut self, id: String) -> bool {
        let file = claude_runs::valid_id(&id)
            .then(|| claude_runs::subagent_files(&self.config_dir, &self.session).remove(&id))
            .flatten();
        let fields = match file {
            Some(path) => json!({"agent_id": id, "items": claude_runs::subagent_items(&path)}),
            None => {
                json!({"agent_id": id, "error": format!("no saved subagent {id} in this session")})
            }
        };
        self.emit(event("subagent_transcript", fields)).await
    }

    /// Sends the subagents' lifecycle changes, then the agent trace if it changed.
    pub(super) async fn runs_changed(&mut self) -> bool {
        let lifecycle = self.runs.lifecycle();
        if !self.emit_all(lifecycle).await {
            return false;
        }
        let runs = self.runs.event();
        self.sink.state(runs).await
    }

    async fn user_message(&mut self, message: Message) -> bool {
        if self.busy || self.pending_mode.is_some() {
            let events = self.queue.push(message);
            return self.emit_all(events).await;
        }
        self.start_turn(message).await
    }

    async fn start_turn(&mut self, message: Message) -> bool {
        let mut blocks = vec![json!({"type": "text", "text": message.content})];
        let mut notes = Vec::new();
        let mut refused = Vec::new();
        for path in &message.images {
            let loaded = load_image(path, &self.image_roots);
            if loaded.is_ok() {
                blocks.push(json!({"type": "text", "text": image_note(path)}));
            }
            match loaded {
                Ok(Image::Inline { media_type, data }) => blocks.push(json!({
                    "type": "image",
                    "source": {"type": "base64", "media_type": media_type, "data": data},
                })),
                Ok(Image::Path(p)) => blocks.push(json!({
                    "type": "text",
                    "text": format!("[Image too large to attach: {} — read it with the Read tool]", p.display()),
                })),
                Err(e) => {
                    refused.push(path.clone());
                    notes.push(info(format!("image not attached: {e}")))
                }
            }
        }
        let content = if blocks.len() == 1 {
            Value::String(message.content.clone())
        } else {
            Value::Array(blocks)
        };
        if !self.emit_all(notes).await || !self.emit(message.event_without(&refused)).await {
            return false;
        }
        self.busy = true;
        self.write(&json!({
            "type": "user",
            "message": {"role": "user", "content": content},
            "parent_tool_use_id": null,
            "session_id": "default",
        }))
        .await;
        true
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
                let models: Vec<Value> = self
                    .models
                    .iter()
                    .map(|m| {
                        let value = m.get("value").and_then(Value::as_str).unwrap_or("");
                        json!({
                            "model": value,
                            "label": m.get("displayName"),
                            "active": self.model.as_deref().unwrap_or("default") == value,
                            "context_window": null,
                            "max_output_tokens": null,
                            "reasoning_efforts": m.get("supportedEffortLevels").cloned().unwrap_or(json!([])),
                        })
                    })
                    .collect();
                let view = event(
                    "model_view",
                    json!({"models": models, "active_effort": self.options.effort}),
                );
                self.emit(view).await
            }
            "/model" => {
                let model = rest.join(" ");
                let request = json!({"subtype": "set_model", "model": model});
                self.control(Request::SetModel(Some(model)), request).await
            }
            "/effort" => self.effort(&rest).await,
            "/fast" => match extras::switch(rest.first().copied(), self.fast_on()) {
                Ok(on) => self.apply_flags(json!({ "fastMode": on })).await,
                Err(e) => self.emit(error(format!("/fast: {e}"))).await,
            },
            "/thinking" => {
                let current = self.flags.thinking.unwrap_or(true);
                match extras::switch(rest.first().copied(), current) {
                    Ok(on) => {
                        self.apply_flags(json!({ "showThinkingSummaries": on }))
                            .await
                    }
                    Err(e) => self.emit(error(format!("/thinking: {e}"))).await,
                }
            }
            "/btw" => {
                let question = rest.join(" ");
                if question.is_empty() {
                    return self.emit(error("/btw requires a question")).await;
                }
                let request = json!({"subtype": "side_question", "question": question});
                self.control(Request::SideQuestion(question), request).await
            }
            // Claude Code's own slash commands go to it as a user message, as it expects.
            _ => {
                self.user_message(Message {
                    content: text,
                    images: Vec::new(),
                })
                .await
            }
        }
    }

    /// `/effort`, `/effort <level>` or `/effort ultracode [on|off]`.
    pub(super) async fn effort(&mut self, rest: &[&str]) -> bool {
        match rest {
            [] => {
                let status = self.model_status();
                self.sink.answer(status).await
            }
            ["ultracode", more @ ..] if more.len() <= 1 => {
                let current = self.flags.ultracode.unwrap_or(false);
                match extras::switch(more.first().copied(), current) {
                    Ok(on) => self.apply_flags(json!({ "ultracode": on })).await,
                    Err(e) => self.emit(error(format!("/effort ultracode: {e}"))).await,
                }
            }
            [level] if extras::EFFORT_LEVELS.contains(level) => {
                let mut settings = json!({ "effortLevel": level });
                // A new level alone would turn ultracode off; keep it as it is.
                if self.flags.ultracode == Some(true) {
                    settings["ultracode"] = json!(true);
                }
                self.apply_flags(settings).await
            }
            _ => {
                self.emit(error(format!(
                    "/effort takes one of {} or ultracode [on|off]",
                    extras::EFFORT_LEVELS.join(", ")
                )))
                .await
            }
        }
    }

    fn fast_on(&self) -> bool {
        self.fast_state.as_deref() == Some("on")
    }

    pub(super) async fn apply_flags(&mut self, settings: Value) -> bool {
        let request = json!({"subtype": "apply_flag_settings", "settings": settings});
        self.control(Request::Flags(settings), request).await
    }

    /// Takes the settings Claude Code accepted as the session's own.
    pub(super) async fn flags_applied(&mut self, settings: &Value) -> bool {
        if let Some(level) = settings.get("effortLevel").and_then(Value::as_str) {
            self.options.effort = Some(level.to_string());
        }
        if let Some(on) = settings.get("ultracode").and_then(Value::as_bool) {
            self.flags.ultracode = Some(on);
        }
        if let Some(on) = settings
            .get("showThinkingSummaries")
            .and_then(Value::as_bool)
        {
            self.flags.thinking = Some(on);
        }
        if let Some(on) = settings.get("fastMode").and_then(Value::as_bool) {
            self.flags.fast = Some(on);
            if on && !self.fast_available() {
                self.fast_state = Some("off".into());
                // `sdk_opt_in_required` is what `fastMode: true` itself answers.
                let why = self
                    .fast_disabled_reason
                    .clone()
                    .filter(|r| r != "sdk_opt_in_required")
                    .unwrap_or_else(|| "the model does not support it".into());
                if !self
                    .emit(info(format!("fast mode is not available: {why}")))
                    .await
                {
                    return false;
                }
            } else {
                self.fast_state = Some(if on { "on" } else { "off" }.into());
            }
        }
        self.control(Request::GetSettings, json!({"subtype": "get_settings"}))
            .await
    }

    async fn interrupt(&mut self) -> bool {
        // An interrupt cancels the MCP servers' open questions.
        for (_, e) in self.elicitations.take_all() {
            if !self
                .respond(&e.request_id, json!({"action": "cancel"}))
                .await
            {
                return false;
            }
        }
        if !self.busy {
            return true;
        }
        // The CLI withdraws its own open prompts; the cards end with the turn.
        self.approvals.take_all();
        self.control(Request::Plain("interrupt"), json!({"subtype": "interrupt"}))
            .await
    }

    async fn approve(&mut self, answer: Answer, hunks: Option<Vec<String>>) -> bool {
        match self.elicitations.take(&answer.call_id) {
            Taken::Open(e) => return self.answer_elicitation(answer, e).await,
            Taken::AlreadyAnswered => return true,
            Taken::Unknown => {}
        }
        let permission = match self.approvals.take(&answer.call_id) {
            Taken::Open(p) => p,
            Taken::AlreadyAnswered => return true,
            Taken::Unknown => return self.emit(no_open_approval(&answer.call_id)).await,
        };
        let mut input = Some(permission.input.clone());
        if let (Some(ids), true) = (&hunks, answer.allow) {
            let chosen = match (&permission.edit, answer.always) {
                (_, true) => Err("hunks cannot be combined with always".to_string()),
                (None, _) => Err(format!(
                    "{} is not a file edit; hunks apply to edits only",
                    answer.call_id
                )),
                (Some(edit), _) => edit.input_for(&permission.tool_name, &permission.input, ids),
            };
            match chosen {
                Ok(chosen) => input = chosen,
                Err(message) => {
                    // The card stays open (the daemon dropped it when the answer went out).
                    let card = permission.shown.clone();
                    self.approvals.open(answer.call_id, permission);
                    return self.emit(error(message)).await
                        && self.emit(event("approval_request", card)).await;
                }
            }
        }
        let body = match input {
            Some(input) if answer.allow => {
                let mut body = json!({"behavior": "allow", "updatedInput": input});
                if answer.always {
                    let destination = match answer.always_scope.as_deref() {
                        Some("project") => "localSettings",
                        Some("user") => "userSettings",
                        _ => "session",
                    };
                    body["updatedPermissions"] = json!([always_rule(&permission, destination)]);
                }
                body
            }
            // Allowed with none of its hunks: nothing of the edit is made.
            None => {
                json!({"behavior": "deny", "message": "The user applied none of this edit's changes."})
            }
            Some(_) => json!({"behavior": "deny", "message": "The user denied this tool call."}),
        };
        self.respond(&permission.request_id, body).await;
        true
    }

    /// Accepts with the answers (checked against the form), or declines. Answers that do not
    /// fit the form leave the card open.
    async fn answer_elicitation(&mut self, answer: Answer, e: Elicitation) -> bool {
        let body = if answer.allow {
            match e.content(answer.answers.as_ref()) {
                Ok(Some(content)) => json!({"action": "accept", "content": content}),
                Ok(None) => json!({"action": "accept"}),
                Err(message) => {
                    // The daemon dropped the card from its snapshot when the answer went out.
                    let card = e.shown.clone();
                    self.elicitations.open(answer.call_id, e);
                    return self.emit(error(message)).await
                        && self.emit(event("approval_request", card)).await;
                }
            }
        } else {
            json!({"action": "decline"})
        };
        self.respond(&e.request_id, body).await;
        true
    }

    /// An MCP server's question, live or listed by `initialize` (shown once either way).
    pub(super) async fn elicitation(&mut self, request_id: &str, request: &Value) -> bool {
        let call_id = format!("elicit-{}-{request_id}", self.generation);
        if self.elicitations.knows(&call_id) {
            return true;
        }
        let mut e = Elicitation::from_request(request_id, request);
        let card = e.card(&call_id, request);
        e.shown = card.clone();
        self.elicitations.open(call_id, e);
        self.emit(event("approval_request", card)).await
    }

    pub(super) async fn respond(&mut self, request_id: &str, body: Value) -> bool {
        self.write(&json!({
            "type": "control_response",
            "response": {"subtype": "success", "request_id": request_id, "response": body},
        }))
        .await
    }

    async fn set_mode(
        &mut self,
        mode: ApprovalMode,
        input: &mut mpsc::UnboundedReceiver<Input>,
    ) -> bool {
        let full_now = self.mode == ApprovalMode::FullAccess;
        if (mode == ApprovalMode::FullAccess) == full_now {
            self.pending_mode = None;
            let request = json!({"subtype": "set_permission_mode", "mode": permission_mode(mode)});
            return self.control(Request::SetMode(mode), request).await;
        }
        if mode == ApprovalMode::FullAccess {
            // Full access answers what is waiting: it would not have asked.
            for (_, permission) in self.approvals.take_all() {
                let body = json!({"behavior": "allow", "updatedInput": permission.input});
                self.respond(&permission.request_id, body).await;
            }
        }
        if self.busy {
            self.pending_mode = Some(mode);
            return self
                .emit(event(
                    "approval_mode_pending",
                    json!({ "mode": mode.as_str() }),
                ))
                .await;
        }
        self.restart(mode, input).await
    }

    /// Moves the session onto or off the JuCode gateway: the CLI restarts on the same
    /// conversation now, or once the running turn ends.
    async fn set_gateway(
        &mut self,
        op: &Object,
        input: &mut mpsc::UnboundedReceiver<Input>,
    ) -> bool {
        let Some(on) = op.get("gateway").and_then(Value::as_bool) else {
            return self
                .emit(error("set_gateway: gateway must be true or false"))
                .await;
        };
        if on && !self.gateway.available() {
            return self
                .emit(error(
                    "set_gateway: not signed in to JuCode (no gateway login in ~/.jucode/auth.json)",
                ))
                .await;
        }
        if let Some(model) = op.get("model").and_then(Value::as_str) {
            self.model = Some(model.to_string());
        }
        self.gateway.on = on;
        if self.busy {
            self.gateway.pending = true;
            return true;
        }
        self.restart(self.mode, input).await
    }

    /// Restarts the CLI on the same conversation in `mode` (full access is a start flag).
    pub(super) async fn restart(
        &mut self,
        mode: ApprovalMode,
        input: &mut mpsc::UnboundedReceiver<Input>,
    ) -> bool {
        let was_pending = self.pending_mode.take().is_some();
        self.gateway.pending = false;
        if let Some(child) = self.child.take() {
            let generation = child.generation;
            child.stop();
            // Let the old process finish writing the transcript the new one resumes.
            wait_exit(input, generation).await;
        }
        self.mode = mode;
        self.conversation_saved =
            self.conversation_saved || transcript_exists(&self.config_dir, &self.session);
        self.requests.clear();
        // The old process's MCP questions went with it.
        self.elicitations.take_all();
        if let Err(e) = self.spawn() {
            self.sink
                .exited(Some(format!("could not restart Claude Code: {e}")))
                .await;
            return false;
        }
        self.control(Request::Initialize, initialize_request())
            .await;
        let mut events = vec![event("approval_mode", json!({ "mode": mode.as_str() }))];
        if was_pending {
            events.push(event("approval_mode_pending", json!({ "mode": null })));
        }
        if !self.emit_all(events).await {
            return false;
        }
        self.next_queued().await
    }

    /// Starts the next queued message, if any.
    pub(super) async fn next_queued(&mut self) -> bool {
        match self.queue.pop() {
            Some((message, pending)) => self.emit(pending).await && self.start_turn(message).await,
            None => true,
        }
    }
}
