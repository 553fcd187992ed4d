//! Tool calls: deferral when nobody attends, the safety check, approvals, and running a call.

use super::*;

impl Ctx {
    /// Turns a call that needs a person into a deferred action (or reuses an identical one)
    /// and returns what the model is told. `Err` carries a decision already made for an
    /// identical call: `true` runs it now.
    pub(super) async fn defer(&self, call: &ToolCall, prepared: &Prepared) -> Result<String, bool> {
        let cwd = self.cwd.display().to_string();
        let digest = actions::digest(&call.name, &call.arguments, &cwd);
        let existing = {
            let state = self.state();
            if let Some(allow) = state.decided.get(&digest) {
                return Err(*allow);
            }
            state
                .open_actions
                .iter()
                .find(|a| a.digest == digest)
                .map(|a| a.id.clone())
        };
        if let Some(id) = existing {
            return Ok(actions::submitted_text(&id));
        }
        let created_at = now_ms();
        let action = DeferredAction {
            id: actions::new_id(created_at),
            session_id: self.session.clone(),
            cwd,
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            summary: prepared.summary(),
            subagent_id: None,
            digest,
            created_at,
        };
        // Saved before it is announced, so a restart can still decide it.
        self.record(Record::Deferred {
            action: action.clone(),
        })
        .await;
        self.state().open_actions.push(action.clone());
        let _ = self
            .events
            .send(EngineOutput::Event(Event(
                action.to_event().as_object().cloned().unwrap_or_default(),
            )))
            .await;
        Ok(actions::submitted_text(&action.id))
    }

    // ---- running tools ----------------------------------------------------------------

    /// Runs a prepared call and emits tool_start, tool_update…, tool_output.
    async fn run_tool(
        &self,
        call: &ToolCall,
        prepared: &Prepared,
        sandboxed: bool,
        hunks: Option<Vec<String>>,
    ) -> (String, bool) {
        self.emit("tool_start", json!({"call_id": call.id, "name": call.name}))
            .await;
        let (output, is_error) = self.execute(call, prepared, sandboxed, hunks).await;
        self.emit(
            "tool_output",
            json!({"call_id": call.id, "name": call.name, "output": output, "is_error": is_error}),
        )
        .await;
        (output, is_error)
    }

    pub(super) async fn execute(
        &self,
        call: &ToolCall,
        prepared: &Prepared,
        sandboxed: bool,
        hunks: Option<Vec<String>>,
    ) -> (String, bool) {
        match prepared {
            Prepared::Bash(bash) => {
                let (tx, mut rx) = mpsc::unbounded_channel::<String>();
                let run = tools::bash::run(bash, &self.env, sandboxed, Some(tx));
                tokio::pin!(run);
                loop {
                    tokio::select! {
                        result = &mut run => return result,
                        Some(output) = rx.recv() => {
                            self.emit("tool_update", json!({"call_id": call.id, "name": call.name, "output": output})).await;
                        }
                    }
                }
            }
            Prepared::Read(read) => {
                let read = read.clone();
                blocking(move || tools::files::run_read(&read)).await
            }
            Prepared::Edit(edit) => {
                let edit = edit.clone();
                blocking(move || tools::files::run_edit(&edit, hunks.as_deref())).await
            }
            Prepared::Search(search) => {
                let search = search.clone();
                blocking(move || tools::search::run(&search)).await
            }
            Prepared::Mcp { name, arguments } => {
                match self.mcp.call(name, arguments.clone()).await {
                    Ok(result) => (tools::cap_output(&result.text), result.is_error),
                    Err(e) => (e.to_string(), true),
                }
            }
            Prepared::Agent { name, arguments } => {
                let Some(seat) = &self.seat else {
                    return (
                        format!("{name} is an agent tool; this session has no agent"),
                        true,
                    );
                };
                match seat.host.call(name, arguments.clone()).await {
                    // A string result is shown as it is; anything else as JSON.
                    Ok(Value::String(text)) => (tools::cap_output(&text), false),
                    Ok(value) => (tools::cap_output(&value.to_string()), false),
                    Err(e) => (tools::cap_output(&e), true),
                }
            }
        }
    }

