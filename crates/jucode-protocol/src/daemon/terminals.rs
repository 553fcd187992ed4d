//! Terminals: the user's login shell on a pty of the daemon's computer, driven by the one
//! client that opened it. Output and input are raw bytes, base64 (standard alphabet) on the
//! wire.

use serde::Deserialize;

use crate::daemon::limits::{self, TooLong};

/// Ops of [`crate::daemon::ops::Area::Terminals`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum TerminalsOp {
    /// Opens a shell in `cwd` (a known directory; `~` is the home directory).
    TermOpen {
        cwd: String,
        #[serde(default)]
        cols: Option<i64>,
        #[serde(default)]
        rows: Option<i64>,
    },
    /// Bytes for the shell, written in order.
    TermInput { term: String, data: String },
    TermResize {
        term: String,
        #[serde(default)]
        cols: Option<i64>,
        #[serde(default)]
        rows: Option<i64>,
    },
    /// Kills the shell; `term_exit` follows once it is reaped.
    TermClose { term: String },
}

/// Terminals one client may have open at once.
pub const MAX_TERMINALS_PER_CLIENT: usize = 4;
/// The most raw bytes one `term_output` frame carries (before base64).
pub const TERM_OUTPUT_FRAME_BYTES: usize = 64 * 1024;
/// Output is sent once the shell has written nothing more for this long.
pub const TERM_OUTPUT_QUIET_MS: u64 = 10;
/// Columns and rows when the op gives none.
pub const TERM_DEFAULT_SIZE: (u16, u16) = (80, 24);
/// Columns and rows are kept within this range.
pub const TERM_MIN_SIZE: u16 = 2;
pub const TERM_MAX_SIZE: u16 = 1000;
/// The longest terminal id a client may send (ids are `t-` and 16 hex digits).
pub const TERM_ID_BYTES: usize = 64;
/// The most base64 text one `term_input` carries (a paste of about 3 MiB).
pub const TERM_INPUT_BYTES: usize = 4 * 1024 * 1024;

/// `value` (or `default` when absent) kept within the terminal size range.
pub fn clamp_size(value: Option<i64>, default: u16) -> u16 {
    match value {
        None => default,
        Some(v) => {
            let v = v.clamp(i64::from(TERM_MIN_SIZE), i64::from(TERM_MAX_SIZE));
            u16::try_from(v).unwrap_or(TERM_MAX_SIZE)
        }
    }
}

impl TerminalsOp {
    pub(crate) fn check_limits(&self) -> Result<(), TooLong> {
        match self {
            TerminalsOp::TermOpen { cwd, .. } => {
                limits::bytes("cwd", Some(cwd), limits::PATH_BYTES)
            }
            TerminalsOp::TermInput { term, data } => {
                limits::bytes("term", Some(term), TERM_ID_BYTES)?;
                limits::bytes("data", Some(data), TERM_INPUT_BYTES)
            }
            TerminalsOp::TermResize { term, .. } | TerminalsOp::TermClose { term } => {
                limits::bytes("term", Some(term), TERM_ID_BYTES)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_default_and_are_clamped() {
        assert_eq!(clamp_size(None, 80), 80);
        assert_eq!(clamp_size(Some(0), 80), 2);
        assert_eq!(clamp_size(Some(-7), 24), 2);
        assert_eq!(clamp_size(Some(120), 80), 120);
        assert_eq!(clamp_size(Some(5000), 80), 1000);
        assert_eq!(clamp_size(Some(i64::MAX), 80), 1000);
    }
}
