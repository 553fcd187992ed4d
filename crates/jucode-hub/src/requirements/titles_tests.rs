//! The title model's titles and progress on a hub in-process: a scripted [`TitleModel`]
//! (answers the test queued, keeps what it was asked) and a scripted engine behind the real
//! `jucode-engine` channels, so a linked session's turn ends as an engine's does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jucode_engine::{EngineError, EngineFactory, EngineHandle, EngineOutput, StartSpec};
use jucode_protocol::daemon::Progress;
use jucode_protocol::serve::Event;
use serde_json::{Value, json};

use super::titles::{
    PROGRESS_SYSTEM, ProgressAsk, TITLE_SYSTEM, TitleFuture, TitleModel, TitleModelError,
    clean_title, parse_progress,
};
use crate::{Auth, Connection, Hub, HubConfig, Online, Outgoing};

/// Answers with the texts queued, in order; asked with none queued, it fails.
#[derive(Default)]
struct Scripted {
    answers: Mutex<VecDeque<String>>,
    asked: Mutex<Vec<(String, String)>>,
}

impl Scripted {
    fn answer(&self, text: &str) {
        self.answers.lock().unwrap().push_back(text.to_string());
    }

    fn asked(&self) -> Vec<(String, String)> {
        self.asked.lock().unwrap().clone()
    }
}

impl TitleModel for Scripted {
    fn complete(&self, system: &str, user: &str, _max_tokens: u64) -> TitleFuture {
        self.asked
            .lock()
            .unwrap()
            .push((system.to_string(), user.to_string()));
        let answer = self.answers.lock().unwrap().pop_front();
        Box::pin(async move {
            answer.ok_or_else(|| TitleModelError::Failed("no answer scripted".into()))
        })
    }
}

/// An engine that answers each `user_message` with `reply to <content>` and ends the turn.
struct Echo;

