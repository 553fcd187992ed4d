//! Scheduled tasks on the real daemon binary: every op for a local client and a paired
//! device, bad input (a clear error, nothing written), `TZ`, a run that came due while the
//! daemon was stopped delivered once after the restart, and `new_session: false` continuing
//! a Codex and a Claude Code agent's session (the fake engines) live and across a restart.
//! Wall time is moved with the debug build's test clock (`JUCODE_DEBUG_CLOCK`, absent from
//! release builds; the slow test below checks a release build ignores it).
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

fn seed(env: &TestHome) {
    env.agent("ops", &json!({"name": "ops", "cwd": env.project("ops")}));
    env.agent("qa", &json!({"name": "qa", "cwd": env.project("qa")}));
}

fn tasks_file(env: &TestHome, agent: &str) -> std::path::PathBuf {
    env.home().join("agents").join(agent).join("schedules.json")
}

fn weekly() -> Value {
    json!({"agent": "ops", "name": "aicare 工单处理", "prompt": "处理新工单", "repeat": "weekly", "time": "11:00", "days": [5, 1, 3, 1]})
}

async fn save(client: &mut Client, schedule: Value) -> Value {
    client
        .request(json!({"op": "schedule_save", "schedule": schedule}))
        .await
        .unwrap()
}

#[tokio::test]
async fn every_op_works_for_a_local_client_and_a_paired_device() {
    let env = TestHome::new();
    seed(&env);
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();
    for (who, other) in [(&mut desk, "phone"), (&mut phone, "desk")] {
        let saved = save(who, weekly()).await;
        assert_eq!(saved["type"], "schedule_saved", "{other}: {saved}");
        let task = saved["schedule"].clone();
        let id = task["id"].as_str().unwrap().to_string();
        assert!(id.starts_with("sch-") && id.len() == 20, "{id}");
        assert_eq!(task["days"], json!([1, 3, 5]));
        assert_eq!(task["enabled"], true);
        assert_eq!(task["new_session"], true);
        assert_eq!(task["date"], Value::Null);
        assert_eq!(task["last_run_at"], Value::Null);
        assert!(task["next_run_at"].as_u64().unwrap() > task["created_at"].as_u64().unwrap());
        assert!(task.get("cron").is_none());
        let list = who
            .request(json!({"op": "schedule_list", "agent": "ops"}))
            .await
            .unwrap();
        assert!(list["schedules"].as_array().unwrap().contains(&task));
        let none = who
            .request(json!({"op": "schedule_list", "agent": "qa"}))
            .await
            .unwrap();
        assert_eq!(none["schedules"], json!([]));
        // A change of some fields; next_run_at follows, null once disabled.
        let changed = save(
            who,
            json!({"id": id, "repeat": "cron", "cron": "30 9 * * 1-5", "time": ""}),
        )
        .await;
        assert_eq!(changed["schedule"]["days"], json!([]));
        assert_eq!(changed["schedule"]["cron"], "30 9 * * 1-5");
        let off = save(who, json!({"id": id, "enabled": false})).await;
        assert_eq!(off["schedule"]["next_run_at"], Value::Null);
        let started = who
            .request(json!({"op": "schedule_run", "schedule": id}))
            .await
            .unwrap();
        assert_eq!(started["type"], "schedule_started", "{started}");
        assert_eq!(started["schedule"], id.as_str());
        let from = format!("schedule:{id}");
        let delivered = who
            .recv_until(|f| f["type"] == "message_delivered" && f["from"] == from.as_str())
            .await
            .unwrap();
        assert_eq!(delivered["agent"], "ops");
        let deleted = who
            .request(json!({"op": "schedule_delete", "schedule": id}))
            .await
            .unwrap();
        assert_eq!(deleted["type"], "schedule_deleted");
        assert_eq!(deleted["schedule"], id.as_str());
        let list = who.request(json!({"op": "schedule_list"})).await.unwrap();
        assert_eq!(list["schedules"], json!([]));
    }
    // Every change reached the other client as the whole list.
    let frame = desk
        .recv_until(|f| {
            f["type"] == "schedules" && f["schedules"].as_array().is_some_and(|l| l.len() == 1)
        })
        .await
        .unwrap();
    assert_eq!(frame["schedules"][0]["agent"], "ops");
    // Delete and run by the request's id alone: the reply echoes it.
    let id = save(&mut desk, weekly()).await["schedule"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    desk.send(json!({"op": "schedule_run", "id": id}))
        .await
        .unwrap();
    let reply = desk.recv_type("schedule_started", None).await.unwrap();
    assert_eq!(
        reply,
        json!({"type": "schedule_started", "schedule": id, "id": id})
    );
    desk.send(json!({"op": "schedule_delete", "id": id}))
        .await
        .unwrap();
    let reply = desk.recv_type("schedule_deleted", None).await.unwrap();
    assert_eq!(
        reply,
        json!({"type": "schedule_deleted", "schedule": id, "id": id})
    );
}

#[tokio::test]
async fn bad_input_gets_a_clear_error_and_writes_nothing() {
    let env = TestHome::new();
    seed(&env);
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let with = |extra: Value| {
        let mut s = weekly();
        for (k, v) in extra.as_object().unwrap() {
            if v.is_null() {
                s.as_object_mut().unwrap().remove(k);
            } else {
                s[k] = v.clone();
            }
        }
        s
    };
    let cases = [
        (
            with(json!({"repeat": "monthly"})),
            "repeat must be once, hourly, daily, weekdays, weekly or cron, not \"monthly\"",
        ),
        (
            with(json!({"time": "25:00"})),
            "time must be a local HH:MM (24-hour), not \"25:00\"",
        ),
        (
            with(json!({"time": "9:00"})),
            "time must be a local HH:MM (24-hour), not \"9:00\"",
        ),
        (
            with(json!({"days": []})),
            "days must be a non-empty list of 0 (Sunday) to 6 (Saturday) for a weekly task",
        ),
        (
            with(json!({"days": [7]})),
            "days must be a non-empty list of 0 (Sunday) to 6 (Saturday) for a weekly task",
        ),
        (
            with(json!({"repeat": "daily"})),
            "days is only for weekly tasks",
        ),
        (
            with(json!({"repeat": "once", "days": null, "date": "2027-02-29"})),
            "date must be a real local day as YYYY-MM-DD, not \"2027-02-29\"",
        ),
        (
            with(json!({"repeat": "once", "days": null})),
            "a new scheduled task needs date",
        ),
        (
            with(json!({"date": "2027-01-01"})),
            "date is only for once tasks",
        ),
        (
            with(json!({"repeat": "cron", "days": null, "time": null, "cron": "61 * * * *"})),
            "cron: minute: \"61\" is not a value from 0 to 59",
        ),
        (with(json!({"agent": "nobody"})), "unknown agent nobody"),
        (
            with(json!({"name": " "})),
            "a scheduled task's name cannot be empty",
        ),
        (
            with(json!({"prompt": null})),
            "a new scheduled task needs prompt",
        ),
        (
            json!({"id": "sch-0000000000000000", "name": "x"}),
            "unknown scheduled task sch-0000000000000000",
        ),
    ];
    for (schedule, message) in cases {
        let reply = save(&mut desk, schedule.clone()).await;
        assert_eq!(reply["type"], "error", "{schedule}");
        assert_eq!(reply["message"], message, "{schedule}");
    }
    assert!(!tasks_file(&env, "ops").exists(), "nothing was written");
    // A good task, then bad changes to it: the file stays as it was.
    let id = save(&mut desk, weekly()).await["schedule"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let before = std::fs::read(tasks_file(&env, "ops")).unwrap();
    for (change, message) in [
        (
            json!({"id": id, "agent": "qa"}),
            "a scheduled task's agent cannot be changed",
        ),
        (
            json!({"id": id, "repeat": "daily", "days": [1]}),
            "days is only for weekly tasks",
        ),
        (
            json!({"id": id, "time": "11:60"}),
            "time must be a local HH:MM (24-hour), not \"11:60\"",
        ),
    ] {
        let reply = save(&mut desk, change).await;
        assert_eq!(reply["message"], message);
    }
    for (op, message) in [
        (
            json!({"op": "schedule_delete", "schedule": "sch-x"}),
            "unknown scheduled task sch-x",
        ),
        (
            json!({"op": "schedule_run", "schedule": "sch-x"}),
            "unknown scheduled task sch-x",
        ),
        (
            json!({"op": "schedule_delete"}),
            "schedule_delete needs schedule (the task's id), or the task's id as id",
        ),
        (
            json!({"op": "schedule_save"}),
            "schedule_save: missing field `schedule`",
        ),
    ] {
        let reply = desk.request(op).await.unwrap();
        assert_eq!(reply["message"], message);
    }
    assert_eq!(std::fs::read(tasks_file(&env, "ops")).unwrap(), before);
}

/// The scheduled messages and deliveries in `messages.jsonl`: (id, dedupe key) and
/// delivered ids.
fn log(home: &Path) -> (Vec<(String, String)>, Vec<String>) {
    let text = std::fs::read_to_string(home.join("daemon/messages.jsonl")).unwrap_or_default();
    let records: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let messages = records
        .iter()
        .filter(|r| r["kind"] == "message")
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                r["dedupe_key"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let delivered = records
        .iter()
        .filter(|r| r["kind"] == "delivered")
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    (messages, delivered)
}

async fn daemon_at(env: &TestHome, clock: &str) -> Daemon {
    Daemon::builder(&env.home())
        .env("TZ", "America/New_York")
        .env("JUCODE_DEBUG_CLOCK", clock)
        .start()
        .await
        .unwrap()
}

#[tokio::test]
async fn with_tz_set_a_run_due_while_stopped_is_delivered_once_after_the_restart() {
    let env = TestHome::new();
    seed(&env);
    // 01:00 EST on the night New York springs forward.
    let mut daemon = daemon_at(&env, "2026-03-08T06:00:00Z").await;
    let mut desk = daemon.client().await.unwrap();
    let task = save(&mut desk, json!({"agent": "ops", "name": "nightly", "prompt": "check the build", "repeat": "daily", "time": "02:30"})).await;
    let id = task["schedule"]["id"].as_str().unwrap().to_string();
    // 02:30 does not exist that night: it runs at 03:30 EDT.
    let due = 1_772_955_000; // 2026-03-08T07:30:00Z
    assert_eq!(task["schedule"]["next_run_at"], due);
    drop(desk);
    daemon.stop().await.unwrap();
    // Started again after the run's time.
    let mut daemon = daemon_at(&env, "2026-03-08T09:00:00Z").await;
    let mut desk = daemon.client().await.unwrap();
    let batch = desk
        .connect_batch
        .iter()
        .find(|f| f["type"] == "schedules")
        .unwrap()
        .clone();
    if batch["schedules"][0]["last_session"].is_null() {
        desk.recv_until(|f| {
            f["type"] == "schedules" && !f["schedules"][0]["last_session"].is_null()
        })
        .await
        .unwrap();
    }
    let list = desk.request(json!({"op": "schedule_list"})).await.unwrap();
    // Moved on to the next 02:30, EDT now.
    assert_eq!(list["schedules"][0]["next_run_at"], due + 24 * 3600 - 3600);
    drop(desk);
    daemon.stop().await.unwrap();
    // And once more: nothing is sent again.
    let mut daemon = daemon_at(&env, "2026-03-08T09:30:00Z").await;
    let mut desk = daemon.client().await.unwrap();
    desk.request(json!({"op": "ping"})).await.unwrap();
    drop(desk);
    daemon.stop().await.unwrap();
    let (messages, delivered) = log(&env.home());
    let key = format!("schedule:{id}:{due}");
    let runs: Vec<_> = messages.iter().filter(|(_, k)| *k == key).collect();
    assert_eq!(runs.len(), 1, "{messages:?}");
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(delivered, vec![runs[0].0.clone()]);
}

#[tokio::test]
async fn a_deleted_agent_takes_its_tasks_with_it() {
    let env = TestHome::new();
    seed(&env);
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    save(&mut desk, weekly()).await;
    save(&mut desk, json!({"agent": "qa", "name": "suite", "prompt": "run it", "repeat": "hourly", "time": "00:05"})).await;
    let deleted = desk
        .request(json!({"op": "agent_delete", "agent": "ops"}))
        .await
        .unwrap();
    assert_eq!(deleted["type"], "agent_deleted");
    let list = desk
        .recv_until(|f| {
            f["type"] == "schedules"
                && f["schedules"]
                    .as_array()
                    .is_some_and(|l| l.len() == 1 && l[0]["agent"] == "qa")
        })
        .await
        .unwrap();
    assert_eq!(list["schedules"][0]["agent"], "qa");
    assert!(!tasks_file(&env, "ops").exists());
}

/// A release build has no test clock: the variable changes nothing. Slow: it builds the
/// release daemon.
#[tokio::test]
#[ignore = "slow: builds the release daemon"]
async fn a_release_build_ignores_the_debug_clock() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "jucode-daemon",
            "-p",
            "jucode-testsupport",
        ])
        .arg("--target-dir")
        .arg(&target)
        .current_dir(&root)
        .status()
        .unwrap();
    assert!(status.success());
    let env = TestHome::new();
    seed(&env);
    let mut daemon = Daemon::builder(&env.home())
        .bin(target.join("release/jucode-daemon"))
        .env("JUCODE_DEBUG_CLOCK", "2040-01-01T00:00:00Z@3600")
        .start()
        .await
        .unwrap();
    let mut desk = daemon.client().await.unwrap();
    let task = save(&mut desk, weekly()).await;
    // Created now, not in 2040 (2_208_988_800).
    let created = task["schedule"]["created_at"].as_u64().unwrap();
    assert!(created < 2_208_988_800, "{created}");
    assert!(
        !daemon
            .logs()
            .iter()
            .any(|l| l.contains("JUCODE_DEBUG_CLOCK"))
    );
    drop(desk);
    daemon.stop().await.unwrap();
}

