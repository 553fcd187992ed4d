//! `restart_when_idle` on the real daemon: refused for a paired device; for the desktop every
//! client hears `daemon_restarting`, the daemon keeps serving while a turn runs, and exits
//! cleanly once the turn is over.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use jucode_testsupport::TestHome;
use serde_json::json;

#[tokio::test]
async fn the_daemon_waits_for_the_running_turn_then_exits_cleanly() {
    let env = TestHome::new();
    let project = env.project("app");
    let mut daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();

    let refused = phone
        .request(json!({"op":"restart_when_idle"}))
        .await
        .unwrap();
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["message"], "only the desktop can manage devices");

    // A turn that cannot end before the test lets it: it waits for an approval.
    let session = desk.start_session(&project).await.unwrap();
    desk.request(json!({"op":"watch","session":session}))
        .await
        .unwrap();
    desk.send(json!({"op":"user_message","session":session,"content":"approve make deploy"}))
        .await
        .unwrap();
    let request = desk
        .recv_type("approval_request", Some(&session))
        .await
        .unwrap();

    desk.send(json!({"op":"restart_when_idle"})).await.unwrap();
    desk.recv_type("daemon_restarting", None).await.unwrap();
    phone.recv_type("daemon_restarting", None).await.unwrap();
    // Still serving, well past a background tick: the turn holds it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let pong = desk.request(json!({"op":"ping"})).await.unwrap();
    assert_eq!(pong["type"], "pong", "{pong}");
    assert!(daemon.is_running());

    desk.send(
        json!({"op":"approve","session":session,"call_id":request["call_id"],"decision":"allow"}),
    )
    .await
    .unwrap();
    let status = daemon.exited_within(Duration::from_secs(15)).await.unwrap();
    assert!(
        status.success(),
        "{status}; logs:\n{}",
        daemon.logs().join("\n")
    );
}

#[tokio::test]
async fn an_idle_daemon_exits_at_once() {
    let env = TestHome::new();
    let mut daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    desk.send(json!({"op":"restart_when_idle"})).await.unwrap();
    desk.recv_type("daemon_restarting", None).await.unwrap();
    let status = daemon.exited_within(Duration::from_secs(15)).await.unwrap();
    assert!(status.success(), "{status}");
}
