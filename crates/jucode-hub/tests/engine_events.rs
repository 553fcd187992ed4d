//! The hub in-process with a scripted engine behind the real `jucode-engine` channels: what
//! clients see of an engine's events (titles, transcripts after a reopen).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jucode_engine::{EngineError, EngineFactory, EngineHandle, EngineOutput, StartSpec};
use jucode_hub::{Auth, Connection, Hub, HubConfig, Outgoing};
use jucode_protocol::serve::{Event, TranscriptItem};
use serde_json::{Value, json};

/// An engine that answers `user_message` with the message, a `session_title` and `ready`, and
/// whose saved conversation is [`Scripted::saved`] (sent again as `transcript` on resume, as
/// the built-in engine does after its start-up).
struct Scripted {
    saved: Vec<TranscriptItem>,
    /// The id its `startup` names the session by, as an engine that names its sessions.
    names: Option<&'static str>,
}

impl EngineFactory for Scripted {
    fn start(&self, spec: StartSpec) -> Result<EngineHandle, EngineError> {
        let (handle, mut ops, events) = jucode_engine::channel();
        let saved = spec.resume.then(|| self.saved.clone());
        let named = self.names.unwrap_or_default();
        tokio::spawn(async move {
            let emit = |kind: &str, fields: Value| EngineOutput::Event(Event::new(kind, fields));
            let _ = events
                .send(emit("startup", json!({ "session_id": named })))
                .await;
            if let Some(items) = saved {
                let _ = events
                    .send(emit("transcript", json!({ "items": items })))
                    .await;
            }
            while let Some(op) = ops.recv().await {
                match op.get("op").and_then(Value::as_str) {
                    Some("user_message") => {
                        let content = op.get("content").cloned().unwrap_or_default();
                        for (kind, fields) in [
                            ("user_message", json!({ "content": content })),
                            ("session_title", json!({ "title": "engine title" })),
                            ("status", json!({ "message": "ready" })),
                        ] {
                            let _ = events.send(emit(kind, fields)).await;
                        }
                    }
                    Some("shutdown") => break,
                    _ => {}
                }
            }
            let _ = events.send(EngineOutput::Exited { error: None }).await;
        });
        Ok(handle)
    }

    fn saved_transcript(&self, _session: &str) -> Option<Vec<TranscriptItem>> {
        Some(self.saved.clone())
    }

    fn opens_at_startup(&self) -> bool {
        self.names.is_some()
    }

    fn names_its_session(&self) -> bool {
        self.names.is_some()
    }
}

fn open_hub(root: &std::path::Path, saved: Vec<TranscriptItem>) -> Arc<Hub> {
    let mut engines: HashMap<String, Arc<dyn EngineFactory>> = HashMap::new();
    let jucode = Scripted { saved, names: None };
    let codex = Scripted {
        saved: vec![],
        names: Some("thread-1"),
    };
    engines.insert("jucode".into(), Arc::new(jucode));
    engines.insert("codex".into(), Arc::new(codex));
    Hub::open(HubConfig {
        home: root.join(".jucode"),
        user_home: root.to_path_buf(),
        version: "test".into(),
        relay_url: None,
        engines,
        clock: jucode_clock::SystemClock::shared(),
        agent_mcp: Default::default(),
        billing: None,
        online: Default::default(),
    })
    .unwrap()
}

struct Setup {
    _dir: tempfile::TempDir,
    cwd: String,
    hub: Arc<Hub>,
    conn: Connection,
}

