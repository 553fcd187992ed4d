//! Notifications and server requests from `codex app-server` (items, turns, approval prompts) as
//! serve-v2 events.

use super::*;

impl Codex {
    /// Whether a notification is about our thread (subagents run threads of their own).
    fn ours(&self, params: &Value) -> bool {
        match (params.get("threadId").and_then(Value::as_str), &self.thread) {
            (Some(t), Some(ours)) => t == ours,
            _ => true,
        }
    }

    pub(super) async fn on_notification(&mut self, method: &str, params: &Value) -> bool {
        match method {
            "mcpServer/oauthLogin/completed" => {
                let name = params.get("name").map(text_of).unwrap_or_default();
                let said = match sign_in_failure(params) {
                    None => info(format!("MCP server {name}: signed in")),
                    Some(why) => error(format!("MCP server {name}: sign-in failed: {why}")),
                };
                return self.emit(said).await && self.mcp_list().await;
            }
            "mcpServer/startupStatus/updated" => return self.mcp_status(params).await,
            "account/login/completed" => {
                let said = match sign_in_failure(params) {
                    None => info("Codex is signed in to ChatGPT"),
                    Some(why) => error(format!("Codex sign-in failed: {why}")),
                };
                return self.emit(said).await;
            }
            _ => {}
        }
        if method == "thread/started" {
            let id = params
                .pointer("/thread/id")
                .and_then(Value::as_str)
                .unwrap_or("");
            if self.thread.as_deref().is_some_and(|t| t != id) && !id.is_empty() {
                // A subagent's own thread: it feeds agent_runs, never the conversation.
                return match self.agents.started(&params["thread"]) {
                    Some(lifecycle) => self.emit(lifecycle).await && self.runs_changed().await,
                    None => true,
                };
            }
            return true;
        }
        if !self.ours(params) {
            // Codex saves a spawned thread's names once it runs: look them up until found.
            let mut renamed = false;
            if let Some(thread) = params.get("threadId").and_then(Value::as_str)
                && matches!(method, "turn/started" | "item/completed" | "turn/completed")
                && self.agents.unnamed(thread)
            {
                let names = crate::codex_saved::saved_names(&self.codex_home, thread);
                renamed = self.agents.name(thread, names);
            }
            let (changed, lifecycle) = self.agents.child_event(method, params);
            let changed = changed || renamed;
            if let Some(lifecycle) = lifecycle
                && !self.emit(lifecycle).await
            {
                return false;
            }
            return !changed || self.runs_changed().await;
        }
        match method {
            "turn/started" => match params.pointer("/turn/id").and_then(Value::as_str) {
                Some(turn) => self.turn_known(turn.to_string()).await,
                None => true,
            },
            "item/started" => self.item_started(&params["item"]).await,
            "item/completed" => self.item_completed(&params["item"]).await,
            "item/fileChange/patchUpdated" => {
                if let (Some(item), Some(changes)) = (
                    params.get("itemId").and_then(Value::as_str),
                    params.get("changes"),
                ) {
                    self.file_changes.insert(item.to_string(), changes.clone());
                }
                true
            }
            "item/agentMessage/delta" => {
                if let Some(item) = params.get("itemId").and_then(Value::as_str) {
                    self.delta_items.insert(item.to_string());
                }
                let delta = params.get("delta").and_then(Value::as_str).unwrap_or("");
                self.emit(event("assistant_delta", json!({ "delta": delta })))
                    .await
            }
            "item/reasoning/summaryTextDelta" | "item/reasoning/textDelta" => {
                let delta = params.get("delta").and_then(Value::as_str).unwrap_or("");
                self.emit(event("reasoning_delta", json!({ "delta": delta })))
                    .await
            }
            "item/commandExecution/outputDelta" => {
                let id = params.get("itemId").and_then(Value::as_str).unwrap_or("");
                let name = self.tools.get(id).cloned().unwrap_or_else(|| "bash".into());
                let delta = params.get("delta").and_then(Value::as_str).unwrap_or("");
                self.emit(event(
                    "tool_update",
                    json!({"call_id": id, "name": name, "output": delta}),
                ))
                .await
            }
            "turn/plan/updated" => {
                let plan = params.get("plan").cloned().unwrap_or(json!([]));
                self.sink
                    .state(event("plan", json!({ "plan": plan })))
                    .await
            }
            "thread/tokenUsage/updated" => {
                // Only the running turn's requests count (a resume reports the last turn's).
                let turn = params.get("turnId").and_then(Value::as_str);
                if !self.busy || self.turn.is_none() || turn != self.turn.as_deref() {
                    return true;
                }
                let last = &params["tokenUsage"]["last"];
                let n = |k: &str| last.get(k).and_then(Value::as_u64).unwrap_or(0);
                let sums = self.usage.get_or_insert([0; 5]);
                let keys = [
                    "inputTokens",
                    "cachedInputTokens",
                    "cacheWriteInputTokens",
                    "outputTokens",
                    "reasoningOutputTokens",
                ];
                for (sum, key) in sums.iter_mut().zip(keys) {
                    *sum += n(key);
                }
                true
            }
            "error" => {
                let message = params
                    .pointer("/error/message")
                    .map(text_of)
                    .unwrap_or_default();
                if params.get("willRetry").and_then(Value::as_bool) == Some(true) {
                    self.emit(event(
                        "retrying",
                        json!({"attempt": null, "reason": message}),
                    ))
                    .await
                } else {
                    self.emit(error(format!("Codex: {message}"))).await
                }
            }
            "serverRequest/resolved" => {
                // Codex settled a prompt on its own (e.g. the turn ended): close its card.
                if let Some(id) = params.get("requestId")
                    && let Some(call) = self.approvals.find(|p| &p.id == id)
                {
                    let call = call.to_string();
                    self.approvals.withdraw(&call);
                }
                true
            }
            "turn/completed" => self.turn_completed(&params["turn"]).await,
            _ => true,
        }
    }

