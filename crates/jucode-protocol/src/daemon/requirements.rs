//! Requirements: what the user means to get done, the sessions that work on it, and the
//! `requirements` list every client keeps.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::limits::{self, TooLong};

/// Ops of [`crate::daemon::ops::Area::Requirements`] this build answers.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum RequirementsOp {
    RequirementList,
    RequirementCreate {
        /// Not empty.
        #[cfg_attr(feature = "schema", schemars(length(max = limits::REQUIREMENT_TEXT_CHARS)))]
        text: String,
        /// Left out: the project whose main directory is `session`'s cwd; `null`: none.
        #[serde(default, deserialize_with = "super::present")]
        #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
        project: Option<Value>,
        /// Up to [`REQUIREMENT_IMAGES`] uploaded images (`uploaded` paths).
        #[serde(default)]
        images: Vec<String>,
        /// `desktop`, `phone` or `session`.
        #[serde(default)]
        source: Option<String>,
        /// The session it was noted in.
        #[serde(default)]
        session: Option<String>,
    },
    RequirementUpdate {
        requirement: String,
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(length(max = limits::REQUIREMENT_TEXT_CHARS)))]
        text: Option<String>,
        /// `null` leaves it unassigned.
        #[serde(default, deserialize_with = "super::present")]
        #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
        project: Option<Value>,
        #[serde(default)]
        state: Option<RequirementState>,
    },
    RequirementDelete {
        requirement: String,
    },
    RequirementLink {
        requirement: String,
        session: String,
    },
    RequirementUnlink {
        requirement: String,
        session: String,
    },
    RequirementImage {
        requirement: String,
        index: usize,
    },
    RequirementProposal {
        requirement: String,
        accept: bool,
    },
    /// Starts `session` on the requirement behind the start gate.
    RequirementBegin {
        requirement: String,
        session: String,
        /// Whether a plan is asked for (and confirmed) before the work.
        #[serde(default)]
        plan: bool,
        /// The mode to work in once the gate is passed (client or engine name); `auto` when
        /// left out.
        #[serde(default)]
        mode: Option<String>,
        /// The user's added words.
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(length(max = limits::REQUIREMENT_TEXT_CHARS)))]
        text: Option<String>,
        /// `zh` (the default) or `en`: the language of the gate's prompts.
        #[serde(default)]
        lang: Option<String>,
    },
    /// Confirms the gate's current step.
    RequirementConfirm {
        requirement: String,
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(length(max = limits::REQUIREMENT_TEXT_CHARS)))]
        text: Option<String>,
        #[serde(default)]
        lang: Option<String>,
    },
    /// Sends words to the requirement's latest session, or starts a new one behind the gate.
    RequirementReply {
        requirement: String,
        #[cfg_attr(feature = "schema", schemars(length(max = limits::REQUIREMENT_TEXT_CHARS)))]
        text: String,
        #[serde(default)]
        new_session: bool,
        #[serde(default)]
        cwd: Option<String>,
        #[serde(default)]
        engine: Option<String>,
        #[serde(default)]
        plan: bool,
        #[serde(default)]
        mode: Option<String>,
        #[serde(default)]
        lang: Option<String>,
    },
}

impl RequirementsOp {
    pub(crate) fn check_limits(&self) -> Result<(), TooLong> {
        match self {
            RequirementsOp::RequirementCreate { text, .. } => {
                limits::chars("text", Some(text), limits::REQUIREMENT_TEXT_CHARS)
            }
            RequirementsOp::RequirementUpdate { text, .. }
            | RequirementsOp::RequirementBegin { text, .. }
            | RequirementsOp::RequirementConfirm { text, .. } => {
                limits::chars("text", text.as_deref(), limits::REQUIREMENT_TEXT_CHARS)
            }
            RequirementsOp::RequirementReply { text, .. } => {
                limits::chars("text", Some(text), limits::REQUIREMENT_TEXT_CHARS)
            }
            _ => Ok(()),
        }
    }
}

/// The most images a requirement holds.
pub const REQUIREMENT_IMAGES: usize = 4;

/// Where a requirement stands, as the user (or an agent's proposal) set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum RequirementState {
    Idea,
    Open,
    Done,
    Parked,
    Proposed,
}

impl RequirementState {
    pub fn as_str(self) -> &'static str {
        match self {
            RequirementState::Idea => "idea",
            RequirementState::Open => "open",
            RequirementState::Done => "done",
            RequirementState::Parked => "parked",
            RequirementState::Proposed => "proposed",
        }
    }
}

/// What the sessions on a requirement have recorded of its progress.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Progress {
    #[serde(default)]
    pub goal: String,
    #[serde(default)]
    pub decided: Vec<String>,
    #[serde(default)]
    pub done: Vec<String>,
    #[serde(default)]
    pub doing: Vec<String>,
    #[serde(default)]
    pub blocked: Vec<String>,
    #[serde(default)]
    pub next: Vec<String>,
    #[serde(default)]
    pub files: Vec<String>,
    #[serde(default)]
    pub note: String,
}

/// The start gate on one session of a requirement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RequirementGate {
    pub session: String,
    /// `understand` or `plan`.
    pub stage: String,
    pub plan: bool,
    /// The mode to work in once the gate is passed, as the client named it.
    pub mode: String,
    /// Whether a turn of the session ended at this stage.
    #[serde(default)]
    pub answered: bool,
}

/// A requirement as the `requirements` list shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RequirementInfo {
    /// `R-<n>`.
    pub id: String,
    pub text: String,
    pub title: String,
    pub title_auto: bool,
    /// Absolute paths under `~/.jucode/uploads/requirements/<id>/`.
    pub images: Vec<String>,
    /// A project id, or `null` for none.
    pub project: Option<String>,
    pub state: RequirementState,
    /// The linked sessions, oldest link first.
    pub sessions: Vec<String>,
    pub progress: Progress,
    pub progress_at: u64,
    /// `desktop`, `phone`, `session` or `agent`.
    pub source: String,
    pub source_session: Option<String>,
    pub gate: Option<RequirementGate>,
    /// An agent's proposal waiting for the user (`requirement_proposal`).
    pub proposal: Option<Value>,
    /// `state`, or what its sessions ask of the user: `proposal`, `approval`, `confirm`,
    /// `failed`, `running`, `review`.
    pub status: String,
    /// Each known linked session: `running`, `waiting`, `failed` or `idle`.
    pub session_states: BTreeMap<String, String>,
    /// The end of the latest session's reply, with `review`, `confirm` and `failed`.
    pub last_reply: Option<String>,
    pub created_at: u64,
    pub updated_at: u64,
}
