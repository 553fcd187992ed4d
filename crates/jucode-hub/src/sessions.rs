//! Hosted sessions: their log, their engines, watchers and the snapshot a watcher gets.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jucode_engine::{EngineOutput, StartSpec};
use jucode_protocol::daemon::{DaemonEvent, HistoryRow, Reply, SessionInfo};
use jucode_protocol::serve::{Event, Known, STATE_EVENTS, TranscriptItem};
use jucode_protocol::{ClientFrame, Object};
use jucode_store::{JsonlLog, StateDir};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::clients::ClientId;
use crate::util::new_uuid;
use crate::{Auth, Hub, HubError, Inner, to_value};

/// Engine names a client may ask for.
const ENGINE_NAMES: &[&str] = &["jucode", "claude", "codex", "acp"];
/// How long an auto title may be (first line of the first message).
const TITLE_CHARS: usize = 40;

/// One line of `sessions.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record {
    /// The session was created or reopened.
    Open {
        session: String,
        cwd: String,
        #[serde(default = "default_engine")]
        engine: String,
        #[serde(default)]
        agent: Option<String>,
        #[serde(default)]
        chat: bool,
        at: u64,
    },
    /// The session's engine stopped.
    Close { session: String, at: u64 },
    /// A client changed what the session is called or where it shows.
    Meta {
        session: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        archived: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hidden: Option<bool>,
        /// `Some(null)` clears the group: kept apart from an absent field when read back.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "present"
        )]
        group: Option<Value>,
        at: u64,
    },
    /// The title the daemon gave the session from its first message.
    Title {
        session: String,
        title: String,
        at: u64,
    },
    #[serde(other)]
    Unknown,
}

/// Reads a field that is present (even as `null`) as `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

fn default_engine() -> String {
    "jucode".into()
}

/// Live sets other engines replace as a whole, kept for a watcher's snapshot as well.
const ENGINE_STATE_EVENTS: &[&str] = &["background_tasks", "agent_runs"];

/// How much conversation text a session's view keeps for snapshots: a session that runs for
/// weeks must not grow the daemon without bound, and one snapshot frame stays well under the
/// 8 MiB a client accepts. The oldest items go first; the newest is always kept.
const VIEW_TEXT_BUDGET: usize = 4 << 20;

/// What the daemon keeps of a session's events to rebuild a watcher's snapshot.
#[derive(Default)]
struct View {
    state: HashMap<String, Event>,
    transcript: Vec<TranscriptItem>,
    /// Text bytes held in `transcript`.
    bytes: usize,
    /// Items dropped from the front of `transcript` to keep within [`VIEW_TEXT_BUDGET`].
    dropped: usize,
    /// Open approval requests, by call id, in arrival order.
    approvals: Vec<(String, Event)>,
}

fn text_bytes(item: &TranscriptItem) -> usize {
    match item {
        TranscriptItem::User { content, images } => {
            content.len() + images.iter().map(String::len).sum::<usize>()
        }
        TranscriptItem::Assistant { content } => content.len(),
        TranscriptItem::Tool { name, output } => name.len() + output.len(),
        TranscriptItem::Branch { label } => label.len(),
    }
}

impl View {
    fn apply(&mut self, event: &Event) {
        self.apply_event(event);
        self.trim();
    }

    /// Drops the oldest items while the text held is over budget.
    fn trim(&mut self) {
        if self.bytes <= VIEW_TEXT_BUDGET {
            return;
        }
        let mut cut = 0;
        let mut bytes = self.bytes;
        while bytes > VIEW_TEXT_BUDGET && cut + 1 < self.transcript.len() {
            bytes -= text_bytes(&self.transcript[cut]);
            cut += 1;
        }
        self.transcript.drain(..cut);
        self.bytes = bytes;
        self.dropped += cut;
    }

    fn push(&mut self, item: TranscriptItem) {
        self.bytes += text_bytes(&item);
        self.transcript.push(item);
    }

