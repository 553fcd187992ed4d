//! The Claude-only ops of the Claude Code adapter against `fake-claude` replaying hand-made
//! control-request scripts (`fixtures/engines/claude-extras-*.jsonl`, shaped as Claude Code
//! 2.1.332 answers). The fake checks each request's subtype and its arguments
//! (`settings`, `task_id`, `question`, `title`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use jucode_engine::EngineHandle;
use serde_json::{Value, json};

const SESSION: &str = "5b0c7a2e-1f3d-4c8a-9e6b-2d4f6a8c0e1b";

fn options(env: &ClaudeSandbox, script: &str, extra: Value) -> Value {
    merged(env.fake_claude(script), extra)
}

async fn started(env: &ClaudeSandbox, script: &str, extra: Value) -> EngineHandle {
    let mut h = start(
        &env.engine,
        SESSION,
        &env.cwd,
        options(env, script, extra),
        false,
    );
    until(&mut h, "command_list").await;
    h
}

#[tokio::test]
async fn task_output_permission_rules_and_context_usage() {
    let env = ClaudeSandbox::new();
    let mut h = started(&env, "claude-extras-controls.jsonl", json!({})).await;

    send(&h, json!({"op":"task_output","task_id":"b7x2k9"}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"task_output","task_id":"b7x2k9","output":"building…\ndone\n","truncated":false})
    );
    send(&h, json!({"op":"task_output","task_id":"nope"}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"task_output","task_id":"nope",
               "error":"get_task_output: no shell or Monitor task with that task_id in this session"})
    );
    // A malformed op never reaches Claude Code.
    send(&h, json!({"op":"task_output"}));
    assert_eq!(
        next(&mut h).await["message"],
        "task_output requires task_id"
    );

    send(&h, json!({"op":"permission_rules"}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"permission_rules",
               "rules":[{"behavior":"allow","source":"localSettings","rule":"Bash(npm test:*)","editability":"persistent"},
                        {"behavior":"deny","source":"cliArg","rule":"WebFetch","editability":"session"}],
               "directories":[{"path":"/rec/extra","source":"cliArg"}]})
    );

    send(&h, json!({"op":"context_usage"}));
    let breakdown = next(&mut h).await;
    assert_eq!(breakdown["type"], "context_breakdown");
    assert_eq!(breakdown["model"], "claude-opus-5-5");
    assert_eq!(breakdown["total_tokens"], 12351);
    assert_eq!(breakdown["max_tokens"], 1000000);
    assert_eq!(breakdown["auto_compact_threshold"], 967000);
    assert_eq!(
        breakdown["categories"][0],
        json!({"id":"system_prompt","name":"System prompt","tokens":2339,"kind":"used"})
    );
    assert_eq!(breakdown["categories"][3]["kind"], "free");
    assert_eq!(
        breakdown["memory_files"],
        // The recorded working directory is replaced by the real one.
        json!([{"name":format!("{}/CLAUDE.md", env.cwd.display()),"tokens":120}])
    );
    assert!(breakdown.get("gridRows").is_none());

    // /btw: answered on the side, never a user message or assistant text.
    send(&h, json!({"op":"command","input":"/btw what is 2+2?"}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"side_answer","question":"what is 2+2?","answer":"4"})
    );
    send(&h, json!({"op":"command","input":"/btw and 3+3?"}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"side_answer","question":"and 3+3?","error":"Side question cancelled"})
    );
    send(&h, json!({"op":"command","input":"/btw"}));
    assert_eq!(next(&mut h).await["message"], "/btw requires a question");
    assert_eq!(close(h).await, None);
}

fn model_status(events: &[Value]) -> Value {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "model_status")
        .cloned()
        .expect("a model_status")
}

