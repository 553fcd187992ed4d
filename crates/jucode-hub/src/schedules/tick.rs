//! Firing due tasks (the one-second loop), running one on request, and following a run's
//! delivery into `last_session`.
//!
//! A due task is first recorded as a message (fsynced in `messages.jsonl`, dedupe key
//! `schedule:<id>:<next_run_at>`), and only then does `schedules.json` move on to the next
//! run. A kill between the two writes leaves the task due with the same `next_run_at`: the
//! next start fires it again with the same key, which the messages log drops as a duplicate,
//! and only the move on is written. The other order could lose a run (moved on, never sent).

use std::sync::Arc;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use jucode_protocol::daemon::ScheduleInfo;

use super::{ScheduleError, next_run_at, seconds};
use crate::error::OpError;
use crate::messages::{NewMessage, Origin};
use crate::{Hub, Inner};

/// The message one run of `task` sends, with its dedupe key.
fn message(inner: &Inner, task: &ScheduleInfo, dedupe_key: String) -> NewMessage {
    // new_session: false continues the last run's session while it is still the agent's,
    // under the id its engine gave it (Codex names a session after its thread at start-up).
    let continued =
        (!task.new_session)
            .then_some(task.last_session.as_deref())
            .flatten()
            .map(|s| inner.sessions.current_id(s).to_string())
            .filter(|s| {
                inner.sessions.route_facts().iter().any(|f| {
                    f.id == *s && f.agent.as_deref() == Some(task.agent.as_str()) && !f.hidden
                })
            });
    NewMessage {
        to: task.agent.clone(),
        from: Origin::Schedule(task.id.clone()),
        body: format!("定时任务「{}」：\n{}", task.name, task.prompt),
        new_session: continued.is_none(),
        session: continued,
        reply_to: None,
        dedupe_key: Some(dedupe_key),
    }
}

impl Inner {
    /// `next_run_at` of every task not yet due, computed again in `tz` (a time-zone change of
    /// the machine, or the first tick after a start). Due tasks stay due: they fire now.
    /// Returns whether any changed.
    fn follow_zone(&mut self, now: Timestamp, tz: &TimeZone) -> bool {
        if self.schedules.zone.as_ref() == Some(tz) {
            return false;
        }
        self.schedules.zone = Some(tz.clone());
        let now_s = seconds(now);
        let mut changed = false;
        for task in self.schedules.list(None) {
            if task.next_run_at.is_some_and(|n| n <= now_s) {
                continue;
            }
            let next = next_run_at(&task, now, tz);
            if next != task.next_run_at {
                let mut moved = task;
                moved.next_run_at = next;
                match self.schedules.put(moved) {
                    Ok(()) => changed = true,
                    Err(e) => tracing::warn!("scheduled tasks: {e}"),
                }
            }
        }
        changed
    }
}

impl Hub {
    /// Fires every due task whose agent is enabled, once, then moves it on to its next time
    /// after now. A task of a disabled agent neither fires nor moves on.
    pub(crate) fn run_due_schedules(self: &Arc<Self>, inner: &mut Inner) {
        let now = self.config.clock.now();
        let tz = self.config.clock.time_zone();
        let now_s = seconds(now);
        let mut changed = inner.follow_zone(now, &tz);
        let due: Vec<ScheduleInfo> = inner
            .schedules
            .list(None)
            .into_iter()
            .filter(|t| t.enabled && t.next_run_at.is_some_and(|n| n <= now_s))
            .collect();
        for task in due {
            if !inner
                .agents
                .get(&task.agent)
                .is_some_and(|a| a.config.enabled)
            {
                continue;
            }
            let Some(due_at) = task.next_run_at else {
                continue;
            };
            let key = format!("schedule:{}:{due_at}", task.id);
            let msg = message(inner, &task, key);
            if let Err(e) = self.enqueue_message(inner, msg) {
                if inner.schedules.failing.insert(task.id.clone()) {
                    tracing::warn!("scheduled task {} could not run yet: {e}", task.id);
                }
                continue;
            }
            inner.schedules.failing.remove(&task.id);
            // Read again: the delivery may have filled in last_session.
            let Some(mut moved) = inner.schedules.get(&task.id).cloned() else {
                continue;
            };
            moved.last_run_at = Some(now_s);
            moved.next_run_at = next_run_at(&moved, now, &tz);
            if let Err(e) = inner.schedules.put(moved) {
                // The run is recorded; the next tick's attempt is its duplicate and only
                // moves the task on.
                tracing::warn!("scheduled task {}: {e}", task.id);
            }
            changed = true;
        }
        if changed {
            inner.broadcast_schedules();
        }
    }

    /// `schedule_run`: sends the task's prompt now, enabled or not, with the dedupe key
    /// `schedule:<id>:run:<unix seconds>` (a second run within the second is dropped).
    /// `next_run_at` stays; `last_run_at` becomes now.
    pub(crate) fn run_now(self: &Arc<Self>, inner: &mut Inner, id: &str) -> Result<(), OpError> {
        let task = inner
            .schedules
            .get(id)
            .cloned()
            .ok_or_else(|| ScheduleError::Unknown(id.to_string()))?;
        match inner.agents.get(&task.agent) {
            None => return Err(ScheduleError::UnknownAgent(task.agent).into()),
            Some(a) if !a.config.enabled => {
                return Err(ScheduleError::AgentDisabled(task.agent).into());
            }
            Some(_) => {}
        }
        let now_s = seconds(self.config.clock.now());
        let msg = message(inner, &task, format!("schedule:{id}:run:{now_s}"));
        let accepted = self.enqueue_message(inner, msg)?;
        if !accepted.duplicate
            && let Some(mut ran) = inner.schedules.get(id).cloned()
        {
            ran.last_run_at = Some(now_s);
            inner.schedules.put(ran).map_err(ScheduleError::from)?;
        }
        Ok(())
    }
}

/// After a delivery (`messages/deliver.rs`, with its `message_delivered` frame): a run of a
/// task fills in its `last_session`, and every client gets the list.
pub(crate) fn delivered(inner: &mut Inner, frame: &serde_json::Value) {
    let field = |name: &str| frame.get(name).and_then(serde_json::Value::as_str);
    let (Some(from), Some(session)) = (field("from"), field("session")) else {
        return;
    };
    let Some(id) = from.strip_prefix("schedule:") else {
        return;
    };
    let Some(mut task) = inner.schedules.get(id).cloned() else {
        return;
    };
    if task.last_session.as_deref() != Some(session) {
        task.last_session = Some(session.to_string());
        if let Err(e) = inner.schedules.put(task) {
            // Caught up from messages.jsonl at the next start.
            tracing::warn!("scheduled task {id}: {e}");
        }
    }
    inner.broadcast_schedules();
}
