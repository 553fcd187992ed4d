//! The Claude Code adapter against `fake-claude` replaying recorded Claude Code 2.1.332 frames.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;
use jucode_adapters::claude::munge_cwd;
use serde_json::{Value, json};

const SESSION: &str = "0e6f4b1a-2c3d-4e5f-8a9b-0c1d2e3f4a5b";

fn options(env: &ClaudeSandbox, script: &str, resume_script: Option<&str>) -> Value {
    let mut options = env.fake_claude(script);
    if let Some(r) = resume_script {
        options["env"]["FAKE_ENGINE_SCRIPT_RESUME"] = json!(fixture(r).display().to_string());
    }
    options
}

fn connecting() -> Value {
    json!({"type":"connecting"})
}

fn text_reply(parts: &[&str]) -> Vec<Value> {
    let mut out = vec![connecting()];
    out.extend(reply(parts));
    out
}

const CALL_1: &str = "toolu_0043191212156135";
const CALL_2: &str = "toolu_00481a3cf988b51e";

/// Runs the recording's first turn (`RUN: echo hi`, auto-allowed) and checks its events.
async fn first_turn(h: &mut jucode_engine::EngineHandle) {
    send(h, json!({"op":"user_message","content":"RUN: echo hi"}));
    let events = turn(h).await;
    let mut want = vec![
        user("RUN: echo hi"),
        connecting(),
        json!({"type":"tool_start","call_id":CALL_1,"name":"bash"}),
        json!({"type":"tool_output","call_id":CALL_1,"name":"bash","output":"hi","is_error":false}),
    ];
    want.extend(text_reply(&["tool s", "aid: hi"]));
    want.extend([usage(20, 10), ready()]);
    assert_eq!(flow(&events), want);
    // The first system/init brought the model and the MCP servers.
    let model = events
        .iter()
        .find(|e| e["type"] == "model_status")
        .expect("model_status");
    assert_eq!(model["model"], "claude-opus-5-5");
    assert!(events.iter().any(|e| e["type"] == "mcp_servers"));
}

#[tokio::test]
async fn a_turn_with_a_tool_call_approved() {
    let env = ClaudeSandbox::new();
    let mut h = start(
        &env.engine,
        SESSION,
        &env.cwd,
        options(&env, "claude-code-2.1.332-print-3turns.jsonl", None),
        false,
    );
    let startup = until(&mut h, "command_list").await;
    assert!(
        startup
            .iter()
            .any(|e| e["type"] == "approval_mode" && e["mode"] == "manual")
    );
    let list = startup.last().unwrap();
    assert!(
        list["commands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["command"] == "/deep-research")
    );
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
            connecting(),
            json!({"type":"tool_start","call_id":CALL_2,"name":"bash"}),
            json!({"type":"approval_request","call_id":CALL_2,"name":"bash","summary":"touch hi.txt && echo hi",
                   "subagent_id":null,"hunks":null,"scopes":["session","project","user"]}),
        ]
    );
    send(
        &h,
        json!({"op":"approve","call_id":CALL_2,"decision":"allow"}),
    );
    // A second client answering late changes nothing.
    send(
        &h,
        json!({"op":"approve","call_id":CALL_2,"decision":"deny"}),
    );
    let after = turn(&mut h).await;
    let mut want = vec![
        json!({"type":"tool_output","call_id":CALL_2,"name":"bash","output":"hi","is_error":false}),
    ];
    want.extend(text_reply(&["tool s", "aid: hi"]));
    want.extend([usage(20, 10), ready()]);
    assert_eq!(flow(&after), want);

    send(&h, json!({"op":"user_message","content":"hello there"}));
    let last = turn(&mut h).await;
    let mut want = vec![user("hello there")];
    want.extend(text_reply(&["user said: ", "hello there"]));
    want.extend([usage(10, 5), ready()]);
    assert_eq!(flow(&last), want);

    send(&h, json!({"op":"shutdown"}));
    assert_eq!(exit(&mut h).await, None);
}

