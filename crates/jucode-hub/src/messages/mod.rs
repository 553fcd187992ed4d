//! Messages to agents: recorded in `messages.jsonl` (fsynced) before anything is delivered,
//! then routed to a session and delivered as a user message.
//!
//! Other areas send through [`Hub::enqueue_message`] with a [`NewMessage`]: a fired timer, an
//! answered question, a scheduled task, another agent.

use std::sync::Arc;

use crate::error::OpError;
use crate::{Hub, Inner};

/// Where a message comes from; `as_wire` is the `from` of its record and of
/// `message_delivered`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    User,
    Agent(String),
    Timer(String),
    Schedule(String),
    Question(String),
}

impl Origin {
    pub(crate) fn as_wire(&self) -> String {
        match self {
            Origin::User => "user".into(),
            Origin::Agent(id) => format!("agent:{id}"),
            Origin::Timer(id) => format!("timer:{id}"),
            Origin::Schedule(id) => format!("schedule:{id}"),
            Origin::Question(id) => format!("question:{id}"),
        }
    }
}

/// A message to record and deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewMessage {
    /// The agent it goes to.
    pub(crate) to: String,
    pub(crate) from: Origin,
    pub(crate) body: String,
    /// The session it must go to.
    pub(crate) session: Option<String>,
    /// The message this one answers: it goes to the session that received that one.
    pub(crate) reply_to: Option<String>,
    /// A second message with the same key is not recorded or sent again.
    pub(crate) dedupe_key: Option<String>,
    /// Start a new session for it rather than route it.
    pub(crate) new_session: bool,
}

/// What recording a message gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Accepted {
    /// The message's id (the earlier one's for a duplicate).
    pub(crate) id: String,
    /// A message with this dedupe key was recorded before; nothing new was sent.
    pub(crate) duplicate: bool,
}

impl Hub {
    /// Records `msg` (fsynced) and tries to deliver it at once; what cannot be delivered now
    /// is retried every second. Called with the hub's lock held.
    pub(crate) fn enqueue_message(
        self: &Arc<Self>,
        inner: &mut Inner,
        msg: NewMessage,
    ) -> Result<Accepted, OpError> {
        let _ = (inner, msg);
        Err(OpError::NotBuilt("message delivery".into()))
    }
}
