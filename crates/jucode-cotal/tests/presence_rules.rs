//! Presence rules on a seat against a real nats-server: a broker outage at
//! join is waited out with no bind (so the harness never gets its post-join
//! notice) until the broker is back; `activeAt` follows every work event,
//! whoever owns the turn; uncommitted mail is named with its queue depth and
//! age. Run: `cargo nextest run -p jucode-cotal --features testkit` (the
//! outage test: add `--run-ignored all`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_cotal::config::LaunchConfig;
use jucode_cotal::harness::HarnessSignal;
use jucode_cotal::testkit::{
    NatsServer, Scripted, SeatProc, Step, fast_seat_options as opts, seat_env as env,
};
use serde_json::{Value, json};

mod support;
use support::{log_text, logs, until};

async fn nats() -> NatsServer {
    match NatsServer::start().await {
        Ok(s) => s,
        Err(e) => panic!("{e} (install it with scripts/install-nats.sh)"),
    }
}

async fn presence(js: &async_nats::jetstream::Context) -> Option<Value> {
    let kv = js.get_key_value("cotal_presence_dev").await.ok()?;
    let raw = kv.get("local.alice").await.ok()??;
    serde_json::from_slice(&raw).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: the join waits out the client's request timeout in the outage (~12 s)"]
async fn a_broker_outage_at_join_sends_no_notice_until_the_bind() {
    logs();
    let mut server = nats().await;
    let cfg = LaunchConfig::from_env(env(&server.url, &[]), false).unwrap();
    let h = Scripted::new();
    h.hold_start();
    let seat = SeatProc::start(cfg, h.clone(), opts());
    // Connected and starting the harness: the broker dies before the join.
    until("the harness is starting", || async {
        h.context.lock().unwrap().is_some()
    })
    .await;
    server.kill().await;
    h.release_start();
    until("the seat waits out the outage", || async {
        log_text().contains("mesh unreachable at join; waiting for the broker")
    })
    .await;
    assert_eq!(
        h.bound(),
        0,
        "no bind, so no post-join notice, in an outage"
    );
    server.restart(None).await.unwrap();
    until("bound once the broker is back", || async { h.bound() == 1 }).await;
    let peer = async_nats::connect(&server.url).await.unwrap();
    let js = async_nats::jetstream::new(peer);
    until("presence", || async { presence(&js).await.is_some() }).await;
    assert_eq!(h.bound(), 1, "the notice is delivered once");
    seat.shutdown().unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_at_follows_work_events_and_uncommitted_mail_is_named() {
    let server = nats().await;
    let cfg = LaunchConfig::from_env(env(&server.url, &[]), false).unwrap();
    let peer = async_nats::connect(&server.url).await.unwrap();
    let js = async_nats::jetstream::new(peer);
    let h = Scripted::new();
    let seat = SeatProc::start(cfg, h.clone(), opts());
    until("presence", || async { presence(&js).await.is_some() }).await;
    assert!(presence(&js).await.unwrap().get("activeAt").is_none());

    // A work event of a turn the seat did not start (the TUI's).
    h.signal(HarnessSignal::TurnStarted);
    until("activeAt from the TUI turn", || async {
        presence(&js).await.unwrap().get("activeAt").is_some()
    })
    .await;
    let first = presence(&js).await.unwrap()["activeAt"].as_u64().unwrap();
    h.signal(HarnessSignal::TurnEnded { ok: true });

    // A host-owned turn holds a DM uncommitted: working, the queue named, and
    // its work events move activeAt on.
    h.push(Step::Hold);
    let msg = json!({"id": "m1", "ts": 1.0, "space": "dev", "from": {"id": "local.bob", "name": "bob"},
        "to": "local.alice", "parts": [{"kind": "text", "text": "please look"}]});
    let mut hdr = async_nats::HeaderMap::new();
    hdr.insert("Nats-Msg-Id", "m1");
    js.publish_with_headers(
        "cotal.dev.inst.local.alice.local.bob",
        hdr,
        msg.to_string().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    until("the held turn runs", || async { h.running() }).await;
    until("the uncommitted message is named", || async {
        let p = presence(&js).await.unwrap();
        p["status"] == "working"
            && p["activity"]
                .as_str()
                .is_some_and(|a| a.starts_with("1 message(s) uncommitted; oldest queued"))
    })
    .await;
    until("a later work event moves activeAt", || async {
        h.signal(HarnessSignal::Activity);
        presence(&js).await.unwrap()["activeAt"].as_u64().unwrap() > first
    })
    .await;
    h.release();
    until("committed: the queue line is gone", || async {
        let p = presence(&js).await.unwrap();
        p["status"] == "idle" && p.get("activity").is_none_or(|a| a.is_null())
    })
    .await;
    seat.shutdown().unwrap();
    server.stop().await;
}
