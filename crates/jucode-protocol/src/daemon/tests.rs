#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;

use super::*;
use serde_json::json;

fn frame(value: Value) -> ClientFrame {
    ClientFrame::parse(&value.to_string()).unwrap()
}

#[test]
fn a_frame_splits_into_envelope_and_fields() {
    let f = ClientFrame::parse(r#"{"op":"watch","session":"s1","id":7}"#).unwrap();
    assert_eq!(f.op, "watch");
    assert_eq!(f.id, Some(json!(7)));
    assert_eq!(f.session.as_deref(), Some("s1"));
    assert!(f.is_daemon_op());
    let f = ClientFrame::parse(r#"{"op":"user_message","session":"s1","id":"a","content":"hi"}"#)
        .unwrap();
    assert!(!f.is_daemon_op());
    assert_eq!(
        Value::Object(f.engine_op()),
        json!({"op":"user_message","content":"hi"})
    );
}

#[test]
fn bad_frames_say_what_is_wrong_and_keep_their_id() {
    let reason = |text: &str| ClientFrame::parse(text).unwrap_err().reason;
    assert!(matches!(reason("{"), FrameError::Json(_)));
    assert_eq!(reason("[1]"), FrameError::NotAnObject);
    assert_eq!(reason(r#"{"op":3}"#), FrameError::NoOp);
    let err = ClientFrame::parse(r#"{"id":4775}"#).unwrap_err();
    assert_eq!(err.id, Some(json!(4775)));
    assert_eq!(err.to_string(), "invalid frame: a frame needs an op string");
    let err = ClientFrame::parse(r#"{"op":"schedule_delete","id":3004,"session":1}"#).unwrap_err();
    assert_eq!(err.id, Some(json!(3004)));
    assert_eq!(err.reason, FrameError::SessionNotString);
    assert_eq!(
        ClientFrame::parse(r#"{"op":"x","session":3}"#)
            .unwrap_err()
            .id,
        None
    );
}

#[test]
fn a_float_id_comes_back_exactly() {
    let f = ClientFrame::parse(r#"{"op":"ping","id":2.5e-308}"#).unwrap();
    let reply = serde_json::to_string(&Reply::to(f.id, DaemonEvent::Pong)).unwrap();
    assert_eq!(reply, r#"{"type":"pong","id":2.5e-308}"#);
}

#[test]
fn mcp_ops_are_daemon_ops_only_without_session() {
    assert!(is_daemon_op("mcp_set", false));
    assert!(!is_daemon_op("mcp_set", true));
    assert!(!is_daemon_op("user_message", false));
    // The gate holds with a session too.
    let spec = ops::spec("mcp_set").unwrap();
    assert_eq!(
        spec.refusal(true),
        Some("only the desktop can change MCP servers")
    );
    assert_eq!(spec.refusal(false), None);
    let push = ops::spec("push_test").unwrap();
    assert_eq!(
        push.refusal(false),
        Some("only a paired device can receive notifications")
    );
}

#[test]
fn no_op_is_in_the_table_twice() {
    let mut seen = HashSet::new();
    for spec in OPS {
        assert!(seen.insert(spec.name), "{} is listed twice", spec.name);
    }
}

/// Every implemented row reads into its area's enum, and every unimplemented one does not.
#[test]
fn the_table_and_the_typed_ops_agree() {
    // The fewest fields each implemented op needs.
    let samples = json!({
        "ping": {},
        "restart_when_idle": {},
        "session_list": {},
        "session_history": {"cwd": "/p"},
        "session_meta": {"session": "s"},
        "session_create": {},
        "session_open": {"session": "s"},
        "session_close": {"session": "s"},
        "watch": {"session": "s"},
        "unwatch": {"session": "s"},
        "actions_list": {},
        "item_close": {"kind": "action", "item": "a"},
        "item_reopen": {"kind": "action", "item": "a"},
        "workspaces": {},
        "workspaces_set": {"rev": 0, "workspaces": []},
        "project_add": {"path": "/p"},
        "project_create": {"parent": "/p", "name": "n"},
        "project_remove": {"workspace": "w", "project": "p"},
        "agent_list": {},
        "agent_create": {"agent": "ops", "name": "Ops", "cwd": "/w", "role": "r"},
        "agent_get": {"agent": "ops"},
        "agent_update": {"agent": "ops"},
        "agent_delete": {"agent": "ops"},
        "agent_memory_read": {"agent": "ops", "file": "a.md"},
        "pair_start": {},
        "pair_link": {},
        "device_list": {},
        "device_revoke": {"device": "d"},
        "relay_status": {},
        "relay_set": {"enabled": true},
        "push_subscribe": {"subscription": {}},
        "push_unsubscribe": {},
        "push_test": {},
        "mcp_set": {},
        "mcp_remove": {},
        "mcp_toggle": {},
        "timer_list": {},
        "timer_cancel": {"timer": "tm-1"},
        "question_list": {},
        "question_answer": {"question": "q-1", "answer": "yes"},
        "report_list": {},
        "report_read": {"report": "r-1"},
        "message_send": {"agent": "ops", "body": "hi"},
        "schedule_list": {},
        "schedule_save": {"schedule": {"agent": "ops", "name": "n", "prompt": "p", "repeat": "daily", "time": "09:00"}},
        "schedule_delete": {"schedule": "sch-1"},
        "schedule_run": {"id": "sch-1"},
        "session_usage": {"session": "s1"},
        "schedule_usage": {"schedule": "sch-1"},
        "fs_image": {"path": "/tmp/a.png"},
        "fs_list": {"path": "~"},
        "fs_read": {"path": "/tmp/a.txt"},
        "git_status": {"path": "/tmp"},
        "git_diff": {"path": "/tmp", "file": "a.txt"},
        "upload": {"name": "a.txt", "data": "", "last": true},
        "term_open": {"cwd": "~/app", "cols": 100, "rows": 30},
        "term_input": {"term": "t-1", "data": "bHMK"},
        "term_resize": {"term": "t-1", "cols": 100, "rows": 30},
        "term_close": {"term": "t-1"},
        "session_tui": {"session": "s1", "cols": 120, "rows": 40, "force": true},
        "skill_install": {"source": "anthropic", "skill": "pdf"},
        "skills_catalog": {},
        "gateway_catalog": {},
        "set_gateway": {"session": "s1", "gateway": true},
        "requirement_list": {},
        "requirement_create": {"text": "t"},
        "requirement_update": {"requirement": "R-1"},
        "requirement_delete": {"requirement": "R-1"},
        "requirement_link": {"requirement": "R-1", "session": "s1"},
        "requirement_unlink": {"requirement": "R-1", "session": "s1"},
        "requirement_image": {"requirement": "R-1", "index": 0},
        "requirement_proposal": {"requirement": "R-1", "accept": true},
        "requirement_begin": {"requirement": "R-1", "session": "s1", "plan": true, "mode": "edits"},
        "requirement_confirm": {"requirement": "R-1", "lang": "en"},
        "requirement_reply": {"requirement": "R-1", "text": "more"},
        "dispatch_send": {"text": "fix the tests", "plan": true, "approval_mode": "auto"},
        "dispatch_confirm": {"dispatch": "s1", "approve": true},
        "dispatch_list": {},
    });
    let samples = samples.as_object().unwrap();
    for spec in OPS {
        let mut fields = samples.get(spec.name).cloned().unwrap_or_else(|| json!({}));
        fields["op"] = json!(spec.name);
        let parsed = DaemonOp::from_frame(&frame(fields));
        if !spec.implemented {
            assert!(parsed.is_none(), "{} is not built but parses", spec.name);
            assert!(
                !samples.contains_key(spec.name),
                "{} has a sample",
                spec.name
            );
            continue;
        }
        let op = parsed
            .unwrap_or_else(|| panic!("{} has no typed op", spec.name))
            .unwrap_or_else(|e| panic!("{e}"));
        let area = match op {
            DaemonOp::Basics(_) => Area::Basics,
            DaemonOp::Sessions(_) => Area::Sessions,
            DaemonOp::Actions(_) => Area::Actions,
            DaemonOp::Agents(_) => Area::Agents,
            DaemonOp::Workspaces(_) => Area::Workspaces,
            DaemonOp::Devices(_) => Area::Devices,
            DaemonOp::Push(_) => Area::Push,
            DaemonOp::Mcp(_) => Area::Mcp,
            DaemonOp::Timers(_) => Area::Timers,
            DaemonOp::Questions(_) => Area::Questions,
            DaemonOp::Reports(_) => Area::Reports,
            DaemonOp::Requirements(_) => Area::Requirements,
            DaemonOp::Dispatch(_) => Area::Dispatch,
            DaemonOp::Messages(_) => Area::Messages,
            DaemonOp::Schedules(_) => Area::Schedules,
            DaemonOp::Usage(_) => Area::Usage,
            DaemonOp::Files(_) => Area::Files,
            DaemonOp::Git(_) => Area::Git,
            DaemonOp::Uploads(_) => Area::Uploads,
            DaemonOp::Terminals(_) => Area::Terminals,
            DaemonOp::Skills(_) => Area::Skills,
            DaemonOp::Gateway(_) => Area::Gateway,
        };
        assert_eq!(area, spec.area, "{}", spec.name);
    }
    assert_eq!(
        OPS.iter().filter(|s| s.implemented).count(),
        samples.len(),
        "every sample names an implemented op"
    );
}

/// Every op the spec names under "Daemon ops" and after is a row.
#[test]
fn every_spec_op_is_listed() {
    let spec_ops = "ping restart_when_idle gateway_catalog workspaces workspaces_set project_add \
        project_create project_remove session_list session_history session_meta session_create \
        session_open session_close session_tui watch unwatch actions_list pair_start pair_link \
        device_list device_revoke relay_status relay_set fs_list fs_read fs_image git_status \
        git_diff agent_list agent_create agent_get agent_update agent_delete agent_memory_read \
        message_send timer_list timer_cancel schedule_list schedule_save schedule_delete \
        schedule_run session_usage schedule_usage question_list question_answer item_close \
        item_reopen report_list report_read skills_catalog skill_install dispatch_send \
        dispatch_confirm dispatch_list requirement_list requirement_create requirement_update \
        requirement_delete requirement_link requirement_unlink requirement_image \
        requirement_begin requirement_confirm requirement_reply requirement_proposal upload \
        push_subscribe push_unsubscribe push_test term_open term_input term_resize term_close \
        mcp_set mcp_remove mcp_toggle set_gateway";
    for name in spec_ops.split_whitespace() {
        assert!(ops::spec(name).is_some(), "{name} is missing from OPS");
    }
    assert_eq!(spec_ops.split_whitespace().count(), OPS.len());
}

#[test]
fn typed_ops_parse_and_name_missing_fields() {
    let f = ClientFrame::parse(r#"{"op":"session_create","cwd":"/tmp","id":1}"#).unwrap();
    let op = DaemonOp::from_frame(&f).unwrap().unwrap();
    assert_eq!(
        op,
        DaemonOp::Sessions(SessionsOp::SessionCreate {
            cwd: Some("/tmp".into()),
            engine: None,
            options: None,
            agent: None,
            chat: false
        })
    );
    let f = ClientFrame::parse(r#"{"op":"device_revoke"}"#).unwrap();
    let err = DaemonOp::from_frame(&f).unwrap().unwrap_err();
    assert_eq!(err.to_string(), "device_revoke: missing field `device`");
    let f = ClientFrame::parse(r#"{"op":"push_subscribe"}"#).unwrap();
    let err = DaemonOp::from_frame(&f).unwrap().unwrap_err();
    assert_eq!(
        err.to_string(),
        "push_subscribe: missing field `subscription`"
    );
    let f = ClientFrame::parse(r#"{"op":"dispatch_confirm","dispatch":"s1"}"#).unwrap();
    let err = DaemonOp::from_frame(&f).unwrap().unwrap_err();
    assert_eq!(err.to_string(), "dispatch_confirm: missing field `approve`");
}

#[test]
fn free_text_over_its_limit_is_refused_by_name() {
    let long = "x".repeat(limits::TITLE_CHARS + 1);
    let f = frame(json!({"op":"session_meta","session":"s","title":long}));
    assert_eq!(
        DaemonOp::from_frame(&f).unwrap().unwrap_err().to_string(),
        "session_meta: title is longer than 200 characters"
    );
    // Characters, not bytes: 200 multi-byte characters fit.
    let f = frame(json!({"op":"session_meta","session":"s","title":"é".repeat(200)}));
    assert!(DaemonOp::from_frame(&f).unwrap().is_ok());
    let f = frame(json!({"op":"item_close","kind":"action","item":"a","reason":"r".repeat(2001)}));
    assert_eq!(
        DaemonOp::from_frame(&f).unwrap().unwrap_err().to_string(),
        "item_close: reason is longer than 2000 characters"
    );
    let f = frame(json!({"op":"session_meta","session":"s","group":{"g":"x".repeat(1100)}}));
    assert_eq!(
        DaemonOp::from_frame(&f).unwrap().unwrap_err().to_string(),
        "session_meta: group is longer than 1024 bytes"
    );
    let f = frame(json!({"op":"project_create","parent":"/p","name":"n".repeat(201)}));
    assert!(DaemonOp::from_frame(&f).unwrap().is_err());
    let f = frame(
        json!({"op":"workspaces_set","rev":0,"workspaces":[{"id":"w","name":"n".repeat(201)}]}),
    );
    assert_eq!(
        DaemonOp::from_frame(&f).unwrap().unwrap_err().to_string(),
        "workspaces_set: workspace name is longer than 200 characters"
    );
    let body = "b".repeat(limits::MESSAGE_BODY_BYTES + 1);
    let f = frame(json!({"op":"message_send","agent":"ops","body":body}));
    assert_eq!(
        DaemonOp::from_frame(&f).unwrap().unwrap_err().to_string(),
        "message_send: body is longer than 262144 bytes"
    );
    let f =
        frame(json!({"op":"message_send","agent":"ops","body":"b","dedupe_key":"k".repeat(201)}));
    assert_eq!(
        DaemonOp::from_frame(&f).unwrap().unwrap_err().to_string(),
        "message_send: dedupe_key is longer than 200 characters"
    );
}

#[test]
fn session_meta_tells_null_group_from_absent() {
    let group_of = |text: &str| {
        let f = ClientFrame::parse(text).unwrap();
        let Some(Ok(DaemonOp::Sessions(SessionsOp::SessionMeta { group, .. }))) =
            DaemonOp::from_frame(&f)
        else {
            panic!("not parsed");
        };
        group
    };
    assert_eq!(
        group_of(r#"{"op":"session_meta","session":"s","group":null}"#),
        Some(Value::Null)
    );
    assert_eq!(group_of(r#"{"op":"session_meta","session":"s"}"#), None);
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
        json!({"type":"push_subscribed","id":1}),
        json!({"type":"push_tested","results":[{"service":"push.example","status":201},{"service":"getui","error":"off"}]}),
        json!({"type":"session_history","cwd":"/p","sessions":[{"session":"s","title":"t","updated_at":1,"entries":2,"archived":false,"agent":null,"engine":"jucode","open":false}]}),
        json!({"type":"timers","timers":[{"timer":"tm-1-1","agent":"ops","session":"s","fire_at":5,"body":"check the build"}],"id":2}),
        json!({"type":"timer_cancelled","timer":"tm-1-1","id":3}),
        json!({"type":"questions","questions":[{"id":"q-1-2","agent":"ops","session":"s","title":"Deploy?","body":"","assumption":"not yet","default":"wait","importance":"high","due_at":9,"asked_at":1}],
            "closed":[{"id":"q-1-3","agent":"ops","session":"s","title":"t","body":"b","assumption":"","default":"d","importance":"normal","due_at":null,"asked_at":1,"closed_by":"user","closed_reason":"answered","closed_at":4,"answer":"yes"}]}),
        json!({"type":"question_answered","question":"q-1-2","id":4}),
        json!({"type":"reports","reports":[{"id":"r-1-4","agent":"ops","session":"s","title":"Night run","body":"all green","at":3,"read":false}],"id":5}),
        json!({"type":"report_read","report":"r-1-4"}),
        json!({"type":"report_posted","report":{"id":"r-1-4","agent":"ops","session":"s","title":"Night run","body":"all green","at":3,"read":false}}),
    ];
    for example in examples {
        let reply: Reply = serde_json::from_value(example.clone()).unwrap();
        assert_eq!(serde_json::to_value(&reply).unwrap(), example);
    }
}