/// A Codex 0.171.0 recording whose one turn is played `turns` times in one thread, its user
/// text any (`*`): a run's text carries its message id.
fn codex_script(env: &TestHome, recording: &str, turns: u64) -> std::path::PathBuf {
    let recorded = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/engines")
        .join(recording);
    let lines: Vec<Value> = std::fs::read_to_string(recorded)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &Value| l.pointer("/meta/exit_code").is_none())
        .collect();
    let start = lines
        .iter()
        .position(|l| l.pointer("/frame/method") == Some(&json!("turn/start")))
        .unwrap();
    let id = lines[start]["frame"]["id"].clone();
    let mut script = lines[..start].to_vec();
    for n in 0..turns {
        // Each turn/start is the adapter's next request id.
        let next = json!(id.as_u64().unwrap() + n);
        for step in &lines[start..] {
            let mut step = step.clone();
            if step.pointer("/frame/id") == Some(&id) {
                step["frame"]["id"] = next.clone();
            }
            if step.pointer("/frame/method") == Some(&json!("turn/start")) {
                step["frame"]["params"]["input"][0]["text"] = json!("*");
            }
            script.push(step);
        }
    }
    let path = env.root().join(format!("{recording}.{turns}.jsonl"));
    let text: Vec<String> = script.iter().map(Value::to_string).collect();
    std::fs::write(&path, text.join("\n")).unwrap();
    path
}

