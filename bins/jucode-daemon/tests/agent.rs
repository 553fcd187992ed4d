//! End-to-end tests of the built-in jucode engine: the real daemon binary (no
//! JUCODE_SERVE_BIN) against the fake model server of jucode-testsupport, which speaks the
//! OpenAI chat-completions and Anthropic Messages APIs over real HTTP/SSE.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-mcp-testserver` (the MCP tests run
//! its `jucode-mcp-echo`). The sandbox test needs bubblewrap: `scripts/install-sandbox.sh`;
//! without it that test fails.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::{Client, Daemon};
use serde_json::{Value, json};

/// The test's temporary home.
type Env = jucode_testsupport::TestHome;

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Creates a session, waits for its startup batch and (optionally) watches it.
async fn session(client: &mut Client, cwd: &Path, options: Value, watch: bool) -> Result<String> {
    let reply = client
        .request(json!({"op":"session_create","cwd":s(cwd),"options":options}))
        .await?;
    if reply["type"] != "session_created" {
        bail!("session_create answered {reply}");
    }
    let id = reply["session"].as_str().context("no session")?.to_string();
    client.recv_type("mcp_servers", Some(&id)).await?;
    if watch {
        client.request(json!({"op":"watch","session":id})).await?;
        client
            .recv_until(|f| {
                f["type"] == "attended" && f["attended"] == true && f["session"] == id.as_str()
            })
            .await?;
    }
    Ok(id)
}

/// Reads the session's events until `status: ready`, starting at its `user_message`.
async fn until_ready(client: &mut Client, session: &str) -> Result<Vec<Value>> {
    let mut events = Vec::new();
    loop {
        let frame = client.recv().await?;
        if frame["session"] != session || (events.is_empty() && frame["type"] != "user_message") {
            continue;
        }
        let ready = frame["type"] == "status" && frame["message"] == "ready";
        events.push(frame);
        if ready {
            return Ok(events);
        }
    }
}

/// Reads the session's events from now until `status: ready`.
async fn rest_of_turn(client: &mut Client, session: &str) -> Result<Vec<Value>> {
    let mut events = Vec::new();
    loop {
        let frame = client.recv().await?;
        if frame["session"] != session {
            continue;
        }
        let ready = frame["type"] == "status" && frame["message"] == "ready";
        events.push(frame);
        if ready {
            return Ok(events);
        }
    }
}

async fn turn(client: &mut Client, session: &str, content: &str) -> Result<Vec<Value>> {
    client
        .send(json!({"op":"user_message","session":session,"content":content}))
        .await?;
    until_ready(client, session).await
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["type"].as_str()).collect()
}

/// The assistant's text of a turn, all deltas joined.
fn reply(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "assistant_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect()
}

async fn start(env: &Env, fake: &FakeModel, protocol: &str) -> Daemon {
    Daemon::start_builtin(&env.home(), &fake.config(protocol))
        .await
        .unwrap()
}

async fn plain_turn(protocol: &str) {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake, protocol).await;
    let mut c = daemon.client().await.unwrap();
    let project = env.project("app");
    let id = session(&mut c, &project, json!({}), true).await.unwrap();

    let events = turn(&mut c, &id, "hello there").await.unwrap();
    let kinds = types(&events);
    let deltas = kinds.iter().filter(|k| **k == "assistant_delta").count();
    assert!(deltas >= 2, "{kinds:?}");
    let mut expected = vec!["user_message", "connecting", "assistant_start"];
    expected.extend(std::iter::repeat_n("assistant_delta", deltas));
    expected.extend(["usage", "context_usage", "status"]);
    assert_eq!(kinds, expected);
    assert_eq!(reply(&events), "user said: hello there");
    let usage = &events[events.len() - 3];
    assert_eq!(usage["input_tokens"], 100);
    assert_eq!(usage["output_tokens"], 10);
    assert_eq!(events[events.len() - 2]["tokens"], 110);

    // The request went to the protocol's endpoint, streamed, with the tools.
    let (path, body) = fake.requests().into_iter().next().unwrap();
    let want = if protocol == "anthropic" {
        "/v1/messages"
    } else {
        "/v1/chat/completions"
    };
    assert_eq!(path, want);
    assert_eq!(body["stream"], true);
    assert!(body["tools"].as_array().unwrap().len() >= 5);

    // /model lists and switches.
    c.send(json!({"op":"command","session":id,"input":"/model"}))
        .await
        .unwrap();
    let view = c.recv_type("model_view", Some(&id)).await.unwrap();
    assert_eq!(view["models"][0]["model"], "fake-model");
    assert_eq!(view["models"][0]["active"], true);
    c.send(json!({"op":"command","session":id,"input":"/model fake-model-2"}))
        .await
        .unwrap();
    let status = c.recv_type("model_status", Some(&id)).await.unwrap();
    assert_eq!(status["model"], "fake-model-2");
    c.send(json!({"op":"command","session":id,"input":"/model nope"}))
        .await
        .unwrap();
    let err = c.recv_type("error", Some(&id)).await.unwrap();
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("unknown model nope")
    );
    turn(&mut c, &id, "again").await.unwrap();
    // The title model (the configured model) may answer after the turn: look at the last
    // request of the turn itself, the one offering tools.
    let (_, body) = fake
        .requests()
        .into_iter()
        .rev()
        .find(|(_, b)| b.get("tools").is_some())
        .unwrap();
    assert_eq!(body["model"], "fake-model-2");
}

