//! Timers, questions and reports on the in-process harness: the agent tools are called
//! through the seat the hub hands an agent's engine (as the jucode engine calls them), and
//! time moves on the manual clock (`Hub::tick_items` is what the one-second loop runs).
//!
//! The tests that need a message actually delivered to a session wait for the messages part
//! (`enqueue_message`); they are ignored until it lands.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use jucode_testsupport::harness::{Harness, ScriptedSession, TestClient};
use serde_json::{Value, json};

const DAY: u64 = 24 * 3600;

async fn agent_session(h: &Harness, client: &mut TestClient) -> (String, ScriptedSession) {
    let reply = client
        .request(json!({"op":"session_create","agent":"ops"}))
        .await
        .unwrap();
    assert_eq!(reply["type"], "session_created", "{reply}");
    let session = h.engines.next_session().await.unwrap();
    (reply["session"].as_str().unwrap().to_string(), session)
}

async fn call(session: &ScriptedSession, tool: &str, args: Value) -> Result<Value, String> {
    let seat = session
        .spec
        .agent
        .as_ref()
        .expect("an agent session has a seat");
    seat.host.call(tool, args).await
}

fn harness() -> Harness {
    Harness::builder()
        .agent("ops", json!({"name": "ops", "cwd": std::env::temp_dir()}))
        .open()
        .unwrap()
}

#[tokio::test]
async fn an_agent_session_offers_the_timer_question_and_report_tools() {
    let h = harness();
    let mut client = h.connect().await.unwrap();
    let (_, engine) = agent_session(&h, &mut client).await;
    let names: Vec<String> = engine
        .spec
        .agent
        .as_ref()
        .unwrap()
        .host
        .tools()
        .into_iter()
        .map(|t| t.name)
        .collect();
    for tool in ["timer", "question", "report"] {
        assert!(names.iter().any(|n| n == tool), "{tool} in {names:?}");
    }
}

#[tokio::test]
async fn a_question_reaches_every_client_and_closed_ones_stay_listed_seven_days() {
    let h = harness();
    let mut a = h.connect().await.unwrap();
    let mut b = h.connect().await.unwrap();
    let (session, engine) = agent_session(&h, &mut a).await;
    let asked = call(
        &engine,
        "question",
        json!({"title":"Ship it?","body":"CI is green","assumption":"not yet","default":"wait","importance":"high","due_in_seconds":3600}),
    )
    .await
    .unwrap();
    let id = asked["question"].as_str().unwrap().to_string();
    assert_eq!(asked["due_at"], h.now_ms() + 3_600_000);
    let list = b.next_type("questions").await.unwrap();
    assert_eq!(
        list["questions"],
        json!([{"id": id, "agent": "ops", "session": session, "title": "Ship it?",
            "body": "CI is green", "assumption": "not yet", "default": "wait",
            "importance": "high", "due_at": h.now_ms() + 3_600_000, "asked_at": h.now_ms()}])
    );

    let closed = a
        .request(json!({"op":"item_close","kind":"question","item":id,"reason":"asked twice"}))
        .await
        .unwrap();
    assert_eq!(closed, json!({"type":"item_closed","item":id,"id":2}));
    let list = b.next_type("questions").await.unwrap();
    assert_eq!(list["questions"], json!([]));
    assert_eq!(list["closed"][0]["closed_by"], "user");
    assert_eq!(list["closed"][0]["closed_reason"], "asked twice");
    let closed_at = list["closed"][0]["closed_at"].as_u64().unwrap();

    // The deadline of a closed question sends nothing, and the list keeps it 7 days.
    h.advance(Duration::from_secs(7 * DAY - 1));
    h.hub.tick_items();
    let list = a.request(json!({"op":"question_list"})).await.unwrap();
    assert_eq!(list["closed"][0]["closed_at"], closed_at);
    h.advance(Duration::from_secs(1));
    let list = a.request(json!({"op":"question_list"})).await.unwrap();
    assert_eq!(list["closed"], json!([]));
    // It can still be reopened, now without its passed deadline.
    let reopened = a
        .request(json!({"op":"item_reopen","kind":"question","item":id}))
        .await
        .unwrap();
    assert_eq!(reopened["type"], "item_reopened");
    let list = a.request(json!({"op":"question_list"})).await.unwrap();
    assert_eq!(list["questions"][0]["id"], id.as_str());
    assert_eq!(list["questions"][0]["due_at"], Value::Null);
}

