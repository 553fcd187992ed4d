//! Questions across a stop between handing an answer to the agent and recording it: the next
//! start closes the question with what really went out, so a second answer is refused rather
//! than recorded while the agent acts on the first. Delivery is the hub's real
//! `enqueue_message`, whose log the next start reads.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use crate::error::OpError;
use crate::items_tests::{Home, ask, questions_event};
use crate::questions;

#[tokio::test]
async fn an_answer_handed_over_before_a_stop_closes_the_question_at_the_next_start() {
    let home = Home::new();
    let hub = home.open();
    let id = ask(&hub, json!({"title":"Ship it?"})).await;
    // The message is recorded, then the daemon "stops" before the question is answered.
    let err = questions::answer(&mut hub.lock(), &id, "first", |inner, m| {
        hub.enqueue_message(inner, m)?;
        Err(OpError::NotBuilt("the rest of this run".into()))
    })
    .unwrap_err();
    assert!(err.to_string().contains("the rest of this run"), "{err}");
    assert_eq!(questions_event(&hub).0.len(), 1, "still open in this run");
    drop(hub);

    let hub = home.open();
    let (open, closed) = questions_event(&hub);
    assert!(open.is_empty(), "{open:?}");
    assert_eq!(closed[0]["answer"], "first");
    assert_eq!(closed[0]["closed_by"], "user");
    let second = questions::answer(&mut hub.lock(), &id, "second", |inner, m| {
        hub.enqueue_message(inner, m)
    })
    .unwrap_err();
    assert_eq!(
        second.to_string(),
        format!("question {id} was already answered")
    );
}

#[tokio::test]
async fn an_answer_never_handed_over_leaves_the_question_open_for_another() {
    let home = Home::new();
    let hub = home.open();
    let id = ask(&hub, json!({"title":"Ship it?"})).await;
    // Stopped after `answering` was written and before the message was.
    let _ = questions::answer(&mut hub.lock(), &id, "first", |_, _| {
        Err(OpError::NotBuilt("the rest of this run".into()))
    });
    drop(hub);

    let hub = home.open();
    assert_eq!(questions_event(&hub).0.len(), 1);
    questions::answer(&mut hub.lock(), &id, "second", |inner, m| {
        hub.enqueue_message(inner, m)
    })
    .unwrap();
    drop(hub);
    let hub = home.open();
    let (open, closed) = questions_event(&hub);
    assert!(open.is_empty());
    assert_eq!(closed[0]["answer"], "second");
}

#[tokio::test]
async fn a_default_handed_over_before_a_stop_closes_the_question_as_past_its_deadline() {
    let home = Home::new();
    let hub = home.open();
    let id = ask(
        &hub,
        json!({"title":"Which DB?","default":"postgres","due_in_seconds":60}),
    )
    .await;
    home.advance_secs(61);
    questions::deliver_overdue(&mut hub.lock(), home.now(), |inner, m| {
        hub.enqueue_message(inner, m)?;
        Err(OpError::NotBuilt("the rest of this run".into()))
    });
    assert_eq!(questions_event(&hub).0.len(), 1);
    drop(hub);

    let hub = home.open();
    let (open, closed) = questions_event(&hub);
    assert!(open.is_empty(), "{open:?}");
    assert_eq!(closed[0]["closed_by"], "deadline");
    assert_eq!(closed[0]["answer"], "postgres");
    let _ = id;
}
