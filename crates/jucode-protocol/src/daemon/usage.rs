//! The usage ledger's ops: `session_usage` and `schedule_usage`, and the totals their replies
//! carry. Token counts are local and always present; amounts that are not known are `null`,
//! never `0` (an unpriced model, a gateway that is not configured or has not settled).

use serde::{Deserialize, Serialize};

/// The most turn rows a `session_usage` or `schedule_usage` reply carries: the newest ones.
/// A long-lived agent's task runs for years; its sums stay whole, its list stays sendable.
pub const MAX_TURN_ROWS: usize = 500;

/// Ops of [`crate::daemon::ops::Area::Usage`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum UsageOp {
    /// One session's turns, its history included.
    SessionUsage { session: String },
    /// The run sessions of a scheduled task, each counted once with its follow-up turns.
    ScheduleUsage { schedule: String },
}

/// Sums over some turns. `input_tokens` includes `cached_input_tokens` and
/// `cache_write_input_tokens`; `output_tokens` includes `reasoning_tokens`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct UsageTotals {
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
    /// Finished turns recorded in the ledger.
    pub turns: u64,
    /// Settled gateway points (group multipliers included); `null` without a gateway account
    /// or while nothing has settled.
    pub gateway_cost: Option<f64>,
    /// Reference USD estimate of the priced turns; `null` when none was priced.
    pub estimated_cost_usd: Option<f64>,
    /// Gateway requests whose charge is not available yet.
    pub pending_requests: u64,
    /// Turns whose model had no price when they were used.
    pub unpriced_requests: u64,
    /// Turns in progress now (not yet in the ledger).
    pub running: u64,
    /// Requests the gateway reported charges for.
    pub gateway_requests: u64,
}

/// One session's sums.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SessionUsageRow {
    pub session: String,
    /// When the session was opened, in ms; `null` when the daemon no longer knows it.
    pub started_at: Option<u64>,
    #[serde(flatten)]
    pub totals: UsageTotals,
}

/// One turn's sums (`turns` is 1, `running` 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TurnUsageRow {
    /// The ledger key, as `billing_turn` on the live `usage` event.
    pub turn_id: String,
    pub session: String,
    /// When the turn ended, in ms.
    pub ended_at: u64,
    /// The model the turn used, when the engine said.
    pub model: Option<String>,
    #[serde(flatten)]
    pub totals: UsageTotals,
}
