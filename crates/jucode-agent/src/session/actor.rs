//! The actor: reads ops, queues messages, starts and stops turns, answers approvals and mode
//! switches.

use super::*;

/// The actor's own state.
struct Actor {
    ctx: Arc<Ctx>,
    queue: VecDeque<(String, Vec<String>)>,
    turn: Option<JoinHandle<()>>,
}

enum Flow {
    Go,
    Exit,
}

/// Runs a session until `shutdown`, `/quit` or the ops channel closes.
pub(crate) async fn run(
    setup: Setup,
    events: mpsc::Sender<EngineOutput>,
    mut ops: mpsc::UnboundedReceiver<Object>,
) {
    let (internal_tx, mut internal_rx) = mpsc::unbounded_channel();
    let (log, loaded, log_error) = match SessionLog::open(&setup.home, &setup.session) {
        Ok((log, loaded)) => (Some(log), loaded, None),
        Err(e) => (None, Default::default(), Some(e.to_string())),
    };
    let mut loaded: crate::log::Loaded = loaded;
    let untold = std::mem::take(&mut loaded.untold);
    let transcript = setup.resume.then(|| loaded.transcript.clone());
    let config_path = setup.home.join("config.json");
    // A broken server list is reported once the startup batch is out; the session runs on.
    let (servers, mcp_error) = match jucode_mcp::load_servers(&config_path) {
        Ok(servers) => (servers, None),
        Err(e) => (Vec::new(), Some(format!("MCP servers not started: {e}"))),
    };
    let mcp = McpManager::start(config_path.clone(), servers).await;
    let mut mcp_changes = mcp.subscribe();
    let ctx = Arc::new(Ctx {
        events,
        config_path,
        session: setup.session,
        cwd: setup.cwd,
        home: setup.home,
        chat: setup.chat,
        env: setup.env,
        seat: setup.seat,
        command_rules: setup.command_rules,
        version: setup.version,
        state: Mutex::new(State {
            mode: setup.mode,
            attended: true,
            pending: Vec::new(),
            always: HashSet::new(),
            messages: if setup.resume {
                loaded.messages
            } else {
                Vec::new()
            },
            open_actions: loaded.open_actions,
            decided: loaded.decided,
            decided_ids: loaded.decided_ids,
            model_override: setup.model,
            context_tokens: 0,
            turns: if setup.resume { loaded.turns } else { 0 },
            first_request: if setup.resume {
                loaded.first_request
            } else {
                None
            },
            title: loaded.title,
            last_model_status: None,
        }),
        log: Mutex::new(log),
        internal: internal_tx,
        mcp,
    });
    ctx.startup(transcript).await;
    if let Some(e) = log_error {
        ctx.error(format!("this conversation will not be saved: {e}"))
            .await;
    } else {
        let cwd = ctx.cwd.display().to_string();
        ctx.record(Record::Start {
            session: ctx.session.clone(),
            cwd,
            at: now_ms(),
        })
        .await;
    }
    if let Some(warning) = setup.warning {
        ctx.error(warning).await;
    }
    if let Some(e) = mcp_error {
        ctx.error(e).await;
    }
    // The open actions again, for a hub that missed one or decided one before a kill kept
    // the decision from here; and the decisions a kill kept from the conversation.
    let open = ctx.state().open_actions.clone();
    for action in open {
        let event = action.to_event().as_object().cloned().unwrap_or_default();
        let _ = ctx.events.send(EngineOutput::Event(Event(event))).await;
    }
    for (action, allow) in untold {
        let _ = ctx.internal.send(if allow {
            actions::interrupted_message(&action)
        } else {
            actions::decision_message(&action, None)
        });
    }
    let mut actor = Actor {
        ctx,
        queue: VecDeque::new(),
        turn: None,
    };
    loop {
        tokio::select! {
            op = ops.recv() => {
                let Some(op) = op else { break };
                if let Flow::Exit = actor.handle(op).await {
                    break;
                }
            }
            Some(message) = internal_rx.recv() => actor.submit(message, Vec::new()).await,
            Ok(()) = mcp_changes.changed() => {
                let event = actor.ctx.mcp.servers_event();
                actor.ctx.emit("mcp_servers", event).await;
            }
            _ = async {
                match actor.turn.as_mut() {
                    Some(handle) => { let _ = handle.await; }
                    None => std::future::pending::<()>().await,
                }
            }, if actor.turn.is_some() => {
                actor.turn = None;
                actor.start_next().await;
            }
        }
    }
    if let Some(turn) = actor.turn.take() {
        turn.abort();
        let _ = turn.await;
    }
    actor.ctx.mcp.shutdown().await;
    let _ = actor
        .ctx
        .events
        .send(EngineOutput::Exited { error: None })
        .await;
}

