//! The agents' `requirements` tool on the real daemon binary: an agent session on the
//! built-in engine (the fake model server scripts its tool calls) proposes a requirement and
//! its closing; the user decides both with `requirement_proposal`, and the `requirements`
//! broadcasts show each step. The agent records progress on the way.
//!
//! Build first: `cargo build -p jucode-daemon --bins`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

/// Project `p1` at `<root>/app` and agent `ops` in it.
fn seed(env: &TestHome) {
    let cwd = env.project("app");
    std::fs::create_dir_all(env.home().join("daemon")).unwrap();
    let workspaces = json!({"rev":1,"workspaces":[{"id":"w1","name":"W","projects":[
        {"id":"p1","name":"app","path":cwd}]}]});
    std::fs::write(
        env.home().join("daemon/workspaces.json"),
        workspaces.to_string(),
    )
    .unwrap();
    env.agent("ops", &json!({"name": "Ops", "cwd": cwd, "project": "p1"}));
}

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

/// What one agent turn showed: its session, the model's text after the tool's answer, and
/// the last `requirements` broadcast sent during it.
struct Turn {
    session: String,
    said: String,
    list: Value,
}

impl Turn {
    fn requirement(&self, id: &str) -> Value {
        find(&self.list, id)
            .unwrap_or_else(|| panic!("{id} in {}", self.list))
            .clone()
    }
}

/// Sends `ops` a message that makes its model call the tool with `args`; returns once the
/// turn has ended.
async fn agent_calls(c: &mut Client, args: Value) -> Turn {
    let body = format!("CALL requirements {args}");
    let accepted = c
        .request(json!({"op":"message_send","agent":"ops","body":body}))
        .await
        .unwrap();
    assert_eq!(accepted["type"], "message_accepted", "{accepted}");
    let delivered = c.recv_type("message_delivered", None).await.unwrap();
    let session = delivered["session"].as_str().unwrap().to_string();
    let mut text = String::new();
    let mut seen_tool = false;
    let mut list = Value::Null;
    loop {
        let f = c.recv().await.unwrap();
        if f["type"] == "requirements" {
            list = f.clone();
        }
        if f["session"] != session.as_str() {
            continue;
        }
        if f["type"] == "tool_output" {
            seen_tool = true;
        }
        if f["type"] == "assistant_delta" {
            text.push_str(f["delta"].as_str().unwrap_or_default());
        }
        if f["type"] == "status" && f["message"] == "ready" && seen_tool {
            return Turn {
                session,
                said: text,
                list,
            };
        }
    }
}

async fn start(env: &TestHome, fake: &FakeModel) -> Daemon {
    Daemon::start_builtin(&env.home(), &fake.config("chat"))
        .await
        .unwrap()
}

#[tokio::test]
async fn an_agent_proposes_and_the_user_decides_without_the_agent_being_told() {
    let env = TestHome::new();
    seed(&env);
    let fake = FakeModel::start().await.unwrap();
    let daemon = start(&env, &fake).await;
    let mut c = daemon.client().await.unwrap();

    let turn = agent_calls(
        &mut c,
        json!({"action":"propose_create","text":"rotate the logs nightly","reason":"the disk fills"}),
    )
    .await;
    assert!(turn.said.contains("R-1"), "{}", turn.said);
    let proposed = turn.requirement("R-1");
    assert_eq!(proposed["state"], "proposed");
    assert_eq!(proposed["status"], "proposed");
    assert_eq!(proposed["source"], "agent");
    assert_eq!(proposed["project"], "p1");
    assert_eq!(proposed["title"], "rotate the logs nightly");
    assert_eq!(proposed["proposal"]["kind"], "create");
    assert_eq!(proposed["proposal"]["agent"], "ops");
    assert_eq!(proposed["proposal"]["session"], turn.session.as_str());
    assert_eq!(proposed["proposal"]["reason"], "the disk fills");

    let decided = c
        .request(json!({"op":"requirement_proposal","requirement":"R-1","accept":true}))
        .await
        .unwrap();
    assert_eq!(decided["type"], "requirement_proposal_decided", "{decided}");
    assert_eq!(decided["accept"], true);
    let idea = until_requirement(&mut c, "R-1", |r| r["state"] == "idea").await;
    assert!(idea["proposal"].is_null(), "{idea}");

    // The agent records progress, then proposes closing it; the user accepts.
    let turn = agent_calls(
        &mut c,
        json!({"action":"progress","requirement":"R-1","done":["logrotate rule"],"note":"in place"}),
    )
    .await;
    let progressed = turn.requirement("R-1");
    assert_eq!(progressed["progress"]["note"], "in place");
    assert_eq!(progressed["progress"]["done"], json!(["logrotate rule"]));
    assert!(progressed["progress_at"].as_u64().unwrap() > 0);

    let turn = agent_calls(
        &mut c,
        json!({"action":"propose_close","requirement":"R-1","outcome":"done","reason":"rule ships"}),
    )
    .await;
    assert!(turn.said.contains("close"), "{}", turn.said);
    let closing = turn.requirement("R-1");
    assert_eq!(closing["status"], "proposal");
    assert_eq!(closing["proposal"]["kind"], "close");
    assert_eq!(closing["proposal"]["outcome"], "done");
    let decided = c
        .request(json!({"op":"requirement_proposal","requirement":"R-1","accept":true}))
        .await
        .unwrap();
    assert_eq!(decided["type"], "requirement_proposal_decided", "{decided}");
    let done = until_requirement(&mut c, "R-1", |r| r["state"] == "done").await;
    assert!(done["proposal"].is_null(), "{done}");

    // A refused call is an error the model sees, not a crash.
    let turn = agent_calls(
        &mut c,
        json!({"action":"propose_close","requirement":"R-1","outcome":"done"}),
    )
    .await;
    assert!(turn.said.contains("R-1 is done"), "{}", turn.said);

    // Deciding told the agent nothing: the only messages recorded for it are the test's four
    // (a message is recorded before the op that causes it is answered).
    let log = std::fs::read_to_string(env.home().join("daemon/messages.jsonl")).unwrap();
    let bodies: Vec<String> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "message")
        .map(|r| r["body"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(bodies.len(), 4, "{bodies:?}");
    assert!(
        bodies.iter().all(|b| b.starts_with("CALL requirements ")),
        "{bodies:?}"
    );
}
