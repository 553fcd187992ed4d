//! Codex behind the Engine interface: `codex app-server`, JSON-RPC (without `"jsonrpc"`) on its
//! stdio.
//!
//! The session runs one thread: `thread/start` for a new session, `thread/resume` when
//! reopened (`thread/fork` after `set_gateway`, see `restart.rs`). Every user message is a
//! `turn/start` carrying the approval mode as it is at that moment (Codex takes the mode per
//! turn); a mode switched mid-turn is announced with `approval_mode_pending` and applies from
//! the next turn. Messages sent mid-turn wait in `pending_messages`; `steer` sends them into
//! the running turn (`turn/steer`).
//!
//! A new session is named after its thread: `startup` carries the thread id as `session_id`
//! and the hub takes it (`names_its_session`). Sessions made before that kept a hub-chosen id,
//! paired with its thread in `<jucode home>/daemon/codex-threads.json` (still written, written
//! atomically); a session id that is not in the map is taken to be a thread id itself, which is
//! also how a conversation Codex saved on its own (listed by `session_history`) is opened.
//!
//! Besides turns: `/fast` and `/thinking` (service tier and reasoning summary of later turns),
//! `/login` (ChatGPT device code), `mcp_list` / `mcp_reconnect` / `mcp_login` (the list kept
//! current by Codex's startup statuses), and subagent threads feeding `agent_runs`
//! (`codex_agents`; those saved before this process from Codex's rollouts, `codex_saved`). A
//! file change's approval card shows its hunks (`codex_hunks`).
//!
//! This file holds the session's state and its start; `ops` turns client ops into requests,
//! `frames` handles Codex's replies and `notifications` its notifications and prompts.

mod frames;
mod notifications;
mod ops;
mod replay;
mod restart;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use jucode_engine::{EngineError, EngineFactory, EngineHandle, StartSpec};
use jucode_protocol::serve::{Event, TranscriptItem};
use jucode_protocol::{ApprovalMode, Object};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::agent_tools::{self, AgentTools};
use crate::child::{ChildProc, Input, inside};
use crate::codex_agents::{Agents, strings_in};
use crate::turns::{
    Answer, Approvals, Message, Queue, Sink, Taken, hunk_choice, mode_of, no_open_approval,
};
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

    /// The rollout of the session's thread, where Codex records each user message as its
    /// turn starts; the adapter sends `turn/start` only after echoing the message.
    fn saved_transcript(&self, session: &str) -> Option<Vec<TranscriptItem>> {
        if session.is_empty() || session.contains(['/', '\\']) || session.starts_with('.') {
            return None;
        }
        let codex_home = std::env::var_os("CODEX_HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| self.config.user_home.join(".codex"));
        let thread = self.thread_for(session);
        let path = crate::history::codex_rollout_path(&codex_home, &thread)?;
        Some(crate::history::codex_transcript(&path))
    }

    fn transcript_is_durable(&self) -> bool {
        true
    }

    fn tui_command(
        &self,
        spec: &jucode_engine::TuiSpec,
    ) -> Option<Result<jucode_engine::TuiCommand, EngineError>> {
        let options = EngineOptions::default();
        let found =
            crate::discover::find_binary("codex", "CODEX_BIN", &options, &self.config.user_home);
        let thread = self.thread_for(&spec.session);
        let saved = self
            .saved_conversations(&spec.cwd)
            .iter()
            .any(|c| c.session == thread);
        let thread = saved.then_some(thread.as_str());
        Some(found.and_then(|program| {
            let mut cmd = crate::tui::codex(program, spec, thread);
            if spec.gateway {
                let (overrides, key) =
                    crate::gateway::codex_overrides(crate::gateway::endpoint(&self.config)?);
                // Before `resume`: the top-level command takes `-c` for every subcommand.
                cmd.args.splice(0..0, overrides);
                cmd.env.push(key);
            }
            Ok(cmd)
        }))
    }

    /// A plain `codex` began a thread of its own: the newest one that was not there before is
    /// this session's from now on.
    fn tui_finished(
        &self,
        spec: &jucode_engine::TuiSpec,
        before: &[jucode_engine::SavedConversation],
    ) {
        let thread = self.thread_for(&spec.session);
        let now = self.saved_conversations(&spec.cwd);
        if now.iter().any(|c| c.session == thread) {
            return;
        }
        let Some(new) = now
            .iter()
            .filter(|c| !before.iter().any(|b| b.session == c.session))
            .max_by_key(|c| c.updated_at)
        else {
            return;
        };
        if let Err(e) =
            ThreadMap::path(&self.config).insert(&self.map_lock, &spec.session, &new.session)
        {
            tracing::warn!(
                session = spec.session,
                "could not record the TUI's thread: {e}"
            );
        }
    }

    /// `-c` overrides and the key in the process's environment.
    fn takes_gateway(&self) -> bool {
        true
    }

    /// Codex keeps thread names; `rename` sets one.
    fn keeps_titles(&self) -> bool {
        true
    }

    /// A new session's id is its thread's: `startup` names the thread in `session_id`.
    fn names_its_session(&self) -> bool {
        true
    }

    /// The session is open once its thread is: `thread_open` sends the first `startup`.
    fn opens_at_startup(&self) -> bool {
        true
    }

    fn start(&self, spec: StartSpec) -> Result<EngineHandle, EngineError> {
        let (handle, ops, events) = jucode_engine::channel();
        let (input_tx, input_rx) = mpsc::unbounded_channel();
        let mut codex = self.session(spec, None, events, input_tx)?;
        codex.child = Some(codex.launch.spawn(&codex.cwd, codex.gateway, 1)?);
        tokio::spawn(codex.run(ops, input_rx));
        Ok(handle)
    }
}

