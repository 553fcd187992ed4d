//! `session_tui`: a session's conversation moved into its engine's own terminal interface on a
//! pty of the requesting client ([`Hub::open_process`]), and back when that TUI exits.
//!
//! Order: refuse what cannot move (an agent's session, an engine without a TUI, a turn that
//! runs without `force`); stop the engine and wait until it is gone; open the TUI as the
//! client's terminal (reply `term_opened`, then `surface: tui` to every client); while it runs
//! the session takes no op but a watch (its snapshot); when it exits the engine starts again
//! on the conversation (the TUI's turns included), then `surface: gui` and a fresh
//! `transcript` go to every client.

use std::ffi::OsString;
use std::sync::Arc;

use jucode_engine::{SavedConversation, TuiCommand, TuiSpec};
use jucode_protocol::ApprovalMode;
use jucode_protocol::daemon::{DaemonEvent, Reply};
use jucode_protocol::serve::TranscriptItem;
use serde_json::{Value, json};

use super::{SessionError, shutdown_op};
use crate::clients::ClientId;
use crate::cx::OpCx;
use crate::terminals::{ProcessSpec, TermId, TermSize};
use crate::{Hub, Inner, to_value};

/// A session while its conversation is in a TUI.
#[derive(Debug, Clone)]
pub(crate) enum TuiSlot {
    /// The engine is being stopped; the TUI is not up yet.
    Starting,
    Running {
        term: TermId,
        client: ClientId,
    },
}

impl super::Session {
    /// `surface: tui` for a watcher's snapshot while the TUI runs.
    pub(super) fn surface_frame(&self) -> Option<Value> {
        let Some(TuiSlot::Running { term, client }) = &self.tui else {
            return None;
        };
        Some(to_value(&Reply::to(
            None,
            DaemonEvent::Surface {
                session: self.id.clone(),
                surface: "tui".into(),
                term: Some(term.to_string()),
                client: Some(client.0),
            },
        )))
    }
}

/// What the op asked for.
pub(super) struct TuiRequest {
    pub(super) session: String,
    pub(super) cols: Option<i64>,
    pub(super) rows: Option<i64>,
    pub(super) force: bool,
}

fn interrupt_op() -> jucode_protocol::Object {
    let mut op = jucode_protocol::Object::new();
    op.insert("op".into(), Value::String("interrupt".into()));
    op
}

impl Hub {
    /// The spec a TUI of `session` starts from: its directories, mode and model.
    fn tui_spec(&self, inner: &Inner, session: &str) -> Result<TuiSpec, SessionError> {
        let s = inner.sessions.get(session)?;
        let approval_mode = s
            .view
            .state
            .get("approval_mode")
            .and_then(|e| e.str("mode"))
            .and_then(ApprovalMode::parse);
        Ok(TuiSpec {
            session: session.to_string(),
            cwd: s.cwd.clone(),
            extra_dirs: inner.workspaces.dirs_for(&s.cwd),
            approval_mode,
            model: super::engine::model_of(&s.view),
            gateway: s.gateway,
        })
    }

    /// Frees the slot of a hand-off that did not start, and starts the engine again when it
    /// was stopped for it.
    fn tui_abandoned(self: &Arc<Self>, session: &str, restart: bool) {
        let mut inner = self.lock();
        if let Some(s) = inner.sessions.map.get_mut(session) {
            s.tui = None;
        }
        if restart
            && inner.sessions.accepting()
            && let Err(e) = self.reopen_session(&mut inner, session)
        {
            tracing::warn!(session, "could not start the engine again: {e}");
        }
    }

    /// The TUI exited: the engine starts again on the conversation as its engine saved it,
    /// then every client hears `surface: gui` and gets the fresh transcript.
    async fn tui_exited(
        self: &Arc<Self>,
        session: String,
        engine: String,
        spec: TuiSpec,
        before: Vec<SavedConversation>,
    ) {
        let saved = match self.engine_factory(&engine) {
            Ok(factory) => {
                let id = session.clone();
                tokio::task::spawn_blocking(move || {
                    factory.tui_finished(&spec, &before);
                    factory.saved_transcript(&id)
                })
                .await
                .unwrap_or_default()
            }
            Err(_) => None,
        };
        let mut inner = self.lock();
        let Some(s) = inner.sessions.map.get_mut(&session) else {
            return;
        };
        s.tui = None;
        if inner.sessions.accepting() {
            let restarted = self.reopen_with(&mut inner, &session, saved.clone());
            if let Err(e) = restarted {
                tracing::warn!(session, "could not start the engine after its TUI: {e}");
                let frame = json!({
                    "type": "error",
                    "session": session,
                    "message": format!("the engine did not start again after its TUI: {e}"),
                });
                inner.broadcast(&frame);
            }
        }
        let surface = to_value(&Reply::to(
            None,
            DaemonEvent::Surface {
                session: session.clone(),
                surface: "gui".into(),
                term: None,
                client: None,
            },
        ));
        inner.broadcast(&surface);
        // The engine's saved copy when the daemon can read one; otherwise the restarted
        // engine sends its own `transcript` once it is up (Claude Code, Codex).
        if let Some(items) = saved {
            let transcript = json!({"type": "transcript", "session": session, "items": items});
            inner.broadcast(&transcript);
        }
    }

