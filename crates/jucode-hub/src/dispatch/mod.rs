//! Dispatch (`dispatch_*`): a batch of requests the reserved agent `dispatch` splits into
//! tasks (its tool, `tool.rs`), each sent to a new session in one of the user's projects and
//! followed through its session's turns (`follow.rs`) until the dispatcher writes the summary.
//! Kept in `dispatches.jsonl` (`store.rs`); every change is broadcast as the whole list.
//!
//! Invariants: a dispatch change is fsynced before it is acknowledged or acted on; a task is
//! logged with its session before its text is handed to that session, so no task is sent
//! twice, across restarts included; every task gets a session of its own, so no session ever
//! holds two dispatch tasks.

mod follow;
mod store;
#[cfg(test)]
mod tests;
pub(crate) mod tool;

use std::sync::Arc;

use jucode_clock::SharedClock;
use jucode_protocol::Object;
use jucode_protocol::daemon::{
    DaemonEvent, DispatchInfo, DispatchOp, DispatchStatus, Reply, TaskStatus,
};
use jucode_store::{StateDir, StoreError};
use serde_json::Value;

use crate::cx::OpCx;
use crate::error::OpError;
use crate::notifications::Notification;
use crate::sessions::{Created, SessionError};
use crate::{Hub, HubError, Inner, paths, to_value};

pub(crate) use follow::Change;
pub(crate) use store::Stored;

/// The approval modes a dispatch's tasks may run in.
const MODES: [&str; 4] = ["manual", "auto-edit", "auto", "full-access"];
/// The mode when `dispatch_send` names none.
const DEFAULT_MODE: &str = "auto";
/// The engine the dispatcher runs on: its tool is served in process.
pub(crate) const DISPATCHER_ENGINE: &str = "jucode";
/// How much of a task session's last reply `reply` keeps (its end), in characters.
const REPLY_CHARS: usize = 400;

/// Why a dispatch op failed; the texts are the protocol's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DispatchError {
    #[error("could not save the dispatch: {0}")]
    Save(#[from] StoreError),
    #[error("dispatch_send: text must not be empty")]
    EmptyText,
    #[error("approval_mode must be manual, auto-edit, auto or full-access, not {0:?}")]
    ApprovalMode(String),
    #[error("unknown requirement {0}")]
    UnknownRequirement(String),
    #[error("unknown dispatch {0}")]
    Unknown(String),
    #[error(
        "dispatch {dispatch} is {status}, not awaiting: only a plan waiting for you can be confirmed"
    )]
    NotAwaiting { dispatch: String, status: String },
    #[error("the dispatcher cannot start: {0}")]
    Dispatcher(#[source] SessionError),
    #[error(transparent)]
    Hub(#[from] HubError),
}

pub(crate) struct Dispatches {
    clock: SharedClock,
    store: store::Store,
    /// Each dispatch as the last broadcast showed it: what notifies is a change from it.
    seen: Vec<DispatchInfo>,
}

impl Dispatches {
    /// Folds the log. A dispatcher turn the last run was in (planning, or writing the summary)
    /// died with it: those dispatches are failed rather than asked again.
    pub(crate) fn open(store: &StateDir, clock: SharedClock) -> Result<Dispatches, HubError> {
        let mut d = Dispatches {
            clock,
            store: store::Store::open(store)?,
            seen: Vec::new(),
        };
        let cut: Vec<Stored> = d
            .store
            .list
            .iter()
            .filter(|s| {
                s.info.status == DispatchStatus::Planning
                    || (s.info.status == DispatchStatus::Running && s.summarizing)
            })
            .cloned()
            .collect();
        for mut s in cut {
            s.info.status = DispatchStatus::Failed;
            d.save(s)?;
        }
        // What the last run left notifies nothing again.
        d.seen = d.store.list.iter().map(|s| s.info.clone()).collect();
        Ok(d)
    }

    pub(crate) fn event(&self) -> DaemonEvent {
        DaemonEvent::Dispatches {
            dispatches: self.store.list.iter().map(|s| s.info.clone()).collect(),
        }
    }

    pub(crate) fn get(&self, id: &str) -> Option<&Stored> {
        self.store.get(id)
    }

    /// Saves a change (fsynced), stamping `updated_at` from the hub clock.
    pub(crate) fn save(&mut self, mut s: Stored) -> Result<(), StoreError> {
        s.info.updated_at = self.clock.now_ms();
        self.store.save(s)
    }

    /// The notifications the list as it is now makes, against the last one seen.
    fn seen_now(&mut self) -> Vec<Notification> {
        let now: Vec<DispatchInfo> = self.store.list.iter().map(|s| s.info.clone()).collect();
        let mut out = Vec::new();
        for d in &now {
            out.extend(notes(self.seen.iter().find(|b| b.id == d.id), d));
        }
        self.seen = now;
        out
    }

    /// Whether `session` is a dispatcher.
    pub(crate) fn is_dispatcher(&self, session: &str) -> bool {
        self.store.get(session).is_some()
    }
}

impl Inner {
    pub(crate) fn broadcast_dispatches(&mut self) {
        for note in self.dispatches.seen_now() {
            self.notifications.queue(note);
        }
        let frame = to_value(&Reply::to(None, self.dispatches.event()));
        self.broadcast(&frame);
    }
}

/// A `user_message` op carrying `content`.
pub(crate) fn user_message(content: &str) -> Object {
    let mut op = Object::new();
    op.insert("op".into(), "user_message".into());
    op.insert("content".into(), content.into());
    op
}

/// The last `max` characters of `text`.
fn tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    text.chars().skip(count.saturating_sub(max)).collect()
}

