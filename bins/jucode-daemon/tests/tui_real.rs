//! `session_tui` with the real Claude Code and Codex CLIs against the fake model server: a turn
//! in the daemon, the conversation moved into `claude --resume` / `codex resume` on the
//! client's pty, a prompt typed there and answered on its screen, quit, and the session back in
//! the daemon with that turn in its transcript.
//!
//! Slow and needing the real CLI, so ignored: `bash scripts/install-engines.sh`, then
//!   cargo nextest run -p jucode-daemon --run-ignored only -E 'binary(tui_real)'
//! The CLIs come from `CLAUDE_BIN` / `CODEX_BIN` or `target/peers/npm/node_modules/.bin`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::num::NonZero;
use std::path::Path;

use base64::Engine as _;
use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::real_cli::{
    CLAUDE_KEY, cli, prompt_holds, write_claude_state, write_codex_config,
};
use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

/// Reads frames until the terminal's screen shows `needle`; other frames are kept. With
/// `typed`, Enter is pressed again every few seconds while that text still waits on the
/// prompt line: a TUI still starting up can show typed text yet drop the Enter.
async fn screen_until(
    client: &mut Client,
    term: &str,
    parser: &mut vt100::Parser,
    others: &mut Vec<Value>,
    needle: &str,
    typed: Option<&str>,
) {
    let mut presses = 0;
    while !parser.screen().contents().contains(needle) {
        let next = client.recv_until(|_| true);
        let frame = match typed {
            None => next.await,
            Some(text) => match tokio::time::timeout(RETRY_ENTER, next).await {
                Ok(frame) => frame,
                Err(_) => {
                    presses += 1;
                    assert!(
                        presses < 18,
                        "{text:?} was never taken:\n{}",
                        parser.screen().contents()
                    );
                    if prompt_holds(&parser.screen().contents(), text) {
                        press(client, term, b"\r").await;
                    }
                    continue;
                }
            },
        };
        let frame = frame.unwrap_or_else(|e| {
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

/// How long an answer may take before Enter is pressed again (while the text still waits).
const RETRY_ENTER: std::time::Duration = std::time::Duration::from_secs(5);

async fn press(client: &mut Client, term: &str, bytes: &[u8]) {
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    client
        .send(json!({"op": "term_input", "term": term, "data": data}))
        .await
        .unwrap();
}

async fn type_in(client: &mut Client, term: &str, text: &str) {
    // A few bytes at a time, then Enter alone: a burst is taken as a paste.
    for chunk in text.as_bytes().chunks(4) {
        press(client, term, chunk).await;
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    press(client, term, b"\r").await;
}

/// The frames after `surface: gui`, up to the restarted engine's non-empty transcript, which
/// is returned.
async fn transcript_after_gui(client: &mut Client, session: &str, mut others: Vec<Value>) -> Value {
    let mut after: Vec<Value> = match others
        .iter()
        .position(|f| f["type"] == "surface" && f["surface"] == "gui")
    {
        Some(pos) => others.split_off(pos + 1),
        None => {
            client
                .recv_until(|f| f["type"] == "surface" && f["surface"] == "gui")
                .await
                .unwrap();
            Vec::new()
        }
    };
    loop {
        if let Some(pos) = after.iter().position(|f| {
            f["type"] == "transcript" && f["session"] == session && f["items"] != json!([])
        }) {
            return after.remove(pos);
        }
        after.push(client.recv_until(|_| true).await.unwrap());
    }
}

/// The hand-off on `daemon` for a session of `engine` in `project`: a turn in the daemon,
/// `session_tui`, that turn on the TUI's screen, `typed` typed there and answered, `quit`, and
/// the restarted engine's transcript holding all of it.
async fn round_trip(daemon: &Daemon, project: &Path, engine: &str, typed: &str, quit: &str) {
    let mut desk = daemon.client().await.unwrap();
    let created = desk
        .request(
            json!({"op": "session_create", "cwd": project.display().to_string(), "engine": engine}),
        )
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
    // Resumed: the earlier turn is on the screen.
    screen_until(
        &mut desk,
        &term,
        &mut parser,
        &mut others,
        "user said: before the tui",
        None,
    )
    .await;
    type_in(&mut desk, &term, typed).await;
    let answer = format!("user said: {typed}");
    screen_until(
        &mut desk,
        &term,
        &mut parser,
        &mut others,
        &answer,
        Some(typed),
    )
    .await;
    type_in(&mut desk, &term, quit).await;
    let transcript = transcript_after_gui(&mut desk, &session, others).await;
    let items = transcript["items"].to_string();
    for text in ["before the tui", typed, answer.as_str()] {
        assert!(items.contains(text), "{text}: {items}");
    }
}

#[tokio::test]
#[ignore = "drives the real Claude Code TUI"]
async fn a_claude_session_moves_into_claude_and_back_with_the_turn_typed_there() {
    let fake = FakeModel::start().await.unwrap();
    let env = TestHome::new();
    let project = std::fs::canonicalize(env.project("app")).unwrap();
    let config_dir = env.root().join("claude-config");
    write_claude_state(&config_dir, &project);
    let daemon = Daemon::builder(&env.home())
        .env("CLAUDE_BIN", cli("claude", "CLAUDE_BIN"))
        .env("CLAUDE_CONFIG_DIR", &config_dir)
        .env("ANTHROPIC_BASE_URL", fake.base_url())
        .env("ANTHROPIC_API_KEY", CLAUDE_KEY)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .start()
        .await
        .unwrap();
    round_trip(&daemon, &project, "claude", "typed in claude", "/exit").await;
}

#[tokio::test]
#[ignore = "drives the real Codex TUI"]
async fn a_codex_session_moves_into_codex_and_back_with_the_turn_typed_there() {
    let fake = FakeModel::start().await.unwrap();
    // Under the target dir: Codex will not set up its helpers under /tmp.
    let env = TestHome::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let project = std::fs::canonicalize(env.project("app")).unwrap();
    let codex_home = env.root().join(".codex");
    write_codex_config(&codex_home, &fake.base_url(), &project);
    // The app-server and the TUI both read the daemon's environment.
    let daemon = Daemon::builder(&env.home())
        .env("CODEX_BIN", cli("codex", "CODEX_BIN"))
        .env("CODEX_HOME", &codex_home)
        .env("FAKE_API_KEY", "test")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .start()
        .await
        .unwrap();
    round_trip(&daemon, &project, "codex", "typed in codex", "/quit").await;
}
