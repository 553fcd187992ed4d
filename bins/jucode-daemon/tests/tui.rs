//! `session_tui` on the real daemon: a jucode session moved into `jucode-daemon tui` on a pty
//! of the requesting client (its screen read through a vt100 parser), a turn typed there and
//! answered by the fake model, then back to the daemon with that turn in the transcript; the
//! `surface` frames to every client; ops refused while the TUI runs (a watch answered, with
//! the surface in its snapshot); a turn running refused without `force` and interrupted with
//! it; an engine without a TUI and an unknown session refused; the TUI killed with its client.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::num::NonZero;

use base64::Engine as _;
use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A TUI's terminal as its client reads it: every output frame through a vt100 parser, the
/// other frames kept in order.
struct Screen {
    term: String,
    parser: vt100::Parser,
    others: Vec<Value>,
    exit: Option<Value>,
}

impl Screen {
    fn new(term: &str) -> Screen {
        Screen {
            term: term.to_string(),
            parser: vt100::Parser::new(NonZero::new(30).unwrap(), NonZero::new(100).unwrap(), 0),
            others: Vec::new(),
            exit: None,
        }
    }

    fn text(&self) -> String {
        self.parser.screen().contents()
    }

    /// Reads frames until the screen shows `needle`.
    async fn until(&mut self, client: &mut Client, needle: &str) -> String {
        loop {
            if self.text().contains(needle) {
                return self.text();
            }
            assert!(
                self.exit.is_none(),
                "exited before {needle:?}:\n{}",
                self.text()
            );
            let frame = client.recv_until(|_| true).await.unwrap_or_else(|e| {
                panic!("{e}; waiting for {needle:?}; the screen:\n{}", self.text())
            });
            self.take(frame);
        }
    }

    fn take(&mut self, frame: Value) {
        if frame["term"] == self.term.as_str() && frame["type"] == "term_output" {
            let data = base64::engine::general_purpose::STANDARD
                .decode(frame["data"].as_str().unwrap())
                .unwrap();
            self.parser.process(&data);
        } else if frame["term"] == self.term.as_str() && frame["type"] == "term_exit" {
            self.exit = Some(frame["code"].clone());
        } else {
            self.others.push(frame);
        }
    }

    async fn type_in(&self, client: &mut Client, bytes: &[u8]) {
        client
            .send(json!({"op": "term_input", "term": self.term, "data": b64(bytes)}))
            .await
            .unwrap();
    }

    /// Reads until a frame (not the terminal's) matches `pred`, also among those seen.
    async fn frame(&mut self, client: &mut Client, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(pos) = self.others.iter().position(&pred) {
            return self.others.remove(pos);
        }
        loop {
            let frame = client.recv_until(|_| true).await.unwrap();
            if pred(&frame) {
                return frame;
            }
            self.take(frame);
        }
    }
}

async fn builtin(env: &TestHome, fake: &FakeModel) -> Daemon {
    Daemon::start_builtin(&env.home(), &fake.config("chat"))
        .await
        .unwrap()
}

async fn turn(client: &mut Client, session: &str, text: &str) {
    client
        .send(json!({"op": "user_message", "session": session, "content": text}))
        .await
        .unwrap();
    client
        .recv_until(|f| f["session"] == session && f["type"] == "status" && f["message"] == "ready")
        .await
        .unwrap();
}

#[tokio::test]
async fn a_jucode_session_moves_into_its_tui_and_back_with_the_turns_typed_there() {
    let fake = FakeModel::start().await.unwrap();
    let env = TestHome::new();
    let project = env.project("app");
    let daemon = builtin(&env, &fake).await;
    let mut desk = daemon.client().await.unwrap();
    let mut phone = daemon.client().await.unwrap();
    let session = desk.start_session(&project).await.unwrap();
    desk.request(json!({"op": "watch", "session": session}))
        .await
        .unwrap();
    turn(&mut desk, &session, "before the tui").await;

    let r = desk
        .request(json!({"op": "session_tui", "session": session, "cols": 100, "rows": 30}))
        .await
        .unwrap();
    assert_eq!(r["type"], "term_opened", "{r}");
    let term = r["term"].as_str().unwrap().to_string();
    let surface = phone.recv_type("surface", Some(&session)).await.unwrap();
    assert_eq!(surface["surface"], "tui", "{surface}");
    assert_eq!(surface["term"], term.as_str());
    assert!(surface["client"].is_u64(), "{surface}");

    // While it runs: the session takes no op, but a watch gets the snapshot and the surface.
    let refused = phone
        .request(json!({"op": "user_message", "session": session, "content": "x"}))
        .await
        .unwrap();
    assert_eq!(refused["type"], "error", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("is in its TUI"),
        "{refused}"
    );
    for op in ["session_close", "session_open", "session_tui"] {
        let r = phone
            .request(json!({"op": op, "session": session}))
            .await
            .unwrap();
        assert_eq!(r["type"], "error", "{op}: {r}");
    }
    let watching = phone
        .request(json!({"op": "watch", "session": session}))
        .await
        .unwrap();
    assert_eq!(watching["type"], "watching", "{watching}");
    let again = phone.recv_type("surface", Some(&session)).await.unwrap();
    assert_eq!(again["surface"], "tui");
    // Only the requesting client sees the terminal: the phone cannot type into it.
    let r = phone
        .request(json!({"op": "term_input", "term": term, "data": b64(b"x")}))
        .await
        .unwrap();
    assert_eq!(r["type"], "error", "{r}");

    let mut screen = Screen::new(&term);
    screen.until(&mut desk, "before the tui").await;
    screen.until(&mut desk, "ready · Enter sends").await;
    screen.type_in(&mut desk, b"typed in the tui").await;
    screen.type_in(&mut desk, b"\r").await;
    screen.until(&mut desk, "user said: typed in the tui").await;
    screen.until(&mut desk, "ready · Enter sends").await;
    // Ctrl-D: the TUI saves and leaves.
    screen.type_in(&mut desk, b"\x04").await;
    let back = screen
        .frame(&mut desk, |f| {
            f["type"] == "surface" && f["surface"] == "gui"
        })
        .await;
    assert_eq!(back["session"], session.as_str());
    assert_eq!(screen.exit, Some(json!(0)), "the TUI exited on its own");
    let transcript = screen
        .frame(&mut desk, |f| {
            f["type"] == "transcript" && f["session"] == session.as_str()
        })
        .await;
    let items = transcript["items"].to_string();
    for text in [
        "before the tui",
        "typed in the tui",
        "user said: typed in the tui",
    ] {
        assert!(items.contains(text), "{text}: {items}");
    }
    let phone_back = phone
        .recv_until(|f| f["type"] == "surface" && f["surface"] == "gui")
        .await
        .unwrap();
    assert_eq!(phone_back["session"], session.as_str());

    // The engine is back on the conversation: the next turn carries all of it.
    desk.recv_type("mcp_servers", Some(&session)).await.unwrap();
    turn(&mut desk, &session, "after the tui").await;
    let sent = fake.requests().last().cloned().unwrap().1.to_string();
    for text in ["before the tui", "typed in the tui", "after the tui"] {
        assert!(sent.contains(text), "{text}: {sent}");
    }
}

