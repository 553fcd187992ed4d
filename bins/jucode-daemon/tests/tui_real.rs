//! `session_tui` with the real Claude Code CLI against the fake model server: a turn in the
//! daemon, the conversation moved into `claude --resume` on the client's pty, a prompt typed
//! there and answered on its screen, `/exit`, and the session back in the daemon with that turn
//! in its transcript.
//!
//! Slow and needing the real CLI, so ignored: `bash scripts/install-engines.sh`, then
//!   cargo nextest run -p jucode-daemon --run-ignored only -E 'binary(tui_real)'
//! The CLI comes from `CLAUDE_BIN` or `target/peers/npm/node_modules/.bin`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::num::NonZero;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

fn claude_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("CLAUDE_BIN") {
        return PathBuf::from(bin);
    }
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/peers/npm/node_modules/.bin/claude");
    assert!(
        bin.exists(),
        "Claude Code is not installed: run scripts/install-engines.sh or set CLAUDE_BIN"
    );
    bin
}

/// Reads frames until the terminal's screen shows `needle`; other frames are kept.
async fn screen_until(
    client: &mut Client,
    term: &str,
    parser: &mut vt100::Parser,
    others: &mut Vec<Value>,
    needle: &str,
) {
    while !parser.screen().contents().contains(needle) {
        let frame = client.recv_until(|_| true).await.unwrap_or_else(|e| {
            panic!(
                "{e}; waiting for {needle:?}:\n{}",
                parser.screen().contents()
            )
        });
        if frame["term"] == term && frame["type"] == "term_output" {
            let data = base64::engine::general_purpose::STANDARD
                .decode(frame["data"].as_str().unwrap())
                .unwrap();
            parser.process(&data);
        } else {
            assert_ne!(frame["type"], "term_exit", "{}", parser.screen().contents());
            others.push(frame);
        }
    }
}

async fn type_in(client: &mut Client, term: &str, text: &str) {
    // A few bytes at a time, then Enter alone: a burst is taken as a paste.
    for chunk in text.as_bytes().chunks(4) {
        let data = base64::engine::general_purpose::STANDARD.encode(chunk);
        client
            .send(json!({"op": "term_input", "term": term, "data": data}))
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let enter = base64::engine::general_purpose::STANDARD.encode(b"\r");
    client
        .send(json!({"op": "term_input", "term": term, "data": enter}))
        .await
        .unwrap();
}

#[tokio::test]
#[ignore = "drives the real Claude Code TUI"]
async fn a_claude_session_moves_into_claude_and_back_with_the_turn_typed_there() {
    let fake = FakeModel::start().await.unwrap();
    let env = TestHome::new();
    let project = std::fs::canonicalize(env.project("app")).unwrap();
    let config_dir = env.root().join("claude-config");
    std::fs::create_dir_all(&config_dir).unwrap();
    // What a signed-in user's Claude Code config says (DECISIONS.md, TUI hand-off).
    let key = "sk-ant-test-key-for-the-fake";
    let state = json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [&key[key.len() - 20..]], "rejected": []},
        "projects": {project.display().to_string(): {"hasTrustDialogAccepted": true}},
    });
    std::fs::write(config_dir.join(".claude.json"), state.to_string()).unwrap();
    let daemon = Daemon::builder(&env.home())
        .env("CLAUDE_BIN", claude_bin())
        .env("CLAUDE_CONFIG_DIR", &config_dir)
        .env("ANTHROPIC_BASE_URL", fake.base_url())
        .env("ANTHROPIC_API_KEY", key)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .start()
        .await
        .unwrap();
    let mut desk = daemon.client().await.unwrap();
    let created = desk
        .request(json!({"op": "session_create", "cwd": project.display().to_string(), "engine": "claude"}))
        .await
        .unwrap();
    assert_eq!(created["type"], "session_created", "{created}");
    let session = created["session"].as_str().unwrap().to_string();
    desk.request(json!({"op": "watch", "session": session}))
        .await
        .unwrap();
    desk.send(json!({"op": "user_message", "session": session, "content": "before the tui"}))
        .await
        .unwrap();
    desk.recv_until(|f| {
        f["session"] == session.as_str() && f["type"] == "status" && f["message"] == "ready"
    })
    .await
    .unwrap();

    let r = desk
        .request(json!({"op": "session_tui", "session": session, "cols": 120, "rows": 40}))
        .await
        .unwrap();
    assert_eq!(r["type"], "term_opened", "{r}");
    let term = r["term"].as_str().unwrap().to_string();
    let mut parser = vt100::Parser::new(NonZero::new(40).unwrap(), NonZero::new(120).unwrap(), 0);
    let mut others = Vec::new();
    // `--resume`: the earlier turn is on the screen.
    screen_until(
        &mut desk,
        &term,
        &mut parser,
        &mut others,
        "user said: before the tui",
    )
    .await;
    type_in(&mut desk, &term, "typed in claude").await;
    screen_until(
        &mut desk,
        &term,
        &mut parser,
        &mut others,
        "user said: typed in claude",
    )
    .await;
    type_in(&mut desk, &term, "/exit").await;
    // The frames after `surface: gui`: the restarted engine's transcript among them.
    let mut after: Vec<Value> = match others
        .iter()
        .position(|f| f["type"] == "surface" && f["surface"] == "gui")
    {
        Some(pos) => others.split_off(pos + 1),
        None => {
            desk.recv_until(|f| f["type"] == "surface" && f["surface"] == "gui")
                .await
                .unwrap();
            Vec::new()
        }
    };
    let transcript = loop {
        if let Some(pos) = after.iter().position(|f| {
            f["type"] == "transcript" && f["session"] == session.as_str() && f["items"] != json!([])
        }) {
            break after.remove(pos);
        }
        after.push(desk.recv_until(|_| true).await.unwrap());
    };
    let items = transcript["items"].to_string();
    for text in [
        "before the tui",
        "typed in claude",
        "user said: typed in claude",
    ] {
        assert!(items.contains(text), "{text}: {items}");
    }
}