    /// The refusal the model gets when a command rule forbids this call's command (checked
    /// for every command, in the sandbox or not: a forbidden command never runs).
    pub(super) fn forbidden(&self, prepared: &Prepared) -> Option<String> {
        let Prepared::Bash(bash) = prepared else {
            return None;
        };
        let verdict = jucode_sandbox::commands::decide(&self.command_rules, &bash.command)?;
        (verdict.action == RuleAction::Forbid).then(|| {
            format!(
                "This command was not run: the agent's command rules forbid `{}`. Do not retry it or work around it; do without it, or tell the user what you needed it for.",
                verdict.prefix
            )
        })
    }

    /// Asks the safety model whether a call may run; any failure asks a person.
    async fn safety_check(&self, call: &ToolCall, prepared: &Prepared) -> bool {
        let Ok(config) = self.config() else {
            return false;
        };
        let Ok(client) = ModelClient::new(&config) else {
            return false;
        };
        let model = self.model_for(&config);
        let question =
            prompt::safety_request(&self.cwd, &call.name, &call.arguments, &prepared.summary());
        let messages = [Message::User {
            content: question,
            images: vec![],
        }];
        let answer = client
            .complete(Request {
                model: &model,
                system: prompt::SAFETY_SYSTEM,
                messages: &messages,
                tools: &[],
                max_tokens: 16,
                images: &NO_IMAGES,
            })
            .await;
        match answer {
            Ok(text) => prompt::safety_allows(&text),
            Err(e) => {
                tracing::warn!(session = %self.session, "safety check failed, asking: {e}");
                false
            }
        }
    }

    /// Checks a call against the built-in tools, the agent tools and the MCP tools
    /// connected now, in that order.
    pub(super) fn prepare(&self, call: &ToolCall) -> Result<Prepared, String> {
        let agent: HashSet<String> = self.agent_tools().into_iter().map(|t| t.name).collect();
        let mcp: HashSet<String> = self.mcp.tools().into_iter().map(|t| t.name).collect();
        tools::prepare(call, &self.env, |name| {
            if agent.contains(name) {
                Some(tools::Owner::Agent)
            } else if mcp.contains(name) {
                Some(tools::Owner::Mcp)
            } else {
                None
            }
        })
    }

    /// The agent tools this session offers; none without a seat, and none named like a
    /// built-in tool.
    fn agent_tools(&self) -> Vec<ToolSpec> {
        let Some(seat) = &self.seat else {
            return Vec::new();
        };
        seat.host
            .tools()
            .into_iter()
            .filter(|t| !tools::BUILTIN.contains(&t.name.as_str()))
            .map(|t| ToolSpec {
                name: t.name,
                description: t.description,
                parameters: t.parameters,
            })
            .collect()
    }

    /// The built-in tools, the agent tools and the tools of the connected MCP servers.
    pub(super) fn tool_specs(&self) -> Vec<ToolSpec> {
        let mut specs = tools::specs();
        let agent = self.agent_tools();
        let taken: HashSet<String> = agent.iter().map(|t| t.name.clone()).collect();
        specs.extend(agent);
        specs.extend(
            self.mcp
                .tools()
                .into_iter()
                .filter(|t| !taken.contains(&t.name))
                .map(|t| ToolSpec {
                    name: t.name,
                    description: t.description,
                    parameters: t.input_schema,
                }),
        );
        specs
    }

