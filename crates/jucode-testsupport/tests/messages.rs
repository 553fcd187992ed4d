//! Messages to agents on the in-process harness: routing, delivery, the run limits, the
//! one-second retry and restarts, all on the manual clock (nothing here sleeps).

use anyhow::{Context, Result, ensure};
use jucode_testsupport::harness::{Harness, ScriptedSession, TestClient};
use serde_json::{Value, json};

fn agent(cwd: &std::path::Path) -> Value {
    json!({"name": "An agent", "cwd": cwd})
}

/// A harness whose home has the agents `ids`, all in the user's home directory.
fn with_agents(ids: &[&str]) -> Result<Harness> {
    let dir = std::env::temp_dir();
    let mut b = Harness::builder();
    for id in ids {
        b = b.agent(id, agent(&dir));
    }
    b.open()
}

async fn send(client: &mut TestClient, msg: Value) -> Result<String> {
    let mut op = msg;
    op["op"] = json!("message_send");
    let reply = client.request(op).await?;
    ensure!(
        reply["type"] == "message_accepted" && reply["duplicate"] == false,
        "message_send answered {reply}"
    );
    Ok(reply["message"].as_str().context("no id")?.to_string())
}

/// The next `user_message` the hub sent this engine: its content, checking it is claimed.
async fn delivery(engine: &mut ScriptedSession) -> Result<String> {
    let op = engine.op("user_message").await?;
    ensure!(
        op.get("claimed") == Some(&json!(true)),
        "not claimed: {op:?}"
    );
    Ok(op["content"].as_str().context("no content")?.to_string())
}

/// The engine starts the turn on `content` and, when `end`, ends it.
async fn turn(engine: &ScriptedSession, content: &str, end: bool) -> Result<()> {
    engine
        .emit("user_message", json!({"content": content}))
        .await?;
    if end {
        engine.ready().await?;
    }
    Ok(())
}

fn records(h: &Harness) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(h.home().join("daemon/messages.jsonl"))?;
    text.lines()
        .map(|l| serde_json::from_str(l).context("a record"))
        .collect()
}

fn no_delivery(h: &Harness, client: &mut TestClient) -> Result<()> {
    ensure!(
        h.engines.try_next_session().is_none(),
        "an engine was started"
    );
    let delivered: Vec<Value> = client
        .queued()
        .into_iter()
        .filter(|f| f["type"] == "message_delivered")
        .collect();
    ensure!(delivered.is_empty(), "delivered: {delivered:?}");
    Ok(())
}

#[tokio::test]
async fn a_user_message_starts_a_session_then_goes_to_the_most_recent_one() -> Result<()> {
    let h = with_agents(&["ops"])?;
    let mut desktop = h.connect().await?;
    let id = send(&mut desktop, json!({"agent": "ops", "body": "hello"})).await?;
    ensure!(id.starts_with("m-"), "{id}");
    let mut engine = h.engines.next_session().await?;
    assert_eq!(
        engine.spec.agent.as_ref().map(|s| s.agent.as_str()),
        Some("ops")
    );
    assert_eq!(delivery(&mut engine).await?, "hello");
    let delivered = desktop.next_type("message_delivered").await?;
    assert_eq!(
        delivered,
        json!({"type": "message_delivered", "id": id, "agent": "ops", "from": "user",
               "session": engine.spec.session})
    );

    // Busy or not, the next user message goes to the same session.
    turn(&engine, "hello", true).await?;
    let second = send(&mut desktop, json!({"agent": "ops", "body": "and this"})).await?;
    assert_eq!(delivery(&mut engine).await?, "and this");
    let delivered = desktop.next_type("message_delivered").await?;
    assert_eq!(delivered["id"], json!(second));
    assert_eq!(delivered["session"], json!(engine.spec.session));
    ensure!(h.engines.try_next_session().is_none(), "a second session");

    // new_session always starts one.
    send(
        &mut desktop,
        json!({"agent": "ops", "body": "fresh", "new_session": true}),
    )
    .await?;
    let mut fresh = h.engines.next_session().await?;
    assert_ne!(fresh.spec.session, engine.spec.session);
    assert_eq!(delivery(&mut fresh).await?, "fresh");
    Ok(())
}

