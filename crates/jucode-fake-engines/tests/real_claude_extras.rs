//! The Claude-only ops against the real Claude Code (the pinned version) through its adapter,
//! with the fake model server on loopback: the control requests they send must be ones the
//! real CLI takes, and its answers must come out as the serve-v2 events.
//!
//! Slow and needing the real CLI, so ignored. Install it, then run:
//!   bash scripts/install-engines.sh
//!   cargo nextest run -p jucode-fake-engines --run-ignored only -E 'binary(real_claude_extras)'
//! The CLI is `CLAUDE_BIN` or else `target/peers/npm/node_modules/.bin/claude`; when it is
//! missing the tests fail naming the install script.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod real;

use common::*;
use jucode_adapters::claude::ClaudeEngine;
use jucode_engine::EngineHandle;
use real::*;
use serde_json::{Value, json};

const SESSION: &str = "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a";

/// The start options of the real Claude Code in `world` with `extra` on top.
fn options(world: &World, extra: Value) -> Value {
    merged(manual(&claude_cli().bin, world.anthropic_env()), extra)
}

fn open(world: &World, options: Value, resume: bool) -> EngineHandle {
    let engine = ClaudeEngine::new(world.config());
    start(&engine, SESSION, &world.cwd, options, resume)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Claude Code: bash scripts/install-engines.sh"]
async fn claude_only_ops_against_the_real_cli() {
    let world = World::new().await;
    let mut h = open(&world, options(&world, json!({})), false);
    until(&mut h, "command_list").await;

    send(&h, json!({"op":"task_output","task_id":"b0gus1"}));
    let out = answer(&mut h, "task_output").await;
    assert_eq!(out["task_id"], "b0gus1");
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .contains("no shell or Monitor task"),
        "{out}"
    );

    send(&h, json!({"op":"permission_rules"}));
    let rules = answer(&mut h, "permission_rules").await;
    assert!(
        rules["rules"].is_array() && rules["directories"].is_array(),
        "{rules}"
    );

    send(&h, json!({"op":"context_usage"}));
    let usage = answer(&mut h, "context_breakdown").await;
    assert!(usage["max_tokens"].as_u64().unwrap() > 0, "{usage}");
    assert!(
        usage["categories"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == "free_space"),
        "{usage}"
    );

    send(&h, json!({"op":"command","input":"/effort high"}));
    let status = answer(&mut h, "model_status").await;
    assert_eq!(status["reasoning_effort"], "high");
    send(&h, json!({"op":"command","input":"/effort ultracode on"}));
    let status = answer(&mut h, "model_status").await;
    assert_eq!(status["ultracode"], true);
    assert_eq!(status["ultracode_available"], true);
    send(&h, json!({"op":"command","input":"/thinking off"}));
    let status = answer(&mut h, "model_status").await;
    assert_eq!(status["thinking_summaries"], false);
    send(&h, json!({"op":"command","input":"/fast on"}));
    let status = answer(&mut h, "model_status").await;
    assert!(status["fast_state"].is_string(), "{status}");

    send(&h, json!({"op":"rename","title":"Real rename"}));
    let title = answer(&mut h, "session_title").await;
    assert_eq!(title["title"], "Real rename");

    send(&h, json!({"op":"agent_runs"}));
    let runs = answer(&mut h, "agent_runs").await;
    assert_eq!(runs["agents"], json!([]));
    send(&h, json!({"op":"subagent_transcript","agent_id":"nope"}));
    let t = answer(&mut h, "subagent_transcript").await;
    assert!(t["error"].is_string(), "{t}");

    send(
        &h,
        json!({"op":"command","input":"/btw what is the answer?"}),
    );
    let side = answer(&mut h, "side_answer").await;
    assert_eq!(side["question"], "what is the answer?");
    assert!(
        side["answer"].is_string() || side["error"].is_string(),
        "{side}"
    );
    assert_eq!(close(h).await, None);
}

