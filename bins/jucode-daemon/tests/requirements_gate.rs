//! The start gate on the real daemon binary with the scripted engine: understand → plan →
//! go, each step confirmed; the session held read-only throughout (a client's mode kept for
//! later, every engine start read-only); the ops out of order refused; the gate surviving a
//! SIGKILL; `requirement_reply` on the latest session and on a new one.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

/// Project `p1` at `<root>/app`; returns its directory.
fn seed(env: &TestHome) -> String {
    let cwd = env.project("app").display().to_string();
    std::fs::create_dir_all(env.home().join("daemon")).unwrap();
    let workspaces = json!({"rev":1,"workspaces":[{"id":"w1","name":"W","projects":[
        {"id":"p1","name":"app","path":cwd}]}]});
    std::fs::write(
        env.home().join("daemon/workspaces.json"),
        workspaces.to_string(),
    )
    .unwrap();
    cwd
}

fn find<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{id} in {list}"))
}

/// Reads `requirements` broadcasts until `id`'s entry satisfies `pred`; returns it.
async fn until_requirement(c: &mut Client, id: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let frame = c
        .recv_until(|f| f["type"] == "requirements" && pred(find(f, id)))
        .await
        .unwrap();
    find(&frame, id).clone()
}

async fn event(c: &mut Client, kind: &str, session: &str) -> Value {
    c.recv_type(kind, Some(session)).await.unwrap()
}