#[tokio::test]
async fn bad_messages_get_clear_errors_and_record_nothing() -> Result<()> {
    let h = with_agents(&["ops"])?;
    let mut desktop = h.connect().await?;
    let cases = [
        (json!({"agent": "nope", "body": "hi"}), "unknown agent nope"),
        (
            json!({"agent": "ops", "body": "  "}),
            "a message needs a body",
        ),
        (
            json!({"agent": "ops"}),
            "message_send: missing field `body`",
        ),
        (
            json!({"agent": "ops", "body": "x".repeat(256 * 1024 + 1)}),
            "message_send: body is longer than 262144 bytes",
        ),
    ];
    for (mut op, want) in cases {
        op["op"] = json!("message_send");
        let reply = desktop.request(op).await?;
        assert_eq!(reply["type"], "error");
        assert_eq!(reply["message"], want);
    }
    assert_eq!(records(&h)?, Vec::<Value>::new());
    Ok(())
}

#[tokio::test]
async fn a_dedupe_key_seen_before_sends_nothing() -> Result<()> {
    let h = with_agents(&["ops"])?;
    let mut desktop = h.connect().await?;
    let first = send(
        &mut desktop,
        json!({"agent": "ops", "body": "once", "dedupe_key": "k1"}),
    )
    .await?;
    let mut engine = h.engines.next_session().await?;
    assert_eq!(delivery(&mut engine).await?, "once");
    let again = desktop
        .request(json!({"op": "message_send", "agent": "ops", "body": "twice", "dedupe_key": "k1"}))
        .await?;
    assert_eq!(
        again,
        json!({"type": "message_accepted", "message": first, "duplicate": true, "id": again["id"]})
    );
    h.tick().await?;
    ensure!(
        engine.try_op().is_none(),
        "the duplicate reached the engine"
    );
    assert_eq!(records(&h)?.len(), 2, "one message and its delivery");
    Ok(())
}

/// Four runs at once, two per agent; a freed slot is taken at the next tick, in record
/// order among equals.
#[tokio::test]
async fn at_most_four_runs_and_two_per_agent() -> Result<()> {
    let h = with_agents(&["a", "b", "c"])?;
    let mut desktop = h.connect().await?;
    let new = |agent: &str, body: &str| json!({"agent": agent, "body": body, "new_session": true});
    let mut a = Vec::new();
    for body in ["a1", "a2"] {
        send(&mut desktop, new("a", body)).await?;
        a.push(h.engines.next_session().await?);
        desktop.next_type("message_delivered").await?;
    }
    let a3 = send(&mut desktop, new("a", "a3")).await?;
    no_delivery(&h, &mut desktop)?;
    let mut b = Vec::new();
    for body in ["b1", "b2"] {
        send(&mut desktop, new("b", body)).await?;
        b.push(h.engines.next_session().await?);
        desktop.next_type("message_delivered").await?;
    }
    send(&mut desktop, new("c", "c1")).await?;
    h.tick().await?;
    no_delivery(&h, &mut desktop)?;

    // a1's turn starts and ends: one slot frees, and a's third message (recorded first)
    // takes it at the next tick; c still waits.
    turn(&a[0], "a1", true).await?;
    no_delivery(&h, &mut desktop)?;
    h.tick().await?;
    let mut a3_engine = h.engines.next_session().await?;
    assert_eq!(delivery(&mut a3_engine).await?, "a3");
    assert_eq!(
        desktop.next_type("message_delivered").await?["id"],
        json!(a3)
    );
    h.tick().await?;
    no_delivery(&h, &mut desktop)?;

    // b1 ends too: c gets the slot.
    turn(&b[0], "b1", true).await?;
    h.tick().await?;
    let mut c1 = h.engines.next_session().await?;
    assert_eq!(delivery(&mut c1).await?, "c1");
    Ok(())
}

/// A session whose turn ended but that has a delivered message queued is still running:
/// the gap between the two turns does not free a slot.
#[tokio::test]
async fn a_queued_delivery_keeps_its_session_counted_between_turns() -> Result<()> {
    let h = with_agents(&["a", "b"])?;
    let mut desktop = h.connect().await?;
    send(&mut desktop, json!({"agent": "a", "body": "one"})).await?;
    let mut s1 = h.engines.next_session().await?;
    assert_eq!(delivery(&mut s1).await?, "one");
    turn(&s1, "one", false).await?;
    // Queued behind the running turn (the user's most recent session).
    send(&mut desktop, json!({"agent": "a", "body": "two"})).await?;
    assert_eq!(delivery(&mut s1).await?, "two");
    send(
        &mut desktop,
        json!({"agent": "a", "body": "x", "new_session": true}),
    )
    .await?;
    let _s2 = h.engines.next_session().await?;
    // a has two runs; a third new session waits.
    send(
        &mut desktop,
        json!({"agent": "a", "body": "y", "new_session": true}),
    )
    .await?;
    // The first turn ends; "two" has not started: s1 still counts.
    desktop.queued();
    s1.ready().await?;
    h.tick().await?;
    no_delivery(&h, &mut desktop)?;
    // "two" starts and ends: now s1 is idle and "y" gets its slot.
    turn(&s1, "two", true).await?;
    h.tick().await?;
    let mut s3 = h.engines.next_session().await?;
    assert_eq!(delivery(&mut s3).await?, "y");
    Ok(())
}

