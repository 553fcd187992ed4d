//! A whole seat against a real nats-server (JetStream, loopback, random port):
//! a second endpoint written here acts as operator and peer, a fake manager
//! answers control requests, and the scripted harness stands in for jcode.
//!
//! Needs nats-server ≥ 2.12: `scripts/install-nats.sh` (tests fail, naming it,
//! when the binary is missing). Run: `cargo test -p jucode-cotal-jcode`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use jucode_cotal::config::LaunchConfig;
use jucode_cotal::events::Brackets;
use jucode_cotal::harness::JournalSource;
use jucode_cotal::seat;
use jucode_cotal::testkit::{
    self, NatsServer, Scripted, SeatProc, Step, TEST_UID as UID, fast_seat_options as opts,
    seat_env as env,
};
use serde_json::{Value, json};

const GUARD: Duration = Duration::from_secs(40);

async fn until<F, Fut>(what: &str, f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    testkit::until(what, GUARD, f).await
}

async fn nats() -> NatsServer {
    match NatsServer::start().await {
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
        let client = async_nats::connect(url).await.unwrap();
        let js = async_nats::jetstream::new(client.clone());
        Peer { client, js }
    }

    async fn publish(&self, subject: &str, msg: Value) {
        let id = msg["id"].as_str().unwrap().to_string();
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-Msg-Id", id.as_str());
        self.js
            .publish_with_headers(subject.to_string(), h, msg.to_string().into())
            .await
            .unwrap()
            .await
            .unwrap();
    }

    async fn dm(&self, id: &str, text: &str) {
        let msg = json!({"id": id, "ts": 1.0, "space": "dev", "from": {"id": "local.bob", "name": "bob"},
            "to": "local.alice", "parts": [{"kind": "text", "text": text}]});
        self.publish("cotal.dev.inst.local.alice.local.bob", msg)
            .await;
    }

    async fn chat(&self, channel: &str, id: &str, text: &str, mentions: &[&str]) {
        let mut msg = json!({"id": id, "ts": 1.0, "space": "dev", "from": {"id": "local.bob", "name": "bob"},
            "channel": channel, "parts": [{"kind": "text", "text": text}]});
        if !mentions.is_empty() {
            msg["mentions"] = json!(mentions);
        }
        // Live channels are core publishes.
        self.client
            .publish(
                format!("cotal.dev.chat.local.bob.{channel}"),
                msg.to_string().into(),
            )
            .await
            .unwrap();
        self.client.flush().await.unwrap();
    }

    async fn presence(&self) -> Option<Value> {
        let kv = self.js.get_key_value("cotal_presence_dev").await.ok()?;
        let raw = kv.get("local.alice").await.ok()??;
        serde_json::from_slice(&raw).ok()
    }

    async fn ack_pending(&self) -> usize {
        let stream = self.js.get_stream("DM_dev").await.unwrap();
        let mut c: async_nats::jetstream::consumer::Consumer<
            async_nats::jetstream::consumer::pull::Config,
        > = stream
            .get_consumer(&format!("dm_local-alice-{UID}"))
            .await
            .unwrap();
        c.info().await.unwrap().num_ack_pending
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_appears_then_goes_stale_when_the_seat_is_killed() {
    let server = nats().await;
    let cfg = LaunchConfig::from_env(env(&server.url, &[]), false).unwrap();
    let seat = SeatProc::start(cfg, Scripted::new(), opts());
    let peer = Peer::connect(&server.url).await;
    until("presence appears", || async {
        peer.presence().await.is_some()
    })
    .await;
    let p = peer.presence().await.unwrap();
    assert_eq!(p["card"]["id"], "local.alice");
    assert_eq!(p["card"]["role"], "reviewer");
    assert_eq!(p["card"]["protocolVersion"], "0.4");
    assert_eq!(p["status"], "idle");
    assert_eq!(p["lifecycleUid"], UID);
    let ts1 = p["ts"].as_u64().unwrap();
    until("a heartbeat follows", || async {
        peer.presence()
            .await
            .and_then(|p| p["ts"].as_u64())
            .is_some_and(|t| t > ts1)
    })
    .await;
    seat.kill();
    until("presence goes stale after the kill", || async {
        peer.presence().await.is_none()
    })
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dm_is_acked_only_after_a_successful_turn_and_redriven_after_a_failed_one() {
    let server = nats().await;
    let cfg = LaunchConfig::from_env(env(&server.url, &[]), false).unwrap();
    let h = Scripted::new();
    h.push(Step::Fail {
        code: Some("rate_limit".into()),
        message: "429".into(),
    });
    h.push(Step::Hold);
    let seat = SeatProc::start(cfg, h.clone(), opts());
    let peer = Peer::connect(&server.url).await;
    until("presence", || async { peer.presence().await.is_some() }).await;

    // A sender-mismatched DM is terminated, never surfaced or redelivered.
    let forged = json!({"id": "forged", "ts": 1.0, "space": "dev", "from": {"id": "local.eve", "name": "eve"},
        "to": "local.alice", "parts": [{"kind": "text", "text": "forged text"}]});
    peer.publish("cotal.dev.inst.local.alice.local.bob", forged)
        .await;
    peer.dm("m1", "please review").await;

    until("first turn", || async { !h.turns().is_empty() }).await;
    assert!(
        h.turns()[0].contains("• DM from bob: please review"),
        "{}",
        h.turns()[0]
    );
    until("waiting with the relayed condition", || async {
        peer.presence()
            .await
            .is_some_and(|p| p["condition"]["code"] == "rate_limit")
    })
    .await;
    assert_eq!(
        peer.ack_pending().await,
        1,
        "a failed turn leaves the DM un-acked"
    );

    until("the batch is redriven", || async { h.turns().len() >= 2 }).await;
    assert!(h.turns()[1].contains("please review"));
    until("working, condition cleared", || async {
        peer.presence()
            .await
            .is_some_and(|p| p["status"] == "working" && p.get("condition").is_none())
    })
    .await;
    assert_eq!(
        peer.ack_pending().await,
        1,
        "still un-acked while the turn runs"
    );

    // A DM during the busy turn rides it as a soft interrupt.
    peer.dm("m2", "also this").await;
    until("soft interrupt", || async { !h.interrupts().is_empty() }).await;
    assert!(h.interrupts()[0].contains("also this"));
    h.release();
    until("both acked after success", || async {
        peer.ack_pending().await == 0
    })
    .await;
    until("idle", || async {
        peer.presence().await.is_some_and(|p| p["status"] == "idle")
    })
    .await;
    assert!(h.turns().iter().all(|t| !t.contains("forged text")));
    assert_eq!(
        h.turns().len(),
        2,
        "the interrupted DM did not start a turn of its own"
    );
    seat.shutdown().unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_and_muted_channels() {
    let server = nats().await;
    let cfg = LaunchConfig::from_env(
        env(
            &server.url,
            &[
                ("COTAL_SUBSCRIBE", "general,q1,m1"),
                ("COTAL_QUIET", "q1"),
                ("COTAL_MUTED", "m1"),
            ],
        ),
        false,
    )
    .unwrap();
    let h = Scripted::new();
    let seat = SeatProc::start(cfg, h.clone(), opts());
    let peer = Peer::connect(&server.url).await;
    until("presence", || async { peer.presence().await.is_some() }).await;
    let p = peer.presence().await.unwrap();
    assert_eq!(p["channelModes"], json!({"q1": "quiet", "m1": "muted"}));

    peer.chat("q1", "c1", "quiet chatter", &[]).await;
    peer.chat("m1", "c2", "muted even with mention", &["alice"])
        .await;
    peer.chat("general", "c3", "hello all", &[]).await;
    until("a turn for #general", || async { !h.turns().is_empty() }).await;
    let t = h.turns().join("\n");
    assert!(t.contains("#general bob: hello all"), "{t}");
    assert!(
        !t.contains("quiet chatter") && !t.contains("muted even"),
        "{t}"
    );

    peer.chat("q1", "c4", "quiet mention", &["alice"]).await;
    until("a mention on a quiet channel wakes", || async {
        h.turns().len() >= 2
    })
    .await;
    assert!(h.turns()[1].contains("quiet mention"));

    // The quiet chatter is held for cotal_inbox; muted traffic is gone.
    let ctx = h.context.lock().unwrap().clone().unwrap();
    let r = jucode_cotal::relay::call(
        &ctx.mcp.socket,
        &ctx.mcp.token,
        "cotal_inbox",
        &serde_json::Map::new(),
    )
    .await
    .unwrap();
    assert!(
        r.text.contains("quiet chatter") && !r.text.contains("muted"),
        "{}",
        r.text
    );
    let r = jucode_cotal::relay::call(
        &ctx.mcp.socket,
        &ctx.mcp.token,
        "cotal_inbox",
        &serde_json::Map::new(),
    )
    .await
    .unwrap();
    assert_eq!(r.text, "No held messages.");
    // A wrong relay token gets no answer.
    assert!(
        jucode_cotal::relay::call(
            &ctx.mcp.socket,
            "wrong",
            "cotal_inbox",
            &serde_json::Map::new()
        )
        .await
        .is_err()
    );
    seat.shutdown().unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_through_a_real_mcp_client() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::TokioChildProcess;

    let server = nats().await;
    let cfg =
        LaunchConfig::from_env(env(&server.url, &[("COTAL_SUBSCRIBE", "general")]), false).unwrap();
    let h = Scripted::new();
    let seat = SeatProc::start(cfg, h.clone(), opts());
    let peer = Peer::connect(&server.url).await;
    until("presence", || async { peer.presence().await.is_some() }).await;

    // Strict fake manager: refuses requests without the described contract digests.
    let manager = jucode_cotal::testkit::FakeManager::start(peer.client.clone(), "dev")
        .await
        .unwrap();
    // A peer to DM and a role to anycast to.
    let kv = peer.js.get_key_value("cotal_presence_dev").await.unwrap();
    let bob = json!({"card": {"id": "local.bob", "name": "bob", "kind": "agent", "role": "builder"}, "status": "idle", "ts": jucode_cotal::util::now_ms()});
    kv.put("local.bob", bob.to_string().into()).await.unwrap();

    let ctx = h.context.lock().unwrap().clone().unwrap();
    assert_eq!(ctx.mcp.env().len(), 3);
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_jucode-cotal-jcode"));
    cmd.arg("mcp-bridge").env_clear();
    for (k, v) in ctx.mcp.env() {
        cmd.env(k, v);
    }
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 22);
    for t in &tools {
        assert_eq!(
            t.input_schema.get("additionalProperties"),
            Some(&json!(false)),
            "{}",
            t.name
        );
    }
    let call = |name: &'static str, args: Value| {
        let client = &client;
        async move {
            let r = client
                .call_tool(
                    CallToolRequestParams::new(name)
                        .with_arguments(args.as_object().unwrap().clone()),
                )
                .await
                .unwrap();
            let text = r
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                .collect::<Vec<_>>()
                .join("");
            (text, r.is_error.unwrap_or(false))
        }
    };
    let cases: Vec<(&'static str, Value, bool, &str)> = vec![
        (
            "cotal_orientation",
            json!({"intent": "look", "accept_large_output": true}),
            false,
            "You are alice",
        ),
        (
            "cotal_connection_status",
            json!({}),
            false,
            "\"state\":\"ready\"",
        ),
        ("cotal_docs", json!({"page": "attention"}), false, "focus"),
        ("cotal_roster", json!({}), false, "bob"),
        (
            "cotal_send",
            json!({"text": "hi all", "channel": "general", "mentions": ["bob"]}),
            false,
            "stored seq",
        ),
        (
            "cotal_dm",
            json!({"to": "bob", "text": "hi bob"}),
            false,
            "recipient status at send: idle",
        ),
        (
            "cotal_anycast",
            json!({"role": "builder", "text": "build it"}),
            false,
            "stored seq",
        ),
        (
            "cotal_status",
            json!({"attention": "dnd", "activity": "reviewing"}),
            false,
            "attention dnd",
        ),
        (
            "cotal_channel_info",
            json!({"channel": "general"}),
            false,
            "joined: true",
        ),
        ("cotal_channels", json!({}), false, "#general (joined)"),
        (
            "cotal_channel_mode",
            json!({"channel": "general", "mode": "quiet"}),
            false,
            "quiet",
        ),
        (
            "cotal_join",
            json!({"channel": "ops"}),
            false,
            "joined #ops",
        ),
        ("cotal_leave", json!({"channel": "ops"}), false, "left #ops"),
        ("cotal_inbox", json!({"peek": true}), false, "No held"),
        (
            "cotal_spawn",
            json!({"name": "carol", "role": "tester"}),
            false,
            "\"command\":\"spawn\"",
        ),
        ("cotal_despawn", json!({"name": "ghost"}), true, "not-found"),
        (
            "cotal_persona",
            json!({"name": "p", "prompt": "be nice"}),
            false,
            "define-persona",
        ),
        ("cotal_personas", json!({}), false, "personas"),
        (
            "cotal_yield",
            json!({"status": "done", "note": "ok"}),
            false,
            "turn-yield",
        ),
        (
            "cotal_run",
            json!({"verb": "ps"}),
            false,
            "\"command\":\"run\"",
        ),
        (
            "cotal_feedback",
            json!({"origin": "agent", "type": "idea", "summary": "s"}),
            false,
            "feedback",
        ),
        ("cotal_reconnect", json!({}), false, "reconnecting"),
    ];
    assert_eq!(cases.len(), tools.len(), "every tool is exercised");
    for (name, args, want_err, needle) in cases {
        let (text, is_err) = call(name, args).await;
        assert_eq!(is_err, want_err, "{name}: {text}");
        assert!(text.contains(needle), "{name}: {text}");
    }
    let (text, is_err) = call("cotal_send", json!({"text": "x", "owner": "local"})).await;
    assert!(is_err && text.contains("unknown argument"), "{text}");

    // What the tools did is visible on the mesh.
    let p = peer.presence().await.unwrap();
    assert_eq!(p["attention"], "dnd");
    assert_eq!(p["channelModes"]["general"], "quiet");
    let dm = peer
        .js
        .get_stream("DM_dev")
        .await
        .unwrap()
        .get_last_raw_message_by_subject("cotal.dev.inst.local.bob.local.alice")
        .await
        .unwrap();
    let v: Value = serde_json::from_slice(&dm.payload).unwrap();
    assert_eq!(v["from"]["id"], "local.alice");
    assert_eq!(v["to"], "local.bob");
    assert_eq!(
        dm.headers.get("Nats-Msg-Id").unwrap().as_str(),
        v["id"].as_str().unwrap()
    );
    assert!(manager.refused().is_empty(), "{:?}", manager.refused());
    client.cancel().await.unwrap();
    manager.stop();
    seat.shutdown().unwrap();
    server.stop().await;
}

fn append(path: &Path, role: &str, content: Value, extra: Value) {
    use std::io::Write;
    let mut msg = json!({"id": "m", "role": role, "content": content, "timestamp": "2026-11-29T21:24:53.291Z"});
    if let Some(o) = extra.as_object() {
        for (k, v) in o {
            msg[k] = v.clone();
        }
    }
    let line = json!({"meta": {"status": "Active"}, "append_messages": [msg]});
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    writeln!(f, "{line}").unwrap();
}

async fn frames(peer: &Peer) -> Vec<Value> {
    let stream = peer.js.get_stream("CHAT_dev").await.unwrap();
    let info = stream.get_info().await.unwrap();
    let mut out = Vec::new();
    for seq in info.state.first_sequence..=info.state.last_sequence {
        if let Ok(m) = stream.get_raw_message(seq).await
            && m.subject.as_str() == "cotal.dev.chat.local.alice.events.local.alice"
        {
            let v: Value = serde_json::from_slice(&m.payload).unwrap();
            out.push(v["parts"][0].clone());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_frames_are_valid_and_continuous_across_a_restart_mid_run() {
    let server = nats().await;
    let ws = tempfile::tempdir().unwrap();
    let sessions = ws.path().join("home/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let source = JournalSource {
        sessions_dir: sessions.clone(),
        session_id: "session_test_1".into(),
    };
    let journal = source.journal_path();
    let root = ws.path().display().to_string();
    let mk = || {
        LaunchConfig::from_env(
            env(
                &server.url,
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
    append(
        &journal,
        "user",
        json!([{"type": "text", "text": "SECRET PROMPT"}]),
        json!({}),
    );
    append(
        &journal,
        "assistant",
        json!([{"type": "reasoning", "text": "hmm"}, {"type": "text", "text": "working on it"},
        {"type": "tool_use", "id": "call_1", "name": "bash", "input": {"command": "SECRET ARG"}}]),
        json!({}),
    );
    until("first frame", || async { !frames(&peer).await.is_empty() }).await;
    seat.shutdown().unwrap();

    // While the seat is down the tool finishes and the next prompt arrives.
    append(
        &journal,
        "user",
        json!([{"type": "tool_result", "tool_use_id": "call_1", "content": "SECRET RESULT"}]),
        json!({}),
    );
    append(
        &journal,
        "assistant",
        json!([{"type": "text", "text": "done"}]),
        json!({}),
    );
    append(
        &journal,
        "user",
        json!([{"type": "text", "text": "SECOND PROMPT"}]),
        json!({}),
    );
    let h2 = Scripted::new();
    h2.with_journal(source.clone());
    let seat = SeatProc::start(mk(), h2.clone(), opts());
    until("frames after restart", || async {
        frames(&peer).await.iter().any(|f| {
            f["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["type"] == "RUN_FINISHED")
        })
    })
    .await;
    // A checkpoint folds the journal: open observations end with RUN_ERROR.
    append(
        &journal,
        "assistant",
        json!([{"type": "tool_use", "id": "call_2", "name": "bash", "input": {}}]),
        json!({}),
    );
    until("second run opened", || async {
        frames(&peer).await.len() >= 5
    })
    .await;
    std::fs::write(
        source.snapshot_path(),
        json!({"id": "session_test_1", "messages": []}).to_string(),
    )
    .unwrap();
    std::fs::remove_file(&journal).unwrap();
    until("RUN_ERROR after the fold", || async {
        frames(&peer).await.iter().any(|f| {
            f["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["type"] == "RUN_ERROR")
        })
    })
    .await;
    seat.shutdown().unwrap();

    let all = frames(&peer).await;
    let mut br = Brackets::default();
    let mut types = Vec::new();
    for (i, f) in all.iter().enumerate() {
        assert_eq!(f["kind"], "ag-ui.frame");
        assert_eq!(f["protocol"], "ag-ui/0.0.57");
        assert_eq!(f["threadId"], "session_test_1");
        assert_eq!(f["seq"], json!(i + 1), "frames are continuous: {all:#?}");
        let evs = f["events"].as_array().unwrap();
        assert!(!evs.is_empty());
        for e in evs {
            br.apply(e).unwrap();
            types.push(e["type"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(all[0]["epoch"], 1);
    assert_eq!(all.last().unwrap()["epoch"], 2);
    let text = serde_json::to_string(&all).unwrap();
    for secret in [
        "SECRET PROMPT",
        "SECRET ARG",
        "SECRET RESULT",
        "SECOND PROMPT",
    ] {
        assert!(
            !text.contains(secret),
            "{secret} leaked onto the event channel"
        );
    }
    assert_eq!(
        types.iter().filter(|t| *t == "RUN_STARTED").count(),
        2,
        "{types:?}"
    );
    assert_eq!(
        types.iter().filter(|t| *t == "TOOL_CALL_END").count(),
        2,
        "{types:?}"
    );
    assert_eq!(types.last().unwrap(), "RUN_ERROR");
    assert!(!br.is_open());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_material_is_unlinked_and_absent_from_the_agent_env_and_control_shuts_down() {
    let server = nats().await;
    let dir = tempfile::tempdir().unwrap();
    let material = dir.path().join("launch.json");
    std::fs::write(
        &material,
        json!({"servers": [server.url], "controlToken": "ctl-secret"}).to_string(),
    )
    .unwrap();
    std::fs::set_permissions(&material, std::fs::Permissions::from_mode(0o600)).unwrap();
    let sock = dir.path().join("control.sock");
    let vars = vec![
        ("COTAL_SPACE".to_string(), "dev".to_string()),
        ("COTAL_NAME".to_string(), "alice".to_string()),
        (
            "COTAL_LAUNCH_MATERIAL".to_string(),
            material.display().to_string(),
        ),
        (
            "COTAL_CONTROL_SOCKET".to_string(),
            sock.display().to_string(),
        ),
        ("COTAL_JCODE_TUI".to_string(), "0".to_string()),
        ("HOME".to_string(), "/root".to_string()),
    ];
    let cfg = LaunchConfig::from_env(vars, false).unwrap();
    assert!(!material.exists(), "launch material is unlinked once read");
    assert!(cfg.control.is_some());
    let h = Scripted::new();
    let h2 = h.clone();
    // The seat serves its control socket itself; only a control shutdown stops it here.
    let run =
        tokio::spawn(
            async move { seat::run(cfg, &h2, opts(), std::future::pending::<()>()).await },
        );
    let peer = Peer::connect(&server.url).await;
    until("presence", || async { peer.presence().await.is_some() }).await;
    let ctx = h.context.lock().unwrap().clone().unwrap();
    assert!(
        ctx.agent_env.iter().all(|(k, _)| !k.starts_with("COTAL_")),
        "{:?}",
        ctx.agent_env
    );
    let dump = format!("{:?}{:?}", ctx.agent_env, ctx.mcp.env());
    assert!(!dump.contains(&material.display().to_string()));
    assert!(
        !dump.contains("ctl-secret") && !dump.contains(&server.url),
        "{dump}"
    );
    assert_eq!(
        ctx.jcode.get("COTAL_JCODE_TUI").map(String::as_str),
        Some("0")
    );

    let bad = jucode_cotal::control::request(&sock, &json!({"token": "nope", "op": "shutdown"}))
        .await
        .unwrap();
    assert!(bad.is_none());
    let ok =
        jucode_cotal::control::request(&sock, &json!({"token": "ctl-secret", "op": "shutdown"}))
            .await
            .unwrap();
    assert_eq!(ok, Some(json!({"ok": true})));
    tokio::time::timeout(GUARD, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    until("presence removed on a clean stop", || async {
        peer.presence().await.is_none()
    })
    .await;
    assert!(!sock.exists(), "the control socket is removed at stop");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_hook_measures_journal_to_stored_latency() {
    let server = nats().await;
    let report =
        jucode_cotal::bench::journal_to_stored_latency(&server.url, 5, Duration::from_millis(5))
            .await
            .unwrap();
    assert_eq!(report.samples_us.len(), 5);
    assert!(report.samples_us.windows(2).all(|w| w[0] <= w[1]));
    assert!(report.percentile(0.5) > 0);
    server.stop().await;
}