    /// Waits (bounded) for MCP servers that are still connecting, so a turn started right
    /// after the session sees their tools.
    pub(super) async fn mcp_settled(&self) {
        let connecting = |mcp: &McpManager| {
            mcp.servers_event()["servers"]
                .as_array()
                .is_some_and(|list| list.iter().any(|s| s["state"] == "connecting"))
        };
        let mut changes = self.mcp.subscribe();
        let wait = async {
            while connecting(&self.mcp) {
                if changes.changed().await.is_err() {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(MCP_CONNECT_WAIT, wait).await;
    }

    /// One tool call of a turn, from gate to result; returns the tool message.
    pub(super) async fn handle_call(&self, call: &ToolCall) -> Message {
        let result = |output: String, is_error: bool| Message::Tool {
            call_id: call.id.clone(),
            name: call.name.clone(),
            output,
            is_error,
        };
        let prepared = match self.prepare(call) {
            Ok(p) => p,
            Err(e) => {
                self.emit("tool_start", json!({"call_id": call.id, "name": call.name}))
                    .await;
                self.emit(
                    "tool_output",
                    json!({"call_id": call.id, "name": call.name, "output": e, "is_error": true}),
                )
                .await;
                return result(e, true);
            }
        };
        if let Some(text) = self.forbidden(&prepared) {
            self.emit("tool_start", json!({"call_id": call.id, "name": call.name}))
                .await;
            self.emit(
                "tool_output",
                json!({"call_id": call.id, "name": call.name, "output": text, "is_error": true}),
            )
            .await;
            return result(text, true);
        }
        // Command rules come before the approval mode for escalations: allow runs without
        // asking, ask always goes to a person (deferred when nobody attends).
        let rule = match &prepared {
            Prepared::Bash(bash) if prepared.kind() == Kind::Escalation => {
                jucode_sandbox::commands::decide(&self.command_rules, &bash.command)
                    .map(|v| v.action)
            }
            _ => None,
        };
        let by_rule = rule == Some(RuleAction::Ask);
        let decision = match rule {
            Some(RuleAction::Allow) => Gate::Run { sandboxed: false },
            Some(RuleAction::Ask) => Gate::Ask,
            _ => {
                let state = self.state();
                gate(
                    state.mode,
                    prepared.kind(),
                    state.always.contains(&call.name),
                )
            }
        };
        let decision = match decision {
            Gate::Safety if self.safety_check(call, &prepared).await => {
                Gate::Run { sandboxed: false }
            }
            Gate::Safety => Gate::Ask,
            other => other,
        };
        let (sandboxed, hunks) = match decision {
            Gate::Run { sandboxed } => (sandboxed, None),
            Gate::Ask | Gate::Safety => match self.ask(call, &prepared, by_rule).await {
                Answer::Allow { hunks } => (runs_sandboxed(&prepared, self.state().mode), hunks),
                Answer::Deny => {
                    let text = format!("The user denied this {} call.", call.name);
                    self.emit(
                        "tool_output",
                        json!({"call_id": call.id, "name": call.name, "output": text, "is_error": true}),
                    )
                    .await;
                    return result(text, true);
                }
                Answer::Deferred(text) => {
                    self.emit(
                        "tool_output",
                        json!({"call_id": call.id, "name": call.name, "output": text, "is_error": false}),
                    )
                    .await;
                    return result(text, false);
                }
            },
        };
        let sandboxed = self.sandboxed(&prepared, sandboxed);
        let (output, is_error) = self.run_tool(call, &prepared, sandboxed, hunks).await;
        result(output, is_error)
    }

    /// Waits for a person, or defers when nobody watches.
    async fn ask(&self, call: &ToolCall, prepared: &Prepared, by_rule: bool) -> Answer {
        let attended = self.state().attended;
        if !attended {
            return match self.defer(call, prepared).await {
                Ok(text) => Answer::Deferred(text),
                Err(true) => Answer::Allow { hunks: None },
                Err(false) => Answer::Deny,
            };
        }
        let (tx, rx) = oneshot::channel();
        self.state().pending.push(Pending {
            call: call.clone(),
            prepared: prepared.clone(),
            by_rule,
            tx,
        });
        self.emit("approval_request", card(call, prepared)).await;
        // A dropped sender (interrupt) ends the turn anyway; deny to be safe.
        rx.await.unwrap_or(Answer::Deny)
    }
}
