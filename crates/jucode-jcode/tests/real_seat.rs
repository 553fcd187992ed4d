//! One whole seat end to end: the real `jucode-cotal-jcode` binary, a real
//! nats-server (JetStream, loopback), the real jcode with a fake
//! OpenAI-compatible provider, and the real stdio MCP bridge. A peer DMs the
//! seat and gets the answer the model sent through `cotal_dm`, which the
//! event plane publishes from jcode's session journal; SIGTERM then
//! stops the seat and its private jcode tree.
//!
//! Takes the jcode named by `JCODE_BIN`, else the pinned npm build. Needs
//! `scripts/install-jcode.sh` (or `JCODE_BIN`) and `scripts/install-nats.sh`; ignored in
//! the fast suite. Run: `cargo nextest run -p jucode-jcode --run-ignored only`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use futures_util::StreamExt;
use jucode_cotal::testkit::NatsServer;
use jucode_jcode::home::PrivateHome;
use jucode_jcode::instance::{LaunchRecord, alive, recorded_daemons};
use jucode_testsupport::fake_model::FakeModel;
use serde_json::{Value, json};

const GUARD: Duration = Duration::from_secs(180);
const UID: &str = "abcdefghijklmnopqrstuvwxyz";

/// `JCODE_BIN` when set (any build a user has), else the pinned npm build.
fn jcode_bin() -> PathBuf {
    if let Ok(p) = std::env::var("JCODE_BIN") {
        return PathBuf::from(p);
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/peers/npm-jcode/node_modules/@1jehuang/jcode-linux-x64/bin/jcode");
    assert!(
        p.exists(),
        "{} is missing: run scripts/install-jcode.sh first",
        p.display()
    );
    p
}

/// The seat binary, built into this test's target directory on first use.
fn seat_bin() -> PathBuf {
    jucode_testsupport::build_bin("jucode-cotal-jcode", "jucode-cotal-jcode").unwrap()
}

/// The connector log, the last frames and the provider's requests, for a failure message.
fn seat_logs(ws: &std::path::Path, provider: &FakeModel) -> String {
    let home = PrivateHome::prepare(ws, "dev", "alice").unwrap();
    let mut logs = String::from("logs:\n");
    for e in std::fs::read_dir(home.root.join("logs")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        if name.starts_with("connector-") {
            logs.push_str(&text);
        } else if name.starts_with("harness-frames-") {
            // The last frames (no deltas) show where the seat stopped.
            let tail: Vec<&str> = text.lines().filter(|l| !l.contains("_delta")).collect();
            let from = tail.len().saturating_sub(40);
            logs.push_str("frames:\n");
            logs.push_str(&tail[from..].join("\n"));
            logs.push('\n');
        } else if name.starts_with("jcode-") {
            let mcp: Vec<&str> = text.lines().filter(|l| l.contains("MCP")).collect();
            logs.push_str("jcode MCP lines:\n");
            logs.push_str(&mcp.join("\n"));
            logs.push('\n');
        }
    }
    let reqs: Vec<String> = provider
        .jcode_requests()
        .iter()
        .map(|r| {
            format!(
                "{:?}: {}",
                r.last_role,
                r.last_text.chars().take(200).collect::<String>()
            )
        })
        .collect();
    format!("{logs}provider:\n{}", reqs.join("\n"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real jcode and nats-server: scripts/install-jcode.sh, scripts/install-nats.sh"]
async fn a_dm_to_a_jcode_seat_is_answered_and_stop_leaves_no_tree() {
    let jcode = jcode_bin();
    let bin = seat_bin();
    let server = match NatsServer::start().await {
        Ok(s) => s,
        Err(e) => panic!("{e} (install it with scripts/install-nats.sh)"),
    };
    let provider = FakeModel::start().await.unwrap();
    let ws = tempfile::tempdir().unwrap();
    let op = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(op.path().join(".jcode")).unwrap();
    std::fs::write(
        op.path().join(".jcode/config.toml"),
        provider.jcode_config_toml(),
    )
    .unwrap();
    let work = ws.path().join("work");
    std::fs::create_dir_all(&work).unwrap();

    let client = async_nats::connect(&server.url).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let mut replies = client
        .subscribe("cotal.dev.inst.local.bob.local.alice")
        .await
        .unwrap();
    // AG-UI frames travel as chat on the `events.<owner>.<actor>` channel.
    let mut events = client.subscribe("cotal.dev.chat.>").await.unwrap();

    let mut seat = tokio::process::Command::new(&bin)
        .current_dir(&work)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", op.path())
        .env("COTAL_SPACE", "dev")
        .env("COTAL_NAME", "alice")
        .env("COTAL_SERVERS", &server.url)
        .env("COTAL_LIFECYCLE_UID", UID)
        .env("COTAL_JCODE_BIN", &jcode)
        .env("COTAL_JCODE_HOME", ws.path())
        .env("COTAL_JCODE_TUI", "0")
        .env("COTAL_JCODE_FRAME_LOG", "1")
        .env("COTAL_EVENTS", "1")
        .env("COTAL_EVENTS_REQUIRED", "1")
        .env("COTAL_WORKSPACE_ROOT", ws.path())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    // Presence appears after the readiness proof; a seat that exits first fails at once.
    use jucode_clock::Clock as _;
    let clock = jucode_clock::SystemClock::new();
    loop {
        if let Ok(kv) = js.get_key_value("cotal_presence_dev").await
            && matches!(kv.get("local.alice").await, Ok(Some(_)))
        {
            break;
        }
        if let Some(status) = seat.try_wait().unwrap() {
            panic!(
                "the seat exited ({status}) before presence\n{}",
                seat_logs(ws.path(), &provider)
            );
        }
        assert!(
            clock.elapsed() < GUARD,
            "deadlock guard: presence appears after the readiness proof\n{}",
            seat_logs(ws.path(), &provider)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let dm = json!({"id": "m1", "ts": 1.0, "space": "dev", "from": {"id": "local.bob", "name": "bob"},
        "to": "local.alice", "parts": [{"kind": "text", "text": "ping"}]});
    let mut h = async_nats::HeaderMap::new();
    h.insert("Nats-Msg-Id", "m1");
    js.publish_with_headers(
        "cotal.dev.inst.local.alice.local.bob",
        h,
        dm.to_string().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();

    let reply = match tokio::time::timeout(GUARD, replies.next()).await {
        Ok(r) => r.unwrap(),
        Err(_) => panic!(
            "deadlock guard: no answer to the DM\n{}",
            seat_logs(ws.path(), &provider)
        ),
    };
    let v: Value = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(v["from"]["id"], "local.alice", "{v}");
    assert!(v["parts"].to_string().contains("pong from jcode"), "{v}");

    // The event plane publishes the jcode journal: the tool call shows up.
    let mut seen = String::new();
    while !seen.contains("cotal_dm") {
        match tokio::time::timeout(Duration::from_secs(20), events.next()).await {
            Ok(Some(ev)) => {
                seen.push_str(ev.subject.as_str());
                seen.push_str(&String::from_utf8_lossy(&ev.payload));
            }
            _ => panic!("no cotal_dm event; seen: {seen}"),
        }
    }
    assert!(seen.contains("TOOL_CALL_START"), "{seen}");

    let home = PrivateHome::prepare(ws.path(), "dev", "alice").unwrap();
    let mut pids = recorded_daemons(&home);
    pids.extend(LaunchRecord::read(&home).unwrap().unwrap().bridge_pid);
    assert!(pids.iter().all(|p| alive(*p)));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(seat.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::time::timeout(GUARD, seat.wait())
        .await
        .expect("deadlock guard")
        .unwrap();
    assert!(status.success(), "{status}");
    for p in pids {
        assert!(!alive(p), "pid {p} survived the seat's stop");
    }
    server.stop().await;
}