#[tokio::test]
async fn waiting_messages_from_the_user_go_first() -> Result<()> {
    let h = with_agents(&["a", "b", "c", "d"])?;
    let mut desktop = h.connect().await?;
    let mut busy = Vec::new();
    for agent in ["a", "a", "b", "b"] {
        send(
            &mut desktop,
            json!({"agent": agent, "body": "work", "new_session": true}),
        )
        .await?;
        busy.push(h.engines.next_session().await?);
    }
    desktop.queued();
    // An agent's message to c, then the user's to d: both wait for a slot.
    let seat = busy[0].spec.agent.clone().context("a seat")?;
    let sent = seat
        .host
        .call("message_agent", json!({"agent": "c", "body": "from a"}))
        .await
        .map_err(anyhow::Error::msg)?;
    ensure!(sent["message"].as_str().is_some(), "{sent}");
    send(&mut desktop, json!({"agent": "d", "body": "from you"})).await?;
    no_delivery(&h, &mut desktop)?;

    turn(&busy[2], "work", true).await?;
    h.tick().await?;
    let mut d = h.engines.next_session().await?;
    assert_eq!(d.spec.agent.as_ref().map(|s| s.agent.as_str()), Some("d"));
    assert_eq!(delivery(&mut d).await?, "from you");
    turn(&busy[3], "work", true).await?;
    h.tick().await?;
    let mut c = h.engines.next_session().await?;
    let text = delivery(&mut c).await?;
    let id = sent["message"].as_str().unwrap_or_default();
    assert_eq!(text, format!("[message from agent a · {id}]\nfrom a"));
    Ok(())
}

#[tokio::test]
async fn agents_reply_to_the_session_that_wrote_to_them() -> Result<()> {
    let h = with_agents(&["a", "b"])?;
    let mut desktop = h.connect().await?;
    send(&mut desktop, json!({"agent": "a", "body": "start"})).await?;
    let mut sa = h.engines.next_session().await?;
    delivery(&mut sa).await?;
    let seat_a = sa.spec.agent.clone().context("seat")?;
    let sent = seat_a
        .host
        .call("message_agent", json!({"agent": "b", "body": "question?"}))
        .await
        .map_err(anyhow::Error::msg)?;
    let m = sent["message"].as_str().context("id")?.to_string();
    let mut sb = h.engines.next_session().await?;
    assert_eq!(
        delivery(&mut sb).await?,
        format!("[message from agent a · {m}]\nquestion?")
    );
    let delivered = desktop
        .next_matching(|f| f["type"] == "message_delivered" && f["id"] == json!(m))
        .await?;
    assert_eq!(delivered["from"], "agent:a");
    let seat_b = sb.spec.agent.clone().context("seat")?;
    let reply = seat_b
        .host
        .call(
            "message_agent",
            json!({"agent": "a", "body": "answer", "reply_to": m}),
        )
        .await
        .map_err(anyhow::Error::msg)?;
    let r = reply["message"].as_str().context("id")?;
    assert_eq!(
        delivery(&mut sa).await?,
        format!("[message from agent b · {r}]\nanswer")
    );
    ensure!(h.engines.try_next_session().is_none(), "a new session");

    // Tool errors are the model's to read.
    for (args, want) in [
        (
            json!({"agent": "b", "body": "hi"}),
            "message_agent: you are agent b; a message to yourself is not sent",
        ),
        (
            json!({"agent": "zz", "body": "hi"}),
            "message_agent: unknown agent zz; the other agents are a",
        ),
        (json!({"agent": "a"}), "message_agent: missing field `body`"),
    ] {
        let err = seat_b.host.call("message_agent", args).await.unwrap_err();
        assert_eq!(err, want);
    }
    let tools: Vec<String> = seat_b.host.tools().into_iter().map(|t| t.name).collect();
    ensure!(tools.contains(&"message_agent".to_string()), "{tools:?}");
    Ok(())
}

