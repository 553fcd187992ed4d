//! Agent timers: `timer_list` and `timer_cancel`, and the `timers` list they answer with.

use serde::{Deserialize, Serialize};

/// Ops of [`crate::daemon::ops::Area::Timers`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum TimersOp {
    /// Active timers, soonest first; of one agent with `agent`.
    TimerList {
        #[serde(default)]
        agent: Option<String>,
    },
    TimerCancel {
        timer: String,
    },
}

/// An armed timer as `timers` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TimerInfo {
    /// Its id (`tm-…`).
    pub timer: String,
    pub agent: String,
    /// The session that set it.
    pub session: String,
    /// When it fires, in ms.
    pub fire_at: u64,
    pub body: String,
}
