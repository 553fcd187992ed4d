//! The ACP adapter against `fake-acp` replaying recorded claude-agent-acp 0.101.0 frames.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use jucode_adapters::acp::AcpEngine;
use serde_json::{Value, json};

const SESSION: &str = "7c1d2e3f-4051-4263-9a74-8b9cad0e1f21";
const CALL_1: &str = "toolu_005290bf93d0d67b";
const CALL_2: &str = "toolu_0057c833ff0bbb7f";

fn setup() -> (Sandbox, AcpEngine) {
    let sandbox = Sandbox::new();
    let engine = AcpEngine::new(sandbox.config());
    (sandbox, engine)
}

fn options() -> Value {
    fake_acp("claude-agent-acp-0.101.0-prompt-permission.jsonl")
}

async fn first_turn(h: &mut jucode_engine::EngineHandle) {
    // The agent starts in `auto`; the adapter switched it to `default` (fake-acp checks it).
    let opening = until(h, "approval_mode").await;
    assert_eq!(opening.last().unwrap()["mode"], "manual");
    send(h, json!({"op":"user_message","content":"RUN: echo hi"}));
    let events = turn(h).await;
    let mut want = vec![
        user("RUN: echo hi"),
        json!({"type":"connecting"}),
        json!({"type":"tool_start","call_id":CALL_1,"name":"bash"}),
        json!({"type":"tool_output","call_id":CALL_1,"name":"bash","output":"hi","is_error":false}),
    ];
    want.extend(reply(&["tool s", "aid: hi"]));
    want.extend([usage5(20, 10), ready()]);
    assert_eq!(flow(&events), want);
}

fn card() -> Value {
    json!({"type":"approval_request","call_id":CALL_2,"name":"bash","summary":"touch hi.txt && echo hi",
           "subagent_id":null,"hunks":null,"scopes":[]})
}

#[tokio::test]
async fn a_prompt_with_a_permission_allowed() {
    let (env, engine) = setup();
    let mut h = start(&engine, SESSION, &env.cwd, options(), false);
    first_turn(&mut h).await;
    send(
        &h,
        json!({"op":"user_message","content":"RUN: touch hi.txt && echo hi"}),
    );
    let before = until(&mut h, "approval_request").await;
    assert_eq!(
        flow(&before),
        vec![
            user("RUN: touch hi.txt && echo hi"),
            json!({"type":"connecting"}),
            json!({"type":"tool_start","call_id":CALL_2,"name":"bash"}),
            card(),
        ]
    );
    send(
        &h,
        json!({"op":"approve","call_id":CALL_2,"decision":"allow"}),
    );
    let after = turn(&mut h).await;
    let mut want = vec![
        json!({"type":"tool_output","call_id":CALL_2,"name":"bash","output":"hi","is_error":false}),
    ];
    want.extend(reply(&["tool s", "aid: hi"]));
    want.extend([usage5(20, 10), ready()]);
    assert_eq!(flow(&after), want);
    send(&h, json!({"op":"user_message","content":"hello there"}));
    let last = turn(&mut h).await;
    let mut want = vec![user("hello there"), json!({"type":"connecting"})];
    want.extend(reply(&["user said: ", "hello there"]));
    want.extend([usage5(10, 5), ready()]);
    assert_eq!(flow(&last), want);
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn a_cancel_while_a_permission_waits() {
    let (env, engine) = setup();
    let mut h = start(&engine, SESSION, &env.cwd, options(), false);
    first_turn(&mut h).await;
    send(
        &h,
        json!({"op":"user_message","content":"RUN: touch hi.txt && echo hi"}),
    );
    until(&mut h, "approval_request").await;
    send(&h, json!({"op":"interrupt"}));
    let ended = turn(&mut h).await;
    assert_eq!(
        flow(&ended),
        vec![
            usage5(20, 10),
            json!({"type":"info","message":"request interrupted"}),
            json!({"type":"status","message":"interrupted"}),
            ready(),
        ]
    );
    send(&h, json!({"op":"user_message","content":"hello there"}));
    let last = turn(&mut h).await;
    assert_eq!(flow(&last)[0], user("hello there"));
    assert_eq!(flow(&last).last().unwrap(), &ready());
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn a_reopened_session_starts_a_new_conversation() {
    // ACP keeps nothing to resume: a reopen runs session/new again (the recording starts so).
    let (env, engine) = setup();
    let mut h = start(&engine, SESSION, &env.cwd, options(), true);
    first_turn(&mut h).await;
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn an_acp_session_needs_a_command() {
    let (env, engine) = setup();
    let err = jucode_engine::EngineFactory::start(
        &engine,
        jucode_engine::StartSpec {
            session: SESSION.into(),
            cwd: env.cwd.clone(),
            extra_dirs: vec![],
            options: obj(json!({})),
            resume: false,
            agent: None,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("options.command"), "{err}");
}
