//! Messages to long-lived agents: `message_send` and what the daemon answers and broadcasts.

use serde::Deserialize;

use super::limits::{self, TooLong};

/// Ops of [`crate::daemon::ops::Area::Messages`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum MessagesOp {
    /// Records a message for `agent` and delivers it as a user message in one of its sessions.
    MessageSend {
        agent: String,
        #[cfg_attr(feature = "schema", schemars(length(max = limits::MESSAGE_BODY_BYTES)))]
        body: String,
        /// The session it must go to (one of the agent's).
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(length(max = limits::ID_CHARS)))]
        session: Option<String>,
        /// A message id: this one goes to the session that received that one.
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(length(max = limits::ID_CHARS)))]
        reply_to: Option<String>,
        /// A second message with the same key is not recorded or sent again.
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(length(max = limits::ID_CHARS)))]
        dedupe_key: Option<String>,
        /// Start a new session of the agent for it rather than route it.
        #[serde(default)]
        new_session: bool,
    },
}

impl MessagesOp {
    pub(crate) fn check_limits(&self) -> Result<(), TooLong> {
        use limits::{ID_CHARS, MESSAGE_BODY_BYTES, bytes, chars};
        match self {
            MessagesOp::MessageSend {
                agent,
                body,
                session,
                reply_to,
                dedupe_key,
                ..
            } => {
                chars("agent", Some(agent), ID_CHARS)?;
                bytes("body", Some(body), MESSAGE_BODY_BYTES)?;
                chars("session", session.as_deref(), ID_CHARS)?;
                chars("reply_to", reply_to.as_deref(), ID_CHARS)?;
                chars("dedupe_key", dedupe_key.as_deref(), ID_CHARS)
            }
        }
    }
}
