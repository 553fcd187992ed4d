#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use serde_json::json;

use super::*;
use crate::daemon::{DeviceInfo, Reply, SessionInfo, Workspace};
use crate::serve::Event;

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::meta::validate(schema).unwrap();
    jsonschema::validator_for(schema).unwrap()
}

/// Every error, as `<path>: <message>`.
fn errors(v: &jsonschema::Validator, frame: &Value) -> Vec<String> {
    v.iter_errors(frame)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

#[track_caller]
fn valid(v: &jsonschema::Validator, frame: Value) {
    let errors = errors(v, &frame);
    assert!(errors.is_empty(), "{frame} should be valid: {errors:?}");
}

/// The frame is invalid and one error names `want`.
#[track_caller]
fn invalid(v: &jsonschema::Validator, frame: Value, want: &str) {
    let errors = errors(v, &frame);
    assert!(
        errors.iter().any(|e| e.contains(want)),
        "{frame}: expected an error containing {want:?}, got {errors:?}"
    );
}

#[test]
fn every_built_op_has_a_typed_shape_and_every_shape_an_op() {
    let mut generator = generator();
    let mut typed = BTreeSet::new();
    typed.extend(variants::<BasicsOp>(&mut generator, "op").keys().cloned());
    typed.extend(variants::<SessionsOp>(&mut generator, "op").keys().cloned());
    typed.extend(variants::<ActionsOp>(&mut generator, "op").keys().cloned());
    typed.extend(variants::<AgentsOp>(&mut generator, "op").keys().cloned());
    typed.extend(
        variants::<WorkspacesOp>(&mut generator, "op")
            .keys()
            .cloned(),
    );
    typed.extend(variants::<DevicesOp>(&mut generator, "op").keys().cloned());
    typed.extend(variants::<PushOp>(&mut generator, "op").keys().cloned());
    typed.extend(variants::<McpOp>(&mut generator, "op").keys().cloned());
    typed.extend(variants::<TimersOp>(&mut generator, "op").keys().cloned());
    typed.extend(
        variants::<QuestionsOp>(&mut generator, "op")
            .keys()
            .cloned(),
    );
    typed.extend(variants::<ReportsOp>(&mut generator, "op").keys().cloned());
    typed.extend(
        variants::<RequirementsOp>(&mut generator, "op")
            .keys()
            .cloned(),
    );
    typed.extend(
        variants::<crate::daemon::DispatchOp>(&mut generator, "op")
            .keys()
            .cloned(),
    );
    typed.extend(
        variants::<crate::daemon::FilesOp>(&mut generator, "op")
            .keys()
            .cloned(),
    );
    typed.extend(
        variants::<crate::daemon::GitOp>(&mut generator, "op")
            .keys()
            .cloned(),
    );
    typed.extend(
        variants::<crate::daemon::UploadsOp>(&mut generator, "op")
            .keys()
            .cloned(),
    );
    typed.extend(variants::<MessagesOp>(&mut generator, "op").keys().cloned());
    typed.extend(
        variants::<SchedulesOp>(&mut generator, "op")
            .keys()
            .cloned(),
    );
    typed.extend(variants::<UsageOp>(&mut generator, "op").keys().cloned());
    typed.extend(
        variants::<crate::daemon::TerminalsOp>(&mut generator, "op")
            .keys()
            .cloned(),
    );
    typed.extend(
        variants::<crate::daemon::SkillsOp>(&mut generator, "op")
            .keys()
            .cloned(),
    );
    typed.extend(
        variants::<crate::daemon::GatewayOp>(&mut generator, "op")
            .keys()
            .cloned(),
    );
    let built: BTreeSet<String> = OPS
        .iter()
        .filter(|s| s.implemented)
        .map(|s| s.name.to_string())
        .collect();
    assert_eq!(typed, built);
    // And every op of the table is in the schema's list of ops, serve v2 ops after them.
    let schema = client_frame();
    let names = schema.pointer("/properties/op/enum").unwrap();
    let names: Vec<&str> = names
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let table: Vec<&str> = OPS.iter().map(|s| s.name).collect();
    assert_eq!(&names[..table.len()], &table[..]);
    assert!(names.contains(&"user_message") && names.contains(&"approve"));
}

#[test]
fn client_frames_are_checked_by_their_op() {
    let v = validator(&client_frame());
    valid(&v, json!({"op": "ping"}));
    for id in [
        json!(1),
        json!("a"),
        json!(2.5e-308),
        json!([1]),
        json!({"k": null}),
    ] {
        valid(&v, json!({"op": "ping", "id": id}));
    }
    valid(
        &v,
        json!({"op": "session_create", "cwd": "/p", "engine": "jucode", "id": 1}),
    );
    valid(&v, json!({"op": "watch", "session": "s1"}));
    valid(
        &v,
        json!({"op": "session_meta", "session": "s1", "group": null}),
    );
    valid(
        &v,
        json!({"op": "user_message", "session": "s1", "content": "hi"}),
    );
    valid(
        &v,
        json!({"op": "set_approval_mode", "session": "s1", "mode": "full-auto"}),
    );
    // An op this build does not answer is still a frame of the protocol.
    valid(&v, json!({"op": "agent_list", "id": 9}));

    invalid(&v, json!({"id": 3}), "\"op\" is a required property");
    invalid(&v, json!({"op": "no_such_op"}), "/op");
    invalid(&v, json!({"op": "watch", "session": 12}), "/session");
    invalid(
        &v,
        json!({"op": "watch"}),
        "\"session\" is a required property",
    );
    invalid(&v, json!({"op": "session_create", "cwd": 5}), "/cwd");
    invalid(
        &v,
        json!({"op": "workspaces_set", "rev": -1, "workspaces": []}),
        "/rev",
    );
    invalid(
        &v,
        json!({"op": "user_message", "content": "hi"}),
        "\"session\"",
    );
    invalid(
        &v,
        json!({"op": "approve", "session": "s", "call_id": "c", "decision": "maybe"}),
        "/decision",
    );
    invalid(
        &v,
        json!({"op": "set_approval_mode", "session": "s", "mode": "yolo"}),
        "/mode",
    );
    let long = "t".repeat(crate::daemon::limits::TITLE_CHARS + 1);
    invalid(
        &v,
        json!({"op": "session_meta", "session": "s", "title": long}),
        "/title",
    );
}

#[test]
fn an_op_with_an_optional_session_is_checked_by_who_answers_it() {
    let v = validator(&client_frame());
    // Without a session the daemon edits config.json; with one the engine gets the serve op.
    valid(&v, json!({"op": "mcp_set", "server": {"name": "x"}}));
    valid(
        &v,
        json!({"op": "mcp_set", "session": "s", "server": {"name": "x"}}),
    );
    invalid(&v, json!({"op": "mcp_set", "server": 5}), "/server");
    invalid(
        &v,
        json!({"op": "mcp_toggle", "session": "s", "name": "x"}),
        "\"enabled\"",
    );
}

#[test]
fn daemon_frames_as_the_daemon_writes_them_are_valid() {
    let v = validator(&daemon_frame());
    let session = SessionInfo {
        session: "s1".into(),
        cwd: "/p".into(),
        engine: "jucode".into(),
        chat: false,
        agent: None,
        open: true,
        watchers: 0,
        title: "t".into(),
        archived: false,
        hidden: false,
        group: Some(json!({"name": "g"})),
        busy: false,
        created_at: 1,
        updated_at: 2,
        gateway: true,
    };
    let workspace: Workspace = serde_json::from_value(
        json!({"id": "w", "name": "W", "color": "red", "projects": [{"id": "p", "name": "P", "path": "/p", "chats": []}]}),
    )
    .unwrap();
    let frames = [
        Reply::to(Some(json!(7)), DaemonEvent::Pong),
        Reply::error(
            Some(json!("x")),
            "invalid frame: a frame needs an op string",
        ),
        Reply::to(
            None,
            DaemonEvent::Sessions {
                sessions: vec![session],
            },
        ),
        Reply::to(
            None,
            DaemonEvent::Workspaces {
                rev: 3,
                workspaces: vec![workspace],
            },
        ),
        Reply::to(
            Some(json!(1)),
            DaemonEvent::Devices {
                devices: vec![DeviceInfo {
                    id: "d".into(),
                    name: "n".into(),
                    paired_at: 5,
                    kind: None,
                }],
            },
        ),
        Reply::to(
            None,
            DaemonEvent::RelayStatus {
                enabled: false,
                connected: false,
                host: None,
                url: None,
            },
        ),
    ];
    for frame in frames {
        valid(&v, serde_json::to_value(frame).unwrap());
    }
    // Fields the daemon always writes are required.
    invalid(
        &v,
        json!({"type": "relay_status", "enabled": false, "connected": false}),
        "\"host\"",
    );
    invalid(
        &v,
        json!({"type": "hello", "protocol": "2", "version": "0.1.0"}),
        "/protocol",
    );
}

#[test]
fn session_events_are_typed_where_the_crate_types_them_and_open_otherwise() {
    let v = validator(&daemon_frame());
    let event = |value: Value| -> Value {
        let event: Event = serde_json::from_value(value).unwrap();
        serde_json::to_value(event.with_session("s1")).unwrap()
    };
    valid(
        &v,
        event(json!({"type": "transcript", "items": [{"role": "user", "content": "hi"}]})),
    );
    valid(
        &v,
        event(json!({"type": "tool_output", "call_id": "c", "name": "bash", "output": ""})),
    );
    valid(
        &v,
        event(json!({"type": "goal", "goal": null, "anything": [1]})),
    );
    valid(
        &v,
        event(json!({"type": "error", "message": "engine failed"})),
    );
    invalid(
        &v,
        event(json!({"type": "transcript", "items": [{"role": "robot"}]})),
        "/items/0",
    );
    invalid(&v, event(json!({"type": "assistant_delta"})), "\"delta\"");
    // An untyped event is only known by the session it carries.
    invalid(&v, json!({"type": "goal"}), "\"session\"");
    // `error` from the daemon has no session but needs its message all the same.
    invalid(&v, json!({"type": "error", "id": 3}), "\"message\"");
}

#[test]
fn every_approval_mode_name_in_the_schema_parses() {
    for name in APPROVAL_MODE_NAMES {
        assert!(ApprovalMode::parse(name).is_some(), "{name}");
    }
    for mode in ApprovalMode::ALL {
        assert!(APPROVAL_MODE_NAMES.contains(&mode.as_str()));
    }
}

#[test]
fn the_schemas_are_the_same_every_time() {
    assert_eq!(client_frame(), client_frame());
    assert_eq!(daemon_frame(), daemon_frame());
}
