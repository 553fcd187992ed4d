//! The real Codex CLI behind the adapter for the Codex-only ops: MCP servers (startup statuses,
//! list, reconnect, sign-in refused for a stdio server), fast mode / thinking summaries reaching
//! the model request, edit hunks, and subagents (live, then from what Codex saved, after a
//! reopen). Against the fake model server on loopback, like `real_clis.rs`.
//!
//! Slow and needing the real CLI, so ignored. Install it and build the MCP test server, then:
//!   bash scripts/install-engines.sh
//!   cargo build -p jucode-mcp-testserver
//!   cargo nextest run -p jucode-fake-engines --run-ignored only -E 'binary(real_codex_extras)'
//! A missing CLI fails the test with a message naming the install script.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod real;

use common::*;
use jucode_adapters::codex::CodexEngine;
use jucode_engine::EngineHandle;
use real::*;
use serde_json::{Value, json};

const SESSION: &str = "7e2f3a4b-5c6d-4e7f-8091-a2b3c4d5e6f7";

/// Starts Codex on `model` with the fake model server as its provider and `extra` appended to
/// config.toml, reopening the session's thread when `resume`.
fn open(world: &World, model: &str, extra: &str, resume: bool) -> EngineHandle {
    let config = format!(
        r#"model = "{model}"
model_provider = "fake"
check_for_update_on_startup = false

{}
[analytics]
enabled = false

[features]
plugins = false
apps = false
{extra}"#,
        world.codex_provider()
    );
    let env = world.codex_env(&config);
    let engine = CodexEngine::new(world.config());
    start(
        &engine,
        SESSION,
        &world.cwd,
        manual(&codex_cli().bin, env),
        resume,
    )
}

/// The entry of the array `list` whose `key` is `value`.
fn entry(list: &Value, key: &str, value: &str) -> Option<Value> {
    list.as_array()
        .unwrap()
        .iter()
        .find(|e| e[key] == value)
        .cloned()
}

/// A model request's body without its long parts, for failure messages.
fn outline(body: &Value) -> Value {
    let mut keys = body.clone();
    keys["input"] = json!("…");
    keys["instructions"] = json!("…");
    keys["tools"] = json!("…");
    keys
}