/// Answers the dispatch ops; every change is broadcast as the whole list.
pub(crate) fn handle(cx: &OpCx<'_>, op: DispatchOp) -> Result<(), OpError> {
    let hub = cx.hub;
    let mut inner = hub.lock();
    let inner = &mut *inner;
    match op {
        DispatchOp::DispatchList => {
            let list = inner.dispatches.event();
            cx.reply_locked(inner, list);
            Ok(())
        }
        DispatchOp::DispatchSend {
            text,
            plan,
            approval_mode,
            requirement,
        } => {
            if text.trim().is_empty() {
                return Err(DispatchError::EmptyText.into());
            }
            let mode = approval_mode.unwrap_or_else(|| DEFAULT_MODE.into());
            if !MODES.contains(&mode.as_str()) {
                return Err(DispatchError::ApprovalMode(mode).into());
            }
            if let Some(r) = &requirement
                && !inner.requirements.exists(r)
            {
                return Err(DispatchError::UnknownRequirement(r.clone()).into());
            }
            let dir = hub.config.home.join("dispatch");
            std::fs::create_dir_all(&dir).map_err(crate::error::IoError::at(&dir))?;
            let session = hub
                .start_dispatcher(inner, dir)
                .map_err(DispatchError::Dispatcher)?;
            let now = hub.config.clock.now_ms();
            let stored = Stored {
                info: DispatchInfo {
                    id: session.clone(),
                    text: text.clone(),
                    plan,
                    mode,
                    status: DispatchStatus::Planning,
                    tasks: Vec::new(),
                    summary: String::new(),
                    created_at: now,
                    updated_at: now,
                },
                requirement,
                texts: Default::default(),
                summarizing: false,
            };
            if let Err(e) = inner.dispatches.save(stored) {
                // Nothing was recorded: the dispatcher has nothing to plan for.
                inner.sessions.close(&session);
                return Err(DispatchError::Save(e).into());
            }
            cx.reply_locked(
                inner,
                DaemonEvent::DispatchStarted {
                    dispatch: session.clone(),
                },
            );
            inner.broadcast_dispatches();
            // The text as the user wrote it; the dispatcher's instructions, the projects and
            // the engines are its system prompt (`tool.rs`).
            inner.sessions.deliver(&session, user_message(&text));
            Ok(())
        }
        DispatchOp::DispatchConfirm {
            dispatch,
            approve,
            note,
        } => {
            let Some(mut s) = inner.dispatches.get(&dispatch).cloned() else {
                return Err(DispatchError::Unknown(dispatch).into());
            };
            if s.info.status != DispatchStatus::Awaiting {
                return Err(DispatchError::NotAwaiting {
                    dispatch,
                    status: status_name(s.info.status).into(),
                }
                .into());
            }
            s.info.status = if approve {
                DispatchStatus::Running
            } else {
                DispatchStatus::Cancelled
            };
            inner.dispatches.save(s).map_err(DispatchError::Save)?;
            cx.reply_locked(
                inner,
                DaemonEvent::DispatchConfirmed {
                    dispatch: dispatch.clone(),
                    approve,
                },
            );
            if let Some(note) = note.filter(|n| !n.trim().is_empty()) {
                let verdict = if approve { "approved" } else { "turned down" };
                let words = format!("The user {verdict} the plan and adds: {note}");
                hub.tell_dispatcher(inner, &dispatch, &words);
            }
            if approve {
                hub.send_tasks(inner, &dispatch);
            }
            inner.broadcast_dispatches();
            Ok(())
        }
    }
}

