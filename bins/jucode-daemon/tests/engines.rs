//! Engines other than jucode, hosted by the real daemon binary: Claude Code (here its fake,
//! replaying frames recorded from the real CLI) behaves like any session to every client.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use jucode_testsupport::Daemon;
use serde_json::json;

/// A fake engine CLI of `jucode-fake-engines`, built on first use.
fn sibling_bin(name: &str) -> PathBuf {
    jucode_testsupport::build_bin(name, "jucode-fake-engines").unwrap()
}

fn fixture(name: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/engines");
    root.join(name).display().to_string()
}

#[tokio::test]
async fn a_claude_session_runs_turns_and_shares_approvals_with_every_client() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let cwd = root.join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    let daemon = Daemon::start(&root.join(".jucode")).await.unwrap();
    let mut a = daemon.client().await.unwrap();
    let mut b = daemon.client().await.unwrap();
    let options = json!({
        "bin": sibling_bin("fake-claude").display().to_string(),
        "env": {
            "FAKE_ENGINE_SCRIPT": fixture("claude-code-2.1.332-print-3turns.jsonl"),
            "CLAUDE_CONFIG_DIR": root.join("claude-config").display().to_string(),
        },
    });
    let created = a
        .request(json!({"op":"session_create","cwd":cwd.display().to_string(),"engine":"claude","options":options}))
        .await
        .unwrap();
    assert_eq!(created["type"], "session_created", "{created}");
    let session = created["session"].as_str().unwrap().to_string();

    a.send(json!({"op":"user_message","session":session,"content":"RUN: echo hi"}))
        .await
        .unwrap();
    let out = b.recv_type("tool_output", Some(&session)).await.unwrap();
    assert_eq!(out["output"], "hi");
    b.recv_until(|f| {
        f["type"] == "status" && f["message"] == "ready" && f["session"] == session.as_str()
    })
    .await
    .unwrap();

    // The prompt reaches every client; the one that answers first decides.
    a.send(json!({"op":"user_message","session":session,"content":"RUN: touch hi.txt && echo hi"}))
        .await
        .unwrap();
    let request = b
        .recv_type("approval_request", Some(&session))
        .await
        .unwrap();
    assert_eq!(request["summary"], "touch hi.txt && echo hi");
    b.send(
        json!({"op":"approve","session":session,"call_id":request["call_id"],"decision":"allow"}),
    )
    .await
    .unwrap();
    let out = a.recv_type("tool_output", Some(&session)).await.unwrap();
    assert_eq!(out["is_error"], false);
    a.recv_until(|f| {
        f["type"] == "status" && f["message"] == "ready" && f["session"] == session.as_str()
    })
    .await
    .unwrap();

    // A watcher's snapshot is rebuilt by the daemon from the engine's events.
    a.request(json!({"op":"watch","session":session}))
        .await
        .unwrap();
    let transcript = a.recv_type("transcript", Some(&session)).await.unwrap();
    assert_eq!(
        transcript["items"][0],
        json!({"role":"user","content":"RUN: echo hi"})
    );
    let list = a.request(json!({"op":"session_list"})).await.unwrap();
    assert_eq!(list["sessions"][0]["engine"], "claude");
    assert_eq!(list["sessions"][0]["title"], "RUN: echo hi");
}

/// Codex: `session_created` comes once the thread is open; a refused `thread/start` is an error
/// for the creating client instead.
#[tokio::test]
async fn a_codex_session_is_created_once_its_thread_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let cwd = root.join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    let daemon = Daemon::start(&root.join(".jucode")).await.unwrap();
    let mut a = daemon.client().await.unwrap();
    let options = |script: &str| {
        json!({
            "bin": sibling_bin("fake-codex").display().to_string(),
            "env": {"FAKE_ENGINE_SCRIPT": fixture(script)},
        })
    };
    let create = |script: &str| json!({"op":"session_create","cwd":cwd.display().to_string(),"engine":"codex","options":options(script)});
    let created = a
        .request(create("codex-0.171.0-app-server-approve.jsonl"))
        .await
        .unwrap();
    assert_eq!(created["type"], "session_created", "{created}");
    let session = created["session"].as_str().unwrap().to_string();
    let startup = a.recv_type("startup", Some(&session)).await.unwrap();
    assert_eq!(startup["thread_id"], "01a2293b-ffda-7011-939a-d20278535ef1");

    let refused = a
        .request(create("codex-thread-start-fails.jsonl"))
        .await
        .unwrap();
    assert_eq!(refused["type"], "error", "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("model `nope` is not available"),
        "{message}"
    );
}