    async fn item_started(&mut self, item: &Value) -> bool {
        let id = item
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let name = match item.get("type").and_then(Value::as_str).unwrap_or("") {
            "agentMessage" => return self.emit(event("assistant_start", json!({}))).await,
            "reasoning" => return self.emit(event("thinking_start", json!({}))).await,
            "commandExecution" => "bash".to_string(),
            "fileChange" => {
                if let Some(changes) = item.get("changes") {
                    self.file_changes.insert(id.clone(), changes.clone());
                }
                file_tool(item).to_string()
            }
            "mcpToolCall" => item
                .get("tool")
                .and_then(Value::as_str)
                .unwrap_or("mcp")
                .to_string(),
            "webSearch" => "web_search".to_string(),
            "collabAgentToolCall" => return self.collab_call(item).await,
            _ => return true,
        };
        self.tools.insert(id.clone(), name.clone());
        self.emit(event("tool_start", json!({"call_id": id, "name": name})))
            .await
    }

    async fn item_completed(&mut self, item: &Value) -> bool {
        let id = item
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let status = item
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("completed");
        let (output, is_error) = match item.get("type").and_then(Value::as_str).unwrap_or("") {
            "agentMessage" => {
                if self.delta_items.remove(&id) {
                    return true;
                }
                let text = item.get("text").and_then(Value::as_str).unwrap_or("");
                return self
                    .emit(event("assistant_delta", json!({ "delta": text })))
                    .await;
            }
            "commandExecution" => {
                let output = item
                    .get("aggregatedOutput")
                    .map(text_of)
                    .unwrap_or_default();
                match status {
                    "declined" => ("declined by the user".to_string(), true),
                    "completed" => {
                        let code = item.get("exitCode").and_then(Value::as_i64).unwrap_or(0);
                        (output, code != 0)
                    }
                    _ => (output, true),
                }
            }
            "fileChange" => {
                let files = strings_in(item.get("changes"), "path");
                let verb = if status == "completed" {
                    "changed"
                } else {
                    status
                };
                (
                    format!("{verb}: {}", files.join(", ")),
                    status != "completed",
                )
            }
            "mcpToolCall" => match item.get("error").filter(|e| !e.is_null()) {
                Some(err) => (
                    err.get("message")
                        .map(text_of)
                        .unwrap_or_else(|| err.to_string()),
                    true,
                ),
                None => (
                    item.pointer("/result/content")
                        .map(text_of)
                        .unwrap_or_default(),
                    status != "completed",
                ),
            },
            "webSearch" => (item.get("query").map(text_of).unwrap_or_default(), false),
            "collabAgentToolCall" => return self.collab_call(item).await,
            _ => return true,
        };
        let name = self.tools.remove(&id).unwrap_or_else(|| "tool".into());
        self.approvals.withdraw(&id);
        self.file_changes.remove(&id);
        self.emit(event(
            "tool_output",
            json!({"call_id": id, "name": name, "output": truncate(&output, 100_000), "is_error": is_error}),
        ))
        .await
    }

