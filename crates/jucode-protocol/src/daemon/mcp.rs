//! `mcp_servers` in config.json, edited by the daemon when no session is named.

use serde::Deserialize;
use serde_json::Value;

use super::limits::{self, TooLong};

/// Ops of [`crate::daemon::ops::Area::Mcp`]. The fields stay loose so the daemon can answer
/// with the serve protocol's exact error texts.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum McpOp {
    McpSet {
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(with = "crate::Object", required))]
        server: Option<Value>,
    },
    McpRemove {
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(with = "String", required))]
        name: Option<Value>,
    },
    McpToggle {
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(with = "String", required))]
        name: Option<Value>,
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(with = "bool", required))]
        enabled: Option<Value>,
    },
}

impl McpOp {
    pub(crate) fn check_limits(&self) -> Result<(), TooLong> {
        match self {
            McpOp::McpSet { server } => {
                limits::json("server", server.as_ref(), limits::MCP_SERVER_BYTES)
            }
            McpOp::McpRemove { name } | McpOp::McpToggle { name, .. } => {
                limits::json("name", name.as_ref(), limits::NAME_CHARS)
            }
        }
    }
}
