//! An Agent Client Protocol agent behind the Engine interface: `options.command` / `args`,
//! JSON-RPC 2.0 on its stdio, the daemon as the ACP client.
//!
//! ACP agents keep no conversation the daemon can resume, so every start (reopen included)
//! opens a new ACP session under the same jucode session id. The agent's `fs/*` and
//! `terminal/*` requests are answered inside the session's directory only (see
//! `acp_terminal` for the commands it asks the daemon to run).

mod replay;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use jucode_engine::{EngineError, EngineFactory, EngineHandle, StartSpec};
use jucode_protocol::serve::Event;
use jucode_protocol::{ApprovalMode, Object};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::acp_terminal::Terminals;
use crate::child::{ChildProc, Input, Spawn, inside};
use crate::turns::{Answer, Approvals, Image, Message, Queue, Sink, Taken, load_image, mode_of};
use crate::{AdapterConfig, EngineOptions, error, event, info, status, text_of, truncate};

/// The largest file `fs/read_text_file` returns.
const READ_MAX: u64 = 16 * 1024 * 1024;

/// Starts ACP agent sessions.
#[derive(Debug, Clone)]
pub struct AcpEngine {
    config: AdapterConfig,
}

impl AcpEngine {
    pub fn new(config: AdapterConfig) -> AcpEngine {
        AcpEngine { config }
    }
}

impl EngineFactory for AcpEngine {
    /// An ACP session runs `options.command`.
    fn runs_named_program(&self) -> bool {
        true
    }

    fn start(&self, spec: StartSpec) -> Result<EngineHandle, EngineError> {
        let options = EngineOptions::parse(&spec.options)?;
        let command = options.command.clone().ok_or_else(|| {
            EngineError::BadOptions("an ACP session needs options.command".into())
        })?;
        let program = if command.contains('/') {
            PathBuf::from(&command)
        } else {
            let path = options.env_var("PATH").unwrap_or_default();
            which::which_in(&command, Some(path), &spec.cwd)
                .map_err(|_| EngineError::Unavailable(format!("{command} was not found on PATH")))?
        };
        let (handle, ops, events) = jucode_engine::channel();
        let (input_tx, input_rx) = mpsc::unbounded_channel();
        let terminals = Terminals::new(vec![spec.cwd.clone()], input_tx.clone());
        let child = ChildProc::spawn(
            Spawn {
                program: &program,
                args: options.args.clone(),
                cwd: &spec.cwd,
                env: &options.env,
                env_remove: &[],
                generation: 1,
                label: command.clone(),
            },
            input_tx,
        )?;
        let acp = self.session(spec, &options, command, child, terminals, events);
        tokio::spawn(acp.run(ops, input_rx));
        Ok(handle)
    }
}

impl AcpEngine {
    /// The session's state around its running `child`.
    fn session(
        &self,
        spec: StartSpec,
        options: &EngineOptions,
        label: String,
        child: ChildProc,
        terminals: Terminals,
        events: mpsc::Sender<jucode_engine::EngineOutput>,
    ) -> Acp {
        let image_roots = vec![spec.cwd.clone(), self.config.upload_dir()];
        Acp {
            label,
            cwd: spec.cwd,
            image_roots,
            mode: options.mode(),
            child: Some(child),
            sink: Sink::new(events),
            agent_session: None,
            modes: Vec::new(),
            busy: false,
            queue: Queue::default(),
            approvals: Approvals::default(),
            requests: HashMap::new(),
            next_id: 0,
            tools: HashMap::new(),
            in_message: false,
            image_prompts: false,
            opening: true,
            terminals,
            denied: HashSet::new(),
            call_terminals: HashMap::new(),
        }
    }
}

#[derive(Debug, Clone)]
enum Request {
    Initialize,
    NewSession,
    SetMode(ApprovalMode),
    Prompt,
}

#[derive(Debug, Clone)]
struct Permission {
    id: Value,
    options: Vec<Value>,
}

pub(crate) struct Acp {
    label: String,
    cwd: PathBuf,
    image_roots: Vec<PathBuf>,
    mode: ApprovalMode,
    child: Option<ChildProc>,
    sink: Sink,
    agent_session: Option<String>,
    /// Mode ids the agent offers.
    modes: Vec<String>,
    busy: bool,
    queue: Queue,
    approvals: Approvals<Permission>,
    requests: HashMap<u64, Request>,
    next_id: u64,
    /// Tool names by tool call id.
    tools: HashMap<String, String>,
    /// Whether an assistant message is open (chunks follow `assistant_start`).
    in_message: bool,
    image_prompts: bool,
    /// Until the ACP session is open and in its starting mode.
    opening: bool,
    /// Commands the agent runs through the daemon.
    terminals: Terminals,
    /// Tool calls the user refused, until the agent reports them done.
    denied: HashSet<String>,
    /// The terminal a tool call shows, by tool call id.
    call_terminals: HashMap<String, String>,
}

