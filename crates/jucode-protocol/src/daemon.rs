//! Frames between daemon clients (desktop, phone, web page) and the daemon.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Object;

/// A client frame split into its envelope and the rest.
///
/// `id` is any JSON value and is echoed on the reply; `session` names the hosted session an op
/// belongs to. `fields` is the whole frame object (envelope included), so a session op can be
/// forwarded to its engine as it came.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientFrame {
    pub op: String,
    pub id: Option<Value>,
    pub session: Option<String>,
    pub fields: Object,
}

/// Why a frame could not be read; the daemon answers `invalid frame: <this>`.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FrameError {
    #[error("{0}")]
    Json(String),
    #[error("a frame must be a JSON object")]
    NotAnObject,
    #[error("a frame needs an op string")]
    NoOp,
    #[error("session must be a string")]
    SessionNotString,
}

impl ClientFrame {
    /// Parses one WebSocket text message.
    pub fn parse(text: &str) -> Result<ClientFrame, FrameError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| FrameError::Json(e.to_string()))?;
        let Value::Object(fields) = value else {
            return Err(FrameError::NotAnObject);
        };
        let op = match fields.get("op") {
            Some(Value::String(op)) if !op.is_empty() => op.clone(),
            _ => return Err(FrameError::NoOp),
        };
        let id = fields.get("id").filter(|v| !v.is_null()).cloned();
        let session = match fields.get("session") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(FrameError::SessionNotString),
        };
        Ok(ClientFrame {
            op,
            id,
            session,
            fields,
        })
    }

    /// Whether the daemon answers this op itself rather than forwarding it to a session.
    pub fn is_daemon_op(&self) -> bool {
        is_daemon_op(&self.op, self.session.is_some())
    }

    /// The frame as it goes to the session's engine: the envelope fields the engine does not
    /// know (`id`, `session`) removed.
    pub fn engine_op(&self) -> Object {
        let mut op = self.fields.clone();
        op.remove("id");
        op.remove("session");
        op
    }
}

/// Every op the daemon answers itself (spec "Daemon ops" and the sections after it).
pub const DAEMON_OPS: &[&str] = &[
    "ping",
    "restart_when_idle",
    "gateway_catalog",
    "workspaces",
    "workspaces_set",
    "project_add",
    "project_create",
    "project_remove",
    "session_list",
    "session_history",
    "session_meta",
    "session_create",
    "session_open",
    "session_close",
    "session_tui",
    "watch",
    "unwatch",
    "actions_list",
    "pair_start",
    "pair_link",
    "device_list",
    "device_revoke",
    "relay_status",
    "relay_set",
    "fs_list",
    "fs_read",
    "fs_image",
    "git_status",
    "git_diff",
    "agent_list",
    "agent_create",
    "agent_get",
    "agent_update",
    "agent_delete",
    "agent_memory_read",
    "message_send",
    "timer_list",
    "timer_cancel",
    "schedule_list",
    "schedule_save",
    "schedule_delete",
    "schedule_run",
    "session_usage",
    "schedule_usage",
    "question_list",
    "question_answer",
    "item_close",
    "item_reopen",
    "report_list",
    "report_read",
    "skills_catalog",
    "skill_install",
    "dispatch_send",
    "dispatch_confirm",
    "dispatch_list",
    "requirement_list",
    "requirement_create",
    "requirement_update",
    "requirement_delete",
    "requirement_link",
    "requirement_unlink",
    "requirement_image",
    "requirement_begin",
    "requirement_confirm",
    "requirement_reply",
    "requirement_proposal",
    "upload",
    "push_subscribe",
    "push_unsubscribe",
    "push_test",
    "term_open",
    "term_input",
    "term_resize",
    "term_close",
];

/// Ops that are daemon ops only without a `session` (with one they go to the session's engine).
const DAEMON_OPS_WITHOUT_SESSION: &[&str] = &["mcp_set", "mcp_remove", "mcp_toggle"];

/// Whether `op` is answered by the daemon itself.
pub fn is_daemon_op(op: &str, has_session: bool) -> bool {
    DAEMON_OPS.contains(&op) || (!has_session && DAEMON_OPS_WITHOUT_SESSION.contains(&op))
}