#[tokio::test]
async fn effort_fast_and_thinking_commands() {
    let env = ClaudeSandbox::new();
    let mut h = started(&env, "claude-extras-settings.jsonl", json!({})).await;

    send(&h, json!({"op":"command","input":"/effort"}));
    let status = next(&mut h).await;
    assert_eq!(status["type"], "model_status");
    assert_eq!(status["fast"], false);
    assert_eq!(status["fast_state"], "off");
    assert_eq!(status["fast_available"], true);
    assert_eq!(status["ultracode"], false);
    assert_eq!(status["thinking_summaries"], true);

    send(&h, json!({"op":"command","input":"/fast"}));
    let status = model_status(&until(&mut h, "model_status").await);
    assert_eq!(status["fast"], true);
    assert_eq!(status["fast_state"], "on");
    assert_eq!(status["ultracode_available"], true);

    send(&h, json!({"op":"command","input":"/effort ultracode on"}));
    let status = model_status(&until(&mut h, "model_status").await);
    assert_eq!(status["ultracode"], true);

    // A new level keeps ultracode on (the fake checks both keys were sent).
    send(&h, json!({"op":"command","input":"/effort high"}));
    let status = model_status(&until(&mut h, "model_status").await);
    assert_eq!(status["reasoning_effort"], "high");
    assert_eq!(status["ultracode"], true);

    send(&h, json!({"op":"command","input":"/thinking off"}));
    let status = model_status(&until(&mut h, "model_status").await);
    assert_eq!(status["thinking_summaries"], false);

    send(&h, json!({"op":"command","input":"/effort sideways"}));
    assert!(
        next(&mut h).await["message"]
            .as_str()
            .unwrap()
            .starts_with("/effort takes one of low, medium")
    );
    send(&h, json!({"op":"command","input":"/fast maybe"}));
    assert_eq!(
        next(&mut h).await["message"],
        "/fast: expected on or off, not `maybe`"
    );

    // A model without fast mode: turning it on is refused with an info.
    send(&h, json!({"op":"command","input":"/model haiku"}));
    until(&mut h, "model_status").await;
    send(&h, json!({"op":"command","input":"/fast on"}));
    let events = until(&mut h, "model_status").await;
    assert!(
        events.iter().any(|e| e["type"] == "info"
            && e["message"] == "fast mode is not available: the model does not support it"),
        "{events:?}"
    );
    let status = model_status(&events);
    assert_eq!(status["fast"], false);
    assert_eq!(status["fast_available"], false);
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn start_options_are_applied_and_kept_across_a_restart() {
    let env = ClaudeSandbox::new();
    let extra = json!({"ultracode": true, "fast": true, "thinking": false});
    let mut h = start(
        &env.engine,
        SESSION,
        &env.cwd,
        options(&env, "claude-extras-start-flags.jsonl", extra),
        false,
    );
    let status = model_status(&until(&mut h, "model_status").await);
    // The first model_status is the adapter's own, before Claude Code answered.
    assert_eq!(status["ultracode"], true);
    let events = until(&mut h, "command_list").await;
    assert!(events.iter().all(|e| e["type"] != "error"), "{events:?}");
    // The settings were applied and read back.
    loop {
        let e = next(&mut h).await;
        if e["type"] == "model_status" && e["ultracode_available"] == true {
            assert_eq!(e["fast"], true);
            assert_eq!(e["thinking_summaries"], false);
            break;
        }
    }
    // Full access restarts Claude Code; the new process (replaying the same script, which
    // insists on the same apply_flag_settings) gets the session's settings again.
    send(&h, json!({"op":"set_approval_mode","mode":"full-access"}));
    let events = until(&mut h, "approval_mode").await;
    assert_eq!(events.last().unwrap()["mode"], "full-access");
    loop {
        let e = next(&mut h).await;
        assert_ne!(e["type"], "error", "{e}");
        if e["type"] == "model_status" && e["ultracode_available"] == true {
            break;
        }
    }
    assert_eq!(close(h).await, None);

    let bad = jucode_engine::EngineFactory::start(
        &env.engine,
        jucode_engine::StartSpec {
            session: SESSION.into(),
            cwd: env.cwd.clone(),
            extra_dirs: vec![],
            options: obj(options(
                &env,
                "claude-extras-start-flags.jsonl",
                json!({"fast": "yes"}),
            )),
            resume: false,
            agent: None,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(bad.contains("options.fast must be true or false"), "{bad}");
}

/// Where Claude Code keeps the session's files in the test's config dir.
fn project_dir(env: &ClaudeSandbox) -> std::path::PathBuf {
    env.config_dir
        .join("projects")
        .join(jucode_adapters::claude::munge_cwd(&env.cwd))
}

fn write_lines(path: &std::path::Path, lines: &[Value]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(path, text.join("\n") + "\n").unwrap();
}

/// A subagent's own transcript as Claude Code saves it.
fn save_subagent(env: &ClaudeSandbox, relative: &str, prompt: &str) {
    let path = project_dir(env)
        .join(SESSION)
        .join("subagents")
        .join(relative);
    write_lines(
        &path,
        &[
            json!({"type":"user","isSidechain":true,"timestamp":"2026-11-29T10:00:00.000Z",
                   "message":{"role":"user","content":prompt}}),
            json!({"type":"assistant","isSidechain":true,"timestamp":"2026-11-29T10:00:01.000Z",
                   "message":{"role":"assistant","model":"claude-haiku-5-0","content":[
                       {"type":"thinking","thinking":"list them"},
                       {"type":"tool_use","id":"toolu_s1","name":"Bash","input":{"command":"ls"}}],
                       "usage":{"input_tokens":100,"output_tokens":20}}}),
            json!({"type":"user","isSidechain":true,"timestamp":"2026-11-29T10:00:02.000Z",
                   "message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_s1","content":"a\nb\nc","is_error":false}]}}),
            json!({"type":"assistant","isSidechain":true,"timestamp":"2026-11-29T10:00:03.500Z",
                   "message":{"role":"assistant","model":"claude-haiku-5-0","content":[
                       {"type":"text","text":"There are 3 files."},
                       {"type":"tool_use","id":"toolu_s2","name":"Read","input":{"file_path":"a"}}],
                       "usage":{"input_tokens":150,"output_tokens":30}}}),
        ],
    );
}

