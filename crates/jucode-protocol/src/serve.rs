//! The serve protocol v2: ops a client sends to one session, events the session sends back.
//!
//! The daemon forwards engine events it does not interpret unchanged, so an event is kept as
//! the JSON object it came as ([`Event`]); [`Known`] is the typed view of the events the daemon
//! reads (turn state, the transcript it rebuilds for a watcher, approvals).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Object;

/// One engine event: a JSON object with a `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Event(pub Object);

impl Event {
    /// Builds an event of `kind` with `fields` (a JSON object; anything else gives no fields).
    pub fn new(kind: &str, fields: Value) -> Event {
        let mut map = Object::new();
        map.insert("type".into(), Value::String(kind.into()));
        if let Value::Object(fields) = fields {
            map.extend(fields);
        }
        Event(map)
    }

    /// The event's `type`, or "" when it has none.
    pub fn kind(&self) -> &str {
        self.0.get("type").and_then(Value::as_str).unwrap_or("")
    }

    /// A string field.
    pub fn str(&self, field: &str) -> Option<&str> {
        self.0.get(field).and_then(Value::as_str)
    }

    /// The typed view, when the daemon knows this event.
    pub fn known(&self) -> Option<Known> {
        // Read in place: building a `Value` to read would copy the whole object first.
        let fields = self.0.iter().map(|(k, v)| (k.as_str(), v));
        let map = serde::de::value::MapDeserializer::<_, serde_json::Error>::new(fields);
        Known::deserialize(map).ok()
    }

    /// The same event stamped with the session it belongs to, as clients receive it.
    pub fn with_session(mut self, session: &str) -> Event {
        self.0
            .insert("session".into(), Value::String(session.to_string()));
        self
    }

    /// Whether the event ends a turn (`status:"ready"` is the only end-of-turn marker).
    pub fn is_ready(&self) -> bool {
        self.kind() == "status" && self.str("message") == Some("ready")
    }
}

/// Events whose latest copy belongs in a watcher's snapshot, in snapshot order.
pub const STATE_EVENTS: &[&str] = &[
    "startup",
    "model_status",
    "command_list",
    "approval_mode",
    "approval_mode_pending",
    "mcp_servers",
    "plan",
    "rate_limit",
];

/// Hunk of a proposed file edit in an `approval_request`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Hunk {
    pub id: String,
    pub file: String,
    pub header: String,
    pub lines: Vec<String>,
}

/// One item of a `transcript` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum TranscriptItem {
    User {
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<String>,
    },
    Assistant {
        content: String,
    },
    Tool {
        name: String,
        output: String,
    },
    Branch {
        label: String,
    },
}

/// The serve v2 events the daemon interprets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Known {
    Startup {
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        cwd: Option<String>,
        #[serde(default)]
        model: Option<String>,
    },
    UserMessage {
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<String>,
    },
    Connecting,
    AssistantStart,
    AssistantDelta {
        delta: String,
    },
    ToolStart {
        call_id: String,
        name: String,
    },
    ToolOutput {
        call_id: String,
        name: String,
        output: String,
        #[serde(default)]
        is_error: bool,
    },
    ApprovalRequest {
        call_id: String,
        name: String,
        #[serde(default)]
        summary: String,
        #[serde(default)]
        subagent_id: Option<String>,
        #[serde(default)]
        hunks: Option<Vec<Hunk>>,
    },
    ActionDeferred {
        id: String,
        call_id: String,
        name: String,
    },
    Status {
        message: String,
    },
    Transcript {
        items: Vec<TranscriptItem>,
    },
    Attended {
        attended: bool,
    },
    Info {
        message: String,
    },
    Error {
        message: String,
    },
}