#[tokio::test]
async fn a_denied_tool_call() {
    let env = ClaudeSandbox::new();
    let mut h = start(
        &env.engine,
        SESSION,
        &env.cwd,
        options(&env, "claude-code-2.1.332-noprint-deny.jsonl", None),
        false,
    );
    until(&mut h, "command_list").await;
    send(
        &h,
        json!({"op":"user_message","content":"RUN: touch denied.txt && echo hi"}),
    );
    let before = until(&mut h, "approval_request").await;
    let call = before.last().unwrap()["call_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(call, "toolu_0057d4e578ddd63b");
    send(&h, json!({"op":"approve","call_id":call,"decision":"deny"}));
    let after = turn(&mut h).await;
    let mut want = vec![
        json!({"type":"tool_output","call_id":call,"name":"bash","output":"denied by recorder","is_error":true}),
    ];
    want.extend(text_reply(&["tool said: den", "ied by recorder"]));
    want.extend([usage(20, 10), ready()]);
    assert_eq!(flow(&after), want);
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn an_interrupt_while_a_prompt_waits() {
    let env = ClaudeSandbox::new();
    let mut h = start(
        &env.engine,
        SESSION,
        &env.cwd,
        options(&env, "claude-code-2.1.332-print-3turns.jsonl", None),
        false,
    );
    until(&mut h, "command_list").await;
    first_turn(&mut h).await;
    send(
        &h,
        json!({"op":"user_message","content":"RUN: touch hi.txt && echo hi"}),
    );
    until(&mut h, "approval_request").await;
    // A message sent mid-turn waits for the turn to end.
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
            usage(20, 10),
            json!({"type":"info","message":"request interrupted"}),
            json!({"type":"status","message":"interrupted"}),
            ready(),
        ]
    );
    // The queued message starts on its own.
    assert_eq!(
        next(&mut h).await,
        json!({"type":"pending_messages","messages":[]})
    );
    let last = turn(&mut h).await;
    let mut want = vec![user("hello there")];
    want.extend(text_reply(&["user said: ", "hello there"]));
    want.extend([usage(10, 5), ready()]);
    assert_eq!(flow(&last), want);
    assert_eq!(close(h).await, None);
}

fn save_transcript(env: &ClaudeSandbox, session: &str) {
    let dir = env.config_dir.join("projects").join(munge_cwd(&env.cwd));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        fixture("claude-code-2.1.332-transcript-after-resume.jsonl"),
        dir.join(format!("{session}.jsonl")),
    )
    .unwrap();
}

#[tokio::test]
async fn a_resume_in_a_new_process_starts_from_the_saved_conversation() {
    let env = ClaudeSandbox::new();
    save_transcript(&env, SESSION);
    let mut h = start(
        &env.engine,
        SESSION,
        &env.cwd,
        options(&env, "claude-code-2.1.332-resume.jsonl", None),
        true,
    );
    let startup = until(&mut h, "transcript").await;
    let items = &startup.last().unwrap()["items"];
    assert_eq!(items[0], json!({"role":"user","content":"RUN: echo hi"}));
    assert_eq!(items[1], json!({"role":"tool","name":"bash","output":"hi"}));
    assert_eq!(
        items[2],
        json!({"role":"assistant","content":"tool said: hi"})
    );
    until(&mut h, "command_list").await;
    send(&h, json!({"op":"user_message","content":"what did I say?"}));
    let events = turn(&mut h).await;
    let mut want = vec![user("what did I say?")];
    want.extend(text_reply(&["user said: wh", "at did I say?"]));
    want.extend([usage(10, 5), ready()]);
    assert_eq!(flow(&events), want);
    assert_eq!(close(h).await, None);
    // The same conversation is listed for session_history.
    let saved = jucode_adapters::saved_conversations("claude", &env.cwd, Path::new("/nonexistent"));
    assert!(saved.is_empty(), "only the user's own ~/.claude is listed");
}

