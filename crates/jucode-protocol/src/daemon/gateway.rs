//! The JuCode gateway: `gateway_catalog` (the models a client may offer for gateway sessions)
//! and `set_gateway` (moving a Claude Code or Codex session onto or off the gateway).

use serde::{Deserialize, Serialize};

/// Ops of [`crate::daemon::ops::Area::Gateway`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum GatewayOp {
    GatewayCatalog,
    /// Runs the session through the gateway (`true`) or the user's own login (`false`); the
    /// engine restarts once the running turn ends, optionally on `model`.
    SetGateway {
        session: String,
        gateway: bool,
        #[serde(default)]
        model: Option<String>,
    },
}

/// One of the gateway's groups: its models and the multiplier its charges carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GatewayGroup {
    pub id: String,
    pub name: String,
    pub multiplier: f64,
    pub models: Vec<String>,
}

impl GatewayOp {
    pub(crate) fn check_limits(&self) -> Result<(), crate::daemon::limits::TooLong> {
        match self {
            GatewayOp::GatewayCatalog => Ok(()),
            GatewayOp::SetGateway { model, .. } => {
                crate::daemon::limits::bytes("model", model.as_deref(), 256)
            }
        }
    }
}