fn last_of(events: &[Value], kind: &str) -> Value {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == kind)
        .cloned()
        .unwrap_or_else(|| panic!("no {kind} in {events:?}"))
}

#[tokio::test]
async fn a_task_subagent_is_traced_live_and_its_transcript_read() {
    let env = ClaudeSandbox::new();
    let mut h = started(&env, "claude-extras-subagent.jsonl", json!({})).await;
    send(&h, json!({"op":"user_message","content":"count the files"}));
    let events = turn(&mut h).await;
    // The subagent's call is marked as its, by the agent id Claude Code gave it.
    assert!(events.iter().any(|e| e["type"] == "tool_start"
        && e["call_id"] == "toolu_sub1"
        && e["subagent"] == "a1b2c3"));
    // Its lifecycle: started once named, completed with its result, each once.
    let lifecycle: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "subagent_lifecycle")
        .collect();
    assert_eq!(
        lifecycle,
        [
            &json!({"type":"subagent_lifecycle","path":"a1b2c3","status":"started","label":"Count files",
                    "message":"Count the files in the project","model":null,"tool_use_id":"toolu_task1"}),
            &json!({"type":"subagent_lifecycle","path":"a1b2c3","status":"completed","label":"Count files",
                    "message":"There are 3 files.","model":null,"tool_use_id":"toolu_task1"}),
        ]
    );
    let runs = last_of(&events, "agent_runs");
    assert_eq!(runs["workflows"], json!([]));
    let agent = &runs["agents"][0];
    assert_eq!(agent["id"], "a1b2c3");
    assert_eq!(agent["label"], "Count files");
    assert_eq!(agent["type"], "Explore");
    assert_eq!(agent["tool_use_id"], "toolu_task1");
    assert_eq!(agent["status"], "completed");
    assert_eq!(agent["tokens"], 600);
    assert_eq!(agent["tool_calls"], 1);
    assert_eq!(agent["duration_ms"], 900);
    assert!(agent["started_at"].as_u64().unwrap() > 0);
    // While it ran, it was traced as running.
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "agent_runs" && e["agents"][0]["status"] == "running")
    );

    // Claude Code saved it and, nested deeper, one more from before this process.
    save_subagent(&env, "agent-a1b2c3.jsonl", "Count the files in the project");
    save_subagent(
        &env,
        "workflows/w1/agent-f00d.jsonl",
        "Review the diff\nthoroughly",
    );
    save_subagent(&env, "agent-beef.jsonl", "Second look");
    // Claude Code keeps an agent's type and description beside its transcript.
    std::fs::write(
        project_dir(&env)
            .join(SESSION)
            .join("subagents/agent-beef.meta.json"),
        r#"{"agentType":"code-reviewer","description":"Review again"}"#,
    )
    .unwrap();
    send(&h, json!({"op":"agent_runs"}));
    let runs = next(&mut h).await;
    assert_eq!(runs["type"], "agent_runs");
    let agents = runs["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 3, "{runs}");
    assert_eq!(agents[0]["id"], "a1b2c3");
    let saved = agents.iter().find(|a| a["id"] == "f00d").unwrap();
    assert_eq!(saved["id"], "f00d");
    assert_eq!(saved["label"], "Review the diff");
    assert_eq!(saved["status"], "completed");
    assert_eq!(saved["model"], "claude-haiku-5-0");
    assert_eq!(saved["tool_calls"], 2);
    assert_eq!(saved["tokens"], 180);
    assert_eq!(saved["duration_ms"], 3500);
    assert_eq!(saved["type"], Value::Null);
    let described = agents.iter().find(|a| a["id"] == "beef").unwrap();
    assert_eq!(described["label"], "Review again");
    assert_eq!(described["type"], "code-reviewer");

    send(&h, json!({"op":"subagent_transcript","agent_id":"a1b2c3"}));
    let t = next(&mut h).await;
    assert_eq!(t["type"], "subagent_transcript");
    assert_eq!(t["agent_id"], "a1b2c3");
    assert_eq!(
        t["items"],
        json!([
            {"role":"user","content":"Count the files in the project"},
            {"role":"reasoning","content":"list them"},
            {"role":"tool","call_id":"toolu_s1","name":"bash","output":"a\nb\nc","is_error":false,"running":false},
            {"role":"assistant","content":"There are 3 files."},
            {"role":"tool","call_id":"toolu_s2","name":"read","output":"","is_error":false,"running":true},
        ])
    );
    // Only ids found in this session's subagents directory are read.
    std::fs::write(env.dir.path().join("agent-secret.jsonl"), "{}").unwrap();
    for bad in ["../../../agent-secret", "nope", ""] {
        send(&h, json!({"op":"subagent_transcript","agent_id":bad}));
        let e = next(&mut h).await;
        assert_eq!(e["type"], "subagent_transcript");
        assert_eq!(
            e["error"],
            format!("no saved subagent {bad} in this session")
        );
        assert!(e.get("items").is_none());
    }
    send(&h, json!({"op":"subagent_transcript"}));
    assert_eq!(
        next(&mut h).await["message"],
        "subagent_transcript requires agent_id"
    );
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn a_reopened_session_traces_the_subagents_claude_code_saved() {
    let env = ClaudeSandbox::new();
    let main = project_dir(&env).join(format!("{SESSION}.jsonl"));
    let mut lines: Vec<Value> =
        std::fs::read_to_string(fixture("claude-code-2.1.332-transcript-after-resume.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    lines.push(json!({"type":"assistant","sessionId":SESSION,"message":{"role":"assistant","content":[
        {"type":"tool_use","id":"toolu_t9","name":"Agent","input":{"description":"Find TODOs","subagent_type":"general-purpose","prompt":"find"}}]}}));
    lines.push(json!({"type":"user","sessionId":SESSION,"message":{"role":"user","content":[
        {"type":"tool_result","tool_use_id":"toolu_t9","content":"none"}]},
        "toolUseResult":{"status":"completed","agentId":"c0ffee","totalTokens":4321,"totalToolUseCount":7,"totalDurationMs":6000}}));
    write_lines(&main, &lines);
    save_subagent(&env, "agent-c0ffee.jsonl", "find");
    let mut h = start(
        &env.engine,
        SESSION,
        &env.cwd,
        options(&env, "claude-code-2.1.332-resume.jsonl", json!({})),
        true,
    );
    let runs = last_of(&until(&mut h, "agent_runs").await, "agent_runs");
    assert_eq!(
        runs["agents"][0],
        json!({"id":"c0ffee","label":"Find TODOs","type":"general-purpose","tool_use_id":"toolu_t9",
               "status":"completed","model":"claude-haiku-5-0","started_at":1_795_946_400_000u64,
               "duration_ms":6000,"tokens":4321,"tool_calls":7})
    );
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn a_rename_goes_to_claude_code_and_its_title_comes_back() {
    let env = ClaudeSandbox::new();
    let mut h = started(&env, "claude-extras-rename.jsonl", json!({})).await;
    send(&h, json!({"op":"rename","title":"  "}));
    assert_eq!(next(&mut h).await["message"], "rename requires a title");
    // The fake checks the title sent with rename_session.
    send(&h, json!({"op":"rename","title":"Fix the login bug"}));
    assert_eq!(
        next(&mut h).await,
        json!({"type":"session_title","title":"Fix the login bug"})
    );
    assert_eq!(close(h).await, None);
}

