//! Starting a session's engine (its events then go through [`super::pump`]), and what
//! message delivery reads of the sessions.

use std::sync::Arc;

use jucode_engine::StartSpec;
use jucode_protocol::Object;
use jucode_protocol::serve::{Event, TranscriptItem};
use serde_json::Value;
use tokio::sync::watch;

use super::{Record, Running, SessionError, Sessions, View, set_attended};
use crate::messages::route::SessionFacts;
use crate::{Hub, Inner};

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
        self.spawn_pump(session.to_string(), generation, handle.events);
        Ok(())
    }

    /// A new session of an engine that names its sessions takes the id its first `startup`
    /// gives, before anything of it is forwarded. Returns the new id.
    pub(super) fn take_engine_name(
        &self,
        inner: &mut Inner,
        session: &str,
        event: &Event,
    ) -> Option<String> {
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