/// The next event of `kind`, skipping others.
async fn next_of(h: &mut EngineHandle, kind: &str) -> Value {
    until(h, kind).await.pop().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Codex: bash scripts/install-engines.sh"]
async fn codex_mcp_servers_are_listed_reloaded_and_a_stdio_sign_in_is_refused() {
    let world = World::new().await;
    let extra = format!(
        "\n[mcp_servers.echo]\ncommand = \"{}\"\n",
        mcp_echo().display()
    );
    let mut h = open(&world, "fake-model", &extra, false);
    until(&mut h, "approval_mode").await;
    // Unasked: Codex's startup statuses keep the list current until the server is up.
    loop {
        let list = next_of(&mut h, "mcp_servers").await;
        match entry(&list["servers"], "name", "echo") {
            Some(echo) if echo["state"] == "connected" => break,
            Some(echo) => assert_eq!(echo["state"], "connecting", "{list}"),
            None => panic!("no echo server: {list}"),
        }
    }

    send(&h, json!({"op":"mcp_list"}));
    let list = next_of(&mut h, "mcp_servers").await;
    let echo =
        entry(&list["servers"], "name", "echo").unwrap_or_else(|| panic!("no echo server: {list}"));
    let tools: Vec<&str> = echo["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(tools.contains(&"echo"), "{echo}");

    send(&h, json!({"op":"mcp_reconnect","name":"echo"}));
    let again = next_of(&mut h, "mcp_servers").await;
    assert!(
        entry(&again["servers"], "name", "echo").is_some(),
        "{again}"
    );

    // A stdio server has no sign-in: Codex's refusal comes back as an error naming the op.
    send(&h, json!({"op":"mcp_login","name":"echo"}));
    let e = next(&mut h).await;
    assert_eq!(e["type"], "error", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("mcp_login echo:"),
        "{e}"
    );
    assert_eq!(close(h).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Codex: bash scripts/install-engines.sh"]
async fn codex_fast_mode_and_thinking_reach_the_model_request() {
    let world = World::new().await;
    // A model of Codex's own catalog: only those offer the priority ("Fast") tier.
    let mut h = open(&world, "gpt-5.5", "", false);
    until(&mut h, "approval_mode").await;
    send(&h, json!({"op":"command","input":"/fast on"}));
    assert_eq!(next_of(&mut h, "model_status").await["fast"], true);
    send(&h, json!({"op":"command","input":"/thinking off"}));
    assert_eq!(
        next_of(&mut h, "model_status").await["thinking_summaries"],
        false
    );
    send(&h, json!({"op":"user_message","content":"hello there"}));
    let events = turn(&mut h).await;
    assert!(
        events.iter().all(|e| e["type"] != "error"),
        "Codex refused the turn's settings: {events:#?}"
    );
    let request = world.model.model_requests().pop().expect("a model request");
    let keys = outline(&request.body);
    assert_eq!(request.body["service_tier"], "priority", "{keys:#}");
    assert_eq!(request.body["reasoning"].get("summary"), None, "{keys:#}");

    // Both off again: standard speed, summaries asked for.
    send(&h, json!({"op":"command","input":"/fast off"}));
    assert_eq!(next_of(&mut h, "model_status").await["fast"], false);
    send(&h, json!({"op":"command","input":"/thinking on"}));
    assert_eq!(
        next_of(&mut h, "model_status").await["thinking_summaries"],
        true
    );
    send(&h, json!({"op":"user_message","content":"hello again"}));
    let events = turn(&mut h).await;
    assert!(events.iter().all(|e| e["type"] != "error"), "{events:#?}");
    let request = world.model.model_requests().pop().unwrap();
    let keys = outline(&request.body);
    assert_eq!(request.body.get("service_tier"), None, "{keys:#}");
    assert_eq!(request.body["reasoning"]["summary"], "auto", "{keys:#}");
    assert_eq!(close(h).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Codex: bash scripts/install-engines.sh"]
async fn codex_a_patch_card_shows_its_hunks() {
    let world = World::new().await;
    std::fs::write(world.cwd.join("old.txt"), "a\nb\nc\n").unwrap();
    let mut h = open(&world, "fake-model", "", false);
    until(&mut h, "approval_mode").await;
    let patch = [
        "*** Begin Patch",
        "*** Update File: old.txt",
        "@@",
        " a",
        "-b",
        "+B",
        "*** Add File: new.txt",
        "+hello",
        "*** End Patch",
    ]
    .join("\\n");
    send(
        &h,
        json!({"op":"user_message","content":format!("PATCH: {patch}")}),
    );
    let card = next_of(&mut h, "approval_request").await;
    assert_eq!(card["name"], "str_replace", "{card}");
    let mut hunks: Vec<Value> = card["hunks"].as_array().expect("hunks").clone();
    hunks.sort_by_key(|h| h["file"].as_str().unwrap().to_string());
    assert_eq!(hunks.len(), 2, "{card}");
    assert_eq!(
        (&hunks[0]["file"], &hunks[0]["lines"]),
        (&json!("new.txt"), &json!(["+hello"])),
        "{card}"
    );
    assert_eq!(hunks[1]["file"], "old.txt", "{card}");
    let lines = hunks[1]["lines"].as_array().unwrap();
    assert!(
        lines.contains(&json!("-b")) && lines.contains(&json!("+B")),
        "{card}"
    );
    // Approved whole (all its hunks): Codex applies it.
    let all: Vec<Value> = hunks.iter().map(|h| h["id"].clone()).collect();
    send(
        &h,
        json!({"op":"approve","call_id":card["call_id"],"decision":"allow","hunks":all}),
    );
    let events = turn(&mut h).await;
    assert!(events.iter().all(|e| e["type"] != "error"), "{events:#?}");
    assert_eq!(
        std::fs::read_to_string(world.cwd.join("new.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_to_string(world.cwd.join("old.txt")).unwrap(),
        "a\nB\nc\n"
    );
    assert_eq!(close(h).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Codex: bash scripts/install-engines.sh"]
async fn codex_subagents_are_tracked_live_and_listed_again_after_a_reopen() {
    let world = World::new().await;
    let mut h = open(&world, "fake-model", "", false);
    until(&mut h, "approval_mode").await;
    send(&h, json!({"op":"user_message","content":"SPAWN: say hi"}));
    // The parent's turn and the child's may end in either order.
    let (mut ready, mut child) = (false, None);
    while !ready || child.is_none() {
        let e = next(&mut h).await;
        assert_ne!(e["type"], "error", "{e}");
        ready |= e["type"] == "status" && e["message"] == "ready";
        if e["type"] == "subagent_lifecycle" && e["status"] == "completed" {
            child = e["path"].as_str().map(str::to_string);
        }
    }
    let child = child.unwrap();
    send(&h, json!({"op":"agent_runs"}));
    let live = next_of(&mut h, "agent_runs").await;
    let agent = entry(&live["agents"], "id", &child)
        .unwrap_or_else(|| panic!("{child} is not listed: {live}"));
    assert_eq!(agent["status"], "completed", "{live}");
    assert!(agent["tool_use_id"].is_string(), "{live}");
    assert_eq!(close(h).await, None);

    // Reopened by a new process: the child comes from what Codex saved.
    let mut h = open(&world, "fake-model", "", true);
    let saved = next_of(&mut h, "agent_runs").await;
    let again = entry(&saved["agents"], "id", &child)
        .unwrap_or_else(|| panic!("{child} is not listed after the reopen: {saved}"));
    for key in ["label", "status", "tool_use_id", "model"] {
        assert_eq!(again[key], agent[key], "{key}: {saved} vs {live}");
    }
    assert!(again["tokens"].as_u64().unwrap() > 0, "{saved}");
    send(&h, json!({"op":"subagent_transcript","agent_id":child}));
    let transcript = next_of(&mut h, "subagent_transcript").await;
    let items = transcript["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{transcript}"));
    assert!(
        items.contains(&json!({"role":"user","content":"say hi"})),
        "{transcript}"
    );
    assert!(
        items.contains(&json!({"role":"assistant","content":"user said: say hi"})),
        "{transcript}"
    );
    assert_eq!(close(h).await, None);
}
