//! Agent timers: set with the `timer` tool, kept in `timers.jsonl`, fired by the hub's
//! one-second loop ([`Hub::fire_due_timers`]) as a message to the agent.
//!
//! Armed timers are indexed by `fire_at`, so a tick looks only at the ones due and costs the
//! same with ten thousand armed. A timer is recorded `fired` only after its message was
//! accepted; its id is the message's dedupe key, so a crash between the two still delivers it
//! once (the second attempt is a duplicate). A timer due while the daemon was down fires at
//! the first tick.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use jucode_clock::SharedClock;
use jucode_protocol::daemon::limits::{TIMER_AHEAD_SECS, TIMER_BODY_CHARS};
use jucode_protocol::daemon::{DaemonEvent, TimerInfo, TimersOp};
use jucode_store::{JsonlLog, StateDir, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::agents::tools::{Caller, ToolError};
use crate::cx::OpCx;
use crate::error::OpError;
use crate::messages::{Accepted, NewMessage, Origin};
use crate::util::new_id;
use crate::{Hub, HubError, Inner};

/// Why a timer op failed; the texts are the protocol's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TimerError {
    #[error("could not save the timer: {0}")]
    Save(StoreError),
    #[error("unknown timer {0}")]
    Unknown(String),
    #[error("timer {0} already fired")]
    Fired(String),
    #[error("timer {0} was already cancelled")]
    Cancelled(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reason {
    Fired,
    Cancelled,
}

/// One line of `timers.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record {
    Set {
        id: String,
        agent: String,
        session: String,
        fire_at: u64,
        body: String,
        /// Wake a new session rather than the one that set it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        new_session: bool,
        at: u64,
    },
    Done {
        id: String,
        reason: Reason,
        at: u64,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone)]
struct Timer {
    agent: String,
    session: String,
    fire_at: u64,
    body: String,
    new_session: bool,
}

pub(crate) struct Timers {
    clock: SharedClock,
    log: JsonlLog,
    armed: HashMap<String, Timer>,
    /// The armed timers by `(fire_at, id)`: the tick reads only the front.
    by_time: BTreeSet<(u64, String)>,
    done: HashMap<String, Reason>,
    /// Timers whose delivery failed, so the warning is logged once, not every second.
    failing: HashSet<String>,
}

impl Timers {
    pub(crate) fn open(store: &StateDir, clock: SharedClock) -> Result<Timers, HubError> {
        let (log, records) = store.open_log::<Record>("timers.jsonl")?;
        let mut timers = Timers {
            clock,
            log,
            armed: HashMap::new(),
            by_time: BTreeSet::new(),
            done: HashMap::new(),
            failing: HashSet::new(),
        };
        for record in records {
            timers.apply(record);
        }
        Ok(timers)
    }

    fn apply(&mut self, record: Record) {
        match record {
            Record::Set {
                id,
                agent,
                session,
                fire_at,
                body,
                new_session,
                ..
            } => {
                if self.done.contains_key(&id) || self.armed.contains_key(&id) {
                    return;
                }
                self.by_time.insert((fire_at, id.clone()));
                self.armed.insert(
                    id,
                    Timer {
                        agent,
                        session,
                        fire_at,
                        body,
                        new_session,
                    },
                );
            }
            Record::Done { id, reason, .. } => {
                if let Some(t) = self.armed.remove(&id) {
                    self.by_time.remove(&(t.fire_at, id.clone()));
                }
                self.failing.remove(&id);
                self.done.insert(id, reason);
            }
            Record::Unknown => {}
        }
    }

    fn write(&mut self, record: Record) -> Result<(), TimerError> {
        self.log.append(&record).map_err(TimerError::Save)?;
        self.apply(record);
        Ok(())
    }

    /// Arms a timer (recorded before this returns).
    pub(crate) fn set(
        &mut self,
        agent: &str,
        session: &str,
        fire_at: u64,
        body: String,
        new_session: bool,
    ) -> Result<TimerInfo, TimerError> {
        let at = self.clock.now_ms();
        let id = new_id("tm", at);
        self.write(Record::Set {
            id: id.clone(),
            agent: agent.to_string(),
            session: session.to_string(),
            fire_at,
            body: body.clone(),
            new_session,
            at,
        })?;
        Ok(TimerInfo {
            timer: id,
            agent: agent.to_string(),
            session: session.to_string(),
            fire_at,
            body,
        })
    }

    /// Active timers, soonest first; only `agent`'s when given.
    pub(crate) fn list(&self, agent: Option<&str>) -> Vec<TimerInfo> {
        self.by_time
            .iter()
            .filter_map(|(_, id)| self.armed.get(id).map(|t| (id, t)))
            .filter(|(_, t)| agent.is_none_or(|a| t.agent == a))
            .map(|(id, t)| TimerInfo {
                timer: id.clone(),
                agent: t.agent.clone(),
                session: t.session.clone(),
                fire_at: t.fire_at,
                body: t.body.clone(),
            })
            .collect()
    }

    /// The agent a timer belongs to, or why it is not armed.
    fn armed_agent(&self, id: &str) -> Result<&str, TimerError> {
        if let Some(t) = self.armed.get(id) {
            return Ok(&t.agent);
        }
        Err(match self.done.get(id) {
            Some(Reason::Fired) => TimerError::Fired(id.to_string()),
            Some(Reason::Cancelled) => TimerError::Cancelled(id.to_string()),
            None => TimerError::Unknown(id.to_string()),
        })
    }

    /// Cancels an armed timer, for good (recorded).
    pub(crate) fn cancel(&mut self, id: &str) -> Result<(), TimerError> {
        self.armed_agent(id)?;
        self.done(id, Reason::Cancelled)
    }

    fn done(&mut self, id: &str, reason: Reason) -> Result<(), TimerError> {
        self.write(Record::Done {
            id: id.to_string(),
            reason,
            at: self.clock.now_ms(),
        })
    }

    /// Cancels every armed timer of `agent` (it was deleted). Returns how many.
    pub(crate) fn cancel_agent(&mut self, agent: &str) -> Result<usize, TimerError> {
        let ids: Vec<String> = self
            .armed
            .iter()
            .filter(|(_, t)| t.agent == agent)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ids {
            self.done(id, Reason::Cancelled)?;
        }
        Ok(ids.len())
    }

    /// The ids of the timers due at `now_ms`, soonest first.
    fn due(&self, now_ms: u64) -> Vec<String> {
        self.by_time
            .range(..(now_ms.saturating_add(1), String::new()))
            .map(|(_, id)| id.clone())
            .collect()
    }

    /// The message a timer sends when it fires.
    fn message(&self, id: &str) -> Option<NewMessage> {
        let t = self.armed.get(id)?;
        Some(NewMessage {
            to: t.agent.clone(),
            from: Origin::Timer(id.to_string()),
            body: t.body.clone(),
            session: (!t.new_session).then(|| t.session.clone()),
            reply_to: None,
            dedupe_key: Some(id.to_string()),
            new_session: t.new_session,
        })
    }
}

/// Fires every timer due at `now_ms` through `deliver` (the hub's `enqueue_message`; a test's
/// stand-in), recording each fired only once its message was accepted. A timer whose
/// delivery fails stays armed and is tried again at the next tick.
pub(crate) fn fire_due(
    inner: &mut Inner,
    now_ms: u64,
    mut deliver: impl FnMut(&mut Inner, NewMessage) -> Result<Accepted, OpError>,
) {
    for id in inner.timers.due(now_ms) {
        let Some(msg) = inner.timers.message(&id) else {
            continue;
        };
        if !inner.agents.map.contains_key(&msg.to) {
            // Its agent is gone (removed by hand while the daemon was down): nobody to wake.
            tracing::warn!("timer {id}: agent {} is gone; cancelled", msg.to);
            if let Err(e) = inner.timers.done(&id, Reason::Cancelled) {
                tracing::warn!("timer {id}: {e}");
            }
            continue;
        }
        match deliver(inner, msg) {
            Ok(_) => {
                if let Err(e) = inner.timers.done(&id, Reason::Fired) {
                    // The message is recorded with the timer's id as its dedupe key, so the
                    // next tick's attempt is a duplicate and only records the timer fired.
                    tracing::warn!("timer {id}: {e}");
                }
            }
            Err(e) => {
                if inner.timers.failing.insert(id.clone()) {
                    tracing::warn!("timer {id} could not be delivered yet: {e}");
                }
            }
        }
    }
}

impl Hub {
    /// Fires the timers due at `now_ms` (the one-second loop calls it).
    pub(crate) fn fire_due_timers(self: &Arc<Self>, inner: &mut Inner, now_ms: u64) {
        fire_due(inner, now_ms, |inner, msg| self.enqueue_message(inner, msg));
    }

    /// Runs the time-driven rules of timers and questions once at the clock's time: what the
    /// hub's one-second loop does for them. Tests on a manual clock call it after moving the
    /// clock.
    pub fn tick_items(self: &Arc<Self>) {
        let now = self.config.clock.now_ms();
        let mut inner = self.lock();
        self.fire_due_timers(&mut inner, now);
        self.deliver_overdue_questions(&mut inner, now);
    }
}

/// Answers `timer_list` and `timer_cancel`.
pub(crate) fn handle(cx: &OpCx<'_>, op: TimersOp) -> Result<(), OpError> {
    let mut inner = cx.hub.lock();
    let reply = match op {
        TimersOp::TimerList { agent } => DaemonEvent::Timers {
            timers: inner.timers.list(agent.as_deref()),
        },
        TimersOp::TimerCancel { timer } => {
            inner.timers.cancel(&timer)?;
            DaemonEvent::TimerCancelled { timer }
        }
    };
    cx.reply_locked(&mut inner, reply);
    Ok(())
}

/// The `timer` tool's arguments.
#[derive(Debug, Deserialize)]
struct Args {
    action: String,
    #[serde(default)]
    in_seconds: Option<u64>,
    #[serde(default)]
    at: Option<u64>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    new_session: bool,
    #[serde(default)]
    timer: Option<String>,
}

/// The `timer` tool as a model sees it.
pub(crate) fn tool_def() -> jucode_engine::agent::ToolDef {
    jucode_engine::agent::ToolDef {
        name: "timer".into(),
        description: "Set a reminder that wakes you later, list your reminders, or cancel one. \
            `set` takes `body` (what you will be told) and either `in_seconds` or `at` (unix \
            seconds); it wakes this session unless `new_session` is true, whether or not \
            anyone is watching. `cancel` takes `timer` (its id)."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["set", "list", "cancel"]},
                "in_seconds": {"type": "integer", "minimum": 1, "maximum": TIMER_AHEAD_SECS},
                "at": {"type": "integer", "description": "unix seconds"},
                "body": {"type": "string", "maxLength": TIMER_BODY_CHARS},
                "new_session": {"type": "boolean"},
                "timer": {"type": "string"},
            },
            "required": ["action"],
        }),
    }
}