#[tokio::test]
async fn a_running_turn_is_refused_without_force_and_interrupted_with_it() {
    let fake = FakeModel::start().await.unwrap();
    let env = TestHome::new();
    let project = env.project("app");
    let daemon = builtin(&env, &fake).await;
    let mut desk = daemon.client().await.unwrap();
    let session = desk.start_session(&project).await.unwrap();
    desk.send(json!({"op": "user_message", "session": session, "content": "SLEEP 30000 slow"}))
        .await
        .unwrap();
    desk.recv_type("connecting", Some(&session)).await.unwrap();
    let r = desk
        .request(json!({"op": "session_tui", "session": session}))
        .await
        .unwrap();
    assert_eq!(
        r,
        json!({"type": "error", "id": r["id"], "message": format!("session {session} is in a turn: send force: true to stop it and open the TUI")})
    );
    let r = desk
        .request(json!({"op": "session_tui", "session": session, "force": true}))
        .await
        .unwrap();
    assert_eq!(r["type"], "term_opened", "{r}");
    let term = r["term"].as_str().unwrap().to_string();
    let mut screen = Screen::new(&term);
    screen.until(&mut desk, "ready · Enter sends").await;
    // The turn was stopped before the engine went: it ended with `interrupted`.
    assert!(
        screen
            .others
            .iter()
            .any(|f| f["type"] == "status" && f["message"] == "interrupted"),
        "{:?}",
        screen.others
    );
    assert!(
        screen
            .others
            .iter()
            .any(|f| f["type"] == "background_tasks" && f["tasks"] == json!([])),
        "{:?}",
        screen.others
    );
    // term_close ends the TUI like quitting it.
    desk.send(json!({"op": "term_close", "term": term}))
        .await
        .unwrap();
    screen
        .frame(&mut desk, |f| {
            f["type"] == "surface" && f["surface"] == "gui"
        })
        .await;
    assert_eq!(screen.exit, Some(Value::Null), "killed by term_close");
    desk.recv_type("mcp_servers", Some(&session)).await.unwrap();
    turn(&mut desk, &session, "still here").await;
}

#[tokio::test]
async fn the_tui_dies_with_its_client_and_the_engine_comes_back() {
    let fake = FakeModel::start().await.unwrap();
    let env = TestHome::new();
    let project = env.project("app");
    let daemon = builtin(&env, &fake).await;
    let mut desk = daemon.client().await.unwrap();
    let mut phone = daemon.client().await.unwrap();
    let session = desk.start_session(&project).await.unwrap();
    let r = phone
        .request(json!({"op": "session_tui", "session": session}))
        .await
        .unwrap();
    assert_eq!(r["type"], "term_opened", "{r}");
    let term = r["term"].as_str().unwrap().to_string();
    let mut screen = Screen::new(&term);
    screen.until(&mut phone, "ready · Enter sends").await;
    phone.close().await;
    desk.recv_until(|f| f["type"] == "surface" && f["surface"] == "gui")
        .await
        .unwrap();
    desk.recv_type("mcp_servers", Some(&session)).await.unwrap();
    turn(&mut desk, &session, "after the phone left").await;
}

#[tokio::test]
async fn an_engine_without_a_tui_and_an_unknown_session_are_refused() {
    let env = TestHome::new();
    let project = env.project("app");
    // A serve-v2 program as the jucode engine has no TUI of its own.
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let session = desk.start_session(&project).await.unwrap();
    let r = desk
        .request(json!({"op": "session_tui", "session": session}))
        .await
        .unwrap();
    assert_eq!(r["type"], "error", "{r}");
    assert_eq!(
        r["message"],
        "session_tui: the jucode engine has no terminal interface"
    );
    // Nothing was stopped for it.
    desk.send(json!({"op": "user_message", "session": session, "content": "hi"}))
        .await
        .unwrap();
    desk.recv_until(|f| f["type"] == "assistant_delta" && f["session"] == session.as_str())
        .await
        .unwrap();
    let r = desk
        .request(json!({"op": "session_tui", "session": "nope"}))
        .await
        .unwrap();
    assert_eq!(r["message"], "unknown session nope", "{r}");
}