#[tokio::test]
async fn a_session_that_is_not_the_agents_makes_the_message_undeliverable() -> Result<()> {
    let h = with_agents(&["a", "b"])?;
    let mut desktop = h.connect().await?;
    send(&mut desktop, json!({"agent": "b", "body": "hi"})).await?;
    let sb = h.engines.next_session().await?;
    desktop.next_type("message_delivered").await?;
    let id = send(
        &mut desktop,
        json!({"agent": "a", "body": "misrouted", "session": sb.spec.session}),
    )
    .await?;
    let last = records(&h)?.pop().context("a record")?;
    assert_eq!(last["kind"], "undeliverable");
    assert_eq!(last["id"], json!(id));
    assert_eq!(
        last["reason"],
        json!(format!(
            "session {} is not a session of agent a",
            sb.spec.session
        ))
    );
    no_delivery(&h, &mut desktop)?;
    Ok(())
}

/// A disabled agent's message waits, across a restart too; enabled, it is delivered once at
/// the next tick, and a restart after that delivers nothing again.
#[tokio::test]
async fn a_disabled_agents_message_waits_and_survives_a_restart_once() -> Result<()> {
    let dir = std::env::temp_dir();
    let h = Harness::builder()
        .agent("ops", json!({"name": "Ops", "cwd": dir, "enabled": false}))
        .open()?;
    let mut desktop = h.connect().await?;
    let id = send(&mut desktop, json!({"agent": "ops", "body": "later"})).await?;
    for _ in 0..3 {
        h.tick().await?;
    }
    no_delivery(&h, &mut desktop)?;
    drop(desktop);

    let config = h.home().join("agents/ops/agent.json");
    std::fs::write(&config, json!({"name": "Ops", "cwd": dir}).to_string())?;
    let h = h.restart().await?;
    let mut desktop = h.connect().await?;
    h.tick().await?;
    let mut engine = h.engines.next_session().await?;
    assert_eq!(delivery(&mut engine).await?, "later");
    assert_eq!(
        desktop.next_type("message_delivered").await?["id"],
        json!(id)
    );
    drop(engine);
    drop(desktop);

    let h = h.restart().await?;
    let mut desktop = h.connect().await?;
    for _ in 0..3 {
        h.tick().await?;
    }
    no_delivery(&h, &mut desktop)?;
    let delivered = records(&h)?
        .iter()
        .filter(|r| r["kind"] == "delivered")
        .count();
    assert_eq!(delivered, 1);
    Ok(())
}

/// After a restart a user's message goes to the agent's last session, reopened on its saved
/// conversation; a message for an agent that has gone becomes undeliverable.
#[tokio::test]
async fn after_a_restart_the_last_session_is_reopened_and_gone_agents_refuse() -> Result<()> {
    let h = with_agents(&["ops", "tmp"])?;
    let mut desktop = h.connect().await?;
    send(&mut desktop, json!({"agent": "ops", "body": "first"})).await?;
    let engine = h.engines.next_session().await?;
    let session = engine.spec.session.clone();
    // Its turn keeps ops busy, and tmp's messages wait behind a disabled flag below.
    drop(engine);
    drop(desktop);
    let tmp = h.home().join("agents/tmp/agent.json");
    std::fs::write(
        &tmp,
        json!({"name": "T", "cwd": std::env::temp_dir(), "enabled": false}).to_string(),
    )?;
    let h = h.restart().await?;
    let mut desktop = h.connect().await?;
    let waiting = send(&mut desktop, json!({"agent": "tmp", "body": "lost"})).await?;
    drop(desktop);

    std::fs::remove_dir_all(h.home().join("agents/tmp"))?;
    let h = h.restart().await?;
    let mut desktop = h.connect().await?;
    send(&mut desktop, json!({"agent": "ops", "body": "again"})).await?;
    let mut reopened = h.engines.next_session().await?;
    assert_eq!(reopened.spec.session, session);
    ensure!(reopened.spec.resume, "not resumed");
    assert_eq!(delivery(&mut reopened).await?, "again");

    let reply = desktop
        .request(json!({"op": "message_send", "agent": "tmp", "body": "x"}))
        .await?;
    assert_eq!(reply["message"], "unknown agent tmp");
    let gone = records(&h)?
        .into_iter()
        .find(|r| r["kind"] == "undeliverable")
        .context("no undeliverable record")?;
    assert_eq!(gone["id"], json!(waiting));
    assert_eq!(gone["reason"], "agent tmp was deleted");
    Ok(())
}
