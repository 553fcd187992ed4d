//! Frames from `codex app-server`: replies to our requests, the thread opening, MCP statuses and
//! subagents.

use super::*;

impl Codex {
    pub(super) async fn handle_frame(&mut self, frame: Value) -> bool {
        let method = frame
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        match (method, frame.get("id").cloned()) {
            (Some(method), Some(id)) => self.on_server_request(&method, id, &frame["params"]).await,
            (Some(method), None) => self.on_notification(&method, &frame["params"]).await,
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
                Request::Initialize | Request::OpenThread => {
                    let what = if self.resume_thread.is_some() {
                        "resume"
                    } else {
                        "start"
                    };
                    self.sink
                        .exited(Some(format!(
                            "Codex could not {what} the thread: {message}"
                        )))
                        .await;
                    false
                }
                Request::TurnStart => {
                    self.busy = false;
                    self.emit_all(vec![error(format!("Codex: {message}")), status("ready")])
                        .await
                        && self.next_queued().await
                }
                Request::Plain(name) => {
                    self.emit(error(format!("Codex refused {name}: {message}")))
                        .await
                }
                Request::McpLogin(name) => {
                    self.emit(error(format!("mcp_login {name}: Codex refused: {message}")))
                        .await
                }
                Request::McpReload => {
                    self.emit(error(format!("mcp_reconnect: Codex refused: {message}")))
                        .await
                }
                Request::ReadAgent(agent) => {
                    let fields = json!({"agent_id": agent, "error": format!("Codex could not read it: {message}")});
                    self.emit(event("subagent_transcript", fields)).await
                }
                _ => self.emit(error(format!("Codex: {message}"))).await,
            };
        }
        let result = frame.get("result").cloned().unwrap_or(Value::Null);
        match kind {
            Request::Initialize => {
                if let Some(home) = result.get("codexHome").and_then(Value::as_str)
                    && !home.is_empty()
                {
                    self.codex_home = PathBuf::from(home);
                }
                if !self.write(&json!({"method": "initialized"})).await {
                    return true;
                }
                // An agent's prompt, read now: its brief may have changed since last time.
                let instructions = self
                    .agent
                    .as_ref()
                    .map(|a| a.prompt())
                    .filter(|p| !p.trim().is_empty());
                match self.resume_thread.clone() {
                    Some(thread) => {
                        let mut params = json!({"threadId": thread});
                        if let Some(text) = instructions {
                            params["developerInstructions"] = json!(text);
                        }
                        // A process restarted onto or off the gateway forks the thread: Codex
                        // keeps a resumed thread on the provider it started with, and a fork
                        // takes the new process's provider with the whole history.
                        let method = if self.reopening {
                            "thread/fork"
                        } else {
                            "thread/resume"
                        };
                        self.request(Request::OpenThread, method, params).await
                    }
                    None => {
                        let mut params = json!({
                            "cwd": self.cwd,
                            "approvalPolicy": self.policies().0,
                            "sandbox": self.sandbox_name(),
                        });
                        if let Some(model) = &self.model {
                            params["model"] = json!(model);
                        }
                        if let Some(text) = instructions {
                            params["developerInstructions"] = json!(text);
                        }
                        self.request(Request::OpenThread, "thread/start", params)
                            .await
                    }
                }
            }
            Request::OpenThread => self.thread_open(&result).await,
            Request::TurnStart => {
                if let Some(turn) = result.pointer("/turn/id").and_then(Value::as_str) {
                    self.turn_known(turn.to_string()).await
                } else {
                    true
                }
            }
            Request::ModelList => {
                let data = result
                    .get("data")
                    .or(result.get("models"))
                    .cloned()
                    .unwrap_or(json!([]));
                let models: Vec<Value> = data
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|m| {
                        let id = m.get("model").or(m.get("id")).and_then(Value::as_str).unwrap_or("");
                        json!({
                            "model": id,
                            "active": self.model.as_deref() == Some(id),
                            "context_window": null,
                            "max_output_tokens": null,
                            "reasoning_efforts": m.get("supportedReasoningEfforts").cloned().unwrap_or(json!([])),
                        })
                    })
                    .collect();
                self.emit(event(
                    "model_view",
                    json!({"models": models, "active_effort": null}),
                ))
                .await
            }
            Request::Login => {
                let url = result
                    .get("verificationUrl")
                    .or(result.get("authUrl"))
                    .map(text_of);
                let code = result.get("userCode").map(text_of);
                let message = match (url, code) {
                    (Some(url), Some(code)) => {
                        format!("To sign Codex in, open {url} and enter the code {code}")
                    }
                    (Some(url), None) => format!("To sign Codex in, open {url}"),
                    _ => "Codex started signing in".to_string(),
                };
                self.emit(info(message)).await
            }
            Request::McpList => {
                let data = result
                    .get("data")
                    .or(result.get("servers"))
                    .cloned()
                    .unwrap_or(json!([]));
                let servers: Vec<Value> = data
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(mcp_entry)
                    .collect();
                self.mcp_servers = servers.clone();
                let list = event("mcp_servers", json!({ "servers": servers }));
                self.sink.answer(list).await
            }
            Request::McpReload => self.mcp_list().await,
            Request::ReadAgent(agent) => {
                // Only a thread this session spawned: never another conversation by its id.
                let parent = result
                    .pointer("/thread/parentThreadId")
                    .and_then(Value::as_str);
                let ours = self.agents.knows(&agent)
                    || (parent.is_some() && parent == self.thread.as_deref());
                let fields = if ours {
                    json!({"agent_id": agent, "items": crate::codex_agents::transcript_items(&result["thread"])})
                } else {
                    json!({"agent_id": agent, "error": format!("no subagent {agent} in this session")})
                };
                self.emit(event("subagent_transcript", fields)).await
            }
            Request::McpLogin(name) => match result.get("authorizationUrl").and_then(Value::as_str)
            {
                Some(url) => {
                    self.emit(event("mcp_login", json!({"name": name, "url": url})))
                        .await
                }
                None => {
                    self.emit(error(format!(
                        "Codex gave no sign-in address for the MCP server {name}"
                    )))
                    .await
                }
            },
            Request::Plain(_) => true,
        }
    }

    async fn thread_open(&mut self, result: &Value) -> bool {
        let Some(thread) = result.pointer("/thread/id").and_then(Value::as_str) else {
            self.sink
                .exited(Some("Codex answered without a thread id".into()))
                .await;
            return false;
        };
        let thread = thread.to_string();
        if let Err(e) = self.map.insert(&self.map_lock, &self.session, &thread) {
            tracing::warn!(
                "could not remember the Codex thread of {}: {e}",
                self.session
            );
            if !self
                .emit(info(format!(
                    "reopening this session may not find its thread: {e}"
                )))
                .await
            {
                return false;
            }
        }
        self.thread = Some(thread.clone());
        if self.model.is_none() {
            self.model = result
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        self.provider = result
            .get("modelProvider")
            .and_then(Value::as_str)
            .map(str::to_string);
        self.effort = result
            .get("reasoningEffort")
            .cloned()
            .unwrap_or(Value::Null);
        self.service_tier = result
            .get("serviceTier")
            .and_then(Value::as_str)
            .map(str::to_string);
        let startup = event(
            "startup",
            json!({
                "version": result.pointer("/thread/cliVersion"),
                // The conversation id: the daemon names a new session after it.
                "session_id": thread,
                "thread_id": thread,
                "profile_dir": null,
                "config_path": null,
                "cwd": self.cwd.display().to_string(),
                "model": self.model,
                "context_window": null,
            }),
        );
        let model = self.model_status();
        let commands = json!({"commands": [
            {"command": "/model", "marker": "codex", "args": "[model]", "description": "Show or pick the model (from the next turn)"},
            {"command": "/login", "marker": "codex", "args": "", "description": "Sign Codex in to ChatGPT with a device code"},
            {"command": "/fast", "marker": "codex", "args": "[on|off]", "description": "Fast mode: the priority service tier (from the next turn)"},
            {"command": "/thinking", "marker": "codex", "args": "[on|off]", "description": "Show the model's reasoning summaries (from the next turn)"},
        ]});
        let mode = event("approval_mode", json!({ "mode": self.mode.as_str() }));
        let ok = self.sink.state(startup).await
            && self.sink.state(model).await
            && self.sink.state(event("command_list", commands)).await
            && self.sink.state(mode).await;
        if !ok {
            return false;
        }
        // Server states Codex reported while the thread was opening.
        if !self.mcp_servers.is_empty() && !self.mcp_changed().await {
            return false;
        }
        if self.resume_thread.is_some()
            && self.agents.load_saved(&self.codex_home, &thread)
            && !self.runs_changed().await
        {
            return false;
        }
        // A restarted process resumes a thread whose transcript the hub already has.
        let reopening = std::mem::take(&mut self.reopening);
        if self.resume_thread.is_some()
            && !reopening
            && let Some(path) = result.pointer("/thread/path").and_then(Value::as_str)
            && std::path::Path::new(path).is_file()
        {
            let items = crate::history::codex_transcript(std::path::Path::new(path));
            if !self
                .emit(event("transcript", json!({ "items": items })))
                .await
            {
                return false;
            }
        }
        self.turn_over();
        self.next_queued().await
    }

    /// The main thread's collab tool call (spawn, wait, close…): only the runs change.
    pub(super) async fn collab_call(&mut self, item: &Value) -> bool {
        let (changed, new) = self.agents.collab_call(item);
        let prompt = item
            .get("prompt")
            .and_then(Value::as_str)
            .map(str::to_string);
        for thread in new {
            let names = crate::codex_saved::saved_names(&self.codex_home, &thread);
            if let Some(started) = self.agents.spawned(&thread, names, prompt.clone())
                && !self.emit(started).await
            {
                return false;
            }
        }
        !changed || self.runs_changed().await
    }

    /// `mcpServer/startupStatus/updated`: one server's state changed; the list follows.
    pub(super) async fn mcp_status(&mut self, params: &Value) -> bool {
        // A subagent's thread starts servers of its own: not this session's.
        if let (Some(about), Some(ours)) = (
            params.get("threadId").and_then(Value::as_str),
            self.thread.as_deref(),
        ) && about != ours
        {
            return true;
        }
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return true;
        };
        let status = params.get("status").and_then(Value::as_str).unwrap_or("");
        let (state, problem) = match status {
            "starting" => ("connecting", None),
            "ready" => ("connected", None),
            "cancelled" => ("failed", Some("cancelled".to_string())),
            _ => (
                "failed",
                Some(
                    ["error", "failureReason"]
                        .iter()
                        .find_map(|k| params.get(*k).filter(|e| !e.is_null()).map(text_of))
                        .unwrap_or_else(|| format!("startup {status}")),
                ),
            ),
        };
        let at = match self.mcp_servers.iter().position(|s| s["name"] == name) {
            Some(at) => at,
            None => {
                self.mcp_servers
                    .push(json!({"name": name, "transport": "codex", "state": "", "tools": []}));
                self.mcp_servers.len() - 1
            }
        };
        let entry = &mut self.mcp_servers[at];
        let before = entry.clone();
        entry["state"] = json!(state);
        match (problem, entry.as_object_mut()) {
            (Some(problem), _) => entry["error"] = json!(problem),
            (None, Some(map)) => {
                map.remove("error");
            }
            (None, None) => {}
        }
        let unlisted_tools =
            state == "connected" && entry["tools"].as_array().is_none_or(|t| t.is_empty());
        if *entry == before || self.thread.is_none() {
            // Unchanged, or the thread is not open yet (`thread_open` sends the list).
            return true;
        }
        if !self.mcp_changed().await {
            return false;
        }
        // A server that just came up has tools the list names: ask for it.
        !unlisted_tools || self.mcp_list().await
    }

    async fn mcp_changed(&mut self) -> bool {
        let list = event("mcp_servers", json!({ "servers": self.mcp_servers }));
        self.sink.state(list).await
    }

    pub(super) async fn runs_changed(&mut self) -> bool {
        let runs = self.agents.event();
        self.sink.state(runs).await
    }

    /// `subagent_transcript`: the child thread as Codex keeps it, when it is one of ours.
    pub(super) async fn subagent_transcript(&mut self, agent: String) -> bool {
        let params = json!({"threadId": agent, "includeTurns": true});
        self.request(Request::ReadAgent(agent), "thread/read", params)
            .await
    }

    pub(super) async fn turn_known(&mut self, turn: String) -> bool {
        self.turn = Some(turn);
        if self.interrupt_asked {
            self.interrupt_asked = false;
            return self.interrupt().await;
        }
        true
    }

    pub(super) async fn next_queued(&mut self) -> bool {
        if self.busy || self.restart == restart::Restart::Now {
            return true;
        }
        match self.queue.pop() {
            Some((message, pending)) => self.emit(pending).await && self.start_turn(message).await,
            None => true,
        }
    }
}
