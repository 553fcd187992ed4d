//! A decision on a deferred action that a SIGKILL cut off still reaches its session, once,
//! when the session next starts: the state a kill leaves is written into the logs (the crash
//! loop found both cuts), then the real daemon with the built-in engine is started on it.
//!
//! - Cut after the daemon recorded the decision (`actions.jsonl`) and before the engine did:
//!   the engine announces its open actions at its start and the daemon sends the decision
//!   again; the command runs once and the session hears its outcome.
//! - Cut after the engine recorded the decision and before its outcome: the session hears
//!   that the outcome is unknown, and the command is not run again.
//!
//! Build first: `cargo build -p jucode-daemon`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::path::Path;

use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

/// Appends one JSON line to `path`.
fn append(path: &Path, line: &Value) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    writeln!(f, "{line}").unwrap();
}

/// A manual-mode session nobody watches defers an escalated command that appends to
/// `out.txt`; the daemon is stopped. Returns the session, the action and the project.
async fn deferred(env: &TestHome, fake: &FakeModel) -> (String, Value, std::path::PathBuf) {
    let project = env.project("app");
    let mut daemon = Daemon::start_builtin(&env.home(), &fake.config("chat"))
        .await
        .unwrap();
    let mut c = daemon.client().await.unwrap();
    let created = c
        .request(json!({"op":"session_create","cwd":project,
            "options":{"approval_mode":"manual"}}))
        .await
        .unwrap();
    let session = created["session"].as_str().unwrap().to_string();
    c.recv_type("mcp_servers", Some(&session)).await.unwrap();
    let args = json!({"command":"echo ran >> out.txt; echo done","escalate":true,
        "justification":"the test asks"});
    c.send(json!({"op":"user_message","session":session,"content":format!("CALL bash {args}")}))
        .await
        .unwrap();
    let deferred = c
        .recv_type("action_deferred", Some(&session))
        .await
        .unwrap();
    c.recv_until(|f| {
        f["session"] == session.as_str() && f["type"] == "status" && f["message"] == "ready"
    })
    .await
    .unwrap();
    daemon.stop().await.unwrap();
    (session, deferred, project)
}

/// The decision record the kill left: allowed, when the action was made (a week later it
/// leaves the closed list).
fn decided(action: &Value) -> Value {
    json!({"kind":"decided","id":action["id"],"allow":true,"at":action["created_at"]})
}

/// Opens `session` and returns the first user message it gets that names `action`.
async fn told(c: &mut Client, session: &str, action: &str) -> String {
    let opened = c
        .request(json!({"op":"session_open","session":session}))
        .await
        .unwrap();
    assert_eq!(opened["type"], "session_opened", "{opened}");
    let head = format!("[deferred action {action} ");
    let mut announced = false;
    let message = c
        .recv_until(|f| {
            announced |= f["type"] == "action_deferred";
            f["type"] == "user_message"
                && f["content"].as_str().is_some_and(|t| t.starts_with(&head))
        })
        .await
        .unwrap();
    // The engine's announcement of an action the daemon holds is not news to clients.
    assert!(!announced, "an action recorded already was announced again");
    message["content"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_decision_the_engine_never_heard_is_sent_again_at_its_start() {
    let env = TestHome::new();
    let fake = FakeModel::start().await.unwrap();
    let (session, action, project) = deferred(&env, &fake).await;
    let record = decided(&action);
    let action = action["id"].as_str().unwrap().to_string();
    // The kill came after the daemon's record, before the engine's.
    append(&env.home().join("daemon/actions.jsonl"), &record);
    let daemon = Daemon::start_builtin(&env.home(), &fake.config("chat"))
        .await
        .unwrap();
    let mut c = daemon.client().await.unwrap();
    let text = told(&mut c, &session, &action).await;
    assert!(
        text.starts_with(&format!("[deferred action {action} approved and executed]")),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("out.txt")).unwrap(),
        "ran\n"
    );
    // Decided once: the list has it closed as allowed.
    let list = c.request(json!({"op":"actions_list"})).await.unwrap();
    assert_eq!(list["actions"], json!([]));
    assert_eq!(list["closed"][0]["closed_reason"], "allow");
}

#[tokio::test]
async fn a_decision_whose_outcome_a_kill_cut_off_is_told_once_and_not_run_again() {
    let env = TestHome::new();
    let fake = FakeModel::start().await.unwrap();
    let (session, action, project) = deferred(&env, &fake).await;
    let record = decided(&action);
    let action = action["id"].as_str().unwrap().to_string();
    // The kill came after both records of the decision, before the command's outcome.
    append(&env.home().join("daemon/actions.jsonl"), &record);
    append(
        &env.home().join(format!("sessions/{session}.jsonl")),
        &record,
    );
    let mut daemon = Daemon::start_builtin(&env.home(), &fake.config("chat"))
        .await
        .unwrap();
    let mut c = daemon.client().await.unwrap();
    let text = told(&mut c, &session, &action).await;
    assert!(
        text.starts_with(&format!(
            "[deferred action {action} approved, outcome unknown]"
        )),
        "{text}"
    );
    assert!(!project.join("out.txt").exists());
    c.recv_until(|f| {
        f["session"] == session.as_str() && f["type"] == "status" && f["message"] == "ready"
    })
    .await
    .unwrap();
    // Heard: the next start tells nothing again.
    daemon.stop().await.unwrap();
    let daemon = Daemon::start_builtin(&env.home(), &fake.config("chat"))
        .await
        .unwrap();
    let mut c = daemon.client().await.unwrap();
    c.request(json!({"op":"session_open","session":session}))
        .await
        .unwrap();
    c.send(json!({"op":"user_message","session":session,"content":"after"}))
        .await
        .unwrap();
    let reply = c
        .recv_until(|f| f["type"] == "user_message" && f["session"] == session.as_str())
        .await
        .unwrap();
    assert_eq!(reply["content"], "after", "told again: {reply}");
    let saved = env.saved_user_messages().unwrap();
    let heard = saved
        .keys()
        .filter(|t| t.starts_with(&format!("[deferred action {action} ")))
        .count();
    assert_eq!(heard, 1);
    assert!(!project.join("out.txt").exists());
}
