//! Dispatch on the real daemon binary with the built-in jucode engine against the fake model
//! server, which scripts both the dispatcher (a message `CALL dispatch {…}` makes it plan) and
//! the tasks' sessions. Every status of a dispatch and of a task is reached; a SIGKILL keeps
//! the dispatch as it was and sends no task twice; bad input is refused and changes nothing.
//!
//! Build first: `cargo build -p jucode-daemon --bins`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

/// Project `p1` at `<root>/app`; returns its directory.
fn seed(env: &TestHome) -> String {
    let cwd = std::fs::canonicalize(env.project("app"))
        .unwrap()
        .display()
        .to_string();
    std::fs::create_dir_all(env.home().join("daemon")).unwrap();
    // p2's directory is gone: a task there cannot be given a session.
    let gone = env.home().join("gone").display().to_string();
    let workspaces = json!({"rev":1,"workspaces":[{"id":"w1","name":"W","projects":[
        {"id":"p1","name":"app","path":cwd},{"id":"p2","name":"gone","path":gone}]}]});
    std::fs::write(
        env.home().join("daemon/workspaces.json"),
        workspaces.to_string(),
    )
    .unwrap();
    cwd
}

/// The dispatcher's scripted message: a plan of `tasks`.
fn plan(tasks: Value) -> String {
    format!("CALL dispatch {}", json!({"action":"plan","tasks":tasks}))
}

fn entry<'a>(frame: &'a Value, id: &str) -> Option<&'a Value> {
    frame["dispatches"]
        .as_array()?
        .iter()
        .find(|d| d["id"] == id)
}

/// What was seen of one dispatch across its broadcasts.
#[derive(Default)]
struct Seen {
    statuses: BTreeSet<String>,
    task_statuses: BTreeSet<String>,
}

/// Reads `dispatches` broadcasts until dispatch `id` satisfies `pred`, noting every status
/// it and its tasks went through; returns the matching entry.
async fn until(c: &mut Client, id: &str, seen: &mut Seen, pred: impl Fn(&Value) -> bool) -> Value {
    let frame = c
        .recv_until(|f| {
            let Some(d) = (f["type"] == "dispatches").then(|| entry(f, id)).flatten() else {
                return false;
            };
            seen.statuses.insert(d["status"].as_str().unwrap().into());
            for t in d["tasks"].as_array().unwrap() {
                seen.task_statuses
                    .insert(t["status"].as_str().unwrap().into());
            }
            pred(d)
        })
        .await
        .unwrap();
    entry(&frame, id).unwrap().clone()
}

/// The text of a chat message (a string, or its text parts joined).
fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// How many turns began on the user's `text`: streamed model requests whose last message is
/// that user message.
fn sent_count(fake: &FakeModel, text: &str) -> usize {
    fake.requests()
        .iter()
        .filter(|(_, body)| body["stream"] == true)
        .filter_map(|(_, body)| body["messages"].as_array()?.last().cloned())
        .filter(|m| m["role"] == "user" && text_of(m).trim() == text)
        .count()
}

