//! Hosted sessions: their state and log ([`log`]), the snapshot a watcher gets ([`view`]),
//! the session ops ([`ops`]), ops forwarded to a session's engine ([`forward`]), starting an
//! engine ([`engine`]) and the task that carries its events ([`pump`]).

mod agent;
mod engine;
mod forward;
pub(crate) mod gateway;
mod log;
mod ops;
mod pump;
mod tui;
mod view;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use jucode_protocol::Object;
use jucode_protocol::daemon::{DaemonEvent, HistoryRow, SessionInfo, SessionsOp};
use jucode_store::{JsonlLog, StateDir, StoreError};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::clients::ClientId;
use crate::cx::OpCx;
use crate::error::{IoError, OpError};
use crate::paths::PathError;
use crate::{Auth, HubError};

pub(crate) use engine::SessionState;
pub(crate) use forward::forward;
use log::Record;
pub(crate) use log::default_engine;
use view::View;

/// How long an auto title may be (first line of the first message).
const TITLE_CHARS: usize = 40;

/// Why a session op failed; the texts are the protocol's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    #[error("unknown session {0}")]
    Unknown(String),
    #[error("unknown session {0}; to open a conversation saved in a directory, also send its cwd")]
    UnknownNeedsCwd(String),
    #[error("{0:?} is not a session id")]
    BadId(String),
    #[error("session {0} is not open")]
    NotOpen(String),
    #[error("session {0} is not open; send session_open first")]
    NotOpenSendOpen(String),
    #[error("session {0} is stopping")]
    Stopping(String),
    #[error("the daemon sets attended from watch/unwatch")]
    SetAttended,
    #[error(
        "a hosted session keeps one conversation: use session_create or session_open instead of {0}"
    )]
    OneConversation(String),
    #[error("decide_action requires action and decision: allow or deny")]
    DecideUsage,
    #[error("the session of action {0} is unknown")]
    ActionSessionUnknown(String),
    #[error("could not save the session: {0}")]
    Save(StoreError),
    #[error("unknown engine `{name}` (expected {expected})")]
    UnknownEngine { name: String, expected: String },
    #[error("{0}")]
    EngineUnavailable(&'static str),
    #[error(transparent)]
    Engine(#[from] jucode_engine::EngineError),
    #[error("unknown agent {0}")]
    UnknownAgent(String),
    #[error("agent {agent}: its directory {cwd} does not exist")]
    AgentCwd { agent: String, cwd: String },
    #[error("session_create needs cwd, agent or chat: true")]
    CreateNeedsCwd,
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Path(#[from] PathError),
    #[error(transparent)]
    Hub(#[from] HubError),
    #[error("only the desktop can choose what an engine runs")]
    ProgramChoice,
    #[error("options.env must be an object of strings")]
    EnvNotObject,
    #[error("options.env: {0} is not an allowed variable name")]
    EnvName(String),
    #[error("options.env: {0} must be a string")]
    EnvValue(String),
    #[error("session {0} is in its TUI: only watch (its snapshot) is answered until the TUI exits")]
    InTui(String),
    #[error("session_tui: an agent's session stays in the daemon")]
    AgentTui,
    #[error("session {0} is in a turn: send force: true to stop it and open the TUI")]
    TuiBusy(String),
    #[error("session_tui: the {0} engine has no terminal interface")]
    NoTui(String),
    #[error("session_tui: {0}")]
    TuiUnavailable(String),
    #[error("the {0} engine cannot run through the JuCode gateway (Claude Code and Codex can)")]
    GatewayEngine(String),
    #[error("options.jucode_gateway must be true or false")]
    GatewayNotBool,
    #[error("set_gateway: not signed in to JuCode (no gateway login in ~/.jucode/auth.json)")]
    GatewayNoLogin,
}

struct Running {
    ops: mpsc::UnboundedSender<Object>,
    generation: u64,
    /// Set once the engine has stopped.
    done: watch::Sender<bool>,
}

pub(crate) struct Session {
    id: String,
    cwd: PathBuf,
    engine: String,
    chat: bool,
    agent: Option<String>,
    client_title: Option<String>,
    auto_title: Option<String>,
    archived: bool,
    hidden: bool,
    group: Option<Value>,
    created_at: u64,
    updated_at: u64,
    running: Option<Running>,
    watchers: BTreeSet<ClientId>,
    busy: bool,
    view: View,
    /// The reply to the op that created it, held until the engine's first `startup` (see
    /// `EngineFactory::opens_at_startup`).
    created: Option<Created>,
    /// Set while the conversation is in its engine's TUI (`session_tui`).
    tui: Option<tui::TuiSlot>,
    /// Runs through the JuCode gateway (`jucode_gateway`), as it last ran.
    pub(crate) gateway: bool,
    /// Its latest turn reported an error (cleared when the next turn starts).
    failed: bool,
}

/// Who asked for a new session and how they are answered once it has its id.
pub(crate) struct Created {
    /// Who gets the reply; `None` when nobody waits for it (the hub started the session).
    pub(crate) client: Option<ClientId>,
    pub(crate) id: Option<Value>,
    /// The reply, given the session's id: `session_created`, or the op's own.
    pub(crate) reply: fn(String) -> DaemonEvent,
}

impl Created {
    /// A reply to `session_create`.
    pub(crate) fn session_create(client: ClientId, id: Option<Value>) -> Created {
        Created {
            client: Some(client),
            id,
            reply: |session| DaemonEvent::SessionCreated { session },
        }
    }

    /// No client waits for the session (the hub starts it itself: a dispatch's task).
    pub(crate) fn nobody() -> Created {
        Created {
            client: None,
            id: None,
            reply: |session| DaemonEvent::SessionCreated { session },
        }
    }
}

/// What a requirement's list shows of one of its sessions.
pub(crate) struct SessionFacts {
    pub(crate) busy: bool,
    /// An approval request is open.
    pub(crate) waiting: bool,
    pub(crate) failed: bool,
    /// The conversation's latest assistant text.
    pub(crate) last_reply: Option<String>,
}

impl Session {
    fn new(
        id: String,
        cwd: PathBuf,
        engine: String,
        chat: bool,
        agent: Option<String>,
        at: u64,
    ) -> Session {
        Session {
            id,
            cwd,
            engine,
            chat,
            agent,
            client_title: None,
            auto_title: None,
            archived: false,
            hidden: false,
            group: None,
            created_at: at,
            updated_at: at,
            running: None,
            watchers: BTreeSet::new(),
            busy: false,
            view: View::default(),
            created: None,
            tui: None,
            gateway: false,
            failed: false,
        }
    }

    fn title(&self) -> String {
        self.client_title
            .clone()
            .or_else(|| self.auto_title.clone())
            .unwrap_or_default()
    }

    fn info(&self) -> SessionInfo {
        SessionInfo {
            session: self.id.clone(),
            cwd: self.cwd.display().to_string(),
            engine: self.engine.clone(),
            chat: self.chat,
            agent: self.agent.clone(),
            open: self.running.is_some(),
            watchers: self.watchers.len(),
            title: self.title(),
            archived: self.archived,
            hidden: self.hidden,
            group: self.group.clone(),
            busy: self.busy,
            created_at: self.created_at,
            updated_at: self.updated_at,
            gateway: self.gateway,
        }
    }

    fn send(&self, op: Object) {
        if let Some(running) = &self.running {
            let _ = running.ops.send(op);
        }
    }

    fn apply_meta(
        &mut self,
        title: Option<String>,
        archived: Option<bool>,
        hidden: Option<bool>,
        group: Option<Value>,
    ) {
        if let Some(title) = title {
            // An empty title goes back to the engine's label.
            self.client_title = (!title.trim().is_empty()).then_some(title);
        }
        if let Some(archived) = archived {
            self.archived = archived;
        }
        if let Some(hidden) = hidden {
            self.hidden = hidden;
        }
        if let Some(group) = group {
            self.group = (!group.is_null()).then_some(group);
        }
    }
}

pub(crate) struct Sessions {
    log: JsonlLog,
    map: HashMap<String, Session>,
    /// The ids engines replaced at start-up (`renamed` records): the first id → the engine's.
    /// Other logs (`messages.jsonl`, `schedules.json`) keep the first id a delivery went to.
    renamed: HashMap<String, String>,
    next_generation: u64,
    shutting_down: bool,
}

impl Sessions {
    /// Every known session's directory (open or not), for the rule of known directories.
    pub(crate) fn cwds(&self) -> Vec<PathBuf> {
        self.map.values().map(|s| s.cwd.clone()).collect()
    }

    pub(crate) fn open(store: &StateDir) -> Result<Sessions, HubError> {
        let (log, records) = store.open_log::<Record>("sessions.jsonl")?;
        let renamed = log::renames(&records);
        Ok(Sessions {
            log,
            map: log::fold(records),
            renamed,
            next_generation: 0,
            shutting_down: false,
        })
    }

    /// The id `session` goes by now: itself, or the name its engine gave it.
    pub(crate) fn current_id<'a>(&'a self, session: &'a str) -> &'a str {
        let mut id = session;
        // Bounded: a renamed id is fresh, but a hand-edited log could hold a cycle.
        for _ in 0..8 {
            match self.renamed.get(id) {
                Some(to) => id = to,
                None => break,
            }
        }
        id
    }

    fn get(&self, session: &str) -> Result<&Session, SessionError> {
        self.map
            .get(session)
            .ok_or_else(|| SessionError::Unknown(session.to_string()))
    }

    /// Refuses an op on a session whose conversation is in its TUI.
    /// The cwd of `session`, if it is known.
    pub(crate) fn cwd_of(&self, session: &str) -> Option<&Path> {
        self.map
            .get(self.current_id(session))
            .map(|s| s.cwd.as_path())
    }

    /// The first and latest user requests `session`'s view holds and its latest assistant
    /// text (what the title model rewrites a requirement's progress from).
    pub(crate) fn requests_and_reply(&self, session: &str) -> Option<(String, String, String)> {
        use jucode_protocol::serve::TranscriptItem;
        let s = self.map.get(self.current_id(session))?;
        let mut users = s.view.transcript.iter().filter_map(|item| match item {
            TranscriptItem::User { content, .. } => Some(content.clone()),
            _ => None,
        });
        let first = users.next().unwrap_or_default();
        let latest = users.next_back().unwrap_or_else(|| first.clone());
        let reply = self.facts(session)?.last_reply.unwrap_or_default();
        Some((first, latest, reply))
    }

    /// The state of `session` a requirement shows, if it is known.
    pub(crate) fn facts(&self, session: &str) -> Option<SessionFacts> {
        let s = self.map.get(self.current_id(session))?;
        let last_reply = s.view.transcript.iter().rev().find_map(|item| match item {
            jucode_protocol::serve::TranscriptItem::Assistant { content }
                if !content.is_empty() =>
            {
                Some(content.clone())
            }
            _ => None,
        });
        Some(SessionFacts {
            busy: s.busy,
            waiting: !s.view.approvals.is_empty(),
            failed: s.failed,
            last_reply,
        })
    }

    pub(crate) fn not_in_tui(&self, session: &str) -> Result<(), SessionError> {
        match self.map.get(session) {
            Some(s) if s.tui.is_some() => Err(SessionError::InTui(session.to_string())),
            _ => Ok(()),
        }
    }

    fn get_mut(&mut self, session: &str) -> Result<&mut Session, SessionError> {
        self.map
            .get_mut(session)
            .ok_or_else(|| SessionError::Unknown(session.to_string()))
    }

    fn sorted(&self) -> Vec<&Session> {
        let mut list: Vec<&Session> = self.map.values().filter(|s| !s.hidden).collect();
        list.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(a.id.cmp(&b.id)));
        list
    }

    pub(crate) fn list_event(&self) -> DaemonEvent {
        DaemonEvent::Sessions {
            sessions: self.sorted().into_iter().map(Session::info).collect(),
        }
    }

    /// `session_history`: the daemon's sessions in `cwd` and the conversations engines saved
    /// there on their own (`saved`, by engine), newest first; hidden sessions left out.
    fn history(
        &self,
        cwd: &str,
        saved: Vec<(String, jucode_engine::SavedConversation)>,
    ) -> DaemonEvent {
        let wanted = std::fs::canonicalize(cwd).unwrap_or_else(|_| PathBuf::from(cwd));
        let mut rows: Vec<HistoryRow> = self
            .sorted()
            .into_iter()
            .filter(|s| s.cwd == wanted || s.cwd == Path::new(cwd))
            .map(|s| HistoryRow {
                session: s.id.clone(),
                title: s.title(),
                updated_at: s.updated_at,
                entries: s.view.dropped + s.view.transcript.len(),
                archived: s.archived,
                agent: s.agent.clone(),
                engine: s.engine.clone(),
                open: s.running.is_some(),
            })
            .collect();
        for (engine, c) in saved {
            if self.map.contains_key(&c.session) {
                continue;
            }
            rows.push(HistoryRow {
                session: c.session,
                title: c.title,
                updated_at: c.updated_at,
                entries: c.entries,
                archived: false,
                agent: None,
                engine,
                open: false,
            });
        }
        rows.sort_by_key(|row| std::cmp::Reverse(row.updated_at));
        DaemonEvent::SessionHistory {
            cwd: cwd.to_string(),
            sessions: rows,
        }
    }

    /// The sessions of `agent` (of every agent with `None`) as `session_list` shows them,
    /// newest first.
    pub(crate) fn agent_sessions(&self, agent: Option<&str>) -> Vec<SessionInfo> {
        self.sorted()
            .into_iter()
            .filter(|s| match (agent, s.agent.as_deref()) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(want), Some(has)) => want == has,
            })
            .map(Session::info)
            .collect()
    }

    /// Whether any session (hidden ones too) is in a turn.
    pub(crate) fn any_in_turn(&self) -> bool {
        self.map.values().any(|s| s.busy)
    }

    /// Whether a session of `agent` (hidden ones too) is in a turn.
    pub(crate) fn agent_in_turn(&self, agent: &str) -> bool {
        self.map
            .values()
            .any(|s| s.busy && s.agent.as_deref() == Some(agent))
    }

    /// Asks every open session of `agent` to stop, as `session_close` does (each one's
    /// `session_closed` follows once its engine is gone).
    pub(crate) fn close_agent_sessions(&self, agent: &str) {
        for s in self.map.values() {
            if s.agent.as_deref() == Some(agent) {
                s.send(shutdown_op());
            }
        }
    }

    /// Ends `client`'s watches; a session left with no watcher becomes unattended. Returns
    /// whether any session lost a watcher (its `watchers` count changed).
    pub(crate) fn unwatch_all(&mut self, client: ClientId) -> bool {
        let mut changed = false;
        for s in self.map.values_mut() {
            if s.watchers.remove(&client) {
                changed = true;
                if s.watchers.is_empty() {
                    s.send(set_attended(false));
                }
            }
        }
        changed
    }

    /// Sends `op` to every open session whose engine `wants` (by engine name).
    pub(crate) fn send_where(&self, wants: impl Fn(&str) -> bool, op: &Object) {
        for s in self.map.values().filter(|s| wants(&s.engine)) {
            s.send(op.clone());
        }
    }

    /// Asks every engine to stop; returns a receiver per engine that turns true once stopped.
    pub(crate) fn stop_all(&mut self) -> Vec<watch::Receiver<bool>> {
        self.shutting_down = true;
        let mut pending = Vec::new();
        for s in self.map.values_mut() {
            if let Some(running) = &s.running {
                let _ = running.ops.send(shutdown_op());
                pending.push(running.done.subscribe());
            }
        }
        pending
    }

    /// Takes `session` out of the archive (`item_reopen` of one of its items), recorded as
    /// a `meta` record. Returns whether it was archived.
    pub(crate) fn unarchive(&mut self, session: &str, at: u64) -> Result<bool, SessionError> {
        if !self.map.get(session).is_some_and(|s| s.archived) {
            return Ok(false);
        }
        self.append(&Record::Meta {
            session: session.to_string(),
            title: None,
            archived: Some(false),
            hidden: None,
            group: None,
            at,
        })?;
        if let Some(s) = self.map.get_mut(session) {
            s.archived = false;
            s.updated_at = at;
        }
        Ok(true)
    }

    /// Asks the session's engine to stop (its close follows from the engine pump).
    pub(crate) fn close(&self, session: &str) {
        self.deliver(session, shutdown_op());
    }

    fn append(&mut self, record: &Record) -> Result<(), SessionError> {
        self.log.append(record).map_err(SessionError::Save)
    }
}

