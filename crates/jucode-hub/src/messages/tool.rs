//! The `message_agent` tool: an agent's session sends another agent a message.

use std::sync::Arc;

use jucode_engine::agent::ToolDef;
use jucode_protocol::daemon::limits::MESSAGE_BODY_BYTES;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{NewMessage, Origin};
use crate::Hub;
use crate::agents::tools::{Caller, ToolError};

pub(crate) const NAME: &str = "message_agent";

/// How a model sees the tool.
pub(crate) fn def() -> ToolDef {
    ToolDef {
        name: NAME.into(),
        description: "Sends a message to another agent. It arrives in one of that agent's \
                      sessions as a message from you; with reply_to (the id in the header of a \
                      message you received) it goes back to the session that sent that one. \
                      Returns the message's id."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "agent": {"type": "string", "description": "The id of the agent to message."},
                "body": {"type": "string", "description": "What to tell it."},
                "reply_to": {
                    "type": "string",
                    "description": "The id of the message this one answers (optional)."
                }
            },
            "required": ["agent", "body"],
            "additionalProperties": false
        }),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    agent: String,
    body: String,
    #[serde(default)]
    reply_to: Option<String>,
}

/// Runs the tool for `caller`.
pub(crate) fn call(hub: &Arc<Hub>, caller: &Caller, args: Value) -> Result<Value, ToolError> {
    let args: Args =
        serde_json::from_value(args).map_err(|e| ToolError::Invalid(format!("{NAME}: {e}")))?;
    if args.agent == caller.agent {
        return Err(ToolError::Invalid(format!(
            "{NAME}: you are agent {}; a message to yourself is not sent",
            caller.agent
        )));
    }
    if args.body.len() > MESSAGE_BODY_BYTES {
        return Err(ToolError::Invalid(format!(
            "{NAME}: body is longer than {MESSAGE_BODY_BYTES} bytes"
        )));
    }
    let mut inner = hub.lock();
    if !inner.agents.map.contains_key(&args.agent) {
        let known: Vec<&str> = inner
            .agents
            .map
            .keys()
            .map(String::as_str)
            .filter(|a| *a != caller.agent)
            .collect();
        let known = if known.is_empty() {
            "there are no other agents".to_string()
        } else {
            format!("the other agents are {}", known.join(", "))
        };
        return Err(ToolError::Invalid(format!(
            "{NAME}: unknown agent {}; {known}",
            args.agent
        )));
    }
    let msg = NewMessage {
        to: args.agent,
        from: Origin::Agent(caller.agent.clone()),
        body: args.body,
        session: None,
        reply_to: args.reply_to,
        dedupe_key: None,
        new_session: false,
    };
    let accepted = hub
        .accept_message(
            &mut inner,
            msg,
            Some(caller.session.clone()),
            &mut |_, _| {},
        )
        .map_err(|e| ToolError::Invalid(format!("{NAME}: {e}")))?;
    Ok(json!({"message": accepted.id}))
}
