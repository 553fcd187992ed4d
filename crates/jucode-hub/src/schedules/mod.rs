//! Scheduled tasks: each agent's in `~/.jucode/agents/<id>/schedules.json`, rewritten whole
//! and atomically on every change; fired by the hub's one-second loop as messages from
//! `schedule:<id>`.
//!
//! [`task`] checks a task's fields, [`rule`] computes `next_run_at` (pure functions of the
//! task, the last fired instant, now and the clock's time zone), [`cron`] reads the
//! beyond-the-spec `repeat: "cron"` expressions, [`tick`] fires due tasks and follows their
//! deliveries. This file keeps the tasks in memory and answers the ops.
//!
//! Invariants: a task's file is written before the op that changed it is answered, and
//! memory changes only after the write succeeded; every client gets the whole `schedules`
//! list after any change, run or delivery; `next_run_at` is null for a disabled task.

pub(crate) mod cron;
pub(crate) mod rule;
pub(crate) mod task;
mod tick;

pub(crate) use tick::delivered;

#[cfg(test)]
mod rule_tests;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use jiff::tz::TimeZone;
use jucode_protocol::daemon::{DaemonEvent, Reply, ScheduleInfo, SchedulesOp};
use jucode_store::StoreError;
use serde_json::Value;

use crate::agents::Agents;
use crate::cx::OpCx;
use crate::error::OpError;
use crate::messages::Messages;
use crate::util::{hex, random_bytes};
use crate::{Inner, to_value};