#[tokio::test]
async fn a_report_is_posted_to_every_client_and_listed_until_read() {
    let h = harness();
    let mut a = h.connect().await.unwrap();
    let mut b = h.connect().await.unwrap();
    let (session, engine) = agent_session(&h, &mut a).await;
    let posted = call(
        &engine,
        "report",
        json!({"title":"Night run","body":"all green"}),
    )
    .await
    .unwrap();
    let id = posted["report"].as_str().unwrap().to_string();
    let report = json!({"id": id, "agent": "ops", "session": session, "title": "Night run",
        "body": "all green", "at": h.now_ms(), "read": false});
    for client in [&mut a, &mut b] {
        let frame = client.next_type("report_posted").await.unwrap();
        assert_eq!(frame, json!({"type":"report_posted","report":report}));
    }
    let read = a
        .request(json!({"op":"report_read","report":id}))
        .await
        .unwrap();
    assert_eq!(read["type"], "report_read");
    assert_eq!(
        b.next_type("report_read").await.unwrap(),
        json!({"type":"report_read","report":id})
    );
    let list = b.request(json!({"op":"report_list"})).await.unwrap();
    assert_eq!(list["reports"][0]["read"], true);
}

#[tokio::test]
async fn a_timer_set_through_the_seat_is_listed_and_cancelled() {
    let h = harness();
    let mut a = h.connect().await.unwrap();
    let (session, engine) = agent_session(&h, &mut a).await;
    let set = call(
        &engine,
        "timer",
        json!({"action":"set","in_seconds":600,"body":"check the deploy"}),
    )
    .await
    .unwrap();
    let id = set["timer"].as_str().unwrap().to_string();
    let err = call(
        &engine,
        "timer",
        json!({"action":"set","in_seconds":0,"body":"b"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err, "timer: in_seconds must be at least 1");
    let list = a.request(json!({"op":"timer_list"})).await.unwrap();
    assert_eq!(
        list["timers"],
        json!([{"timer": id, "agent": "ops", "session": session,
            "fire_at": h.now_ms() + 600_000, "body": "check the deploy"}])
    );
    let cancelled = a
        .request(json!({"op":"timer_cancel","timer":id}))
        .await
        .unwrap();
    assert_eq!(cancelled["type"], "timer_cancelled");
    h.advance(Duration::from_secs(601));
    h.hub.tick_items();
    let list = call(&engine, "timer", json!({"action":"list"}))
        .await
        .unwrap();
    assert_eq!(list["timers"], json!([]));
}

#[tokio::test]
async fn a_timer_fires_at_its_time_into_the_session_that_set_it_once() {
    let h = harness();
    let mut a = h.connect().await.unwrap();
    let (_, mut engine) = agent_session(&h, &mut a).await;
    let set = call(
        &engine,
        "timer",
        json!({"action":"set","in_seconds":60,"body":"look again"}),
    )
    .await
    .unwrap();
    let id = set["timer"].as_str().unwrap().to_string();
    h.advance(Duration::from_secs(59));
    h.hub.tick_items();
    h.advance(Duration::from_secs(1));
    h.hub.tick_items();
    let op = engine.op("user_message").await.unwrap();
    let content = op["content"].as_str().unwrap();
    assert!(
        content.starts_with(&format!("[timer {id} fired · m-")),
        "{content}"
    );
    assert!(content.ends_with("\nlook again"), "{content}");
    engine.ready().await.unwrap();
    h.advance(Duration::from_secs(3600));
    h.hub.tick_items();
    let list = a.request(json!({"op":"timer_list"})).await.unwrap();
    assert_eq!(list["timers"], json!([]));
}

#[tokio::test]
async fn a_question_past_its_deadline_sends_the_default_and_an_answer_after_it_is_refused() {
    let h = harness();
    let mut a = h.connect().await.unwrap();
    let (_, mut engine) = agent_session(&h, &mut a).await;
    let asked = call(
        &engine,
        "question",
        json!({"title":"Which region?","default":"eu-west","due_in_seconds":120}),
    )
    .await
    .unwrap();
    let id = asked["question"].as_str().unwrap().to_string();
    h.advance(Duration::from_secs(120));
    h.hub.tick_items();
    let op = engine.op("user_message").await.unwrap();
    let content = op["content"].as_str().unwrap();
    assert!(
        content.ends_with(
            "\nQ: Which region?\nNo answer by the deadline. Go ahead with your default: eu-west"
        ),
        "{content}"
    );
    let err = a
        .request(json!({"op":"question_answer","question":id,"answer":"us-east"}))
        .await
        .unwrap();
    assert_eq!(
        err["message"],
        format!("question {id} was already answered")
    );
}

#[tokio::test]
async fn an_answer_is_delivered_to_the_session_that_asked() {
    let h = harness();
    let mut a = h.connect().await.unwrap();
    let (_, mut engine) = agent_session(&h, &mut a).await;
    let asked = call(&engine, "question", json!({"title":"Go?"}))
        .await
        .unwrap();
    let id = asked["question"].as_str().unwrap().to_string();
    let reply = a
        .request(json!({"op":"question_answer","question":id,"answer":"yes"}))
        .await
        .unwrap();
    assert_eq!(reply["type"], "question_answered");
    let op = engine.op("user_message").await.unwrap();
    assert!(
        op["content"]
            .as_str()
            .unwrap()
            .ends_with("\nQ: Go?\nA: yes"),
        "{op:?}"
    );
}