fn status_name(status: DispatchStatus) -> &'static str {
    match status {
        DispatchStatus::Planning => "planning",
        DispatchStatus::Awaiting => "awaiting",
        DispatchStatus::Running => "running",
        DispatchStatus::Done => "done",
        DispatchStatus::Cancelled => "cancelled",
        DispatchStatus::Failed => "failed",
    }
}

impl Hub {
    /// Hands `words` to the dispatcher's session, starting it again when it is closed.
    /// Returns whether they were handed over.
    fn tell_dispatcher(self: &Arc<Self>, inner: &mut Inner, dispatch: &str, words: &str) -> bool {
        if inner.sessions.state(dispatch) == crate::sessions::SessionState::Closed
            && let Err(e) = self.reopen_session(inner, dispatch)
        {
            tracing::warn!(dispatch, "the dispatcher could not start again: {e}");
            return false;
        }
        inner.sessions.deliver(dispatch, user_message(words));
        true
    }

    /// Sends every planned task of a running dispatch, each to a new session of its own.
    /// A task is saved with its session before its text goes out; one that cannot be given a
    /// session fails with the reason as its reply.
    pub(crate) fn send_tasks(self: &Arc<Self>, inner: &mut Inner, dispatch: &str) {
        let Some(s) = inner.dispatches.get(dispatch) else {
            return;
        };
        let planned: Vec<u64> = s
            .info
            .tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Planned)
            .map(|t| t.id)
            .collect();
        for task in planned {
            if let Err(e) = self.send_task(inner, dispatch, task) {
                tracing::error!(dispatch, task, "{e}");
            }
        }
        self.maybe_summarize(inner, dispatch);
    }

    fn send_task(
        self: &Arc<Self>,
        inner: &mut Inner,
        dispatch: &str,
        task: u64,
    ) -> Result<(), StoreError> {
        let Some(mut s) = inner.dispatches.get(dispatch).cloned() else {
            return Ok(());
        };
        let Some(t) = s.info.tasks.iter().find(|t| t.id == task).cloned() else {
            return Ok(());
        };
        let text = tool::task_text(&s, task);
        let started = paths::resolve_dir(&t.project, &self.config.user_home)
            .map_err(|e| e.to_string())
            .and_then(|cwd| {
                let mut options = Object::new();
                options.insert("approval_mode".into(), Value::from(s.info.mode.clone()));
                self.new_session(
                    inner,
                    cwd,
                    t.engine.clone(),
                    false,
                    options,
                    Created::nobody(),
                )
                .map_err(|e| e.to_string())
            });
        let Some(slot) = s.info.tasks.iter_mut().find(|t| t.id == task) else {
            return Ok(());
        };
        match started {
            Ok(session) => {
                slot.session = Some(session.clone());
                slot.status = TaskStatus::Sent;
                inner.dispatches.save(s.clone())?;
                if let Some(r) = &s.requirement
                    && let Err(e) = inner.link_session(r, &session)
                {
                    tracing::warn!(dispatch, task, "could not link the task's session: {e}");
                }
                // Nobody watches a task's session, yet an approval in it waits for the user
                // (who is notified) rather than being deferred.
                inner
                    .sessions
                    .deliver(&session, crate::sessions::set_attended(true));
                inner.sessions.deliver(&session, user_message(&text));
            }
            Err(why) => {
                slot.status = TaskStatus::Failed;
                slot.reply = why;
                inner.dispatches.save(s)?;
            }
        }
        Ok(())
    }

    /// Once every task of a running dispatch has ended, its results go to the dispatcher
    /// (once) for the summary; while the dispatcher is in a turn, its turn's end does it.
    pub(crate) fn maybe_summarize(self: &Arc<Self>, inner: &mut Inner, dispatch: &str) {
        let Some(mut s) = inner.dispatches.get(dispatch).cloned() else {
            return;
        };
        if s.info.status != DispatchStatus::Running
            || s.summarizing
            || !s.info.tasks.iter().all(|t| t.status.is_final())
            || inner.sessions.busy(dispatch)
        {
            return;
        }
        s.summarizing = true;
        let words = tool::results_text(&s);
        if let Err(e) = inner.dispatches.save(s.clone()) {
            tracing::error!(dispatch, "{e}");
            return;
        }
        if !self.tell_dispatcher(inner, dispatch, &words) {
            s.info.status = DispatchStatus::Failed;
            if let Err(e) = inner.dispatches.save(s) {
                tracing::error!(dispatch, "{e}");
            }
        }
    }
}

