//! Hosted sessions: their ops, the `sessions` list and `session_history` rows.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::limits::{self, TooLong};
use crate::Object;

/// The engine a session runs when a client names none.
pub const DEFAULT_ENGINE: &str = "jucode";

/// Engine names a client may ask for, with what the daemon says when this build has none
/// registered under the name (the spec lists these four).
pub const ENGINES: &[(&str, &str)] = &[
    (
        "jucode",
        "the jucode engine is not available in this build: set JUCODE_SERVE_BIN to a program that speaks the serve protocol v2",
    ),
    ("claude", "the claude engine is not available in this build"),
    ("codex", "the codex engine is not available in this build"),
    ("acp", "the acp engine is not available in this build"),
];

/// Ops of [`crate::daemon::ops::Area::Sessions`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum SessionsOp {
    SessionList,
    SessionHistory {
        cwd: String,
    },
    SessionMeta {
        session: String,
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(length(max = limits::TITLE_CHARS)))]
        title: Option<String>,
        #[serde(default)]
        archived: Option<bool>,
        #[serde(default)]
        hidden: Option<bool>,
        /// `Some(Value::Null)` clears the group; `None` leaves it.
        #[cfg_attr(
            feature = "schema",
            schemars(
                description = "Any JSON value; null clears the group, leaving it out keeps it."
            )
        )]
        #[serde(default, deserialize_with = "super::present")]
        group: Option<Value>,
    },
    SessionCreate {
        #[serde(default)]
        cwd: Option<String>,
        #[serde(default)]
        engine: Option<String>,
        #[serde(default)]
        options: Option<Object>,
        #[serde(default)]
        agent: Option<String>,
        #[serde(default)]
        chat: bool,
    },
    SessionOpen {
        session: String,
        #[serde(default)]
        cwd: Option<String>,
        #[serde(default)]
        engine: Option<String>,
        #[serde(default)]
        options: Option<Object>,
    },
    SessionClose {
        session: String,
    },
    Watch {
        session: String,
    },
    Unwatch {
        session: String,
    },
    /// Moves the conversation into its engine's own terminal interface on a pty.
    SessionTui {
        session: String,
        #[serde(default)]
        cols: Option<i64>,
        #[serde(default)]
        rows: Option<i64>,
        /// Stop a running turn rather than be refused.
        #[serde(default)]
        force: bool,
    },
}

impl SessionsOp {
    pub(crate) fn check_limits(&self) -> Result<(), TooLong> {
        match self {
            SessionsOp::SessionHistory { cwd } => {
                limits::bytes("cwd", Some(cwd), limits::PATH_BYTES)
            }
            SessionsOp::SessionMeta { title, group, .. } => {
                limits::chars("title", title.as_deref(), limits::TITLE_CHARS)?;
                limits::json("group", group.as_ref(), limits::GROUP_BYTES)
            }
            SessionsOp::SessionCreate { cwd, options, .. }
            | SessionsOp::SessionOpen { cwd, options, .. } => {
                limits::bytes("cwd", cwd.as_deref(), limits::PATH_BYTES)?;
                limits::json("options", options.as_ref(), limits::OPTIONS_BYTES)
            }
            _ => Ok(()),
        }
    }
}

/// A hosted session as `sessions` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SessionInfo {
    pub session: String,
    pub cwd: String,
    pub engine: String,
    pub chat: bool,
    pub agent: Option<String>,
    pub open: bool,
    pub watchers: usize,
    pub title: String,
    pub archived: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Value>,
    pub busy: bool,
    pub created_at: u64,
    pub updated_at: u64,
    /// The session runs through the JuCode gateway (Claude Code and Codex only); left out
    /// when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gateway: bool,
}

/// One row of `session_history`: a daemon session or a conversation an engine saved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HistoryRow {
    pub session: String,
    pub title: String,
    pub updated_at: u64,
    /// Messages in the conversation (user, assistant and tool items).
    pub entries: usize,
    pub archived: bool,
    pub agent: Option<String>,
    pub engine: String,
    pub open: bool,
}