/// Answers the session ops.
pub(crate) async fn handle(cx: &OpCx<'_>, op: SessionsOp) -> Result<(), OpError> {
    match op {
        SessionsOp::SessionList => {
            let event = cx.hub.lock().sessions.list_event();
            cx.reply(event);
        }
        SessionsOp::SessionHistory { cwd } => ops::history(cx, cwd).await,
        SessionsOp::SessionMeta {
            session,
            title,
            archived,
            hidden,
            group,
        } => ops::meta(cx, &session, title, archived, hidden, group)?,
        SessionsOp::SessionCreate {
            cwd,
            engine,
            options,
            agent,
            chat,
        } => ops::create(
            cx,
            ops::CreateRequest {
                cwd,
                engine,
                options: options.unwrap_or_default(),
                agent,
                chat,
            },
        )?,
        SessionsOp::SessionOpen {
            session,
            cwd,
            engine,
            options,
        } => {
            ops::open(
                cx,
                ops::OpenRequest {
                    session,
                    cwd,
                    engine,
                    options: options.unwrap_or_default(),
                },
            )
            .await?
        }
        SessionsOp::SessionClose { session } => ops::close(cx.hub, &session)?,
        SessionsOp::Watch { session } => ops::watch(cx, &session, true)?,
        SessionsOp::Unwatch { session } => ops::watch(cx, &session, false)?,
        SessionsOp::SessionTui {
            session,
            cols,
            rows,
            force,
        } => {
            tui::session_tui(
                cx,
                tui::TuiRequest {
                    session,
                    cols,
                    rows,
                    force,
                },
            )
            .await?
        }
    }
    Ok(())
}