#[tokio::test]
async fn a_plain_turn_over_chat_completions() {
    plain_turn("chat").await;
}

#[tokio::test]
async fn a_plain_turn_over_anthropic_messages() {
    plain_turn("anthropic").await;
}

#[tokio::test]
async fn a_missing_config_ends_the_turn_with_an_error() {
    let env = Env::new();
    let daemon = Daemon::start_builtin(&env.home(), &json!({"model": "m"}))
        .await
        .unwrap();
    let mut c = daemon.client().await.unwrap();
    let id = session(&mut c, &env.project("app"), json!({}), true)
        .await
        .unwrap();
    let events = turn(&mut c, &id, "hi").await.unwrap();
    assert_eq!(types(&events), vec!["user_message", "error", "status"]);
    assert!(
        events[1]["message"]
            .as_str()
            .unwrap()
            .contains("base_url is missing"),
        "{}",
        events[1]
    );
}

/// Reads until an approval_request and returns it.
async fn approval(c: &mut Client, id: &str) -> Value {
    c.recv_type("approval_request", Some(id)).await.unwrap()
}

#[tokio::test]
async fn a_tool_call_approved_and_one_denied() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake, "chat").await;
    let mut c = daemon.client().await.unwrap();
    let project = env.project("app");
    let id = session(&mut c, &project, json!({"approval_mode":"manual"}), true)
        .await
        .unwrap();

    let call = r#"CALL bash {"command":"echo approved-run > ran.txt; cat ran.txt","escalate":true,"justification":"the test asks"}"#;
    c.send(json!({"op":"user_message","session":id,"content":call}))
        .await
        .unwrap();
    let request = approval(&mut c, &id).await;
    assert_eq!(request["name"], "bash");
    assert!(
        request["summary"]
            .as_str()
            .unwrap()
            .contains("echo approved-run")
    );
    assert_eq!(request["hunks"], Value::Null);
    // A bad answer is refused and leaves the request waiting.
    c.send(json!({"op":"approve","session":id,"call_id":request["call_id"],"decision":"maybe"}))
        .await
        .unwrap();
    let err = c.recv_type("error", Some(&id)).await.unwrap();
    assert_eq!(err["message"], "approve requires decision: allow or deny");
    c.send(json!({"op":"approve","session":id,"call_id":request["call_id"],"decision":"allow"}))
        .await
        .unwrap();
    let events = rest_of_turn(&mut c, &id).await.unwrap();
    let output = events.iter().find(|e| e["type"] == "tool_output").unwrap();
    assert_eq!(output["is_error"], false);
    assert_eq!(output["output"], "approved-run\n");
    assert!(types(&events).contains(&"tool_start"));
    assert_eq!(reply(&events), "tool said: approved-run\n");
    assert!(project.join("ran.txt").exists());

    let call = r#"CALL bash {"command":"touch denied.txt","escalate":true,"justification":"the test asks"}"#;
    c.send(json!({"op":"user_message","session":id,"content":call}))
        .await
        .unwrap();
    let request = approval(&mut c, &id).await;
    c.send(json!({"op":"approve","session":id,"call_id":request["call_id"],"decision":"deny"}))
        .await
        .unwrap();
    let events = rest_of_turn(&mut c, &id).await.unwrap();
    assert!(!types(&events).contains(&"tool_start"));
    let output = events.iter().find(|e| e["type"] == "tool_output").unwrap();
    assert_eq!(output["is_error"], true);
    assert!(output["output"].as_str().unwrap().contains("denied"));
    assert!(!project.join("denied.txt").exists());

    // Switching to full access answers a waiting approval at once.
    let call =
        r#"CALL bash {"command":"echo by-mode","escalate":true,"justification":"the test asks"}"#;
    c.send(json!({"op":"user_message","session":id,"content":call}))
        .await
        .unwrap();
    approval(&mut c, &id).await;
    c.send(json!({"op":"set_approval_mode","session":id,"mode":"full-auto"}))
        .await
        .unwrap();
    let mode = c.recv_type("approval_mode", Some(&id)).await.unwrap();
    assert_eq!(mode["mode"], "full-access");
    let output = c.recv_type("tool_output", Some(&id)).await.unwrap();
    assert_eq!(output["output"], "by-mode\n");
}