impl EngineFactory for Echo {
    fn start(&self, _spec: StartSpec) -> Result<EngineHandle, EngineError> {
        let (handle, mut ops, events) = jucode_engine::channel();
        tokio::spawn(async move {
            let emit = |kind: &str, fields: Value| EngineOutput::Event(Event::new(kind, fields));
            let _ = events.send(emit("startup", json!({}))).await;
            while let Some(op) = ops.recv().await {
                match op.get("op").and_then(Value::as_str) {
                    Some("user_message") => {
                        let content = op.get("content").cloned().unwrap_or_default();
                        let reply = format!("reply to {}", content.as_str().unwrap_or_default());
                        for (kind, fields) in [
                            ("user_message", json!({ "content": content })),
                            ("assistant_start", json!({})),
                            ("assistant_delta", json!({ "delta": reply })),
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
}

struct Setup {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    hub: Arc<Hub>,
    conn: Connection,
}

fn open(model: Option<Arc<Scripted>>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let mut engines: HashMap<String, Arc<dyn EngineFactory>> = HashMap::new();
    engines.insert("jucode".into(), Arc::new(Echo));
    let hub = Hub::open(HubConfig {
        home: root.join(".jucode"),
        user_home: root.clone(),
        version: "test".into(),
        relay_url: None,
        engines,
        clock: jucode_clock::ManualClock::new("2026-03-01T12:00:00Z".parse().unwrap()).shared(),
        agent_mcp: Default::default(),
        billing: None,
        online: Online {
            title_model: model.map(|m| m as Arc<dyn TitleModel>),
            ..Default::default()
        },
    })
    .unwrap();
    let conn = hub.connect(Auth::Local);
    Setup {
        _dir: dir,
        root,
        hub,
        conn,
    }
}

async fn next(conn: &mut Connection) -> Value {
    let wait = conn.frames.recv();
    let Some(Outgoing::Frame(text)) = tokio::time::timeout(Duration::from_secs(20), wait)
        .await
        .expect("a frame within 20 s")
    else {
        panic!("the connection ended")
    };
    serde_json::from_str(&text).unwrap()
}

async fn request(s: &mut Setup, mut op: Value) -> Value {
    op["id"] = json!("t");
    s.hub.handle(s.conn.id, &op.to_string()).await;
    loop {
        let f = next(&mut s.conn).await;
        if f["id"] == "t" {
            return f;
        }
    }
}

/// Reads `requirements` broadcasts until `id`'s entry satisfies `pred`; returns it.
async fn until(s: &mut Setup, id: &str, pred: impl Fn(&Value) -> bool) -> Value {
    loop {
        let f = next(&mut s.conn).await;
        if f["type"] != "requirements" {
            continue;
        }
        let found = f["requirements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .cloned();
        if let Some(r) = found.filter(|r| pred(r)) {
            return r;
        }
    }
}

const LONG: &str = "Make the search page return results in under a second for large projects";

#[tokio::test]
async fn long_words_get_the_models_title_after_the_reply_and_short_ones_are_not_asked() {
    let model = Arc::new(Scripted::default());
    let mut s = open(Some(model.clone()));
    let short = request(
        &mut s,
        json!({"op":"requirement_create","text":"fix the login typo"}),
    )
    .await;
    assert_eq!(short["requirement"], "R-1");

    model.answer("Title: \"Fast search.\"");
    let made = request(&mut s, json!({"op":"requirement_create","text":LONG})).await;
    assert_eq!(made["type"], "requirement_created");
    // The reply does not wait for the model: the list right after it has the cut.
    let first = until(&mut s, "R-2", |_| true).await;
    assert_eq!(first["title"], "Make the search page return results in u");
    assert_eq!(first["title_auto"], false);
    let titled = until(&mut s, "R-2", |r| r["title_auto"] == true).await;
    assert_eq!(titled["title"], "Fast search");
    let asked = model.asked();
    assert_eq!(asked.len(), 1, "only the long words: {asked:?}");
    assert_eq!(asked[0].0, TITLE_SYSTEM);
    assert!(asked[0].1.contains(LONG), "{}", asked[0].1);
    // Saved, not only shown.
    let stored = s.hub.lock().requirements.get("R-2").unwrap();
    assert_eq!(
        (stored.title.as_str(), stored.title_auto),
        ("Fast search", true)
    );

    // The user's new words: the cut again until the model's new title.
    model.answer("Search under a second");
    let longer = format!("{LONG}, also for the phone page");
    let saved = request(
        &mut s,
        json!({"op":"requirement_update","requirement":"R-2","text":longer}),
    )
    .await;
    assert_eq!(saved["type"], "requirement_saved");
    let cut = until(&mut s, "R-2", |r| r["text"] == longer.as_str()).await;
    assert_eq!(cut["title_auto"], false);
    let again = until(&mut s, "R-2", |r| r["title_auto"] == true).await;
    assert_eq!(again["title"], "Search under a second");

    // A failing model changes nothing: the next model answer is for the next ask.
    let failed = format!("{longer}, and the tablet page");
    request(
        &mut s,
        json!({"op":"requirement_update","requirement":"R-2","text":failed}),
    )
    .await;
    // Its question is asked (and fails) before the next answer is queued.
    while model.asked().len() < 3 {
        tokio::task::yield_now().await;
    }
    model.answer("Search everywhere");
    let third = format!("{failed}, and the watch");
    request(
        &mut s,
        json!({"op":"requirement_update","requirement":"R-2","text":third}),
    )
    .await;
    let last = until(&mut s, "R-2", |r| r["title_auto"] == true).await;
    assert_eq!(last["title"], "Search everywhere");
    assert_eq!(last["text"], third.as_str());
}

#[tokio::test]
async fn an_answer_for_words_since_changed_or_a_title_the_user_chose_is_dropped() {
    let mut s = open(None);
    request(&mut s, json!({"op":"requirement_create","text":LONG})).await;
    let mut inner = s.hub.lock();
    let r = &mut inner.requirements;
    assert!(
        !r.set_auto_title("R-1", "other words", "Nope".into())
            .unwrap()
    );
    assert!(r.set_auto_title("R-1", LONG, "Fast search".into()).unwrap());
    assert!(!r.set_auto_title("R-1", LONG, "Fast search".into()).unwrap());
    let mut stored = r.get("R-1").unwrap();
    stored.title = "My own title".into();
    stored.title_auto = false;
    r.save(stored).unwrap();
    assert!(!r.set_auto_title("R-1", LONG, "Model title".into()).unwrap());
    assert_eq!(r.get("R-1").unwrap().title, "My own title");
    drop(inner);
    // Without a title model the cut stays, and a user's title survives new words.
    request(
        &mut s,
        json!({"op":"requirement_update","requirement":"R-1","text":format!("{LONG}!")}),
    )
    .await;
    let stored = s.hub.lock().requirements.get("R-1").unwrap();
    assert_eq!(stored.title, "My own title");
    request(&mut s, json!({"op":"requirement_create","text":LONG})).await;
    let cut = s.hub.lock().requirements.get("R-2").unwrap();
    assert_eq!(
        (cut.title.as_str(), cut.title_auto),
        ("Make the search page return results in u", false)
    );
}

#[tokio::test]
async fn a_linked_sessions_turn_end_has_the_model_rewrite_the_progress() {
    let model = Arc::new(Scripted::default());
    let mut s = open(Some(model.clone()));
    let cwd = s.root.join("app");
    std::fs::create_dir_all(&cwd).unwrap();
    let made = request(
        &mut s,
        json!({"op":"session_create","cwd":cwd.display().to_string()}),
    )
    .await;
    assert_eq!(made["type"], "session_created", "{made}");
    let session = made["session"].as_str().unwrap().to_string();
    request(
        &mut s,
        json!({"op":"requirement_create","text":"speed up search"}),
    )
    .await;
    request(
        &mut s,
        json!({"op":"requirement_link","requirement":"R-1","session":session}),
    )
    .await;
    {
        let mut inner = s.hub.lock();
        let mut r = inner.requirements.get("R-1").unwrap();
        r.progress.decided = vec!["use an index".into()];
        inner.requirements.save(r).unwrap();
    }

    model.answer(
        "```json\n{\"goal\":\"search under a second\",\"done\":[\"index built\",\"index built\"],\
         \"next\":[\"measure\"],\"note\":\"fast now\"}\n```",
    );
    let op = json!({"op":"user_message","session":session,"content":"build the index"});
    s.hub.handle(s.conn.id, &op.to_string()).await;
    // user_message has no reply of its own: wait for the rewrite itself.
    let r = until(&mut s, "R-1", |r| r["progress"]["goal"] != "").await;
    assert_eq!(
        r["progress"],
        json!({"goal":"search under a second","decided":["use an index"],
               "done":["index built"],"doing":[],"blocked":[],"next":["measure"],
               "files":[],"note":"fast now"})
    );
    assert!(r["progress_at"].as_u64().unwrap() > 0);
    let asked = model.asked();
    let (system, user) = asked.last().unwrap();
    assert_eq!(system, PROGRESS_SYSTEM);
    assert!(
        user.starts_with("Requirement R-1:\nspeed up search"),
        "{user}"
    );
    assert!(user.contains("\"decided\":[\"use an index\"]"), "{user}");
    assert!(user.contains("Latest request:\nbuild the index"), "{user}");
    assert!(
        user.contains("End of the latest reply:\nreply to build the index"),
        "{user}"
    );
}

#[test]
fn titles_are_cleaned_of_labels_quotes_and_periods() {
    assert_eq!(
        clean_title("Title: \"Fast search.\"\n").as_deref(),
        Some("Fast search")
    );
    assert_eq!(clean_title("\n\n  搜索提速。").as_deref(), Some("搜索提速"));
    assert_eq!(clean_title("`Cache it`").as_deref(), Some("Cache it"));
    assert_eq!(
        clean_title("Title: \"Fast search\".").as_deref(),
        Some("Fast search")
    );
    assert_eq!(clean_title("  \n \"\" "), None);
    let long = "w".repeat(300);
    assert_eq!(clean_title(&long).unwrap().chars().count(), 80);
}

#[test]
fn only_a_json_record_is_taken_and_a_key_left_out_keeps_its_value() {
    for bad in [
        "The session went well.",
        "[\"done\"]",
        "{\"done\": \"not a list\"}",
        "```json\n{\"note\": \"unclosed\"\n",
        "",
    ] {
        assert!(parse_progress(bad).is_none(), "{bad}");
    }
    let previous = Progress {
        goal: "fast search".into(),
        files: vec!["src/search.rs".into()],
        note: "old".into(),
        ..Progress::default()
    };
    let answer = parse_progress("{\"done\":[\" a \",\"a\",\"\",\"b\"],\"note\":\"new\"}").unwrap();
    let merged = answer.merged(&previous);
    assert_eq!(merged.goal, "fast search");
    assert_eq!(merged.files, vec!["src/search.rs".to_string()]);
    assert_eq!(merged.done, vec!["a".to_string(), "b".to_string()]);
    assert_eq!(merged.note, "new");
    let fenced = parse_progress("```\n{\"goal\":\"g\"}\n```").unwrap();
    assert_eq!(fenced.merged(&previous).goal, "g");
    let many: Vec<String> = (0..500).map(|i| format!("item {i}")).collect();
    let answer = parse_progress(&json!({ "next": many }).to_string()).unwrap();
    assert_eq!(
        answer.merged(&previous).next.len(),
        super::tool::PROGRESS_ITEMS
    );
}

#[tokio::test]
async fn a_rewrite_of_a_record_changed_since_it_was_asked_is_dropped() {
    let mut s = open(None);
    request(&mut s, json!({"op":"requirement_create","text":"t"})).await;
    let ask = ProgressAsk {
        requirement: "R-1".into(),
        text: "t".into(),
        previous: Progress::default(),
        first: "a".into(),
        latest: "b".into(),
        reply: "c".into(),
    };
    let mut inner = s.hub.lock();
    let mut r = inner.requirements.get("R-1").unwrap();
    r.progress.done = vec!["by the agent".into()];
    inner.requirements.save(r).unwrap();
    let answer = parse_progress("{\"goal\":\"from the model\"}").unwrap();
    assert!(!inner.requirements.set_progress(&ask, answer).unwrap());
    let stored = inner.requirements.get("R-1").unwrap();
    assert_eq!(stored.progress.goal, "");
    assert_eq!(stored.progress.done, vec!["by the agent".to_string()]);
    assert_eq!(stored.progress_at, 0);
    // Asked about the record as it is now, it is taken.
    let ask = ProgressAsk {
        previous: stored.progress.clone(),
        ..ask
    };
    let answer = parse_progress("{\"goal\":\"from the model\"}").unwrap();
    assert!(inner.requirements.set_progress(&ask, answer).unwrap());
    assert_eq!(
        inner.requirements.get("R-1").unwrap().progress.goal,
        "from the model"
    );
}
