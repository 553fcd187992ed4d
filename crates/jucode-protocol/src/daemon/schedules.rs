//! Scheduled tasks: `schedule_list`, `schedule_save`, `schedule_delete`, `schedule_run`, and
//! the task as the `schedules` list and `schedule_saved` carry it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::limits::{self, TooLong};

/// Ops of [`crate::daemon::ops::Area::Schedules`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum SchedulesOp {
    /// Every task, or `agent`'s.
    ScheduleList {
        #[serde(default)]
        agent: Option<String>,
    },
    /// Creates a task (no `id` in `schedule`) or changes the fields present (with `id`).
    ScheduleSave { schedule: ScheduleDraft },
    /// Deletes a task, named by `schedule`, or else by the frame's `id`.
    ScheduleDelete {
        #[serde(default)]
        schedule: Option<String>,
        #[serde(default)]
        id: Option<Value>,
    },
    /// Runs a task now, named by `schedule`, or else by the frame's `id`.
    ScheduleRun {
        #[serde(default)]
        schedule: Option<String>,
        #[serde(default)]
        id: Option<Value>,
    },
}

/// The fields of `schedule_save`: all optional here; the daemon says which a new task lacks.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScheduleDraft {
    /// The task to change; absent to create one.
    #[serde(default)]
    pub id: Option<String>,
    /// The agent it sends to (creation only).
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::SCHEDULE_NAME_CHARS)))]
    pub name: Option<String>,
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::MESSAGE_BODY_BYTES)))]
    pub prompt: Option<String>,
    #[serde(default)]
    pub enabled: Option<bool>,
    /// `once`, `hourly`, `daily`, `weekdays`, `weekly` or `cron`.
    #[serde(default)]
    pub repeat: Option<String>,
    /// Local `HH:MM`.
    #[serde(default)]
    pub time: Option<String>,
    /// Weekly only: 0 = Sunday … 6 = Saturday.
    #[serde(default)]
    pub days: Option<Vec<i64>>,
    /// Once only: local `YYYY-MM-DD`.
    #[serde(default)]
    pub date: Option<String>,
    #[serde(default)]
    pub new_session: Option<bool>,
    /// `repeat: "cron"` only: five fields (minute hour day-of-month month day-of-week).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::CRON_CHARS)))]
    pub cron: Option<String>,
}

impl SchedulesOp {
    pub(crate) fn check_limits(&self) -> Result<(), TooLong> {
        use limits::{CRON_CHARS, ID_CHARS, MESSAGE_BODY_BYTES, SCHEDULE_NAME_CHARS, bytes, chars};
        match self {
            SchedulesOp::ScheduleList { agent } => chars("agent", agent.as_deref(), ID_CHARS),
            SchedulesOp::ScheduleSave { schedule: s } => {
                chars("id", s.id.as_deref(), ID_CHARS)?;
                chars("agent", s.agent.as_deref(), ID_CHARS)?;
                chars("name", s.name.as_deref(), SCHEDULE_NAME_CHARS)?;
                bytes("prompt", s.prompt.as_deref(), MESSAGE_BODY_BYTES)?;
                chars("repeat", s.repeat.as_deref(), ID_CHARS)?;
                chars("time", s.time.as_deref(), ID_CHARS)?;
                chars("date", s.date.as_deref(), ID_CHARS)?;
                chars("cron", s.cron.as_deref(), CRON_CHARS)
            }
            SchedulesOp::ScheduleDelete { schedule, .. }
            | SchedulesOp::ScheduleRun { schedule, .. } => {
                chars("schedule", schedule.as_deref(), ID_CHARS)
            }
        }
    }
}

/// A scheduled task, as `schedules.json` keeps it and the `schedules` list shows it. Times
/// are Unix seconds (the one place the protocol uses seconds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScheduleInfo {
    /// `sch-` and 16 hex digits.
    pub id: String,
    pub agent: String,
    pub name: String,
    pub prompt: String,
    pub enabled: bool,
    pub repeat: String,
    /// Local `HH:MM` (hourly uses only the minute; empty for cron).
    pub time: String,
    /// Weekly only, else empty.
    #[serde(default)]
    pub days: Vec<u8>,
    /// Once only, else null.
    #[serde(default)]
    pub date: Option<String>,
    pub new_session: bool,
    /// Cron only: the five-field expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    pub created_at: u64,
    #[serde(default)]
    pub last_run_at: Option<u64>,
    #[serde(default)]
    pub last_session: Option<String>,
    #[serde(default)]
    pub next_run_at: Option<u64>,
}