/// The daemon on `env` with Codex played by the fake on `script`.
async fn codex_daemon(env: &TestHome, script: std::path::PathBuf) -> Daemon {
    let fake = jucode_testsupport::build_bin("fake-codex", "jucode-fake-engines").unwrap();
    Daemon::builder(&env.home())
        .env("CODEX_BIN", &fake)
        .env("FAKE_ENGINE_SCRIPT", script)
        .start()
        .await
        .unwrap()
}

/// Runs task `id` now and waits for its turn to end; returns the session it went to.
async fn run_task(c: &mut Client, id: &str) -> String {
    let started = c
        .request(json!({"op": "schedule_run", "schedule": id}))
        .await
        .unwrap();
    assert_eq!(started["type"], "schedule_started", "{started}");
    let delivered = c.recv_type("message_delivered", None).await.unwrap();
    let session = delivered["session"].as_str().unwrap().to_string();
    let usage = c
        .recv_until(|f| {
            f["session"] == session.as_str() && (f["type"] == "usage" || f["type"] == "error")
        })
        .await
        .unwrap();
    assert_eq!(usage["type"], "usage", "{usage}");
    c.recv_until(|f| {
        f["session"] == session.as_str() && f["type"] == "status" && f["message"] == "ready"
    })
    .await
    .unwrap();
    session
}

