//! Codex behind the Engine interface: `codex app-server`, JSON-RPC (without `"jsonrpc"`) on its
//! stdio.
//!
//! The session runs one thread: `thread/start` for a new session, `thread/resume` when
//! reopened. Every user message is a `turn/start` carrying the approval mode as it is at that
//! moment (Codex takes the mode per turn); a mode switched mid-turn is announced with
//! `approval_mode_pending` and applies from the next turn. Messages sent mid-turn wait in
//! `pending_messages`; `steer` sends them into the running turn (`turn/steer`).
//!
//! The hub picks a session id before Codex names its thread, so the adapter keeps the pairs in
//! `<jucode home>/daemon/codex-threads.json` (written atomically). A session id that is not in
//! the map is taken to be a thread id itself: that is how a conversation Codex saved on its own
//! (listed by `session_history`) is opened.
//!
//! Besides turns: `/fast` and `/thinking` (service tier and reasoning summary of later turns),
//! `/login` (ChatGPT device code), `mcp_list` / `mcp_reconnect` / `mcp_login` (the list kept
//! current by Codex's startup statuses), and subagent threads feeding `agent_runs`
//! (`codex_agents`; those saved before this process from Codex's rollouts, `codex_saved`). A
//! file change's approval card shows its hunks (`codex_hunks`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use jucode_engine::{EngineError, EngineFactory, EngineHandle, StartSpec};
use jucode_protocol::serve::Event;
use jucode_protocol::{ApprovalMode, Object};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::child::{ChildProc, Input, Spawn, inside};
use crate::codex_agents::{Agents, strings_in};
use crate::turns::{Answer, Approvals, Message, Queue, Sink, Taken, hunk_choice, mode_of};
use crate::{AdapterConfig, EngineOptions, error, event, info, status, text_of, truncate};

const JUCODE_ONLY: &[&str] = &["/rewind", "/tree", "/checkpoint", "/branch", "/trust"];
const MAP_FILE: &str = "codex-threads.json";
/// The service tier Codex's model catalog names "Fast"; `default` is standard speed.
const FAST_TIER: &str = "priority";

/// Starts Codex sessions.
#[derive(Debug, Clone)]
pub struct CodexEngine {
    config: AdapterConfig,
    /// Serialises read-modify-write of the session map between sessions.
    map_lock: Arc<Mutex<()>>,
}

impl CodexEngine {
    pub fn new(config: AdapterConfig) -> CodexEngine {
        CodexEngine {
            config,
            map_lock: Arc::new(Mutex::new(())),
        }
    }

    /// The Codex thread a session runs (the session id itself when it was never mapped).
    pub fn thread_for(&self, session: &str) -> String {
        ThreadMap::path(&self.config)
            .pipe_read()
            .sessions
            .get(session)
            .cloned()
            .unwrap_or_else(|| session.to_string())
    }
}

/// `codex-threads.json`: hub session id → Codex thread id.
#[derive(Debug, Default, Serialize, Deserialize)]
struct ThreadMap {
    #[serde(default)]
    sessions: BTreeMap<String, String>,
}

struct MapPath(PathBuf);

impl ThreadMap {
    fn path(config: &AdapterConfig) -> MapPath {
        MapPath(config.jucode_home.join("daemon").join(MAP_FILE))
    }
}

impl MapPath {
    fn pipe_read(&self) -> ThreadMap {
        match jucode_store::read_json::<ThreadMap>(&self.0) {
            Ok(Some(map)) => map,
            Ok(None) => ThreadMap::default(),
            Err(e) => {
                tracing::warn!("{}: {e}", self.0.display());
                ThreadMap::default()
            }
        }
    }

    fn insert(&self, lock: &Mutex<()>, session: &str, thread: &str) -> Result<(), String> {
        let _guard = lock
            .lock()
            .map_err(|_| "the session map lock is poisoned".to_string())?;
        let mut map = self.pipe_read();
        if map.sessions.get(session).map(String::as_str) == Some(thread) {
            return Ok(());
        }
        map.sessions.insert(session.to_string(), thread.to_string());
        if let Some(dir) = self.0.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        jucode_store::write_json_atomic(&self.0, &map).map_err(|e| e.to_string())
    }
}

