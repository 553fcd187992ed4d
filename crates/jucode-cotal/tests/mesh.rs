//! The mesh side against a real nats-server (JetStream, loopback): manager
//! contract digests and local argument checks, the open-mode `dlv_` backstop,
//! the user-auth bearer refreshed on reconnect, a broker outage mid-run, a
//! crash between the frames of one journal record, and DMs carried by soft
//! interrupts acked only after the turn that carried them succeeded.
//!
//! Needs nats-server ≥ 2.12 (`scripts/install-nats.sh`; the tests fail naming
//! it when the binary is missing). Run:
//! `cargo nextest run -p jucode-cotal --features testkit`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use jucode_cotal::config::LaunchConfig;
use jucode_cotal::harness::JournalSource;
use jucode_cotal::relay::ToolResult;
use jucode_cotal::testkit::{
    FakeManager, NatsServer, Scripted, SeatProc, Step, TEST_UID as UID, fast_seat_options as opts,
    seat_env as env,
};
use serde_json::{Map, Value, json};

mod support;
use support::{GUARD, log_text, logs, until};

async fn nats_with(extra: &[&str]) -> NatsServer {
    match NatsServer::start_with(extra).await {
        Ok(s) => s,
        Err(e) => panic!("{e} (install it with scripts/install-nats.sh)"),
    }
}

struct Peer {
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
}

impl Peer {
    async fn connect(url: &str) -> Peer {
        let client = async_nats::ConnectOptions::new()
            .max_reconnects(None)
            .connect(url)
            .await
            .unwrap();
        let js = async_nats::jetstream::new(client.clone());
        Peer { client, js }
    }

    async fn connect_token(url: &str, token: &str) -> Peer {
        let client = async_nats::ConnectOptions::with_token(token.into())
            .connect(url)
            .await
            .unwrap();
        let js = async_nats::jetstream::new(client.clone());
        Peer { client, js }
    }