/// `new_session: false` on a Codex agent: the second run goes to the session the first run
/// started (its engine still running the same thread), and no second engine starts.
#[tokio::test]
async fn a_codex_agent_task_without_new_session_continues_its_last_session() {
    let env = TestHome::new();
    env.agent(
        "ops",
        &json!({"name": "ops", "cwd": env.project("ops"), "engine": "codex"}),
    );
    let script = codex_script(&env, "codex-0.171.0-interop-resume-first.jsonl", 2);
    let daemon = codex_daemon(&env, script).await;
    let mut c = daemon.client().await.unwrap();
    let task = save(&mut c, json!({"agent": "ops", "name": "sweep", "prompt": "go", "repeat": "daily", "time": "09:00", "new_session": false})).await;
    let id = task["schedule"]["id"].as_str().unwrap().to_string();

    let first = run_task(&mut c, &id).await;
    let list = c.request(json!({"op": "schedule_list"})).await.unwrap();
    assert_eq!(
        list["schedules"][0]["last_session"],
        first.as_str(),
        "{list}"
    );
    // schedule_run's dedupe key is per second.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let second = run_task(&mut c, &id).await;
    assert_eq!(second, first, "the second run started a new session");
    let sessions = c.request(json!({"op": "session_list"})).await.unwrap();
    let ids: Vec<&Value> = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["session"])
        .collect();
    assert_eq!(ids, vec![&json!(first)], "{sessions}");
    // Both runs' turns are the task's usage, in one session row.
    let usage = c
        .request(json!({"op": "schedule_usage", "schedule": id}))
        .await
        .unwrap();
    assert_eq!(usage["totals"]["turns"], 2, "{usage}");
    assert_eq!(usage["sessions"].as_array().unwrap().len(), 1);
}

