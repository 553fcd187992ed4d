//! Scheduled tasks on the in-process harness: the hub's own one-second loop on a manual
//! clock, in a chosen time zone, never sleeping. Each expected run is computed here without
//! the daemon's code (each local time's first instant, found by mapping every minute forward;
//! a skipped local time read with the offset before the gap) and checked against what the
//! hub recorded in `messages.jsonl`: one message per run, with the dedupe key
//! `schedule:<id>:<instant>`, recorded at that instant.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::Duration;

use jiff::civil::{Date, DateTime, date};
use jiff::tz::{TimeZone, TimeZoneDatabase};
use jiff::{SignedDuration, Timestamp};
use jucode_testsupport::harness::{Harness, TestClient};
use serde_json::{Value, json};

const MINUTE: SignedDuration = SignedDuration::from_mins(1);

fn zone(name: &str) -> TimeZone {
    TimeZoneDatabase::bundled().get(name).unwrap()
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// A hub with agent `ops`, its clock at `start` in `zone`.
fn harness(start: &str, tz: &str) -> Harness {
    let h = Harness::builder()
        .start_at(ts(start))
        .agent("ops", json!({"name": "ops", "cwd": std::env::temp_dir()}))
        .open()
        .unwrap();
    h.clock.set_time_zone(zone(tz));
    h
}

async fn save(client: &mut TestClient, schedule: Value) -> Value {
    let reply = client
        .request(json!({"op": "schedule_save", "schedule": schedule}))
        .await
        .unwrap();
    assert_eq!(reply["type"], "schedule_saved", "{reply}");
    reply["schedule"].clone()
}

/// Moves wall time to `at` (a second before, then one tick) and waits for the tick.
async fn tick_at(h: &Harness, at: Timestamp) {
    h.clock.set_wall(at - SignedDuration::from_secs(1));
    h.tick().await.unwrap();
}

/// The scheduled messages recorded so far: (dedupe key, recorded at in s, body).
fn recorded(home: &Path) -> Vec<(String, i64, String)> {
    let text = std::fs::read_to_string(home.join("daemon/messages.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "message" && r["from"].as_str().unwrap().starts_with("schedule:"))
        .map(|r| {
            (
                r["dedupe_key"].as_str().unwrap().to_string(),
                r["at"].as_i64().unwrap() / 1000,
                r["body"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn key(id: &str, at: Timestamp) -> String {
    format!("schedule:{id}:{}", at.as_second())
}

/// Local times mapped forward over a window: each local minute's first instant.
struct Forward {
    tz: TimeZone,
    first: HashMap<DateTime, Timestamp>,
}

impl Forward {
    fn new(tz: &TimeZone, from: Timestamp, to: Timestamp) -> Forward {
        let mut first = HashMap::new();
        let mut t = from;
        while t <= to {
            first.entry(t.to_zoned(tz.clone()).datetime()).or_insert(t);
            t += MINUTE;
        }
        Forward {
            tz: tz.clone(),
            first,
        }
    }

    fn instant(&self, civil: DateTime) -> Timestamp {
        if let Some(t) = self.first.get(&civil) {
            return *t;
        }
        let mut before = civil;
        loop {
            before = before.checked_sub(MINUTE).unwrap();
            if let Some(t) = self.first.get(&before) {
                return self.tz.to_offset(*t).to_timestamp(civil).unwrap();
            }
        }
    }

    /// The runs of a rule on the days `from..=to`, after `after`, each once, in order.
    fn runs(
        &self,
        days: (Date, Date),
        after: Timestamp,
        rule: impl Fn(Date) -> Vec<(i8, i8)>,
    ) -> Vec<Timestamp> {
        let mut out = BTreeSet::new();
        let mut day = days.0;
        while day <= days.1 {
            for (h, m) in rule(day) {
                out.insert(self.instant(day.at(h, m, 0, 0)));
            }
            day = day.tomorrow().unwrap();
        }
        out.into_iter().filter(|t| *t > after).collect()
    }
}

fn weekday(d: Date) -> i8 {
    d.weekday().to_sunday_zero_offset()
}

/// Steps a hub through every expected run of the tasks (ids with their runs), and checks the
/// messages recorded are exactly those runs at those instants.
async fn run_through(h: &Harness, tasks: &[(String, Vec<Timestamp>)]) {
    let mut all: BTreeSet<Timestamp> = BTreeSet::new();
    let mut want = BTreeSet::new();
    for (id, runs) in tasks {
        for at in runs {
            all.insert(*at);
            want.insert((key(id, *at), at.as_second()));
        }
    }
    for at in all {
        tick_at(h, at).await;
    }
    let got: Vec<(String, i64)> = recorded(h.home())
        .into_iter()
        .map(|(k, at, _)| (k, at))
        .collect();
    let unique: BTreeSet<(String, i64)> = got.iter().cloned().collect();
    assert_eq!(got.len(), unique.len(), "a run was recorded twice");
    let missing: Vec<_> = want.difference(&unique).take(5).collect();
    let extra: Vec<_> = unique.difference(&want).take(5).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}, unexpected {extra:?}"
    );
}

/// Every repeat kind over 2026 in one zone. `gap` and `fold` are local times the zone's
/// changes skip and repeat (any times for a zone without changes); `once` is a change day.
async fn a_year_in(tz_name: &str, gap: (i8, i8), fold: (i8, i8), once: Date) {
    let tz = zone(tz_name);
    let start = ts("2025-12-31T00:00:00Z");
    let end = ts("2027-01-01T00:00:00Z");
    let h = harness("2025-12-31T00:00:00Z", tz_name);
    let mut client = h.connect().await.unwrap();
    let hm = |(h, m): (i8, i8)| format!("{h:02}:{m:02}");
    let base = json!({"agent": "ops", "name": "year", "prompt": "go", "new_session": false});
    let with = |extra: Value| {
        let mut s = base.clone();
        s.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        s
    };
    let once_t = save(
        &mut client,
        with(json!({"repeat": "once", "time": hm(gap), "date": once.to_string()})),
    )
    .await;
    let daily = save(
        &mut client,
        with(json!({"repeat": "daily", "time": hm(gap)})),
    )
    .await;
    let weekdays = save(
        &mut client,
        with(json!({"repeat": "weekdays", "time": hm(fold)})),
    )
    .await;
    let weekly = save(
        &mut client,
        with(json!({"repeat": "weekly", "time": hm(fold), "days": [0, 3]})),
    )
    .await;
    let cron = save(
        &mut client,
        with(json!({"repeat": "cron", "cron": "*/30 1-3 * * 0"})),
    )
    .await;
    drop(client);
    let fwd = Forward::new(
        &tz,
        start - SignedDuration::from_hours(48),
        end + SignedDuration::from_hours(48),
    );
    let days = (date(2025, 12, 30), date(2027, 1, 1));
    let id = |t: &Value| t["id"].as_str().unwrap().to_string();
    let upto = |runs: Vec<Timestamp>| runs.into_iter().filter(|t| *t <= end).collect::<Vec<_>>();
    let tasks = vec![
        (
            id(&once_t),
            upto(fwd.runs(days, start, |d| if d == once { vec![gap] } else { vec![] })),
        ),
        (id(&daily), upto(fwd.runs(days, start, |_| vec![gap]))),
        (
            id(&weekdays),
            upto(fwd.runs(days, start, |d| {
                if (1..=5).contains(&weekday(d)) {
                    vec![fold]
                } else {
                    vec![]
                }
            })),
        ),
        (
            id(&weekly),
            upto(fwd.runs(days, start, |d| {
                if [0, 3].contains(&weekday(d)) {
                    vec![fold]
                } else {
                    vec![]
                }
            })),
        ),
        (
            id(&cron),
            upto(fwd.runs(days, start, |d| {
                if weekday(d) != 0 {
                    return vec![];
                }
                (1..=3).flat_map(|h| [(h, 0), (h, 30)]).collect()
            })),
        ),
    ];
    assert_eq!(tasks[0].1.len(), 1);
    assert!(tasks[1].1.len() >= 365);
    run_through(&h, &tasks).await;
    // The once task is spent: its next run is null; the daily one waits for 2027.
    let mut client = h.connect().await.unwrap();
    let list = client
        .request(json!({"op": "schedule_list"}))
        .await
        .unwrap();
    let find = |id: &str| {
        list["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(find(&tasks[0].0)["next_run_at"], Value::Null);
    assert!(find(&tasks[1].0)["next_run_at"].as_i64().unwrap() > end.as_second());
}

#[tokio::test]
async fn a_year_in_new_york() {
    a_year_in("America/New_York", (2, 30), (1, 30), date(2026, 3, 8)).await;
}

#[tokio::test]
async fn a_year_in_berlin() {
    a_year_in("Europe/Berlin", (2, 30), (2, 30), date(2026, 10, 25)).await;
}

#[tokio::test]
async fn a_year_in_lord_howe() {
    a_year_in("Australia/Lord_Howe", (2, 15), (1, 45), date(2026, 10, 4)).await;
}

#[tokio::test]
async fn a_year_in_kathmandu() {
    a_year_in("Asia/Kathmandu", (2, 30), (1, 30), date(2026, 3, 8)).await;
}

/// Hourly across both changes of a zone: two days around each, hour by hour.
async fn hourly_across_the_changes(tz_name: &str, minute: i8, changes: [(Date, &str); 2]) {
    let tz = zone(tz_name);
    for (day, from) in changes {
        let from = ts(from);
        let h = harness(&from.to_string(), tz_name);
        let mut client = h.connect().await.unwrap();
        let task = save(
            &mut client,
            json!({"agent": "ops", "name": "hourly", "prompt": "tick", "repeat": "hourly", "time": format!("00:{minute:02}"), "new_session": false}),
        )
        .await;
        drop(client);
        let to = from + SignedDuration::from_hours(48);
        let fwd = Forward::new(
            &tz,
            from - SignedDuration::from_hours(48),
            to + SignedDuration::from_hours(48),
        );
        let days = (day.yesterday().unwrap(), day.tomorrow().unwrap());
        let runs: Vec<Timestamp> = fwd
            .runs(days, from, |_| (0..24).map(|hh| (hh, minute)).collect())
            .into_iter()
            .filter(|t| *t <= to)
            .collect();
        // A day of 23 or 25 local hours still has one run per hour that exists, the
        // repeated hour once.
        assert!((45..=48).contains(&runs.len()), "{runs:?}");
        run_through(&h, &[(task["id"].as_str().unwrap().to_string(), runs)]).await;
    }
}

#[tokio::test]
async fn hourly_across_the_changes_of_every_zone() {
    hourly_across_the_changes(
        "America/New_York",
        30,
        [
            (date(2026, 3, 8), "2026-03-07T05:00:00Z"),
            (date(2026, 11, 1), "2026-10-31T04:00:00Z"),
        ],
    )
    .await;
    hourly_across_the_changes(
        "Europe/Berlin",
        30,
        [
            (date(2026, 3, 29), "2026-03-28T00:00:00Z"),
            (date(2026, 10, 25), "2026-10-24T00:00:00Z"),
        ],
    )
    .await;
    hourly_across_the_changes(
        "Australia/Lord_Howe",
        15,
        [
            (date(2026, 4, 5), "2026-04-03T14:00:00Z"),
            (date(2026, 10, 4), "2026-10-02T14:00:00Z"),
        ],
    )
    .await;
    hourly_across_the_changes(
        "Asia/Kathmandu",
        45,
        [
            (date(2026, 6, 1), "2026-05-31T00:00:00Z"),
            (date(2026, 12, 1), "2026-11-30T00:00:00Z"),
        ],
    )
    .await;
}

#[tokio::test]
async fn a_machine_asleep_across_a_change_fires_once_on_waking_then_keeps_local_time() {
    // Saturday noon before New York springs forward; asleep until Monday noon.
    let h = harness("2026-03-07T17:00:00Z", "America/New_York");
    let mut client = h.connect().await.unwrap();
    let task = save(&mut client, json!({"agent": "ops", "name": "nightly", "prompt": "check the build", "repeat": "daily", "time": "02:30"})).await;
    let id = task["id"].as_str().unwrap().to_string();
    assert_eq!(task["next_run_at"], ts("2026-03-08T07:30:00Z").as_second());
    // Asleep: wall and monotonic time jump two days in one step.
    let wake = ts("2026-03-09T16:00:00Z");
    h.advance(Duration::from_secs(
        u64::try_from(wake.duration_since(ts("2026-03-07T17:00:00Z")).as_secs()).unwrap() - 1,
    ));
    h.tick().await.unwrap();
    // Missed twice (Sunday 03:30 EDT and Monday 02:30 EDT), fired once, keyed by the first.
    let got = recorded(h.home());
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, key(&id, ts("2026-03-08T07:30:00Z")));
    assert_eq!(got[0].1, wake.as_second());
    assert_eq!(got[0].2, "定时任务「nightly」：\ncheck the build");
    let list = client
        .request(json!({"op": "schedule_list"}))
        .await
        .unwrap();
    let t = &list["schedules"][0];
    assert_eq!(t["last_run_at"], wake.as_second());
    assert_eq!(t["next_run_at"], ts("2026-03-10T06:30:00Z").as_second());
    // A few more ticks fire nothing more.
    for _ in 0..3 {
        h.tick().await.unwrap();
    }
    assert_eq!(recorded(h.home()).len(), 1);
}

#[tokio::test]
async fn a_time_zone_change_of_the_machine_moves_runs_to_the_new_local_time() {
    let h = harness("2026-06-01T00:00:00Z", "America/New_York");
    let mut client = h.connect().await.unwrap();
    let task = save(&mut client, json!({"agent": "ops", "name": "standup", "prompt": "notes", "repeat": "daily", "time": "09:00"})).await;
    let id = task["id"].as_str().unwrap().to_string();
    assert_eq!(task["next_run_at"], ts("2026-06-01T13:00:00Z").as_second());
    // The laptop flies to Berlin: 09:00 is now 07:00Z.
    h.clock.set_time_zone(zone("Europe/Berlin"));
    h.tick().await.unwrap();
    let list = client
        .request(json!({"op": "schedule_list"}))
        .await
        .unwrap();
    assert_eq!(
        list["schedules"][0]["next_run_at"],
        ts("2026-06-01T07:00:00Z").as_second()
    );
    tick_at(&h, ts("2026-06-01T07:00:00Z")).await;
    tick_at(&h, ts("2026-06-02T07:00:00Z")).await;
    let keys: Vec<String> = recorded(h.home()).into_iter().map(|r| r.0).collect();
    assert_eq!(
        keys,
        [
            key(&id, ts("2026-06-01T07:00:00Z")),
            key(&id, ts("2026-06-02T07:00:00Z"))
        ]
    );
    // The machine's clock set back an hour: the run it made is not made again.
    h.clock.set_wall(ts("2026-06-02T06:30:00Z"));
    for _ in 0..3 {
        h.tick().await.unwrap();
    }
    assert_eq!(recorded(h.home()).len(), 2);
}

#[tokio::test]
async fn a_disabled_agents_task_neither_fires_nor_moves_on_and_fires_once_when_enabled() {
    let h = harness("2026-06-01T00:00:00Z", "Europe/Berlin");
    let mut client = h.connect().await.unwrap();
    let task = save(
        &mut client,
        json!({"agent": "ops", "name": "t", "prompt": "p", "repeat": "hourly", "time": "00:10"}),
    )
    .await;
    let id = task["id"].as_str().unwrap().to_string();
    let due = task["next_run_at"].as_i64().unwrap();
    let off = client
        .request(json!({"op": "agent_update", "agent": "ops", "enabled": false}))
        .await
        .unwrap();
    assert_eq!(off["type"], "agent_updated");
    // Five hours pass: nothing fires and next_run_at stays.
    h.advance(Duration::from_secs(5 * 3600));
    h.tick().await.unwrap();
    assert!(recorded(h.home()).is_empty());
    let list = client
        .request(json!({"op": "schedule_list"}))
        .await
        .unwrap();
    assert_eq!(list["schedules"][0]["next_run_at"], due);
    // schedule_run is refused while the agent is off.
    let refused = client
        .request(json!({"op": "schedule_run", "schedule": id}))
        .await
        .unwrap();
    assert_eq!(
        refused["message"],
        "agent ops is disabled; enable it to run its tasks"
    );
    let on = client
        .request(json!({"op": "agent_update", "agent": "ops", "enabled": true}))
        .await
        .unwrap();
    assert_eq!(on["type"], "agent_updated");
    h.tick().await.unwrap();
    let got = recorded(h.home());
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, format!("schedule:{id}:{due}"));
}

#[tokio::test]
async fn a_run_due_while_the_daemon_was_down_fires_once_and_a_kill_between_the_writes_does_not_double_it()
 {
    let h = harness("2026-06-01T00:00:00Z", "Asia/Kathmandu");
    let mut client = h.connect().await.unwrap();
    let task = save(
        &mut client,
        json!({"agent": "ops", "name": "t", "prompt": "p", "repeat": "daily", "time": "09:00"}),
    )
    .await;
    let id = task["id"].as_str().unwrap().to_string();
    let due = ts("2026-06-01T03:15:00Z");
    assert_eq!(task["next_run_at"], due.as_second());
    drop(client);
    let file = h.home().join("agents/ops/schedules.json");
    let before = std::fs::read(&file).unwrap();
    // Down across the run: it fires at the first tick after the start.
    let h = h.restart().await.unwrap();
    h.advance(Duration::from_secs(6 * 3600));
    h.tick().await.unwrap();
    assert_eq!(recorded(h.home()).len(), 1);
    // The run's engine goes away with the hub.
    drop(h.engines.next_session().await.unwrap());
    // As if killed after the message was recorded but before schedules.json moved on.
    std::fs::write(&file, &before).unwrap();
    let h = h.restart().await.unwrap();
    h.tick().await.unwrap();
    let got = recorded(h.home());
    assert_eq!(got.len(), 1, "the re-fire is a duplicate: {got:?}");
    assert_eq!(got[0].0, key(&id, due));
    let saved: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(
        saved[0]["next_run_at"],
        ts("2026-06-02T03:15:00Z").as_second()
    );
    // And a plain restart fires nothing more.
    let h = h.restart().await.unwrap();
    h.tick().await.unwrap();
    assert_eq!(recorded(h.home()).len(), 1);
}

#[tokio::test]
async fn a_run_fills_in_last_session_and_a_task_without_new_session_continues_it() {
    let h = harness("2026-06-01T00:00:00Z", "Europe/Berlin");
    let mut client = h.connect().await.unwrap();
    let task = save(&mut client, json!({"agent": "ops", "name": "t", "prompt": "p", "repeat": "daily", "time": "09:00", "new_session": false})).await;
    let id = task["id"].as_str().unwrap().to_string();
    let started = client
        .request(json!({"op": "schedule_run", "schedule": id}))
        .await
        .unwrap();
    assert_eq!(
        started,
        json!({"type": "schedule_started", "schedule": id, "id": 2})
    );
    let mut engine = h.engines.next_session().await.unwrap();
    let delivered = client.next_type("message_delivered").await.unwrap();
    let session = delivered["session"].as_str().unwrap().to_string();
    assert_eq!(delivered["from"], format!("schedule:{id}"));
    let op = engine.op("user_message").await.unwrap();
    let text = op["content"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("[scheduled task {id} · m-")),
        "{text}"
    );
    assert!(text.ends_with("]\n定时任务「t」：\np"), "{text}");
    let list = client.next_type("schedules").await.unwrap();
    assert_eq!(list["schedules"][0]["last_session"], session.as_str());
    // A second run in the same second is dropped.
    // Named by the request's id alone, which the reply echoes.
    client.send(json!({"op": "schedule_run", "id": id})).await;
    let again = client.next_type("schedule_started").await.unwrap();
    assert_eq!(
        again,
        json!({"type": "schedule_started", "schedule": id, "id": id})
    );
    assert_eq!(recorded(h.home()).len(), 1);
    // The scheduled run goes to the same session: no new engine starts.
    tick_at(&h, ts("2026-06-01T07:00:00Z")).await;
    let delivered = client.next_type("message_delivered").await.unwrap();
    assert_eq!(delivered["session"], session.as_str());
    assert!(h.engines.try_next_session().is_none());
    assert_eq!(recorded(h.home()).len(), 2);
}

/// A task whose last run went to a session its engine then renamed (`renamed` in
/// `sessions.jsonl`; `schedules.json` and `messages.jsonl` still name the first id, as a
/// daemon killed before it wrote the task leaves them): after the restart the task's record
/// follows the rename and the next due run goes to the renamed session, no engine starting.
#[tokio::test]
async fn a_due_run_follows_its_last_session_through_an_engine_rename() {
    let h = harness("2026-06-01T00:00:00Z", "Europe/Berlin");
    let mut client = h.connect().await.unwrap();
    let task = save(&mut client, json!({"agent": "ops", "name": "t", "prompt": "p", "repeat": "daily", "time": "09:00", "new_session": false})).await;
    let id = task["id"].as_str().unwrap().to_string();
    client
        .request(json!({"op": "schedule_run", "schedule": id}))
        .await
        .unwrap();
    let engine = h.engines.next_session().await.unwrap();
    let delivered = client.next_type("message_delivered").await.unwrap();
    let first = delivered["session"].as_str().unwrap().to_string();
    drop(engine);
    drop(client);
    let renamed = "thread-01";
    let h = h
        .restart_with(|home| {
            let log = home.join("daemon/sessions.jsonl");
            let mut text = std::fs::read_to_string(&log)?;
            text.push_str(
                &json!({"kind": "renamed", "session": first, "to": renamed, "at": 1}).to_string(),
            );
            text.push('\n');
            std::fs::write(&log, text)?;
            Ok(())
        })
        .await
        .unwrap();
    let mut client = h.connect().await.unwrap();
    let list = client
        .request(json!({"op": "schedule_list"}))
        .await
        .unwrap();
    assert_eq!(list["schedules"][0]["last_session"], renamed, "{list}");
    // 09:00 in Berlin: the run reopens the renamed session.
    tick_at(&h, ts("2026-06-01T07:00:00Z")).await;
    let delivered = client.next_type("message_delivered").await.unwrap();
    assert_eq!(delivered["session"], renamed, "{delivered}");
    let engine = h.engines.next_session().await.unwrap();
    assert_eq!(engine.spec.session, renamed);
    assert!(
        engine.spec.resume,
        "the renamed session is reopened, not a new one"
    );
    assert!(h.engines.try_next_session().is_none());
}