    /// A channel message stored through JetStream (what a durable channel carries).
    async fn chat_stored(&self, channel: &str, id: &str, text: &str) {
        let msg = json!({"id": id, "ts": 1.0, "space": "dev", "from": {"id": "local.bob", "name": "bob"},
            "channel": channel, "parts": [{"kind": "text", "text": text}]});
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-Msg-Id", id);
        self.js
            .publish_with_headers(
                format!("cotal.dev.chat.local.bob.{channel}"),
                h,
                msg.to_string().into(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }

    /// A DM from bob to alice, stored through JetStream.
    async fn dm_stored(&self, id: &str, text: &str) {
        let msg = json!({"id": id, "ts": 1.0, "space": "dev", "from": {"id": "local.bob", "name": "bob"},
            "to": "local.alice", "parts": [{"kind": "text", "text": text}]});
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-Msg-Id", id);
        self.js
            .publish_with_headers(
                "cotal.dev.inst.local.alice.local.bob",
                h,
                msg.to_string().into(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }

    /// DMs delivered to alice's durable and not acked yet.
    async fn dm_unacked(&self) -> u64 {
        self.consumer_info("DM_dev", &format!("dm_local-alice-{UID}"))
            .await
            .map_or(u64::MAX, |i| i.num_ack_pending as u64)
    }

    async fn presence(&self) -> Option<Value> {
        let kv = self.js.get_key_value("cotal_presence_dev").await.ok()?;
        let raw = kv.get("local.alice").await.ok()??;
        serde_json::from_slice(&raw).ok()
    }

    async fn consumer_info(
        &self,
        stream: &str,
        name: &str,
    ) -> Option<async_nats::jetstream::consumer::Info> {
        let stream = self.js.get_stream(stream).await.ok()?;
        let mut c: async_nats::jetstream::consumer::Consumer<
            async_nats::jetstream::consumer::pull::Config,
        > = stream.get_consumer(name).await.ok()?;
        c.info().await.ok().cloned()
    }
}

async fn tool(h: &Scripted, name: &str, args: Value) -> ToolResult {
    let ctx = h.context.lock().unwrap().clone().unwrap();
    let args: Map<String, Value> = args.as_object().unwrap().clone();
    jucode_cotal::relay::call(&ctx.mcp.socket, &ctx.mcp.token, name, &args)
        .await
        .unwrap()
}

// ---- 1. contract digests -------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manager_requests_pin_the_described_contract_digests() {
    let server = nats_with(&[]).await;
    let peer = Peer::connect(&server.url).await;
    let cfg = LaunchConfig::from_env(env(&server.url, &[]), false).unwrap();
    let h = Scripted::new();
    let seat = SeatProc::start(cfg, h.clone(), opts());
    until("presence", || async { peer.presence().await.is_some() }).await;
    let manager = FakeManager::start(peer.client.clone(), "dev")
        .await
        .unwrap();

    // The fake is strict: a request that pins no contract is refused.
    let nonce = "n".repeat(32);
    let mut replies = peer
        .client
        .subscribe(format!(
            "cotal.dev.ep.reply.manager.*.*.local.bob.{UID}.{nonce}"
        ))
        .await
        .unwrap();
    let bare = json!({"v": 1, "id": "bare1", "op": {"endpoint": "manager", "command": "spawn"},
        "class": "ephemeral", "replyExpected": true, "args": {"name": "x"},
        "from": {"id": "local.bob", "name": "bob"}, "deadlineMs": 1000});
    peer.client
        .publish(
            format!("cotal.dev.ep.one.manager.spawn.local.bob.{UID}.{nonce}"),
            bare.to_string().into(),
        )
        .await
        .unwrap();
    let r = tokio::time::timeout(GUARD, replies.next())
        .await
        .unwrap()
        .unwrap();
    let r: Value = serde_json::from_slice(&r.payload).unwrap();
    assert_eq!(r["error"]["code"], "contract-mismatch", "{r}");
    assert_eq!(manager.served(), Vec::<String>::new());

    // The seat's requests carry the described digests and pass.
    let cases = [
        (
            "cotal_spawn",
            json!({"name": "carol", "role": "tester", "launchOptions": {"effort": "high"}}),
            "spawn",
        ),
        ("cotal_personas", json!({}), "personas"),
        (
            "cotal_yield",
            json!({"status": "done", "note": "ok"}),
            "turn-yield",
        ),
        (
            "cotal_feedback",
            json!({"origin": "agent", "type": "idea", "summary": "s"}),
            "feedback",
        ),
    ];
    for (name, args, command) in cases {
        let r = tool(&h, name, args).await;
        assert!(!r.is_error, "{name}: {}", r.text);
        assert!(
            r.text.contains(&format!("\"command\":\"{command}\"")),
            "{name}: {}",
            r.text
        );
    }
    // Arguments the described input schema refuses are refused here, the field
    // named, and never reach the manager (its served list below stays as it was).
    let refused = [
        (
            json!({"name": "carol", "variant": "high"}),
            "argument \"variant\" is not a field the manager's input schema allows",
        ),
        (
            json!({"name": "carol", "launchOptions": {"effort": 5}}),
            "argument \"launchOptions.effort\" must be string, not a number",
        ),
    ];
    for (args, why) in refused {
        let r = tool(&h, "cotal_spawn", args).await;
        assert!(r.is_error, "{}", r.text);
        assert!(
            r.text.contains("bad-request") && r.text.contains(why),
            "{}",
            r.text
        );
        assert!(r.text.contains("nothing was sent"), "{}", r.text);
    }
    let r = tool(&h, "cotal_despawn", json!({"name": "ghost"})).await;
    assert!(r.is_error && r.text.contains("not-found"), "{}", r.text);
    assert_eq!(
        manager.describes(),
        1,
        "the contract is described once per launch"
    );
    assert_eq!(
        manager.served(),
        ["spawn", "personas", "turn-yield", "feedback", "despawn"]
    );
    assert_eq!(
        manager.refused(),
        vec!["spawn: contract-mismatch".to_string()]
    );

    // The manager's contract moves on: the stale pin is refused and reported
    // clearly, and the next call describes again and passes.
    manager.publish_revision(1).await.unwrap();
    let r = tool(&h, "cotal_run", json!({"verb": "ps"})).await;
    assert!(r.is_error, "{}", r.text);
    assert!(
        r.text.contains("contract-mismatch") && r.text.contains("Nothing ran"),
        "{}",
        r.text
    );
    let r = tool(&h, "cotal_run", json!({"verb": "ps"})).await;
    assert!(!r.is_error, "{}", r.text);
    assert!(r.text.contains("\"command\":\"run\""), "{}", r.text);
    assert_eq!(manager.describes(), 2);

    manager.stop();
    seat.shutdown().unwrap();
    server.stop().await;
}

// ---- 2. open-mode durable backstop -----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_mode_creates_its_dlv_backstop_and_acks_only_after_a_successful_turn() {
    let server = nats_with(&[]).await;
    let peer = Peer::connect(&server.url).await;
    let dlv = format!("dlv_local-alice-{UID}");
    let mk = || {
        LaunchConfig::from_env(env(&server.url, &[("COTAL_SUBSCRIBE", "general")]), false).unwrap()
    };
    let h = Scripted::new();
    h.push(Step::Fail {
        code: None,
        message: "provider hiccup".into(),
    });
    h.push(Step::Hold);
    let seat = SeatProc::start(mk(), h.clone(), opts());
    until("presence", || async { peer.presence().await.is_some() }).await;
    // The harness hears of the bind once its presence record landed, once.
    until("the bind reported", || async { h.bound() == 1 }).await;
    let info = peer
        .consumer_info("CHAT_dev", &dlv)
        .await
        .expect("open mode creates its dlv_ durable");
    assert_eq!(info.config.filter_subjects, ["cotal.dev.chat.*.*.general"]);

    // Stored channel mail arrives twice (live and through the backstop): one
    // item, held un-acked through the failed turn, acked after the good one.
    peer.chat_stored("general", "c1", "hello durable").await;
    until("the failed turn", || async { !h.turns().is_empty() }).await;
    until("the backstop copy is held un-acked", || async {
        peer.consumer_info("CHAT_dev", &dlv)
            .await
            .is_some_and(|i| i.num_ack_pending == 1)
    })
    .await;
    until("redriven", || async { h.turns().len() >= 2 }).await;
    assert_eq!(
        peer.consumer_info("CHAT_dev", &dlv)
            .await
            .unwrap()
            .num_ack_pending,
        1,
        "still un-acked while the redriven turn runs"
    );
    h.release();
    until("acked after the successful turn", || async {
        peer.consumer_info("CHAT_dev", &dlv)
            .await
            .is_some_and(|i| i.num_ack_pending == 0 && i.num_pending == 0)
    })
    .await;
    for t in h.turns() {
        assert_eq!(t.matches("hello durable").count(), 1, "deduped by id: {t}");
    }

    // Leaving and re-joining narrows and widens the backstop.
    let r = tool(&h, "cotal_join", json!({"channel": "ops"})).await;
    assert!(!r.is_error, "{}", r.text);
    let info = peer.consumer_info("CHAT_dev", &dlv).await.unwrap();
    let mut f = info.config.filter_subjects.clone();
    f.sort();
    assert_eq!(f, ["cotal.dev.chat.*.*.general", "cotal.dev.chat.*.*.ops"]);
    let r = tool(&h, "cotal_leave", json!({"channel": "ops"})).await;
    assert!(!r.is_error, "{}", r.text);
    let info = peer.consumer_info("CHAT_dev", &dlv).await.unwrap();
    assert_eq!(info.config.filter_subjects, ["cotal.dev.chat.*.*.general"]);

    // Mail stored while the seat is down reaches the next launch through the backstop.
    seat.kill();
    // A pull request the killed seat left behind would take the message (and
    // park it until ack_wait); the seat's short pulls expire.
    until("the killed seat's pull requests expire", || async {
        peer.consumer_info("CHAT_dev", &dlv)
            .await
            .is_some_and(|i| i.num_waiting == 0)
    })
    .await;
    peer.chat_stored("general", "c2", "sent while away").await;
    let h2 = Scripted::new();
    let seat = SeatProc::start(mk(), h2.clone(), opts());
    until("the backstop surfaces the missed mail", || async {
        h2.turns().iter().any(|t| t.contains("sent while away"))
    })
    .await;
    until("acked after the turn", || async {
        peer.consumer_info("CHAT_dev", &dlv)
            .await
            .is_some_and(|i| i.num_ack_pending == 0 && i.num_pending == 0)
    })
    .await;
    assert!(h2.turns().iter().all(|t| !t.contains("hello durable")));
    seat.shutdown().unwrap();
    server.stop().await;
}

// ---- 3. user-auth bearer refreshed on reconnect ----------------------------------------------

const OWNER: &str = "u_abcdefghijklmnopqrstuvwxyz";
const BEARER_ONE: &str = "bearer-ONE-7f3a9c1d";
const BEARER_TWO: &str = "bearer-TWO-0b8e44a2";

async fn presence_of(peer: &Peer, key: &str) -> Option<Value> {
    let kv = peer.js.get_key_value("cotal_presence_dev").await.ok()?;
    let raw = kv.get(key).await.ok()??;
    serde_json::from_slice(&raw).ok()
}

/// What the provisioner does in an authed space: streams, buckets and the durables a seat binds.
async fn provision_authed(peer: &Peer, owner: &str) {
    use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, pull};
    jucode_cotal::mesh::provision(&peer.js, "dev", &jucode_cotal::mesh::Names::new("dev"))
        .await
        .unwrap();
    let dm = peer.js.get_stream("DM_dev").await.unwrap();
    dm.get_or_create_consumer(
        &format!("dm_{owner}-alice-{UID}"),
        pull::Config {
            durable_name: Some(format!("dm_{owner}-alice-{UID}")),
            filter_subject: format!("cotal.dev.inst.{owner}.alice.*.*"),
            ack_policy: AckPolicy::Explicit,
            deliver_policy: DeliverPolicy::New,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let task = peer.js.get_stream("TASK_dev").await.unwrap();
    task.get_or_create_consumer(
        "svc_reviewer",
        pull::Config {
            durable_name: Some("svc_reviewer".into()),
            filter_subject: "cotal.dev.svc.reviewer.*.*".into(),
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        },
    )
    .await
    .unwrap();
}

/// A nats-server with token auth checks the bearer each CONNECT carries. The
/// token changes across a broker restart: the seat gets back in only because
/// the bearer command runs again on the reconnect. (The auth callout that
/// validates the bearer in a real user-auth space is not run here; the sentinel
/// JWT rides along unchecked by a token-mode server.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_auth_bearer_is_minted_again_on_every_reconnect() {
    use std::os::unix::fs::PermissionsExt;
    logs();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    let count_file = dir.path().join("count");
    std::fs::write(&token_file, BEARER_ONE).unwrap();
    let script = dir.path().join("bearer.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho run >> '{}'\ncat '{}'\n",
            count_file.display(),
            token_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let seed = nkeys::KeyPair::new_user().seed().unwrap();
    let creds = dir.path().join("sentinel.creds");
    std::fs::write(
        &creds,
        format!(
            "-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QifQ.e30.sentinel\n------END NATS USER JWT------\n\n\
             -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n"
        ),
    )
    .unwrap();
    let runs = || {
        std::fs::read_to_string(&count_file)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };

    let mut server = nats_with(&["--auth", BEARER_ONE]).await;
    let peer = Peer::connect_token(&server.url, BEARER_ONE).await;
    provision_authed(&peer, OWNER).await;
    let argv = serde_json::to_string(&[script.display().to_string()]).unwrap();
    let creds_s = creds.display().to_string();
    let cfg = LaunchConfig::from_env(
        env(
            &server.url,
            &[
                ("COTAL_OWNER", OWNER),
                ("COTAL_ACTOR", "alice"),
                ("COTAL_SENTINEL_CREDS", &creds_s),
                ("COTAL_BEARER_CMD", &argv),
            ],
        ),
        false,
    )
    .unwrap();
    let h = Scripted::new();
    let seat = SeatProc::start(cfg, h.clone(), opts());
    let key = format!("{OWNER}.alice");
    until("presence with the first bearer", || async {
        presence_of(&peer, &key).await.is_some()
    })
    .await;
    let before = runs();
    assert!(before >= 1);

    // The broker comes back demanding a new bearer.
    std::fs::write(&token_file, BEARER_TWO).unwrap();
    server.restart(Some(&["--auth", BEARER_TWO])).await.unwrap();
    let since = jucode_cotal::util::now_ms();
    let peer = Peer::connect_token(&server.url, BEARER_TWO).await;
    until("a heartbeat after the reconnect", || async {
        presence_of(&peer, &key)
            .await
            .and_then(|p| p["ts"].as_u64())
            .is_some_and(|ts| ts > since)
    })
    .await;
    assert!(runs() > before, "the bearer command ran again on reconnect");
    let r = tool(&h, "cotal_connection_status", json!({})).await;
    assert!(r.text.contains("\"state\":\"ready\""), "{}", r.text);
    let logs = log_text();
    assert!(logs.contains("minted a fresh bearer"), "{logs}");
    assert!(
        !logs.contains(BEARER_ONE) && !logs.contains(BEARER_TWO),
        "a bearer reached the log"
    );
    seat.shutdown().unwrap();
    server.stop().await;
}

// ---- 4. broker outage mid-run ----------------------------------------------------------------

fn append_text(path: &Path, role: &str, text: &str) {
    use std::io::Write;
    let line = json!({"meta": {"status": "Active"}, "append_messages": [{"id": "m", "role": role,
        "content": [{"type": "text", "text": text}], "timestamp": "2026-11-29T21:24:53.291Z"}]});
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    writeln!(f, "{line}").unwrap();
}

const EVENTS_SUBJECT: &str = "cotal.dev.chat.local.alice.events.local.alice";

/// Every stored frame: (stream sequence, expected-last-subject-sequence header, msg id, frame).
async fn stored_frames(peer: &Peer) -> Vec<(u64, Option<u64>, String, Value)> {
    let Ok(stream) = peer.js.get_stream("CHAT_dev").await else {
        return Vec::new();
    };
    let Ok(last) = stream.get_last_raw_message_by_subject(EVENTS_SUBJECT).await else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for seq in 1..=last.sequence {
        if let Ok(m) = stream.get_raw_message(seq).await
            && m.subject.as_str() == EVENTS_SUBJECT
        {
            let v: Value = serde_json::from_slice(&m.payload).unwrap();
            let expected = m
                .headers
                .get("Nats-Expected-Last-Subject-Sequence")
                .and_then(|h| h.as_str().parse().ok());
            let id = m.headers.get("Nats-Msg-Id").unwrap().as_str().to_string();
            out.push((seq, expected, id, v["parts"][0].clone()));
        }
    }
    out
}

fn texts(frames: &[(u64, Option<u64>, String, Value)]) -> Vec<String> {
    frames
        .iter()
        .flat_map(|f| f.3["events"].as_array().unwrap().clone())
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap().to_string())
        .collect()
}

/// The pending record of every event WAL under `dir`, as text.
fn pending_in_wal(dir: &Path) -> String {
    let mut out = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.push_str(&pending_in_wal(&p));
        } else if p.file_name().is_some_and(|n| n == "wal.json")
            && let Ok(raw) = std::fs::read(&p)
            && let Ok(v) = serde_json::from_slice::<Value>(&raw)
        {
            out.push_str(&v["pending"].to_string());
        }
    }
    out
}