/// The daemon ops this build answers, parsed from a [`ClientFrame`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum DaemonOp {
    Ping,
    SessionList,
    SessionHistory {
        cwd: String,
    },
    SessionMeta {
        session: String,
        #[serde(default)]
        title: Option<String>,
        #[serde(default)]
        archived: Option<bool>,
        #[serde(default)]
        hidden: Option<bool>,
        #[serde(default, deserialize_with = "present")]
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
    ActionsList,
    Workspaces,
    WorkspacesSet {
        rev: u64,
        workspaces: Vec<Workspace>,
    },
    ProjectAdd {
        path: String,
        #[serde(default)]
        workspace: Option<String>,
        #[serde(default)]
        project_name: Option<String>,
        #[serde(default)]
        workspace_name: Option<String>,
    },
    ProjectCreate {
        parent: String,
        name: String,
        #[serde(default)]
        git_init: bool,
        #[serde(default)]
        workspace: Option<String>,
        #[serde(default)]
        workspace_name: Option<String>,
    },
    ProjectRemove {
        workspace: String,
        project: String,
    },
    PairStart,
    PairLink,
    DeviceList,
    DeviceRevoke {
        device: String,
    },
    RelayStatus,
    RelaySet {
        enabled: bool,
    },
    ItemClose {
        kind: String,
        item: String,
        #[serde(default)]
        reason: Option<String>,
    },
    ItemReopen {
        kind: String,
        item: String,
    },
    /// Without a session: edits `mcp_servers` in config.json. The fields stay loose so the
    /// daemon can answer with the serve protocol's exact error texts.
    McpSet {
        #[serde(default)]
        server: Option<Value>,
    },
    McpRemove {
        #[serde(default)]
        name: Option<Value>,
    },
    McpToggle {
        #[serde(default)]
        name: Option<Value>,
        #[serde(default)]
        enabled: Option<Value>,
    },
}

/// Distinguishes an absent field (`None`) from an explicit `null` (`Some(Value::Null)`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl DaemonOp {
    /// Reads the typed op from a frame. `None` when this build does not implement `frame.op`
    /// (the daemon then answers that the feature is not available); `Some(Err)` names what is
    /// wrong with the fields.
    pub fn from_frame(frame: &ClientFrame) -> Option<Result<DaemonOp, String>> {
        const IMPLEMENTED: &[&str] = &[
            "ping",
            "session_list",
            "session_history",
            "session_meta",
            "session_create",
            "session_open",
            "session_close",
            "watch",
            "unwatch",
            "actions_list",
            "workspaces",
            "workspaces_set",
            "project_add",
            "project_create",
            "project_remove",
            "pair_start",
            "pair_link",
            "device_list",
            "device_revoke",
            "relay_status",
            "relay_set",
            "item_close",
            "item_reopen",
            "mcp_set",
            "mcp_remove",
            "mcp_toggle",
        ];
        if !IMPLEMENTED.contains(&frame.op.as_str()) {
            return None;
        }
        Some(
            serde_json::from_value(Value::Object(frame.fields.clone()))
                .map_err(|e| format!("{}: {}", frame.op, e)),
        )
    }

    /// Ops only local clients (holding the daemon token) may send, with the refusal text.
    pub fn local_only(op: &str) -> Option<&'static str> {
        match op {
            "pair_start" | "pair_link" | "device_list" | "device_revoke" | "relay_status"
            | "relay_set" | "restart_when_idle" => Some("only the desktop can manage devices"),
            "mcp_set" | "mcp_remove" | "mcp_toggle" => {
                Some("only the desktop can change MCP servers")
            }
            "skills_catalog" | "skill_install" => Some("only the desktop can install skills"),
            _ => None,
        }
    }
}

/// A workspace: a named group of projects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workspace {
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_default: Option<bool>,
    #[serde(default)]
    pub projects: Vec<Project>,
    /// Fields kept as the client sent them (`color`, `icon`, newer ones).
    #[serde(flatten)]
    pub extra: Object,
}

/// A project: a directory (and optionally extra directories) that sessions run in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Project {
    pub id: String,
    pub name: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirs: Option<Vec<String>>,
    /// Fields kept as the client sent them (`chats`, `worktree`, `color`, `icon`, …).
    #[serde(flatten)]
    pub extra: Object,
}

/// A hosted session as `sessions` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

/// A paired device as `devices` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub id: String,
    pub name: String,
    pub paired_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// Frames the daemon itself sends (replies and broadcasts). Session events are engine frames
/// (see [`crate::serve`]) and are not in this enum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DaemonEvent {
    Hello {
        protocol: u64,
        version: String,
    },
    Pong,
    Error {
        message: String,
    },
    Sessions {
        sessions: Vec<SessionInfo>,
    },
    SessionHistory {
        cwd: String,
        sessions: Vec<Value>,
    },
    SessionCreated {
        session: String,
    },
    SessionOpened {
        session: String,
    },
    SessionClosed {
        session: String,
    },
    Watching {
        session: String,
        watching: bool,
    },
    Workspaces {
        rev: u64,
        workspaces: Vec<Workspace>,
    },
    Agents {
        agents: Vec<Value>,
    },
    Schedules {
        schedules: Vec<Value>,
    },
    Questions {
        questions: Vec<Value>,
        closed: Vec<Value>,
    },
    Actions {
        actions: Vec<Value>,
        closed: Vec<Value>,
    },
    Dispatches {
        dispatches: Vec<Value>,
    },
    Requirements {
        requirements: Vec<Value>,
    },
    Pairing {
        code: String,
        expires_at: u64,
    },
    PairLink {
        link: String,
        code: String,
        expires_at: u64,
    },
    Devices {
        devices: Vec<DeviceInfo>,
    },
    DeviceRevoked {
        device: String,
    },
    RelayStatus {
        enabled: bool,
        connected: bool,
        host: Option<String>,
        url: Option<String>,
    },
    ItemClosed {
        item: String,
    },
    ItemReopened {
        item: String,
    },
    /// `mcp_set` / `mcp_remove` / `mcp_toggle` without a session: config.json is saved.
    McpSaved,
}

