//! Deferred actions and the item ops they share with questions.

use serde::Deserialize;

use super::limits::{self, TooLong};

/// Ops of [`crate::daemon::ops::Area::Actions`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ActionsOp {
    ActionsList,
    ItemClose {
        kind: String,
        item: String,
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(length(max = limits::REASON_CHARS)))]
        reason: Option<String>,
    },
    ItemReopen {
        kind: String,
        item: String,
    },
}

impl ActionsOp {
    pub(crate) fn check_limits(&self) -> Result<(), TooLong> {
        match self {
            ActionsOp::ItemClose { reason, .. } => {
                limits::chars("reason", reason.as_deref(), limits::REASON_CHARS)
            }
            _ => Ok(()),
        }
    }
}