/// Runs the `timer` tool for `caller`.
pub(crate) fn tool(hub: &Arc<Hub>, caller: &Caller, args: Value) -> Result<Value, ToolError> {
    let args: Args =
        serde_json::from_value(args).map_err(|e| ToolError::Invalid(format!("timer: {e}")))?;
    let mut inner = hub.lock();
    match args.action.as_str() {
        "set" => {
            let now = hub.config.clock.now_ms();
            let fire_at = fire_at(now, args.in_seconds, args.at)?;
            let body = args.body.unwrap_or_default();
            if body.trim().is_empty() {
                return Err(invalid("timer: set needs a body"));
            }
            if body.chars().count() > TIMER_BODY_CHARS {
                return Err(ToolError::Invalid(format!(
                    "timer: body is longer than {TIMER_BODY_CHARS} characters"
                )));
            }
            let info = inner
                .timers
                .set(
                    &caller.agent,
                    &caller.session,
                    fire_at,
                    body,
                    args.new_session,
                )
                .map_err(OpError::from)?;
            Ok(json!({"timer": info.timer, "fire_at": info.fire_at}))
        }
        "list" => Ok(json!({"timers": inner.timers.list(Some(&caller.agent))})),
        "cancel" => {
            let id = args
                .timer
                .ok_or_else(|| invalid("timer: cancel needs timer"))?;
            // Another agent's timer is not this one's to see.
            match inner.timers.armed_agent(&id) {
                Ok(agent) if agent != caller.agent => {
                    return Err(OpError::from(TimerError::Unknown(id)).into());
                }
                _ => {}
            }
            inner.timers.cancel(&id).map_err(OpError::from)?;
            Ok(json!({"cancelled": id}))
        }
        other => Err(ToolError::Invalid(format!(
            "timer: unknown action {other:?} (expected set, list or cancel)"
        ))),
    }
}

