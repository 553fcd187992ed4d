//! A message handed to a Claude Code or Codex agent session and never echoed (the CLI was
//! busy, the adapter held it queued) when the daemon is SIGKILLed: at the next start the
//! daemon reads the engine's own saved conversation (Claude Code's session JSONL, Codex's
//! rollout), finds it absent and sends it again, once, to the same session; it is announced
//! once. The same text typed into the session before a message of it is not taken for it.
//! The fake CLIs replay real recordings and save their conversation where and as the
//! real ones do (`FAKE_ENGINE_SAVE`).
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-fake-engines`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq)]
enum Cli {
    Claude,
    Codex,
}

/// A recording with its user texts any (`*`); `busy`: cut at the end of its first turn, so the
/// CLI never finishes it and the next message waits in the adapter's queue.
fn script(env: &TestHome, recording: &str, busy: bool) -> PathBuf {
    let recorded = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/engines")
        .join(recording);
    let mut out = Vec::new();
    for line in std::fs::read_to_string(recorded).unwrap().lines() {
        let mut step: Value = serde_json::from_str(line).unwrap();
        if step.pointer("/meta/exit_code").is_some() {
            continue;
        }
        let frame = step["frame"].clone();
        let turn_end = frame["method"] == "turn/completed"
            || (frame["type"] == "result" || frame.get("stop_reason").is_some())
                && frame.get("total_cost_usd").is_some();
        if busy && turn_end {
            break;
        }
        if step["dir"] == "in" && frame["type"] == "user" {
            step["frame"]["message"]["content"] = json!("*");
        }
        if step["dir"] == "in" && frame["method"] == "turn/start" {
            step["frame"]["params"]["input"][0]["text"] = json!("*");
        }
        out.push(step.to_string());
    }
    let path = env
        .root()
        .join(format!("{recording}.{}", if busy { "busy" } else { "all" }));
    std::fs::write(&path, out.join("\n")).unwrap();
    path
}

/// Claude Code's first recording played as one whole turn and then a second turn that never
/// ends (as [`script`] with `busy`), in one process.
fn claude_two_turns(env: &TestHome) -> PathBuf {
    let whole = std::fs::read_to_string(script(
        env,
        "claude-code-2.1.332-interop-resume-first.jsonl",
        false,
    ))
    .unwrap();
    let steps: Vec<Value> = whole
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let user = steps
        .iter()
        .position(|s| s["dir"] == "in" && s["frame"]["type"] == "user")
        .unwrap();
    let mut out: Vec<String> = steps.iter().map(Value::to_string).collect();
    for step in &steps[user..] {
        let frame = &step["frame"];
        if frame.get("total_cost_usd").is_some() {
            break;
        }
        // The answer to `initialize` belongs to the first turn only.
        if frame["type"] != "control_response" {
            out.push(step.to_string());
        }
    }
    let path = env.root().join("claude-two-turns.jsonl");
    std::fs::write(&path, out.join("\n")).unwrap();
    path
}

async fn daemon(env: &TestHome, cli: Cli, first: bool) -> Daemon {
    let (bin, var, recordings) = match cli {
        Cli::Claude => (
            "fake-claude",
            "CLAUDE_BIN",
            [
                "claude-code-2.1.332-interop-resume-first.jsonl",
                "claude-code-2.1.332-interop-resume.jsonl",
            ],
        ),
        Cli::Codex => (
            "fake-codex",
            "CODEX_BIN",
            [
                "codex-0.171.0-interop-resume-first.jsonl",
                "codex-0.171.0-interop-resume.jsonl",
            ],
        ),
    };
    let fake = jucode_testsupport::build_bin(bin, "jucode-fake-engines").unwrap();
    let mut b = Daemon::builder(&env.home())
        .env(var, &fake)
        .env("FAKE_ENGINE_SAVE", "1")
        .env("CLAUDE_CONFIG_DIR", env.root().join("claude-config"))
        .env("CODEX_HOME", env.root().join("codex-home"));
    b = match (cli, first) {
        // Claude Code resumed replays the second recording.
        (Cli::Claude, _) => b
            .env("FAKE_ENGINE_SCRIPT", script(env, recordings[0], true))
            .env(
                "FAKE_ENGINE_SCRIPT_RESUME",
                script(env, recordings[1], false),
            ),
        (Cli::Codex, true) => b.env("FAKE_ENGINE_SCRIPT", script(env, recordings[0], true)),
        (Cli::Codex, false) => b.env("FAKE_ENGINE_SCRIPT", script(env, recordings[1], false)),
    };
    b.start().await.unwrap()
}

async fn send(c: &mut Client, body: &str) -> String {
    let reply = c
        .request(json!({"op": "message_send", "agent": "ops", "body": body}))
        .await
        .unwrap();
    assert_eq!(reply["type"], "message_accepted", "{reply}");
    reply["message"].as_str().unwrap().to_string()
}

fn kinds_of(env: &TestHome, id: &str) -> Vec<String> {
    std::fs::read_to_string(env.home().join("daemon/messages.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["id"] == id)
        .map(|r| r["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The user texts the engine's own saved conversation holds.
fn saved_users(env: &TestHome, cli: Cli) -> Vec<String> {
    let (dir, user) = match cli {
        Cli::Claude => ("claude-config/projects", "/message/content"),
        Cli::Codex => ("codex-home/sessions", "/payload/content/0/text"),
    };
    let mut out = Vec::new();
    for entry in walk(&env.root().join(dir)) {
        for line in std::fs::read_to_string(entry).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            let is_user = v["type"] == "user" || v.pointer("/payload/role") == Some(&json!("user"));
            if let Some(text) = v.pointer(user).and_then(Value::as_str).filter(|_| is_user) {
                out.push(text.to_string());
            }
        }
    }
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Appends `text` as a user message to the engine's one saved conversation, in its format: the
/// state a kill leaves when the CLI took the message just before it and its echo never reached
/// the hub.
fn save_user(env: &TestHome, cli: Cli, text: &str) {
    let dir = match cli {
        Cli::Claude => "claude-config/projects",
        Cli::Codex => "codex-home/sessions",
    };
    let files = walk(&env.root().join(dir));
    assert_eq!(files.len(), 1, "{files:?}");
    let line = match cli {
        Cli::Claude => {
            json!({"type": "user", "isSidechain": false, "message": {"role": "user", "content": text}})
        }
        Cli::Codex => {
            json!({"type": "response_item", "payload": {"type": "message", "role": "user",
                              "content": [{"type": "input_text", "text": text}]}})
        }
    };
    let mut body = std::fs::read_to_string(&files[0]).unwrap();
    body.push_str(&format!("{line}\n"));
    std::fs::write(&files[0], body).unwrap();
}

/// Waits (bounded) until `id` has a record of `kind`: the check at start runs off the clients.
async fn settled(env: &TestHome, id: &str, kind: &str) {
    for _ in 0..500 {
        if kinds_of(env, id).iter().any(|k| k == kind) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("{id} never got a {kind} record: {:?}", kinds_of(env, id));
}

/// Up to the kill: `first` taken, `second` handed over and waiting in the adapter.
async fn kill_with_one_queued(env: &TestHome, cli: Cli) -> (String, String, String) {
    let engine = if cli == Cli::Claude {
        "claude"
    } else {
        "codex"
    };
    env.agent(
        "ops",
        &json!({"name": "ops", "cwd": env.project("ops"), "engine": engine}),
    );
    let mut d = daemon(env, cli, true).await;
    let mut c = d.client().await.unwrap();
    let first = send(&mut c, "first").await;
    let delivered = c.recv_type("message_delivered", None).await.unwrap();
    let session = delivered["session"].as_str().unwrap().to_string();
    c.recv_until(|f| f["type"] == "user_message" && f["session"] == session.as_str())
        .await
        .unwrap();
    // The CLI is in its first turn for good: the second waits in the adapter.
    let second = send(&mut c, "second").await;
    let delivered = c
        .recv_until(|f| f["type"] == "message_delivered" && f["id"] == second.as_str())
        .await
        .unwrap();
    assert_eq!(delivered["session"], session.as_str());
    assert_eq!(kinds_of(env, &first), ["message", "delivered", "received"]);
    assert_eq!(kinds_of(env, &second), ["message", "delivered"]);
    d.kill9_and_wait().await.unwrap();
    drop(c);
    assert_eq!(saved_users(env, cli), ["first"]);
    (first, second, session)
}

/// The CLI had taken it: found in its saved conversation, recorded received, not sent again.
async fn a_message_the_cli_saved_before_a_kill_is_received_once(cli: Cli) {
    let env = TestHome::new();
    let (_, second, _) = kill_with_one_queued(&env, cli).await;
    save_user(&env, cli, "second");
    let mut d = daemon(&env, cli, false).await;
    let mut c = d.client().await.unwrap();
    settled(&env, &second, "received").await;
    assert_eq!(
        kinds_of(&env, &second),
        ["message", "delivered", "received"]
    );
    // The session was not reopened to send it again.
    let sessions = c.request(json!({"op": "session_list"})).await.unwrap();
    assert_eq!(sessions["sessions"][0]["open"], false, "{sessions}");
    assert_eq!(saved_users(&env, cli), ["first", "second"]);
    d.stop().await.unwrap();
}

async fn a_message_queued_in_the_adapter_at_a_kill_goes_again_once(cli: Cli) {
    let env = TestHome::new();
    let (first, second, session) = kill_with_one_queued(&env, cli).await;
    let d = daemon(&env, cli, false).await;
    let mut c = d.client().await.unwrap();
    let echo = c
        .recv_until(|f| f["type"] == "user_message" || f["type"] == "message_delivered")
        .await
        .unwrap();
    assert_eq!(echo["type"], "user_message", "announced again: {echo}");
    assert_eq!(echo["content"], "second");
    assert_eq!(echo["session"], session.as_str());
    c.recv_until(|f| {
        f["session"] == session.as_str() && f["type"] == "status" && f["message"] == "ready"
    })
    .await
    .unwrap();
    assert_eq!(
        kinds_of(&env, &second),
        ["message", "delivered", "delivered", "received"]
    );
    assert_eq!(kinds_of(&env, &first), ["message", "delivered", "received"]);
    assert_eq!(saved_users(&env, cli), ["first", "second"]);
}

#[tokio::test]
async fn claude_code_a_message_queued_at_a_kill_is_found_absent_and_sent_again_once() {
    a_message_queued_in_the_adapter_at_a_kill_goes_again_once(Cli::Claude).await;
}

#[tokio::test]
async fn claude_code_a_message_saved_before_a_kill_is_received_and_not_sent_again() {
    a_message_the_cli_saved_before_a_kill_is_received_once(Cli::Claude).await;
}

#[tokio::test]
async fn codex_a_message_saved_before_a_kill_is_received_and_not_sent_again() {
    a_message_the_cli_saved_before_a_kill_is_received_once(Cli::Codex).await;
}

#[tokio::test]
async fn codex_a_message_queued_at_a_kill_is_found_absent_and_sent_again_once() {
    a_message_queued_in_the_adapter_at_a_kill_goes_again_once(Cli::Codex).await;
}

/// The same text typed into the agent's session before a `message_send` of it, on Claude Code:
/// the typed copy is in the session JSONL, the message (queued at the kill) is not. It is sent
/// again: the copy from before its hand-over is not taken for it.
#[tokio::test]
async fn claude_code_a_same_text_typed_before_the_hand_over_is_not_taken_for_the_message() {
    let env = TestHome::new();
    env.agent(
        "ops",
        &json!({"name": "ops", "cwd": env.project("ops"), "engine": "claude"}),
    );
    let fake = jucode_testsupport::build_bin("fake-claude", "jucode-fake-engines").unwrap();
    let start = |env: &TestHome, first: PathBuf| {
        Daemon::builder(&env.home())
            .env("CLAUDE_BIN", &fake)
            .env("FAKE_ENGINE_SAVE", "1")
            .env("CLAUDE_CONFIG_DIR", env.root().join("claude-config"))
            .env("FAKE_ENGINE_SCRIPT", first)
            .env(
                "FAKE_ENGINE_SCRIPT_RESUME",
                script(env, "claude-code-2.1.332-interop-resume.jsonl", false),
            )
            .start()
    };
    let mut d = start(&env, claude_two_turns(&env)).await.unwrap();
    let mut c = d.client().await.unwrap();
    let created = c
        .request(json!({"op": "session_create", "agent": "ops"}))
        .await
        .unwrap();
    assert_eq!(created["type"], "session_created", "{created}");
    let session = created["session"].as_str().unwrap().to_string();
    c.send(json!({"op": "user_message", "session": session, "content": "same"}))
        .await
        .unwrap();
    let ready = |s: &str| {
        let s = s.to_string();
        move |f: &Value| {
            f["session"] == s.as_str() && f["type"] == "status" && f["message"] == "ready"
        }
    };
    c.recv_until(ready(&session)).await.unwrap();
    // A message starts the second turn, which never ends; the same text waits behind it.
    send(&mut c, "x").await;
    c.recv_until(|f| f["type"] == "user_message" && f["content"] == "x")
        .await
        .unwrap();
    let same = send(&mut c, "same").await;
    let delivered = c
        .recv_until(|f| f["type"] == "message_delivered" && f["id"] == same.as_str())
        .await
        .unwrap();
    assert_eq!(delivered["session"], session.as_str());
    d.kill9_and_wait().await.unwrap();
    drop(c);
    assert_eq!(saved_users(&env, Cli::Claude), ["same", "x"]);

    let mut d = start(&env, claude_two_turns(&env)).await.unwrap();
    let mut c = d.client().await.unwrap();
    let echo = c.recv_type("user_message", Some(&session)).await.unwrap();
    assert_eq!(echo["content"], "same");
    c.recv_until(ready(&session)).await.unwrap();
    assert_eq!(
        kinds_of(&env, &same),
        ["message", "delivered", "delivered", "received"]
    );
    assert_eq!(saved_users(&env, Cli::Claude), ["same", "x", "same"]);
    d.stop().await.unwrap();
}