    fn apply_event(&mut self, event: &Event) {
        let kind = event.kind();
        if STATE_EVENTS.contains(&kind) || ENGINE_STATE_EVENTS.contains(&kind) {
            self.state.insert(kind.to_string(), event.clone());
            return;
        }
        match event.known() {
            Some(Known::UserMessage { content, images }) => {
                self.push(TranscriptItem::User { content, images });
            }
            Some(Known::AssistantStart) => self.push(TranscriptItem::Assistant {
                content: String::new(),
            }),
            Some(Known::AssistantDelta { delta }) => match self.transcript.last_mut() {
                Some(TranscriptItem::Assistant { content }) => {
                    self.bytes += delta.len();
                    content.push_str(&delta);
                }
                _ => self.push(TranscriptItem::Assistant { content: delta }),
            },
            Some(Known::ToolStart { call_id, .. }) => self.approvals.retain(|(c, _)| *c != call_id),
            Some(Known::ToolOutput {
                call_id,
                name,
                output,
                ..
            }) => {
                self.approvals.retain(|(c, _)| *c != call_id);
                self.push(TranscriptItem::Tool { name, output });
            }
            Some(Known::ApprovalRequest { call_id, .. }) => {
                self.approvals.retain(|(c, _)| *c != call_id);
                self.approvals.push((call_id, event.clone()));
            }
            Some(Known::ActionDeferred { call_id, .. }) => {
                self.approvals.retain(|(c, _)| *c != call_id)
            }
            Some(Known::Transcript { items }) => {
                self.bytes = items.iter().map(text_bytes).sum();
                self.dropped = 0;
                self.transcript = items;
            }
            Some(Known::Status { message }) if message == "ready" || message == "interrupted" => {
                self.approvals.clear()
            }
            _ => {}
        }
    }
}

struct Running {
    ops: mpsc::UnboundedSender<Object>,
    generation: u64,
    /// Set once the engine has stopped.
    done: watch::Sender<bool>,
}

struct Session {
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
    /// The `session_create` reply held until the engine's first `startup` (see
    /// `EngineFactory::opens_at_startup`): the client and its request id.
    created: Option<(ClientId, Option<Value>)>,
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
        }
    }

    fn send(&self, op: Value) {
        if let (Some(running), Value::Object(op)) = (&self.running, op) {
            let _ = running.ops.send(op);
        }
    }
}

pub(crate) struct Sessions {
    log: JsonlLog,
    map: HashMap<String, Session>,
    next_generation: u64,
    shutting_down: bool,
}

pub(crate) struct CreateRequest {
    pub cwd: Option<String>,
    pub engine: Option<String>,
    pub options: Object,
    pub agent: Option<String>,
    pub chat: bool,
}

pub(crate) struct OpenRequest {
    pub session: String,
    pub cwd: Option<String>,
    pub engine: Option<String>,
    pub options: Object,
}

