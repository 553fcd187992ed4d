//! Starting a session's engine and the pump that carries its events: state kept for
//! snapshots, titles and deferred actions recorded, then every event broadcast.

use std::sync::Arc;

use jucode_engine::{EngineOutput, StartSpec};
use jucode_protocol::Object;
use jucode_protocol::daemon::limits::TITLE_CHARS;
use jucode_protocol::daemon::{DaemonEvent, Reply};
use jucode_protocol::serve::{Event, TranscriptItem};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::{Record, Running, SessionError, Sessions, View, set_attended, title_from};
use crate::messages::route::SessionFacts;
use crate::{Hub, Inner, to_value};

/// Whether a session's engine can take a delivery now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionState {
    Open,
    /// Its engine's channel is closed and its exit not yet seen.
    Stopping,
    Closed,
}

/// What message delivery reads of the sessions and the one way it hands a message over.
impl Sessions {
    /// Every session, as routing reads it.
    pub(crate) fn route_facts(&self) -> Vec<SessionFacts> {
        self.map
            .values()
            .map(|s| SessionFacts {
                id: s.id.clone(),
                agent: s.agent.clone(),
                hidden: s.hidden,
                archived: s.archived,
                updated_at: s.updated_at,
            })
            .collect()
    }

    /// Every session's id, agent and whether its engine is in a turn.
    pub(crate) fn run_facts(&self) -> impl Iterator<Item = (&str, Option<&str>, bool)> {
        self.map
            .values()
            .map(|s| (s.id.as_str(), s.agent.as_deref(), s.busy))
    }

    /// Whether the session's engine is in a turn.
    pub(crate) fn busy(&self, session: &str) -> bool {
        self.map.get(session).is_some_and(|s| s.busy)
    }

    /// How many user items the session's conversation holds as far as the daemon has seen
    /// (its engine's transcript, then each `user_message`): a lower bound of where a user
    /// message handed over now lands in its saved transcript.
    pub(crate) fn users_seen(&self, session: &str) -> usize {
        self.map.get(session).map_or(0, |s| s.view.users)
    }

    /// The engine a session runs on.
    pub(crate) fn engine_of(&self, session: &str) -> Option<&str> {
        self.map.get(session).map(|s| s.engine.as_str())
    }

    pub(crate) fn state(&self, session: &str) -> SessionState {
        match self.map.get(session).and_then(|s| s.running.as_ref()) {
            Some(running) if running.ops.is_closed() => SessionState::Stopping,
            Some(_) => SessionState::Open,
            None => SessionState::Closed,
        }
    }

    /// Whether new work may start (not shutting down).
    pub(crate) fn accepting(&self) -> bool {
        !self.shutting_down
    }

    /// What the usage ledger reads of a session: when it was opened and whether a turn runs.
    pub(crate) fn usage_facts(&self, session: &str) -> Option<(u64, bool)> {
        self.map.get(session).map(|s| (s.created_at, s.busy))
    }

    /// Sends `op` to the session's engine.
    pub(crate) fn deliver(&self, session: &str, op: Object) {
        if let Some(s) = self.map.get(session) {
            s.send(op);
        }
    }
}

impl Hub {
    /// Starts a closed session's engine again on its saved conversation (a session hosted
    /// before a restart, or closed since), recording it open.
    pub(crate) fn reopen_session(
        self: &Arc<Self>,
        inner: &mut Inner,
        session: &str,
    ) -> Result<(), SessionError> {
        inner.sessions.not_in_tui(session)?;
        let s = inner.sessions.get(session)?;
        let record = Record::Open {
            session: session.to_string(),
            cwd: s.cwd.display().to_string(),
            engine: s.engine.clone(),
            agent: s.agent.clone(),
            chat: s.chat,
            at: self.config.clock.now_ms(),
        };
        inner.sessions.append(&record)?;
        self.start_engine(inner, session, Object::new(), true, None)?;
        inner.broadcast_sessions();
        Ok(())
    }

