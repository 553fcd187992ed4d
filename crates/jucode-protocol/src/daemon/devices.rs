//! Pairing, paired devices and the relay.

use serde::{Deserialize, Serialize};

/// Ops of [`crate::daemon::ops::Area::Devices`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum DevicesOp {
    PairStart,
    PairLink,
    DeviceList,
    DeviceRevoke { device: String },
    RelayStatus,
    RelaySet { enabled: bool },
}

/// A paired device as `devices` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceInfo {
    pub id: String,
    pub name: String,
    pub paired_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}