    /// As `reopen_session`, with the conversation the caller read from the engine's copy, so
    /// every snapshot holds it before the engine's own `transcript` arrives.
    fn reopen_with(
        self: &Arc<Self>,
        inner: &mut Inner,
        session: &str,
        saved: Option<Vec<TranscriptItem>>,
    ) -> Result<(), SessionError> {
        let s = inner.sessions.get(session)?;
        if s.running.is_some() {
            return Ok(());
        }
        let record = super::Record::Open {
            session: session.to_string(),
            cwd: s.cwd.display().to_string(),
            engine: s.engine.clone(),
            agent: s.agent.clone(),
            chat: s.chat,
            at: self.config.clock.now_ms(),
        };
        inner.sessions.append(&record)?;
        self.start_engine(inner, session, jucode_protocol::Object::new(), true, saved)?;
        inner.broadcast_sessions();
        Ok(())
    }
}

/// Finds the engine's TUI command, and the conversations saved in its directory now, off the
/// async threads.
async fn command(
    hub: &Arc<Hub>,
    engine: &str,
    spec: TuiSpec,
) -> Result<(TuiCommand, Vec<SavedConversation>), SessionError> {
    let factory = hub.engine_factory(engine)?;
    let name = engine.to_string();
    let (command, before) = tokio::task::spawn_blocking(move || {
        let command = factory.tui_command(&spec);
        let before = match command {
            Some(Ok(_)) => factory.saved_conversations(&spec.cwd),
            _ => Vec::new(),
        };
        (command, before)
    })
    .await
    .map_err(|e| SessionError::TuiUnavailable(format!("{name}: {e}")))?;
    let command = command.ok_or(SessionError::NoTui(name))??;
    Ok((command, before))
}

pub(super) async fn session_tui(cx: &OpCx<'_>, req: TuiRequest) -> Result<(), SessionError> {
    let hub = cx.hub;
    let session = req.session.clone();
    // Checks first: nothing is stopped for a hand-off that would be refused.
    let (engine, spec) = {
        let inner = hub.lock();
        let s = inner.sessions.get(&session)?;
        if s.tui.is_some() {
            return Err(SessionError::InTui(session));
        }
        if s.agent.is_some() {
            return Err(SessionError::AgentTui);
        }
        if s.busy && !req.force {
            return Err(SessionError::TuiBusy(session));
        }
        (s.engine.clone(), hub.tui_spec(&inner, &session)?)
    };
    command(hub, &engine, spec).await?;

    // Take the slot, then stop the engine (a running turn with it, as `force` agreed).
    let done = {
        let mut inner = hub.lock();
        let s = inner.sessions.get_mut(&session)?;
        if s.tui.is_some() {
            return Err(SessionError::InTui(session));
        }
        if s.busy && !req.force {
            return Err(SessionError::TuiBusy(session));
        }
        s.tui = Some(TuiSlot::Starting);
        let busy = s.busy;
        let done = s.running.as_ref().map(|running| {
            if busy && engine == "jucode" {
                let _ = running.ops.send(interrupt_op());
            }
            let _ = running.ops.send(shutdown_op());
            running.done.subscribe()
        });
        if busy && engine != "jucode" {
            let frame = json!({"type": "status", "session": session, "message": "interrupted"});
            inner.broadcast(&frame);
        }
        done
    };
    let was_running = done.is_some();
    if let Some(mut done) = done {
        let _ = done.wait_for(|stopped| *stopped).await;
    }
    let spec = {
        let mut inner = hub.lock();
        // The engine's background tasks went with it.
        let frame = json!({"type": "background_tasks", "session": session, "tasks": []});
        inner.broadcast(&frame);
        hub.tui_spec(&inner, &session)
    };
    // Asked again now the engine is gone: it may have saved the conversation meanwhile.
    let found = match &spec {
        Ok(spec) => command(hub, &engine, spec.clone()).await,
        Err(e) => Err(SessionError::TuiUnavailable(e.to_string())),
    };
    let (command, before, spec) = match (found, spec) {
        (Ok((command, before)), Ok(spec)) => (command, before, spec),
        (Err(e), _) | (_, Err(e)) => {
            hub.tui_abandoned(&session, was_running);
            return Err(e);
        }
    };
    let cwd = spec.cwd.clone();
    let process = ProcessSpec {
        program: command.program.into_os_string(),
        args: command.args.into_iter().map(OsString::from).collect(),
        cwd,
        env: command
            .env
            .into_iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect(),
        env_remove: command.env_remove.into_iter().map(OsString::from).collect(),
    };
    let client = cx.client;
    let opened = hub.open_process(
        client,
        process,
        TermSize::from_request(req.cols, req.rows),
        |inner, term| {
            cx.reply_locked(
                inner,
                DaemonEvent::TermOpened {
                    term: term.to_string(),
                },
            );
            if let Some(s) = inner.sessions.map.get_mut(&session) {
                s.tui = Some(TuiSlot::Running {
                    term: term.clone(),
                    client,
                });
            }
            let surface = to_value(&Reply::to(
                None,
                DaemonEvent::Surface {
                    session: session.clone(),
                    surface: "tui".into(),
                    term: Some(term.to_string()),
                    client: Some(client.0),
                },
            ));
            inner.broadcast(&surface);
        },
    );
    let opened = match opened {
        Ok(opened) => opened,
        Err(e) => {
            hub.tui_abandoned(&session, was_running);
            return Err(SessionError::TuiUnavailable(e.to_string()));
        }
    };
    let hub = hub.clone();
    tokio::spawn(async move {
        // Fires when the TUI was reaped, whatever ended it (the user, term_close, the
        // client leaving); a dropped sender means the same.
        let _ = opened.exited.await;
        hub.tui_exited(session, engine, spec, before).await;
    });
    Ok(())
}