#[tokio::test]
async fn an_edit_approval_card_carries_its_hunks() {
    let env = ClaudeSandbox::new();
    std::fs::write(env.cwd.join("notes.txt"), "title\n\nhelo world\nbye\n").unwrap();
    let mut h = started(&env, "claude-extras-edit-card.jsonl", json!({})).await;
    send(
        &h,
        json!({"op":"user_message","content":"fix the greeting"}),
    );
    let card = last_of(&until(&mut h, "approval_request").await, "approval_request");
    assert_eq!(card["name"], "str_replace");
    assert_eq!(
        card["hunks"],
        json!([{"id":"h1","file":"notes.txt","header":"@@ -1,4 +1,4 @@",
                "lines":[" title"," ","-helo world","+hello world"," bye"]}])
    );
    // A hunk the card does not have, or hunks with `always`: an error, and the card again.
    send(
        &h,
        json!({"op":"approve","call_id":"toolu_edit1","decision":"allow","hunks":["h2"]}),
    );
    assert_eq!(next(&mut h).await["message"], "no hunk h2 in this edit");
    assert_eq!(next(&mut h).await, card);
    send(
        &h,
        json!({"op":"approve","call_id":"toolu_edit1","decision":"allow","hunks":["h1"],"always":true}),
    );
    assert_eq!(
        next(&mut h).await["message"],
        "hunks cannot be combined with always"
    );
    assert_eq!(next(&mut h).await, card);
    // All of its hunks: the plain allow the fake checks for.
    send(
        &h,
        json!({"op":"approve","call_id":"toolu_edit1","decision":"allow","hunks":["h1"]}),
    );
    let events = turn(&mut h).await;
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool_output" && e["is_error"] == false)
    );
    assert_eq!(close(h).await, None);
}