#[tokio::test]
async fn an_edit_shows_hunks_and_applies_only_the_approved_ones() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake, "anthropic").await;
    let mut c = daemon.client().await.unwrap();
    let project = env.project("app");
    let old: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    std::fs::write(project.join("f.txt"), &old).unwrap();
    let id = session(&mut c, &project, json!({"approval_mode":"manual"}), true)
        .await
        .unwrap();

    let new = old
        .replace("line 2\n", "LINE TWO\n")
        .replace("line 18\n", "LINE EIGHTEEN\n");
    let args = json!({"path":"f.txt","content":new});
    c.send(json!({"op":"user_message","session":id,"content":format!("CALL write {args}")}))
        .await
        .unwrap();
    let request = approval(&mut c, &id).await;
    assert_eq!(request["name"], "write");
    assert_eq!(request["summary"], "edit f.txt");
    let hunks = request["hunks"].as_array().unwrap();
    assert_eq!(hunks.len(), 2);
    assert_eq!(hunks[0]["id"], "h1");
    assert_eq!(hunks[0]["file"], "f.txt");
    assert!(
        hunks[1]["lines"]
            .as_array()
            .unwrap()
            .contains(&json!("+LINE EIGHTEEN"))
    );
    // hunks and always do not mix, and a hunk must exist: the card stays open, is shown
    // again, and is in a later watcher's snapshot.
    for bad in [
        json!({"always":true,"hunks":["h2"]}),
        json!({"hunks":["h9"]}),
    ] {
        let mut op =
            json!({"op":"approve","session":id,"call_id":request["call_id"],"decision":"allow"});
        op.as_object_mut()
            .unwrap()
            .extend(bad.as_object().unwrap().clone());
        c.send(op).await.unwrap();
        c.recv_type("error", Some(&id)).await.unwrap();
        let again = c.recv_type("approval_request", Some(&id)).await.unwrap();
        assert_eq!(again["call_id"], request["call_id"]);
        assert_eq!(again["hunks"], request["hunks"]);
    }
    let mut late = daemon.client().await.unwrap();
    late.request(json!({"op":"watch","session":id}))
        .await
        .unwrap();
    let card = late.recv_type("approval_request", Some(&id)).await.unwrap();
    assert_eq!(card["call_id"], request["call_id"]);
    c.send(json!({"op":"approve","session":id,"call_id":request["call_id"],"decision":"allow","hunks":["h2"]}))
        .await
        .unwrap();
    let events = rest_of_turn(&mut c, &id).await.unwrap();
    let output = events.iter().find(|e| e["type"] == "tool_output").unwrap();
    assert_eq!(output["is_error"], false, "{output}");
    assert!(output["output"].as_str().unwrap().contains("1 of 2 hunks"));
    let text = std::fs::read_to_string(project.join("f.txt")).unwrap();
    assert!(
        text.contains("line 2\n") && text.contains("LINE EIGHTEEN\n"),
        "{text}"
    );

    // In auto-edit, edits run without asking.
    c.send(json!({"op":"set_approval_mode","session":id,"mode":"auto-edit"}))
        .await
        .unwrap();
    let args = json!({"path":"f.txt","old_str":"line 2\n","new_str":"second\n"});
    let events = turn(&mut c, &id, &format!("CALL str_replace {args}"))
        .await
        .unwrap();
    assert!(!types(&events).contains(&"approval_request"));
    assert!(
        std::fs::read_to_string(project.join("f.txt"))
            .unwrap()
            .contains("second\n")
    );
}

#[tokio::test]
async fn an_unattended_call_is_deferred_and_decided_after_a_restart() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let mut daemon = start(&env, &fake, "chat").await;
    let mut c = daemon.client().await.unwrap();
    let project = env.project("app");
    let id = session(&mut c, &project, json!({"approval_mode":"manual"}), false)
        .await
        .unwrap();

    let call = r#"CALL bash {"command":"echo deferred-ran > out.txt; echo done","escalate":true,"justification":"the test asks"}"#;
    let events = turn(&mut c, &id, call).await.unwrap();
    let deferred = events
        .iter()
        .find(|e| e["type"] == "action_deferred")
        .unwrap()
        .clone();
    let action = deferred["id"].as_str().unwrap().to_string();
    assert!(action.starts_with("act-"));
    assert_eq!(deferred["session_id"], id.as_str());
    assert_eq!(deferred["cwd"], s(&project));
    assert_eq!(deferred["name"], "bash");
    assert!(deferred["arguments"].is_string());
    assert_eq!(deferred["digest"].as_str().unwrap().len(), 24);
    let output = events.iter().find(|e| e["type"] == "tool_output").unwrap();
    assert!(
        output["output"]
            .as_str()
            .unwrap()
            .contains("Submitted for confirmation")
    );
    assert!(!project.join("out.txt").exists());

    // The same call again reuses the open action.
    let events = turn(&mut c, &id, call).await.unwrap();
    assert!(!types(&events).contains(&"action_deferred"));
    let output = events.iter().find(|e| e["type"] == "tool_output").unwrap();
    assert!(output["output"].as_str().unwrap().contains(&action));

    daemon.stop().await.unwrap();
    let daemon = start(&env, &fake, "chat").await;
    let mut c = daemon.client().await.unwrap();
    let reply = c
        .request(json!({"op":"session_open","session":id}))
        .await
        .unwrap();
    assert_eq!(reply["type"], "session_opened", "{reply}");
    c.send(json!({"op":"decide_action","session":id,"action":action,"decision":"allow"}))
        .await
        .unwrap();
    let decided = c.recv_type("action_decided", Some(&id)).await.unwrap();
    assert_eq!(decided["decision"], "allow");
    assert_eq!(decided["output"], "done\n");
    let events = until_ready(&mut c, &id).await.unwrap();
    let message = events[0]["content"].as_str().unwrap();
    assert_eq!(
        message,
        format!(
            "[deferred action {action} approved and executed]\n`bash` (echo deferred-ran > out.txt; echo done (outside the sandbox: the test asks))\nresult:\ndone\n"
        )
    );
    assert_eq!(
        std::fs::read_to_string(project.join("out.txt")).unwrap(),
        "deferred-ran\n"
    );
    // Decided once: a second decision is refused.
    c.send(json!({"op":"decide_action","session":id,"action":action,"decision":"deny"}))
        .await
        .unwrap();
    // The daemon's action log answers first (a reply, without session).
    let err = c.recv_until(|f| f["type"] == "error").await.unwrap();
    assert!(err["message"].as_str().unwrap().contains(&action), "{err}");
}

