//! Questions agents ask the user: `question_list`, `question_answer`, and the `questions`
//! list (open ones, and those closed lately).

use serde::{Deserialize, Serialize};

use super::limits::{self, TooLong};

/// Ops of [`crate::daemon::ops::Area::Questions`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum QuestionsOp {
    QuestionList,
    QuestionAnswer {
        question: String,
        /// Not empty.
        #[cfg_attr(feature = "schema", schemars(length(max = limits::ANSWER_CHARS)))]
        answer: String,
    },
}

impl QuestionsOp {
    pub(crate) fn check_limits(&self) -> Result<(), TooLong> {
        match self {
            QuestionsOp::QuestionAnswer { answer, .. } => {
                limits::chars("answer", Some(answer), limits::ANSWER_CHARS)
            }
            QuestionsOp::QuestionList => Ok(()),
        }
    }
}

/// How much a question matters to the agent that asked it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Importance {
    Low,
    #[default]
    Normal,
    High,
}

impl Importance {
    /// Reads `low`, `normal` or `high`.
    pub fn parse(text: &str) -> Option<Importance> {
        match text {
            "low" => Some(Importance::Low),
            "normal" => Some(Importance::Normal),
            "high" => Some(Importance::High),
            _ => None,
        }
    }
}

/// A question as the `questions` list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QuestionInfo {
    /// Its id (`q-…`).
    pub id: String,
    pub agent: String,
    /// The session that asked; the answer goes there.
    pub session: String,
    pub title: String,
    pub body: String,
    /// What the agent assumes meanwhile.
    pub assumption: String,
    /// What the agent does when no answer comes by `due_at`.
    pub default: String,
    pub importance: Importance,
    /// The deadline in ms; `null` for none (a question reopened after its deadline).
    pub due_at: Option<u64>,
    pub asked_at: u64,
}

/// A question closed lately: answered, past its deadline, closed by a client, or closed
/// because its agent was deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ClosedQuestion {
    #[serde(flatten)]
    pub question: QuestionInfo,
    /// `user`, `deadline` or `agent_deleted`.
    pub closed_by: String,
    /// `answered`, `no answer by the deadline`, the reason given to `item_close` (or `null`),
    /// or `its agent was deleted`.
    pub closed_reason: Option<String>,
    pub closed_at: u64,
    /// What went to the agent: the user's answer, or the default at the deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}
