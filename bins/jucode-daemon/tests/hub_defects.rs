//! Regression tests, on the real daemon binary, for defects of the hub and the protocol crate:
//! error ids on bad envelopes, exact float ids, length limits on free text, and a reopened
//! built-in session whose conversation is in the first snapshot and sent only once.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use futures_util::StreamExt;
use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::{Client, Daemon};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// The test's temporary home.
type Env = jucode_testsupport::TestHome;

/// The next text frame as the daemon wrote it.
async fn raw_text(c: &mut Client) -> String {
    loop {
        match c.ws().next().await.unwrap().unwrap() {
            Message::Text(text) => return text.to_string(),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn errors_on_a_bad_envelope_keep_the_frames_id() {
    let env = Env::new();
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    c.send(json!({"op":"schedule_delete","id":3004,"session":1}))
        .await
        .unwrap();
    assert_eq!(
        c.recv().await.unwrap(),
        json!({"type":"error","message":"invalid frame: session must be a string","id":3004})
    );
    c.send(json!({"id":4775})).await.unwrap();
    assert_eq!(
        c.recv().await.unwrap(),
        json!({"type":"error","message":"invalid frame: a frame needs an op string","id":4775})
    );
    c.send(json!({"id":"x","op":""})).await.unwrap();
    assert_eq!(c.recv().await.unwrap()["id"], "x");
    // A null id is no id.
    c.send(json!({"id":null})).await.unwrap();
    assert!(c.recv().await.unwrap().get("id").is_none());
}

#[tokio::test]
async fn a_float_id_is_echoed_exactly() {
    let env = Env::new();
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    for id in ["2.5e-308", "0.1", "123.456e-5", "1.7976931348623157e308"] {
        c.send_text(&format!(r#"{{"op":"ping","id":{id}}}"#))
            .await
            .unwrap();
        let reply: Value = serde_json::from_str(&raw_text(&mut c).await).unwrap();
        let sent: f64 = id.parse().unwrap();
        let got = reply["id"].as_f64().map(f64::to_bits);
        assert_eq!(got, Some(sent.to_bits()), "{id}");
    }
    // The shortest text of a number comes back as it was sent.
    c.send_text(r#"{"op":"ping","id":2.5e-308}"#).await.unwrap();
    assert_eq!(raw_text(&mut c).await, r#"{"type":"pong","id":2.5e-308}"#);
}

#[tokio::test]
async fn free_text_over_its_limit_gets_a_clear_error() {
    let env = Env::new();
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let cwd = env.project("app").display().to_string();
    let created = c
        .request(json!({"op":"session_create","cwd":cwd}))
        .await
        .unwrap();
    let session = created["session"].as_str().unwrap().to_string();
    let reply = c
        .request(json!({"op":"session_meta","session":session,"title":"t".repeat(201)}))
        .await
        .unwrap();
    assert_eq!(
        reply["message"],
        "session_meta: title is longer than 200 characters"
    );
    // At the limit it is taken.
    c.send(json!({"op":"session_meta","session":session,"title":"t".repeat(200)}))
        .await
        .unwrap();
    let list = c
        .recv_until(|f| f["type"] == "sessions" && f["sessions"][0]["title"] != "")
        .await
        .unwrap();
    assert_eq!(list["sessions"][0]["title"].as_str().unwrap().len(), 200);
    let reply = c
        .request(json!({"op":"project_add","path":cwd,"project_name":"p".repeat(201)}))
        .await
        .unwrap();
    assert_eq!(
        reply["message"],
        "project_add: project_name is longer than 200 characters"
    );
}

/// The built-in engine keeps its conversation on disk: a session closed and reopened shows it
/// in the first watcher's snapshot, however fast the watch follows the open, and the engine's
/// own `transcript` after its start-up is not sent on top.
#[tokio::test]
async fn a_reopened_session_shows_its_conversation_at_once_and_once() {
    let env = Env::new();
    let fake = FakeModel::start().await.unwrap();
    let daemon = Daemon::start_builtin(&env.home(), &fake.config("chat"))
        .await
        .unwrap();
    let mut c = daemon.client().await.unwrap();
    let id = c.start_session(&env.project("app")).await.unwrap();
    c.send(json!({"op":"user_message","session":id,"content":"remember kumquat"}))
        .await
        .unwrap();
    c.recv_until(|f| {
        f["session"] == id.as_str() && f["type"] == "status" && f["message"] == "ready"
    })
    .await
    .unwrap();
    c.send(json!({"op":"session_close","session":id}))
        .await
        .unwrap();
    c.recv_type("session_closed", Some(&id)).await.unwrap();

    let want = json!([
        {"role":"user","content":"remember kumquat"},
        {"role":"assistant","content":"user said: remember kumquat"},
    ]);
    for round in 0..3 {
        c.request(json!({"op":"session_open","session":id}))
            .await
            .unwrap();
        let watching = c.request(json!({"op":"watch","session":id})).await.unwrap();
        assert_eq!(watching["type"], "watching");
        // The engine answers ops only after its start-up: its answer to this one comes after
        // any transcript it sends of its own.
        c.send(json!({"op":"command","session":id,"input":"/model"}))
            .await
            .unwrap();
        // From the open on: the snapshot's transcript is the first, and must be the only one.
        let mut transcripts = Vec::new();
        loop {
            let frame = c.recv().await.unwrap();
            if frame["session"] != id.as_str() {
                continue;
            }
            if frame["type"] == "transcript" {
                transcripts.push(frame["items"].clone());
            }
            if frame["type"] == "model_view" {
                break;
            }
        }
        assert_eq!(transcripts, vec![want.clone()], "round {round}");
        c.send(json!({"op":"session_close","session":id}))
            .await
            .unwrap();
        c.recv_type("session_closed", Some(&id)).await.unwrap();
    }
}

/// A fake engine CLI of `jucode-fake-engines`, built on first use.
fn sibling_bin(name: &str) -> PathBuf {
    jucode_testsupport::build_bin(name, "jucode-fake-engines").unwrap()
}

/// A Codex session made through the daemon has one id, its thread's: in the reply, in its
/// events and in the list.
#[tokio::test]
async fn a_codex_session_is_named_after_its_thread() {
    let env = Env::new();
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/engines/codex-0.171.0-app-server-approve.jsonl");
    let options = json!({
        "bin": sibling_bin("fake-codex").display().to_string(),
        "env": {"FAKE_ENGINE_SCRIPT": script.display().to_string()},
    });
    let created = c
        .request(
            json!({"op":"session_create","cwd":env.project("app").display().to_string(),"engine":"codex","options":options}),
        )
        .await
        .unwrap();
    assert_eq!(created["type"], "session_created", "{created}");
    let thread = "01a2293b-ffda-7011-939a-d20278535ef1";
    assert_eq!(created["session"], thread);
    let startup = c.recv_type("startup", Some(thread)).await.unwrap();
    assert_eq!(startup["session_id"], thread);
    let list = c.request(json!({"op":"session_list"})).await.unwrap();
    let ids: Vec<&Value> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["session"])
        .collect();
    assert_eq!(ids, vec![thread]);
}

/// A daemon with a long history (its `sessions` list far over a client's 16 MiB queue
/// budget) still lets clients in: the connect batch is taken whole, and the connection
/// then works as any other.
#[tokio::test]
async fn a_connect_batch_larger_than_the_queue_budget_still_lets_a_client_in() {
    let env = jucode_testsupport::TestHome::new();
    let cwd = env.project("big");
    let title = "t".repeat(200);
    let mut lines = Vec::new();
    for i in 0..60_000 {
        let session = format!("s{i:05}");
        lines.push(
            serde_json::json!({"kind":"open","session":session,"cwd":cwd,"engine":"jucode","at":1}),
        );
        lines.push(serde_json::json!({"kind":"close","session":session,"at":2}));
        lines.push(serde_json::json!({"kind":"meta","session":session,"title":title,"at":3}));
    }
    env.seed_log("sessions.jsonl", &lines);
    let daemon = env.daemon().await;
    // A client without a message cap (browsers have none); the test client caps at 16 MiB.
    let url = daemon.url(&daemon.token().unwrap());
    let stream = tokio::net::TcpStream::connect(daemon.addr).await.unwrap();
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(None)
        .max_frame_size(None);
    let (mut ws, _) = tokio_tungstenite::client_async_with_config(url, stream, Some(config))
        .await
        .unwrap();
    let mut types = Vec::new();
    while types.len() < jucode_testsupport::CONNECT_BATCH.len() {
        let Some(Ok(Message::Text(text))) = ws.next().await else {
            panic!("the connection ended after {types:?}")
        };
        let frame: Value = serde_json::from_str(text.as_str()).unwrap();
        if frame["type"] == "sessions" {
            assert_eq!(frame["sessions"].as_array().unwrap().len(), 60_000);
            assert!(text.len() > 16 * 1024 * 1024, "{}", text.len());
        }
        types.push(frame["type"].as_str().unwrap().to_string());
    }
    assert_eq!(types, jucode_testsupport::CONNECT_BATCH);
    use futures_util::SinkExt as _;
    ws.send(Message::text(r#"{"op":"ping","id":1}"#))
        .await
        .unwrap();
    let Some(Ok(Message::Text(text))) = ws.next().await else {
        panic!("no pong")
    };
    assert!(text.as_str().contains("pong"), "{text}");
}