impl Acp {
    async fn run(
        mut self,
        mut ops: mpsc::UnboundedReceiver<Object>,
        mut input: mpsc::UnboundedReceiver<Input>,
    ) {
        self.open().await;
        crate::child::drive(&mut self, &mut ops, &mut input).await;
    }

    /// Sends `initialize`. A failed write means the process is gone: its exit arrives as input.
    async fn open(&mut self) {
        let init = json!({
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true},
            "clientInfo": {"name": "jucode", "title": "jucode daemon", "version": env!("CARGO_PKG_VERSION")},
        });
        self.request(Request::Initialize, "initialize", init).await;
    }

    async fn write(&mut self, frame: Value) -> bool {
        let mut frame = frame;
        frame["jsonrpc"] = json!("2.0");
        match self.child.as_mut() {
            Some(child) => child.send(&frame).await,
            None => false,
        }
    }

    async fn request(&mut self, kind: Request, method: &str, params: Value) -> bool {
        self.next_id += 1;
        let id = self.next_id;
        self.requests.insert(id, kind);
        self.write(json!({"id": id, "method": method, "params": params}))
            .await
    }

    async fn emit(&mut self, event: Event) -> bool {
        self.sink.emit(event).await
    }

    async fn emit_all(&mut self, events: Vec<Event>) -> bool {
        for e in events {
            if !self.emit(e).await {
                return false;
            }
        }
        true
    }

    // ---- ops ----

    async fn handle_op(&mut self, op: Object) -> bool {
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
            // An ACP agent takes its own slash commands as prompt text.
            "command" => {
                let text = op
                    .get("input")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .trim()
                    .to_string();
                return self
                    .user_message(Message {
                        content: text,
                        images: Vec::new(),
                    })
                    .await;
            }
            "interrupt" => return self.interrupt().await,
            "approve" => match Answer::from_op(&op) {
                Ok(answer) => return self.approve(answer).await,
                Err(e) => Err(e),
            },
            "set_approval_mode" => match mode_of(&op) {
                Ok(mode) => return self.set_mode(mode).await,
                Err(e) => Err(e),
            },
            "set_attended" | "snapshot" | "rename" | "tui" => Ok(()),
            _ => Err(format!("{name} is not available in ACP sessions")),
        };
        match result {
            Ok(()) => true,
            Err(message) => self.emit(error(message)).await,
        }
    }

    async fn user_message(&mut self, message: Message) -> bool {
        if self.busy || self.agent_session.is_none() {
            let events = self.queue.push(message);
            return self.emit_all(events).await;
        }
        self.start_turn(message).await
    }

    async fn start_turn(&mut self, message: Message) -> bool {
        let Some(session) = self.agent_session.clone() else {
            return true;
        };
        let mut prompt = vec![json!({"type": "text", "text": message.content})];
        let mut notes = Vec::new();
        let mut refused = Vec::new();
        for path in &message.images {
            if !self.image_prompts {
                refused.push(path.clone());
                notes.push(info(format!(
                    "image not attached: {path}: the agent takes no images"
                )));
                continue;
            }
            match load_image(path, &self.image_roots) {
                Ok(Image::Inline { media_type, data }) => {
                    prompt.push(json!({"type": "image", "data": data, "mimeType": media_type}))
                }
                Ok(Image::Path(p)) => prompt.push(json!({
                    "type": "resource_link", "uri": format!("file://{}", p.display()),
                    "name": p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default(),
                })),
                Err(e) => {
                    refused.push(path.clone());
                    notes.push(info(format!("image not attached: {e}")))
                }
            }
        }
        if !self.emit_all(notes).await
            || !self.emit(message.event_without(&refused)).await
            || !self.emit(event("connecting", json!({}))).await
        {
            return false;
        }
        self.busy = true;
        self.in_message = false;
        self.request(
            Request::Prompt,
            "session/prompt",
            json!({"sessionId": session, "prompt": prompt}),
        )
        .await
    }

    async fn interrupt(&mut self) -> bool {
        let Some(session) = self.agent_session.clone() else {
            return true;
        };
        if !self.busy {
            return true;
        }
        let ok = self
            .write(json!({"method": "session/cancel", "params": {"sessionId": session}}))
            .await;
        // The protocol asks the client to answer open prompts `cancelled`.
        for (_, p) in self.approvals.take_all() {
            self.write(json!({"id": p.id, "result": {"outcome": {"outcome": "cancelled"}}}))
                .await;
        }
        let _ = ok;
        true
    }

    async fn approve(&mut self, answer: Answer) -> bool {
        let permission = match self.approvals.take(&answer.call_id) {
            Taken::Open(p) => p,
            Taken::AlreadyAnswered => return true,
            Taken::Unknown => {
                return self
                    .emit(error(format!(
                        "no open approval request {}",
                        answer.call_id
                    )))
                    .await;
            }
        };
        if !answer.allow {
            self.denied.insert(answer.call_id.clone());
        }
        let outcome = match pick_option(&permission.options, answer.allow, answer.always) {
            Some(id) => json!({"outcome": "selected", "optionId": id}),
            None => json!({"outcome": "cancelled"}),
        };
        self.write(json!({"id": permission.id, "result": {"outcome": outcome}}))
            .await
    }

    async fn set_mode(&mut self, mode: ApprovalMode) -> bool {
        self.mode = mode;
        match (mode_id(mode), self.agent_session.clone()) {
            (id, Some(session)) if self.modes.iter().any(|m| m == id) => {
                let params = json!({"sessionId": session, "modeId": id});
                self.request(Request::SetMode(mode), "session/set_mode", params)
                    .await
            }
            _ => {
                self.emit(error(format!("the agent offers no {} mode", mode.as_str())))
                    .await
            }
        }
    }

    // ---- frames ----

    async fn handle_frame(&mut self, frame: Value) -> bool {
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
        if let Some(err) = frame.get("error") {
            let message = err
                .get("message")
                .map(text_of)
                .unwrap_or_else(|| err.to_string());
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

/// The terminal a tool call's content embeds.
fn embedded_terminal(update: &Value) -> Option<String> {
    update
        .get("content")
        .and_then(Value::as_array)?
        .iter()
        .find(|b| b.get("type").and_then(Value::as_str) == Some("terminal"))
        .and_then(|b| b.get("terminalId").and_then(Value::as_str))
        .map(str::to_string)
}

/// The ACP mode id for an approval mode (the ids Claude-backed agents use; other agents'
/// modes are taken when their ids match).
fn mode_id(mode: ApprovalMode) -> &'static str {
    match mode {
        ApprovalMode::Manual => "default",
        ApprovalMode::AutoEdit => "acceptEdits",
        ApprovalMode::Auto => "auto",
        ApprovalMode::Plan => "plan",
        ApprovalMode::FullAccess => "bypassPermissions",
    }
}

/// The permission option for an answer, chosen by kind (option ids differ between agents).
fn pick_option(options: &[Value], allow: bool, always: bool) -> Option<String> {
    let kinds: &[&str] = match (allow, always) {
        (true, true) => &["allow_always", "allow_once"],
        (true, false) => &["allow_once", "allow_always"],
        (false, _) => &["reject_once", "reject_always"],
    };
    kinds.iter().find_map(|kind| {
        options
            .iter()
            .find(|o| o.get("kind").and_then(Value::as_str) == Some(kind))
            .and_then(|o| o.get("optionId").and_then(Value::as_str))
            .map(str::to_string)
    })
}

/// The serve-v2 tool name for an ACP tool call: the Claude tool name a Claude-backed agent
/// reports, else the call's kind.
fn tool_name(call: &Value) -> String {
    if let Some(name) = call
        .pointer("/_meta/claudeCode/toolName")
        .and_then(Value::as_str)
    {
        return crate::claude_tool_name(name);
    }
    match call.get("kind").and_then(Value::as_str).unwrap_or("other") {
        "execute" => "bash",
        "edit" => "str_replace",
        "read" => "read",
        "search" => "ripgrep",
        "fetch" => "web_fetch",
        other => other,
    }
    .to_string()
}

impl crate::child::Driven for Acp {
    async fn on_op(&mut self, op: Object) -> bool {
        self.handle_op(op).await
    }

    async fn on_frame(&mut self, frame: Value) -> bool {
        self.handle_frame(frame).await
    }

    fn child(&mut self) -> &mut Option<ChildProc> {
        &mut self.child
    }

    fn sink(&mut self) -> &mut Sink {
        &mut self.sink
    }

    async fn on_local(&mut self, message: Value) -> bool {
        if let Some(name) = message.get("terminal_exited").and_then(Value::as_str) {
            for (id, result) in self.terminals.exited(name) {
                if !self.write(json!({"id": id, "result": result})).await {
                    return true;
                }
            }
        }
        true
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn options_are_picked_by_kind() {
        let options = vec![
            json!({"optionId":"allow-once","kind":"allow_once"}),
            json!({"optionId":"reject","kind":"reject_once"}),
        ];
        assert_eq!(
            pick_option(&options, true, false).as_deref(),
            Some("allow-once")
        );
        assert_eq!(
            pick_option(&options, true, true).as_deref(),
            Some("allow-once")
        );
        assert_eq!(
            pick_option(&options, false, false).as_deref(),
            Some("reject")
        );
        assert_eq!(pick_option(&[], false, false), None);
    }

    #[test]
    fn tool_names_come_from_claude_names_or_kinds() {
        assert_eq!(
            tool_name(&json!({"_meta":{"claudeCode":{"toolName":"Bash"}},"kind":"execute"})),
            "bash"
        );
        assert_eq!(tool_name(&json!({"kind":"edit"})), "str_replace");
        assert_eq!(tool_name(&json!({})), "other");
    }
}
