//! The title model on requirements, through the daemon's real client path: the built-in
//! engine's config names the fake model server, whose script answers the daemon's title and
//! progress requests (`jucode_testsupport::fake_model`). Long words get the model's title; a
//! linked session's turn end has the model rewrite the progress; an answer that is not JSON
//! changes nothing.
//!
//! Build first: `cargo build -p jucode-daemon --bins`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

fn find<'a>(list: &'a Value, id: &str) -> Option<&'a Value> {
    list["requirements"]
        .as_array()?
        .iter()
        .find(|r| r["id"] == id)
}

/// Reads `requirements` broadcasts until `id`'s entry satisfies `pred`; returns it.
async fn until_requirement(c: &mut Client, id: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let frame = c
        .recv_until(|f| f["type"] == "requirements" && find(f, id).is_some_and(&pred))
        .await
        .unwrap();
    find(&frame, id).unwrap().clone()
}

async fn turn(c: &mut Client, session: &str, content: &str) {
    c.send(json!({"op":"user_message","session":session,"content":content}))
        .await
        .unwrap();
    c.recv_until(|f| f["session"] == session && f["type"] == "user_message")
        .await
        .unwrap();
}

#[tokio::test]
async fn the_title_model_titles_long_words_and_rewrites_a_linked_sessions_progress() {
    let env = TestHome::new();
    let fake = FakeModel::start().await.unwrap();
    let daemon = Daemon::start_builtin(&env.home(), &fake.config("chat"))
        .await
        .unwrap();
    let mut c = daemon.client().await.unwrap();

    let text = "Make the search page answer in under a second on large projects";
    let made = c
        .request(json!({"op":"requirement_create","text":text}))
        .await
        .unwrap();
    assert_eq!(made["type"], "requirement_created", "{made}");
    let titled = until_requirement(&mut c, "R-1", |r| r["title_auto"] == true).await;
    assert_eq!(titled["title"], "Make the search");
    let short = c
        .request(json!({"op":"requirement_create","text":"fix the typo"}))
        .await
        .unwrap();
    assert_eq!(short["requirement"], "R-2");

    let cwd = env.project("app");
    let created = c
        .request(json!({"op":"session_create","cwd":cwd.display().to_string(),"options":{}}))
        .await
        .unwrap();
    let session = created["session"].as_str().unwrap().to_string();
    let linked = c
        .request(json!({"op":"requirement_link","requirement":"R-1","session":session}))
        .await
        .unwrap();
    assert_eq!(linked["type"], "requirement_linked", "{linked}");

    turn(&mut c, &session, "build the index").await;
    let first = until_requirement(&mut c, "R-1", |r| r["progress"]["goal"] != "").await;
    assert_eq!(
        first["progress"],
        json!({"goal":"build the index","decided":[],"done":["build the index"],"doing":[],
               "blocked":[],"next":["check the reply"],"files":[],
               "note":"reply ended: user said: build the index"})
    );
    assert!(first["progress_at"].as_u64().unwrap() > 0);

    // Prose instead of a record changes nothing; the next turn's rewrite starts from the
    // first one's record.
    turn(&mut c, &session, "NOT JSON please").await;
    turn(&mut c, &session, "measure it").await;
    let third = until_requirement(&mut c, "R-1", |r| {
        r["progress"]["done"]
            .as_array()
            .is_some_and(|d| d.len() > 1)
    })
    .await;
    assert_eq!(
        third["progress"]["done"],
        json!(["build the index", "measure it"])
    );
    assert_eq!(third["progress"]["goal"], "build the index");

    // The daemon asked the fake's model: titles once (the long words only), progress per turn
    // (the second turn's question may still be on its way: polled, with a deadlock guard).
    let counts = || {
        let systems: Vec<String> = fake
            .requests()
            .into_iter()
            .filter_map(|(_, body)| body["messages"][0]["content"].as_str().map(str::to_string))
            .collect();
        let titles = systems
            .iter()
            .filter(|s| s.contains("You name a requirement"))
            .count();
        let rewrites = systems
            .iter()
            .filter(|s| s.contains("progress record"))
            .count();
        (titles, rewrites)
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while counts().1 < 3 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("three progress questions");
    assert_eq!(counts(), (1, 3));
    let saved = std::fs::read_to_string(env.home().join("daemon/requirements.jsonl")).unwrap();
    assert!(
        saved.contains("\"title_auto\":true"),
        "fsynced with the title"
    );
}