/// After a restart the task's last session is closed: the next run reopens it (Codex resumes
/// its thread) instead of starting a new one.
#[tokio::test]
async fn a_codex_agent_task_continues_its_last_session_after_a_restart() {
    let env = TestHome::new();
    env.agent(
        "ops",
        &json!({"name": "ops", "cwd": env.project("ops"), "engine": "codex"}),
    );
    let script = codex_script(&env, "codex-0.171.0-interop-resume-first.jsonl", 1);
    let mut daemon = codex_daemon(&env, script).await;
    let mut c = daemon.client().await.unwrap();
    let task = save(&mut c, json!({"agent": "ops", "name": "sweep", "prompt": "go", "repeat": "daily", "time": "09:00", "new_session": false})).await;
    let id = task["schedule"]["id"].as_str().unwrap().to_string();
    let first = run_task(&mut c, &id).await;
    drop(c);
    daemon.stop().await.unwrap();

    let script = codex_script(&env, "codex-0.171.0-interop-resume.jsonl", 1);
    let daemon = codex_daemon(&env, script).await;
    let mut c = daemon.client().await.unwrap();
    let list = c.request(json!({"op": "schedule_list"})).await.unwrap();
    assert_eq!(
        list["schedules"][0]["last_session"],
        first.as_str(),
        "{list}"
    );
    // schedule_run's dedupe key is per second, and a restart can take less.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let second = run_task(&mut c, &id).await;
    assert_eq!(
        second, first,
        "the run after the restart started a new session"
    );
    let usage = c
        .request(json!({"op": "schedule_usage", "schedule": id}))
        .await
        .unwrap();
    assert_eq!(usage["totals"]["turns"], 2, "{usage}");
    assert_eq!(usage["sessions"].as_array().unwrap().len(), 1, "{usage}");
}

/// A Claude Code 2.1.332 recording with its user text any (`*`).
fn claude_script(env: &TestHome, recording: &str) -> std::path::PathBuf {
    let recorded = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/engines")
        .join(recording);
    let text: Vec<String> = std::fs::read_to_string(recorded)
        .unwrap()
        .lines()
        .map(|l| {
            let mut step: Value = serde_json::from_str(l).unwrap();
            if step["dir"] == "in" && step.pointer("/frame/type") == Some(&json!("user")) {
                step["frame"]["message"]["content"] = json!("*");
            }
            step.to_string()
        })
        .collect();
    let path = env.root().join(recording);
    std::fs::write(&path, text.join("\n")).unwrap();
    path
}

/// The same on Claude Code: the run after a restart resumes (`--resume`) the session the first
/// run started.
#[tokio::test]
async fn a_claude_agent_task_continues_its_last_session_after_a_restart() {
    let env = TestHome::new();
    env.agent(
        "ops",
        &json!({"name": "ops", "cwd": env.project("ops"), "engine": "claude"}),
    );
    let fake = jucode_testsupport::build_bin("fake-claude", "jucode-fake-engines").unwrap();
    let start = |env: &TestHome| {
        Daemon::builder(&env.home())
            .env("CLAUDE_BIN", &fake)
            .env("CLAUDE_CONFIG_DIR", env.root().join("claude-config"))
            .env(
                "FAKE_ENGINE_SCRIPT",
                claude_script(env, "claude-code-2.1.332-interop-resume-first.jsonl"),
            )
            .env(
                "FAKE_ENGINE_SCRIPT_RESUME",
                claude_script(env, "claude-code-2.1.332-interop-resume.jsonl"),
            )
            .start()
    };
    let mut daemon = start(&env).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let task = save(&mut c, json!({"agent": "ops", "name": "sweep", "prompt": "go", "repeat": "daily", "time": "09:00", "new_session": false})).await;
    let id = task["schedule"]["id"].as_str().unwrap().to_string();
    let first = run_task(&mut c, &id).await;
    drop(c);
    daemon.stop().await.unwrap();

    let daemon = start(&env).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let second = run_task(&mut c, &id).await;
    assert_eq!(
        second, first,
        "the run after the restart started a new session"
    );
    let usage = c
        .request(json!({"op": "schedule_usage", "schedule": id}))
        .await
        .unwrap();
    assert_eq!(usage["totals"]["turns"], 2, "{usage}");
    assert_eq!(usage["sessions"].as_array().unwrap().len(), 1, "{usage}");
}
