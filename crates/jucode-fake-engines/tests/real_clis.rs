//! The real Claude Code, Codex and claude-agent-acp CLIs driven through their adapters against
//! the fake model server (`jucode_testsupport::fake_model`) on loopback: a tool call approved,
//! a denial, an interrupt and a resume in a new process, for each engine; and (`real_agent`)
//! a long-lived agent's session calling an agent tool through the daemon's MCP server; and
//! (`real_messages`) a message queued at a SIGKILL found absent in the CLI's own saved
//! conversation and sent again once.
//!
//! Slow and needing the real CLIs, so ignored. Install them, then run:
//!   bash scripts/install-engines.sh
//!   cargo nextest run -p jucode-fake-engines --run-ignored only -E 'binary(real_clis)'
//! (or `cargo xtask interop`, which does both). The CLIs are taken from `CLAUDE_BIN`,
//! `CODEX_BIN`, `CLAUDE_ACP_BIN` or else `target/peers/npm/node_modules/.bin`; a missing CLI
//! fails its test with a message naming the install script.
//!
//! With `JUCODE_RECORD=1` every engine process runs behind `engine-recorder`, which writes the
//! adapter↔CLI frames to `fixtures/engines/<engine>-<version>-interop-<scenario>.jsonl`.
//!
//! Every CLI gets its own temp HOME, config dir and work dir (under the target dir: Codex
//! refuses to put its helpers under /tmp), never the user's real ~/.claude or ~/.codex.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod real;
mod real_agent;
mod real_messages;

use std::path::PathBuf;

use common::*;
use jucode_adapters::acp::AcpEngine;
use jucode_adapters::claude::ClaudeEngine;
use jucode_adapters::codex::CodexEngine;
use jucode_engine::EngineHandle;
use jucode_testsupport::fake_model::HANG_TEXT;
use real::*;
use serde_json::{Value, json};

fn recording() -> bool {
    std::env::var("JUCODE_RECORD").is_ok_and(|v| v == "1")
}

/// The program to start and the extra variables: the CLI itself, or the recorder in front of
/// it writing `fixtures/engines/<label>-interop-<scenario>.jsonl`.
fn program(cli: &Cli, scenario: &str, env: &mut Value) -> PathBuf {
    if !recording() {
        return cli.bin.clone();
    }
    let out = root()
        .join("fixtures/engines")
        .join(format!("{}-interop-{scenario}.jsonl", cli.label));
    env["RECORD_TARGET"] = json!(cli.bin.display().to_string());
    env["RECORD_OUT"] = json!(out.display().to_string());
    PathBuf::from(env!("CARGO_BIN_EXE_engine-recorder"))
}

/// Codex's config.toml: the fake as the provider, nothing sent elsewhere.
fn codex_config(world: &World) -> String {
    format!(
        r#"model = "fake-model"
model_provider = "fake"
approval_policy = "on-request"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false

{}stream_idle_timeout_ms = 120000

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
plugins = false
remote_plugin = false
apps = false
"#,
        world.codex_provider()
    )
}

