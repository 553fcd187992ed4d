//! Notification subscriptions of paired devices.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Ops of [`crate::daemon::ops::Area::Push`]. The subscription stays loose here: the daemon
/// checks its shape itself and answers with one text that names both accepted forms.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum PushOp {
    PushSubscribe {
        #[cfg_attr(feature = "schema", schemars(with = "crate::Object"))]
        subscription: Value,
    },
    PushUnsubscribe {
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
        endpoint: Option<Value>,
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
        client_id: Option<Value>,
    },
    PushTest,
}

/// How one subscription fared in `push_tested`: the push service's HTTP status, or why it
/// could not be reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PushResult {
    /// The endpoint's host, or `getui`.
    pub service: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
