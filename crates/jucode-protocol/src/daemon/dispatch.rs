//! Dispatch: a batch of requests the reserved `dispatch` agent splits into tasks, each sent to
//! a new session in one of the user's projects, and the `dispatches` list every client keeps.

use serde::{Deserialize, Serialize};

use super::limits::{self, TooLong};

/// Ops of [`crate::daemon::ops::Area::Dispatch`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum DispatchOp {
    /// Starts a dispatch; its tasks run in `approval_mode`.
    DispatchSend {
        /// Not empty.
        #[cfg_attr(feature = "schema", schemars(length(max = limits::REQUIREMENT_TEXT_CHARS)))]
        text: String,
        /// Whether the plan waits for `dispatch_confirm` before any task starts.
        #[serde(default)]
        plan: bool,
        /// `manual`, `auto-edit`, `auto` or `full-access`; `auto` when left out.
        #[serde(default)]
        approval_mode: Option<String>,
        /// A requirement the tasks' sessions are linked to.
        #[serde(default)]
        requirement: Option<String>,
    },
    /// Decides an awaiting dispatch's plan.
    DispatchConfirm {
        dispatch: String,
        approve: bool,
        /// Words for the dispatcher along with the decision.
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(length(max = limits::REQUIREMENT_TEXT_CHARS)))]
        note: Option<String>,
    },
    DispatchList,
}

impl DispatchOp {
    pub(crate) fn check_limits(&self) -> Result<(), TooLong> {
        match self {
            DispatchOp::DispatchSend { text, .. } => {
                limits::chars("text", Some(text), limits::REQUIREMENT_TEXT_CHARS)
            }
            DispatchOp::DispatchConfirm { note, .. } => {
                limits::chars("note", note.as_deref(), limits::REQUIREMENT_TEXT_CHARS)
            }
            DispatchOp::DispatchList => Ok(()),
        }
    }
}

/// Where a dispatch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DispatchStatus {
    /// The dispatcher is splitting the text into tasks.
    Planning,
    /// A plan waits for the user (`dispatch_confirm`).
    Awaiting,
    Running,
    Done,
    /// The user turned the plan down.
    Cancelled,
    /// The dispatcher's turn failed.
    Failed,
}

impl DispatchStatus {
    /// Whether nothing more happens to the dispatch.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            DispatchStatus::Done | DispatchStatus::Cancelled | DispatchStatus::Failed
        )
    }
}

/// Where one task of a dispatch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// In a plan not yet confirmed.
    Planned,
    /// Handed to its session, whose turn has not begun.
    Sent,
    Running,
    /// An approval in its session waits for the user.
    Waiting,
    Done,
    Failed,
}

impl TaskStatus {
    pub fn is_final(self) -> bool {
        matches!(self, TaskStatus::Done | TaskStatus::Failed)
    }
}

/// One task of a dispatch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DispatchTask {
    /// 1, 2, … within its dispatch.
    pub id: u64,
    pub title: String,
    /// The project's main directory.
    pub project: String,
    /// Its session, once it was given one.
    pub session: Option<String>,
    pub engine: String,
    pub status: TaskStatus,
    /// The end of its session's last reply.
    #[serde(default)]
    pub reply: String,
}

/// A dispatch as the `dispatches` list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DispatchInfo {
    /// The dispatcher's session.
    pub id: String,
    pub text: String,
    pub plan: bool,
    /// The approval mode every task runs in.
    pub mode: String,
    pub status: DispatchStatus,
    pub tasks: Vec<DispatchTask>,
    /// The dispatcher's report once every task has ended.
    #[serde(default)]
    pub summary: String,
    pub created_at: u64,
    pub updated_at: u64,
}