async fn create(c: &mut Client, text: &str) -> String {
    let made = c
        .request(json!({"op":"requirement_create","text":text,"project":"p1"}))
        .await
        .unwrap();
    made["requirement"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn the_gate_explains_then_plans_then_works_in_the_mode_asked_for() {
    let env = TestHome::new();
    let cwd = seed(&env);
    let daemon = env.daemon().await;
    let mut c = daemon.client().await.unwrap();
    let s = c.start_session(std::path::Path::new(&cwd)).await.unwrap();
    let r = create(&mut c, "make search fast").await;

    let begun = c
        .request(
            json!({"op":"requirement_begin","requirement":r,"session":s,"plan":true,
            "mode":"edits","text":"only the index","lang":"en"}),
        )
        .await
        .unwrap();
    assert_eq!(
        begun,
        json!({"type":"requirement_begun","requirement":r,"session":s,"id":begun["id"]})
    );
    assert_eq!(event(&mut c, "approval_mode", &s).await["mode"], "manual");
    let asked = event(&mut c, "user_message", &s).await;
    let content = asked["content"].as_str().unwrap();
    assert!(
        content.starts_with("Requirement R-1:\nmake search fast"),
        "{content}"
    );
    assert!(content.contains("Also: only the index"), "{content}");
    assert!(content.contains("Before you change anything"), "{content}");
    let at_stage = until_requirement(&mut c, &r, |e| e["status"] == "confirm").await;
    assert_eq!(
        at_stage["gate"],
        json!({"session":s,"stage":"understand","plan":true,"mode":"edits","answered":true})
    );
    assert_eq!(at_stage["state"], "open");
    assert_eq!(at_stage["sessions"], json!([s]));
    assert!(
        at_stage["last_reply"]
            .as_str()
            .unwrap()
            .contains("wait for my confirmation"),
        "{at_stage}"
    );

    // A client's mode switch during the gate: the engine stays read-only, the gate keeps
    // the mode for the work.
    c.send(json!({"op":"set_approval_mode","session":s,"mode":"all"}))
        .await
        .unwrap();
    // The list is broadcast as the op is taken, before the engine answers it.
    let held = until_requirement(&mut c, &r, |e| e["gate"]["mode"] == "all").await;
    assert_eq!(held["status"], "confirm");
    assert_eq!(event(&mut c, "approval_mode", &s).await["mode"], "manual");

    let to_plan = c
        .request(
            json!({"op":"requirement_confirm","requirement":r,"lang":"en",
            "text":"mind the cache"}),
        )
        .await
        .unwrap();
    assert_eq!(to_plan["type"], "requirement_confirmed");
    assert_eq!(to_plan["stage"], "plan");
    let planned = event(&mut c, "user_message", &s).await;
    let content = planned["content"].as_str().unwrap();
    assert!(
        content.starts_with("Your understanding is confirmed. Now write an implementation plan"),
        "{content}"
    );
    assert!(content.ends_with("Also: mind the cache"), "{content}");
    let at_plan = until_requirement(&mut c, &r, |e| {
        e["status"] == "confirm" && e["gate"]["stage"] == "plan"
    })
    .await;
    assert_eq!(at_plan["gate"]["answered"], true);

    let go = c
        .request(json!({"op":"requirement_confirm","requirement":r,"lang":"en"}))
        .await
        .unwrap();
    assert_eq!(go["stage"], "go");
    assert_eq!(
        event(&mut c, "approval_mode", &s).await["mode"],
        "full-access",
        "the mode the client chose during the gate"
    );
    let work = event(&mut c, "user_message", &s).await;
    assert_eq!(
        work["content"],
        "The plan is confirmed. Go ahead and carry it out."
    );
    let working = until_requirement(&mut c, &r, |e| e["status"] == "review").await;
    assert!(working["gate"].is_null(), "{working}");

    let again = c
        .request(json!({"op":"requirement_confirm","requirement":r}))
        .await
        .unwrap();
    assert_eq!(again["type"], "error");
    assert_eq!(
        again["message"],
        format!("{r} has no start gate to confirm")
    );
}

#[tokio::test]
async fn ops_out_of_order_are_refused_and_change_nothing() {
    let env = TestHome::new();
    let cwd = seed(&env);
    let daemon = env.daemon().await;
    let mut c = daemon.client().await.unwrap();
    let s = c.start_session(std::path::Path::new(&cwd)).await.unwrap();
    let r = create(&mut c, "tidy the logs").await;
    let other = create(&mut c, "rename the flag").await;

    let bad = [
        (
            json!({"op":"requirement_confirm","requirement":r}),
            format!("{r} has no start gate to confirm"),
        ),
        (
            json!({"op":"requirement_begin","requirement":r,"session":s,"lang":"fr"}),
            "lang must be zh or en".to_string(),
        ),
        (
            json!({"op":"requirement_begin","requirement":r,"session":s,"mode":"yolo"}),
            "unknown mode \"yolo\" (expected ask, plan, auto, edits or all)".to_string(),
        ),
        (
            json!({"op":"requirement_begin","requirement":"R-9","session":s}),
            "unknown requirement R-9".to_string(),
        ),
        (
            json!({"op":"requirement_begin","requirement":r,"session":"nope"}),
            "unknown session nope".to_string(),
        ),
    ];
    for (op, message) in bad {
        let reply = c.request(op.clone()).await.unwrap();
        assert_eq!(reply["type"], "error", "{op}");
        assert_eq!(reply["message"], message, "{op}");
    }
    let list = c.request(json!({"op":"requirement_list"})).await.unwrap();
    assert!(find(&list, &r)["gate"].is_null());
    assert_eq!(find(&list, &r)["state"], "idea", "nothing was linked");

    // Default language and mode: zh, auto.
    c.request(json!({"op":"requirement_begin","requirement":r,"session":s}))
        .await
        .unwrap();
    let asked = event(&mut c, "user_message", &s).await;
    assert!(
        asked["content"]
            .as_str()
            .unwrap()
            .starts_with("需求 R-1：\ntidy the logs"),
        "{asked}"
    );
    let gated = until_requirement(&mut c, &r, |e| e["status"] == "confirm").await;
    assert_eq!(gated["gate"]["mode"], "auto");
    assert_eq!(gated["gate"]["plan"], false);

    // A reply to the latest session needs words (a new session would not).
    let empty = c
        .request(json!({"op":"requirement_reply","requirement":r,"text":" "}))
        .await
        .unwrap();
    assert_eq!(empty["type"], "error");
    assert_eq!(
        empty["message"],
        "requirement_reply: text must not be empty"
    );

    // The user answers in the session instead: it runs, and confirming waits for it.
    let replied = c
        .request(json!({"op":"requirement_reply","requirement":r,"text":"sleep 3000"}))
        .await
        .unwrap();
    assert_eq!(replied["type"], "requirement_replied");
    assert_eq!(replied["session"], s);
    let running = event(&mut c, "user_message", &s).await;
    assert_eq!(running["content"], "sleep 3000");
    let busy = c
        .request(json!({"op":"requirement_confirm","requirement":r}))
        .await
        .unwrap();
    assert_eq!(
        busy["message"],
        format!("{r}: its session is still working; confirm once it has stopped")
    );
    let on_busy = c
        .request(json!({"op":"requirement_begin","requirement":other,"session":s}))
        .await
        .unwrap();
    assert_eq!(
        on_busy["message"],
        format!("session {s} is running a turn: wait for it to end or interrupt it first")
    );
    let revised = until_requirement(&mut c, &r, |e| e["status"] == "confirm").await;
    assert_eq!(revised["gate"]["stage"], "understand", "the gate stays");
    let list = c.request(json!({"op":"requirement_list"})).await.unwrap();
    assert_eq!(find(&list, &other)["state"], "idea");

    // Done by hand: the gate goes with it.
    c.request(json!({"op":"requirement_update","requirement":r,"state":"done"}))
        .await
        .unwrap();
    let done = until_requirement(&mut c, &r, |e| e["state"] == "done").await;
    assert!(done["gate"].is_null());
}

#[tokio::test]
async fn the_gate_survives_a_kill_and_its_session_restarts_read_only() {
    let env = TestHome::new();
    let cwd = seed(&env);
    let mut daemon = env.daemon().await;
    let mut c = daemon.client().await.unwrap();
    let s = c.start_session(std::path::Path::new(&cwd)).await.unwrap();
    let r = create(&mut c, "cut the release").await;
    c.request(json!({"op":"requirement_begin","requirement":r,"session":s,"mode":"all"}))
        .await
        .unwrap();
    until_requirement(&mut c, &r, |e| e["status"] == "confirm").await;
    daemon.kill9_and_wait().await.unwrap();

    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let list = c.connect_batch.last().unwrap().clone();
    assert_eq!(
        find(&list, &r)["gate"],
        json!({"session":s,"stage":"understand","plan":false,"mode":"all","answered":true})
    );
    // The reply reopens the closed session: its engine starts read-only.
    let replied = c
        .request(json!({"op":"requirement_reply","requirement":r,"text":"and the notes"}))
        .await
        .unwrap();
    assert_eq!(replied["session"], s);
    assert_eq!(event(&mut c, "approval_mode", &s).await["mode"], "manual");
    until_requirement(&mut c, &r, |e| e["status"] == "confirm").await;
    let go = c
        .request(json!({"op":"requirement_confirm","requirement":r}))
        .await
        .unwrap();
    assert_eq!(go["stage"], "go");
    assert_eq!(
        event(&mut c, "approval_mode", &s).await["mode"],
        "full-access"
    );
    let work = event(&mut c, "user_message", &s).await;
    assert_eq!(work["content"], "你的理解已确认，请开始完成这项工作。");
}

#[tokio::test]
async fn a_reply_with_no_session_starts_one_behind_the_gate() {
    let env = TestHome::new();
    let cwd = seed(&env);
    let daemon = env.daemon().await;
    let mut c = daemon.client().await.unwrap();
    let r = create(&mut c, "write the docs").await;
    let replied = c
        .request(
            json!({"op":"requirement_reply","requirement":r,"text":"start with the API",
            "plan":true,"mode":"edits","lang":"en"}),
        )
        .await
        .unwrap();
    assert_eq!(replied["type"], "requirement_replied", "{replied}");
    let s = replied["session"].as_str().unwrap().to_string();
    assert_eq!(event(&mut c, "approval_mode", &s).await["mode"], "manual");
    let asked = event(&mut c, "user_message", &s).await;
    let content = asked["content"].as_str().unwrap();
    assert!(
        content.starts_with("Requirement R-1:\nwrite the docs"),
        "{content}"
    );
    assert!(content.contains("Also: start with the API"), "{content}");
    let gated = until_requirement(&mut c, &r, |e| e["status"] == "confirm").await;
    assert_eq!(gated["sessions"], json!([s]));
    assert_eq!(gated["gate"]["plan"], true);
    let sessions = c.request(json!({"op":"session_list"})).await.unwrap();
    let row = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["session"] == s)
        .cloned()
        .unwrap();
    assert_eq!(row["cwd"], cwd, "the project's main directory");
    assert_eq!(row["engine"], "jucode");

    // No session, no project: there is nowhere to start one.
    let loose = c
        .request(json!({"op":"requirement_create","text":"somewhere","project":null}))
        .await
        .unwrap();
    let loose = loose["requirement"].as_str().unwrap().to_string();
    let nowhere = c
        .request(json!({"op":"requirement_reply","requirement":loose,"text":"go"}))
        .await
        .unwrap();
    assert_eq!(
        nowhere["message"],
        format!("{loose} has no session and no project directory to start one in: give cwd")
    );
}