impl CodexEngine {
    /// The session's state before its app-server starts. `program` given: no search for
    /// the CLI.
    fn session(
        &self,
        spec: StartSpec,
        program: Option<PathBuf>,
        events: mpsc::Sender<jucode_engine::EngineOutput>,
        input_tx: mpsc::UnboundedSender<Input>,
    ) -> Result<Codex, EngineError> {
        let options = EngineOptions::parse(&spec.options)?;
        let program = match program {
            Some(program) => program,
            None => crate::discover::find_binary(
                "codex",
                "CODEX_BIN",
                &options,
                &self.config.user_home,
            )?,
        };
        let resume_thread = spec.resume.then(|| self.thread_for(&spec.session));
        // Until `initialize` names it: where Codex keeps its sessions.
        let codex_home = options
            .env_var("CODEX_HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| self.config.user_home.join(".codex"));
        let mut roots = vec![spec.cwd.clone()];
        roots.extend(spec.extra_dirs.iter().cloned());
        roots.push(self.config.upload_dir());
        let agent = AgentTools::of(&spec);
        // An agent's MCP server is named in `-c` overrides for this process only; its
        // variables (the capability) go in this process's environment, forwarded by name.
        let mut args = vec!["app-server".to_string()];
        let mut env = options.env.clone();
        if let Some(agent) = &agent {
            args.extend(agent_tools::codex_overrides(&agent.mcp));
            env.retain(|(name, _)| !agent.mcp.env.contains_key(name));
            env.extend(agent.mcp.env.clone());
        }
        let gateway = crate::gateway::requested(&spec.options)?;
        if gateway {
            crate::gateway::endpoint(&self.config)?;
        }
        let launch = restart::Launch {
            program,
            args,
            env,
            endpoint: self.config.gateway.clone(),
            input: input_tx,
        };
        Ok(Codex {
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
            child: None,
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
            usage: None,
            agents: Agents::default(),
            file_changes: HashMap::new(),
            mcp_servers: Vec::new(),
            agent,
            launch,
            gateway,
            restart: restart::Restart::None,
            reopening: false,
        })
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

pub(crate) struct Codex {
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
    /// Token usage of the running turn (input, cached input, cache-write input, output,
    /// reasoning); `None` until Codex reports some, so a turn without it is not zero.
    usage: Option<[u64; 5]>,
    /// Subagent threads and their runs.
    agents: Agents,
    /// The changes of file change items still open, by item id (for their approval cards).
    file_changes: HashMap<String, Value>,
    /// The MCP servers as last listed, kept current by startup status notifications.
    mcp_servers: Vec<Value>,
    /// A long-lived agent's tools; its prompt goes in the thread's developer instructions.
    agent: Option<AgentTools>,
    /// How to start the app-server again (`set_gateway`).
    launch: restart::Launch,
    /// Whether the running process talks to the JuCode gateway.
    gateway: bool,
    restart: restart::Restart,
    /// The thread is being reopened by a process restarted for `set_gateway` (as a fork): the
    /// hub already has its transcript.
    reopening: bool,
}

impl Codex {
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
        let init = restart::initialize_params();
        self.request(Request::Initialize, "initialize", init).await;
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

    async fn between(&mut self, input: &mut mpsc::UnboundedReceiver<Input>) -> bool {
        self.restart_if_due(input).await
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
            gateway: None,
        };
        let engine = CodexEngine::new(config.clone());
        assert_eq!(engine.thread_for("s1"), "s1");
        ThreadMap::path(&config)
            .insert(&engine.map_lock, "s1", "t1")
            .unwrap();
        assert_eq!(CodexEngine::new(config).thread_for("s1"), "t1");
    }
}