impl Actor {
    fn busy(&self) -> bool {
        self.turn.is_some()
    }

    fn start(&mut self, input: TurnInput) {
        let ctx = self.ctx.clone();
        self.turn = Some(tokio::spawn(ctx.turn(input)));
    }

    async fn emit_pending(&self) {
        let messages: Vec<&String> = self.queue.iter().map(|(m, _)| m).collect();
        self.ctx
            .emit("pending_messages", json!({"messages": messages}))
            .await;
    }

    /// Starts a turn with `content`, or queues it behind the running one.
    async fn submit(&mut self, content: String, images: Vec<String>) {
        if !self.busy() {
            self.start(TurnInput::User(content, images));
            return;
        }
        self.queue.push_back((content, images));
        self.emit_pending().await;
        self.ctx
            .status(&format!("queued: {}", self.queue.len()))
            .await;
    }

    async fn start_next(&mut self) {
        if self.busy() {
            return;
        }
        if let Some((next, images)) = self.queue.pop_front() {
            self.emit_pending().await;
            self.start(TurnInput::User(next, images));
        }
    }

    /// Stops the running turn: its task is aborted (a running command's group is killed
    /// when its future drops) and waiting approvals go.
    async fn stop_turn(&mut self) -> bool {
        let Some(turn) = self.turn.take() else {
            return false;
        };
        turn.abort();
        let _ = turn.await;
        self.ctx.state().pending.clear();
        true
    }