/// What the user's devices are told when a dispatch changes from `before` to `after`: its
/// plan waits, a task waits for an approval, it is done.
pub(crate) fn notes(before: Option<&DispatchInfo>, after: &DispatchInfo) -> Vec<Notification> {
    let mut notes = Vec::new();
    let was = before.map(|b| b.status);
    let title_text = tail_words(&after.text);
    if after.status == DispatchStatus::Awaiting && was != Some(DispatchStatus::Awaiting) {
        notes.push(Notification {
            title: format!("Dispatch plan waiting: {title_text}"),
            body: after
                .tasks
                .iter()
                .map(|t| format!("{}. {}", t.id, t.title))
                .collect::<Vec<_>>()
                .join("\n"),
            tag: format!("dispatch-{}", after.id),
            url: None,
            session: Some(after.id.clone()),
        });
    }
    for t in &after.tasks {
        let was_waiting = before
            .and_then(|b| b.tasks.iter().find(|o| o.id == t.id))
            .is_some_and(|o| o.status == TaskStatus::Waiting);
        if t.status == TaskStatus::Waiting && !was_waiting {
            notes.push(Notification {
                title: format!("Approval needed: {}", t.title),
                body: format!("A task of the dispatch \"{title_text}\" asks for your approval."),
                tag: format!("dispatch-{}-{}", after.id, t.id),
                url: None,
                session: t.session.clone(),
            });
        }
    }
    if after.status == DispatchStatus::Done && was != Some(DispatchStatus::Done) {
        notes.push(Notification {
            title: format!("Dispatch done: {title_text}"),
            body: if after.summary.trim().is_empty() {
                "Every task has ended.".into()
            } else {
                after.summary.clone()
            },
            tag: format!("dispatch-{}", after.id),
            url: None,
            session: Some(after.id.clone()),
        });
    }
    notes
}

/// A dispatch's text cut for a notification's title: its first line, at most 40 characters
/// (and `…` when cut).
fn tail_words(text: &str) -> String {
    let first = text.trim().lines().next().unwrap_or_default().trim();
    let mut cut: String = first.chars().take(40).collect();
    if cut.len() < first.len() {
        cut.push('…');
    }
    cut
}
