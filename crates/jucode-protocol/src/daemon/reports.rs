//! Reports agents post for the user: `report_list`, `report_read`, and the report shape
//! `report_posted` carries.

use serde::{Deserialize, Serialize};

/// Ops of [`crate::daemon::ops::Area::Reports`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ReportsOp {
    /// Newest first; `limit` defaults to [`REPORT_LIST_DEFAULT`].
    ReportList {
        #[serde(default)]
        limit: Option<u64>,
    },
    ReportRead {
        report: String,
    },
}

/// How many reports `report_list` returns without a `limit`.
pub const REPORT_LIST_DEFAULT: u64 = 50;
/// The most `report_list` returns whatever the `limit`.
pub const REPORT_LIST_MAX: u64 = 500;

/// One report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReportInfo {
    /// Its id (`r-…`).
    pub id: String,
    pub agent: String,
    /// The session that posted it.
    pub session: String,
    pub title: String,
    pub body: String,
    /// When it was posted, in ms.
    pub at: u64,
    pub read: bool,
}
