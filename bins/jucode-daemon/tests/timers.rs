//! `timer_list` and `timer_cancel` on the real daemon binary, for a local client and a paired
//! device. Timers are set by agent sessions through their tools; here they are written to
//! `timers.jsonl` before the daemon starts, which also tests how the log is read back.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_testsupport::{Daemon, TestHome};
use serde_json::{Value, json};

/// Far in the future, so no timer fires during a test.
const LATER: u64 = 4_000_000_000_000;

fn seed(env: &TestHome) {
    env.agent("ops", &json!({"name": "ops", "cwd": env.project("ops")}));
    env.agent("qa", &json!({"name": "qa", "cwd": env.project("qa")}));
    let set = |id: &str, agent: &str, fire_at: u64| json!({"kind":"set","id":id,"agent":agent,"session":format!("s-{agent}"),"fire_at":fire_at,"body":format!("{id} says hi"),"at":1});
    env.seed_log(
        "timers.jsonl",
        &[
            set("tm-a", "ops", LATER + 2000),
            set("tm-b", "qa", LATER + 1000),
            set("tm-c", "ops", 5),
            json!({"kind":"done","id":"tm-c","reason":"fired","at":6}),
            set("tm-d", "ops", LATER),
            json!({"kind":"done","id":"tm-d","reason":"cancelled","at":7}),
            // A kind from a newer daemon is passed over.
            json!({"kind":"snoozed","id":"tm-a","at":8}),
        ],
    );
}

fn timer(id: &str, agent: &str, fire_at: u64) -> Value {
    json!({"timer":id,"agent":agent,"session":format!("s-{agent}"),"fire_at":fire_at,"body":format!("{id} says hi")})
}

#[tokio::test]
async fn active_timers_are_listed_soonest_first_to_local_clients_and_devices() {
    let env = TestHome::new();
    seed(&env);
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();
    let all = json!([
        timer("tm-b", "qa", LATER + 1000),
        timer("tm-a", "ops", LATER + 2000)
    ]);
    for client in [&mut desk, &mut phone] {
        let list = client.request(json!({"op":"timer_list"})).await.unwrap();
        assert_eq!(list["type"], "timers");
        assert_eq!(list["timers"], all);
        let ops = client
            .request(json!({"op":"timer_list","agent":"ops"}))
            .await
            .unwrap();
        assert_eq!(ops["timers"], json!([timer("tm-a", "ops", LATER + 2000)]));
        let none = client
            .request(json!({"op":"timer_list","agent":"nobody"}))
            .await
            .unwrap();
        assert_eq!(none["timers"], json!([]));
    }
}

#[tokio::test]
async fn a_cancelled_timer_stays_cancelled_and_done_ones_are_errors() {
    let env = TestHome::new();
    seed(&env);
    let mut daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();
    let reply = phone
        .request(json!({"op":"timer_cancel","timer":"tm-a"}))
        .await
        .unwrap();
    assert_eq!(reply["type"], "timer_cancelled");
    assert_eq!(reply["timer"], "tm-a");
    for (timer, message) in [
        ("tm-a", "timer tm-a was already cancelled"),
        ("tm-d", "timer tm-d was already cancelled"),
        ("tm-c", "timer tm-c already fired"),
        ("tm-zz", "unknown timer tm-zz"),
    ] {
        let err = desk
            .request(json!({"op":"timer_cancel","timer":timer}))
            .await
            .unwrap();
        assert_eq!(err["type"], "error");
        assert_eq!(err["message"], message);
    }
    let err = desk.request(json!({"op":"timer_cancel"})).await.unwrap();
    assert_eq!(err["message"], "timer_cancel: missing field `timer`");
    let err = desk
        .request(json!({"op":"timer_list","agent":7}))
        .await
        .unwrap();
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .starts_with("timer_list: invalid type"),
        "{err}"
    );

    // The cancellation was saved before the reply: it holds across a SIGKILL.
    daemon.kill9_and_wait().await.unwrap();
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut desk = daemon.client().await.unwrap();
    let list = desk.request(json!({"op":"timer_list"})).await.unwrap();
    assert_eq!(list["timers"], json!([timer("tm-b", "qa", LATER + 1000)]));
}

#[tokio::test]
async fn a_timer_due_while_the_daemon_was_down_fires_once_at_start() {
    let env = TestHome::new();
    env.agent("ops", &json!({"name": "ops", "cwd": env.project("ops")}));
    env.seed_log("timers.jsonl",
        &[
            json!({"kind":"set","id":"tm-late","agent":"ops","session":"gone","fire_at":5,"body":"wake up","new_session":true,"at":1}),
        ],
    );
    let mut daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let delivered = desk.recv_type("message_delivered", None).await.unwrap();
    assert_eq!(delivered["from"], "timer:tm-late");
    let list = desk.request(json!({"op":"timer_list"})).await.unwrap();
    assert_eq!(list["timers"], json!([]));
    daemon.stop().await.unwrap();
    let log = std::fs::read_to_string(env.home().join("daemon/timers.jsonl")).unwrap();
    assert_eq!(log.matches("\"fired\"").count(), 1);
    // Started again, it fires no more.
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut desk = daemon.client().await.unwrap();
    let sessions = desk.request(json!({"op":"session_list"})).await.unwrap();
    let of_ops = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["agent"] == "ops")
        .count();
    assert_eq!(of_ops, 1);
}
