//! A message handed to a session reaches it exactly once, on the in-process harness: an
//! engine that dies between the hand-over and its `user_message` echo, and a SIGKILL at that
//! instant (the state files put back as they were then, before a restart). The scripted
//! engines keep a durable transcript here, as the jucode engine does, unless a test says not.

use std::path::Path;

use anyhow::{Context, Result, ensure};
use jucode_testsupport::harness::{GUARD, Harness, ScriptedSession, TestClient};
use serde_json::{Value, json};

fn harness(agents: &[&str], durable: bool) -> Result<Harness> {
    let mut b = Harness::builder().durable_transcripts(durable);
    for id in agents {
        b = b.agent(id, json!({"name": id, "cwd": std::env::temp_dir()}));
    }
    b.open()
}

async fn send(client: &mut TestClient, agent: &str, body: &str) -> Result<String> {
    let reply = client
        .request(json!({"op": "message_send", "agent": agent, "body": body}))
        .await?;
    ensure!(reply["type"] == "message_accepted", "{reply}");
    Ok(reply["message"].as_str().context("no id")?.to_string())
}

async fn delivery(engine: &mut ScriptedSession) -> Result<String> {
    let op = engine.op("user_message").await?;
    Ok(op["content"].as_str().context("no content")?.to_string())
}

/// The engine takes `content` as the real one does: saved, then echoed.
async fn take(engine: &ScriptedSession, content: &str) -> Result<()> {
    engine.save_user(content);
    engine
        .emit("user_message", json!({"content": content}))
        .await
}

fn records(home: &Path) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(home.join("daemon/messages.jsonl"))?;
    text.lines()
        .map(|l| serde_json::from_str(l).context("a record"))
        .collect()
}

fn kinds_of(home: &Path, id: &str) -> Result<Vec<String>> {
    Ok(records(home)?
        .iter()
        .filter(|r| r["id"] == id)
        .map(|r| r["kind"].as_str().unwrap_or_default().to_string())
        .collect())
}

