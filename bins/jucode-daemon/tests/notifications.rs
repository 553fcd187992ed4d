//! Notifications end to end: the real daemon (built-in engine on the fake model server), the
//! real self-hosted relay and a fake browser push service that checks VAPID and decrypts each
//! message (`jucode_testsupport::fake_push`). A paired device subscribes; what reaches the
//! push service is compared with what happened.
//!
//! "Nothing was sent" is shown without waiting for time to pass: notifications go out one
//! after another in the order they happened, so when the next one that must come arrives and
//! is the expected one, nothing was sent in between.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-relay -p jucode-testsupport --bins`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::fake_push::{Delivered, FakePush};
use jucode_testsupport::{Client, Daemon, Engine, RelayServer, TestHome};
use serde_json::json;

/// Deadlock guard for what a test polls for.
const WAIT: Duration = Duration::from_secs(30);

async fn start_daemon(env: &TestHome, fake: &FakeModel, relay: &RelayServer) -> Result<Daemon> {
    Daemon::builder(&env.home())
        .engine(Engine::Builtin)
        .config(&fake.config("chat"))
        .relay(relay.url())
        .start()
        .await
}

/// Waits until the daemon reports its relay link up.
async fn wait_connected(desk: &mut Client) -> Result<()> {
    tokio::time::timeout(WAIT, async {
        loop {
            let status = desk.request(json!({"op": "relay_status"})).await?;
            if status["connected"] == true {
                return Ok::<_, anyhow::Error>(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .context("the relay link did not come up")?
}

/// Sends `text` to `session` and waits for its turn to end.
async fn turn(desk: &mut Client, session: &str, text: &str) -> Result<()> {
    desk.send(json!({"op": "user_message", "session": session, "content": text}))
        .await?;
    desk.recv_until(|f| f["session"] == session && f["type"] == "user_message")
        .await?;
    desk.recv_until(|f| {
        f["session"] == session && f["type"] == "status" && f["message"] == "ready"
    })
    .await?;
    Ok(())
}

/// Agent `ops` is told (through the fake model's `CALL` script) to ask a question; waits
/// until the question is listed.
async fn ask(desk: &mut Client, title: &str, importance: &str) -> Result<()> {
    let call = json!({"title": title, "body": format!("{title} body"), "importance": importance});
    let reply = desk
        .request(
            json!({"op": "message_send", "agent": "ops", "body": format!("CALL question {call}")}),
        )
        .await?;
    assert_eq!(reply["type"], "message_accepted", "{reply}");
    desk.recv_until(|f| {
        f["type"] == "questions"
            && f["questions"]
                .as_array()
                .is_some_and(|qs| qs.iter().any(|q| q["title"] == title))
    })
    .await?;
    Ok(())
}

fn push_file(daemon: &Daemon) -> String {
    std::fs::read_to_string(daemon.home.join("daemon/push.json")).unwrap_or_default()
}

fn assert_question(got: &Delivered, title: &str) {
    assert_eq!(
        got.payload["title"],
        format!("Question from ops: {title}"),
        "{}",
        got.payload
    );
    assert_eq!(got.payload["body"], format!("{title} body"));
    assert_eq!(got.payload["url"], "/remote");
    assert!(got.payload["session"].is_string(), "{}", got.payload);
}

async fn setup(
    env: &TestHome,
    dir: &Path,
) -> Result<(FakeModel, FakePush, RelayServer, Daemon, Client)> {
    let fake = FakeModel::start().await?;
    let push = FakePush::start().await?;
    let vapid = dir.join("vapid.key");
    let relay = RelayServer::start(
        "127.0.0.1:0",
        &[
            "--vapid-key",
            vapid.to_str().context("path")?,
            "--push-endpoint-prefix",
            &push.prefix(),
        ],
    )
    .await?;
    env.agent("ops", &json!({"name": "Ops", "cwd": env.project("ops")}));
    let daemon = start_daemon(env, &fake, &relay).await?;
    let mut desk = daemon.client().await?;
    let on = desk
        .request(json!({"op": "relay_set", "enabled": true}))
        .await?;
    assert_eq!(on["type"], "relay_status", "{on}");
    wait_connected(&mut desk).await?;
    Ok((fake, push, relay, daemon, desk))
}

#[tokio::test]
async fn review_questions_and_a_restart_notify_once_each_and_410_drops_the_subscription()
-> Result<()> {
    let dir = tempfile::tempdir()?;
    let env = TestHome::new_in(dir.path());
    let (fake, push, relay, mut daemon, mut desk) = setup(&env, dir.path()).await?;
    let mut phone = daemon.paired_device(&mut desk).await?;
    let sub = push.subscription("phone")?;
    let endpoint = sub["endpoint"].as_str().context("endpoint")?.to_string();
    let ok = phone
        .request(json!({"op": "push_subscribe", "subscription": sub}))
        .await?;
    assert_eq!(ok["type"], "push_subscribed", "{ok}");

    // The user links an idle session: the requirement shows review at once, by their own op.
    let s1 = desk.start_session(&env.project("app")).await?;
    let made = desk
        .request(json!({"op": "requirement_create", "text": "speed up the build"}))
        .await?;
    assert_eq!(made["requirement"], "R-1");
    let linked = desk
        .request(json!({"op": "requirement_link", "requirement": "R-1", "session": s1}))
        .await?;
    assert_eq!(linked["type"], "requirement_linked", "{linked}");
    desk.recv_until(|f| f["type"] == "requirements" && f["requirements"][0]["status"] == "review")
        .await?;

    // A turn of the linked session ends: one notification, about R-1 and its session.
    turn(&mut desk, &s1, "hello").await?;
    let got = push.delivered(1).await?;
    assert_eq!(
        got.payload,
        json!({
            "title": "Ready for review: speed up the build",
            "body": "user said: hello",
            "tag": "requirement-R-1",
            "url": "/remote?requirement=R-1",
            "session": s1,
        }),
        "the link by the user's own op sent nothing before this"
    );
    assert_eq!(got.claims["aud"], push.origin());

    // Another requirement and session: R-2's review notifies; the lists its session's turn
    // broadcast show R-1 still in review, which sends nothing again.
    let s2 = desk.start_session(&env.project("web")).await?;
    desk.request(json!({"op": "requirement_create", "text": "fix the login page"}))
        .await?;
    desk.request(json!({"op": "requirement_link", "requirement": "R-2", "session": s2}))
        .await?;
    turn(&mut desk, &s2, "look at it").await?;
    let got = push.delivered(2).await?;
    assert_eq!(got.payload["tag"], "requirement-R-2", "{}", got.payload);
    assert_eq!(got.payload["session"], s2);

    // A normal question sends nothing; an important one does, and is the next to arrive.
    ask(&mut desk, "Which branch?", "normal").await?;
    ask(&mut desk, "Deploy now?", "high").await?;
    assert_question(&push.delivered(3).await?, "Deploy now?");

    // A restart with both requirements in review sends nothing for them.
    daemon.stop().await?;
    drop(phone);
    let daemon = start_daemon(&env, &fake, &relay).await?;
    let mut desk = daemon.client().await?;
    wait_connected(&mut desk).await?;
    let list = desk.connect_batch.last().context("batch")?.clone();
    assert_eq!(list["requirements"][0]["status"], "review", "{list}");
    assert_eq!(list["requirements"][1]["status"], "review", "{list}");
    ask(&mut desk, "Roll back?", "high").await?;
    assert_question(&push.delivered(4).await?, "Roll back?");

    // The push service says the subscription is gone: the daemon forgets it.
    push.set_status(410);
    ask(&mut desk, "Still there?", "high").await?;
    assert_question(&push.delivered(5).await?, "Still there?");
    tokio::time::timeout(WAIT, async {
        while push_file(&daemon).contains(&endpoint) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .context("the subscription stayed in push.json after 410")?;
    let mut phone = daemon.paired_device(&mut desk).await?;
    let tested = phone.request(json!({"op": "push_test"})).await?;
    assert_eq!(tested["results"], json!([]), "{tested}");
    assert_eq!(push.received().len(), 5, "{:?}", push.received());
    Ok(())
}

#[tokio::test]
async fn the_users_own_state_changes_notify_nothing() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let env = TestHome::new_in(dir.path());
    let (_fake, push, _relay, daemon, mut desk) = setup(&env, dir.path()).await?;
    let mut phone = daemon.paired_device(&mut desk).await?;
    let sub = push.subscription("phone")?;
    phone
        .request(json!({"op": "push_subscribe", "subscription": sub}))
        .await?;
    let s1 = desk.start_session(&env.project("app")).await?;
    desk.request(json!({"op": "requirement_create", "text": "tidy the logs"}))
        .await?;
    desk.request(json!({"op": "requirement_link", "requirement": "R-1", "session": s1}))
        .await?;
    // The user parks it and opens it again: review by their own ops, nothing sent.
    for state in ["parked", "open"] {
        let saved = desk
            .request(json!({"op": "requirement_update", "requirement": "R-1", "state": state}))
            .await?;
        assert_eq!(saved["type"], "requirement_saved", "{saved}");
    }
    ask(&mut desk, "First?", "high").await?;
    assert_question(&push.delivered(1).await?, "First?");
    Ok(())
}

#[tokio::test]
async fn a_dispatch_notifies_its_plan_a_tasks_approval_and_its_end() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let env = TestHome::new_in(dir.path());
    let cwd = env.project("app").display().to_string();
    std::fs::create_dir_all(env.home().join("daemon"))?;
    std::fs::write(
        env.home().join("daemon/workspaces.json"),
        json!({"rev":1,"workspaces":[{"id":"w1","name":"W","projects":[
            {"id":"p1","name":"app","path":cwd}]}]})
        .to_string(),
    )?;
    let (_fake, push, _relay, daemon, mut desk) = setup(&env, dir.path()).await?;
    let mut phone = daemon.paired_device(&mut desk).await?;
    let sub = push.subscription("phone")?;
    phone
        .request(json!({"op": "push_subscribe", "subscription": sub}))
        .await?;

    // The dispatcher (scripted by the fake model) plans one task that runs a command.
    let plan = json!({"action":"plan","tasks":[
        {"title":"list","project":"p1","text":"RUN: echo dispatched"}]});
    let started = desk
        .request(
            json!({"op":"dispatch_send","text":format!("CALL dispatch {plan}"),
            "plan":true,"approval_mode":"manual"}),
        )
        .await?;
    let id = started["dispatch"]
        .as_str()
        .context("dispatch id")?
        .to_string();
    let got = push.delivered(1).await?;
    assert_eq!(
        got.payload["title"],
        "Dispatch plan waiting: CALL dispatch {\"action\":\"plan\",\"tasks\":[…"
    );
    assert_eq!(got.payload["body"], "1. list");
    assert_eq!(got.payload["tag"], format!("dispatch-{id}"));
    assert_eq!(got.payload["session"], id.as_str());

    // The user's go-ahead sends nothing; the task's approval does, about the task's session.
    desk.request(json!({"op":"dispatch_confirm","dispatch":id,"approve":true}))
        .await?;
    let asked = desk.recv_until(|f| f["type"] == "approval_request").await?;
    let session = asked["session"].as_str().context("session")?.to_string();
    let got = push.delivered(2).await?;
    assert_eq!(
        got.payload["title"], "Approval needed: list",
        "{}",
        got.payload
    );
    assert_eq!(got.payload["tag"], format!("dispatch-{id}-1"));
    assert_eq!(got.payload["session"], session.as_str());

    // Allowed, the task ends and the dispatcher sums up: the last notification.
    desk.send(
        json!({"op":"approve","session":session,"call_id":asked["call_id"],
        "decision":"allow"}),
    )
    .await?;
    let got = push.delivered(3).await?;
    assert!(
        got.payload["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("Dispatch done: ")),
        "{}",
        got.payload
    );
    assert_eq!(got.payload["tag"], format!("dispatch-{id}"));
    assert_eq!(got.payload["url"], "/remote");
    assert_eq!(push.received().len(), 3, "{:?}", push.received());
    Ok(())
}
