//! Following a dispatch through its sessions' turns: the engine pump tells this module what
//! changed in a session (`Change`); a task moves sent → running ⇄ waiting → done or failed,
//! and the dispatcher's turns move the dispatch (planning → done or failed; the summary).

use std::sync::Arc;

use jucode_protocol::daemon::{DispatchStatus, TaskStatus};

use super::{REPLY_CHARS, tail};
use crate::{Hub, Inner};

/// What happened in a session, as the engine pump saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Change {
    /// A turn ended (the engine is ready again).
    pub(crate) ended: bool,
    /// The engine stopped.
    pub(crate) exited: bool,
}

impl Hub {
    /// Called by the engine pump after each event that may move a dispatch (a turn starting
    /// or ending, an approval asked or answered, an error) and when an engine stops.
    pub(crate) fn dispatch_follow(
        self: &Arc<Self>,
        inner: &mut Inner,
        session: &str,
        change: Change,
    ) {
        if inner.dispatches.is_dispatcher(session) {
            self.dispatcher_changed(inner, session, change);
        } else {
            self.task_changed(inner, session, change);
        }
    }

    fn dispatcher_changed(self: &Arc<Self>, inner: &mut Inner, dispatch: &str, change: Change) {
        let stopped = change.exited && inner.sessions.accepting();
        if !(change.ended || stopped) {
            return;
        }
        let Some(mut s) = inner.dispatches.get(dispatch).cloned() else {
            return;
        };
        let Some(facts) = inner.sessions.facts(dispatch) else {
            return;
        };
        // The dispatcher's own turns matter while it plans and while it sums up.
        let deciding = s.info.status == DispatchStatus::Planning
            || (s.info.status == DispatchStatus::Running && s.summarizing);
        if !deciding {
            // Tasks may all have ended while it was in a turn (a note, say).
            if change.ended {
                self.maybe_summarize(inner, dispatch);
                inner.broadcast_dispatches();
            }
            return;
        }
        if stopped && !change.ended || facts.failed {
            s.info.status = DispatchStatus::Failed;
        } else {
            // Its summing-up turn ended, or a planning turn planned nothing (there was
            // nothing to dispatch): either way its answer is the summary.
            if s.info.summary.is_empty() {
                s.info.summary = tail(&facts.last_reply.unwrap_or_default(), REPLY_CHARS);
            }
            s.info.status = DispatchStatus::Done;
        }
        if let Err(e) = inner.dispatches.save(s) {
            tracing::error!(dispatch, "{e}");
        }
        inner.broadcast_dispatches();
    }

    fn task_changed(self: &Arc<Self>, inner: &mut Inner, session: &str, change: Change) {
        let Some(mut s) = inner
            .dispatches
            .store
            .list
            .iter()
            .find(|d| {
                !d.info.status.is_final()
                    && d.info.tasks.iter().any(|t| {
                        !t.status.is_final()
                            && t.session
                                .as_deref()
                                .is_some_and(|t| inner.sessions.current_id(t) == session)
                    })
            })
            .cloned()
        else {
            return;
        };
        let Some(facts) = inner.sessions.facts(session) else {
            return;
        };
        let Some(task) = s.info.tasks.iter_mut().find(|t| {
            !t.status.is_final()
                && t.session
                    .as_deref()
                    .is_some_and(|t| inner.sessions.current_id(t) == session)
        }) else {
            return;
        };
        // An engine that named its session anew: the task follows the name.
        task.session = Some(session.to_string());
        let before = task.status;
        let stopped = change.exited && inner.sessions.accepting();
        task.status = if change.ended && facts.failed {
            TaskStatus::Failed
        } else if change.ended {
            TaskStatus::Done
        } else if stopped {
            TaskStatus::Failed
        } else if facts.waiting {
            TaskStatus::Waiting
        } else if facts.busy {
            TaskStatus::Running
        } else {
            before
        };
        if task.status.is_final() {
            task.reply = match (&facts.last_reply, stopped && !change.ended) {
                (Some(reply), _) => tail(reply, REPLY_CHARS),
                (None, true) => "the session's engine stopped".into(),
                (None, false) => String::new(),
            };
        }
        if task.status == before {
            return;
        }
        let dispatch = s.info.id.clone();
        if let Err(e) = inner.dispatches.save(s) {
            tracing::error!(dispatch, "{e}");
            return;
        }
        self.maybe_summarize(inner, &dispatch);
        inner.broadcast_dispatches();
    }
}