impl EngineFactory for CodexEngine {
    fn saved_conversations(&self, cwd: &std::path::Path) -> Vec<jucode_engine::SavedConversation> {
        crate::history::saved_conversations("codex", cwd, &self.config.user_home)
    }

    /// The session is open once its thread is: `thread_open` sends the first `startup`.
    fn opens_at_startup(&self) -> bool {
        true
    }

    fn start(&self, spec: StartSpec) -> Result<EngineHandle, EngineError> {
        let options = EngineOptions::parse(&spec.options)?;
        let program =
            crate::discover::find_binary("codex", "CODEX_BIN", &options, &self.config.user_home)?;
        let resume_thread = spec.resume.then(|| self.thread_for(&spec.session));
        // Until `initialize` names it: where Codex keeps its sessions.
        let codex_home = options
            .env_var("CODEX_HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| self.config.user_home.join(".codex"));
        let (handle, ops, events) = jucode_engine::channel();
        let (input_tx, input_rx) = mpsc::unbounded_channel();
        let mut roots = vec![spec.cwd.clone()];
        roots.extend(spec.extra_dirs.iter().cloned());
        roots.push(self.config.upload_dir());
        let child = ChildProc::spawn(
            Spawn {
                program: &program,
                args: vec!["app-server".into()],
                cwd: &spec.cwd,
                env: &options.env,
                env_remove: &[],
                generation: 1,
                label: "codex".into(),
            },
            input_tx,
        )?;
        let codex = Codex {
            map: ThreadMap::path(&self.config),
            map_lock: self.map_lock.clone(),
            session: spec.session,
            cwd: spec.cwd,
            extra_dirs: spec.extra_dirs,
            image_roots: roots,
            mode: options.mode(),
            model: options.model.clone(),
            provider: None,
            effort: Value::Null,
            service_tier: None,
            fast: None,
            thinking: None,
            resume_thread,
            codex_home,
            child: Some(child),
            sink: Sink::new(events),
            thread: None,
            busy: false,
            turn: None,
            interrupt_asked: false,
            next_mode: None,
            queue: Queue::default(),
            approvals: Approvals::default(),
            requests: HashMap::new(),
            next_id: 0,
            tools: HashMap::new(),
            delta_items: HashSet::new(),
            usage: [0; 4],
            agents: Agents::default(),
            file_changes: HashMap::new(),
            mcp_servers: Vec::new(),
        };
        tokio::spawn(codex.run(ops, input_rx));
        Ok(handle)
    }
}

#[derive(Debug, Clone)]
enum Request {
    Initialize,
    OpenThread,
    TurnStart,
    ModelList,
    Login,
    McpList,
    /// `config/mcpServer/reload` for `mcp_reconnect`: the list follows.
    McpReload,
    /// `mcpServer/oauth/login` for the named server.
    McpLogin(String),
    /// `thread/read` of a subagent's thread for `subagent_transcript`.
    ReadAgent(String),
    /// Anything whose success needs no event.
    Plain(&'static str),
}

#[derive(Debug, Clone)]
enum Kind {
    Command {
        amendment: Option<Value>,
    },
    /// A file change, with the ids of the hunks its card shows.
    File {
        hunks: Vec<String>,
    },
    Permissions,
    Question,
    Elicitation,
}

#[derive(Debug, Clone)]
struct Pending {
    id: Value,
    kind: Kind,
    /// The card as shown, sent again when an answer is refused (the daemon dropped it from
    /// its snapshot when the answer went out).
    shown: Value,
}

struct Codex {
    map: MapPath,
    map_lock: Arc<Mutex<()>>,
    session: String,
    cwd: PathBuf,
    extra_dirs: Vec<PathBuf>,
    image_roots: Vec<PathBuf>,
    mode: ApprovalMode,
    model: Option<String>,
    /// The model provider and reasoning effort the thread opened with.
    provider: Option<String>,
    effort: Value,
    /// The service tier the thread opened with; `fast` is the user's choice, if any.
    service_tier: Option<String>,
    fast: Option<bool>,
    /// Reasoning summaries on or off, when the user chose.
    thinking: Option<bool>,
    resume_thread: Option<String>,
    /// Codex's home (`codexHome` of `initialize`): its saved rollouts are read for subagents.
    codex_home: PathBuf,
    child: Option<ChildProc>,
    sink: Sink,
    /// The open thread, once `thread/start` or `thread/resume` answered.
    thread: Option<String>,
    busy: bool,
    turn: Option<String>,
    /// An interrupt asked before the turn had an id.
    interrupt_asked: bool,
    next_mode: Option<ApprovalMode>,
    queue: Queue,
    approvals: Approvals<Pending>,
    requests: HashMap<u64, Request>,
    next_id: u64,
    /// Tool names by item id, for tool_output.
    tools: HashMap<String, String>,
    /// Agent message items whose text came as deltas.
    delta_items: HashSet<String>,
    /// Token usage of the running turn: input, cached input, output, reasoning.
    usage: [u64; 4],
    /// Subagent threads and their runs.
    agents: Agents,
    /// The changes of file change items still open, by item id (for their approval cards).
    file_changes: HashMap<String, Value>,
    /// The MCP servers as last listed, kept current by startup status notifications.
    mcp_servers: Vec<Value>,
}

impl Codex {
    async fn run(
        mut self,
        mut ops: mpsc::UnboundedReceiver<Object>,
        mut input: mpsc::UnboundedReceiver<Input>,
    ) {
        let init = json!({
            "clientInfo": {"name": "jucode", "title": "jucode daemon", "version": env!("CARGO_PKG_VERSION")},
            "capabilities": {"experimentalApi": false},
        });
        // A failed write means the process is gone: its exit arrives as input below.
        self.request(Request::Initialize, "initialize", init).await;
        crate::child::drive(&mut self, &mut ops, &mut input).await;
    }

