//! The connection's own ops.

use serde::Deserialize;

/// Ops of [`crate::daemon::ops::Area::Basics`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum BasicsOp {
    Ping,
    /// Exit once no session is in a turn (after a `daemon_restarting` broadcast), so a newer
    /// daemon can take over without cutting a task off.
    RestartWhenIdle,
}