impl Sessions {
    pub(crate) fn open(store: &StateDir) -> Result<Sessions, HubError> {
        let (log, records) = store.open_log::<Record>("sessions.jsonl")?;
        let mut map: HashMap<String, Session> = HashMap::new();
        for record in records {
            match record {
                Record::Open {
                    session,
                    cwd,
                    engine,
                    agent,
                    chat,
                    at,
                } => {
                    let s = map.entry(session.clone()).or_insert_with(|| {
                        Session::new(
                            session,
                            PathBuf::from(&cwd),
                            engine.clone(),
                            chat,
                            agent.clone(),
                            at,
                        )
                    });
                    s.cwd = PathBuf::from(cwd);
                    s.engine = engine;
                    s.updated_at = at;
                }
                Record::Close { session, at } => {
                    if let Some(s) = map.get_mut(&session) {
                        s.updated_at = s.updated_at.max(at);
                    }
                }
                Record::Meta {
                    session,
                    title,
                    archived,
                    hidden,
                    group,
                    at,
                } => {
                    if let Some(s) = map.get_mut(&session) {
                        apply_meta(s, title, archived, hidden, group);
                        s.updated_at = s.updated_at.max(at);
                    }
                }
                Record::Title { session, title, at } => {
                    if let Some(s) = map.get_mut(&session) {
                        s.auto_title = Some(title);
                        s.updated_at = s.updated_at.max(at);
                    }
                }
                Record::Unknown => {}
            }
        }
        Ok(Sessions {
            log,
            map,
            next_generation: 0,
            shutting_down: false,
        })
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
    pub(crate) fn history(
        &self,
        cwd: &str,
        saved: Vec<(String, jucode_engine::SavedConversation)>,
    ) -> DaemonEvent {
        let wanted = std::fs::canonicalize(cwd).unwrap_or_else(|_| PathBuf::from(cwd));
        let mut rows: Vec<(u64, HistoryRow)> = self
            .sorted()
            .into_iter()
            .filter(|s| s.cwd == wanted || s.cwd == Path::new(cwd))
            .map(|s| {
                let row = HistoryRow {
                    session: s.id.clone(),
                    title: s.title(),
                    updated_at: s.updated_at,
                    entries: s.view.dropped + s.view.transcript.len(),
                    archived: s.archived,
                    agent: s.agent.clone(),
                    engine: s.engine.clone(),
                    open: s.running.is_some(),
                };
                (s.updated_at, row)
            })
            .collect();
        for (engine, c) in saved {
            if self.map.contains_key(&c.session) {
                continue;
            }
            let row = HistoryRow {
                session: c.session,
                title: c.title,
                updated_at: c.updated_at,
                entries: c.entries,
                archived: false,
                agent: None,
                engine,
                open: false,
            };
            rows.push((c.updated_at, row));
        }
        rows.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        DaemonEvent::SessionHistory {
            cwd: cwd.to_string(),
            sessions: rows.into_iter().map(|(_, row)| row).collect(),
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
                    s.send(Value::Object(set_attended(false)));
                }
            }
        }
        changed
    }

    /// Sends `op` to every open session whose engine is `engine`.
    pub(crate) fn send_to_engine(&self, engine: &str, op: &Object) {
        for s in self.map.values().filter(|s| s.engine == engine) {
            s.send(Value::Object(op.clone()));
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

    fn append(&mut self, record: &Record) -> Result<(), String> {
        self.log
            .append(record)
            .map_err(|e| format!("could not save the session: {e}"))
    }
}

fn set_attended(attended: bool) -> Object {
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

fn apply_meta(
    s: &mut Session,
    title: Option<String>,
    archived: Option<bool>,
    hidden: Option<bool>,
    group: Option<Value>,
) {
    if let Some(title) = title {
        // An empty title goes back to the engine's label.
        s.client_title = (!title.trim().is_empty()).then_some(title);
    }
    if let Some(archived) = archived {
        s.archived = archived;
    }
    if let Some(hidden) = hidden {
        s.hidden = hidden;
    }
    if let Some(group) = group {
        s.group = (!group.is_null()).then_some(group);
    }
}

/// The first line of `content`, at most [`TITLE_CHARS`] characters.
fn title_from(content: &str) -> Option<String> {
    let line = content.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(TITLE_CHARS).collect())
}

/// Refuses engine options a paired device may not send, and malformed `env`.
fn check_options(engine: &str, options: &Object, auth: &Auth) -> Result<(), String> {
    let names_program =
        engine == "acp" || options.contains_key("bin") || options.contains_key("env");
    if names_program && *auth != Auth::Local {
        return Err("only the desktop can choose what an engine runs".into());
    }
    if let Some(env) = options.get("env") {
        let Value::Object(env) = env else {
            return Err("options.env must be an object of strings".into());
        };
        for (name, value) in env {
            let plain =
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !plain || name.starts_with("DYLD_") || name.starts_with("LD_") {
                return Err(format!(
                    "options.env: {name} is not an allowed variable name"
                ));
            }
            if !value.is_string() {
                return Err(format!("options.env: {name} must be a string"));
            }
        }
    }
    Ok(())
}

impl Inner {
    /// Queues a frame for every client, ending the watches of clients dropped as too slow.
    pub(crate) fn broadcast(&mut self, frame: &Value) {
        for dropped in self.clients.broadcast(frame) {
            self.client_gone(dropped);
        }
    }

    /// A client left (or was dropped): its watches end, and every other client learns the
    /// new watcher counts. Terminates: each round removes a client.
    pub(crate) fn client_gone(&mut self, client: ClientId) {
        self.clients.remove(client);
        if self.sessions.unwatch_all(client) {
            self.broadcast_sessions();
        }
    }

    fn broadcast_sessions(&mut self) {
        let frame = to_value(&Reply::to(None, self.sessions.list_event()));
        self.broadcast(&frame);
    }
}

impl Hub {
    fn engine_factory(&self, name: &str) -> Result<Arc<dyn jucode_engine::EngineFactory>, String> {
        if !ENGINE_NAMES.contains(&name) {
            return Err(format!(
                "unknown engine `{name}` (expected jucode, claude, codex or acp)"
            ));
        }
        self.config.engines.get(name).cloned().ok_or_else(|| {
            if name == "jucode" {
                "the jucode engine is not available in this build: set JUCODE_SERVE_BIN to a program that speaks the serve protocol v2".to_string()
            } else {
                format!("the {name} engine is not available in this build")
            }
        })
    }

    /// Starts `session`'s engine and the task that carries its events. The caller holds the
    /// lock and has checked the session exists and is not running.
    fn start_engine(
        self: &Arc<Self>,
        inner: &mut Inner,
        session: &str,
        options: Object,
        resume: bool,
    ) -> Result<(), String> {
        let (engine, cwd, chat) = {
            let s = inner
                .sessions
                .map
                .get(session)
                .ok_or_else(|| format!("unknown session {session}"))?;
            (s.engine.clone(), s.cwd.clone(), s.chat)
        };
        let factory = self.engine_factory(&engine)?;
        let mut options = options;
        if chat {
            options.insert("chat".into(), Value::Bool(true));
        }
        let extra_dirs = inner.workspaces.dirs_for(&cwd);
        let handle = factory
            .start(StartSpec {
                session: session.to_string(),
                cwd,
                extra_dirs,
                options,
                resume,
            })
            .map_err(|e| e.to_string())?;
        inner.sessions.next_generation += 1;
        let generation = inner.sessions.next_generation;
        let (done, _) = watch::channel(false);
        if let Some(s) = inner.sessions.map.get_mut(session) {
            // Engines start attended; a session nobody watches must defer instead of asking.
            let attended = !s.watchers.is_empty();
            let _ = handle.ops.send(set_attended(attended));
            s.running = Some(Running {
                ops: handle.ops,
                generation,
                done,
            });
            s.busy = false;
            s.view = View::default();
        }
        let hub = self.clone();
        let id = session.to_string();
        let mut events = handle.events;
        tokio::spawn(async move {
            let mut exited = false;
            while let Some(output) = events.recv().await {
                exited = matches!(output, EngineOutput::Exited { .. });
                hub.on_engine(&id, generation, output);
                if exited {
                    break;
                }
            }
            if !exited {
                hub.on_engine(
                    &id,
                    generation,
                    EngineOutput::Exited {
                        error: Some("the engine stopped without a word".into()),
                    },
                );
            }
        });
        Ok(())
    }

    pub(crate) fn session_create(
        self: &Arc<Self>,
        client: ClientId,
        auth: &Auth,
        id: Option<Value>,
        req: CreateRequest,
    ) -> Result<(), String> {
        let engine = req.engine.unwrap_or_else(default_engine);
        check_options(&engine, &req.options, auth)?;
        if req.agent.is_some() {
            return Err("agents are not available in this daemon yet".into());
        }
        let cwd = if req.chat {
            let chats = self.config.home.join("chats");
            std::fs::create_dir_all(&chats).map_err(|e| format!("{}: {e}", chats.display()))?;
            chats
        } else {
            let cwd = req
                .cwd
                .ok_or("session_create needs cwd, agent or chat: true")?;
            self.resolve_user_path(&cwd)?
        };
        let opens_at_startup = self.engine_factory(&engine)?.opens_at_startup();
        let session = new_uuid().map_err(|e| e.to_string())?;
        let at = self.config.clock.now_ms();
        let mut inner = self.lock();
        inner.sessions.append(&Record::Open {
            session: session.clone(),
            cwd: cwd.display().to_string(),
            engine: engine.clone(),
            agent: None,
            chat: req.chat,
            at,
        })?;
        inner.sessions.map.insert(
            session.clone(),
            Session::new(session.clone(), cwd, engine, req.chat, None, at),
        );
        if let Err(e) = self.start_engine(&mut inner, &session, req.options, false) {
            let _ = inner.sessions.append(&Record::Close {
                session: session.clone(),
                at: self.config.clock.now_ms(),
            });
            inner.broadcast_sessions();
            return Err(e);
        }
        if opens_at_startup {
            if let Some(s) = inner.sessions.map.get_mut(&session) {
                s.created = Some((client, id));
            }
        } else {
            let reply = to_value(&Reply::to(id, DaemonEvent::SessionCreated { session }));
            inner.clients.send(client, &reply);
        }
        inner.broadcast_sessions();
        Ok(())
    }

    pub(crate) fn session_open(
        self: &Arc<Self>,
        client: ClientId,
        auth: &Auth,
        id: Option<Value>,
        req: OpenRequest,
    ) -> Result<(), String> {
        let mut inner = self.lock();
        let known = inner
            .sessions
            .map
            .get(&req.session)
            .map(|s| s.engine.clone());
        let engine = req
            .engine
            .clone()
            .or(known.clone())
            .unwrap_or_else(default_engine);
        check_options(&engine, &req.options, auth)?;
        let reply = to_value(&Reply::to(
            id,
            DaemonEvent::SessionOpened {
                session: req.session.clone(),
            },
        ));
        match inner.sessions.map.get(&req.session) {
            Some(s) if s.running.is_some() => {
                inner.clients.send(client, &reply);
                return Ok(());
            }
            Some(_) => {}
            None => {
                let Some(cwd) = req.cwd.as_deref() else {
                    return Err(format!(
                        "unknown session {}; to open a conversation saved in a directory, also send its cwd",
                        req.session
                    ));
                };
                if req.session.is_empty()
                    || req.session.len() > 200
                    || req.session.contains(['/', '\0'])
                {
                    return Err(format!("{:?} is not a session id", req.session));
                }
                self.engine_factory(&engine)?;
                let cwd = self.resolve_user_path(cwd)?;
                let at = self.config.clock.now_ms();
                let chat = cwd.starts_with(self.config.home.join("chats"));
                inner.sessions.map.insert(
                    req.session.clone(),
                    Session::new(req.session.clone(), cwd, engine.clone(), chat, None, at),
                );
            }
        }
        let (cwd, chat, agent) = match inner.sessions.map.get_mut(&req.session) {
            Some(s) => {
                s.engine = engine.clone();
                (s.cwd.display().to_string(), s.chat, s.agent.clone())
            }
            None => return Err(format!("unknown session {}", req.session)),
        };
        inner.sessions.append(&Record::Open {
            session: req.session.clone(),
            cwd,
            engine,
            agent,
            chat,
            at: self.config.clock.now_ms(),
        })?;
        self.start_engine(&mut inner, &req.session, req.options, true)?;
        if let Some(s) = inner.sessions.map.get_mut(&req.session) {
            s.updated_at = self.config.clock.now_ms();
        }
        inner.clients.send(client, &reply);
        inner.broadcast_sessions();
        Ok(())
    }

    pub(crate) fn session_close(&self, session: &str) -> Result<(), String> {
        let inner = self.lock();
        let s = inner
            .sessions
            .map
            .get(session)
            .ok_or_else(|| format!("unknown session {session}"))?;
        let Some(running) = &s.running else {
            return Err(format!("session {session} is not open"));
        };
        // session_closed follows once the engine has stopped (see on_engine).
        let _ = running.ops.send(shutdown_op());
        Ok(())
    }

    pub(crate) fn session_meta(
        &self,
        session: &str,
        title: Option<String>,
        archived: Option<bool>,
        hidden: Option<bool>,
        group: Option<Value>,
    ) -> Result<(), String> {
        let mut inner = self.lock();
        if !inner.sessions.map.contains_key(session) {
            return Err(format!("unknown session {session}"));
        }
        let at = self.config.clock.now_ms();
        inner.sessions.append(&Record::Meta {
            session: session.to_string(),
            title: title.clone(),
            archived,
            hidden,
            group: group.clone(),
            at,
        })?;
        if let Some(s) = inner.sessions.map.get_mut(session) {
            // Claude Code and Codex keep the name too (`claude --resume` lists it).
            if let Some(title) = title
                .as_deref()
                .map(str::trim)
                .filter(|t| !t.is_empty() && matches!(s.engine.as_str(), "claude" | "codex"))
            {
                s.send(json!({"op": "rename", "title": title}));
            }
            apply_meta(s, title, archived, hidden, group);
            s.updated_at = at;
        }
        inner.broadcast_sessions();
        Ok(())
    }

    pub(crate) fn watch(
        &self,
        client: ClientId,
        id: Option<Value>,
        session: &str,
        on: bool,
    ) -> Result<(), String> {
        let mut inner = self.lock();
        let s = inner
            .sessions
            .map
            .get_mut(session)
            .ok_or_else(|| format!("unknown session {session}"))?;
        let mut frames = vec![to_value(&Reply::to(
            id,
            DaemonEvent::Watching {
                session: session.to_string(),
                watching: on,
            },
        ))];
        if on {
            if s.watchers.insert(client) && s.watchers.len() == 1 {
                s.send(Value::Object(set_attended(true)));
            }
            frames.extend(snapshot(s).into_iter().map(|e| Value::Object(e.0)));
        } else if s.watchers.remove(&client) && s.watchers.is_empty() {
            s.send(Value::Object(set_attended(false)));
        }
        for frame in frames {
            inner.clients.send(client, &frame);
        }
        inner.broadcast_sessions();
        Ok(())
    }

    /// Forwards an op that names a session to that session's engine.
    pub(crate) fn session_op(
        self: &Arc<Self>,
        _client: ClientId,
        frame: ClientFrame,
    ) -> Result<(), String> {
        let Some(session) = frame.session.as_deref() else {
            return Err(format!("{} requires session", frame.op));
        };
        if frame.op == "decide_action" {
            return self.decide_action(&frame);
        }
        if frame.op == "set_attended" {
            return Err("the daemon sets attended from watch/unwatch".into());
        }
        let input = frame
            .fields
            .get("input")
            .and_then(Value::as_str)
            .unwrap_or("");
        if frame.op == "command" {
            let word = input.split_whitespace().next().unwrap_or("");
            if matches!(word, "/new" | "/resume" | "/clear") {
                return Err(format!(
                    "a hosted session keeps one conversation: use session_create or session_open instead of {word}"
                ));
            }
            if matches!(word, "/quit" | "/exit") {
                return self.session_close(session);
            }
        }
        let mut inner = self.lock();
        let s = inner
            .sessions
            .map
            .get_mut(session)
            .ok_or_else(|| format!("unknown session {session}"))?;
        let Some(running) = &s.running else {
            return Err(format!(
                "session {session} is not open; send session_open first"
            ));
        };
        running
            .ops
            .send(frame.engine_op())
            .map_err(|_| format!("session {session} is stopping"))?;
        // An answered card leaves a later watcher's snapshot at once, not at the end of the
        // turn; an engine that refuses the answer sends the card again.
        if frame.op == "approve"
            && let Some(call_id) = frame.fields.get("call_id").and_then(Value::as_str)
        {
            s.view.approvals.retain(|(c, _)| c != call_id);
        }
        Ok(())
    }

    /// Records a decision on a deferred action, then hands it to the session's engine,
    /// reopening the session first when it is closed (or was hosted before a restart).
    fn decide_action(self: &Arc<Self>, frame: &ClientFrame) -> Result<(), String> {
        const USAGE: &str = "decide_action requires action and decision: allow or deny";
        let action = frame
            .fields
            .get("action")
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty())
            .ok_or(USAGE)?;
        let allow = match frame.fields.get("decision").and_then(Value::as_str) {
            Some("allow") => true,
            Some("deny") => false,
            _ => return Err(USAGE.into()),
        };
        let mut inner = self.lock();
        let decided = inner.actions.decide(action, allow)?;
        let list = to_value(&Reply::to(None, inner.actions.event()));
        inner.broadcast(&list);
        let session = decided.session;
        let running = inner
            .sessions
            .map
            .get(&session)
            .map(|s| s.running.is_some())
            .ok_or_else(|| format!("the session of action {action} is unknown"))?;
        if !running {
            let (cwd, engine, agent, chat) = match inner.sessions.map.get(&session) {
                Some(s) => (
                    s.cwd.display().to_string(),
                    s.engine.clone(),
                    s.agent.clone(),
                    s.chat,
                ),
                None => return Err(format!("unknown session {session}")),
            };
            inner.sessions.append(&Record::Open {
                session: session.clone(),
                cwd,
                engine,
                agent,
                chat,
                at: self.config.clock.now_ms(),
            })?;
            self.start_engine(&mut inner, &session, Object::new(), true)?;
            inner.broadcast_sessions();
        }
        let op = json!({
            "op": "decide_action",
            "action": action,
            "decision": if allow { "allow" } else { "deny" },
        });
        if let Some(s) = inner.sessions.map.get(&session) {
            s.send(op);
        }
        Ok(())
    }

    /// Everything an engine emits passes here: state kept for snapshots, then broadcast.
    fn on_engine(&self, session: &str, generation: u64, output: EngineOutput) {
        let mut inner = self.lock();
        let shutting_down = inner.sessions.shutting_down;
        let Some(s) = inner.sessions.map.get_mut(session) else {
            return;
        };
        if s.running.as_ref().map(|r| r.generation) != Some(generation) {
            return;
        }
        match output {
            EngineOutput::Event(event) => {
                let created = match event.kind() {
                    "startup" => s.created.take(),
                    _ => None,
                };
                let was_busy = s.busy;
                s.view.apply(&event);
                let mut title = None;
                match event.kind() {
                    "user_message" => {
                        s.busy = true;
                        s.updated_at = self.config.clock.now_ms();
                        if s.client_title.is_none() && s.auto_title.is_none() {
                            title = event.str("content").and_then(title_from);
                        }
                    }
                    "connecting" => s.busy = true,
                    _ if event.is_ready() => {
                        s.busy = false;
                        s.updated_at = self.config.clock.now_ms();
                    }
                    _ => {}
                }
                // A title the engine's title model chose replaces the first-message one, never a
                // title a client set.
                if event.kind() == "session_title" && s.client_title.is_none() {
                    title = event
                        .str("title")
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(|t| t.chars().take(200).collect());
                }
                let changed = was_busy != s.busy || title.is_some();
                if let Some(title) = &title {
                    s.auto_title = Some(title.clone());
                }
                if let Some(title) = title {
                    let record = Record::Title {
                        session: session.to_string(),
                        title,
                        at: self.config.clock.now_ms(),
                    };
                    if let Err(e) = inner.sessions.append(&record) {
                        tracing::error!("{e}");
                    }
                }
                let actions_changed = match event.kind() {
                    "action_deferred" => inner.actions.deferred(&event.0, session),
                    "action_decided" => inner.actions.decided_by_engine(&event.0),
                    _ => Ok(false),
                }
                .unwrap_or_else(|e| {
                    tracing::error!("{e}");
                    false
                });
                if let Some((client, id)) = created {
                    let session = session.to_string();
                    let reply = to_value(&Reply::to(id, DaemonEvent::SessionCreated { session }));
                    inner.clients.send(client, &reply);
                }
                let frame = Value::Object(event.with_session(session).0);
                inner.broadcast(&frame);
                if changed {
                    inner.broadcast_sessions();
                }
                if actions_changed {
                    let list = to_value(&Reply::to(None, inner.actions.event()));
                    inner.broadcast(&list);
                }
            }
            EngineOutput::Exited { error } => {
                let running = s.running.take();
                let created = s.created.take();
                s.busy = false;
                s.watchers.clear();
                if let Some((client, id)) = created {
                    let why = error.as_deref().unwrap_or("it stopped");
                    let reply = to_value(&Reply::error(
                        id,
                        format!("the session could not be opened: {why}"),
                    ));
                    inner.clients.send(client, &reply);
                }
                if let Some(error) = &error {
                    tracing::warn!(session, "engine stopped: {error}");
                    let frame = json!({
                        "type": "error",
                        "session": session,
                        "message": format!("the engine stopped: {error}"),
                    });
                    inner.broadcast(&frame);
                }
                if !shutting_down {
                    let record = Record::Close {
                        session: session.to_string(),
                        at: self.config.clock.now_ms(),
                    };
                    if let Err(e) = inner.sessions.append(&record) {
                        tracing::error!("{e}");
                    }
                }
                let closed = to_value(&Reply::to(
                    None,
                    DaemonEvent::SessionClosed {
                        session: session.to_string(),
                    },
                ));
                inner.broadcast(&closed);
                inner.broadcast_sessions();
                if let Some(running) = running {
                    let _ = running.done.send(true);
                }
            }
        }
    }
}