impl Setup {
    fn new(saved: Vec<TranscriptItem>) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let hub = open_hub(&root, saved);
        let conn = hub.connect(Auth::Local);
        Setup {
            _dir: dir,
            cwd: root.display().to_string(),
            hub,
            conn,
        }
    }

    async fn send(&self, frame: Value) {
        self.hub.handle(self.conn.id, &frame.to_string()).await;
    }

    /// The next frame queued for the client. The bound only keeps a broken hub from hanging
    /// the suite; nothing here waits for time to pass.
    async fn recv(&mut self) -> Value {
        let next = tokio::time::timeout(Duration::from_secs(20), self.conn.frames.recv());
        let Ok(Some(Outgoing::Frame(text))) = next.await else {
            panic!("no frame from the hub (or it dropped the client)");
        };
        serde_json::from_str(&text).unwrap()
    }

    /// Frames up to and including the first that `done` accepts.
    async fn until(&mut self, done: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut frames = Vec::new();
        loop {
            let frame = self.recv().await;
            let last = done(&frame);
            frames.push(frame);
            if last {
                return frames;
            }
        }
    }

    async fn request(&mut self, mut frame: Value) -> Value {
        frame["id"] = json!("r");
        self.send(frame).await;
        self.until(|f| f["id"] == "r").await.pop().unwrap()
    }
}

fn is_ready(session: &str) -> impl Fn(&Value) -> bool + '_ {
    move |f| f["session"] == session && f["type"] == "status" && f["message"] == "ready"
}

#[tokio::test]
async fn a_title_a_client_set_is_not_contradicted_by_the_engines_title_events() {
    let mut t = Setup::new(vec![]);
    let created = t
        .request(json!({"op":"session_create","cwd":t.cwd.clone()}))
        .await;
    let session = created["session"].as_str().unwrap().to_string();
    t.until(|f| f["type"] == "startup").await;

    // Untitled: the engine's title is shown and listed.
    t.send(json!({"op":"user_message","session":session,"content":"one"}))
        .await;
    let frames = t.until(is_ready(&session)).await;
    assert!(frames.iter().any(|f| f["type"] == "session_title"));

    // session_meta has no reply of its own: every client gets the new list.
    t.send(json!({"op":"session_meta","session":session,"title":"Mine"}))
        .await;
    t.until(|f| f["type"] == "sessions" && f["sessions"][0]["title"] == "Mine")
        .await;
    t.send(json!({"op":"user_message","session":session,"content":"two"}))
        .await;
    let frames = t.until(is_ready(&session)).await;
    let titles: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "session_title")
        .collect();
    assert!(
        titles.is_empty(),
        "the engine's title reached clients: {titles:?}"
    );
    let list = t.request(json!({"op":"session_list"})).await;
    assert_eq!(list["sessions"][0]["title"], "Mine");
}

#[tokio::test]
async fn a_reopened_session_shows_its_conversation_at_once_and_only_once() {
    let saved = vec![
        TranscriptItem::User {
            content: "earlier".into(),
            images: vec![],
        },
        TranscriptItem::Assistant {
            content: "an answer".into(),
        },
    ];
    let mut t = Setup::new(saved.clone());
    let opened = t
        .request(json!({"op":"session_open","session":"s1","cwd":t.cwd.clone()}))
        .await;
    assert_eq!(opened["type"], "session_opened", "{opened}");
    t.send(json!({"op":"watch","session":"s1"})).await;
    let mut frames = t.until(|f| f["type"] == "watching").await;
    let snapshot = t.until(|f| f["type"] == "attended").await;
    let transcript = snapshot.iter().find(|f| f["type"] == "transcript").unwrap();
    assert_eq!(transcript["items"], serde_json::to_value(&saved).unwrap());

    // Everything the engine says from its start-up to the end of a turn: its own transcript
    // of the same conversation is not sent again.
    t.send(json!({"op":"user_message","session":"s1","content":"more"}))
        .await;
    frames.extend(t.until(is_ready("s1")).await);
    let again: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "transcript")
        .collect();
    assert!(
        again.is_empty(),
        "the conversation was sent twice: {again:?}"
    );
}

#[tokio::test]
async fn an_engine_that_names_its_session_is_listed_and_answered_under_that_name() {
    let mut t = Setup::new(vec![]);
    let created = t
        .request(json!({"op":"session_create","cwd":t.cwd.clone(),"engine":"codex"}))
        .await;
    assert_eq!(created["type"], "session_created", "{created}");
    assert_eq!(created["session"], "thread-1");
    let list = t.request(json!({"op":"session_list"})).await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["sessions"][0]["session"], "thread-1");
    t.send(json!({"op":"user_message","session":"thread-1","content":"hi"}))
        .await;
    t.until(is_ready("thread-1")).await;
}