async fn start(env: &TestHome, fake: &FakeModel) -> Daemon {
    Daemon::start_builtin(&env.home(), &fake.config("chat"))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_dispatch_sends_its_tasks_follows_them_and_sums_up() {
    let env = TestHome::new();
    let cwd = seed(&env);
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake).await;
    let mut c = daemon.client().await.unwrap();
    let batch: Vec<&Value> = c
        .connect_batch
        .iter()
        .filter(|f| f["type"] == "dispatches")
        .collect();
    assert_eq!(batch, vec![&json!({"type":"dispatches","dispatches":[]})]);

    let text = plan(json!([
        {"title":"greet","project":"p1","text":"hello from task one"},
        {"project":cwd,"engine":"jucode","text":"hello from task two"},
    ]));
    let started = c
        .request(json!({"op":"dispatch_send","text":text,"approval_mode":"auto"}))
        .await
        .unwrap();
    assert_eq!(started["type"], "dispatch_started", "{started}");
    let id = started["dispatch"].as_str().unwrap().to_string();
    let mut seen = Seen::default();
    let done = until(&mut c, &id, &mut seen, |d| d["status"] == "done").await;
    assert_eq!(done["text"], text);
    assert_eq!(done["plan"], false);
    assert_eq!(done["mode"], "auto");
    let tasks = done["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0]["title"], "greet");
    assert_eq!(tasks[1]["title"], "hello from task two");
    for (t, words) in tasks.iter().zip(["one", "two"]) {
        assert_eq!(t["status"], "done", "{t}");
        assert_eq!(t["project"], cwd.as_str());
        assert_eq!(t["engine"], "jucode");
        assert_eq!(t["reply"], format!("user said: hello from task {words}"));
        assert_ne!(t["session"], id.as_str());
    }
    assert_ne!(tasks[0]["session"], tasks[1]["session"]);
    // The dispatcher got the results and answered: its answer is the summary.
    let summary = done["summary"].as_str().unwrap();
    assert!(
        summary.contains("user said: hello from task two"),
        "{summary}"
    );
    for status in ["planning", "running", "done"] {
        assert!(
            seen.statuses.contains(status),
            "{status}: {:?}",
            seen.statuses
        );
    }
    for status in ["sent", "running", "done"] {
        assert!(
            seen.task_statuses.contains(status),
            "{status}: {:?}",
            seen.task_statuses
        );
    }
    assert_eq!(sent_count(&fake, "hello from task one"), 1);
    assert_eq!(sent_count(&fake, "hello from task two"), 1);

    // The reserved agent is never listed; its session is the dispatch.
    let agents = c.request(json!({"op":"agent_list"})).await.unwrap();
    assert_eq!(agents["agents"], json!([]), "{agents}");
    let list = c.request(json!({"op":"dispatch_list"})).await.unwrap();
    assert_eq!(entry(&list, &id).unwrap(), &done);

    // With a requirement, the tasks' sessions are linked to it.
    let made = c
        .request(json!({"op":"requirement_create","text":"say hi","project":"p1"}))
        .await
        .unwrap();
    let r = made["requirement"].as_str().unwrap().to_string();
    let text = plan(json!([{"project":"p1","text":"hi for the requirement"}]));
    let started = c
        .request(json!({"op":"dispatch_send","text":text,"requirement":r}))
        .await
        .unwrap();
    let id = started["dispatch"].as_str().unwrap().to_string();
    let done = until(&mut c, &id, &mut seen, |d| d["status"] == "done").await;
    let list = c.request(json!({"op":"requirement_list"})).await.unwrap();
    let linked = list["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == r.as_str())
        .unwrap();
    assert_eq!(
        linked["sessions"],
        json!([done["tasks"][0]["session"]]),
        "{linked}"
    );
}

#[tokio::test]
async fn a_plan_waits_for_the_user_and_a_task_waits_for_its_approval() {
    let env = TestHome::new();
    seed(&env);
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake).await;
    let mut c = daemon.client().await.unwrap();
    let text = plan(json!([{"title":"list","project":"p1","text":"RUN: echo dispatched"}]));
    let started = c
        .request(json!({"op":"dispatch_send","text":text,"plan":true,"approval_mode":"manual"}))
        .await
        .unwrap();
    let id = started["dispatch"].as_str().unwrap().to_string();
    let mut seen = Seen::default();
    let awaiting = until(&mut c, &id, &mut seen, |d| d["status"] == "awaiting").await;
    assert_eq!(awaiting["tasks"][0]["status"], "planned");
    assert_eq!(awaiting["tasks"][0]["session"], Value::Null);
    // Nothing is sent before the user's go-ahead.
    assert_eq!(sent_count(&fake, "RUN: echo dispatched"), 0);

    let confirmed = c
        .request(json!({"op":"dispatch_confirm","dispatch":id,"approve":true,"note":"go ahead"}))
        .await
        .unwrap();
    assert_eq!(
        confirmed,
        json!({"type":"dispatch_confirmed","dispatch":id,"approve":true,"id":confirmed["id"]})
    );
    // The approval is asked in the task's session (broadcast before the list moves).
    let asked = c
        .recv_until(|f| {
            if let Some(d) = (f["type"] == "dispatches").then(|| entry(f, &id)).flatten() {
                for t in d["tasks"].as_array().unwrap() {
                    seen.task_statuses
                        .insert(t["status"].as_str().unwrap().into());
                }
            }
            f["type"] == "approval_request"
        })
        .await
        .unwrap();
    let session = asked["session"].as_str().unwrap().to_string();
    let waiting = until(&mut c, &id, &mut seen, |d| {
        d["tasks"][0]["status"] == "waiting"
    })
    .await;
    assert_eq!(waiting["status"], "running");
    assert_eq!(waiting["tasks"][0]["session"], session.as_str());
    // Confirming again is refused: the dispatch is no longer awaiting.
    let again = c
        .request(json!({"op":"dispatch_confirm","dispatch":id,"approve":false}))
        .await
        .unwrap();
    assert_eq!(
        again["message"],
        format!(
            "dispatch {id} is running, not awaiting: only a plan waiting for you can be confirmed"
        )
    );
    c.send(json!({"op":"approve","session":session,"call_id":asked["call_id"],"decision":"allow"}))
        .await
        .unwrap();
    let done = until(&mut c, &id, &mut seen, |d| d["status"] == "done").await;
    assert_eq!(done["tasks"][0]["status"], "done");
    assert!(
        done["tasks"][0]["reply"]
            .as_str()
            .unwrap()
            .contains("dispatched"),
        "{done}"
    );
    for status in ["awaiting", "running", "done"] {
        assert!(
            seen.statuses.contains(status),
            "{status}: {:?}",
            seen.statuses
        );
    }
    for status in ["planned", "sent", "waiting", "running", "done"] {
        assert!(
            seen.task_statuses.contains(status),
            "{status}: {:?}",
            seen.task_statuses
        );
    }
    // The note went to the dispatcher.
    assert_eq!(
        sent_count(&fake, "The user approved the plan and adds: go ahead"),
        1
    );
}

#[tokio::test]
async fn a_plan_turned_down_is_cancelled_and_bad_input_changes_nothing() {
    let env = TestHome::new();
    seed(&env);
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake).await;
    let mut c = daemon.client().await.unwrap();

    let errors = [
        (
            json!({"op":"dispatch_send","text":"  "}),
            "dispatch_send: text must not be empty",
        ),
        (
            json!({"op":"dispatch_send","text":"x","approval_mode":"yolo"}),
            "approval_mode must be manual, auto-edit, auto or full-access, not \"yolo\"",
        ),
        (
            json!({"op":"dispatch_send","text":"x","requirement":"R-9"}),
            "unknown requirement R-9",
        ),
        (
            json!({"op":"dispatch_confirm","dispatch":"nope","approve":true}),
            "unknown dispatch nope",
        ),
    ];
    for (op, message) in errors {
        let reply = c.request(op.clone()).await.unwrap();
        assert_eq!(reply["type"], "error", "{op}");
        assert_eq!(reply["message"], message, "{op}");
    }
    let list = c.request(json!({"op":"dispatch_list"})).await.unwrap();
    assert_eq!(list["dispatches"], json!([]));

    // A plan naming an unknown project is a tool error the dispatcher sees; nothing is planned.
    let text = plan(json!([{"project":"p9","text":"x"}]));
    let started = c
        .request(json!({"op":"dispatch_send","text":text,"plan":true}))
        .await
        .unwrap();
    let id = started["dispatch"].as_str().unwrap().to_string();
    let mut seen = Seen::default();
    let done = until(&mut c, &id, &mut seen, |d| d["status"] == "done").await;
    assert_eq!(done["tasks"], json!([]));
    assert!(
        done["summary"]
            .as_str()
            .unwrap()
            .contains("unknown project \\\"p9\\\"")
            || done["summary"]
                .as_str()
                .unwrap()
                .contains("unknown project"),
        "{done}"
    );
    let late = c
        .request(json!({"op":"dispatch_confirm","dispatch":id,"approve":true}))
        .await
        .unwrap();
    assert_eq!(
        late["message"],
        format!(
            "dispatch {id} is done, not awaiting: only a plan waiting for you can be confirmed"
        )
    );

    // The dispatcher may write the summary itself; with no plan, the dispatch is done.
    let text = r#"CALL dispatch {"action":"summary","text":"nothing to dispatch here"}"#;
    let started = c
        .request(json!({"op":"dispatch_send","text":text}))
        .await
        .unwrap();
    let id = started["dispatch"].as_str().unwrap().to_string();
    let done = until(&mut c, &id, &mut seen, |d| d["status"] == "done").await;
    assert_eq!(done["summary"], "nothing to dispatch here");

    let text = plan(json!([{"project":"p1","text":"never sent"}]));
    let started = c
        .request(
            json!({"op":"dispatch_send","text":text,"plan":true,"approval_mode":"full-access"}),
        )
        .await
        .unwrap();
    let id = started["dispatch"].as_str().unwrap().to_string();
    until(&mut c, &id, &mut seen, |d| d["status"] == "awaiting").await;
    let no = c
        .request(json!({"op":"dispatch_confirm","dispatch":id,"approve":false}))
        .await
        .unwrap();
    assert_eq!(no["type"], "dispatch_confirmed");
    let cancelled = until(&mut c, &id, &mut seen, |d| d["status"] == "cancelled").await;
    assert_eq!(cancelled["tasks"][0]["status"], "planned");
    assert_eq!(cancelled["mode"], "full-access");
    assert_eq!(sent_count(&fake, "never sent"), 0);
}

