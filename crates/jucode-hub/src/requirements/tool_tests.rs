//! The agents' `requirements` tool on a hub in-process with a manual clock: each action,
//! what is saved and broadcast, what notifies, and bad input. The user's side goes through
//! real frames (`Hub::handle`) on a local connection.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jucode_clock::{Clock as _, ManualClock};
use serde_json::{Value, json};

use crate::agents::tools::{Caller, call};
use crate::{Auth, Connection, Hub, HubConfig, Outgoing};

struct Home {
    dir: tempfile::TempDir,
    clock: ManualClock,
}

impl Home {
    /// Projects `p1` (`app`) and `p2` (`web`); agent `ops` in `p1`, agent `qa` in none.
    fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join(".jucode");
        let app = dir.path().join("app");
        let web = dir.path().join("web");
        for d in [&app, &web] {
            std::fs::create_dir_all(d).unwrap();
        }
        for (agent, project) in [("ops", json!("p1")), ("qa", Value::Null)] {
            let agent_dir = home.join("agents").join(agent);
            std::fs::create_dir_all(&agent_dir).unwrap();
            let config = json!({"name": agent, "cwd": app, "project": project});
            std::fs::write(agent_dir.join("agent.json"), config.to_string()).unwrap();
        }
        std::fs::create_dir_all(home.join("daemon")).unwrap();
        let workspaces = json!({"rev":1,"workspaces":[{"id":"w1","name":"W","projects":[
            {"id":"p1","name":"app","path":app},{"id":"p2","name":"web","path":web}]}]});
        std::fs::write(home.join("daemon/workspaces.json"), workspaces.to_string()).unwrap();
        let clock = ManualClock::new("2026-03-01T12:00:00Z".parse().unwrap());
        Home { dir, clock }
    }

    fn open(&self) -> Arc<Hub> {
        Hub::open(HubConfig {
            home: self.dir.path().join(".jucode"),
            user_home: self.dir.path().to_path_buf(),
            version: "test".into(),
            relay_url: None,
            engines: HashMap::new(),
            clock: self.clock.shared(),
            agent_mcp: Default::default(),
            billing: None,
            online: Default::default(),
        })
        .unwrap()
    }

    fn log_lines(&self) -> usize {
        let path = self.dir.path().join(".jucode/daemon/requirements.jsonl");
        std::fs::read_to_string(path)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

fn ops() -> Caller {
    Caller {
        agent: "ops".into(),
        session: "s-ops".into(),
    }
}

fn qa() -> Caller {
    Caller {
        agent: "qa".into(),
        session: "s-qa".into(),
    }
}

async fn tool(hub: &Arc<Hub>, who: &Caller, args: Value) -> Result<Value, String> {
    call(hub, who, "requirements", args)
        .await
        .map_err(|e| e.to_string())
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

/// Sends `op` as the user and returns its reply (frames before it are passed over).
async fn request(hub: &Arc<Hub>, conn: &mut Connection, mut op: Value) -> Value {
    op["id"] = json!("t");
    hub.handle(conn.id, &op.to_string()).await;
    loop {
        let f = next(conn).await;
        if f["id"] == "t" {
            return f;
        }
    }
}

/// The latest `requirements` broadcast queued for `conn` (every change broadcasts before the
/// call that made it returns); the frames before it are passed over.
fn list(conn: &mut Connection) -> Vec<Value> {
    let mut last = None;
    while let Ok(Outgoing::Frame(text)) = conn.frames.try_recv() {
        let f: Value = serde_json::from_str(&text).unwrap();
        if f["type"] == "requirements" {
            last = Some(f["requirements"].as_array().unwrap().clone());
        }
    }
    last.expect("a requirements broadcast")
}

fn drain(conn: &mut Connection) {
    while conn.frames.try_recv().is_ok() {}
}

fn queued(hub: &Arc<Hub>) -> Vec<(String, String)> {
    hub.lock()
        .notifications
        .take_queued()
        .into_iter()
        .map(|n| (n.title, n.body))
        .collect()
}

async fn create(hub: &Arc<Hub>, conn: &mut Connection, text: &str, project: Value) -> String {
    let made = request(
        hub,
        conn,
        json!({"op":"requirement_create","text":text,"project":project}),
    )
    .await;
    assert_eq!(made["type"], "requirement_created", "{made}");
    made["requirement"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn propose_create_notes_a_proposed_requirement_in_the_agents_project_and_it_notifies() {
    let home = Home::new();
    let hub = home.open();
    let mut conn = hub.connect(Auth::Local);
    drain(&mut conn);
    let now = home.clock.now_ms();

    let answer = tool(
        &hub,
        &ops(),
        json!({"action":"propose_create","text":"cache the search index","reason":"searches are slow"}),
    )
    .await
    .unwrap();
    assert_eq!(answer["requirement"], "R-1");
    assert_eq!(answer["state"], "proposed");
    // Saved before the answer, broadcast after.
    assert_eq!(home.log_lines(), 1);
    let listed = list(&mut conn);
    let r = &listed[0];
    assert_eq!(r["state"], "proposed");
    assert_eq!(r["status"], "proposed");
    assert_eq!(r["source"], "agent");
    assert_eq!(r["source_session"], "s-ops");
    assert_eq!(r["project"], "p1");
    assert_eq!(r["title"], "cache the search index");
    assert_eq!(
        r["proposal"],
        json!({"kind":"create","agent":"ops","session":"s-ops","reason":"searches are slow","at":now})
    );
    assert_eq!(
        queued(&hub),
        vec![(
            "ops proposes a requirement: cache the search index".to_string(),
            "searches are slow".to_string()
        )]
    );

    // An agent in no project proposes an unassigned one.
    let answer = tool(
        &hub,
        &qa(),
        json!({"action":"propose_create","text":"write the release notes"}),
    )
    .await
    .unwrap();
    assert_eq!(answer["requirement"], "R-2");
    let listed = list(&mut conn);
    assert_eq!(listed[1]["project"], Value::Null);
    assert_eq!(listed[1]["proposal"]["reason"], "");

    // The user accepts the first (it becomes an idea) and turns the second down (it goes);
    // neither decision notifies.
    queued(&hub);
    let decided = request(
        &hub,
        &mut conn,
        json!({"op":"requirement_proposal","requirement":"R-1","accept":true}),
    )
    .await;
    assert_eq!(decided["type"], "requirement_proposal_decided", "{decided}");
    let listed = list(&mut conn);
    assert_eq!(listed[0]["state"], "idea");
    assert_eq!(listed[0]["proposal"], Value::Null);
    let decided = request(
        &hub,
        &mut conn,
        json!({"op":"requirement_proposal","requirement":"R-2","accept":false}),
    )
    .await;
    assert_eq!(decided["accept"], false);
    let listed = list(&mut conn);
    assert_eq!(listed.len(), 1);
    assert_eq!(queued(&hub), vec![]);

    for (args, error) in [
        (
            json!({"action":"propose_create","text":"  "}),
            "requirements: propose_create: text must not be empty",
        ),
        (
            json!({"action":"propose_create"}),
            "requirements: propose_create needs text",
        ),
    ] {
        assert_eq!(tool(&hub, &ops(), args).await.unwrap_err(), error);
    }
    let long = "x".repeat(jucode_protocol::daemon::limits::REASON_CHARS + 1);
    let err = tool(
        &hub,
        &ops(),
        json!({"action":"propose_create","text":"t","reason":long}),
    )
    .await
    .unwrap_err();
    assert!(err.contains("reason is longer than"), "{err}");
    assert_eq!(home.log_lines(), 4, "refusals write nothing");
}

#[tokio::test]
async fn propose_close_sets_a_close_proposal_replacing_an_earlier_one() {
    let home = Home::new();
    let hub = home.open();
    let mut conn = hub.connect(Auth::Local);
    drain(&mut conn);
    let r = create(&hub, &mut conn, "tidy the logs", json!("p1")).await;
    assert_eq!(queued(&hub), vec![], "the user's own requirement");

    let answer = tool(
        &hub,
        &ops(),
        json!({"action":"propose_close","requirement":r,"outcome":"parked","reason":"not needed now"}),
    )
    .await
    .unwrap();
    assert_eq!(answer["proposal"], "close");
    let listed = list(&mut conn);
    assert_eq!(listed[0]["status"], "proposal");
    assert_eq!(listed[0]["state"], "idea");
    let at = home.clock.now_ms();
    assert_eq!(
        listed[0]["proposal"],
        json!({"kind":"close","outcome":"parked","agent":"ops","session":"s-ops","reason":"not needed now","at":at})
    );
    assert_eq!(
        queued(&hub),
        vec![(
            "ops proposes to park: tidy the logs".to_string(),
            "not needed now".to_string()
        )]
    );

    // A second proposal replaces the first.
    home.clock.advance(Duration::from_secs(5));
    tool(
        &hub,
        &qa(),
        json!({"action":"propose_close","requirement":r,"outcome":"done","reason":"shipped"}),
    )
    .await
    .unwrap();
    let listed = list(&mut conn);
    assert_eq!(listed[0]["proposal"]["outcome"], "done");
    assert_eq!(listed[0]["proposal"]["agent"], "qa");
    assert_eq!(listed[0]["proposal"]["at"], at + 5000);
    assert_eq!(queued(&hub).len(), 1);

    // Turned down: dropped, the requirement stays as it was.
    request(
        &hub,
        &mut conn,
        json!({"op":"requirement_proposal","requirement":r,"accept":false}),
    )
    .await;
    let listed = list(&mut conn);
    assert_eq!(listed[0]["proposal"], Value::Null);
    assert_eq!(listed[0]["state"], "idea");

    // Accepted: the state becomes the outcome.
    tool(
        &hub,
        &ops(),
        json!({"action":"propose_close","requirement":r,"outcome":"done"}),
    )
    .await
    .unwrap();
    request(
        &hub,
        &mut conn,
        json!({"op":"requirement_proposal","requirement":r,"accept":true}),
    )
    .await;
    let listed = list(&mut conn);
    assert_eq!(listed[0]["state"], "done");
    assert_eq!(listed[0]["proposal"], Value::Null);

    let lines = home.log_lines();
    for (args, error) in [
        (
            json!({"action":"propose_close","requirement":r,"outcome":"done"}),
            format!(
                "requirements: {r} is done: only an idea or open requirement can be proposed for closing"
            ),
        ),
        (
            json!({"action":"propose_close","requirement":"R-9","outcome":"done"}),
            "unknown requirement R-9".to_string(),
        ),
        (
            json!({"action":"propose_close","requirement":r,"outcome":"finished"}),
            "requirements: outcome \"finished\" is not done or parked".to_string(),
        ),
        (
            json!({"action":"propose_close","requirement":r}),
            "requirements: propose_close needs outcome".to_string(),
        ),
    ] {
        assert_eq!(tool(&hub, &ops(), args).await.unwrap_err(), error);
    }
    // A proposed requirement has its create proposal: it cannot be proposed for closing.
    tool(
        &hub,
        &ops(),
        json!({"action":"propose_create","text":"new one"}),
    )
    .await
    .unwrap();
    let err = tool(
        &hub,
        &ops(),
        json!({"action":"propose_close","requirement":"R-2","outcome":"done"}),
    )
    .await
    .unwrap_err();
    assert!(err.contains("R-2 is proposed"), "{err}");
    assert_eq!(home.log_lines(), lines + 1);
}

fn ids(answer: &Value) -> Vec<String> {
    answer["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn list_shows_the_agents_project_or_all_and_filters_by_project_and_state() {
    let home = Home::new();
    let hub = home.open();
    let mut conn = hub.connect(Auth::Local);
    drain(&mut conn);
    let r1 = create(&hub, &mut conn, "in app", json!("p1")).await;
    let r2 = create(&hub, &mut conn, "in web", json!("p2")).await;
    let r3 = create(&hub, &mut conn, "anywhere", Value::Null).await;
    request(
        &hub,
        &mut conn,
        json!({"op":"requirement_update","requirement":r2,"state":"done"}),
    )
    .await;

    let mine = tool(&hub, &ops(), json!({"action":"list"})).await.unwrap();
    assert_eq!(ids(&mine), vec![r1.clone()]);
    let entry = &mine["requirements"][0];
    assert_eq!(entry["title"], "in app");
    assert_eq!(entry["state"], "idea");
    assert_eq!(entry["status"], "idea");
    assert_eq!(entry["project"], "p1");

    let all = tool(&hub, &qa(), json!({"action":"list"})).await.unwrap();
    assert_eq!(ids(&all), vec![r1.clone(), r2.clone(), r3.clone()]);
    let cases = [
        (json!({"action":"list","project":"none"}), vec![r3.clone()]),
        (json!({"action":"list","project":"p2"}), vec![r2.clone()]),
        (json!({"action":"list","state":"done"}), vec![]),
        (
            json!({"action":"list","project":"p2","state":"done"}),
            vec![r2.clone()],
        ),
    ];
    for (args, want) in cases {
        assert_eq!(
            ids(&tool(&hub, &ops(), args.clone()).await.unwrap()),
            want,
            "{args}"
        );
    }
    let done = tool(&hub, &qa(), json!({"action":"list","state":"done"}))
        .await
        .unwrap();
    assert_eq!(ids(&done), vec![r2.clone()]);

    let err = tool(&hub, &ops(), json!({"action":"list","state":"finished"}))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        "requirements: state \"finished\" is not idea, open, done, parked or proposed"
    );

    let one = tool(&hub, &ops(), json!({"action":"get","requirement":r2}))
        .await
        .unwrap();
    assert_eq!(one["requirement"]["id"], r2);
    assert_eq!(one["requirement"]["text"], "in web");
    assert_eq!(one["requirement"]["state"], "done");
    assert_eq!(
        tool(&hub, &ops(), json!({"action":"get","requirement":"R-9"}))
            .await
            .unwrap_err(),
        "unknown requirement R-9"
    );
    assert_eq!(
        tool(&hub, &ops(), json!({"action":"get"}))
            .await
            .unwrap_err(),
        "requirements: get needs requirement"
    );
    let err = tool(&hub, &ops(), json!({"action":"delete"}))
        .await
        .unwrap_err();
    assert!(
        err.starts_with("requirements: unknown action \"delete\""),
        "{err}"
    );
    let err = tool(&hub, &ops(), json!({})).await.unwrap_err();
    assert!(err.contains("missing field `action`"), "{err}");
}

#[tokio::test]
async fn progress_appends_each_item_once_replaces_the_note_and_stamps_the_hub_clock() {
    let home = Home::new();
    let hub = home.open();
    let mut conn = hub.connect(Auth::Local);
    drain(&mut conn);
    let r = create(&hub, &mut conn, "make search fast", json!("p1")).await;
    queued(&hub);

    // This session works on no requirement: it must name one.
    assert_eq!(
        tool(&hub, &ops(), json!({"action":"progress","done":["x"]}))
            .await
            .unwrap_err(),
        "requirements: progress needs requirement (this session works on none)"
    );

    home.clock.advance(Duration::from_secs(60));
    let first = tool(
        &hub,
        &ops(),
        json!({"action":"progress","requirement":r,"decided":["use an index"],
               "doing":["build the index"],"next":["measure"],"note":"halfway"}),
    )
    .await
    .unwrap();
    assert_eq!(first["added"], 3);
    let listed = list(&mut conn);
    assert_eq!(listed[0]["progress_at"], home.clock.now_ms());
    assert_eq!(listed[0]["progress"]["note"], "halfway");

    home.clock.advance(Duration::from_secs(60));
    let second = tool(
        &hub,
        &ops(),
        json!({"action":"progress","requirement":r,"decided":["use an index"," use an index ","cache it",""],
               "done":["build the index"],"blocked":["no test data"],"note":"nearly"}),
    )
    .await
    .unwrap();
    assert_eq!(second["added"], 3, "{second}");
    let listed = list(&mut conn);
    let p = &listed[0]["progress"];
    assert_eq!(p["decided"], json!(["use an index", "cache it"]));
    assert_eq!(p["doing"], json!(["build the index"]));
    assert_eq!(p["done"], json!(["build the index"]));
    assert_eq!(p["blocked"], json!(["no test data"]));
    assert_eq!(p["next"], json!(["measure"]));
    assert_eq!(p["note"], "nearly");
    assert_eq!(p["goal"], "");
    assert_eq!(listed[0]["progress_at"], home.clock.now_ms());
    assert_eq!(queued(&hub), vec![], "progress proposes nothing");

    // A session working on it may leave the id out.
    {
        let mut inner = hub.lock();
        let mut stored = inner.requirements.get(&r).unwrap();
        stored.sessions.push("s-ops".into());
        inner.requirements.save(stored).unwrap();
    }
    let third = tool(&hub, &ops(), json!({"action":"progress","next":["ship"]}))
        .await
        .unwrap();
    assert_eq!(third["requirement"], r);
    assert_eq!(third["progress"]["next"], json!(["measure", "ship"]));
    // Without note, the note stays.
    assert_eq!(third["progress"]["note"], "nearly");

    let lines = home.log_lines();
    let long = "x".repeat(super::tool::PROGRESS_ITEM_CHARS + 1);
    let err = tool(
        &hub,
        &ops(),
        json!({"action":"progress","requirement":r,"done":["fine", long]}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        format!(
            "requirements: done is longer than {} characters",
            super::tool::PROGRESS_ITEM_CHARS
        )
    );
    assert_eq!(
        tool(
            &hub,
            &ops(),
            json!({"action":"progress","requirement":"R-9"})
        )
        .await
        .unwrap_err(),
        "unknown requirement R-9"
    );
    let err = tool(
        &hub,
        &ops(),
        json!({"action":"progress","requirement":r,"done":"not a list"}),
    )
    .await
    .unwrap_err();
    assert!(err.starts_with("requirements: invalid type"), "{err}");
    assert_eq!(home.log_lines(), lines, "refusals write nothing");
    let stored = hub.lock().requirements.get(&r).unwrap();
    assert!(!stored.progress.done.contains(&"fine".to_string()));
}

#[test]
fn the_tool_is_offered_to_every_agent_session() {
    let names: Vec<String> = crate::agents::tools::defs()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert!(names.iter().any(|n| n == "requirements"), "{names:?}");
}