#[tokio::test]
async fn full_access_restarts_on_the_same_conversation_after_the_turn() {
    let env = ClaudeSandbox::new();
    let mut h = start(
        &env.engine,
        SESSION,
        &env.cwd,
        options(
            &env,
            "claude-code-2.1.332-print-3turns.jsonl",
            Some("claude-code-2.1.332-resume.jsonl"),
        ),
        false,
    );
    until(&mut h, "command_list").await;
    first_turn(&mut h).await;
    send(
        &h,
        json!({"op":"user_message","content":"RUN: touch hi.txt && echo hi"}),
    );
    until(&mut h, "approval_request").await;
    send(&h, json!({"op":"set_approval_mode","mode":"full-auto"}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"approval_mode_pending","mode":"full-access"})
    );
    // The open prompt was answered "allow" (the fake checks it) and the turn goes on.
    let rest = turn(&mut h).await;
    assert_eq!(rest[0]["type"], "tool_output");
    assert_eq!(rest[0]["is_error"], false);
    // After the turn: a new process resumes the conversation (fake-claude then insists on
    // --resume and replays the resume recording).
    assert_eq!(
        next(&mut h).await,
        json!({"type":"approval_mode","mode":"full-access"})
    );
    assert_eq!(
        next(&mut h).await,
        json!({"type":"approval_mode_pending","mode":null})
    );
    send(&h, json!({"op":"user_message","content":"what did I say?"}));
    let events = turn(&mut h).await;
    assert_eq!(flow(&events)[0], user("what did I say?"));
    assert_eq!(flow(&events).last().unwrap(), &ready());
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn a_crashing_engine_is_reported() {
    let env = ClaudeSandbox::new();
    let options = json!({"bin": env!("CARGO_BIN_EXE_fake-claude"),
                         "env": {"FAKE_ENGINE_SCRIPT": "/nonexistent/recording.jsonl"}});
    let mut h = start(&env.engine, SESSION, &env.cwd, options, false);
    let error = exit(&mut h).await.expect("an error");
    assert!(error.contains("claude exited"), "{error}");
    assert!(error.contains("/nonexistent/recording.jsonl"), "{error}");
}

#[tokio::test]
async fn a_missing_binary_names_where_it_looked() {
    let env = ClaudeSandbox::new();
    let options = json!({"env": {"PATH": "/nonexistent", "CLAUDE_BIN": ""}});
    let err = jucode_engine::EngineFactory::start(
        &env.engine,
        jucode_engine::StartSpec {
            session: SESSION.into(),
            cwd: env.cwd.clone(),
            extra_dirs: vec![],
            options: obj(options),
            resume: false,
            agent: None,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("claude was not found"), "{err}");
    assert!(err.contains(".claude/local"), "{err}");
}

#[tokio::test]
async fn ops_other_engines_lack_are_refused() {
    let env = ClaudeSandbox::new();
    let mut h = start(
        &env.engine,
        SESSION,
        &env.cwd,
        options(&env, "claude-code-2.1.332-print-3turns.jsonl", None),
        false,
    );
    until(&mut h, "command_list").await;
    send(&h, json!({"op":"steer"}));
    assert_eq!(
        next(&mut h).await["message"],
        "steer is not available in Claude Code sessions"
    );
    send(&h, json!({"op":"command","input":"/tree"}));
    assert_eq!(
        next(&mut h).await["message"],
        "/tree is only available in jucode sessions"
    );
    send(
        &h,
        json!({"op":"approve","call_id":"nope","decision":"allow"}),
    );
    assert_eq!(
        next(&mut h).await["message"],
        "no open approval request nope"
    );
    send(&h, json!({"op":"approve","decision":"allow"}));
    assert_eq!(next(&mut h).await["message"], "approve requires call_id");
    assert_eq!(close(h).await, None);
}