#[tokio::test]
async fn queueing_steer_and_interrupt_of_a_running_sleep() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake, "chat").await;
    let mut c = daemon.client().await.unwrap();
    let project = env.project("app");
    let id = session(
        &mut c,
        &project,
        json!({"approval_mode":"full-access"}),
        true,
    )
    .await
    .unwrap();

    c.send(json!({"op":"user_message","session":id,"content":"RUN: sleep 60"}))
        .await
        .unwrap();
    c.recv_type("tool_start", Some(&id)).await.unwrap();
    for (n, text) in ["second", "third"].iter().enumerate() {
        c.send(json!({"op":"user_message","session":id,"content":text}))
            .await
            .unwrap();
        let pending = c.recv_type("pending_messages", Some(&id)).await.unwrap();
        assert_eq!(pending["messages"].as_array().unwrap().len(), n + 1);
        let status = c.recv_type("status", Some(&id)).await.unwrap();
        assert_eq!(status["message"], format!("queued: {}", n + 1));
    }
    // steer stops the sleep and starts the next queued message.
    c.send(json!({"op":"steer","session":id})).await.unwrap();
    let status = c.recv_type("status", Some(&id)).await.unwrap();
    assert_eq!(status["message"], "steering");
    let pending = c.recv_type("pending_messages", Some(&id)).await.unwrap();
    assert_eq!(pending["messages"], json!(["third"]));
    let events = until_ready(&mut c, &id).await.unwrap();
    assert_eq!(events[0]["content"], "second");
    assert_eq!(reply(&events), "user said: second");
    let events = until_ready(&mut c, &id).await.unwrap();
    assert_eq!(reply(&events), "user said: third");

    // interrupt kills the running command's whole process group.
    c.send(json!({"op":"user_message","session":id,"content":"RUN: echo $$ > pid.txt; sleep 60 & sleep 60"}))
        .await
        .unwrap();
    c.recv_type("tool_start", Some(&id)).await.unwrap();
    let pid_file = project.join("pid.txt");
    let mut pid = None;
    for _ in 0..200 {
        if let Ok(text) = std::fs::read_to_string(&pid_file)
            && let Ok(p) = text.trim().parse::<i32>()
        {
            pid = Some(p);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let pid = pid.expect("the command wrote its pid");
    c.send(json!({"op":"interrupt","session":id}))
        .await
        .unwrap();
    let info = c.recv_type("info", Some(&id)).await.unwrap();
    assert_eq!(info["message"], "request interrupted");
    let status = c.recv_type("status", Some(&id)).await.unwrap();
    assert_eq!(status["message"], "interrupted");
    // Every process of the group is gone (or a zombie waiting to be reaped).
    let mut alive = true;
    for _ in 0..200 {
        let group_alive = std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // Field 5 of /proc/<pid>/stat is the process group; field 3 the state.
            let after = stat.rsplit_once(") ").map(|(_, rest)| rest).unwrap_or("");
            let fields: Vec<&str> = after.split_whitespace().collect();
            fields.len() > 2 && fields[2] == pid.to_string() && fields[0] != "Z"
        });
        if !group_alive {
            alive = false;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(!alive, "process group {pid} survived the interrupt");
    // The session goes on.
    let events = turn(&mut c, &id, "after").await.unwrap();
    assert_eq!(reply(&events), "user said: after");
}

#[tokio::test]
async fn a_conversation_resumes_after_a_restart() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let mut daemon = start(&env, &fake, "anthropic").await;
    let mut c = daemon.client().await.unwrap();
    let project = env.project("app");
    let id = session(&mut c, &project, json!({}), true).await.unwrap();
    turn(&mut c, &id, "remember kumquat").await.unwrap();
    daemon.stop().await.unwrap();

    let daemon = start(&env, &fake, "anthropic").await;
    let mut c = daemon.client().await.unwrap();
    c.request(json!({"op":"session_open","session":id}))
        .await
        .unwrap();
    // The watch snapshot holds the conversation (the engine's own copy is not sent again).
    c.request(json!({"op":"watch","session":id})).await.unwrap();
    let transcript = c.recv_type("transcript", Some(&id)).await.unwrap();
    assert_eq!(
        transcript["items"],
        json!([{"role":"user","content":"remember kumquat"},{"role":"assistant","content":"user said: remember kumquat"}])
    );
    let events = turn(&mut c, &id, "what was it?").await.unwrap();
    assert_eq!(reply(&events), "user said: what was it?");
    let (_, body) = fake
        .requests()
        .into_iter()
        .rfind(|(_, b)| b["stream"] == true)
        .unwrap();
    let sent = body["messages"].to_string();
    assert!(sent.contains("remember kumquat"), "{sent}");
    assert!(
        env.home()
            .join("sessions")
            .join(format!("{id}.jsonl"))
            .exists()
    );
}