    async fn write(&mut self, frame: &Value) -> bool {
        match self.child.as_mut() {
            Some(child) => child.send(frame).await,
            None => false,
        }
    }

    async fn request(&mut self, kind: Request, method: &str, params: Value) -> bool {
        self.next_id += 1;
        let id = self.next_id;
        self.requests.insert(id, kind);
        self.write(&json!({"id": id, "method": method, "params": params}))
            .await
    }

    async fn reply(&mut self, id: Value, result: Value) -> bool {
        self.write(&json!({"id": id, "result": result})).await
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

    /// The approval policy and sandbox policy a turn runs under.
    fn policies(&self) -> (&'static str, Value) {
        let roots: Vec<String> = self
            .extra_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        match self.mode {
            ApprovalMode::Manual | ApprovalMode::Plan => {
                ("on-request", json!({"type": "readOnly"}))
            }
            ApprovalMode::AutoEdit | ApprovalMode::Auto => (
                "on-request",
                json!({"type": "workspaceWrite", "writableRoots": roots, "networkAccess": false}),
            ),
            ApprovalMode::FullAccess => ("never", json!({"type": "dangerFullAccess"})),
        }
    }

    fn sandbox_name(&self) -> &'static str {
        match self.mode {
            ApprovalMode::Manual | ApprovalMode::Plan => "read-only",
            ApprovalMode::AutoEdit | ApprovalMode::Auto => "workspace-write",
            ApprovalMode::FullAccess => "danger-full-access",
        }
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
    async fn mcp_list(&mut self) -> bool {
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

    fn input_items(&self, message: &Message) -> (Vec<Value>, Vec<Event>) {
        let mut items = vec![json!({"type": "text", "text": message.content, "text_elements": []})];
        let mut notes = Vec::new();
        for path in &message.images {
            match inside(std::path::Path::new(path), &self.image_roots) {
                Some(p) => items.push(json!({"type": "localImage", "path": p})),
                None => notes.push(info(format!(
                    "image not attached: {path}: images must be files in the session's directories or uploads"
                ))),
            }
        }
        (items, notes)
    }

    async fn start_turn(&mut self, message: Message) -> bool {
        let Some(thread) = self.thread.clone() else {
            return true;
        };
        let (items, notes) = self.input_items(&message);
        if !self.emit_all(notes).await
            || !self.emit(message.event()).await
            || !self.emit(event("connecting", json!({}))).await
        {
            return false;
        }
        self.busy = true;
        self.turn = None;
        self.interrupt_asked = false;
        self.usage = [0; 4];
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
            let (items, notes) = self.input_items(message);
            input.extend(items);
            events.extend(notes);
            events.push(message.event());
        }
        let params = json!({"threadId": thread, "input": input, "expectedTurnId": turn});
        self.emit_all(events).await
            && self
                .request(Request::Plain("turn/steer"), "turn/steer", params)
                .await
    }

    async fn interrupt(&mut self) -> bool {
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
            Taken::Unknown => {
                return self
                    .emit(error(format!(
                        "no open approval request {}",
                        answer.call_id
                    )))
                    .await;
            }
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

    fn model_status(&self) -> Event {
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

    // ---- frames ----

    async fn handle_frame(&mut self, frame: Value) -> bool {
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
        if let Some(err) = frame.get("error") {
            let message = err
                .get("message")
                .map(text_of)
                .unwrap_or_else(|| err.to_string());
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
                match self.resume_thread.clone() {
                    Some(thread) => {
                        let params = json!({"threadId": thread});
                        self.request(Request::OpenThread, "thread/resume", params)
                            .await
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
                "session_id": self.session,
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
        if self.resume_thread.is_some()
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
        self.next_queued().await
    }

    /// The main thread's collab tool call (spawn, wait, close…): only the runs change.
    async fn collab_call(&mut self, item: &Value) -> bool {
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
    async fn mcp_status(&mut self, params: &Value) -> bool {
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

    async fn runs_changed(&mut self) -> bool {
        let runs = self.agents.event();
        self.sink.state(runs).await
    }

    /// `subagent_transcript`: the child thread as Codex keeps it, when it is one of ours.
    async fn subagent_transcript(&mut self, agent: String) -> bool {
        let params = json!({"threadId": agent, "includeTurns": true});
        self.request(Request::ReadAgent(agent), "thread/read", params)
            .await
    }

    async fn turn_known(&mut self, turn: String) -> bool {
        self.turn = Some(turn);
        if self.interrupt_asked {
            self.interrupt_asked = false;
            return self.interrupt().await;
        }
        true
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

    /// Whether a notification is about our thread (subagents run threads of their own).
    fn ours(&self, params: &Value) -> bool {
        match (params.get("threadId").and_then(Value::as_str), &self.thread) {
            (Some(t), Some(ours)) => t == ours,
            _ => true,
        }
    }

    async fn on_notification(&mut self, method: &str, params: &Value) -> bool {
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
                self.usage[0] += n("inputTokens");
                self.usage[1] += n("cachedInputTokens");
                self.usage[2] += n("outputTokens");
                self.usage[3] += n("reasoningOutputTokens");
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
        let [input, cached, output, reasoning] = self.usage;
        let mut events = vec![event(
            "usage",
            json!({"input_tokens": input, "cached_input_tokens": cached, "output_tokens": output, "reasoning_tokens": reasoning}),
        )];
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
        self.emit_all(events).await && self.next_queued().await
    }

    async fn on_server_request(&mut self, method: &str, id: Value, params: &Value) -> bool {
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

/// The result a Codex prompt gets for an answer.
fn answer_body(kind: &Kind, answer: &Answer) -> Result<Value, String> {
    Ok(match kind {
        Kind::Command { amendment } => {
            let decision = match (
                answer.allow,
                answer.always,
                answer.always_scope.as_deref(),
                amendment,
            ) {
                (false, ..) => json!("decline"),
                (true, true, Some("rule"), Some(amendment)) => {
                    json!({"acceptWithExecpolicyAmendment": {"execpolicy_amendment": amendment}})
                }
                (true, true, ..) => json!("acceptForSession"),
                (true, false, ..) => json!("accept"),
            };
            json!({ "decision": decision })
        }
        Kind::File { .. } | Kind::Permissions => {
            let decision = match (answer.allow, answer.always) {
                (false, _) => "decline",
                (true, true) => "acceptForSession",
                (true, false) => "accept",
            };
            json!({ "decision": decision })
        }
        Kind::Question => {
            if !answer.allow {
                return Err("the user declined to answer".into());
            }
            json!({ "answers": answer.answers.clone().unwrap_or(json!({})) })
        }
        Kind::Elicitation => {
            if answer.allow {
                json!({"action": "accept", "content": answer.answers.clone().unwrap_or(json!({}))})
            } else {
                json!({"action": "decline", "content": null})
            }
        }
    })
}

/// Why a `*/login/completed` notification says the sign-in failed; `None` when it succeeded.
fn sign_in_failure(params: &Value) -> Option<String> {
    if params.get("success").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    let why = params.get("error").filter(|e| !e.is_null()).map(text_of);
    Some(why.unwrap_or_else(|| "not signed in".into()))
}

/// "edit a.rs, b.rs" for a file change card Codex gave no reason for.
fn file_summary(changes: &Value) -> String {
    let files = strings_in(Some(changes), "path");
    if files.is_empty() {
        "apply a file change".into()
    } else {
        truncate(&format!("edit {}", files.join(", ")), 400)
    }
}

fn file_tool_of(changes: &Value) -> &'static str {
    file_tool(&json!({ "changes": changes }))
}

/// `write` for a change that only adds files, `str_replace` otherwise.
fn file_tool(item: &Value) -> &'static str {
    let changes = item.get("changes").and_then(Value::as_array);
    let all_add = changes.is_some_and(|c| {
        !c.is_empty()
            && c.iter().all(|c| {
                c.get("kind")
                    .and_then(|k| k.get("type").or(Some(k)))
                    .and_then(Value::as_str)
                    == Some("add")
            })
    });
    if all_add { "write" } else { "str_replace" }
}

fn mcp_entry(server: &Value) -> Value {
    // `runtimeStatus` is the thread's live connection (null when Codex does not know it yet).
    let status = server
        .get("runtimeStatus")
        .filter(|s| !s.is_null())
        .or(server.get("status"))
        .or(server.get("state"))
        .or(server.get("authStatus"))
        .and_then(Value::as_str)
        .unwrap_or("connected");
    let state = match status {
        "connected" | "ready" | "loggedIn" | "bearerToken" | "unsupported" | "oAuth" => "connected",
        "starting" | "connecting" | "notStarted" => "connecting",
        "disabled" => "disabled",
        _ => "failed",
    };
    let tools: Vec<Value> = match server.get("tools") {
        Some(Value::Object(map)) => map
            .iter()
            .map(|(name, t)| json!({"name": name, "description": t.get("description").map(text_of).unwrap_or_default()}))
            .collect(),
        Some(Value::Array(list)) => list
            .iter()
            .map(|t| json!({"name": t.get("name").map(text_of).unwrap_or_default(), "description": t.get("description").map(text_of).unwrap_or_default()}))
            .collect(),
        _ => Vec::new(),
    };
    let mut entry = json!({"name": server.get("name").map(text_of).unwrap_or_default(), "transport": "codex", "state": state, "tools": tools});
    if state == "failed" {
        entry["error"] = server
            .get("toolsError")
            .filter(|e| !e.is_null())
            .cloned()
            .unwrap_or_else(|| json!(status));
    }
    entry
}

impl crate::child::Driven for Codex {
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
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn answer(allow: bool, always: bool, scope: Option<&str>) -> Answer {
        Answer {
            call_id: "c".into(),
            allow,
            always,
            always_scope: scope.map(str::to_string),
            answers: None,
        }
    }

    #[test]
    fn command_decisions_follow_the_scope() {
        let kind = Kind::Command {
            amendment: Some(json!(["echo", "hi"])),
        };
        assert_eq!(
            answer_body(&kind, &answer(true, false, None)).unwrap(),
            json!({"decision":"accept"})
        );
        assert_eq!(
            answer_body(&kind, &answer(false, false, None)).unwrap(),
            json!({"decision":"decline"})
        );
        assert_eq!(
            answer_body(&kind, &answer(true, true, None)).unwrap(),
            json!({"decision":"acceptForSession"})
        );
        assert_eq!(
            answer_body(&kind, &answer(true, true, Some("rule"))).unwrap(),
            json!({"decision":{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["echo","hi"]}}})
        );
        assert_eq!(
            answer_body(&Kind::Elicitation, &answer(false, false, None)).unwrap(),
            json!({"action":"decline","content":null})
        );
    }

    #[test]
    fn the_thread_map_survives_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let config = AdapterConfig {
            jucode_home: dir.path().to_path_buf(),
            user_home: dir.path().to_path_buf(),
        };
        let engine = CodexEngine::new(config.clone());
        assert_eq!(engine.thread_for("s1"), "s1");
        ThreadMap::path(&config)
            .insert(&engine.map_lock, "s1", "t1")
            .unwrap();
        assert_eq!(CodexEngine::new(config).thread_for("s1"), "t1");
    }
}