    async fn turn_completed(&mut self, turn: &Value) -> bool {
        // No report from Codex: the usage event carries no counters (absent, not zero).
        let counters = match self.usage.take() {
            Some([input, cached, cache_write, output, reasoning]) => json!({
                "input_tokens": input, "cached_input_tokens": cached,
                "cache_write_input_tokens": cache_write, "output_tokens": output,
                "reasoning_tokens": reasoning,
            }),
            None => json!({}),
        };
        let mut events = vec![event("usage", counters)];
        match turn.get("status").and_then(Value::as_str).unwrap_or("") {
            "interrupted" => {
                events.push(info("request interrupted"));
                events.push(status("interrupted"));
            }
            "failed" => {
                let message = turn
                    .pointer("/error/message")
                    .map(text_of)
                    .unwrap_or_else(|| "the turn failed".into());
                events.push(error(format!("Codex: {message}")));
            }
            _ => {}
        }
        events.push(status("ready"));
        self.busy = false;
        self.turn = None;
        self.approvals.take_all();
        if let Some(mode) = self.next_mode.take() {
            self.mode = mode;
            events.push(event("approval_mode", json!({ "mode": mode.as_str() })));
            events.push(event("approval_mode_pending", json!({ "mode": null })));
        }
        self.turn_over();
        self.emit_all(events).await && self.next_queued().await
    }

    pub(super) async fn on_server_request(
        &mut self,
        method: &str,
        id: Value,
        params: &Value,
    ) -> bool {
        let call_id = params
            .get("itemId")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("request-{id}"));
        let subagent = (!self.ours(params))
            .then(|| params.get("threadId").cloned())
            .flatten();
        let (kind, card) = match method {
            "item/commandExecution/requestApproval" => {
                let amendment = params
                    .get("proposedExecpolicyAmendment")
                    .filter(|a| !a.is_null())
                    .cloned();
                let scopes = if amendment.is_some() {
                    json!(["session", "rule"])
                } else {
                    json!(["session"])
                };
                let summary = params
                    .pointer("/commandActions/0/command")
                    .or(params.get("command"))
                    .map(text_of)
                    .unwrap_or_default();
                (
                    Kind::Command { amendment },
                    json!({"name": "bash", "summary": truncate(&summary, 400), "scopes": scopes,
                           "reason": params.get("reason")}),
                )
            }
            "item/fileChange/requestApproval" => {
                // The request names the item; its changes came with `item/started`.
                let changes = self
                    .file_changes
                    .get(&call_id)
                    .cloned()
                    .unwrap_or(Value::Null);
                let hunks = crate::codex_hunks::hunks(&changes, &self.cwd);
                let ids = hunks
                    .iter()
                    .filter_map(|h| h["id"].as_str().map(str::to_string))
                    .collect();
                let summary = params
                    .get("reason")
                    .filter(|r| !r.is_null())
                    .map(text_of)
                    .unwrap_or_else(|| file_summary(&changes));
                let hunks = if hunks.is_empty() {
                    Value::Null
                } else {
                    json!(hunks)
                };
                (
                    Kind::File { hunks: ids },
                    json!({"name": file_tool_of(&changes), "summary": summary, "scopes": ["session"], "hunks": hunks}),
                )
            }
            "item/permissions/requestApproval" => (
                Kind::Permissions,
                json!({"name": "permissions",
                       "summary": params.get("reason").map(text_of).unwrap_or_else(|| truncate(&params.to_string(), 400)),
                       "scopes": ["session"]}),
            ),
            "item/tool/requestUserInput" => (
                Kind::Question,
                json!({"name": "ask_question", "summary": "Codex asks", "questions": params.get("questions")}),
            ),
            "mcpServer/elicitation/request" => (
                Kind::Elicitation,
                json!({"name": "mcp_elicitation",
                       "summary": params.get("message").map(text_of).unwrap_or_default(),
                       "url": params.get("url"),
                       "questions": params.get("requestedSchema").or(params.get("schema"))}),
            ),
            _ => {
                let _ = self
                    .write(&json!({"id": id, "error": {"code": -32601, "message": format!("{method} is not supported by this client")}}))
                    .await;
                return true;
            }
        };
        if self.mode == ApprovalMode::FullAccess
            && matches!(
                kind,
                Kind::Command { .. } | Kind::File { .. } | Kind::Permissions
            )
        {
            let allow = Answer {
                call_id: call_id.clone(),
                allow: true,
                always: false,
                always_scope: None,
                answers: None,
            };
            if let Ok(result) = answer_body(&kind, &allow) {
                let _ = self.reply(id, result).await;
                return true;
            }
        }
        let mut fields = json!({"call_id": call_id, "subagent_id": subagent, "hunks": null});
        if let (Value::Object(fields), Value::Object(card)) = (&mut fields, card) {
            fields.extend(card);
        }
        let shown = fields.clone();
        self.approvals
            .open(call_id.clone(), Pending { id, kind, shown });
        self.emit(event("approval_request", fields)).await
    }
}