#[tokio::test]
async fn a_failing_dispatcher_fails_the_dispatch() {
    let env = TestHome::new();
    seed(&env);
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake).await;
    let mut c = daemon.client().await.unwrap();
    // More failures than the engine's retries: the dispatcher's turn ends with the error.
    fake.fail_next(3, 500);
    let started = c
        .request(json!({"op":"dispatch_send","text":"anything"}))
        .await
        .unwrap();
    let id = started["dispatch"].as_str().unwrap().to_string();
    let mut seen = Seen::default();
    let failed = until(&mut c, &id, &mut seen, |d| d["status"] == "failed").await;
    assert_eq!(failed["tasks"], json!([]));
    assert!(seen.statuses.contains("planning"));
}

#[tokio::test]
async fn a_task_that_cannot_start_fails_and_the_others_go_on() {
    let env = TestHome::new();
    seed(&env);
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake).await;
    let mut c = daemon.client().await.unwrap();
    // p2's directory is gone: that task fails with the reason; the other runs, and the
    // dispatch is summed up.
    let text = plan(json!([
        {"title":"bad","project":"p2","text":"in the void"},
        {"title":"good","project":"p1","text":"on jucode"},
    ]));
    let started = c
        .request(json!({"op":"dispatch_send","text":text}))
        .await
        .unwrap();
    let id = started["dispatch"].as_str().unwrap().to_string();
    let mut seen = Seen::default();
    let end = until(&mut c, &id, &mut seen, |d| {
        d["status"] == "done" || d["status"] == "failed"
    })
    .await;
    assert_eq!(end["status"], "done", "{end}");
    assert_eq!(end["tasks"][1]["status"], "done", "{end}");
    assert_eq!(end["tasks"][0]["status"], "failed", "{end}");
    assert_eq!(end["tasks"][0]["session"], Value::Null);
    assert!(
        end["tasks"][0]["reply"].as_str().unwrap().contains("gone"),
        "{end}"
    );
    assert!(seen.task_statuses.contains("failed"));
    assert_eq!(sent_count(&fake, "in the void"), 0);
}