    async fn handle(&mut self, op: Object) -> Flow {
        let name = op.get("op").and_then(Value::as_str).unwrap_or_default();
        let ctx = self.ctx.clone();
        match name {
            "user_message" => {
                let Some(content) = op.get("content").and_then(Value::as_str) else {
                    ctx.error("invalid command: user_message requires content")
                        .await;
                    return Flow::Go;
                };
                let mut attached = Vec::new();
                for image in op
                    .get("images")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let checked = match image.as_str() {
                        Some(raw) => images::check(raw, &ctx.env, &ctx.home.join("uploads"))
                            .map(|p| p.display().to_string()),
                        None => Err("an image must be a path string".to_string()),
                    };
                    match checked {
                        Ok(path) => attached.push(path),
                        Err(why) => {
                            let shown = image
                                .as_str()
                                .map_or_else(|| image.to_string(), str::to_string);
                            ctx.info(format!("image {shown} was not attached: {why}"))
                                .await;
                        }
                    }
                }
                self.submit(content.to_string(), attached).await;
            }
            "command" => {
                let input = op.get("input").and_then(Value::as_str).unwrap_or_default();
                return self.command(input.trim()).await;
            }
            "continue" => {
                if self.busy() {
                    ctx.error("a turn is running; continue works once it has ended")
                        .await;
                } else if ctx.state().messages.is_empty() {
                    ctx.info("there is nothing to continue").await;
                } else {
                    self.start(TurnInput::Continue);
                }
            }
            "steer" => {
                if self.busy() && !self.queue.is_empty() {
                    self.stop_turn().await;
                    ctx.status("steering").await;
                    self.start_next().await;
                }
            }
            "interrupt" => {
                if self.stop_turn().await {
                    ctx.info("request interrupted").await;
                    ctx.status("interrupted").await;
                    ctx.status("ready").await;
                    self.start_next().await;
                }
            }
            "approve" => self.approve(&op).await,
            "set_approval_mode" => self.set_mode(&op).await,
            "set_attended" => self.set_attended(&op).await,
            "decide_action" => self.decide(&op).await,
            "mcp_list" => ctx.emit("mcp_servers", ctx.mcp.servers_event()).await,
            // Saved to config.json and reconnected; the change's `mcp_servers` follows from
            // the manager's subscription.
            "mcp_set" | "mcp_remove" | "mcp_toggle" => {
                if let Err(e) = ctx.mcp.apply(&op).await {
                    ctx.error(e.to_string()).await;
                }
            }
            "shutdown" => return Flow::Exit,
            other => ctx.error(format!("unknown op: {other}")).await,
        }
        Flow::Go
    }

    async fn command(&mut self, input: &str) -> Flow {
        let ctx = self.ctx.clone();
        let mut words = input.split_whitespace();
        let word = words.next().unwrap_or_default();
        let rest: Vec<&str> = words.collect();
        match word {
            "/quit" | "/exit" => return Flow::Exit,
            "/model" => match rest.first() {
                None => {
                    let view = match ctx.config() {
                        Ok(config) => {
                            let active = ctx.model_for(&config);
                            let mut models: Vec<Value> = config
                                .models
                                .iter()
                                .map(|m| {
                                    json!({
                                        "model": m.name,
                                        "active": m.name == active,
                                        "context_window": m.context_window,
                                        "max_output_tokens": m.max_output_tokens,
                                        "reasoning_efforts": [],
                                    })
                                })
                                .collect();
                            if config.entry(&active).is_none() {
                                models.push(json!({
                                    "model": active,
                                    "active": true,
                                    "context_window": config.context_window,
                                    "max_output_tokens": config.max_output_tokens,
                                    "reasoning_efforts": [],
                                }));
                            }
                            json!({"models": models, "active_effort": null})
                        }
                        Err(e) => {
                            ctx.error(e.to_string()).await;
                            return Flow::Go;
                        }
                    };
                    ctx.emit("model_view", view).await;
                }
                Some(name) => {
                    let known = match ctx.config() {
                        Ok(config) => config.entry(name).is_some(),
                        Err(e) => {
                            ctx.error(e.to_string()).await;
                            return Flow::Go;
                        }
                    };
                    if !known {
                        ctx.error(format!(
                            "unknown model {name}: add it to models in config.json to use it"
                        ))
                        .await;
                        return Flow::Go;
                    }
                    ctx.state().model_override = Some((*name).to_string());
                    ctx.emit_model_status(false).await;
                    ctx.info(format!("model: {name}")).await;
                }
            },
            "/compact" => {
                if self.busy() {
                    ctx.error("a turn is running; /compact works once it has ended")
                        .await;
                } else {
                    self.start(TurnInput::Compact);
                }
            }
            "/help" => {
                let list = commands()
                    .as_array()
                    .map(|cmds| {
                        cmds.iter()
                            .map(|c| {
                                format!(
                                    "{} {} — {}",
                                    c["command"].as_str().unwrap_or_default(),
                                    c["args"].as_str().unwrap_or_default(),
                                    c["description"].as_str().unwrap_or_default()
                                )
                            })
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default();
                ctx.info(list).await;
            }
            "" => ctx.error("command requires input").await,
            other => {
                ctx.error(format!("unknown command: {other} (try /help)"))
                    .await
            }
        }
        Flow::Go
    }

    async fn approve(&mut self, op: &Object) {
        let ctx = self.ctx.clone();
        let Some(call_id) = op
            .get("call_id")
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
        else {
            return ctx.error("approve requires call_id").await;
        };
        let allow = match op.get("decision").and_then(Value::as_str) {
            Some("allow") => true,
            Some("deny") => false,
            _ => return ctx.error("approve requires decision: allow or deny").await,
        };
        let hunks = match op.get("hunks") {
            None | Some(Value::Null) => None,
            Some(Value::Array(ids)) if ids.iter().all(Value::is_string) => Some(
                ids.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect::<Vec<_>>(),
            ),
            Some(_) => return ctx.error("hunks must be an array of hunk id strings").await,
        };
        let always = op.get("always").and_then(Value::as_bool).unwrap_or(false);
        let (problem, shown) = {
            let state = ctx.state();
            match state.pending.iter().find(|p| p.call.id == call_id) {
                None => (Some(format!("no approval is waiting for {call_id}")), None),
                Some(p) => {
                    let problem = match (&hunks, p.prepared.edit()) {
                        (Some(_), _) if always => {
                            Some("hunks cannot be combined with always".to_string())
                        }
                        (Some(_), None) => Some(format!(
                            "{call_id} is not a file edit; hunks apply to edits only"
                        )),
                        (Some(ids), Some(edit)) => ids
                            .iter()
                            .find(|id| !edit.hunks.iter().any(|h| &h.id == *id))
                            .map(|id| format!("no hunk {id} in {call_id}")),
                        _ => None,
                    };
                    (problem, Some(card(&p.call, &p.prepared)))
                }
            }
        };
        if let Some(problem) = problem {
            ctx.error(problem).await;
            // Still open: shown again, since the daemon dropped it from its snapshot when
            // the answer went out.
            if let Some(shown) = shown {
                ctx.emit("approval_request", shown).await;
            }
            return;
        }
        let pending = {
            let mut state = ctx.state();
            let pos = state.pending.iter().position(|p| p.call.id == call_id);
            let pending = pos.map(|pos| state.pending.remove(pos));
            if let Some(p) = &pending
                && always
                && allow
            {
                state.always.insert(p.call.name.clone());
            }
            pending
        };
        if let Some(p) = pending {
            let answer = if allow {
                Answer::Allow { hunks }
            } else {
                Answer::Deny
            };
            let _ = p.tx.send(answer);
        }
    }

    async fn set_mode(&mut self, op: &Object) {
        let ctx = self.ctx.clone();
        let Some(name) = op.get("mode").and_then(Value::as_str) else {
            return ctx.error("set_approval_mode requires mode").await;
        };
        let mode = match ApprovalMode::parse(name) {
            Some(ApprovalMode::Plan) => {
                return ctx
                    .error("plan mode is not available in the jucode engine")
                    .await;
            }
            Some(mode) => mode,
            None => {
                return ctx
                    .error(format!(
                        "unknown approval mode `{name}` (expected manual, auto-edit, auto or full-access)"
                    ))
                    .await;
            }
        };
        // Calls waiting for a person that the new mode lets through run now.
        let released: Vec<Pending> = {
            let mut state = ctx.state();
            state.mode = mode;
            let always = state.always.clone();
            let (run, keep): (Vec<Pending>, Vec<Pending>) =
                state.pending.drain(..).partition(|p| {
                    !p.by_rule
                        && matches!(
                            gate(mode, p.prepared.kind(), always.contains(&p.call.name)),
                            Gate::Run { .. }
                        )
                });
            state.pending = keep;
            run
        };
        ctx.status(&format!("approval mode: {}", mode.as_str()))
            .await;
        ctx.emit("approval_mode", json!({"mode": mode.as_str()}))
            .await;
        for p in released {
            let _ = p.tx.send(Answer::Allow { hunks: None });
        }
    }

    async fn set_attended(&mut self, op: &Object) {
        let ctx = self.ctx.clone();
        let Some(attended) = op.get("attended").and_then(Value::as_bool) else {
            return ctx
                .error("set_attended requires attended: true or false")
                .await;
        };
        let waiting: Vec<Pending> = {
            let mut state = ctx.state();
            state.attended = attended;
            if attended {
                Vec::new()
            } else {
                state.pending.drain(..).collect()
            }
        };
        // The deferrals come before `attended` (notes §8.3).
        for p in waiting {
            let answer = match ctx.defer(&p.call, &p.prepared).await {
                Ok(text) => Answer::Deferred(text),
                Err(true) => Answer::Allow { hunks: None },
                Err(false) => Answer::Deny,
            };
            let _ = p.tx.send(answer);
        }
        ctx.emit("attended", json!({"attended": attended})).await;
    }

    async fn decide(&mut self, op: &Object) {
        let ctx = self.ctx.clone();
        let id = op
            .get("action")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let decision = op
            .get("decision")
            .and_then(Value::as_str)
            .filter(|d| *d == "allow" || *d == "deny");
        let (Some(id), Some(decision)) = (id, decision) else {
            return ctx
                .error("decide_action requires action and decision: allow or deny")
                .await;
        };
        let allow = decision == "allow";
        let action = {
            let mut state = ctx.state();
            let pos = state.open_actions.iter().position(|a| a.id == id);
            let action = pos.map(|pos| state.open_actions.remove(pos));
            if let Some(a) = &action {
                state.decided.insert(a.digest.clone(), allow);
                state.decided_ids.insert(a.id.clone());
            }
            (action, state.decided_ids.contains(id))
        };
        let action = match action {
            (Some(action), _) => action,
            // Decided already: the hub sends a decision again when this session announces
            // at its start an action it had decided before a kill; the first one stands.
            (None, true) => return,
            (None, false) => return ctx.error(format!("unknown action: {id}")).await,
        };
        ctx.record(Record::Decided {
            id: action.id.clone(),
            allow,
            at: now_ms(),
        })
        .await;
        if !allow {
            ctx.emit(
                "action_decided",
                json!({"id": action.id, "decision": "deny", "output": null, "is_error": false}),
            )
            .await;
            self.submit(actions::decision_message(&action, None), Vec::new())
                .await;
            return;
        }
        // Allowed: run in the background, then report into the session.
        tokio::spawn(async move {
            let call = ToolCall {
                id: action.call_id.clone(),
                name: action.name.clone(),
                arguments: action.arguments.clone(),
            };
            let (output, is_error) = match ctx.prepare(&call) {
                // Rules may have changed since it was deferred: forbid still never runs.
                Ok(prepared) => match ctx.forbidden(&prepared) {
                    Some(refusal) => (refusal, true),
                    None => {
                        let mode = ctx.state().mode;
                        let sandboxed = ctx.sandboxed(&prepared, runs_sandboxed(&prepared, mode));
                        ctx.execute(&call, &prepared, sandboxed, None).await
                    }
                },
                Err(e) => (e, true),
            };
            ctx.emit(
                "action_decided",
                json!({"id": action.id, "decision": "allow", "output": output, "is_error": is_error}),
            )
            .await;
            let _ = ctx.internal.send(actions::decision_message(
                &action,
                Some((&output, is_error)),
            ));
        });
    }
}