/// The first event of `kind` in `events`.
fn first_of(events: &[Value], kind: &str) -> Value {
    events
        .iter()
        .find(|e| e["type"] == kind)
        .cloned()
        .unwrap_or_else(|| panic!("no {kind} in {events:?}"))
}

#[tokio::test]
async fn mcp_elicitations_retries_fallbacks_and_suggestions() {
    let env = ClaudeSandbox::new();
    let mut h = start(
        &env.engine,
        SESSION,
        &env.cwd,
        options(&env, "claude-extras-elicit.jsonl", json!({})),
        false,
    );
    // A question an MCP server asked before we attached comes with `initialize`; Claude Code
    // also sends it live, and it is shown once.
    let events = until(&mut h, "command_list").await;
    let card = first_of(&events, "approval_request");
    assert_eq!(
        card,
        json!({"type":"approval_request","call_id":"elicit-1-elic_pending_1","name":"mcp_elicitation",
               "summary":"Sign in to GitHub to continue","subagent_id":null,"hunks":null,
               "server":"github","mode":"url","url":"https://github.example/login/device?code=ABCD",
               "questions":null,"title":null})
    );
    // The hub keeps it for a watcher's snapshot like any approval card.
    let parsed = jucode_protocol::serve::Event(obj(card.clone())).known();
    assert!(matches!(
        parsed,
        Some(jucode_protocol::serve::Known::ApprovalRequest { .. })
    ));
    send(
        &h,
        json!({"op":"approve","call_id":"elicit-1-elic_pending_1","decision":"allow"}),
    );
    // A url request the server then reports complete is answered and its card goes.
    let second = next(&mut h).await;
    assert_eq!(second["type"], "approval_request", "{second}");
    assert_eq!(second["call_id"], "elicit-1-elic_url_2");
    assert_eq!(
        next(&mut h).await,
        json!({"type":"info","message":"github: the request in the browser is complete"})
    );
    // A second client's answer to an answered card is ignored.
    send(
        &h,
        json!({"op":"approve","call_id":"elicit-1-elic_pending_1","decision":"deny"}),
    );

    send(&h, json!({"op":"user_message","content":"deploy it"}));
    let events = until(&mut h, "approval_request").await;
    assert_eq!(events[0]["type"], "user_message", "{events:?}");
    assert_eq!(
        first_of(&events, "retrying"),
        json!({"type":"retrying","attempt":1,"max_attempts":10,"delay_ms":532,"reason":"overloaded"})
    );
    assert_eq!(
        first_of(&events, "model_fallback"),
        json!({"type":"model_fallback","from":"claude-opus-5-5","to":"claude-sonnet-5-0",
               "reason":"cyber","scope":"session",
               "message":"Opus declined this request; retrying with Sonnet."})
    );
    assert_eq!(
        last_of(&events, "model_status")["model"],
        "claude-sonnet-5-0"
    );
    let form = last_of(&events, "approval_request");
    assert_eq!(form["call_id"], "elicit-1-elic_form_3");
    assert_eq!(form["mode"], "form");
    assert_eq!(form["summary"], "Where should I deploy?");
    assert_eq!(form["url"], Value::Null);
    assert_eq!(
        form["questions"],
        json!([
            {"id":"target","header":"Target","question":"Target","type":"string","required":true,
             "multiple":false,"default":null,
             "options":[{"value":"prod","label":"Production"},{"value":"staging","label":"Staging"}]},
            {"id":"replicas","header":"Replicas","question":"How many replicas?","type":"integer",
             "required":true,"multiple":false,"default":null,"options":null},
            {"id":"notify","header":"Notify the team","question":"Notify the team","type":"boolean",
             "required":false,"multiple":false,"default":null,"options":null},
        ])
    );
    // Answers that do not fit the form are refused and the card stays open.
    send(
        &h,
        json!({"op":"approve","call_id":"elicit-1-elic_form_3","decision":"allow",
               "answers":{"target":"Staging"}}),
    );
    assert_eq!(
        next(&mut h).await,
        json!({"type":"error","message":"an answer to Replicas is required"})
    );
    // The card is shown again: the daemon dropped it from its snapshot when the answer left.
    assert_eq!(next(&mut h).await, form);
    // The fake checks the typed content: {target: staging, replicas: 2, notify: true}.
    send(
        &h,
        json!({"op":"approve","call_id":"elicit-1-elic_form_3","decision":"allow",
               "answers":{"target":"Staging","replicas":"2","notify":"yes"}}),
    );
    let confirm = next(&mut h).await;
    assert_eq!(confirm["call_id"], "elicit-1-elic_form_4", "{confirm}");
    // A denial declines.
    send(
        &h,
        json!({"op":"approve","call_id":"elicit-1-elic_form_4","decision":"deny"}),
    );
    let events = turn(&mut h).await;
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool_output" && e["output"] == "deployed 2 replicas to staging")
    );
    // The likely next prompt arrives after the turn ended.
    assert_eq!(
        next(&mut h).await,
        json!({"type":"prompt_suggestion","text":"check the staging logs"})
    );

    // An interrupt cancels the open question, then the turn.
    send(&h, json!({"op":"user_message","content":"deploy again"}));
    let events = until(&mut h, "approval_request").await;
    assert_eq!(
        last_of(&events, "approval_request")["call_id"],
        "elicit-1-elic_form_5"
    );
    send(&h, json!({"op":"interrupt"}));
    let events = turn(&mut h).await;
    assert!(events.contains(&json!({"type":"status","message":"interrupted"})));
    assert_eq!(close(h).await, None);
}
