//! SIGKILL in a loop on the real daemon while agents message each other and timers fire.
//! Agent `a` is told (by the fake model's `CALL` script) to message agent `b` or to set a
//! one-second timer; the daemon is killed at a point that moves each round, then started
//! again; a last clean start drains. What every session received is read from the engine's
//! side (its saved conversations, each delivery found by the message id in its header) and
//! compared with what was acknowledged: `message_accepted` replies, and the tool results the
//! model saw for `message_agent` and `timer` set.
//!
//! Build first: `cargo build -p jucode-daemon`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};

use anyhow::{Context, Result, ensure};
use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::{Daemon, TestHome};
use serde_json::{Value, json};

/// What the model saw acknowledged: message ids `message_agent` returned, timer ids `timer`
/// set returned (from the tool results in the recorded requests).
fn acked_by_tools(fake: &FakeModel) -> (HashSet<String>, HashSet<String>) {
    let (mut messages, mut timers) = (HashSet::new(), HashSet::new());
    for (_, body) in fake.requests() {
        for m in body["messages"].as_array().into_iter().flatten() {
            if m["role"] != "tool" {
                continue;
            }
            let Some(out) = m["content"].as_str() else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<Value>(out) else {
                continue;
            };
            if let Some(id) = v["message"].as_str() {
                messages.insert(id.to_string());
            }
            if let Some(id) = v["timer"].as_str() {
                timers.insert(id.to_string());
            }
        }
    }
    (messages, timers)
}

/// Counts, over every received text, those whose header line names `needle`.
fn times_named(held: &HashMap<String, usize>, needle: &str) -> usize {
    held.iter()
        .filter(|(t, _)| t.lines().next().is_some_and(|h| h.contains(needle)))
        .map(|(_, n)| n)
        .sum()
}

fn check(env: &TestHome, fake: &FakeModel, acked: &HashSet<String>) -> Result<Vec<String>> {
    let held = env.saved_user_messages()?;
    let mut missing = Vec::new();
    for body in acked {
        match held.get(body).copied().unwrap_or(0) {
            0 => missing.push(body.clone()),
            1 => {}
            n => anyhow::bail!("{body:?} received {n} times"),
        }
    }
    let (messages, timers) = acked_by_tools(fake);
    for id in messages {
        match times_named(&held, &format!("· {id}]")) {
            0 => missing.push(id),
            1 => {}
            n => anyhow::bail!("message {id} received {n} times"),
        }
    }
    for id in timers {
        match times_named(&held, &format!("timer {id} fired")) {
            0 => missing.push(id),
            1 => {}
            n => anyhow::bail!("timer {id} fired {n} times"),
        }
    }
    // Nothing received twice at all, acknowledged or not.
    for (text, n) in &held {
        ensure!(*n == 1, "{text:?} received {n} times");
    }
    Ok(missing)
}

async fn kill_loop(rounds: usize) -> Result<()> {
    let env = TestHome::new();
    let fake = FakeModel::start().await?;
    for id in ["a", "b"] {
        env.agent(id, &json!({"name": id, "cwd": env.project(id)}));
    }
    let mut acked: HashSet<String> = HashSet::new();
    let mut n = 0usize;
    for round in 0..rounds {
        let mut daemon = Daemon::start_builtin(&env.home(), &fake.config("chat")).await?;
        let mut c = daemon.client().await?;
        for _ in 0..2 {
            n += 1;
            let body = if n.is_multiple_of(2) {
                format!(r#"CALL message_agent {{"agent":"b","body":"relay-{n}"}}"#)
            } else {
                format!(r#"CALL timer {{"action":"set","in_seconds":1,"body":"wake-{n}"}}"#)
            };
            let reply = c
                .request(json!({"op": "message_send", "agent": "a", "body": body}))
                .await?;
            ensure!(reply["type"] == "message_accepted", "{reply}");
            acked.insert(body);
        }
        // Let a moving number of turns begin before the kill.
        for _ in 0..round % 4 {
            if c.recv_until(|f| f["type"] == "user_message").await.is_err() {
                break;
            }
        }
        daemon.kill9_and_wait().await?;
    }
    // A clean start drains: wait, turn by turn, until everything acknowledged is received.
    let mut daemon = Daemon::start_builtin(&env.home(), &fake.config("chat")).await?;
    let mut c = daemon.client().await?;
    let mut missing = check(&env, &fake, &acked)?;
    while !missing.is_empty() {
        c.recv_until(|f| f["type"] == "status" && f["message"] == "ready")
            .await
            .with_context(|| format!("never received: {missing:?}"))?;
        missing = check(&env, &fake, &acked)?;
    }
    daemon.stop().await?;
    ensure!(check(&env, &fake, &acked)?.is_empty());
    // The loop did exercise both: agents' messages and timers were acknowledged.
    let (messages, timers) = acked_by_tools(&fake);
    ensure!(
        !messages.is_empty() && !timers.is_empty(),
        "{messages:?} {timers:?}"
    );
    Ok(())
}

#[tokio::test]
async fn sigkill_while_agents_message_and_timers_fire_loses_and_repeats_nothing() {
    kill_loop(3).await.unwrap();
}

#[tokio::test]
#[ignore = "slow: 50 SIGKILL rounds with agents and timers (cargo nextest run -p jucode-daemon --run-ignored only)"]
async fn sigkill_fifty_times_while_agents_message_and_timers_fire() {
    kill_loop(50).await.unwrap();
}
