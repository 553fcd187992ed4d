//! The session ops a client sends: create, open, close, meta, watch, history.

use std::path::PathBuf;
use std::sync::Arc;

use jucode_engine::EngineFactory;
use jucode_protocol::Object;
use jucode_protocol::daemon::sessions::ENGINES;
use jucode_protocol::daemon::{DaemonEvent, Reply};
use serde_json::Value;

use super::{
    Created, Record, Session, SessionError, check_options, log::default_engine, set_attended,
};
use crate::cx::OpCx;
use crate::error::IoError;
use crate::util::new_uuid;
use crate::{Hub, Inner, paths};

pub(super) struct CreateRequest {
    pub(super) cwd: Option<String>,
    pub(super) engine: Option<String>,
    pub(super) options: Object,
    pub(super) agent: Option<String>,
    pub(super) chat: bool,
}

pub(super) struct OpenRequest {
    pub(super) session: String,
    pub(super) cwd: Option<String>,
    pub(super) engine: Option<String>,
    pub(super) options: Object,
}

impl Hub {
    /// The factory registered under `name`, or why there is none.
    pub(super) fn engine_factory(
        &self,
        name: &str,
    ) -> Result<Arc<dyn EngineFactory>, SessionError> {
        if let Some(factory) = self.config.engines.get(name) {
            return Ok(factory.clone());
        }
        match ENGINES.iter().find(|(known, _)| *known == name) {
            Some((_, missing)) => Err(SessionError::EngineUnavailable(missing)),
            None => {
                let names: Vec<&str> = ENGINES.iter().map(|(n, _)| *n).collect();
                let expected = match names.split_last() {
                    Some((last, rest)) if !rest.is_empty() => {
                        format!("{} or {last}", rest.join(", "))
                    }
                    _ => names.join(""),
                };
                Err(SessionError::UnknownEngine {
                    name: name.to_string(),
                    expected,
                })
            }
        }
    }

    /// Whether an engine of this name runs a program the client names (a device may not).
    fn runs_named_program(&self, engine: &str) -> bool {
        self.engine_factory(engine)
            .is_ok_and(|f| f.runs_named_program())
    }
}

/// Whether `id` can name a session (it also names files engines keep).
pub(super) fn is_session_id(id: &str) -> bool {
    !(id.is_empty() || id.len() > 200 || id.contains(['/', '\0']))
}

pub(super) async fn history(cx: &OpCx<'_>, cwd: String) {
    // Engines read their own files: outside the lock, off the async threads.
    let engines: Vec<(String, Arc<dyn EngineFactory>)> = cx
        .hub
        .config
        .engines
        .iter()
        .map(|(name, f)| (name.clone(), f.clone()))
        .collect();
    let dir = PathBuf::from(&cwd);
    let saved = tokio::task::spawn_blocking(move || {
        let mut all = Vec::new();
        for (name, factory) in engines {
            all.extend(
                factory
                    .saved_conversations(&dir)
                    .into_iter()
                    .map(|c| (name.clone(), c)),
            );
        }
        all
    })
    .await
    .unwrap_or_default();
    let event = cx.hub.lock().sessions.history(&cwd, saved);
    cx.reply(event);
}

pub(super) fn create(cx: &OpCx<'_>, mut req: CreateRequest) -> Result<(), SessionError> {
    let hub = cx.hub;
    // `engine: "default"` is the daemon's default engine, saved under its own name.
    req.engine = req.engine.filter(|e| e != "default");
    let engine = req.engine.clone().unwrap_or_else(default_engine);
    check_options(hub.runs_named_program(&engine), &req.options, &cx.auth)?;
    if let Some(agent) = req.agent {
        let mut inner = hub.lock();
        let session = hub.start_agent_session(&mut inner, &agent, req.engine, req.options)?;
        cx.reply_locked(&mut inner, DaemonEvent::SessionCreated { session });
        return Ok(());
    }
    let cwd = if req.chat {
        let chats = hub.config.home.join("chats");
        std::fs::create_dir_all(&chats).map_err(IoError::at(&chats))?;
        chats
    } else {
        let cwd = req.cwd.ok_or(SessionError::CreateNeedsCwd)?;
        paths::resolve_dir(&cwd, &hub.config.user_home)?
    };
    let factory = hub.engine_factory(&engine)?;
    super::gateway::check_option(factory.takes_gateway(), &engine, &req.options)?;
    let mut inner = hub.lock();
    let created = Created::session_create(cx.client, cx.id.clone());
    hub.new_session(&mut inner, cwd, engine, req.chat, req.options, created)?;
    Ok(())
}