#[tokio::test]
async fn titles_come_after_the_first_and_third_turns() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake, "chat").await;
    let mut c = daemon.client().await.unwrap();
    let id = session(&mut c, &env.project("app"), json!({}), true)
        .await
        .unwrap();
    let mut titles = Vec::new();
    for (i, text) in ["alpha one", "beta two", "gamma three"]
        .into_iter()
        .enumerate()
    {
        let events = turn(&mut c, &id, text).await.unwrap();
        let mut found: Vec<String> = events
            .iter()
            .filter(|e| e["type"] == "session_title")
            .map(|e| e["title"].as_str().unwrap().to_string())
            .collect();
        // A title may come after the turn's ready: wait for it before the next turn, so it
        // cannot be mistaken for (or lost among) the next turn's events.
        if i != 1 && found.is_empty() {
            let t = c.recv_type("session_title", Some(&id)).await.unwrap();
            found.push(t["title"].as_str().unwrap().to_string());
        }
        titles.extend(found);
    }
    assert_eq!(
        titles,
        vec!["Session about alpha one", "Session about gamma three"]
    );
    // The title request is a short, non-streamed one.
    let titled = fake
        .requests()
        .into_iter()
        .filter(|(_, b)| b["stream"] == false)
        .count();
    assert_eq!(titled, 2);
}

#[tokio::test]
async fn a_rate_limited_request_is_retried_with_backoff() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let mut config = fake.config("chat");
    config["retry_attempts"] = json!(3);
    let daemon = Daemon::start_builtin(&env.home(), &config).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let id = session(&mut c, &env.project("app"), json!({}), true)
        .await
        .unwrap();
    fake.fail_next(2, 429);
    let events = turn(&mut c, &id, "patience").await.unwrap();
    let retries: Vec<&Value> = events.iter().filter(|e| e["type"] == "retrying").collect();
    assert_eq!(retries.len(), 2, "{:?}", types(&events));
    assert_eq!(retries[0]["attempt"], 1);
    assert_eq!(retries[1]["attempt"], 2);
    assert_eq!(retries[0]["max_attempts"], 3);
    assert_eq!(retries[0]["reason"], "HTTP 429");
    assert!(retries[0]["delay_ms"].as_u64().unwrap() <= 10);
    assert_eq!(reply(&events), "user said: patience");

    // More failures than attempts: the turn ends with the error.
    // (More than the attempts: the first turn's title request may take one.)
    fake.fail_next(10, 500);
    let events = turn(&mut c, &id, "again").await.unwrap();
    let error = events.iter().find(|e| e["type"] == "error").unwrap();
    assert!(
        error["message"].as_str().unwrap().contains("500"),
        "{error}"
    );
    assert_eq!(events.last().unwrap()["message"], "ready");
}

/// Needs bubblewrap (`scripts/install-sandbox.sh`); fails without it.
#[tokio::test]
async fn a_sandboxed_command_cannot_write_outside_the_workspace() {
    if jucode_sandbox_missing() {
        panic!("bubblewrap (bwrap) is not installed: run scripts/install-sandbox.sh");
    }
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake, "chat").await;
    let mut c = daemon.client().await.unwrap();
    let project = env.project("app");
    let outside = env.project("elsewhere");
    let id = session(&mut c, &project, json!({"approval_mode":"auto-edit"}), true)
        .await
        .unwrap();
    let target = outside.join("escaped.txt");
    let cmd = format!(
        "RUN: echo inside > inside.txt && echo ok; echo x > {}",
        target.display()
    );
    let events = turn(&mut c, &id, &cmd).await.unwrap();
    let output = events.iter().find(|e| e["type"] == "tool_output").unwrap();
    assert!(!types(&events).contains(&"approval_request"));
    assert_eq!(output["is_error"], true, "{output}");
    assert!(
        !output["output"].as_str().unwrap().contains("no sandbox"),
        "{output}"
    );
    assert!(project.join("inside.txt").exists(), "{output}");
    assert!(!target.exists());
}

fn jucode_sandbox_missing() -> bool {
    std::env::var_os("PATH")
        .map(|paths| !std::env::split_paths(&paths).any(|d| d.join("bwrap").is_file()))
        .unwrap_or(true)
}