/// The first `model_status` with the CLI's own settings (`ultracode_available` known), failing
/// on an error event before it.
async fn confirmed_status(h: &mut EngineHandle) -> Value {
    loop {
        let e = next(h).await;
        assert_ne!(e["type"], "error", "{e}");
        if e["type"] == "model_status" && e["ultracode_available"].is_boolean() {
            return e;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Claude Code: bash scripts/install-engines.sh"]
async fn claude_start_options_survive_a_full_access_restart() {
    let world = World::new().await;
    let start = json!({"ultracode": true, "thinking": false});
    let mut h = open(&world, options(&world, start), false);
    let status = confirmed_status(&mut h).await;
    assert_eq!(status["ultracode"], true);
    assert_eq!(status["thinking_summaries"], false);
    send(&h, json!({"op":"set_approval_mode","mode":"full-access"}));
    let mode = answer(&mut h, "approval_mode").await;
    assert_eq!(mode["mode"], "full-access");
    // The new process is told the session's settings again and confirms them.
    send(&h, json!({"op":"command","input":"/effort"}));
    let status = confirmed_status(&mut h).await;
    assert_eq!(status["ultracode"], true);
    assert_eq!(status["thinking_summaries"], false);
    assert_eq!(close(h).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Claude Code: bash scripts/install-engines.sh"]
async fn claude_a_subagent_is_traced_and_its_transcript_read() {
    let world = World::new().await;
    let mut h = open(&world, options(&world, json!({})), false);
    until(&mut h, "command_list").await;
    // The fake model answers `AGENT: <prompt>` with an Agent call; Claude Code runs it in the
    // background and its subagent answers `user said: say hi`.
    send(&h, json!({"op":"user_message","content":"AGENT: say hi"}));
    let (mut ready, mut done) = (false, None);
    let mut lifecycle = Vec::new();
    let mut subagent_calls = Vec::new();
    while !(ready && done.is_some()) {
        let e = next(&mut h).await;
        assert_ne!(e["type"], "error", "{e}");
        if e["type"] == "subagent_lifecycle" {
            lifecycle.push(e.clone());
        }
        if e["type"] == "tool_start" && e.get("subagent").is_some() {
            subagent_calls.push(e.clone());
        }
        if e["type"] == "approval_request" {
            send(
                &h,
                json!({"op":"approve","call_id":e["call_id"],"decision":"allow"}),
            );
        }
        ready |= e["type"] == "status" && e["message"] == "ready";
        if e["type"] == "agent_runs" && e["agents"][0]["tokens"].as_u64().unwrap_or(0) > 0 {
            done = Some(e);
        }
    }
    let runs = done.unwrap();
    let agent = &runs["agents"][0];
    assert_eq!(agent["label"], "Fake subagent", "{runs}");
    assert_eq!(agent["type"], "general-purpose");
    assert_eq!(agent["status"], "completed");
    assert_eq!(agent["model"], "claude-opus-5-5");
    assert!(agent["tool_use_id"].as_str().unwrap().starts_with("toolu_"));
    let id = agent["id"].as_str().unwrap().to_string();
    assert_ne!(Some(id.as_str()), agent["tool_use_id"].as_str());
    // Its lifecycle, by the same id: started, then completed.
    let states: Vec<(&str, &str)> = lifecycle
        .iter()
        .map(|e| (e["path"].as_str().unwrap(), e["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [(id.as_str(), "started"), (id.as_str(), "completed")],
        "{lifecycle:?}"
    );
    assert_eq!(lifecycle[0]["label"], "Fake subagent");
    // Calls the subagent made (if the CLI forwarded any) name it by that id.
    for call in &subagent_calls {
        assert_eq!(call["subagent"], id.as_str(), "{call}");
    }

    // The saved file is the same run, not a second one.
    send(&h, json!({"op":"agent_runs"}));
    let again = answer(&mut h, "agent_runs").await;
    assert_eq!(again["agents"].as_array().unwrap().len(), 1, "{again}");
    assert_eq!(close(h).await, None);

    // A new process lists it from what Claude Code saved.
    let mut options = options(&world, json!({}));
    options["approval_mode"] = json!("manual");
    let mut h = open(&world, options, true);
    let saved = answer(&mut h, "agent_runs").await;
    let agent = &saved["agents"][0];
    assert_eq!(agent["id"], id.as_str());
    assert_eq!(agent["label"], "Fake subagent");
    assert_eq!(agent["type"], "general-purpose");
    assert_eq!(agent["model"], "claude-opus-5-5");
    // Claude Code writes transcripts in batches; after its exit the file is complete.
    send(&h, json!({"op":"subagent_transcript","agent_id":id}));
    let t = answer(&mut h, "subagent_transcript").await;
    let items = t["items"].as_array().unwrap();
    assert_eq!(
        items.first().unwrap(),
        &json!({"role":"user","content":"say hi"}),
        "{t}"
    );
    assert!(
        items.contains(&json!({"role":"assistant","content":"user said: say hi"})),
        "{t}"
    );
    assert_eq!(close(h).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Claude Code: bash scripts/install-engines.sh"]
async fn claude_an_mcp_servers_question_is_an_approval_card() {
    let world = World::new().await;
    // A user-scope MCP server: the test server, whose `ask` tool elicits a form.
    let config = world.claude_config();
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join(".claude.json"),
        json!({"mcpServers": {"echo": {"type": "stdio", "command": mcp_echo().display().to_string(), "args": ["--ask"]}}})
            .to_string(),
    )
    .unwrap();
    // Offer MCP tools to the model directly rather than behind ToolSearch.
    let mut options = options(&world, json!({}));
    options["env"]["ENABLE_TOOL_SEARCH"] = json!("false");
    let mut h = open(&world, options, false);
    until(&mut h, "command_list").await;
    send(
        &h,
        json!({"op":"user_message","content":"CALL: mcp__echo__ask {\"question\":\"Which colour?\"}"}),
    );
    let mut asked = None;
    let mut events = Vec::new();
    loop {
        let e = next(&mut h).await;
        assert_ne!(e["type"], "error", "{e}");
        events.push(e.clone());
        if e["type"] == "approval_request" && e["name"] == "mcp_elicitation" {
            asked = Some(e.clone());
            send(
                &h,
                json!({"op":"approve","call_id":e["call_id"],"decision":"allow","answers":{"answer":"blue"}}),
            );
        } else if e["type"] == "approval_request" {
            // The MCP tool call itself.
            send(
                &h,
                json!({"op":"approve","call_id":e["call_id"],"decision":"allow"}),
            );
        }
        if e["type"] == "status" && e["message"] == "ready" {
            break;
        }
    }
    let asked = asked.unwrap_or_else(|| panic!("no elicitation card in {events:?}"));
    assert_eq!(asked["summary"], "Which colour?", "{asked}");
    assert_eq!(asked["server"], "echo");
    assert_eq!(asked["mode"], "form");
    assert_eq!(asked["questions"][0]["id"], "answer");
    assert_eq!(asked["questions"][0]["required"], true);
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool_output" && e["output"] == "answered: blue"),
        "{events:?}"
    );
    // Prompt suggestions are on: Claude Code asks the model for one after the turn.
    let suggestion = answer(&mut h, "prompt_suggestion").await;
    assert_eq!(
        suggestion,
        json!({"type":"prompt_suggestion","text":jucode_testsupport::fake_model::SUGGESTION})
    );
    assert_eq!(close(h).await, None);
}

/// One turn of `message`, answering every approval card with the `approve` fields `decide`
/// gives; the cards it showed and the turn's events.
async fn turn_deciding(
    h: &mut EngineHandle,
    message: String,
    decide: impl Fn(&Value) -> Value,
) -> (Vec<Value>, Vec<Value>) {
    send(h, json!({"op":"user_message","content":message}));
    let (mut cards, mut events) = (Vec::new(), Vec::new());
    loop {
        let e = next(h).await;
        assert_ne!(e["type"], "error", "{e}");
        events.push(e.clone());
        let ready = e["type"] == "status" && e["message"] == "ready";
        if e["type"] == "approval_request" {
            send(
                h,
                merged(json!({"op":"approve","call_id":e["call_id"]}), decide(&e)),
            );
            cards.push(e);
        }
        if ready {
            return (cards, events);
        }
    }
}

fn allow(_: &Value) -> Value {
    json!({"decision": "allow"})
}

fn deny(_: &Value) -> Value {
    json!({"decision": "deny"})
}

/// The cards of `tool` (`str_replace`, `write`) among `cards`.
fn cards_of<'a>(cards: &'a [Value], name: &str) -> Vec<&'a Value> {
    cards.iter().filter(|c| c["name"] == name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Claude Code: bash scripts/install-engines.sh"]
async fn claude_edit_and_write_cards_carry_the_hunks_the_cli_applies() {
    let world = World::new().await;
    let file = world.cwd.join("notes.txt");
    let before: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&file, &before).unwrap();
    let mut h = open(&world, options(&world, json!({})), false);
    until(&mut h, "command_list").await;

    // Claude Code edits only a file it has read in this session.
    let read = json!({"file_path": file});
    let (_, events) = turn_deciding(&mut h, format!("CALL: Read {read}"), allow).await;
    assert!(
        events.iter().any(|e| e["type"] == "tool_output"),
        "{events:?}"
    );

    let edit = json!({"file_path": file, "old_string": "line 5", "new_string": "line five"});
    let hunk = json!([{
        "id": "h1", "file": "notes.txt", "header": "@@ -2,7 +2,7 @@",
        "lines": [" line 2", " line 3", " line 4", "-line 5", "+line five",
                  " line 6", " line 7", " line 8"],
    }]);
    // Denied: the file stays as it was.
    let (cards, events) = turn_deciding(&mut h, format!("CALL: Edit {edit}"), deny).await;
    let shown = cards_of(&cards, "str_replace");
    assert_eq!(shown.len(), 1, "{events:?}");
    assert_eq!(shown[0]["hunks"], hunk, "{}", shown[0]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
    // Allowed: the same card, and the CLI writes the edit the hunks showed.
    let (cards, events) = turn_deciding(&mut h, format!("CALL: Edit {edit}"), allow).await;
    let shown = cards_of(&cards, "str_replace");
    assert_eq!(shown.len(), 1, "{events:?}");
    assert_eq!(shown[0]["hunks"], hunk, "{}", shown[0]);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        before.replace("line 5\n", "line five\n")
    );

    // A new file: all `+` lines; denied it is not created, allowed it is.
    let new = world.cwd.join("new.txt");
    let write = json!({"file_path": new, "content": "alpha\nbeta\n"});
    let created = json!([{
        "id": "h1", "file": "new.txt", "header": "@@ -0,0 +1,2 @@", "lines": ["+alpha", "+beta"],
    }]);
    let (cards, events) = turn_deciding(&mut h, format!("CALL: Write {write}"), deny).await;
    let shown = cards_of(&cards, "write");
    assert_eq!(shown.len(), 1, "{events:?}");
    assert_eq!(shown[0]["hunks"], created, "{}", shown[0]);
    assert!(!new.exists());
    let (cards, events) = turn_deciding(&mut h, format!("CALL: Write {write}"), allow).await;
    let shown = cards_of(&cards, "write");
    assert_eq!(shown.len(), 1, "{events:?}");
    assert_eq!(shown[0]["hunks"], created, "{}", shown[0]);
    assert_eq!(std::fs::read_to_string(&new).unwrap(), "alpha\nbeta\n");

    // Writing over a file it has read: the hunks are the change to what is on disk.
    let edited = std::fs::read_to_string(&file).unwrap();
    let content = edited.replace("line 9\n", "line nine\n");
    let write = json!({"file_path": file, "content": content});
    let (cards, events) = turn_deciding(&mut h, format!("CALL: Write {write}"), allow).await;
    let shown = cards_of(&cards, "write");
    assert_eq!(shown.len(), 1, "{events:?}");
    assert_eq!(
        shown[0]["hunks"],
        json!([{
            "id": "h1", "file": "notes.txt", "header": "@@ -6,5 +6,5 @@",
            "lines": [" line 6", " line 7", " line 8", "-line 9", "+line nine", " line 10"],
        }]),
        "{}",
        shown[0]
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), content);

    // Two changes far apart are two hunks; allowing only the second makes only it.
    let before = std::fs::read_to_string(&file).unwrap();
    let both = before
        .replace("line 2\n", "line two\n")
        .replace("line 10\n", "line ten\n");
    let write = json!({"file_path": file, "content": both});
    let only = json!({"decision": "allow", "hunks": ["h2"]});
    let (cards, events) =
        turn_deciding(&mut h, format!("CALL: Write {write}"), |_| only.clone()).await;
    let shown = cards_of(&cards, "write");
    assert_eq!(shown.len(), 1, "{events:?}");
    let ids: Vec<&Value> = shown[0]["hunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["id"])
        .collect();
    assert_eq!(ids, ["h1", "h2"], "{}", shown[0]);
    let partly = before.replace("line 10\n", "line ten\n");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), partly);

    // A replace-all edit of two distant lines, only the first allowed.
    let marked = partly
        .replace("line 1\n", "mark\n")
        .replace("line ten\n", "mark\n");
    std::fs::write(&file, &marked).unwrap();
    let (_, events) = turn_deciding(&mut h, format!("CALL: Read {read}"), allow).await;
    assert!(
        events.iter().any(|e| e["type"] == "tool_output"),
        "{events:?}"
    );
    let edit =
        json!({"file_path": file, "old_string": "mark", "new_string": "MARK", "replace_all": true});
    let first = json!({"decision": "allow", "hunks": ["h1"]});
    let (cards, events) =
        turn_deciding(&mut h, format!("CALL: Edit {edit}"), |_| first.clone()).await;
    let shown = cards_of(&cards, "str_replace");
    assert_eq!(shown.len(), 1, "{events:?}");
    assert_eq!(
        shown[0]["hunks"].as_array().unwrap().len(),
        2,
        "{}",
        shown[0]
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        marked.replacen("mark\n", "MARK\n", 1)
    );
    assert_eq!(close(h).await, None);
}
