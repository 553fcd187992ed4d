//! Scheduled tasks across SIGKILL at arbitrary moments, on the real daemon binary. The debug
//! build's test clock runs wall time 60 times as fast (a minute a second), and three tasks
//! fire every minute, so runs fall due throughout every round. After each kill:
//! `schedules.json` parses (never torn), no dedupe key was recorded twice, no message was
//! delivered twice, and a task that moved on since the last kill has the run it was then due
//! for recorded in `messages.jsonl` (a task never moves on without its message). A last clean start
//! delivers every run recorded before the kills, and each exactly once.
//!
//! The default run does a few rounds; `cargo nextest run --run-ignored only` does 50.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use jucode_testsupport::{Daemon, TestHome};
use serde_json::{Value, json};

const START: i64 = 1_798_761_600; // 2027-01-01T00:00:00Z

fn clock(round: usize) -> String {
    // Each round starts ten minutes of wall time after the one before.
    let at = START + i64::try_from(round).unwrap() * 600;
    let t = jiff::Timestamp::from_second(at).unwrap();
    format!("{t}@60")
}

struct Log {
    /// id → (dedupe key, from, at in s).
    messages: HashMap<String, (String, String, i64)>,
    delivered: Vec<String>,
}

fn read_log(home: &Path) -> Log {
    let text = std::fs::read_to_string(home.join("daemon/messages.jsonl")).unwrap_or_default();
    let mut log = Log {
        messages: HashMap::new(),
        delivered: Vec::new(),
    };
    let mut keys = HashSet::new();
    // A torn last line is what a kill may leave: it is skipped, as the daemon does.
    for r in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let id = r["id"].as_str().unwrap().to_string();
        match r["kind"].as_str() {
            Some("message") => {
                let key = r["dedupe_key"].as_str().unwrap().to_string();
                assert!(keys.insert(key.clone()), "dedupe key {key} recorded twice");
                let from = r["from"].as_str().unwrap().to_string();
                log.messages
                    .insert(id, (key, from, r["at"].as_i64().unwrap() / 1000));
            }
            Some("delivered") => log.delivered.push(id),
            _ => {}
        }
    }
    let unique: HashSet<&String> = log.delivered.iter().collect();
    assert_eq!(
        unique.len(),
        log.delivered.len(),
        "a message was delivered twice"
    );
    log
}

/// What `schedules.json` said of each task at the last kill: (last_run_at, next_run_at).
type Seen = HashMap<String, (Option<i64>, Option<i64>)>;

/// The checks after a kill.
fn check(env: &TestHome, seen: &mut Seen) -> Log {
    let path = env.home().join("agents/ops/schedules.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let tasks: Vec<Value> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("schedules.json torn: {e}: {text}"));
    let log = read_log(&env.home());
    let keys: HashSet<&str> = log.messages.values().map(|(k, _, _)| k.as_str()).collect();
    for task in &tasks {
        let id = task["id"].as_str().unwrap().to_string();
        let (last, next) = (task["last_run_at"].as_i64(), task["next_run_at"].as_i64());
        let prefix = format!("schedule:{id}:");
        let newest = keys
            .iter()
            .filter_map(|k| k.strip_prefix(&prefix)?.parse::<i64>().ok())
            .max();
        // Every recorded run is passed or (killed before moving on) still due.
        if let (Some(newest), Some(next)) = (newest, next) {
            assert!(
                next >= newest,
                "{id}: next {next} before its recorded run {newest}"
            );
        }
        // The task moved on since the last kill: the run it was due for then is recorded.
        if let Some((before_last, Some(before_next))) = seen.get(&id)
            && *before_last != last
        {
            let key = format!("{prefix}{before_next}");
            assert!(
                keys.contains(key.as_str()),
                "{id} moved past {before_next} without its message"
            );
        }
        seen.insert(id, (last, next));
    }
    log
}

async fn kill_loop(rounds: usize) {
    let env = TestHome::new();
    env.agent("ops", &json!({"name": "ops", "cwd": env.project("ops")}));
    let mut daemon = Daemon::builder(&env.home())
        .env("JUCODE_DEBUG_CLOCK", clock(0))
        .start()
        .await
        .unwrap();
    let mut desk = daemon.client().await.unwrap();
    for n in 0..3 {
        let saved = desk
            .request(json!({"op": "schedule_save", "schedule": {"agent": "ops", "name": format!("t{n}"), "prompt": "tick", "repeat": "cron", "cron": "* * * * *", "new_session": false}}))
            .await
            .unwrap();
        assert_eq!(saved["type"], "schedule_saved", "{saved}");
    }
    drop(desk);
    let mut seen = Seen::new();
    // A fixed pseudo-random sequence of kill points.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 1..=rounds {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let alive = Duration::from_millis(300 + seed % 2200);
        // Not waiting for anything: the kill lands wherever the daemon is.
        tokio::time::sleep(alive).await;
        daemon.kill9_and_wait().await.unwrap();
        check(&env, &mut seen);
        daemon = Daemon::builder(&env.home())
            .env("JUCODE_DEBUG_CLOCK", clock(round))
            .start()
            .await
            .unwrap();
    }
    daemon.kill9_and_wait().await.unwrap();
    let before = check(&env, &mut seen);
    let fired = before.messages.len();
    assert!(fired >= rounds, "only {fired} runs in {rounds} rounds");
    // A last clean start, at real speed: everything recorded is delivered once.
    let undelivered: HashSet<String> = before
        .messages
        .keys()
        .filter(|id| !before.delivered.contains(id))
        .cloned()
        .collect();
    let mut daemon = Daemon::builder(&env.home())
        .env(
            "JUCODE_DEBUG_CLOCK",
            format!(
                "{}@1",
                jiff::Timestamp::from_second(START + i64::try_from(rounds + 1).unwrap() * 600)
                    .unwrap()
            ),
        )
        .start()
        .await
        .unwrap();
    let mut desk = daemon.client().await.unwrap();
    // Read after connecting: what was delivered before is in the file, what comes later
    // arrives as a frame.
    let so_far = read_log(&env.home());
    let mut waiting: HashSet<String> = undelivered
        .iter()
        .filter(|id| !so_far.delivered.contains(id))
        .cloned()
        .collect();
    while !waiting.is_empty() {
        let frame = desk.recv_type("message_delivered", None).await.unwrap();
        waiting.remove(frame["id"].as_str().unwrap());
    }
    drop(desk);
    daemon.stop().await.unwrap();
    let after = check(&env, &mut seen);
    for id in before.messages.keys() {
        assert_eq!(
            after.delivered.iter().filter(|d| *d == id).count(),
            1,
            "message {id}"
        );
    }
}

#[tokio::test]
async fn scheduled_runs_survive_a_few_kills() {
    kill_loop(3).await;
}

#[tokio::test]
#[ignore = "slow: 50 rounds of SIGKILL with schedules falling due"]
async fn scheduled_runs_survive_fifty_kills() {
    kill_loop(50).await;
}