impl Hub {
    /// Records a new session of `engine` in `cwd` (resolved by the caller) and starts its
    /// engine; `created` is answered once the engine has named the session (at once for
    /// engines that take the daemon's id). Returns the id as given now.
    pub(crate) fn new_session(
        self: &Arc<Self>,
        inner: &mut Inner,
        cwd: PathBuf,
        engine: String,
        chat: bool,
        options: Object,
        created: Created,
    ) -> Result<String, SessionError> {
        let opens_at_startup = self.engine_factory(&engine)?.opens_at_startup();
        let session = new_uuid()?;
        let at = self.config.clock.now_ms();
        inner.sessions.append(&Record::Open {
            session: session.clone(),
            cwd: cwd.display().to_string(),
            engine: engine.clone(),
            agent: None,
            chat,
            at,
        })?;
        inner.sessions.map.insert(
            session.clone(),
            Session::new(session.clone(), cwd, engine, chat, None, at),
        );
        if let Err(e) = self.start_engine(inner, &session, options, false, None) {
            let _ = inner.sessions.append(&Record::Close {
                session: session.clone(),
                at: self.config.clock.now_ms(),
            });
            inner.broadcast_sessions();
            return Err(e);
        }
        if opens_at_startup {
            if let Some(s) = inner.sessions.map.get_mut(&session) {
                s.created = Some(created);
            }
        } else if let Some(client) = created.client {
            let reply = crate::to_value(&Reply::to(created.id, (created.reply)(session.clone())));
            inner.clients.send(client, &reply);
        }
        inner.broadcast_sessions();
        Ok(session)
    }
}

pub(super) async fn open(cx: &OpCx<'_>, mut req: OpenRequest) -> Result<(), SessionError> {
    let hub = cx.hub;
    req.engine = req.engine.filter(|e| e != "default");
    let opened = DaemonEvent::SessionOpened {
        session: req.session.clone(),
    };
    let engine = {
        let mut inner = hub.lock();
        inner.sessions.not_in_tui(&req.session)?;
        let known = inner.sessions.map.get(&req.session);
        let engine = req
            .engine
            .clone()
            .or_else(|| known.map(|s| s.engine.clone()))
            .unwrap_or_else(default_engine);
        check_options(hub.runs_named_program(&engine), &req.options, &cx.auth)?;
        if known.is_some_and(|s| s.running.is_some()) {
            cx.reply_locked(&mut inner, opened);
            return Ok(());
        }
        engine
    };
    // The conversation so far, read before the engine starts so the first watcher's snapshot
    // holds it (an engine's own `transcript` comes only after its start-up).
    let saved = match hub.engine_factory(&engine) {
        Ok(factory) => {
            let session = req.session.clone();
            tokio::task::spawn_blocking(move || factory.saved_transcript(&session))
                .await
                .unwrap_or_default()
        }
        Err(_) => None,
    };
    let mut inner = hub.lock();
    match inner.sessions.map.get(&req.session) {
        // Opened by another client while the conversation was read.
        Some(s) if s.running.is_some() => {
            cx.reply_locked(&mut inner, opened);
            return Ok(());
        }
        Some(_) => {}
        None => {
            let Some(cwd) = req.cwd.as_deref() else {
                return Err(SessionError::UnknownNeedsCwd(req.session));
            };
            if !is_session_id(&req.session) {
                return Err(SessionError::BadId(req.session));
            }
            hub.engine_factory(&engine)?;
            let cwd = paths::resolve_dir(cwd, &hub.config.user_home)?;
            let at = hub.config.clock.now_ms();
            let chat = cwd.starts_with(hub.config.home.join("chats"));
            inner.sessions.map.insert(
                req.session.clone(),
                Session::new(req.session.clone(), cwd, engine.clone(), chat, None, at),
            );
        }
    }
    let s = inner.sessions.get_mut(&req.session)?;
    s.engine = engine.clone();
    let record = Record::Open {
        session: req.session.clone(),
        cwd: s.cwd.display().to_string(),
        engine,
        agent: s.agent.clone(),
        chat: s.chat,
        at: hub.config.clock.now_ms(),
    };
    inner.sessions.append(&record)?;
    hub.start_engine(&mut inner, &req.session, req.options, true, saved)?;
    if let Some(s) = inner.sessions.map.get_mut(&req.session) {
        s.updated_at = hub.config.clock.now_ms();
    }
    cx.reply_locked(&mut inner, opened);
    inner.broadcast_sessions();
    Ok(())
}