/// A watcher's snapshot: latest state events, the transcript so far, `connecting` while a turn
/// runs, open approvals, and the attended state.
fn snapshot(s: &Session) -> Vec<Event> {
    let mut out = Vec::new();
    for kind in STATE_EVENTS.iter().chain(ENGINE_STATE_EVENTS) {
        if let Some(event) = s.view.state.get(*kind) {
            out.push(event.clone().with_session(&s.id));
        }
    }
    out.push(Event::new("transcript", json!({ "items": s.view.transcript })).with_session(&s.id));
    if s.busy {
        out.push(Event::new("connecting", json!({})).with_session(&s.id));
    }
    for (_, approval) in &s.view.approvals {
        out.push(approval.clone().with_session(&s.id));
    }
    out.push(
        Event::new("attended", json!({ "attended": !s.watchers.is_empty() })).with_session(&s.id),
    );
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

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
    fn devices_may_not_name_programs() {
        let mut options = Object::new();
        options.insert("bin".into(), json!("/bin/sh"));
        let device = Auth::Device("d".into());
        assert!(check_options("claude", &options, &device).is_err());
        assert!(check_options("claude", &options, &Auth::Local).is_ok());
        assert!(check_options("acp", &Object::new(), &device).is_err());
        let mut env = Object::new();
        env.insert("env".into(), json!({"LD_PRELOAD": "x"}));
        assert!(check_options("jucode", &env, &Auth::Local).is_err());
        env.insert("env".into(), json!({"FOO_1": "x"}));
        assert!(check_options("jucode", &env, &Auth::Local).is_ok());
    }

    #[test]
    fn the_view_rebuilds_a_transcript_and_tracks_open_approvals() {
        let mut view = View::default();
        let events = [
            json!({"type":"model_status","model":"m"}),
            json!({"type":"user_message","content":"hi"}),
            json!({"type":"assistant_start"}),
            json!({"type":"assistant_delta","delta":"he"}),
            json!({"type":"assistant_delta","delta":"llo"}),
            json!({"type":"approval_request","call_id":"c1","name":"bash","summary":"ls","subagent_id":null,"hunks":null}),
        ];
        for e in events {
            view.apply(&serde_json::from_value(e).unwrap());
        }
        assert_eq!(view.approvals.len(), 1);
        assert_eq!(
            view.transcript,
            vec![
                TranscriptItem::User {
                    content: "hi".into(),
                    images: vec![]
                },
                TranscriptItem::Assistant {
                    content: "hello".into()
                },
            ]
        );
        view.apply(&serde_json::from_value(json!({"type":"tool_output","call_id":"c1","name":"bash","output":"ok","is_error":false})).unwrap());
        assert!(view.approvals.is_empty());
        assert!(view.state.contains_key("model_status"));
    }

    #[test]
    fn the_view_drops_the_oldest_text_past_its_budget_and_keeps_the_newest() {
        let mut view = View::default();
        let big = "x".repeat(VIEW_TEXT_BUDGET / 3);
        for i in 0..5 {
            view.apply(
                &serde_json::from_value(
                    json!({"type":"user_message","content":format!("{i}{big}")}),
                )
                .unwrap(),
            );
        }
        assert_eq!(view.transcript.len(), 2, "only what fits the budget stays");
        assert_eq!(view.dropped, 3);
        assert!(view.bytes <= VIEW_TEXT_BUDGET);
        assert!(
            matches!(&view.transcript[1], TranscriptItem::User { content, .. } if content.starts_with('4'))
        );
        // Deltas count too, and one item bigger than the budget is still kept.
        view.apply(&serde_json::from_value(json!({"type":"assistant_start"})).unwrap());
        view.apply(
            &serde_json::from_value(
                json!({"type":"assistant_delta","delta":"y".repeat(VIEW_TEXT_BUDGET + 1)}),
            )
            .unwrap(),
        );
        assert_eq!(view.transcript.len(), 1);
        assert_eq!(view.dropped, 5);
        assert_eq!(view.bytes, VIEW_TEXT_BUDGET + 1);
    }

    #[test]
    fn the_view_keeps_the_latest_agent_runs_and_background_tasks() {
        let mut view = View::default();
        for e in [
            json!({"type":"agent_runs","workflows":[],"agents":[{"id":"a1"}]}),
            json!({"type":"agent_runs","workflows":[],"agents":[{"id":"a2"}]}),
            json!({"type":"background_tasks","tasks":[{"id":"b1"}]}),
        ] {
            view.apply(&serde_json::from_value(e).unwrap());
        }
        assert_eq!(view.state["agent_runs"].0["agents"][0]["id"], "a2");
        assert_eq!(view.state["background_tasks"].0["tasks"][0]["id"], "b1");
        assert!(view.transcript.is_empty());
    }
}
