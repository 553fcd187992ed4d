//! The Codex-only ops (MCP servers and sign-ins, fast mode and thinking summaries, subagents,
//! edit hunks) against `fake-codex` replaying hand-written app-server frames in the shapes the
//! Codex 0.171.0 JSON schema gives (`codex app-server generate-json-schema`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use jucode_adapters::codex::CodexEngine;
use serde_json::{Value, json};

const SESSION: &str = "6b1d2e3f-4051-4263-9a74-8b9cad0e1f22";

fn open(env: &Sandbox, script: &str) -> jucode_engine::EngineHandle {
    let engine = CodexEngine::new(env.config());
    start(&engine, SESSION, &env.cwd, fake_codex(script), false)
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
    let env = Sandbox::new();
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
    let env = Sandbox::new();
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
    let env = Sandbox::new();
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
    let env = Sandbox::new();
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
    // Shown again: the daemon dropped it from its snapshot when the answer went out.
    assert_eq!(next(&mut h).await, card);
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

const PARENT: &str = "019ad0c2-1f00-7000-8000-000000000001";
const CHILD: &str = "019ad0c2-2000-7000-8000-000000000002";
const GRANDCHILD: &str = "019ad0c2-2100-7000-8000-000000000003";
const STRANGER: &str = "019ad0c2-2200-7000-8000-000000000004";

/// Writes a rollout in the shapes Codex 0.171.0 saves (`$CODEX_HOME/sessions/Y/M/D/…`).
fn rollout(codex_home: &std::path::Path, id: &str, lines: &[Value]) {
    let dir = codex_home.join("sessions/2026/11/29");
    std::fs::create_dir_all(&dir).unwrap();
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(
        dir.join(format!("rollout-2026-11-29T10-00-00-{id}.jsonl")),
        text.join("\n") + "\n",
    )
    .unwrap();
}

fn spawned(id: &str, parent: &str, nickname: &str, role: Value) -> Value {
    json!({"timestamp":"2026-11-29T10:00:00.000Z","type":"session_meta","payload":{
        "session_id":PARENT,"id":id,"parent_thread_id":parent,"cwd":"/w","originator":"codex_app_server",
        "cli_version":"0.171.0","source":{"subagent":{"thread_spawn":{"parent_thread_id":parent,
        "depth":1,"agent_path":null,"agent_nickname":nickname,"agent_role":role}}},
        "thread_source":"subagent","agent_nickname":nickname,"model_provider":"openai"}})
}

fn event_msg(payload: Value) -> Value {
    json!({"timestamp":"2026-11-29T10:00:01.000Z","type":"event_msg","payload":payload})
}

#[tokio::test]
async fn a_reopened_session_lists_the_subagents_codex_saved_and_reads_them_out() {
    let env = Sandbox::new();
    let home = env.dir.path().join("codex-home");
    rollout(
        &home,
        PARENT,
        &[
            json!({"type":"session_meta","payload":{"id":PARENT,"session_id":PARENT,"source":"appServer","cwd":"/w"}}),
            json!({"type":"response_item","payload":{"type":"function_call","name":"spawn_agent",
                "namespace":"multi_agent_v1","call_id":"call_spawn","arguments":"{\"message\":\"look around\"}"}}),
            json!({"type":"response_item","payload":{"type":"function_call_output","call_id":"call_spawn",
                "output":format!("{{\"agent_id\":\"{CHILD}\",\"nickname\":\"Ada\"}}")}}),
        ],
    );
    rollout(
        &home,
        CHILD,
        &[
            spawned(CHILD, PARENT, "Ada", json!("explorer")),
            event_msg(json!({"type":"task_started","turn_id":"t1"})),
            json!({"type":"turn_context","payload":{"turn_id":"t1","cwd":"/w","model":"gpt-test"}}),
            json!({"type":"response_item","payload":{"type":"function_call","name":"exec_command","call_id":"c1","arguments":"{}"}}),
            event_msg(
                json!({"type":"token_count","info":{"total_token_usage":{"input_tokens":30,"output_tokens":12,"total_tokens":42}}}),
            ),
            event_msg(
                json!({"type":"task_complete","turn_id":"t1","last_agent_message":"found a.txt"}),
            ),
        ],
    );
    rollout(
        &home,
        GRANDCHILD,
        &[
            spawned(GRANDCHILD, CHILD, "Bo", Value::Null),
            event_msg(json!({"type":"task_started","turn_id":"t2"})),
            event_msg(
                json!({"type":"turn_aborted","turn_id":"t2","reason":"interrupted","duration_ms":5}),
            ),
        ],
    );
    // Another conversation's subagent: never this session's.
    rollout(
        &home,
        STRANGER,
        &[spawned(
            STRANGER,
            "019ad0c2-0000-7000-8000-00000000ffff",
            "Cy",
            Value::Null,
        )],
    );

    let engine = CodexEngine::new(env.config());
    let options = fake_codex("codex-saved-subagents.jsonl");
    let mut h = start(&engine, PARENT, &env.cwd, options, true);
    let opening = until(&mut h, "agent_runs").await;
    let runs = opening.last().unwrap().clone();
    let agents = runs["agents"].as_array().unwrap();
    let seen: Vec<(&Value, &Value, &Value, &Value, &Value)> = agents
        .iter()
        .map(|a| {
            (
                &a["id"],
                &a["label"],
                &a["type"],
                &a["status"],
                &a["tool_use_id"],
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (
                &json!(CHILD),
                &json!("Ada"),
                &json!("explorer"),
                &json!("completed"),
                &json!("call_spawn")
            ),
            (
                &json!(GRANDCHILD),
                &json!("Bo"),
                &Value::Null,
                &json!("interrupted"),
                &Value::Null
            ),
        ],
        "{runs}"
    );
    assert_eq!(
        (
            &agents[0]["tokens"],
            &agents[0]["tool_calls"],
            &agents[0]["model"]
        ),
        (&json!(42), &json!(1), &json!("gpt-test"))
    );
    // UUIDv7 ids carry their creation time.
    assert_eq!(agents[0]["started_at"], 0x019a_d0c2_2000_u64);
    assert_eq!(runs["workflows"], json!([]));

    // The op answers the same runs.
    send(&h, json!({"op":"agent_runs"}));
    assert_eq!(next(&mut h).await, runs);

    send(&h, json!({"op":"subagent_transcript","agent_id":CHILD}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"subagent_transcript","agent_id":CHILD,"items":[
            {"role":"user","content":"look around"},
            {"role":"assistant","content":"found a.txt"},
        ]})
    );
    // A child of the child: proven by the saved tree, though Codex names another parent.
    send(
        &h,
        json!({"op":"subagent_transcript","agent_id":GRANDCHILD}),
    );
    let deeper = next(&mut h).await;
    assert_eq!(
        deeper["items"],
        json!([{"role":"user","content":"dig deeper"}])
    );
    send(&h, json!({"op":"subagent_transcript","agent_id":STRANGER}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"subagent_transcript","agent_id":STRANGER,
               "error":format!("no subagent {STRANGER} in this session")})
    );
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn mcp_startup_statuses_keep_the_server_list_current() {
    let env = Sandbox::new();
    let mut h = open(&env, "codex-mcp-startup.jsonl");
    until(&mut h, "approval_mode").await;
    let mut lists = Vec::new();
    for _ in 0..6 {
        let e = next(&mut h).await;
        assert_eq!(e["type"], "mcp_servers", "{e}");
        lists.push(e);
    }
    let states: Vec<Vec<(String, String)>> = lists.iter().map(servers).collect();
    assert_eq!(
        states,
        vec![
            vec![pair("files", "connecting")],
            vec![pair("files", "connecting"), pair("docs", "connecting")],
            vec![pair("files", "connected"), pair("docs", "connecting")],
            // The server that came up, listed again by Codex with its tools.
            vec![pair("files", "connected"), pair("docs", "connecting")],
            vec![pair("files", "connected"), pair("docs", "failed")],
            // The repeated failure and the subagent thread's server changed nothing.
            vec![
                pair("files", "connected"),
                pair("docs", "failed"),
                pair("notes", "connecting")
            ],
        ]
    );
    assert_eq!(
        lists[3]["servers"][0]["tools"],
        json!([{"name":"read","description":"Read a file"}])
    );
    assert_eq!(lists[4]["servers"][1]["error"], "docs: token expired");
    assert_eq!(lists[5]["servers"][1]["error"], "docs: token expired");
    assert_eq!(close(h).await, None);
}