#[tokio::test]
async fn a_sigkill_keeps_the_dispatch_and_sends_no_task_twice() {
    let env = TestHome::new();
    seed(&env);
    let fake = FakeModel::start().await.unwrap();
    let mut daemon = start(&env, &fake).await;
    let mut c = daemon.client().await.unwrap();
    let text = plan(json!([
        {"title":"quick","project":"p1","text":"quick one"},
        {"title":"slow","project":"p1","text":"SLEEP 60000 slow one"},
    ]));
    let started = c
        .request(json!({"op":"dispatch_send","text":text}))
        .await
        .unwrap();
    let id = started["dispatch"].as_str().unwrap().to_string();
    let mut seen = Seen::default();
    let before = until(&mut c, &id, &mut seen, |d| {
        d["tasks"][0]["status"] == "done" && d["tasks"][1]["status"] == "running"
    })
    .await;
    // Another dispatch whose dispatcher is still planning when the daemon dies.
    let pondering = c
        .request(json!({"op":"dispatch_send","text":"SLEEP 60000 think long"}))
        .await
        .unwrap();
    let pondering = pondering["dispatch"].as_str().unwrap().to_string();
    until(&mut c, &pondering, &mut seen, |d| d["status"] == "planning").await;
    daemon.kill9_and_wait().await.unwrap();

    let daemon = start(&env, &fake).await;
    let mut c = daemon.client().await.unwrap();
    let list = c
        .connect_batch
        .iter()
        .find(|f| f["type"] == "dispatches")
        .unwrap()
        .clone();
    let after = entry(&list, &id).unwrap();
    assert_eq!(after["status"], "running");
    assert_eq!(after["tasks"], before["tasks"]);
    assert_eq!(sent_count(&fake, "quick one"), 1);
    assert_eq!(sent_count(&fake, "SLEEP 60000 slow one"), 1);
    // The cut planning turn is not asked again: that dispatch failed.
    assert_eq!(entry(&list, &pondering).unwrap()["status"], "failed");
    // (The kill may come before or after its request reached the model.)
    let asked = sent_count(&fake, "SLEEP 60000 think long");
    assert!(asked <= 1, "{asked}");

    // Following resumes: the slow task's session, continued by the user, ends its turn and
    // the dispatch is summed up; still nothing was sent twice.
    let slow = after["tasks"][1]["session"].as_str().unwrap().to_string();
    let opened = c
        .request(json!({"op":"session_open","session":slow}))
        .await
        .unwrap();
    assert_eq!(opened["type"], "session_opened", "{opened}");
    c.send(json!({"op":"user_message","session":slow,"content":"finish up"}))
        .await
        .unwrap();
    let mut seen = Seen::default();
    let done = until(&mut c, &id, &mut seen, |d| d["status"] == "done").await;
    assert_eq!(done["tasks"][1]["status"], "done");
    assert_eq!(done["tasks"][1]["reply"], "user said: finish up");
    assert_eq!(sent_count(&fake, "quick one"), 1);
    assert_eq!(sent_count(&fake, "SLEEP 60000 slow one"), 1);
    assert_eq!(sent_count(&fake, "SLEEP 60000 think long"), asked);
}