/// Serve v2 client ops (the daemon adds `session` and `id` around them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    UserMessage {
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<String>,
    },
    Command {
        input: String,
    },
    Continue,
    Steer,
    Interrupt,
    Approve {
        call_id: String,
        decision: Decision,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        always: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hunks: Option<Vec<String>>,
    },
    SetApprovalMode {
        mode: crate::ApprovalMode,
    },
    SetAttended {
        attended: bool,
    },
    DecideAction {
        action: String,
        decision: Decision,
    },
    McpList,
    McpSet {
        server: Object,
    },
    McpRemove {
        name: String,
    },
    McpToggle {
        name: String,
        enabled: bool,
    },
    Shutdown,
}

/// An answer to an approval or a deferred action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Deny,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The canonical turn of the serve v2 notes reads as the typed events, and every frame
    /// survives a round trip through [`Known`] unchanged.
    #[test]
    fn canonical_turn_round_trips() {
        let turn = [
            json!({"type":"user_message","content":"list files"}),
            json!({"type":"connecting"}),
            json!({"type":"assistant_start"}),
            json!({"type":"assistant_delta","delta":"Running ls"}),
            json!({"type":"tool_start","call_id":"call_1","name":"bash"}),
            json!({"type":"tool_output","call_id":"call_1","name":"bash","output":"a.txt\n","is_error":false}),
            json!({"type":"status","message":"ready"}),
            json!({"type":"approval_request","call_id":"call_5","name":"str_replace","summary":"edit src/a.rs","subagent_id":null,
                   "hunks":[{"id":"h1","file":"src/a.rs","header":"@@ -1,3 +1,3 @@","lines":["-a","+b"]}]}),
            json!({"type":"transcript","items":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"},{"role":"tool","name":"bash","output":"x"},{"role":"branch","label":"b"}]}),
        ];
        for frame in turn {
            let event: Event = serde_json::from_value(frame.clone()).unwrap();
            let known = event
                .known()
                .unwrap_or_else(|| panic!("not known: {frame}"));
            assert_eq!(serde_json::to_value(&known).unwrap(), frame);
        }
        let ready: Event =
            serde_json::from_value(json!({"type":"status","message":"ready"})).unwrap();
        assert!(ready.is_ready());
    }

    #[test]
    fn unknown_events_pass_through_with_session() {
        let raw = json!({"type":"goal","goal":null,"extra":[1,2]});
        let event: Event = serde_json::from_value(raw).unwrap();
        assert!(event.known().is_none());
        let stamped = serde_json::to_value(event.with_session("s1")).unwrap();
        assert_eq!(
            stamped,
            json!({"type":"goal","goal":null,"extra":[1,2],"session":"s1"})
        );
    }

    #[test]
    fn serve_ops_from_the_notes_round_trip() {
        let ops = [
            json!({"op":"user_message","content":"fix the failing test"}),
            json!({"op":"user_message","content":"what is in this screenshot?","images":["/home/u/shot.png"]}),
            json!({"op":"command","input":"/model"}),
            json!({"op":"approve","call_id":"call_2","decision":"deny"}),
            json!({"op":"approve","call_id":"call_3","decision":"allow","hunks":["h1","h3"]}),
            json!({"op":"approve","call_id":"call_4","decision":"allow","always":true}),
            json!({"op":"set_approval_mode","mode":"auto-edit"}),
            json!({"op":"decide_action","action":"act-1727500000000-3f9a1c2b","decision":"allow"}),
            json!({"op":"mcp_toggle","name":"github","enabled":false}),
            json!({"op":"interrupt"}),
        ];
        for frame in ops {
            let op: Op = serde_json::from_value(frame.clone()).unwrap();
            assert_eq!(serde_json::to_value(&op).unwrap(), frame);
        }
        // Aliases are read and the canonical name goes back.
        let op: Op =
            serde_json::from_value(json!({"op":"set_approval_mode","mode":"full-auto"})).unwrap();
        assert_eq!(
            serde_json::to_value(&op).unwrap(),
            json!({"op":"set_approval_mode","mode":"full-access"})
        );
    }
}
