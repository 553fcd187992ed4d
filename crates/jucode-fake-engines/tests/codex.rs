//! The Codex adapter against `fake-codex` replaying recorded `codex app-server` 0.171.0 frames.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use jucode_adapters::codex::CodexEngine;
use serde_json::{Value, json};

const SESSION: &str = "5a0c1d2e-3f40-4152-8a63-7b8c9d0e1f20";
const THREAD: &str = "01a2293b-ffda-7011-939a-d20278535ef1";
const CALL: &str = "call_00171228f7b224f4";

fn engine(env: &Sandbox) -> CodexEngine {
    CodexEngine::new(env.config())
}

fn card() -> Value {
    json!({"type":"approval_request","call_id":CALL,"subagent_id":null,"hunks":null,"name":"bash",
           "summary":"echo hi","scopes":["session","rule"],"reason":"fake model asks for approval"})
}

async fn approved_turn(h: &mut jucode_engine::EngineHandle) {
    send(h, json!({"op":"user_message","content":"RUN: echo hi"}));
    let before = until(h, "approval_request").await;
    assert_eq!(
        flow(&before),
        vec![
            user("RUN: echo hi"),
            json!({"type":"connecting"}),
            json!({"type":"tool_start","call_id":CALL,"name":"bash"}),
            card(),
        ]
    );
    send(h, json!({"op":"approve","call_id":CALL,"decision":"allow"}));
    let after = turn(h).await;
    let mut want = vec![
        json!({"type":"tool_output","call_id":CALL,"name":"bash","output":"hi\n","is_error":false}),
    ];
    want.extend(reply(&["tool s", "aid: hi"]));
    want.extend([usage5(20, 10), ready()]);
    assert_eq!(flow(&after), want);
}

#[tokio::test]
async fn a_turn_with_a_command_approved_then_a_resume_in_a_new_process() {
    let env = Sandbox::new();
    let engine = engine(&env);
    let mut h = start(
        &engine,
        SESSION,
        &env.cwd,
        fake_codex("codex-0.171.0-app-server-approve.jsonl"),
        false,
    );
    let startup = until(&mut h, "approval_mode").await;
    let started = startup.iter().find(|e| e["type"] == "startup").unwrap();
    assert_eq!(started["thread_id"], THREAD);
    // A new Codex session is named after its thread (the hub re-keys it at this startup).
    assert_eq!(started["session_id"], THREAD);
    approved_turn(&mut h).await;
    send(&h, json!({"op":"user_message","content":"hello there"}));
    let second = turn(&mut h).await;
    let mut want = vec![user("hello there"), json!({"type":"connecting"})];
    want.extend(reply(&["user said: ", "hello there"]));
    want.extend([usage5(10, 5), ready()]);
    assert_eq!(flow(&second), want);
    assert_eq!(close(h).await, None);

    // The session id maps to the thread; reopening resumes it (fake-codex checks the id).
    assert_eq!(engine.thread_for(SESSION), THREAD);
    let mut h = start(
        &engine,
        SESSION,
        &env.cwd,
        fake_codex("codex-0.171.0-app-server-resume.jsonl"),
        true,
    );
    until(&mut h, "approval_mode").await;
    send(&h, json!({"op":"user_message","content":"what did I say?"}));
    let resumed = turn(&mut h).await;
    let mut want = vec![user("what did I say?"), json!({"type":"connecting"})];
    want.extend(reply(&["user said: wh", "at did I say?"]));
    want.extend([usage5(10, 5), ready()]);
    assert_eq!(flow(&resumed), want);
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn a_declined_command() {
    let env = Sandbox::new();
    let mut h = start(
        &engine(&env),
        SESSION,
        &env.cwd,
        fake_codex("codex-0.171.0-app-server-sandboxed-then-decline.jsonl"),
        false,
    );
    until(&mut h, "approval_mode").await;
    send(
        &h,
        json!({"op":"user_message","content":"SANDBOXED: echo hi"}),
    );
    let first = turn(&mut h).await;
    let call = "call_00039718417a0841";
    let mut want = vec![
        user("SANDBOXED: echo hi"),
        json!({"type":"connecting"}),
        json!({"type":"tool_start","call_id":call,"name":"bash"}),
        json!({"type":"tool_output","call_id":call,"name":"bash","output":"hi\n","is_error":false}),
    ];
    want.extend(reply(&["tool s", "aid: hi"]));
    want.extend([usage5(20, 10), ready()]);
    assert_eq!(flow(&first), want);

    send(
        &h,
        json!({"op":"user_message","content":"RUN: touch x.txt && echo hi"}),
    );
    let before = until(&mut h, "approval_request").await;
    let call = before.last().unwrap()["call_id"]
        .as_str()
        .unwrap()
        .to_string();
    send(&h, json!({"op":"approve","call_id":call,"decision":"deny"}));
    let after = turn(&mut h).await;
    assert_eq!(
        flow(&after)[0],
        json!({"type":"tool_output","call_id":call,"name":"bash","output":"declined by the user","is_error":true})
    );
    assert_eq!(flow(&after)[1], json!({"type":"assistant_start"}));
    assert_eq!(flow(&after).last().unwrap(), &ready());
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn an_interrupt_with_a_mode_switch_and_a_queued_message() {
    let env = Sandbox::new();
    let mut h = start(
        &engine(&env),
        SESSION,
        &env.cwd,
        fake_codex("codex-0.171.0-app-server-approve.jsonl"),
        false,
    );
    until(&mut h, "approval_mode").await;
    send(&h, json!({"op":"user_message","content":"RUN: echo hi"}));
    until(&mut h, "approval_request").await;
    // Codex takes the mode per turn: announced now, applied after the turn.
    send(&h, json!({"op":"set_approval_mode","mode":"auto-edit"}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"approval_mode_pending","mode":"auto-edit"})
    );
    send(&h, json!({"op":"user_message","content":"hello there"}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"pending_messages","messages":["hello there"]})
    );
    assert_eq!(
        next(&mut h).await,
        json!({"type":"status","message":"queued: 1"})
    );
    send(&h, json!({"op":"interrupt"}));
    let ended = turn(&mut h).await;
    assert_eq!(
        flow(&ended),
        vec![
            // No tokenUsage before the interrupt: the counters are absent, not zero.
            json!({"type":"usage"}),
            json!({"type":"info","message":"request interrupted"}),
            json!({"type":"status","message":"interrupted"}),
            ready(),
        ]
    );
    assert_eq!(
        next(&mut h).await,
        json!({"type":"approval_mode","mode":"auto-edit"})
    );
    assert_eq!(
        next(&mut h).await,
        json!({"type":"approval_mode_pending","mode":null})
    );
    assert_eq!(
        next(&mut h).await,
        json!({"type":"pending_messages","messages":[]})
    );
    let second = turn(&mut h).await;
    let mut want = vec![user("hello there"), json!({"type":"connecting"})];
    want.extend(reply(&["user said: ", "hello there"]));
    want.extend([usage5(10, 5), ready()]);
    assert_eq!(flow(&second), want);
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn a_crashing_engine_is_reported() {
    let env = Sandbox::new();
    let options = json!({"bin": env!("CARGO_BIN_EXE_fake-codex"), "env": {"FAKE_ENGINE_SCRIPT": "/nonexistent.jsonl"}});
    let mut h = start(&engine(&env), SESSION, &env.cwd, options, false);
    let error = exit(&mut h).await.expect("an error");
    assert!(error.contains("codex exited"), "{error}");
}