// ---- MCP ----------------------------------------------------------------------------

/// The test MCP server `jucode-mcp-echo`, built on first use.
fn echo_bin() -> PathBuf {
    jucode_testsupport::build_bin("jucode-mcp-echo", "jucode-mcp-testserver").unwrap()
}

fn with_servers(fake: &FakeModel, servers: Value) -> Value {
    let mut config = fake.config("chat");
    config["mcp_servers"] = servers;
    config
}

fn server_state(event: &Value, name: &str) -> Option<String> {
    event["servers"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
        .and_then(|s| s["state"].as_str())
        .map(str::to_string)
}

#[tokio::test]
async fn an_mcp_servers_tool_is_called_over_stdio() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let config = with_servers(
        &fake,
        json!([{"name":"echo","transport":"stdio","command":s(&echo_bin())}]),
    );
    let daemon = Daemon::start_builtin(&env.home(), &config).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let id = session(&mut c, &env.project("app"), json!({}), true)
        .await
        .unwrap();

    // Manual mode: an MCP tool asks first; `always` lets the next call through.
    let call = r#"CALL mcp__echo__echo {"text":"hi"}"#;
    c.send(json!({"op":"user_message","session":id,"content":call}))
        .await
        .unwrap();
    let request = approval(&mut c, &id).await;
    assert_eq!(request["name"], "mcp__echo__echo");
    assert!(request["summary"].as_str().unwrap().contains("hi"));
    c.send(json!({"op":"approve","session":id,"call_id":request["call_id"],"decision":"allow","always":true}))
        .await
        .unwrap();
    let events = rest_of_turn(&mut c, &id).await.unwrap();
    let start = events.iter().find(|e| e["type"] == "tool_start").unwrap();
    assert_eq!(start["name"], "mcp__echo__echo");
    let output = events.iter().find(|e| e["type"] == "tool_output").unwrap();
    assert_eq!(output["output"], "hi");
    assert_eq!(output["is_error"], false);
    assert_eq!(reply(&events), "tool said: hi");

    // The model was offered the server's tools with their schemas.
    let (_, body) = fake.requests().into_iter().next().unwrap();
    let echo = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__echo__echo")
        .cloned()
        .unwrap();
    assert_eq!(
        echo["function"]["parameters"]["properties"]["text"]["type"],
        "string"
    );

    // `always` covered mcp__echo__echo only: another tool of the server asks again.
    c.send(
        json!({"op":"user_message","session":id,"content":r#"CALL mcp__echo__add {"a":2,"b":3}"#}),
    )
    .await
    .unwrap();
    let request = approval(&mut c, &id).await;
    assert_eq!(request["name"], "mcp__echo__add");
    c.send(json!({"op":"approve","session":id,"call_id":request["call_id"],"decision":"allow"}))
        .await
        .unwrap();
    let events = rest_of_turn(&mut c, &id).await.unwrap();
    assert_eq!(reply(&events), "tool said: 5");
    let events = turn(&mut c, &id, r#"CALL mcp__echo__echo {"text":"again"}"#)
        .await
        .unwrap();
    assert!(
        !types(&events).contains(&"approval_request"),
        "{:?}",
        types(&events)
    );
    assert_eq!(reply(&events), "tool said: again");

    // mcp_list answers with the connected server and its tools.
    c.send(json!({"op":"mcp_list","session":id})).await.unwrap();
    let list = c.recv_type("mcp_servers", Some(&id)).await.unwrap();
    assert_eq!(server_state(&list, "echo").as_deref(), Some("connected"));
    let tools: Vec<&str> = list["servers"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        tools.contains(&"echo") && tools.contains(&"add"),
        "{tools:?}"
    );
}

#[tokio::test]
async fn an_mcp_servers_tool_is_called_over_http() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let mut server = tokio::process::Command::new(echo_bin())
        .args(["--http", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = server.stdout.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    let url = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(url.starts_with("http://"), "{url}");
    let config = with_servers(&fake, json!([{"name":"web","transport":"http","url":url}]));
    let daemon = Daemon::start_builtin(&env.home(), &config).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let id = session(
        &mut c,
        &env.project("app"),
        json!({"approval_mode":"full-access"}),
        true,
    )
    .await
    .unwrap();
    let events = turn(&mut c, &id, r#"CALL mcp__web__echo {"text":"over http"}"#)
        .await
        .unwrap();
    assert!(!types(&events).contains(&"approval_request"));
    let output = events.iter().find(|e| e["type"] == "tool_output").unwrap();
    assert_eq!(output["name"], "mcp__web__echo");
    assert_eq!(output["output"], "over http");
    assert_eq!(reply(&events), "tool said: over http");

    // An error result reaches the model as one.
    let events = turn(&mut c, &id, "CALL mcp__web__fail {}").await.unwrap();
    let output = events.iter().find(|e| e["type"] == "tool_output").unwrap();
    assert_eq!(output["is_error"], true, "{output}");
    assert!(output["output"].as_str().unwrap().contains("always fails"));
}

#[tokio::test]
async fn mcp_set_without_a_session_saves_config_and_reaches_open_sessions() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake, "chat").await;
    let mut c = daemon.client().await.unwrap();
    let id = session(&mut c, &env.project("app"), json!({}), true)
        .await
        .unwrap();

    let bad = c.request(json!({"op":"mcp_set"})).await.unwrap();
    assert_eq!(bad["type"], "error");
    assert_eq!(bad["message"], "mcp_set requires a server object");
    let bad = c
        .request(json!({"op":"mcp_toggle","name":"echo"}))
        .await
        .unwrap();
    assert_eq!(bad["message"], "mcp_toggle requires name and enabled");

    let server = json!({"name":"echo","transport":"stdio","command":s(&echo_bin())});
    let saved = c
        .request(json!({"op":"mcp_set","server":server}))
        .await
        .unwrap();
    assert_eq!(saved["type"], "mcp_saved", "{saved}");
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(env.home().join("config.json")).unwrap())
            .unwrap();
    assert_eq!(config["mcp_servers"][0]["name"], "echo");
    assert_eq!(config["model"], "fake-model", "other keys stay");

    // The open session connects it and says so.
    let event = c
        .recv_until(|f| {
            f["type"] == "mcp_servers"
                && f["session"] == id.as_str()
                && server_state(f, "echo").as_deref() == Some("connected")
        })
        .await
        .unwrap();
    assert!(event["servers"][0]["tools"].as_array().unwrap().len() >= 2);

    let saved = c
        .request(json!({"op":"mcp_toggle","name":"echo","enabled":false}))
        .await
        .unwrap();
    assert_eq!(saved["type"], "mcp_saved");
    c.recv_until(|f| {
        f["type"] == "mcp_servers"
            && f["session"] == id.as_str()
            && server_state(f, "echo").as_deref() == Some("disabled")
    })
    .await
    .unwrap();
    let saved = c
        .request(json!({"op":"mcp_remove","name":"echo"}))
        .await
        .unwrap();
    assert_eq!(saved["type"], "mcp_saved");
    c.recv_until(|f| {
        f["type"] == "mcp_servers" && f["session"] == id.as_str() && f["servers"] == json!([])
    })
    .await
    .unwrap();
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(env.home().join("config.json")).unwrap())
            .unwrap();
    assert_eq!(config["mcp_servers"], json!([]));
}

// ---- auto mode, compaction, chats, images, bench -------------------------------------

#[tokio::test]
async fn auto_mode_asks_the_safety_model_which_allows_or_asks() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake, "anthropic").await;
    let mut c = daemon.client().await.unwrap();
    let project = env.project("app");
    let id = session(&mut c, &project, json!({"approval_mode":"auto"}), true)
        .await
        .unwrap();

    let safe =
        r#"CALL bash {"command":"echo fine > safe.txt","escalate":true,"justification":"test"}"#;
    let events = turn(&mut c, &id, safe).await.unwrap();
    assert!(
        !types(&events).contains(&"approval_request"),
        "{:?}",
        types(&events)
    );
    assert!(project.join("safe.txt").exists());
    let checks: Vec<Value> = fake
        .requests()
        .into_iter()
        .filter(|(_, b)| {
            b["system"]
                .as_str()
                .is_some_and(|s| s.to_ascii_lowercase().contains("safety check"))
        })
        .map(|(_, b)| b)
        .collect();
    assert_eq!(checks.len(), 1);
    assert!(checks[0].to_string().contains("echo fine"));

    // The fake safety model answers ASK for anything mentioning DANGER: a person decides.
    let risky =
        r#"CALL bash {"command":"echo DANGER > risky.txt","escalate":true,"justification":"test"}"#;
    c.send(json!({"op":"user_message","session":id,"content":risky}))
        .await
        .unwrap();
    let request = approval(&mut c, &id).await;
    assert!(request["summary"].as_str().unwrap().contains("DANGER"));
    c.send(json!({"op":"approve","session":id,"call_id":request["call_id"],"decision":"deny"}))
        .await
        .unwrap();
    rest_of_turn(&mut c, &id).await.unwrap();
    assert!(!project.join("risky.txt").exists());
}

