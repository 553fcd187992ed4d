//! The Codex-only ops (MCP servers and sign-ins, fast mode and thinking summaries, subagents,
//! edit hunks) against `fake-codex` replaying hand-written app-server frames in the shapes the
//! Codex 0.171.0 JSON schema gives (`codex app-server generate-json-schema`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use jucode_adapters::AdapterConfig;
use jucode_adapters::codex::CodexEngine;
use serde_json::{Value, json};

const SESSION: &str = "6b1d2e3f-4051-4263-9a74-8b9cad0e1f22";

struct Env {
    dir: tempfile::TempDir,
    cwd: std::path::PathBuf,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    Env { dir, cwd }
}

fn open(env: &Env, script: &str) -> jucode_engine::EngineHandle {
    let engine = CodexEngine::new(AdapterConfig {
        jucode_home: env.dir.path().join("jucode"),
        user_home: env.dir.path().join("home"),
    });
    let options = json!({"bin": env!("CARGO_BIN_EXE_fake-codex"),
        "env": {"FAKE_ENGINE_SCRIPT": fixture(script).display().to_string()}});
    start(&engine, SESSION, &env.cwd, options, false)
}

fn servers(e: &Value) -> Vec<(String, String)> {
    e["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pair(name: &str, state: &str) -> (String, String) {
    (name.to_string(), state.to_string())
}

#[tokio::test]
async fn mcp_servers_sign_in_and_reconnect_and_codex_signs_in_with_a_device_code() {
    let env = env();
    let mut h = open(&env, "codex-mcp-and-login.jsonl");
    until(&mut h, "approval_mode").await;

    send(&h, json!({"op":"mcp_list"}));
    let list = until(&mut h, "mcp_servers").await.pop().unwrap();
    assert_eq!(
        servers(&list),
        vec![pair("docs", "failed"), pair("files", "connected")]
    );
    assert_eq!(list["servers"][0]["error"], "authenticationRequired");
    assert_eq!(
        list["servers"][1]["tools"],
        json!([{"name":"read","description":"Read a file"}])
    );

    // Sign-in: the server's address, then (once Codex says it worked) the new list.
    send(&h, json!({"op":"mcp_login","name":"docs"}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"mcp_login","name":"docs","url":"https://auth.example.test/authorize?client=codex"})
    );
    assert_eq!(
        next(&mut h).await,
        json!({"type":"info","message":"MCP server docs: signed in"})
    );
    let list = next(&mut h).await;
    assert_eq!(
        servers(&list),
        vec![pair("docs", "connected"), pair("files", "connected")]
    );

    send(&h, json!({"op":"mcp_reconnect","name":"files"}));
    let list = next(&mut h).await;
    assert_eq!(
        servers(&list),
        vec![pair("docs", "connected"), pair("files", "failed")]
    );
    assert_eq!(list["servers"][1]["error"], "connection refused");

    send(&h, json!({"op":"command","input":"/login"}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"info","message":"To sign Codex in, open https://auth.example.test/device and enter the code ABCD-1234"})
    );
    assert_eq!(
        next(&mut h).await,
        json!({"type":"info","message":"Codex is signed in to ChatGPT"})
    );

    // Bad input is an error event; so is a server Codex does not know.
    send(&h, json!({"op":"mcp_login"}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"error","message":"mcp_login requires name"})
    );
    send(&h, json!({"op":"mcp_login","name":"nosuch"}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"error","message":"mcp_login nosuch: Codex refused: unknown MCP server nosuch"})
    );
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn fast_mode_and_thinking_summaries_go_into_the_next_turns() {
    let env = env();
    let mut h = open(&env, "codex-fast-thinking.jsonl");
    let opening = until(&mut h, "approval_mode").await;
    let status = opening
        .iter()
        .find(|e| e["type"] == "model_status")
        .unwrap();
    assert_eq!(status["fast"], false);
    assert_eq!(status["thinking_summaries"], true);
    assert_eq!(status["reasoning_effort"], "medium");

    send(&h, json!({"op":"command","input":"/fast"}));
    let status = until(&mut h, "model_status").await.pop().unwrap();
    assert_eq!(
        (&status["fast"], &status["fast_state"]),
        (&json!(true), &json!("on"))
    );
    send(&h, json!({"op":"command","input":"/thinking off"}));
    let status = until(&mut h, "model_status").await.pop().unwrap();
    assert_eq!(status["thinking_summaries"], false);
    assert_eq!(status["fast"], true);
    send(&h, json!({"op":"command","input":"/fast maybe"}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"error","message":"usage: /fast [on|off]"})
    );

    // fake-codex checks serviceTier "priority" and summary "none" in this turn/start …
    send(&h, json!({"op":"user_message","content":"fast one"}));
    assert_eq!(flow(&turn(&mut h).await).last().unwrap(), &ready());
    // … and serviceTier "default" once fast mode is off.
    send(&h, json!({"op":"command","input":"/fast off"}));
    let status = until(&mut h, "model_status").await.pop().unwrap();
    assert_eq!(status["fast"], false);
    send(&h, json!({"op":"user_message","content":"slow again"}));
    let events = turn(&mut h).await;
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "assistant_delta" && e["delta"] == "calm"),
        "{events:#?}"
    );
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn a_subagent_feeds_agent_runs_and_never_the_conversation() {
    let env = env();
    let mut h = open(&env, "codex-subagent.jsonl");
    until(&mut h, "approval_mode").await;
    send(&h, json!({"op":"user_message","content":"spawn a helper"}));
    let events = turn(&mut h).await;
    // The child's command and words stay out of the conversation.
    for e in &events {
        assert_ne!(e["call_id"], "ccall-1", "{e}");
        assert_ne!(e["delta"], "found a.txt", "{e}");
        assert_ne!(e["type"], "tool_start", "{e}");
    }
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "assistant_delta" && e["delta"] == "helper done")
    );
    let lifecycle: Vec<(&Value, &Value)> = events
        .iter()
        .filter(|e| e["type"] == "subagent_lifecycle")
        .map(|e| (&e["status"], &e["label"]))
        .collect();
    assert_eq!(
        lifecycle,
        vec![
            (&json!("started"), &json!("Scout")),
            (&json!("completed"), &json!("Scout"))
        ]
    );
    let runs = events
        .iter()
        .rev()
        .find(|e| e["type"] == "agent_runs")
        .unwrap();
    let agent = &runs["agents"][0];
    assert_eq!(runs["agents"].as_array().unwrap().len(), 1);
    assert_eq!(
        (
            &agent["id"],
            &agent["label"],
            &agent["type"],
            &agent["tool_use_id"]
        ),
        (
            &json!("thr-child"),
            &json!("Scout"),
            &json!("explorer"),
            &json!("call_spawn")
        )
    );
    assert_eq!(
        (&agent["status"], &agent["tool_calls"], &agent["tokens"]),
        (&json!("completed"), &json!(1), &json!(42))
    );

    // The op answers the current runs.
    send(&h, json!({"op":"agent_runs"}));
    assert_eq!(&next(&mut h).await, runs);

    send(
        &h,
        json!({"op":"subagent_transcript","agent_id":"thr-child"}),
    );
    let transcript = next(&mut h).await;
    assert_eq!(transcript["type"], "subagent_transcript");
    assert_eq!(transcript["agent_id"], "thr-child");
    assert_eq!(
        transcript["items"],
        json!([
            {"role":"user","content":"look around"},
            {"role":"tool","call_id":"ccall-1","name":"bash","output":"a.txt\n","is_error":false,"running":false},
            {"role":"assistant","content":"found a.txt"},
        ])
    );
    // A thread this session did not spawn is not read out.
    send(
        &h,
        json!({"op":"subagent_transcript","agent_id":"thr-other"}),
    );
    assert_eq!(
        next(&mut h).await,
        json!({"type":"subagent_transcript","agent_id":"thr-other","error":"no subagent thr-other in this session"})
    );
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn a_file_change_card_shows_its_hunks_and_is_applied_whole() {
    let env = env();
    let mut h = open(&env, "codex-file-change.jsonl");
    until(&mut h, "approval_mode").await;
    send(&h, json!({"op":"user_message","content":"edit a"}));
    let card = until(&mut h, "approval_request").await.pop().unwrap();
    let src = env.cwd.join("src/a.rs").display().to_string();
    let new = env.cwd.join("new.txt").display().to_string();
    assert_eq!(card["call_id"], "call_edit");
    assert_eq!(card["name"], "str_replace");
    assert_eq!(card["summary"], format!("edit {src}, {new}"));
    assert_eq!(
        card["hunks"],
        json!([
            {"id":"h1","file":"src/a.rs","header":"@@ -1,2 +1,2 @@","lines":["-a","+b"," c"]},
            {"id":"h2","file":"src/a.rs","header":"@@ -9,1 +9,1 @@","lines":["-x","+y"]},
            {"id":"h3","file":"new.txt","header":"@@ -0,0 +1,1 @@","lines":["+hello"]},
        ])
    );
    // Codex cannot apply part of a change: the card stays open for a whole answer.
    send(
        &h,
        json!({"op":"approve","call_id":"call_edit","decision":"allow","hunks":["h1"]}),
    );
    assert_eq!(
        next(&mut h).await,
        json!({"type":"error","message":"Codex applies a file change whole: allow it without hunks, or with all of them"})
    );
    send(
        &h,
        json!({"op":"approve","call_id":"call_edit","decision":"allow","hunks":["h1","h2","h3"]}),
    );
    let after = turn(&mut h).await;
    assert_eq!(
        flow(&after)[0],
        json!({"type":"tool_output","call_id":"call_edit","name":"str_replace",
               "output":format!("changed: {src}, {new}"),"is_error":false})
    );
    assert_eq!(close(h).await, None);
}
