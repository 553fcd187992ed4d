//! The usage ledger's gateway half on the real daemon binary: no account leaves gateway
//! amounts `null`; an account in `auth.json` has its charges read from a fake billing server
//! on loopback (settled points, pending requests); a failing server sets `billing_error` and
//! keeps the local counts; a server that never answers does not hold up the next op.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_testsupport::fake_billing::{FakeBilling, Mode};
use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

/// Starts the built-in engine (with `auth` as `auth.json` when given), opens a session and
/// runs `n` turns; returns the daemon, a client, the session and the turns' ledger keys.
async fn with_turns(
    env: &TestHome,
    fake: &FakeModel,
    auth: Option<Value>,
    n: usize,
) -> (Daemon, Client, String, Vec<String>) {
    if let Some(auth) = auth {
        std::fs::create_dir_all(env.home()).unwrap();
        std::fs::write(env.home().join("auth.json"), auth.to_string()).unwrap();
    }
    let mut config = fake.config("chat");
    config["model"] = json!("fake-priced");
    let daemon = Daemon::start_builtin(&env.home(), &config).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let id = c.start_session(&env.project("app")).await.unwrap();
    let mut keys = Vec::new();
    for i in 0..n {
        c.send(json!({"op":"user_message","session":id,"content":format!("turn {i}")}))
            .await
            .unwrap();
        let usage = c.recv_type("usage", Some(&id)).await.unwrap();
        c.recv_until(|f| f["session"] == id && f["type"] == "status" && f["message"] == "ready")
            .await
            .unwrap();
        keys.push(usage["billing_turn"].as_str().unwrap().to_string());
    }
    (daemon, c, id, keys)
}

#[tokio::test]
async fn without_an_account_gateway_amounts_are_null() {
    let env = TestHome::new();
    let fake = FakeModel::start().await.unwrap();
    let (_d, mut c, id, _) = with_turns(&env, &fake, None, 1).await;
    let reply = c
        .request(json!({"op":"session_usage","session":id}))
        .await
        .unwrap();
    assert_eq!(reply["totals"]["gateway_cost"], Value::Null, "{reply}");
    assert_eq!(reply["totals"]["pending_requests"], 0, "{reply}");
    assert_eq!(reply["totals"]["gateway_requests"], 0, "{reply}");
    assert!(
        reply.get("billing_error").is_none_or(Value::is_null),
        "{reply}"
    );
}

#[tokio::test]
async fn settled_points_are_summed_and_pending_charges_counted() {
    let env = TestHome::new();
    let fake = FakeModel::start().await.unwrap();
    let billing = FakeBilling::start(Mode::Answer).await.unwrap();
    let (_d, mut c, id, keys) = with_turns(&env, &fake, Some(billing.auth_json()), 3).await;
    billing.settle(&keys[0], 2.5, 2);
    billing.pending(&keys[1], 1);
    // keys[2] unknown to the gateway: not available yet, so pending too.
    let reply = c
        .request(json!({"op":"session_usage","session":id}))
        .await
        .unwrap();
    assert_eq!(billing.requests(), vec![keys.clone()]);
    let totals = &reply["totals"];
    assert_eq!(totals["gateway_cost"], 2.5, "{reply}");
    assert_eq!(totals["gateway_requests"], 2, "{reply}");
    assert_eq!(totals["pending_requests"], 2, "{reply}");
    assert_eq!(totals["turns"], 3, "{reply}");
    assert_eq!(reply["sessions"][0]["gateway_cost"], 2.5, "{reply}");
    let turns = reply["turns"].as_array().unwrap();
    let turn = |k: &str| turns.iter().find(|t| t["turn_id"] == k).unwrap().clone();
    assert_eq!(turn(&keys[0])["gateway_cost"], 2.5, "{reply}");
    assert_eq!(turn(&keys[1])["gateway_cost"], Value::Null, "{reply}");
    assert_eq!(turn(&keys[1])["pending_requests"], 1, "{reply}");
    assert!(
        reply.get("billing_error").is_none_or(Value::is_null),
        "{reply}"
    );
}

#[tokio::test]
async fn a_failing_gateway_sets_billing_error_and_keeps_local_counts() {
    let env = TestHome::new();
    let fake = FakeModel::start().await.unwrap();
    let billing = FakeBilling::start(Mode::Fail).await.unwrap();
    let (_d, mut c, id, _) = with_turns(&env, &fake, Some(billing.auth_json()), 1).await;
    let reply = c
        .request(json!({"op":"session_usage","session":id}))
        .await
        .unwrap();
    assert_eq!(reply["type"], "session_usage", "{reply}");
    let error = reply["billing_error"].as_str().unwrap();
    assert!(error.contains("500"), "{reply}");
    assert!(!error.contains("fake-gateway-token"), "{reply}");
    assert_eq!(reply["totals"]["turns"], 1, "{reply}");
    assert!(
        reply["totals"]["input_tokens"].as_u64().unwrap() > 0,
        "{reply}"
    );
    assert_eq!(reply["totals"]["gateway_cost"], Value::Null, "{reply}");
    assert_eq!(reply["totals"]["pending_requests"], 0, "{reply}");
}

#[tokio::test]
async fn a_gateway_that_never_answers_does_not_hold_up_the_next_op() {
    let env = TestHome::new();
    let fake = FakeModel::start().await.unwrap();
    let billing = FakeBilling::start(Mode::Hang).await.unwrap();
    let (_d, mut c, id, _) = with_turns(&env, &fake, Some(billing.auth_json()), 1).await;
    c.send(json!({"op":"session_usage","session":id,"id":"usage"}))
        .await
        .unwrap();
    c.send(json!({"op":"ping","id":"after"})).await.unwrap();
    let mut order = Vec::new();
    while order.last() != Some(&"after".to_string()) {
        let frame = c.recv().await.unwrap();
        if let Some(id) = frame["id"].as_str() {
            order.push(id.to_string());
        }
    }
    assert_eq!(
        order,
        vec!["after".to_string()],
        "the usage reply came first"
    );
}