/// Why a schedule op failed; the texts are the protocol's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ScheduleError {
    #[error("unknown agent {0}")]
    UnknownAgent(String),
    #[error("unknown scheduled task {0}")]
    Unknown(String),
    #[error("{0} needs schedule (the task's id), or the task's id as id")]
    NoTask(&'static str),
    #[error("a new scheduled task needs {0}")]
    Missing(&'static str),
    #[error("a scheduled task's {0} cannot be empty")]
    Empty(&'static str),
    #[error("repeat must be once, hourly, daily, weekdays, weekly or cron, not {0:?}")]
    Repeat(String),
    #[error("time must be a local HH:MM (24-hour), not {0:?}")]
    Time(String),
    #[error("a cron task takes its times from cron: leave time out")]
    TimeWithCron,
    #[error("days must be a non-empty list of 0 (Sunday) to 6 (Saturday) for a weekly task")]
    Days,
    #[error("days is only for weekly tasks")]
    DaysNotWeekly,
    #[error("date must be a real local day as YYYY-MM-DD, not {0:?}")]
    Date(String),
    #[error("date is only for once tasks")]
    DateNotOnce,
    #[error("cron is only for repeat cron")]
    CronNotCron,
    #[error("cron: {0}")]
    Cron(String),
    #[error("a scheduled task's agent cannot be changed")]
    AgentChange,
    #[error("agent {0} is disabled; enable it to run its tasks")]
    AgentDisabled(String),
    #[error("could not save the scheduled tasks: {0}")]
    Save(#[from] StoreError),
    #[error("the system random generator failed")]
    Random,
}

/// Every agent's tasks, by agent, each list in creation order.
pub(crate) struct Schedules {
    /// `~/.jucode/agents`.
    root: PathBuf,
    by_agent: BTreeMap<String, Vec<ScheduleInfo>>,
    /// The zone `next_run_at` was last computed in; `None` until the first tick, which
    /// computes them again in the zone the daemon runs in now.
    zone: Option<TimeZone>,
    /// Tasks whose run could not be recorded, so the warning is logged once.
    failing: HashSet<String>,
}

fn file(root: &Path, agent: &str) -> PathBuf {
    root.join(agent).join("schedules.json")
}

/// A Unix-seconds field as an instant.
pub(crate) fn at(seconds: u64) -> Option<Timestamp> {
    Timestamp::from_second(i64::try_from(seconds).ok()?).ok()
}

/// An instant as Unix seconds (0 before the epoch).
pub(crate) fn seconds(at: Timestamp) -> u64 {
    u64::try_from(at.as_second()).unwrap_or(0)
}

impl Schedules {
    /// Reads every known agent's `schedules.json`. A file that cannot be read is logged and
    /// that agent starts with no tasks; the daemon starts either way.
    pub(crate) fn open(agents: &Agents, messages: &Messages) -> Schedules {
        let mut by_agent = BTreeMap::new();
        for id in agents.map.keys() {
            let path = file(&agents.root, id);
            match jucode_store::read_json::<Vec<ScheduleInfo>>(&path) {
                Ok(Some(mut list)) => {
                    // The agent owns the file it sits in, whatever a task inside says.
                    list.retain(|t| t.agent == *id);
                    by_agent.insert(id.clone(), list);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("scheduled tasks of agent {id}: {e}"),
            }
        }
        let mut schedules = Schedules {
            root: agents.root.clone(),
            by_agent,
            zone: None,
            failing: HashSet::new(),
        };
        schedules.catch_up_deliveries(messages);
        schedules
    }

    /// A delivery recorded in `messages.jsonl` whose `last_session` a crash kept out of
    /// `schedules.json`: filled in now.
    fn catch_up_deliveries(&mut self, messages: &Messages) {
        let agents: Vec<String> = self.by_agent.keys().cloned().collect();
        for agent in agents {
            let mut list = self.by_agent.get(&agent).cloned().unwrap_or_default();
            let mut changed = false;
            for task in &mut list {
                let last = messages
                    .deliveries_from(&format!("schedule:{}", task.id))
                    .last()
                    .map(|d| d.session.clone());
                if last.is_some() && last != task.last_session {
                    task.last_session = last;
                    changed = true;
                }
            }
            if changed && let Err(e) = self.commit(&agent, list) {
                tracing::warn!("scheduled tasks of agent {agent}: {e}");
            }
        }
    }

    /// A session's engine named it `to`: a task whose last run went to `from` continues `to`.
    /// A failed write is logged; the next start catches up from the deliveries.
    pub(crate) fn session_renamed(&mut self, from: &str, to: &str) {
        let agents: Vec<String> = self.by_agent.keys().cloned().collect();
        for agent in agents {
            let mut list = self.by_agent.get(&agent).cloned().unwrap_or_default();
            let mut changed = false;
            for task in list
                .iter_mut()
                .filter(|t| t.last_session.as_deref() == Some(from))
            {
                task.last_session = Some(to.to_string());
                changed = true;
            }
            if changed && let Err(e) = self.commit(&agent, list) {
                tracing::warn!("scheduled tasks of agent {agent}: {e}");
            }
        }
    }

    /// Writes `agent`'s tasks as `list` (atomically, fsynced), then keeps them.
    fn commit(&mut self, agent: &str, list: Vec<ScheduleInfo>) -> Result<(), StoreError> {
        jucode_store::write_json_atomic(&file(&self.root, agent), &list)?;
        self.by_agent.insert(agent.to_string(), list);
        Ok(())
    }

    /// Every task, or `agent`'s.
    pub(crate) fn list(&self, agent: Option<&str>) -> Vec<ScheduleInfo> {
        self.by_agent
            .iter()
            .filter(|(a, _)| agent.is_none_or(|want| want == a.as_str()))
            .flat_map(|(_, list)| list.iter().cloned())
            .collect()
    }

    pub(crate) fn get(&self, id: &str) -> Option<&ScheduleInfo> {
        self.by_agent.values().flatten().find(|t| t.id == id)
    }

    /// Replaces task `task.id` of its agent (or adds it), saved first.
    fn put(&mut self, task: ScheduleInfo) -> Result<(), StoreError> {
        let mut list = self.by_agent.get(&task.agent).cloned().unwrap_or_default();
        match list.iter_mut().find(|t| t.id == task.id) {
            Some(slot) => *slot = task.clone(),
            None => list.push(task.clone()),
        }
        self.commit(&task.agent, list)
    }

    fn remove(&mut self, task: &ScheduleInfo) -> Result<(), StoreError> {
        let mut list = self.by_agent.get(&task.agent).cloned().unwrap_or_default();
        list.retain(|t| t.id != task.id);
        self.commit(&task.agent, list)
    }

    /// The agent was deleted, and its directory with `schedules.json`: its tasks go.
    pub(crate) fn forget_agent(&mut self, agent: &str) {
        if let Some(list) = self.by_agent.remove(agent) {
            for t in list {
                self.failing.remove(&t.id);
            }
        }
    }

    pub(crate) fn event(&self) -> DaemonEvent {
        DaemonEvent::Schedules {
            schedules: self.list(None),
        }
    }
}

/// `next_run_at` for `task` now: null while it is disabled or when its rule names no later
/// time (a passed `once`), else the rule's next time after now and after its last run.
pub(crate) fn next_run_at(task: &ScheduleInfo, now: Timestamp, tz: &TimeZone) -> Option<u64> {
    if !task.enabled {
        return None;
    }
    let rule = task::rule_of(task).ok()?;
    rule::next_run(&rule, task.last_run_at.and_then(at), now, tz).map(seconds)
}

impl Inner {
    /// Whether a scheduled task with this id exists (for `schedule_usage`).
    pub(crate) fn schedule_exists(&self, id: &str) -> bool {
        self.schedules.get(id).is_some()
    }

    /// Sends every client the whole `schedules` list.
    pub(crate) fn broadcast_schedules(&mut self) {
        let frame = to_value(&Reply::to(None, self.schedules.event()));
        self.broadcast(&frame);
    }
}

/// The task a delete or run names: `schedule`, or else the request's `id` when it is a string.
fn named(
    op: &'static str,
    schedule: Option<String>,
    id: Option<Value>,
) -> Result<String, ScheduleError> {
    match (schedule, id) {
        (Some(s), _) => Ok(s),
        (None, Some(Value::String(id))) => Ok(id),
        _ => Err(ScheduleError::NoTask(op)),
    }
}

/// Answers the schedule ops. A change is saved, then answered, then broadcast.
pub(crate) fn handle(cx: &OpCx<'_>, op: SchedulesOp) -> Result<(), OpError> {
    let hub = cx.hub;
    match op {
        SchedulesOp::ScheduleList { agent } => {
            let schedules = hub.lock().schedules.list(agent.as_deref());
            cx.reply(DaemonEvent::Schedules { schedules });
        }
        SchedulesOp::ScheduleSave { schedule: draft } => {
            let now = hub.config.clock.now();
            let tz = hub.config.clock.time_zone();
            let mut inner = hub.lock();
            let mut task = match draft.id.clone() {
                Some(id) => {
                    let old = inner
                        .schedules
                        .get(&id)
                        .cloned()
                        .ok_or(ScheduleError::Unknown(id))?;
                    task::change(&old, draft)?
                }
                None => {
                    let id = format!(
                        "sch-{}",
                        hex(&random_bytes::<8>().map_err(|_| ScheduleError::Random)?)
                    );
                    let task = task::create(draft, id, seconds(now))?;
                    if !inner.agents.map.contains_key(&task.agent) {
                        return Err(ScheduleError::UnknownAgent(task.agent).into());
                    }
                    task
                }
            };
            task.next_run_at = next_run_at(&task, now, &tz);
            inner
                .schedules
                .put(task.clone())
                .map_err(ScheduleError::from)?;
            cx.reply_locked(&mut inner, DaemonEvent::ScheduleSaved { schedule: task });
            inner.broadcast_schedules();
        }
        SchedulesOp::ScheduleDelete { schedule, id } => {
            let target = named("schedule_delete", schedule, id)?;
            let mut inner = hub.lock();
            let task = inner
                .schedules
                .get(&target)
                .cloned()
                .ok_or_else(|| ScheduleError::Unknown(target.clone()))?;
            inner.schedules.remove(&task).map_err(ScheduleError::from)?;
            reply_naming(
                cx,
                &mut inner,
                DaemonEvent::ScheduleDeleted {
                    schedule: target.clone(),
                },
                &target,
            );
            inner.broadcast_schedules();
        }
        SchedulesOp::ScheduleRun { schedule, id } => {
            let target = named("schedule_run", schedule, id)?;
            let mut inner = hub.lock();
            hub.run_now(&mut inner, &target)?;
            reply_naming(
                cx,
                &mut inner,
                DaemonEvent::ScheduleStarted {
                    schedule: target.clone(),
                },
                &target,
            );
            inner.broadcast_schedules();
        }
    }
    Ok(())
}

/// The reply to a delete or run carries `id`: the request's, or the task's when the request
/// had none (both are then the same thing).
fn reply_naming(cx: &OpCx<'_>, inner: &mut Inner, event: DaemonEvent, task: &str) {
    let id = cx
        .id
        .clone()
        .unwrap_or_else(|| Value::String(task.to_string()));
    inner
        .clients
        .send(cx.client, &to_value(&Reply::to(Some(id), event)));
}