/// The assistant text of a turn's events.
fn said(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "assistant_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

fn say(h: &EngineHandle, text: &str) {
    send(h, json!({"op":"user_message","content":text}));
}

/// A plain turn; returns the assistant's text.
async fn plain_turn(h: &mut EngineHandle, text: &str) -> String {
    say(h, text);
    let events = turn(h).await;
    assert!(
        of_type(&events, "error").is_empty(),
        "errors in a plain turn: {events:#?}"
    );
    said(&events)
}

/// `RUN: touch <file> && echo hi` answered with `decision`; returns the card and the rest.
async fn tool_turn(h: &mut EngineHandle, file: &str, decision: &str) -> (Value, Vec<Value>) {
    say(h, &format!("RUN: touch {file} && echo hi"));
    let before = until(h, "approval_request").await;
    let card = before.last().unwrap().clone();
    assert_eq!(card["name"], "bash", "{card}");
    assert!(
        card["summary"]
            .as_str()
            .unwrap_or("")
            .contains(&format!("touch {file}")),
        "{card}"
    );
    let call = card["call_id"].as_str().unwrap().to_string();
    assert!(
        before
            .iter()
            .any(|e| e["type"] == "tool_start" && e["call_id"] == call.as_str()),
        "no tool_start before the card: {before:#?}"
    );
    send(
        h,
        json!({"op":"approve","call_id":call,"decision":decision}),
    );
    (card, turn(h).await)
}

async fn approved(h: &mut EngineHandle, world: &World) {
    let (card, after) = tool_turn(h, "hi.txt", "allow").await;
    let outputs = of_type(&after, "tool_output");
    assert_eq!(outputs.len(), 1, "{after:#?}");
    assert_eq!(outputs[0]["call_id"], card["call_id"]);
    assert_eq!(outputs[0]["is_error"], false, "{after:#?}");
    assert_eq!(outputs[0]["output"].as_str().unwrap().trim(), "hi");
    assert_eq!(said(&after), "tool said: hi");
    assert!(
        world.cwd.join("hi.txt").exists(),
        "the approved command ran"
    );
    assert_eq!(after.last().unwrap(), &ready());
}

async fn denied(h: &mut EngineHandle, world: &World) {
    let (card, after) = tool_turn(h, "denied.txt", "deny").await;
    let outputs = of_type(&after, "tool_output");
    assert_eq!(outputs.len(), 1, "{after:#?}");
    assert_eq!(outputs[0]["call_id"], card["call_id"]);
    assert_eq!(outputs[0]["is_error"], true, "{after:#?}");
    // The model was told the call did not run, and the turn went on.
    assert!(said(&after).starts_with("tool said: "), "{after:#?}");
    assert!(
        !world.cwd.join("denied.txt").exists(),
        "the denied command must not run"
    );
    assert_eq!(after.last().unwrap(), &ready());
}

async fn interrupted(h: &mut EngineHandle) {
    say(h, "HANG: take your time");
    // The model has started answering and its stream is stalled: the turn is mid-stream.
    let mut so_far = String::new();
    while so_far != HANG_TEXT {
        let e = next(h).await;
        if e["type"] == "assistant_delta" {
            so_far.push_str(e["delta"].as_str().unwrap());
        }
        assert_ne!(e, ready(), "the hanging turn ended by itself");
    }
    send(h, json!({"op":"interrupt"}));
    let ended = turn(h).await;
    assert!(
        ended
            .iter()
            .any(|e| e["type"] == "status" && e["message"] == "interrupted"),
        "{ended:#?}"
    );
    // The session goes on.
    assert_eq!(
        plain_turn(h, "after the interrupt").await,
        "user said: after the interrupt"
    );
}

/// The last model request's body holds `needle` (the resumed conversation was sent).
fn last_request_mentions(world: &World, needle: &str) -> bool {
    world
        .model
        .model_requests()
        .last()
        .is_some_and(|r| r.body.to_string().contains(needle))
}

// ---- Claude Code

const CLAUDE_SESSION: &str = "7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f";

fn claude_start(world: &World, cli: &Cli, scenario: &str, resume: bool) -> EngineHandle {
    let mut env = world.anthropic_env();
    let bin = program(cli, scenario, &mut env);
    start(
        &ClaudeEngine::new(world.config()),
        CLAUDE_SESSION,
        &world.cwd,
        manual(&bin, env),
        resume,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Claude Code: bash scripts/install-engines.sh"]
async fn claude_a_tool_call_approved() {
    let cli = claude_cli();
    let world = World::new().await;
    let mut h = claude_start(&world, &cli, "approve", false);
    approved(&mut h, &world).await;
    assert_eq!(close(h).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Claude Code: bash scripts/install-engines.sh"]
async fn claude_a_tool_call_denied() {
    let cli = claude_cli();
    let world = World::new().await;
    let mut h = claude_start(&world, &cli, "deny", false);
    denied(&mut h, &world).await;
    assert_eq!(close(h).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Claude Code: bash scripts/install-engines.sh"]
async fn claude_an_interrupt_mid_stream() {
    let cli = claude_cli();
    let world = World::new().await;
    let mut h = claude_start(&world, &cli, "interrupt", false);
    interrupted(&mut h).await;
    assert_eq!(close(h).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Claude Code: bash scripts/install-engines.sh"]
async fn claude_a_resume_in_a_new_process() {
    let cli = claude_cli();
    let world = World::new().await;
    let mut h = claude_start(&world, &cli, "resume-first", false);
    let startup = until(&mut h, "startup").await;
    assert_eq!(startup.last().unwrap()["session_id"], CLAUDE_SESSION);
    assert_eq!(
        plain_turn(&mut h, "remember pineapple").await,
        "user said: remember pineapple"
    );
    assert_eq!(close(h).await, None);

    let mut h = claude_start(&world, &cli, "resume", true);
    assert_eq!(
        plain_turn(&mut h, "what did I say?").await,
        "user said: what did I say?"
    );
    assert!(
        last_request_mentions(&world, "remember pineapple"),
        "the resumed process did not send the earlier conversation"
    );
    assert_eq!(close(h).await, None);
}

// ---- Codex

const CODEX_SESSION: &str = "3e2d1c0b-9a8f-4e7d-8c6b-5a4f3e2d1c0b";

fn codex_start(
    world: &World,
    engine: &CodexEngine,
    cli: &Cli,
    scenario: &str,
    resume: bool,
) -> EngineHandle {
    let mut env = world.codex_env(&codex_config(world));
    let bin = program(cli, scenario, &mut env);
    start(engine, CODEX_SESSION, &world.cwd, manual(&bin, env), resume)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Codex: bash scripts/install-engines.sh"]
async fn codex_a_tool_call_approved() {
    let cli = codex_cli();
    let world = World::new().await;
    let engine = CodexEngine::new(world.config());
    let mut h = codex_start(&world, &engine, &cli, "approve", false);
    approved(&mut h, &world).await;
    assert_eq!(close(h).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Codex: bash scripts/install-engines.sh"]
async fn codex_a_tool_call_denied() {
    let cli = codex_cli();
    let world = World::new().await;
    let engine = CodexEngine::new(world.config());
    let mut h = codex_start(&world, &engine, &cli, "deny", false);
    denied(&mut h, &world).await;
    assert_eq!(close(h).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Codex: bash scripts/install-engines.sh"]
async fn codex_an_interrupt_mid_stream() {
    let cli = codex_cli();
    let world = World::new().await;
    let engine = CodexEngine::new(world.config());
    let mut h = codex_start(&world, &engine, &cli, "interrupt", false);
    interrupted(&mut h).await;
    assert_eq!(close(h).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Codex: bash scripts/install-engines.sh"]
async fn codex_a_resume_in_a_new_process() {
    let cli = codex_cli();
    let world = World::new().await;
    let engine = CodexEngine::new(world.config());
    let mut h = codex_start(&world, &engine, &cli, "resume-first", false);
    assert_eq!(
        plain_turn(&mut h, "remember pineapple").await,
        "user said: remember pineapple"
    );
    assert_eq!(close(h).await, None);
    let thread = engine.thread_for(CODEX_SESSION);
    assert_ne!(
        thread, CODEX_SESSION,
        "the session was not mapped to a thread"
    );

    // A new adapter over the same jucode home, as after a daemon restart.
    let engine = CodexEngine::new(world.config());
    let mut h = codex_start(&world, &engine, &cli, "resume", true);
    let startup = until(&mut h, "approval_mode").await;
    let started = startup.iter().find(|e| e["type"] == "startup").unwrap();
    assert_eq!(started["thread_id"], thread.as_str());
    assert_eq!(
        plain_turn(&mut h, "what did I say?").await,
        "user said: what did I say?"
    );
    assert!(
        last_request_mentions(&world, "remember pineapple"),
        "the resumed thread did not send the earlier conversation"
    );
    assert_eq!(close(h).await, None);
}

// ---- claude-agent-acp (ACP)

const ACP_SESSION: &str = "1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9";

fn acp_start(world: &World, cli: &Cli, scenario: &str) -> EngineHandle {
    let mut env = world.anthropic_env();
    // CI runs as root: claude-agent-acp then fails `session/new` ("--dangerously-skip-permissions
    // cannot be used with root") unless told it runs in a sandbox.
    env["IS_SANDBOX"] = json!("1");
    let bin = program(cli, scenario, &mut env);
    start(
        &AcpEngine::new(world.config()),
        ACP_SESSION,
        &world.cwd,
        json!({"command": bin.display().to_string(), "env": env, "approval_mode": "manual"}),
        false,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real claude-agent-acp: bash scripts/install-engines.sh"]
async fn acp_a_tool_call_approved() {
    let cli = acp_cli();
    let world = World::new().await;
    let mut h = acp_start(&world, &cli, "approve");
    approved(&mut h, &world).await;
    assert_eq!(close(h).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real claude-agent-acp: bash scripts/install-engines.sh"]
async fn acp_a_tool_call_denied() {
    let cli = acp_cli();
    let world = World::new().await;
    let mut h = acp_start(&world, &cli, "deny");
    denied(&mut h, &world).await;
    assert_eq!(close(h).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real claude-agent-acp: bash scripts/install-engines.sh"]
async fn acp_an_interrupt_mid_stream() {
    let cli = acp_cli();
    let world = World::new().await;
    let mut h = acp_start(&world, &cli, "interrupt");
    interrupted(&mut h).await;
    assert_eq!(close(h).await, None);
}

/// ACP reopens a session as a new conversation under the same session id (DECISIONS.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real claude-agent-acp: bash scripts/install-engines.sh"]
async fn acp_a_reopen_in_a_new_process() {
    let cli = acp_cli();
    let world = World::new().await;
    let mut h = acp_start(&world, &cli, "reopen-first");
    assert_eq!(
        plain_turn(&mut h, "remember pineapple").await,
        "user said: remember pineapple"
    );
    assert_eq!(close(h).await, None);
    let mut h = acp_start(&world, &cli, "reopen");
    assert_eq!(
        plain_turn(&mut h, "what did I say?").await,
        "user said: what did I say?"
    );
    assert!(
        !last_request_mentions(&world, "remember pineapple"),
        "a reopened ACP session is a new conversation"
    );
    assert_eq!(close(h).await, None);
}