/// A frame on its way to a client: a daemon event, with the request id when it is a reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    #[serde(flatten)]
    pub event: DaemonEvent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
}

impl Reply {
    pub fn to(id: Option<Value>, event: DaemonEvent) -> Reply {
        Reply { event, id }
    }

    pub fn error(id: Option<Value>, message: impl Into<String>) -> Reply {
        Reply {
            event: DaemonEvent::Error {
                message: message.into(),
            },
            id,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_frame_splits_into_envelope_and_fields() {
        let f = ClientFrame::parse(r#"{"op":"watch","session":"s1","id":7}"#).unwrap();
        assert_eq!(f.op, "watch");
        assert_eq!(f.id, Some(json!(7)));
        assert_eq!(f.session.as_deref(), Some("s1"));
        assert!(f.is_daemon_op());
        let f =
            ClientFrame::parse(r#"{"op":"user_message","session":"s1","id":"a","content":"hi"}"#)
                .unwrap();
        assert!(!f.is_daemon_op());
        assert_eq!(
            Value::Object(f.engine_op()),
            json!({"op":"user_message","content":"hi"})
        );
    }

    #[test]
    fn bad_frames_say_what_is_wrong() {
        assert!(matches!(ClientFrame::parse("{"), Err(FrameError::Json(_))));
        assert_eq!(ClientFrame::parse("[1]"), Err(FrameError::NotAnObject));
        assert_eq!(ClientFrame::parse(r#"{"id":1}"#), Err(FrameError::NoOp));
        assert_eq!(ClientFrame::parse(r#"{"op":3}"#), Err(FrameError::NoOp));
        assert_eq!(
            ClientFrame::parse(r#"{"op":"x","session":3}"#),
            Err(FrameError::SessionNotString)
        );
    }

    #[test]
    fn mcp_ops_are_daemon_ops_only_without_session() {
        assert!(is_daemon_op("mcp_set", false));
        assert!(!is_daemon_op("mcp_set", true));
        assert!(!is_daemon_op("user_message", false));
    }

    #[test]
    fn typed_ops_parse_and_name_missing_fields() {
        let f = ClientFrame::parse(r#"{"op":"session_create","cwd":"/tmp","id":1}"#).unwrap();
        let op = DaemonOp::from_frame(&f).unwrap().unwrap();
        assert_eq!(
            op,
            DaemonOp::SessionCreate {
                cwd: Some("/tmp".into()),
                engine: None,
                options: None,
                agent: None,
                chat: false
            }
        );
        let f = ClientFrame::parse(r#"{"op":"device_revoke"}"#).unwrap();
        let err = DaemonOp::from_frame(&f).unwrap().unwrap_err();
        assert_eq!(err, "device_revoke: missing field `device`");
        let f = ClientFrame::parse(r#"{"op":"agent_list"}"#).unwrap();
        assert!(DaemonOp::from_frame(&f).is_none());
    }

    #[test]
    fn session_meta_tells_null_group_from_absent() {
        let f = ClientFrame::parse(r#"{"op":"session_meta","session":"s","group":null}"#).unwrap();
        let Some(Ok(DaemonOp::SessionMeta { group, .. })) = DaemonOp::from_frame(&f) else {
            panic!("not parsed");
        };
        assert_eq!(group, Some(Value::Null));
        let f = ClientFrame::parse(r#"{"op":"session_meta","session":"s"}"#).unwrap();
        let Some(Ok(DaemonOp::SessionMeta { group, .. })) = DaemonOp::from_frame(&f) else {
            panic!("not parsed");
        };
        assert_eq!(group, None);
    }

    /// The example frames of the protocol document survive a round trip unchanged.
    #[test]
    fn spec_examples_round_trip() {
        let examples = [
            json!({"type":"hello","protocol":2,"version":"0.3.0"}),
            json!({"type":"sessions","sessions":[{"session":"s1","cwd":"/p","engine":"jucode","chat":false,"agent":null,"open":true,"watchers":0,"title":"t","archived":false,"busy":false,"created_at":0,"updated_at":0}]}),
            json!({"type":"workspaces","rev":1,"workspaces":[{"id":"w1","name":"Main","is_default":true,"color":"#ff0000","projects":[{"id":"p1","name":"app","path":"/home/u/app","dirs":["/home/u/lib"],"icon":{"kind":"builtin","id":"rocket"}}]}]}),
            json!({"type":"error","message":"boom","id":3}),
            json!({"type":"pairing","code":"ABCDEFGH","expires_at":1727500000000u64,"id":"x"}),
            json!({"type":"relay_status","enabled":false,"connected":false,"host":null,"url":null}),
            json!({"type":"devices","devices":[{"id":"dev-1-1","name":"phone","paired_at":5}]}),
        ];
        for example in examples {
            let reply: Reply = serde_json::from_value(example.clone()).unwrap();
            assert_eq!(serde_json::to_value(&reply).unwrap(), example);
        }
    }
}