#[tokio::test]
async fn compact_summarises_and_shortens_the_context() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake, "chat").await;
    let mut c = daemon.client().await.unwrap();
    let id = session(&mut c, &env.project("app"), json!({}), true)
        .await
        .unwrap();
    turn(&mut c, &id, "first").await.unwrap();
    turn(&mut c, &id, "second").await.unwrap();
    let before = fake
        .requests()
        .into_iter()
        .rfind(|(_, b)| b["stream"] == true)
        .unwrap()
        .1["messages"]
        .as_array()
        .unwrap()
        .len();

    c.send(json!({"op":"command","session":id,"input":"/compact"}))
        .await
        .unwrap();
    let events = rest_of_turn(&mut c, &id).await.unwrap();
    let kinds = types(&events);
    let start = kinds.iter().position(|k| *k == "compaction_start").unwrap();
    let end = kinds.iter().position(|k| *k == "compaction_end").unwrap();
    assert!(start < end, "{kinds:?}");
    assert!(kinds.contains(&"compaction_progress"));

    turn(&mut c, &id, "third").await.unwrap();
    let (_, body) = fake
        .requests()
        .into_iter()
        .rfind(|(_, b)| b["stream"] == true && b.to_string().contains("third"))
        .unwrap();
    let messages = body["messages"].as_array().unwrap();
    assert!(
        messages.len() < before + 2,
        "{} vs {before}",
        messages.len()
    );
    assert!(
        messages[1]["content"]
            .as_str()
            .unwrap()
            .contains("summary of")
    );
}