async fn status(h: &Scripted) -> Value {
    serde_json::from_str(&tool(h, "cotal_connection_status", json!({})).await.text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_outage_keeps_the_seat_up_and_the_event_stream_continuous() {
    logs();
    let mut server = nats_with(&[]).await;
    let ws = tempfile::tempdir().unwrap();
    let sessions = ws.path().join("home/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let source = JournalSource {
        sessions_dir: sessions.clone(),
        session_id: "session_outage".into(),
    };
    let journal = source.journal_path();
    let root = ws.path().display().to_string();
    let url = server.url.clone();
    let mk = || {
        LaunchConfig::from_env(
            env(
                &url,
                &[("COTAL_EVENTS", "1"), ("COTAL_WORKSPACE_ROOT", &root)],
            ),
            false,
        )
        .unwrap()
    };
    let peer = Peer::connect(&server.url).await;
    let h = Scripted::new();
    h.with_journal(source.clone());
    let seat = SeatProc::start(mk(), h.clone(), opts());
    until("presence", || async { peer.presence().await.is_some() }).await;
    append_text(&journal, "assistant", "alpha");
    until("the first frame", || async {
        texts(&stored_frames(&peer).await).contains(&"alpha".to_string())
    })
    .await;

    // The broker dies while the agent keeps writing.
    server.kill().await;
    append_text(&journal, "assistant", "beta");
    until("the seat sees the outage and reports waiting", || async {
        let s = status(&h).await;
        s["state"] == "disconnected" && s["status"] == "waiting"
    })
    .await;
    append_text(&journal, "assistant", "gamma");
    server.restart(None).await.unwrap();
    let back = jucode_cotal::util::now_ms();
    until("frames published after recovery", || async {
        texts(&stored_frames(&peer).await).contains(&"gamma".to_string())
    })
    .await;
    until("presence heartbeats again, no longer waiting", || async {
        peer.presence()
            .await
            .is_some_and(|p| p["ts"].as_u64().unwrap_or(0) > back && p["status"] == "idle")
    })
    .await;
    assert_eq!(status(&h).await["state"], "ready");

    // A stop during the next outage: the emitter winds down, the record waits.
    server.kill().await;
    append_text(&journal, "assistant", "delta");
    until(
        "the delta frame waits in the WAL, sent but not known stored",
        || async { pending_in_wal(&ws.path().join(".cotal/events")).contains("delta") },
    )
    .await;
    seat.shutdown().unwrap();
    assert!(
        log_text().contains("AG-UI emitter stopped"),
        "{}",
        log_text()
    );
    server.restart(None).await.unwrap();
    assert!(
        !texts(&stored_frames(&peer).await).contains(&"delta".to_string()),
        "delta was not stored before the stop"
    );
    let h2 = Scripted::new();
    h2.with_journal(source.clone());
    let seat = SeatProc::start(mk(), h2.clone(), opts());
    until("the next start publishes what the stop left", || async {
        texts(&stored_frames(&peer).await).contains(&"delta".to_string())
    })
    .await;
    append_text(&journal, "assistant", "epsilon");
    until("and goes on", || async {
        texts(&stored_frames(&peer).await).contains(&"epsilon".to_string())
    })
    .await;
    seat.shutdown().unwrap();

    let frames = stored_frames(&peer).await;
    assert_eq!(
        texts(&frames),
        ["alpha", "beta", "gamma", "delta", "epsilon"],
        "in order, no loss, no duplicate"
    );
    let mut br = jucode_cotal::events::Brackets::default();
    let mut prev: Option<u64> = None;
    let mut ids = std::collections::HashSet::new();
    for (i, (stream_seq, expected, id, f)) in frames.iter().enumerate() {
        assert_eq!(f["seq"], json!(i + 1), "frame counter is continuous");
        assert_eq!(
            *expected,
            Some(prev.unwrap_or(0)),
            "each frame expected the previous one as the subject's last"
        );
        assert!(ids.insert(id.clone()), "no frame stored twice");
        for e in f["events"].as_array().unwrap() {
            br.apply(e).unwrap();
        }
        prev = Some(*stream_seq);
    }
    assert_eq!(frames.first().unwrap().3["epoch"], 1);
    assert_eq!(frames.last().unwrap().3["epoch"], 2);
    server.stop().await;
}

// ---- 5. a crash between the frames of one journal record -------------------------------------

/// One journal record holding several messages.
fn append_record(path: &Path, messages: Value) {
    use std::io::Write;
    let line = json!({"meta": {"status": "Active"}, "append_messages": messages});
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    writeln!(f, "{line}").unwrap();
}

/// A prompt (ending the open run) and the answer to it (opening the next): two frames.
fn prompt_and_answer(prompt: &str, answer: &str) -> Value {
    json!([
        {"role": "user", "content": [{"type": "text", "text": prompt}], "timestamp": "2026-11-29T21:25:00.000Z"},
        {"role": "assistant", "content": [{"type": "text", "text": answer}], "timestamp": "2026-11-29T21:25:01.000Z"}
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_the_frames_of_one_record_loses_and_repeats_nothing() {
    use jucode_cotal::events::{CrashPoint, Emitter};
    let server = nats_with(&[]).await;
    let ws = tempfile::tempdir().unwrap();
    let sessions = ws.path().join("home/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let source = JournalSource {
        sessions_dir: sessions,
        session_id: "session_crash".into(),
    };
    let journal = source.journal_path();
    let root = ws.path().display().to_string();
    let cfg = LaunchConfig::from_env(
        env(
            &server.url,
            &[("COTAL_EVENTS", "1"), ("COTAL_WORKSPACE_ROOT", &root)],
        ),
        false,
    )
    .unwrap();
    let peer = Peer::connect(&server.url).await;
    let open = || async {
        let mesh = jucode_cotal::mesh::Mesh::connect(&cfg).await.unwrap();
        Emitter::open(&cfg, mesh, source.clone(), Duration::from_millis(20)).unwrap()
    };
    // Runs an emitter that dies at `at`, as a killed seat would.
    let crash_run = |at: CrashPoint| async move {
        let em = open().await.crash_at(at);
        let (_hints, rx) = tokio::sync::mpsc::unbounded_channel();
        let r = tokio::time::timeout(GUARD, em.run(rx))
            .await
            .expect("deadlock guard: the emitter never reached its crash point");
        let e = r.expect_err("the emitter must stop at the crash point");
        assert!(e.to_string().contains("injected crash"), "{e}");
    };

    // Record 1 is one frame; record 2 is two (the prompt closes run 1, the answer opens run 2).
    append_text(&journal, "assistant", "alpha");
    append_record(&journal, prompt_and_answer("next", "beta"));

    // Dies after frame 2 (record 2's first) is stored and folded, before frame 3 is published.
    crash_run(CrashPoint::Folded(2)).await;
    let frames = stored_frames(&peer).await;
    assert_eq!(frames.len(), 2);
    assert_eq!(texts(&frames), ["alpha"]);
    let pending = pending_in_wal(&ws.path().join(".cotal/events"));
    assert!(
        pending.contains("beta"),
        "the record's second frame was durable before its first was published: {pending}"
    );

    // The restart publishes frame 3 and dies before the WAL learns it was stored.
    crash_run(CrashPoint::Stored(3)).await;
    assert_eq!(texts(&stored_frames(&peer).await), ["alpha", "beta"]);

    // The next start finds frame 3 stored (same id) instead of storing it twice, then goes on.
    append_record(&journal, prompt_and_answer("again", "gamma"));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (_hints, rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(open().await.with_stop(stop_rx).run(rx));
    until("gamma stored", || async {
        texts(&stored_frames(&peer).await).contains(&"gamma".to_string())
    })
    .await;
    stop_tx.send(true).unwrap();
    tokio::time::timeout(GUARD, task)
        .await
        .expect("deadlock guard: the emitter did not stop")
        .unwrap()
        .unwrap();

    let frames = stored_frames(&peer).await;
    assert_eq!(
        texts(&frames),
        ["alpha", "beta", "gamma"],
        "every record once, in order"
    );
    assert_eq!(frames.len(), 5, "two runs ended, three texts: five frames");
    let mut br = jucode_cotal::events::Brackets::default();
    let mut prev = 0;
    let mut ids = std::collections::HashSet::new();
    let mut runs = Vec::new();
    for (i, (stream_seq, expected, id, f)) in frames.iter().enumerate() {
        assert_eq!(f["seq"], json!(i + 1), "frame counter is continuous");
        assert_eq!(
            *expected,
            Some(prev),
            "each frame expected the previous one"
        );
        assert!(ids.insert(id.clone()), "no frame stored twice");
        for e in f["events"].as_array().unwrap() {
            br.apply(e).unwrap();
        }
        runs.push(f["runId"].as_str().unwrap().to_string());
        prev = *stream_seq;
    }
    assert_eq!(runs[0], runs[1], "the prompt ends the first run");
    assert_ne!(runs[1], runs[2]);
    assert_eq!(runs[2], runs[3]);
    assert_ne!(runs[3], runs[4]);
    let epochs: Vec<u64> = frames
        .iter()
        .map(|f| f.3["epoch"].as_u64().unwrap())
        .collect();
    assert_eq!(
        epochs,
        [1, 1, 1, 3, 3],
        "frame 3 was recorded by the first start and stored as recorded"
    );
    assert_eq!(pending_in_wal(&ws.path().join(".cotal/events")), "null");
    server.stop().await;
}

// ---- 6. soft interrupts: acked only after the turn that carried them -------------------------

/// Seat options whose interrupt bound never fires while a test holds a request.
fn patient() -> jucode_cotal::seat::SeatOptions {
    jucode_cotal::seat::SeatOptions {
        interrupt_timeout: GUARD,
        ..opts()
    }
}

/// A seat on `h` (its steps already scripted) busy with DM m1's turn, and DM m2 "steer me"
/// sent as a soft interrupt that `h` holds unanswered.
async fn busy_with_a_held_interrupt(h: &Scripted) -> (NatsServer, Peer, SeatProc) {
    let server = nats_with(&[]).await;
    let peer = Peer::connect(&server.url).await;
    let cfg = LaunchConfig::from_env(env(&server.url, &[]), false).unwrap();
    let seat = SeatProc::start(cfg, h.clone(), patient());
    until("presence", || async { peer.presence().await.is_some() }).await;

    peer.dm_stored("m1", "start working").await;
    until("the busy turn", || async { h.running() }).await;
    h.hold_interrupts(true);
    peer.dm_stored("m2", "steer me").await;
    until("the soft interrupt is asked", || async {
        !h.interrupts().is_empty()
    })
    .await;
    (server, peer, seat)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_whose_interrupt_ran_as_a_failed_turn_of_its_own_is_not_acked_and_is_carried_again() {
    let h = Scripted::new();
    h.push(Step::Hold); // the busy turn
    h.push(Step::Fail {
        code: Some("overloaded".into()),
        message: "529".into(),
    }); // the interrupt's own turn
    h.push(Step::Hold); // the turn that carries it again
    let (server, peer, seat) = busy_with_a_held_interrupt(&h).await;
    assert!(h.interrupts()[0].contains("steer me"));

    // The busy turn ends before the interrupt is answered, so the interrupt
    // misses it and runs as its own turn, which fails.
    h.release();
    until("the busy turn ended", || async { !h.running() }).await;
    h.hold_interrupts(false);
    h.answer_interrupt();
    // Carried again either by the seat's retry turn or, when the seat still
    // saw the failed turn running, by a second interrupt's own turn.
    until(
        "the DM is carried again after its own turn failed",
        || async { h.turns().len() >= 3 },
    )
    .await;
    let turns = h.turns();
    assert!(h.own_turns() >= 1);
    assert!(turns[1].contains("steer me"), "{}", turns[1]);
    assert!(!turns[1].contains("start working"));
    assert!(turns[2].contains("steer me"), "{}", turns[2]);
    until("m1 acked with the busy turn", || async {
        peer.dm_unacked().await <= 1
    })
    .await;
    assert_eq!(
        peer.dm_unacked().await,
        1,
        "the DM whose own turn failed stays un-acked while it is carried again"
    );

    h.release();
    until("acked after the later successful turn", || async {
        peer.dm_unacked().await == 0
    })
    .await;
    let carried: usize = h
        .turns()
        .iter()
        .map(|t| t.matches("steer me").count())
        .sum();
    assert_eq!(carried, 2, "its own failed turn and the one that succeeded");
    seat.shutdown().unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_injected_into_the_running_turn_is_acked_once_with_that_turn() {
    let h = Scripted::new();
    h.push(Step::Hold);
    let (server, peer, seat) = busy_with_a_held_interrupt(&h).await;
    // Answered while the turn runs: it joins that turn.
    h.answer_interrupt();
    until("both delivered", || async { peer.dm_unacked().await == 2 }).await;
    h.release();
    until("both acked with the turn", || async {
        peer.dm_unacked().await == 0
    })
    .await;
    until("idle", || async {
        peer.presence().await.is_some_and(|p| p["status"] == "idle")
    })
    .await;
    assert_eq!(h.own_turns(), 0);
    assert_eq!(h.turns().len(), 1, "the injected DM started no turn");
    assert_eq!(h.interrupts().len(), 1, "injected once");
    let info = peer
        .consumer_info("DM_dev", &format!("dm_local-alice-{UID}"))
        .await
        .unwrap();
    assert_eq!(info.num_redelivered, 0, "acked once, never redelivered");
    seat.shutdown().unwrap();
    server.stop().await;
}

/// The gap of round 3: the busy turn ends and, in that instant, a turn typed
/// at the TUI begins; the interrupt, answered `Joined`, entered the TUI turn,
/// which fails. The DM is decided by that turn, not by the one that ended
/// fine: un-acked and carried again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_joined_into_a_tui_turn_that_fails_is_not_acked_and_is_carried_again() {
    let h = Scripted::new();
    h.push(Step::Hold); // the busy turn
    h.push(Step::Hold); // the turn that carries it again
    h.tui_turn_at_end(Step::HoldFail {
        code: Some("overloaded".into()),
        message: "529".into(),
    });
    let (server, peer, seat) = busy_with_a_held_interrupt(&h).await;

    // The busy turn ends well and the TUI turn starts in the same instant.
    h.release();
    until("the TUI turn", || async { h.tui_turns() == 1 }).await;
    until("m1 acked with the busy turn", || async {
        peer.dm_unacked().await == 1
    })
    .await;
    // Answered while the TUI turn runs: the DM joins that turn.
    h.hold_interrupts(false);
    h.answer_interrupt();
    until("the interrupt joined the TUI turn", || async {
        h.joined() == 1
    })
    .await;
    h.release();
    // Carried again by the seat's next turn or, when the seat still saw the
    // TUI turn running, by a second interrupt's own turn.
    until("the DM is carried again", || async { h.turns().len() >= 2 }).await;
    let turns = h.turns();
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert!(turns[1].contains("steer me"), "{}", turns[1]);
    assert!(!turns[1].contains("start working"));
    assert_eq!(
        peer.dm_unacked().await,
        1,
        "the DM whose TUI turn failed stays un-acked while it is carried again"
    );

    h.release();
    until("acked after the later successful turn", || async {
        peer.dm_unacked().await == 0
    })
    .await;
    seat.shutdown().unwrap();
    server.stop().await;
}
