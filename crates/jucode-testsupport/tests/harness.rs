//! The in-process harness on what the hub does today: pairing codes expire on clock time,
//! the wrong-code lockout and the closed-actions list end on clock time, and scripted engines
//! see the hub's ops and reach clients with their events. No test here sleeps.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use jucode_hub::PairError;
use jucode_testsupport::CONNECT_BATCH;
use jucode_testsupport::harness::{Harness, TestClient};
use serde_json::{Value, json};

const FIVE_MINUTES: Duration = Duration::from_secs(5 * 60);
const MS: Duration = Duration::from_millis(1);

async fn pairing_code(client: &mut TestClient) -> Result<(String, u64)> {
    let reply = client.request(json!({"op": "pair_start"})).await?;
    ensure!(reply["type"] == "pairing", "pair_start answered {reply}");
    let code = reply["code"].as_str().context("no code")?.to_string();
    let expires_at = reply["expires_at"].as_u64().context("no expires_at")?;
    Ok((code, expires_at))
}

#[tokio::test]
async fn a_pairing_code_expires_after_exactly_five_minutes_of_clock_time() -> Result<()> {
    let h = Harness::start()?;
    let mut desktop = h.connect().await?;

    let (code, expires_at) = pairing_code(&mut desktop).await?;
    assert_eq!(expires_at, h.now_ms() + 300_000);
    h.advance(FIVE_MINUTES - MS);
    let paired = h.hub.pair(&code, "phone").map_err(anyhow::Error::msg)?;
    assert_eq!(paired.name, "phone");
    assert_eq!(paired.token.len(), 64);

    let (code, expires_at) = pairing_code(&mut desktop).await?;
    h.advance(FIVE_MINUTES);
    assert_eq!(h.now_ms(), expires_at);
    assert!(matches!(
        h.hub.pair(&code, "late phone"),
        Err(PairError::WrongCode)
    ));
    Ok(())
}

#[tokio::test]
async fn the_wrong_code_lockout_lifts_one_minute_after_the_failures() -> Result<()> {
    let h = Harness::start()?;
    for _ in 0..5 {
        assert!(matches!(
            h.hub.pair("NOPE1234", "guesser"),
            Err(PairError::WrongCode)
        ));
    }
    assert!(h.hub.pairing_blocked());
    let mut desktop = h.connect().await?;
    let (code, _) = pairing_code(&mut desktop).await?;
    // Even the right code is refused while locked out, and it is not used up by that.
    assert!(matches!(
        h.hub.pair(&code, "phone"),
        Err(PairError::TooManyAttempts)
    ));

    h.advance(Duration::from_secs(60));
    assert!(
        h.hub.pairing_blocked(),
        "a failure exactly a minute old still counts"
    );
    h.advance(MS);
    assert!(!h.hub.pairing_blocked());
    assert!(h.hub.pair(&code, "phone").is_ok());
    Ok(())
}

#[tokio::test]
async fn a_scripted_engine_gets_the_hubs_ops_and_clients_get_its_events() -> Result<()> {
    let h = Harness::start()?;
    let mut desktop = h.connect().await?;
    let kinds: Vec<&str> = desktop
        .connect_batch
        .iter()
        .filter_map(|f| f["type"].as_str())
        .collect();
    assert_eq!(kinds, CONNECT_BATCH);

    let cwd = h.user_home().display().to_string();
    let created = desktop
        .request(json!({"op": "session_create", "cwd": cwd}))
        .await?;
    assert_eq!(created["type"], "session_created", "{created}");
    let session = created["session"]
        .as_str()
        .context("no session")?
        .to_string();

    let mut engine = h.engines.next_session().await?;
    assert_eq!(engine.spec.session, session);
    assert!(!engine.spec.resume);
    // Nobody watches yet: the hub tells the engine to defer instead of asking.
    let attended = engine.next_op().await?;
    assert_eq!(
        Value::Object(attended),
        json!({"op": "set_attended", "attended": false})
    );

    let watching = desktop
        .request(json!({"op": "watch", "session": session}))
        .await?;
    assert_eq!(watching["watching"], true);
    assert_eq!(engine.op("set_attended").await?["attended"], true);

    desktop
        .send(json!({"op": "user_message", "session": session, "content": "hi"}))
        .await;
    let op = engine.op("user_message").await?;
    assert_eq!(op["content"], "hi");

    engine.startup().await?;
    engine
        .emit("assistant_delta", json!({"delta": "hello back"}))
        .await?;
    engine.ready().await?;
    let delta = desktop.next_type("assistant_delta").await?;
    assert_eq!(
        delta,
        json!({"type": "assistant_delta", "delta": "hello back", "session": session})
    );
    desktop
        .next_matching(|f| f["type"] == "status" && f["message"] == "ready")
        .await?;

    engine.exit(Some("scripted crash")).await?;
    let stopped = desktop
        .next_matching(|f| f["type"] == "error" && f["session"] == session.as_str())
        .await?;
    assert_eq!(stopped["message"], "the engine stopped: scripted crash");
    desktop.next_type("session_closed").await?;
    Ok(())
}

#[tokio::test]
async fn a_decided_action_leaves_the_list_after_a_week_of_clock_time() -> Result<()> {
    const WEEK: Duration = Duration::from_secs(7 * 24 * 60 * 60);
    let h = Harness::start()?;
    let mut desktop = h.connect().await?;
    let cwd = h.user_home().display().to_string();
    let created = desktop
        .request(json!({"op": "session_create", "cwd": cwd}))
        .await?;
    let session = created["session"]
        .as_str()
        .context("no session")?
        .to_string();
    let mut engine = h.engines.next_session().await?;
    engine.op("set_attended").await?;

    engine
        .emit(
            "action_deferred",
            json!({"id": "act-1", "call_id": "call-1", "name": "bash", "summary": "rm -rf build"}),
        )
        .await?;
    let listed = desktop
        .next_matching(|f| f["type"] == "actions" && f["actions"][0]["id"] == "act-1")
        .await?;
    assert_eq!(listed["actions"][0]["session_id"], session.as_str());

    desktop
        .send(json!({"op": "decide_action", "session": session, "action": "act-1", "decision": "allow"}))
        .await;
    let decided = engine.op("decide_action").await?;
    assert_eq!(decided["action"], "act-1");
    assert_eq!(decided["decision"], "allow");

    // Still listed as decided just before the week is out, gone at the week.
    let actions_of = |client: &TestClient| -> Value {
        client
            .connect_batch
            .iter()
            .find(|f| f["type"] == "actions")
            .cloned()
            .unwrap_or_default()
    };
    h.advance(WEEK - MS);
    let before = actions_of(&h.connect().await?);
    assert!(before.to_string().contains("act-1"), "{before}");
    h.advance(MS);
    let after = actions_of(&h.connect().await?);
    assert!(!after.to_string().contains("act-1"), "{after}");
    Ok(())
}