    /// Starts `session`'s engine and the task that carries its events. The caller holds the
    /// lock and has checked the session exists and is not running. `transcript` is the
    /// conversation so far when the caller read it from the engine's saved copy.
    pub(super) fn start_engine(
        self: &Arc<Self>,
        inner: &mut Inner,
        session: &str,
        options: Object,
        resume: bool,
        transcript: Option<Vec<TranscriptItem>>,
    ) -> Result<(), SessionError> {
        let (engine, cwd, chat, agent) = {
            let s = inner.sessions.get(session)?;
            (s.engine.clone(), s.cwd.clone(), s.chat, s.agent.clone())
        };
        let factory = self.engine_factory(&engine)?;
        let mut options = options;
        self.apply_gateway_flag(inner, session, factory.takes_gateway(), &mut options)?;
        // A start gate holds the session read-only through every start of its engine.
        if inner.requirements.gate_of(session).is_some() {
            let mode = crate::requirements::read_only(&engine);
            options.insert("approval_mode".into(), Value::from(mode.as_str()));
        }
        if chat {
            options.insert("chat".into(), Value::Bool(true));
        }
        let seat = agent.and_then(|agent| self.agent_seat(inner, session, &agent, &mut options));
        let extra_dirs = inner.workspaces.dirs_for(&cwd);
        let handle = factory
            .start(StartSpec {
                session: session.to_string(),
                cwd,
                extra_dirs,
                options,
                resume,
                agent: seat,
            })
            .inspect_err(|_| self.agent_caps.revoke_session(session))?;
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
            s.view = transcript.map(View::with_transcript).unwrap_or_default();
        }
        let hub = self.clone();
        let mut id = session.to_string();
        let mut events = handle.events;
        tokio::spawn(async move {
            let mut exited = false;
            while let Some(output) = events.recv().await {
                exited = matches!(output, EngineOutput::Exited { .. });
                if let Some(named) = hub.on_engine(&id, generation, output) {
                    id = named;
                }
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

    /// A new session of an engine that names its sessions takes the id its first `startup`
    /// gives, before anything of it is forwarded. Returns the new id.
    fn take_engine_name(&self, inner: &mut Inner, session: &str, event: &Event) -> Option<String> {
        let s = inner.sessions.map.get(session)?;
        if event.kind() != "startup" || s.created.is_none() {
            return None;
        }
        if !self
            .engine_factory(&s.engine)
            .is_ok_and(|f| f.names_its_session())
        {
            return None;
        }
        let named = event
            .str("session_id")
            .filter(|n| *n != session && super::ops::is_session_id(n))?
            .to_string();
        if inner.sessions.map.contains_key(&named) {
            tracing::warn!(session, "the engine named it {named}, which is taken");
            return None;
        }
        let record = Record::Renamed {
            session: session.to_string(),
            to: named.clone(),
            at: self.config.clock.now_ms(),
        };
        if let Err(e) = inner.sessions.append(&record) {
            tracing::error!("{e}");
            return None;
        }
        let mut s = inner.sessions.map.remove(session)?;
        self.agent_caps.renamed(session, &named);
        s.id = named.clone();
        inner.sessions.map.insert(named.clone(), s);
        inner
            .sessions
            .renamed
            .insert(session.to_string(), named.clone());
        inner.messages.runs.renamed(session, &named);
        inner.messages.session_renamed(session, &named);
        if let Err(e) = inner.requirements.session_renamed(session, &named) {
            tracing::error!("{e}");
        }
        // A scheduled run's delivery named the first id; continuing it needs the new one.
        inner.schedules.session_renamed(session, &named);
        Some(named)
    }

    /// Everything an engine emits passes here: state kept for snapshots, then broadcast.
    /// Returns the session's new id when the engine named it.
    fn on_engine(
        self: &Arc<Self>,
        session: &str,
        generation: u64,
        output: EngineOutput,
    ) -> Option<String> {
        let mut inner = self.lock();
        let shutting_down = inner.sessions.shutting_down;
        let current = inner
            .sessions
            .map
            .get(session)
            .and_then(|s| s.running.as_ref())
            .map(|r| r.generation);
        if current != Some(generation) {
            return None;
        }
        let named = match &output {
            EngineOutput::Event(event) => self.take_engine_name(&mut inner, session, event),
            EngineOutput::Exited { .. } => None,
        };
        let session = named.as_deref().unwrap_or(session);
        let Some(s) = inner.sessions.map.get_mut(session) else {
            return named;
        };
        match output {
            EngineOutput::Event(event) => {
                // Looked up once: every lookup hashes the key, and this runs for each delta.
                let kind = event.kind().to_string();
                let created = match kind.as_str() {
                    "startup" => s.created.take(),
                    _ => None,
                };
                let was_busy = s.busy;
                // A transcript the view (and so every snapshot) already holds is not news.
                let mut forward = !s.view.repeats(&event);
                s.view.apply(&event);
                let mut title = None;
                // A turn began on this text: a delivery of it is now that turn (run limits).
                let started = (kind.as_str() == "user_message")
                    .then(|| event.str("content").unwrap_or_default().to_string());
                match kind.as_str() {
                    "user_message" => {
                        s.busy = true;
                        s.failed = false;
                        s.updated_at = self.config.clock.now_ms();
                        if s.client_title.is_none() && s.auto_title.is_none() {
                            title = event.str("content").and_then(title_from);
                        }
                    }
                    "connecting" => s.busy = true,
                    "error" if s.busy => s.failed = true,
                    "status" if event.str("message") == Some("ready") => {
                        s.busy = false;
                        s.updated_at = self.config.clock.now_ms();
                    }
                    _ => {}
                }
                // A title the engine's title model chose replaces the first-message one; a
                // title a client set is never replaced, so the engine's is not even shown.
                if kind.as_str() == "session_title" {
                    if s.client_title.is_some() {
                        forward = false;
                    } else {
                        title = event
                            .str("title")
                            .map(str::trim)
                            .filter(|t| !t.is_empty())
                            .map(|t| t.chars().take(TITLE_CHARS).collect());
                    }
                }
                let changed = was_busy != s.busy || title.is_some();
                // What a linked requirement's status is derived from.
                let for_requirements = was_busy != s.busy
                    || matches!(kind.as_str(), "approval_request" | "error" | "tool_start");
                // A finished turn's usage: the model it ran on, for the ledger's price.
                let usage_of =
                    (kind.as_str() == "usage").then(|| (s.engine.clone(), model_of(&s.view)));
                let agent_turn = was_busy != s.busy && s.agent.is_some();
                // A turn that ended without an error answers a start gate's step.
                let turn_ended = was_busy && !s.busy && !s.failed;
                // What moves a dispatch's task or its dispatcher.
                let for_dispatch = was_busy != s.busy
                    || matches!(
                        kind.as_str(),
                        "approval_request" | "tool_start" | "tool_output" | "error"
                    );
                let dispatch_change = crate::dispatch::Change {
                    ended: was_busy && !s.busy,
                    exited: false,
                };
                if let Some(title) = &title {
                    s.auto_title = Some(title.clone());
                }
                if let Some(content) = &started {
                    let now = self.config.clock.now_ms();
                    inner.messages.turn_started(session, content, now);
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
                // An engine announces its open actions at every start: one recorded already is
                // not news, and one decided here before a kill kept the decision from the engine
                // is decided again.
                if kind == "action_deferred" && inner.actions.knows(&event.0) {
                    forward = false;
                    if let Some(allow) = inner.actions.decided_before(&event.0)
                        && let Some(s) = inner.sessions.map.get(session)
                    {
                        s.send(decide_op(&event.0, allow));
                    }
                }
                let actions_changed = match kind.as_str() {
                    "action_deferred" => inner.actions.deferred(&event.0, session),
                    "action_decided" => inner.actions.decided_by_engine(&event.0),
                    _ => Ok(false),
                }
                .unwrap_or_else(|e| {
                    tracing::error!("{e}");
                    false
                });
                if let Some(c) = created
                    && let Some(client) = c.client
                {
                    let reply = to_value(&Reply::to(c.id, (c.reply)(session.to_string())));
                    inner.clients.send(client, &reply);
                }
                // Usage hook: the turn is in the ledger (fsynced) before clients see its key.
                let event = match usage_of {
                    Some((engine, model)) => {
                        self.usage_passes(&mut inner, session, &engine, model, event)
                    }
                    None => event,
                };
                if forward {
                    let frame = Value::Object(event.with_session(session).0);
                    inner.broadcast(&frame);
                }
                if changed || named.is_some() {
                    inner.broadcast_sessions();
                }
                if agent_turn {
                    inner.broadcast_agents();
                }
                if turn_ended && let Err(e) = inner.requirements.turn_ended(session) {
                    tracing::error!("{e}");
                }
                if turn_ended {
                    crate::requirements::titles::turn_ended(self, &inner, session);
                }
                if for_requirements && inner.requirements.is_linked(session) {
                    inner.broadcast_requirements();
                }
                if for_dispatch {
                    self.dispatch_follow(&mut inner, session, dispatch_change);
                }
                if actions_changed {
                    let list = to_value(&Reply::to(None, inner.actions.event()));
                    inner.broadcast(&list);
                }
            }
            EngineOutput::Exited { error } => {
                // The program that held this session's agent capability is gone.
                self.agent_caps.revoke_session(session);
                let running = s.running.take();
                let created = s.created.take();
                let of_agent = s.agent.is_some();
                s.busy = false;
                s.watchers.clear();
                self.deliveries_dropped(&mut inner, session);
                if let Some(c) = created
                    && let Some(client) = c.client
                {
                    let why = error.as_deref().unwrap_or("it stopped");
                    let reply = to_value(&Reply::error(
                        c.id,
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
                let change = crate::dispatch::Change {
                    ended: false,
                    exited: true,
                };
                self.dispatch_follow(&mut inner, session, change);
                if of_agent {
                    inner.broadcast_agents();
                }
                if let Some(running) = running {
                    let _ = running.done.send(true);
                }
            }
        }
        named
    }
}

/// The model a session runs on, as its engine last said (`model_status`, else `startup`).
pub(super) fn model_of(view: &View) -> Option<String> {
    ["model_status", "startup"].iter().find_map(|kind| {
        view.state
            .get(*kind)
            .and_then(|e| e.str("model"))
            .map(str::to_string)
    })
}

/// `decide_action` for the action of `event` (an `action_deferred`), sent again.
fn decide_op(event: &Object, allow: bool) -> Object {
    let mut op = Object::new();
    op.insert("op".into(), "decide_action".into());
    op.insert(
        "action".into(),
        event.get("id").cloned().unwrap_or_default(),
    );
    op.insert(
        "decision".into(),
        if allow { "allow" } else { "deny" }.into(),
    );
    op
}
