//! `question_list`, `question_answer` and the question kind of `item_close` / `item_reopen` on
//! the real daemon binary, for a local client and a paired device. Questions are asked by
//! agent sessions through their tools; here they are written to `questions.jsonl` (and their
//! sessions to `sessions.jsonl`) before the daemon starts.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_testsupport::{Daemon, TestHome};
use serde_json::{Value, json};

/// A deadline far in the future, so none passes during a test.
const LATER: u64 = 4_000_000_000_000;

fn asked(id: &str, session: &str) -> Value {
    json!({"kind":"asked","id":id,"agent":"ops","session":session,"title":format!("{id}?"),
        "body":"b","assumption":"a","default":"d","importance":"normal","due_at":LATER,"at":10})
}

fn listed(id: &str, session: &str) -> Value {
    json!({"id":id,"agent":"ops","session":session,"title":format!("{id}?"),"body":"b",
        "assumption":"a","default":"d","importance":"normal","due_at":LATER,"asked_at":10})
}

/// Agent `ops`, its archived session `s1` and two open questions asked in it.
fn seed(env: &TestHome) {
    let cwd = env.project("ops");
    let dir = env.home().join("agents/ops");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("agent.json"),
        json!({"name":"Ops","cwd":cwd}).to_string(),
    )
    .unwrap();
    env.seed_log(
        "sessions.jsonl",
        &[
            json!({"kind":"open","session":"s1","cwd":cwd,"engine":"jucode","agent":"ops","at":1}),
            json!({"kind":"close","session":"s1","at":2}),
            json!({"kind":"meta","session":"s1","archived":true,"at":3}),
        ],
    );
    env.seed_log("questions.jsonl", &[asked("q-1", "s1"), asked("q-2", "s1")]);
}

#[tokio::test]
async fn open_questions_come_on_connect_and_from_question_list_for_devices_too() {
    let env = TestHome::new();
    seed(&env);
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let open = json!([listed("q-1", "s1"), listed("q-2", "s1")]);
    let batch = &desk.connect_batch[5];
    assert_eq!(batch["type"], "questions");
    assert_eq!(batch["questions"], open);
    assert_eq!(batch["closed"], json!([]));
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();
    for client in [&mut desk, &mut phone] {
        let list = client.request(json!({"op":"question_list"})).await.unwrap();
        assert_eq!(list["type"], "questions");
        assert_eq!(list["questions"], open);
    }
}

