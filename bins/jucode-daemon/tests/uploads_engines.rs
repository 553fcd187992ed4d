//! An uploaded image reaches every engine as an image: the fake Claude Code, Codex and ACP
//! agents (replaying recordings of the real CLIs) log what the adapter wrote them, and the
//! turn's input holds the image in each engine's own shape; the session's `user_message`
//! carries the image's path. An image outside the session's folders and uploads is not
//! attached, and the session says so. (The built-in engine: `agent.rs`
//! `images_are_attached_and_echoed`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use base64::Engine as _;
use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x02\0\0\0";

fn fake(name: &str) -> String {
    jucode_testsupport::build_bin(name, "jucode-fake-engines")
        .unwrap()
        .display()
        .to_string()
}

fn fixture(name: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/engines");
    root.join(name).display().to_string()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Uploads `PNG` in two chunks; returns its path.
async fn upload_png(c: &mut Client) -> String {
    let first = c
        .request(json!({"op":"upload","name":"shot.png","data":b64(&PNG[..10]),"last":false}))
        .await
        .unwrap();
    let done = c
        .request(json!({"op":"upload","upload":first["upload"],"offset":10,"data":b64(&PNG[10..]),"last":true}))
        .await
        .unwrap();
    assert_eq!(done["type"], "uploaded", "{done}");
    assert_eq!(done["image"], true);
    done["path"].as_str().unwrap().to_string()
}

/// The JSON lines the adapter wrote to the fake (the log's first line is its start).
fn written(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

struct Case {
    env: TestHome,
    _daemon: Daemon,
    c: Client,
    session: String,
    image: String,
    outside: String,
    log: PathBuf,
}

async fn case(engine: &str, options: impl FnOnce(&Path) -> Value) -> Case {
    let env = TestHome::new();
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let cwd = env.project("work");
    let elsewhere = env.project("elsewhere").join("x.png");
    std::fs::write(&elsewhere, PNG).unwrap();
    let log = env.root().join("engine.log");
    let created = c
        .request(json!({"op":"session_create","cwd":cwd,"engine":engine,"options":options(&log)}))
        .await
        .unwrap();
    assert_eq!(created["type"], "session_created", "{created}");
    let session = created["session"].as_str().unwrap().to_string();
    let image = upload_png(&mut c).await;
    Case {
        env,
        _daemon: daemon,
        c,
        session,
        image,
        outside: elsewhere.display().to_string(),
        log,
    }
}

/// Sends `text` with the uploaded image and one from outside; checks the session's echo and
/// the refusal of the outside one; returns once the adapter has written the turn's input.
async fn send(k: &mut Case, text: &str, input: impl Fn(&Value) -> bool) -> Value {
    k.c.send(json!({"op":"user_message","session":k.session,"content":text,"images":[k.image, k.outside]}))
        .await
        .unwrap();
    let info = k.c.recv_type("info", Some(&k.session)).await.unwrap();
    let note = info["message"].as_str().unwrap();
    assert!(
        note.contains("image not attached") && note.contains("x.png"),
        "{info}"
    );
    let echo =
        k.c.recv_type("user_message", Some(&k.session))
            .await
            .unwrap();
    assert_eq!(echo["content"], text);
    assert_eq!(
        echo["images"],
        json!([k.image]),
        "only the attached image is named"
    );
    // The fake took the turn (it exits at a frame its recording does not expect) and replied.
    k.c.recv_until(|f| {
        f["session"] == k.session.as_str()
            && (f["type"] == "approval_request"
                || (f["type"] == "status" && f["message"] == "ready"))
    })
    .await
    .unwrap();
    written(&k.log)
        .into_iter()
        .find(|f| input(f))
        .unwrap_or_else(|| panic!("the adapter never wrote the turn: {:?}", written(&k.log)))
}

#[tokio::test]
async fn claude_code_gets_a_base64_image_block() {
    let mut k = case("claude", |log| {
        json!({"bin": fake("fake-claude"), "env": {
            "FAKE_ENGINE_SCRIPT": fixture("claude-code-2.1.332-print-3turns.jsonl"),
            "FAKE_ENGINE_LOG": log,
        }})
    })
    .await;
    let user = send(&mut k, "RUN: echo hi", |f| f["type"] == "user").await;
    let blocks = user["message"]["content"].as_array().unwrap();
    assert_eq!(blocks[0], json!({"type":"text","text":"RUN: echo hi"}));
    // The path goes with the image, so the transcript read back names it again.
    assert_eq!(
        blocks[1],
        json!({"type":"text","text":format!("[image: {}]", k.image)})
    );
    assert_eq!(
        blocks[2],
        json!({"type":"image","source":{"type":"base64","media_type":"image/png","data":b64(PNG)}})
    );
    assert_eq!(blocks.len(), 3, "the outside image is not sent: {user}");
    drop(k.env);
}

#[tokio::test]
async fn codex_gets_a_local_image_item() {
    let mut k = case("codex", |log| {
        json!({"bin": fake("fake-codex"), "env": {
            "FAKE_ENGINE_SCRIPT": fixture("codex-0.171.0-interop-approve.jsonl"),
            "FAKE_ENGINE_LOG": log,
        }})
    })
    .await;
    let start = send(&mut k, "RUN: touch hi.txt && echo hi", |f| {
        f["method"] == "turn/start"
    })
    .await;
    let input = start["params"]["input"].as_array().unwrap();
    assert_eq!(input[0]["text"], "RUN: touch hi.txt && echo hi");
    let real = std::fs::canonicalize(&k.image).unwrap();
    assert_eq!(input[1], json!({"type":"localImage","path":real}));
    assert_eq!(input.len(), 2, "{start}");
}

#[tokio::test]
async fn an_acp_agent_that_takes_images_gets_an_image_block() {
    let mut k = case("acp", |log| {
        json!({"command": fake("fake-acp"), "env": {
            "FAKE_ENGINE_SCRIPT": fixture("claude-agent-acp-0.101.0-interop-approve.jsonl"),
            "FAKE_ENGINE_LOG": log,
        }})
    })
    .await;
    let prompt = send(&mut k, "RUN: touch hi.txt && echo hi", |f| {
        f["method"] == "session/prompt"
    })
    .await;
    let parts = prompt["params"]["prompt"].as_array().unwrap();
    assert_eq!(parts[0]["text"], "RUN: touch hi.txt && echo hi");
    assert_eq!(
        parts[1],
        json!({"type":"image","mimeType":"image/png","data":b64(PNG)})
    );
    assert_eq!(parts.len(), 2, "{prompt}");
}