fn invalid(text: &str) -> ToolError {
    ToolError::Invalid(text.to_string())
}

/// When a timer set now with `in_seconds` or `at` (unix seconds) fires, in ms; in the future
/// and at most [`TIMER_AHEAD_SECS`] ahead.
fn fire_at(now_ms: u64, in_seconds: Option<u64>, at: Option<u64>) -> Result<u64, ToolError> {
    let latest = now_ms.saturating_add(TIMER_AHEAD_SECS * 1000);
    let fire_at = match (in_seconds, at) {
        (Some(_), Some(_)) => return Err(invalid("timer: give in_seconds or at, not both")),
        (None, None) => return Err(invalid("timer: set needs in_seconds or at")),
        (Some(0), None) => return Err(invalid("timer: in_seconds must be at least 1")),
        (Some(secs), None) => now_ms.saturating_add(secs.saturating_mul(1000)),
        (None, Some(at)) => at.saturating_mul(1000),
    };
    if fire_at <= now_ms {
        return Err(invalid("timer: that time has already passed"));
    }
    if fire_at > latest {
        return Err(ToolError::Invalid(format!(
            "timer: at most {} days ahead",
            TIMER_AHEAD_SECS / 86_400
        )));
    }
    Ok(fire_at)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn set_times_are_checked() {
        let now = 1_000_000;
        assert_eq!(fire_at(now, Some(60), None).unwrap(), now + 60_000);
        assert_eq!(fire_at(now, None, Some(2_000)).unwrap(), 2_000_000);
        for (secs, at) in [
            (None, None),
            (Some(1), Some(5_000)),
            (Some(0), None),
            (None, Some(999)),
            (None, Some(1000)),
            (Some(TIMER_AHEAD_SECS + 1), None),
            (Some(u64::MAX), None),
            (None, Some(u64::MAX)),
        ] {
            assert!(fire_at(now, secs, at).is_err(), "{secs:?} {at:?}");
        }
        assert!(fire_at(now, Some(TIMER_AHEAD_SECS), None).is_ok());
    }
}