pub(crate) fn set_attended(attended: bool) -> Object {
    let mut op = Object::new();
    op.insert("op".into(), Value::String("set_attended".into()));
    op.insert("attended".into(), Value::Bool(attended));
    op
}

fn shutdown_op() -> Object {
    let mut op = Object::new();
    op.insert("op".into(), Value::String("shutdown".into()));
    op
}

/// The first line of `content`, at most [`TITLE_CHARS`] characters. A delivered message's
/// header line (`[scheduled task sch-… · m-…]`) is passed over: what follows it says more.
fn title_from(content: &str) -> Option<String> {
    let mut lines = content.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next()?;
    let line = match crate::messages::is_delivery_header(first) {
        true => lines.next().unwrap_or(first),
        false => first,
    };
    Some(line.chars().take(TITLE_CHARS).collect())
}

/// Refuses engine options a paired device may not send, and malformed `env`.
/// `runs_named_program` is the engine's own capability (an ACP session runs the command the
/// client names).
fn check_options(
    runs_named_program: bool,
    options: &Object,
    auth: &Auth,
) -> Result<(), SessionError> {
    let names_program =
        runs_named_program || options.contains_key("bin") || options.contains_key("env");
    if names_program && *auth != Auth::Local {
        return Err(SessionError::ProgramChoice);
    }
    if let Some(env) = options.get("env") {
        let Value::Object(env) = env else {
            return Err(SessionError::EnvNotObject);
        };
        for (name, value) in env {
            let plain =
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !plain || name.starts_with("DYLD_") || name.starts_with("LD_") {
                return Err(SessionError::EnvName(name.clone()));
            }
            if !value.is_string() {
                return Err(SessionError::EnvValue(name.clone()));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn titles_take_the_first_non_empty_line_up_to_40_chars() {
        assert_eq!(
            title_from("\n  fix the bug\nmore").as_deref(),
            Some("fix the bug")
        );
        let long = "x".repeat(50);
        assert_eq!(title_from(&long).map(|t| t.chars().count()), Some(40));
        assert_eq!(title_from("  \n "), None);
    }

    #[test]
    fn a_delivered_message_is_titled_by_its_body_not_its_header() {
        let text =
            crate::messages::route::delivery_text("m-1-1", "schedule:sch-ab", "Nightly report");
        assert_eq!(title_from(&text).as_deref(), Some("Nightly report"));
        // A header alone is all there is to go by.
        let bare = crate::messages::route::delivery_text("m-1-1", "timer:tm-1-2", "");
        assert_eq!(
            title_from(&bare).as_deref(),
            Some("[timer tm-1-2 fired · m-1-1]")
        );
        // A user's own text that looks like one is not a header: no message id in it.
        assert_eq!(title_from("[draft]\nplan").as_deref(), Some("[draft]"));
    }

    #[test]
    fn devices_may_not_name_programs() {
        let mut options = Object::new();
        options.insert("bin".into(), json!("/bin/sh"));
        let device = Auth::Device("d".into());
        assert!(check_options(false, &options, &device).is_err());
        assert!(check_options(false, &options, &Auth::Local).is_ok());
        assert!(check_options(true, &Object::new(), &device).is_err());
        let mut env = Object::new();
        env.insert("env".into(), json!({"LD_PRELOAD": "x"}));
        assert!(check_options(false, &env, &Auth::Local).is_err());
        env.insert("env".into(), json!({"FOO_1": "x"}));
        assert!(check_options(false, &env, &Auth::Local).is_ok());
    }
}
