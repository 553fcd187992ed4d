//! Images attached to a user message reach the model through the real Claude Code and Codex
//! CLIs (the pinned versions) behind their adapters, with the fake model server on loopback:
//! Claude Code sends the adapter's base64 image block on to the Messages API, Codex reads the
//! `localImage` file and sends it as an `input_image` data URL; and a resumed conversation's
//! transcript, read back from what each CLI saved, names the image again.
//!
//! Slow and needing the real CLIs, so ignored. Install them, then run:
//!   bash scripts/install-engines.sh
//!   cargo nextest run -p jucode-fake-engines --run-ignored only -E 'binary(real_images)'
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod real;

use common::*;
use jucode_adapters::claude::ClaudeEngine;
use jucode_adapters::codex::CodexEngine;
use real::*;
use serde_json::{Value, json};

/// An 8 × 8 red PNG (valid, so a CLI that decodes it can).
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x08, 0x08, 0x02, 0x00, 0x00, 0x00, 0x4b, 0x6d, 0x29,
    0xdc, 0x00, 0x00, 0x00, 0x11, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x38, 0x61, 0xa3, 0x81,
    0x15, 0x31, 0x0c, 0x2d, 0x09, 0x00, 0x76, 0x7b, 0x4b, 0x01, 0x1b, 0x3b, 0xf9, 0xa7, 0x00, 0x00,
    0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];
/// The same bytes as base64.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEUlEQVR4nGM4YaOBFTEMLQkAdntLARs7+acAAAAASUVORK5CYII=";

const SESSION: &str = "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d";
const CODEX_SESSION: &str = "6b5c4d3e-2f1a-4b0c-9d8e-7f6a5b4c3d2e";

/// Every string in `v`, depth first.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

fn image_in(world: &World) -> String {
    let path = world.cwd.join("shot.png");
    std::fs::write(&path, PNG).unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Claude Code: bash scripts/install-engines.sh"]
async fn claude_code_sends_the_image_to_the_model() {
    let world = World::new().await;
    let image = image_in(&world);
    let engine = ClaudeEngine::new(world.config());
    let options = manual(&claude_cli().bin, world.anthropic_env());
    let mut h = start(
        &engine,
        "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d",
        &world.cwd,
        options,
        false,
    );
    send(
        &h,
        json!({"op":"user_message","content":"what is in this picture?","images":[image]}),
    );
    let events = turn(&mut h).await;
    let echo = events.iter().find(|e| e["type"] == "user_message").unwrap();
    assert_eq!(echo["images"], json!([image]));
    let request = world
        .model
        .model_requests()
        .into_iter()
        .find(|r| r.body.to_string().contains("what is in this picture?"))
        .expect("a model request with the message");
    let image_blocks: Vec<&Value> = request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|b| b["type"] == "image")
        .collect();
    assert_eq!(image_blocks.len(), 1, "{}", request.body["messages"]);
    assert_eq!(image_blocks[0]["source"]["media_type"], "image/png");
    assert_eq!(image_blocks[0]["source"]["data"], PNG_B64);
    assert_eq!(close(h).await, None);

    // Resumed in a new process, the conversation read back from Claude Code's transcript names
    // the image again (its note), so a reopened session still shows it.
    let options = manual(&claude_cli().bin, world.anthropic_env());
    let mut h = start(&engine, SESSION, &world.cwd, options, true);
    let transcript = until(&mut h, "transcript").await.pop().unwrap();
    let first = &transcript["items"][0];
    assert_eq!(first["role"], "user", "{transcript}");
    assert_eq!(first["content"], "what is in this picture?");
    assert_eq!(first["images"], json!([image]));
    assert_eq!(close(h).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Codex: bash scripts/install-engines.sh"]
async fn codex_sends_the_image_to_the_model() {
    let world = World::new().await;
    let image = image_in(&world);
    let config = format!(
        r#"model = "fake-model"
model_provider = "fake"
check_for_update_on_startup = false

{}
[analytics]
enabled = false

[features]
plugins = false
apps = false
"#,
        world.codex_provider()
    );
    let engine = CodexEngine::new(world.config());
    let options = manual(&codex_cli().bin, world.codex_env(&config));
    let mut h = start(
        &engine,
        "6b5c4d3e-2f1a-4b0c-9d8e-7f6a5b4c3d2e",
        &world.cwd,
        options,
        false,
    );
    until(&mut h, "approval_mode").await;
    send(
        &h,
        json!({"op":"user_message","content":"what is in this picture?","images":[image]}),
    );
    let events = turn(&mut h).await;
    assert!(events.iter().all(|e| e["type"] != "error"), "{events:#?}");
    let request = world
        .model
        .model_requests()
        .into_iter()
        .find(|r| r.body.to_string().contains("what is in this picture?"))
        .expect("a model request with the message");
    let mut all = Vec::new();
    strings(&request.body["input"], &mut all);
    assert!(
        all.iter().any(|s| s.starts_with("data:image/png;base64,")),
        "no image in the request's input: {}",
        request.body["input"]
    );
    assert_eq!(close(h).await, None);

    // Resumed, the conversation read back from Codex's rollout names the image again.
    let options = manual(&codex_cli().bin, world.codex_env(&config));
    let mut h = start(&engine, CODEX_SESSION, &world.cwd, options, true);
    let transcript = until(&mut h, "transcript").await.pop().unwrap();
    let first = &transcript["items"][0];
    assert_eq!(first["role"], "user", "{transcript}");
    assert_eq!(first["content"], "what is in this picture?");
    assert_eq!(first["images"], json!([image]));
    assert_eq!(close(h).await, None);
}