pub(super) fn close(hub: &Hub, session: &str) -> Result<(), SessionError> {
    let inner = hub.lock();
    inner.sessions.not_in_tui(session)?;
    let s = inner.sessions.get(session)?;
    let Some(running) = &s.running else {
        return Err(SessionError::NotOpen(session.to_string()));
    };
    // session_closed follows once the engine has stopped (see the engine pump).
    let _ = running.ops.send(super::shutdown_op());
    Ok(())
}

pub(super) fn meta(
    cx: &OpCx<'_>,
    session: &str,
    title: Option<String>,
    archived: Option<bool>,
    hidden: Option<bool>,
    group: Option<Value>,
) -> Result<(), SessionError> {
    let hub = cx.hub;
    let mut inner = hub.lock();
    inner.sessions.not_in_tui(session)?;
    let engine = inner.sessions.get(session)?.engine.clone();
    let at = hub.config.clock.now_ms();
    inner.sessions.append(&Record::Meta {
        session: session.to_string(),
        title: title.clone(),
        archived,
        hidden,
        group: group.clone(),
        at,
    })?;
    // Engines that keep a conversation's name themselves (`claude --resume` lists it) hear it.
    let keeps_titles = hub.engine_factory(&engine).is_ok_and(|f| f.keeps_titles());
    if let Some(s) = inner.sessions.map.get_mut(session) {
        if let Some(title) = title
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty() && keeps_titles)
        {
            let mut op = Object::new();
            op.insert("op".into(), "rename".into());
            op.insert("title".into(), title.into());
            s.send(op);
        }
        s.apply_meta(title, archived, hidden, group);
        s.updated_at = at;
    }
    inner.broadcast_sessions();
    Ok(())
}

pub(super) fn watch(cx: &OpCx<'_>, session: &str, on: bool) -> Result<(), SessionError> {
    let mut inner = cx.hub.lock();
    let s = inner.sessions.get_mut(session)?;
    let mut frames = Vec::new();
    if on {
        if s.watchers.insert(cx.client) && s.watchers.len() == 1 {
            s.send(set_attended(true));
        }
        frames.extend(
            super::view::snapshot(s)
                .into_iter()
                .map(|e| Value::Object(e.0)),
        );
        frames.extend(s.surface_frame());
    } else if s.watchers.remove(&cx.client) && s.watchers.is_empty() {
        s.send(set_attended(false));
    }
    cx.reply_locked(
        &mut inner,
        DaemonEvent::Watching {
            session: session.to_string(),
            watching: on,
        },
    );
    for frame in frames {
        inner.clients.send(cx.client, &frame);
    }
    inner.broadcast_sessions();
    Ok(())
}