#[tokio::test]
async fn bad_answers_are_refused_and_the_question_stays_open() {
    let env = TestHome::new();
    seed(&env);
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();
    let long = "x".repeat(8001);
    for (frame, message) in [
        (
            json!({"op":"question_answer","question":"q-9","answer":"yes"}),
            "unknown question q-9".to_string(),
        ),
        (
            json!({"op":"question_answer","question":"q-1","answer":"  "}),
            "question_answer: answer must not be empty".into(),
        ),
        (
            json!({"op":"question_answer","question":"q-1"}),
            "question_answer: missing field `answer`".into(),
        ),
        (
            json!({"op":"question_answer","question":"q-1","answer":long}),
            "question_answer: answer is longer than 8000 characters".into(),
        ),
    ] {
        for client in [&mut desk, &mut phone] {
            let err = client.request(frame.clone()).await.unwrap();
            assert_eq!(err["type"], "error");
            assert_eq!(err["message"], message.as_str());
        }
    }
    let list = desk.request(json!({"op":"question_list"})).await.unwrap();
    assert_eq!(list["questions"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_question_closes_without_an_answer_and_reopens_with_its_session_out_of_the_archive() {
    let env = TestHome::new();
    seed(&env);
    let mut daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();

    let closed = phone
        .request(json!({"op":"item_close","kind":"question","item":"q-1","reason":"not needed"}))
        .await
        .unwrap();
    assert_eq!(closed["type"], "item_closed");
    assert_eq!(closed["item"], "q-1");
    let list = desk.recv_type("questions", None).await.unwrap();
    assert_eq!(list["questions"], json!([listed("q-2", "s1")]));
    let mut entry = listed("q-1", "s1");
    entry["closed_by"] = json!("user");
    entry["closed_reason"] = json!("not needed");
    entry["closed_at"] = list["closed"][0]["closed_at"].clone();
    assert!(entry["closed_at"].is_u64());
    assert_eq!(list["closed"], json!([entry]));

    for (frame, message) in [
        (
            json!({"op":"question_answer","question":"q-1","answer":"yes"}),
            "question q-1 is closed; reopen it first",
        ),
        (
            json!({"op":"item_close","kind":"question","item":"q-1"}),
            "question q-1 is not open",
        ),
        (
            json!({"op":"item_reopen","kind":"question","item":"q-2"}),
            "question q-2 is not closed",
        ),
        (
            json!({"op":"item_close","kind":"question","item":"q-9"}),
            "unknown question q-9",
        ),
        (
            json!({"op":"item_close","kind":"task","item":"q-2"}),
            "unknown item kind `task` (expected question or action)",
        ),
    ] {
        let err = desk.request(frame).await.unwrap();
        assert_eq!(err["message"], message);
    }

    // Closed for good until reopened, across a SIGKILL.
    daemon.kill9_and_wait().await.unwrap();
    let mut daemon = Daemon::start(&env.home()).await.unwrap();
    let mut desk = daemon.client().await.unwrap();
    assert_eq!(desk.connect_batch[5]["closed"][0]["id"], "q-1");
    assert_eq!(desk.connect_batch[1]["sessions"][0]["archived"], true);

    let reopened = desk
        .request(json!({"op":"item_reopen","kind":"question","item":"q-1"}))
        .await
        .unwrap();
    assert_eq!(reopened["type"], "item_reopened");
    assert_eq!(reopened["item"], "q-1");
    let list = desk.recv_type("questions", None).await.unwrap();
    assert_eq!(list["questions"].as_array().unwrap().len(), 2);
    assert_eq!(list["closed"], json!([]));
    let sessions = desk.recv_type("sessions", None).await.unwrap();
    assert_eq!(sessions["sessions"][0]["session"], "s1");
    assert_eq!(sessions["sessions"][0]["archived"], false);

    daemon.stop().await.unwrap();
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let desk = daemon.client().await.unwrap();
    assert_eq!(desk.connect_batch[1]["sessions"][0]["archived"], false);
    assert_eq!(
        desk.connect_batch[5]["questions"].as_array().unwrap().len(),
        2
    );
}

#[tokio::test]
async fn a_reopened_action_takes_its_session_out_of_the_archive() {
    let env = TestHome::new();
    let project = env.project("app");
    let daemon = env.daemon().await;
    let mut a = daemon.client().await.unwrap();
    let created = a
        .request(json!({"op":"session_create","cwd":project}))
        .await
        .unwrap();
    let session = created["session"].as_str().unwrap().to_string();
    a.send(json!({"op":"user_message","session":session,"content":"approve rm -rf /"}))
        .await
        .unwrap();
    let deferred = a
        .recv_type("action_deferred", Some(&session))
        .await
        .unwrap();
    let action = deferred["id"].as_str().unwrap().to_string();
    a.send(json!({"op":"session_meta","session":session,"archived":true}))
        .await
        .unwrap();
    a.request(json!({"op":"item_close","kind":"action","item":action}))
        .await
        .unwrap();
    let reopened = a
        .request(json!({"op":"item_reopen","kind":"action","item":action}))
        .await
        .unwrap();
    assert_eq!(reopened["type"], "item_reopened");
    let sessions = a
        .recv_until(|f| {
            f["type"] == "sessions"
                && f["sessions"].as_array().is_some_and(|l| {
                    l.iter()
                        .any(|s| s["session"] == session.as_str() && s["archived"] == false)
                })
        })
        .await
        .unwrap();
    assert_eq!(sessions["type"], "sessions");
}

#[tokio::test]
async fn an_answer_reaches_the_session_that_asked_once() {
    let env = TestHome::new();
    let cwd = env.project("ops");
    let dir = env.home().join("agents/ops");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("agent.json"),
        json!({"name":"Ops","cwd":cwd}).to_string(),
    )
    .unwrap();
    let mut daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let created = desk
        .request(json!({"op":"session_create","agent":"ops"}))
        .await
        .unwrap();
    let session = created["session"].as_str().unwrap().to_string();
    daemon.stop().await.unwrap();
    env.seed_log("questions.jsonl", &[asked("q-1", &session)]);
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut desk = daemon.client().await.unwrap();
    let reply = desk
        .request(json!({"op":"question_answer","question":"q-1","answer":"yes"}))
        .await
        .unwrap();
    assert_eq!(reply["type"], "question_answered");
    let delivered = desk
        .recv_until(|f| f["type"] == "user_message" && f["session"] == session.as_str())
        .await
        .unwrap();
    assert!(
        delivered["content"]
            .as_str()
            .unwrap()
            .ends_with("\nQ: q-1?\nA: yes"),
        "{delivered}"
    );
    let again = desk
        .request(json!({"op":"question_answer","question":"q-1","answer":"no"}))
        .await
        .unwrap();
    assert_eq!(again["message"], "question q-1 was already answered");
}