#[tokio::test]
async fn a_chat_session_runs_in_the_chats_folder_with_the_chat_prompt() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let chats = env.home().join("chats");
    std::fs::create_dir_all(&chats).unwrap();
    std::fs::write(chats.join("AGENTS.md"), "Always answer in Latin.").unwrap();
    let daemon = start(&env, &fake, "chat").await;
    let mut c = daemon.client().await.unwrap();
    let reply_frame = c
        .request(json!({"op":"session_create","chat":true}))
        .await
        .unwrap();
    let id = reply_frame["session"].as_str().unwrap().to_string();
    let startup = c.recv_type("startup", Some(&id)).await.unwrap();
    assert_eq!(startup["cwd"], s(&chats));
    c.request(json!({"op":"watch","session":id})).await.unwrap();
    let events = turn(&mut c, &id, "SYSTEM").await.unwrap();
    let prompt = reply(&events);
    assert!(prompt.contains("in a chat"), "{prompt}");
    assert!(!prompt.contains("Latin"), "{prompt}");
    assert!(!prompt.contains("Project instructions"), "{prompt}");
}

#[tokio::test]
async fn images_are_attached_and_echoed() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake, "anthropic").await;
    let mut c = daemon.client().await.unwrap();
    let project = env.project("app");
    let shot = project.join("shot.png");
    std::fs::write(&shot, b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    let outside = env.project("elsewhere").join("x.png");
    std::fs::write(&outside, b"\x89PNG\r\n\x1a\n").unwrap();
    let id = session(&mut c, &project, json!({}), true).await.unwrap();
    c.send(
        json!({"op":"user_message","session":id,"content":"look","images":[s(&shot), s(&outside)]}),
    )
    .await
    .unwrap();
    let info = c.recv_type("info", Some(&id)).await.unwrap();
    assert!(
        info["message"].as_str().unwrap().contains("x.png"),
        "{info}"
    );
    let events = until_ready(&mut c, &id).await.unwrap();
    assert_eq!(events[0]["images"], json!([s(&shot)]));
    assert_eq!(reply(&events), "user said: look [1 images]");
    let (_, body) = fake.requests().into_iter().next().unwrap();
    let block = &body["messages"][0]["content"][0];
    assert_eq!(block["type"], "image");
    assert_eq!(block["source"]["media_type"], "image/png");
}

#[tokio::test]
async fn the_latency_bench_sees_every_token_on_both_paths() {
    let report =
        jucode_testsupport::bench_latency::bench_latency(20, std::time::Duration::from_millis(2))
            .await
            .unwrap();
    eprintln!("{report:?}");
    assert_eq!(report.tokens, 20);
    assert!(report.daemon.p50 <= report.daemon.p99);
    assert!(report.direct.p50 <= report.direct.p99);
}

/// `session_history` lists every conversation saved in a directory, also those the daemon
/// never hosted (a `jucode-daemon serve` run writes the same log), each once.
#[tokio::test]
async fn history_lists_conversations_saved_by_others_once() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake, "chat").await;
    let mut c = daemon.client().await.unwrap();
    let project = env.project("app");
    let id = session(&mut c, &project, json!({}), true).await.unwrap();
    turn(&mut c, &id, "hello there").await.unwrap();
    // Another program's conversation in the same directory, and one elsewhere.
    let sessions = env.home().join("sessions");
    std::fs::copy(
        sessions.join(format!("{id}.jsonl")),
        sessions.join("from-serve.jsonl"),
    )
    .unwrap();
    let elsewhere = std::fs::read_to_string(sessions.join(format!("{id}.jsonl")))
        .unwrap()
        .replace(&project.display().to_string(), "/somewhere/else");
    std::fs::write(sessions.join("elsewhere.jsonl"), elsewhere).unwrap();

    let history = c
        .request(json!({"op":"session_history","cwd":project.display().to_string()}))
        .await
        .unwrap();
    let rows = history["sessions"].as_array().unwrap();
    let ids: Vec<&str> = rows.iter().filter_map(|r| r["session"].as_str()).collect();
    assert_eq!(ids.iter().filter(|s| **s == id).count(), 1, "{history}");
    assert!(ids.contains(&"from-serve"), "{history}");
    assert!(!ids.contains(&"elsewhere"), "{history}");
    let other = rows.iter().find(|r| r["session"] == "from-serve").unwrap();
    assert_eq!(other["engine"], "jucode");
    assert_eq!(other["open"], false);
    assert_eq!(other["entries"], 2);
    assert_eq!(other["title"], "hello there");
}