/// Waits (bounded by the guard, never a timed assertion) until `id` has a record of `kind`:
/// an engine's exit is checked off the hub's lock.
async fn settled(home: &Path, id: &str, kind: &str) -> Result<()> {
    tokio::time::timeout(GUARD, async {
        loop {
            if kinds_of(home, id).is_ok_and(|k| k.iter().any(|k| k == kind)) {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .with_context(|| format!("{id} never got a {kind} record: {:?}", kinds_of(home, id)))
}

/// The state files as they are now, put back by [`restore`]: a SIGKILL now.
fn snapshot(home: &Path) -> Result<Vec<(std::path::PathBuf, Vec<u8>)>> {
    ["messages.jsonl", "sessions.jsonl"]
        .iter()
        .map(|f| {
            let path = home.join("daemon").join(f);
            Ok((path.clone(), std::fs::read(&path)?))
        })
        .collect()
}

fn restore(files: Vec<(std::path::PathBuf, Vec<u8>)>) -> Result<()> {
    for (path, bytes) in files {
        std::fs::write(path, bytes)?;
    }
    Ok(())
}

#[tokio::test]
async fn an_engine_that_dies_before_its_echo_gets_the_message_again_unless_it_saved_it()
-> Result<()> {
    let h = harness(&["ops"], true)?;
    let mut desktop = h.connect().await?;
    let one = send(&mut desktop, "ops", "one").await?;
    let mut first = h.engines.next_session().await?;
    let session = first.spec.session.clone();
    assert_eq!(delivery(&mut first).await?, "one");
    // Dies with it queued, nothing saved: it goes again, to the same session reopened.
    first.exit(Some("crashed")).await?;
    let mut second = h.engines.next_session().await?;
    assert_eq!(second.spec.session, session);
    ensure!(second.spec.resume, "not resumed");
    assert_eq!(delivery(&mut second).await?, "one");
    take(&second, "one").await?;
    second.ready().await?;
    settled(h.home(), &one, "received").await?;
    assert_eq!(
        kinds_of(h.home(), &one)?,
        ["message", "delivered", "delivered", "received"]
    );

    // Saved and then died before the echo: the session has it; nothing goes again.
    let two = send(&mut desktop, "ops", "two").await?;
    assert_eq!(delivery(&mut second).await?, "two");
    second.save_user("two");
    second.exit(Some("crashed")).await?;
    settled(h.home(), &two, "received").await?;
    h.tick().await?;
    ensure!(
        h.engines.try_next_session().is_none(),
        "the session was reopened for a message it had"
    );
    assert_eq!(h.engines.saved(&session), ["one", "two"]);
    assert_eq!(
        kinds_of(h.home(), &two)?,
        ["message", "delivered", "received"]
    );
    Ok(())
}

/// A SIGKILL after three hand-overs and before any echo: the session that saved its message
/// is not sent it again, the one that did not gets both of its messages again, in order, and
/// a second copy of a text the user sent twice counts as a second message.
#[tokio::test]
async fn a_kill_between_hand_over_and_echo_sends_again_only_what_the_session_lacks() -> Result<()> {
    let h = harness(&["a", "b"], true)?;
    let mut desktop = h.connect().await?;
    send(&mut desktop, "a", "same").await?;
    let mut ea = h.engines.next_session().await?;
    let sa = ea.spec.session.clone();
    assert_eq!(delivery(&mut ea).await?, "same");
    take(&ea, "same").await?;
    ea.ready().await?;
    let again = send(&mut desktop, "a", "same").await?;
    assert_eq!(delivery(&mut ea).await?, "same");
    let seat = ea.spec.agent.clone().context("a seat")?;
    let ping = seat
        .host
        .call("message_agent", json!({"agent": "b", "body": "ping"}))
        .await
        .map_err(anyhow::Error::msg)?;
    let ping = ping["message"].as_str().context("id")?.to_string();
    let mut eb = h.engines.next_session().await?;
    let sb = eb.spec.session.clone();
    let text = delivery(&mut eb).await?;
    assert_eq!(text, format!("[message from agent a · {ping}]\nping"));
    eb.save_user(&text);
    let third = send(&mut desktop, "a", "third").await?;
    assert_eq!(delivery(&mut ea).await?, "third");
    let at_kill = snapshot(h.home())?;
    drop((ea, eb, desktop, seat));

    let h = h.restart_with(|_| restore(at_kill)).await?;
    let mut desktop = h.connect().await?;
    assert_eq!(
        kinds_of(h.home(), &ping)?,
        ["message", "delivered", "received"]
    );
    h.tick().await?;
    let mut reopened = h.engines.next_session().await?;
    assert_eq!(reopened.spec.session, sa);
    assert_eq!(delivery(&mut reopened).await?, "same");
    assert_eq!(delivery(&mut reopened).await?, "third");
    ensure!(
        h.engines.try_next_session().is_none(),
        "b was sent it again"
    );
    take(&reopened, "same").await?;
    reopened.ready().await?;
    take(&reopened, "third").await?;
    reopened.ready().await?;
    settled(h.home(), &third, "received").await?;
    settled(h.home(), &again, "received").await?;
    assert_eq!(h.engines.saved(&sa), ["same", "same", "third"]);
    assert_eq!(h.engines.saved(&sb).len(), 1);
    desktop.queued();

    // Everything settled: a kill now and a restart send nothing.
    let at_kill = snapshot(h.home())?;
    drop((reopened, desktop));
    let h = h.restart_with(|_| restore(at_kill)).await?;
    let mut desktop = h.connect().await?;
    for _ in 0..3 {
        h.tick().await?;
    }
    ensure!(
        h.engines.try_next_session().is_none(),
        "an engine was started"
    );
    let delivered: Vec<Value> = desktop
        .queued()
        .into_iter()
        .filter(|f| f["type"] == "message_delivered")
        .collect();
    ensure!(delivered.is_empty(), "{delivered:?}");
    Ok(())
}

/// An engine whose transcript the daemon cannot read: a message handed over and never echoed
/// is recorded unverified and never sent twice.
#[tokio::test]
async fn without_a_transcript_to_check_a_message_is_not_sent_twice() -> Result<()> {
    let h = harness(&["ops"], false)?;
    let mut desktop = h.connect().await?;
    let id = send(&mut desktop, "ops", "once").await?;
    let mut engine = h.engines.next_session().await?;
    assert_eq!(delivery(&mut engine).await?, "once");
    let at_kill = snapshot(h.home())?;
    drop((engine, desktop));
    let h = h.restart_with(|_| restore(at_kill)).await?;
    let _desktop = h.connect().await?;
    for _ in 0..2 {
        h.tick().await?;
    }
    ensure!(h.engines.try_next_session().is_none(), "sent again");
    let last = records(h.home())?.pop().context("a record")?;
    assert_eq!(last["kind"], "unverified");
    assert_eq!(last["id"], json!(id));
    assert_eq!(
        last["reason"],
        "the jucode engine keeps no transcript the daemon can check"
    );
    Ok(())
}

/// The agents list counts a session as running from the hand-over on, not only once its
/// engine echoes the message.
#[tokio::test]
async fn a_delivery_not_yet_echoed_makes_its_session_running() -> Result<()> {
    let h = harness(&["ops"], true)?;
    let mut desktop = h.connect().await?;
    send(&mut desktop, "ops", "work").await?;
    let mut engine = h.engines.next_session().await?;
    let session = engine.spec.session.clone();
    delivery(&mut engine).await?;
    desktop.next_type("message_delivered").await?;
    let agents = desktop.next_type("agents").await?;
    assert_eq!(agents["agents"][0]["busy"], true, "{agents}");
    assert_eq!(agents["agents"][0]["running"], json!([session]));
    let got = desktop
        .request(json!({"op": "agent_get", "agent": "ops"}))
        .await?;
    assert_eq!(got["agent"]["running"], json!([session]), "{got}");
    take(&engine, "work").await?;
    engine.ready().await?;
    let idle = desktop
        .next_matching(|f| f["type"] == "agents" && f["agents"][0]["busy"] == false)
        .await?;
    assert_eq!(idle["agents"][0]["running"], json!([]));
    Ok(())
}

/// The same text typed into the agent's session before a `message_send` of it: a kill
/// between the hand-over and the echo, with the engine holding only the typed copy, sends the
/// message again (counting copies of the text took the typed one for it). Sent again, it is
/// announced once.
#[tokio::test]
async fn a_same_text_typed_before_the_hand_over_is_not_taken_for_the_message() -> Result<()> {
    let h = harness(&["ops"], true)?;
    let mut desktop = h.connect().await?;
    send(&mut desktop, "ops", "first").await?;
    let mut engine = h.engines.next_session().await?;
    let session = engine.spec.session.clone();
    assert_eq!(delivery(&mut engine).await?, "first");
    take(&engine, "first").await?;
    engine.ready().await?;
    let busy = |b: bool| move |f: &Value| f["type"] == "agents" && f["agents"][0]["busy"] == b;
    desktop.next_matching(busy(false)).await?;
    // Typed straight into the session, not a message.
    desktop
        .send(json!({"op": "user_message", "session": session, "content": "same"}))
        .await;
    assert_eq!(delivery(&mut engine).await?, "same");
    take(&engine, "same").await?;
    engine.ready().await?;
    // The hub has seen that turn (the agent busy, then idle) before the message goes.
    desktop.next_matching(busy(true)).await?;
    desktop.next_matching(busy(false)).await?;
    let id = send(&mut desktop, "ops", "same").await?;
    assert_eq!(delivery(&mut engine).await?, "same");
    let at_kill = snapshot(h.home())?;
    drop((engine, desktop));

    let h = h.restart_with(|_| restore(at_kill)).await?;
    let mut desktop = h.connect().await?;
    h.tick().await?;
    let mut reopened = h.engines.next_session().await?;
    assert_eq!(reopened.spec.session, session);
    assert_eq!(delivery(&mut reopened).await?, "same");
    take(&reopened, "same").await?;
    reopened.ready().await?;
    settled(h.home(), &id, "received").await?;
    assert_eq!(h.engines.saved(&session), ["first", "same", "same"]);
    // Its one announcement went out before the kill; the second hand-over is not news.
    let announced: Vec<Value> = desktop
        .queued()
        .into_iter()
        .filter(|f| f["type"] == "message_delivered")
        .collect();
    ensure!(announced.is_empty(), "announced again: {announced:?}");
    Ok(())
}

/// A message an engine dropped is sent again to the reopened session and announced once.
#[tokio::test]
async fn a_message_sent_again_is_announced_once() -> Result<()> {
    let h = harness(&["ops"], true)?;
    let mut desktop = h.connect().await?;
    let id = send(&mut desktop, "ops", "once").await?;
    let mut first = h.engines.next_session().await?;
    assert_eq!(delivery(&mut first).await?, "once");
    first.exit(Some("crashed")).await?;
    let mut second = h.engines.next_session().await?;
    assert_eq!(delivery(&mut second).await?, "once");
    take(&second, "once").await?;
    second.ready().await?;
    settled(h.home(), &id, "received").await?;
    h.tick().await?;
    let announced = desktop
        .queued()
        .into_iter()
        .filter(|f| f["type"] == "message_delivered" && f["id"] == json!(id))
        .count();
    assert_eq!(announced, 1);
    Ok(())
}
