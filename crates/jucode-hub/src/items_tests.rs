//! Timers, questions and reports on a hub in-process with a manual clock. Delivery goes
//! through a stand-in for `enqueue_message` (the messages area's), so these tests see the
//! exact message each rule sends and what is recorded around it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jucode_clock::{Clock as _, ManualClock};
use jucode_protocol::daemon::DaemonEvent;
use serde_json::{Value, json};

use crate::agents::tools::{Caller, call};
use crate::error::OpError;
use crate::messages::{Accepted, NewMessage, Origin};
use crate::{Hub, HubConfig, Inner, questions, timers};

pub(crate) struct Home {
    dir: tempfile::TempDir,
    clock: ManualClock,
}

impl Home {
    /// A home with agents `ops` and `qa`, the clock at a fixed instant.
    pub(crate) fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join(".jucode");
        for agent in ["ops", "qa"] {
            let agent_dir = home.join("agents").join(agent);
            std::fs::create_dir_all(&agent_dir).unwrap();
            let config = json!({"name": agent, "cwd": dir.path()});
            std::fs::write(agent_dir.join("agent.json"), config.to_string()).unwrap();
        }
        let clock = ManualClock::new("2026-03-01T12:00:00Z".parse().unwrap());
        Home { dir, clock }
    }

    fn home(&self) -> std::path::PathBuf {
        self.dir.path().join(".jucode")
    }

    fn state(&self, file: &str) -> std::path::PathBuf {
        self.home().join("daemon").join(file)
    }

    pub(crate) fn open(&self) -> Arc<Hub> {
        Hub::open(HubConfig {
            home: self.home(),
            user_home: self.dir.path().to_path_buf(),
            version: "test".into(),
            relay_url: None,
            engines: HashMap::new(),
            clock: self.clock.shared(),
            agent_mcp: Default::default(),
            billing: None,
            online: Default::default(),
        })
        .unwrap()
    }

    pub(crate) fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    pub(crate) fn advance_secs(&self, secs: u64) {
        self.clock.advance(Duration::from_secs(secs));
    }
}

/// A stand-in for `enqueue_message`: keeps what it was given and, like the real one, answers
/// a second message with a seen dedupe key as a duplicate.
#[derive(Default)]
struct Outbox {
    sent: Vec<NewMessage>,
    keys: HashSet<String>,
    down: bool,
}

impl Outbox {
    fn deliver(&mut self, msg: NewMessage) -> Result<Accepted, OpError> {
        if self.down {
            return Err(OpError::NotBuilt("message delivery".into()));
        }
        let duplicate = msg.dedupe_key.clone().is_some_and(|k| !self.keys.insert(k));
        if !duplicate {
            self.sent.push(msg);
        }
        Ok(Accepted {
            id: format!("m-{}", self.sent.len()),
            duplicate,
        })
    }

    fn tick(&mut self, inner: &mut Inner, now: u64) {
        timers::fire_due(inner, now, |_, m| self.deliver(m));
        questions::deliver_overdue(inner, now, |_, m| self.deliver(m));
    }
}

fn caller(agent: &str, session: &str) -> Caller {
    Caller {
        agent: agent.into(),
        session: session.into(),
    }
}

async fn tool(hub: &Arc<Hub>, who: &Caller, name: &str, args: Value) -> Result<Value, String> {
    call(hub, who, name, args).await.map_err(|e| e.to_string())
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_timer_fires_at_its_time_once_into_the_session_that_set_it() {
    let home = Home::new();
    let hub = home.open();
    let ops = caller("ops", "s1");
    let set = tool(
        &hub,
        &ops,
        "timer",
        json!({"action":"set","in_seconds":60,"body":"check CI"}),
    )
    .await
    .unwrap();
    let id = set["timer"].as_str().unwrap().to_string();
    assert!(id.starts_with("tm-"), "{id}");
    assert_eq!(set["fire_at"], home.now() + 60_000);

    let mut out = Outbox::default();
    home.advance_secs(59);
    out.tick(&mut hub.lock(), home.now());
    assert!(out.sent.is_empty(), "not due yet");
    home.advance_secs(1);
    out.tick(&mut hub.lock(), home.now());
    assert_eq!(
        out.sent,
        vec![NewMessage {
            to: "ops".into(),
            from: Origin::Timer(id.clone()),
            body: "check CI".into(),
            session: Some("s1".into()),
            reply_to: None,
            dedupe_key: Some(id.clone()),
            new_session: false,
        }]
    );
    home.advance_secs(3600);
    out.tick(&mut hub.lock(), home.now());
    assert_eq!(out.sent.len(), 1, "a fired timer never fires again");
    assert!(hub.lock().timers.list(None).is_empty());
    let err = hub.lock().timers.cancel(&id).unwrap_err().to_string();
    assert_eq!(err, format!("timer {id} already fired"));
}

#[tokio::test]
async fn a_new_session_timer_names_no_session() {
    let home = Home::new();
    let hub = home.open();
    let at = home.now() / 1000 + 10;
    tool(
        &hub,
        &caller("ops", "s1"),
        "timer",
        json!({"action":"set","at":at,"body":"fresh start","new_session":true}),
    )
    .await
    .unwrap();
    let mut out = Outbox::default();
    home.advance_secs(10);
    out.tick(&mut hub.lock(), home.now());
    assert_eq!(out.sent.len(), 1);
    assert_eq!(out.sent[0].session, None);
    assert!(out.sent[0].new_session);
}

#[tokio::test]
async fn a_timer_whose_delivery_fails_stays_armed_and_fires_later() {
    let home = Home::new();
    let hub = home.open();
    tool(
        &hub,
        &caller("ops", "s1"),
        "timer",
        json!({"action":"set","in_seconds":5,"body":"b"}),
    )
    .await
    .unwrap();
    let mut out = Outbox {
        down: true,
        ..Outbox::default()
    };
    home.advance_secs(5);
    out.tick(&mut hub.lock(), home.now());
    assert_eq!(hub.lock().timers.list(None).len(), 1, "still armed");
    assert_eq!(lines(&home.state("timers.jsonl")), 1, "nothing recorded");
    out.down = false;
    home.advance_secs(1);
    out.tick(&mut hub.lock(), home.now());
    assert_eq!(out.sent.len(), 1);
    assert!(hub.lock().timers.list(None).is_empty());
}

#[tokio::test]
async fn a_timer_due_while_the_daemon_was_down_fires_once_at_the_first_tick() {
    let home = Home::new();
    let id = {
        let hub = home.open();
        let set = tool(
            &hub,
            &caller("ops", "s1"),
            "timer",
            json!({"action":"set","in_seconds":30,"body":"b"}),
        )
        .await
        .unwrap();
        set["timer"].as_str().unwrap().to_string()
    };
    home.advance_secs(3600);
    let mut out = Outbox::default();
    {
        let hub = home.open();
        assert_eq!(hub.lock().timers.list(None)[0].timer, id);
        out.tick(&mut hub.lock(), home.now());
        out.tick(&mut hub.lock(), home.now() + 1000);
        assert_eq!(out.sent.len(), 1);
    }
    // Fired for good: another restart fires nothing.
    let hub = home.open();
    out.tick(&mut hub.lock(), home.now());
    assert_eq!(out.sent.len(), 1);
    assert!(hub.lock().timers.list(None).is_empty());
}

#[tokio::test]
async fn a_crash_between_delivery_and_the_fired_record_still_delivers_once() {
    let home = Home::new();
    let hub = home.open();
    let set = tool(
        &hub,
        &caller("ops", "s1"),
        "timer",
        json!({"action":"set","in_seconds":1,"body":"b"}),
    )
    .await
    .unwrap();
    let id = set["timer"].as_str().unwrap().to_string();
    drop(hub);
    // The message was recorded under the timer's id, but the daemon died before `done`.
    let mut out = Outbox::default();
    out.keys.insert(id.clone());
    home.advance_secs(5);
    let hub = home.open();
    out.tick(&mut hub.lock(), home.now());
    assert!(out.sent.is_empty(), "the second attempt is a duplicate");
    assert!(
        hub.lock().timers.list(None).is_empty(),
        "and the timer is done"
    );
}

#[tokio::test]
async fn bad_timer_input_is_refused_and_changes_nothing() {
    let home = Home::new();
    let hub = home.open();
    let ops = caller("ops", "s1");
    let now_s = home.now() / 1000;
    let cases = [
        (
            json!({"action":"set","in_seconds":10}),
            "timer: set needs a body",
        ),
        (
            json!({"action":"set","body":"b"}),
            "timer: set needs in_seconds or at",
        ),
        (
            json!({"action":"set","at":now_s - 1,"body":"b"}),
            "timer: that time has already passed",
        ),
        (
            json!({"action":"set","in_seconds":367 * 86_400,"body":"b"}),
            "timer: at most 366 days ahead",
        ),
        (
            json!({"action":"set","at":now_s + 5 * 365 * 86_400,"body":"b"}),
            "timer: at most 366 days ahead",
        ),
        (
            json!({"action":"set","in_seconds":10,"body":"x".repeat(4001)}),
            "timer: body is longer than 4000 characters",
        ),
        (
            json!({"action":"set","in_seconds":-5,"body":"b"}),
            "timer: invalid value",
        ),
        (
            json!({"action":"snooze"}),
            "timer: unknown action \"snooze\" (expected set, list or cancel)",
        ),
        (json!({"action":"cancel"}), "timer: cancel needs timer"),
        (
            json!({"action":"cancel","timer":"tm-0-0"}),
            "unknown timer tm-0-0",
        ),
    ];
    for (args, want) in cases {
        let err = tool(&hub, &ops, "timer", args.clone()).await.unwrap_err();
        assert!(err.starts_with(want), "{args}: {err}");
    }
    assert_eq!(lines(&home.state("timers.jsonl")), 0);
}

#[tokio::test]
async fn an_agent_sees_and_cancels_only_its_own_timers() {
    let home = Home::new();
    let hub = home.open();
    let ops = caller("ops", "s1");
    let qa = caller("qa", "s2");
    let later = tool(
        &hub,
        &ops,
        "timer",
        json!({"action":"set","in_seconds":90,"body":"later"}),
    )
    .await
    .unwrap();
    tool(
        &hub,
        &ops,
        "timer",
        json!({"action":"set","in_seconds":30,"body":"sooner"}),
    )
    .await
    .unwrap();
    tool(
        &hub,
        &qa,
        "timer",
        json!({"action":"set","in_seconds":60,"body":"qa's"}),
    )
    .await
    .unwrap();
    let list = tool(&hub, &ops, "timer", json!({"action":"list"}))
        .await
        .unwrap();
    let bodies: Vec<&str> = list["timers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["body"].as_str().unwrap())
        .collect();
    assert_eq!(bodies, ["sooner", "later"]);
    let all: Vec<String> = hub
        .lock()
        .timers
        .list(None)
        .into_iter()
        .map(|t| t.body)
        .collect();
    assert_eq!(all, ["sooner", "qa's", "later"]);
    let id = later["timer"].as_str().unwrap();
    let err = tool(&hub, &qa, "timer", json!({"action":"cancel","timer":id}))
        .await
        .unwrap_err();
    assert_eq!(err, format!("unknown timer {id}"));
    let ok = tool(&hub, &ops, "timer", json!({"action":"cancel","timer":id}))
        .await
        .unwrap();
    assert_eq!(ok["cancelled"], id);
    let err = hub.lock().timers.cancel(id).unwrap_err().to_string();
    assert_eq!(err, format!("timer {id} was already cancelled"));
    // Cancelled for good, also after a restart.
    drop(hub);
    let hub = home.open();
    assert_eq!(hub.lock().timers.list(Some("ops")).len(), 1);
}

#[tokio::test]
async fn a_torn_last_line_is_skipped() {
    let home = Home::new();
    drop(home.open());
    let fire_at = home.now() + 1000;
    let text = format!(
        "{}\n{{\"kind\":\"set\",\"id\":\"tm-2\",\"ag",
        json!({"kind":"set","id":"tm-1","agent":"ops","session":"s","fire_at":fire_at,"body":"b","at":1})
    );
    std::fs::write(home.state("timers.jsonl"), text).unwrap();
    let hub = home.open();
    let list = hub.lock().timers.list(None);
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].timer, "tm-1");
}

pub(crate) fn questions_event(hub: &Hub) -> (Vec<Value>, Vec<Value>) {
    let DaemonEvent::Questions { questions, closed } = hub.lock().questions.event() else {
        unreachable!()
    };
    (
        questions
            .iter()
            .map(|q| serde_json::to_value(q).unwrap())
            .collect(),
        closed
            .iter()
            .map(|q| serde_json::to_value(q).unwrap())
            .collect(),
    )
}

pub(crate) async fn ask(hub: &Arc<Hub>, args: Value) -> String {
    let r = tool(hub, &caller("ops", "s1"), "question", args)
        .await
        .unwrap();
    r["question"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_question_is_answered_once_into_the_session_that_asked() {
    let home = Home::new();
    let hub = home.open();
    let id = ask(
        &hub,
        json!({"title":"Deploy now?","default":"wait","importance":"high"}),
    )
    .await;
    let (open, _) = questions_event(&hub);
    assert_eq!(open.len(), 1);
    assert_eq!(open[0]["importance"], "high");
    assert_eq!(
        open[0]["due_at"],
        home.now() + 24 * 3600 * 1000,
        "24 hours by default"
    );

    let mut out = Outbox::default();
    let mut answer = |text: &str| {
        questions::answer(&mut hub.lock(), &id, text, |_, m| out.deliver(m))
            .map_err(|e| e.to_string())
    };
    assert_eq!(
        answer("  ").unwrap_err(),
        "question_answer: answer must not be empty"
    );
    answer("yes, go").unwrap();
    assert_eq!(
        answer("no").unwrap_err(),
        format!("question {id} was already answered")
    );
    assert_eq!(
        out.sent,
        vec![NewMessage {
            to: "ops".into(),
            from: Origin::Question(id.clone()),
            body: "Q: Deploy now?\nA: yes, go".into(),
            session: Some("s1".into()),
            reply_to: None,
            dedupe_key: Some(format!("question:{id}:answer")),
            new_session: false,
        }]
    );
    let (open, closed) = questions_event(&hub);
    assert!(open.is_empty());
    assert_eq!(closed[0]["closed_by"], "user");
    assert_eq!(closed[0]["closed_reason"], "answered");
    assert_eq!(closed[0]["answer"], "yes, go");
    // Its deadline is gone with it.
    home.advance_secs(2 * 24 * 3600);
    out.tick(&mut hub.lock(), home.now());
    assert_eq!(out.sent.len(), 1);
}

#[tokio::test]
async fn an_answer_that_cannot_be_delivered_leaves_the_question_open() {
    let home = Home::new();
    let hub = home.open();
    let id = ask(&hub, json!({"title":"t"})).await;
    let mut out = Outbox {
        down: true,
        ..Outbox::default()
    };
    let err = questions::answer(&mut hub.lock(), &id, "a", |_, m| out.deliver(m)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "message delivery is not available in this daemon yet"
    );
    assert_eq!(questions_event(&hub).0.len(), 1);
    // Asked, and the answer being handed over; never answered.
    assert_eq!(lines(&home.state("questions.jsonl")), 2);
}

#[tokio::test]
async fn a_passed_deadline_delivers_the_default_once() {
    let home = Home::new();
    let hub = home.open();
    let id = ask(
        &hub,
        json!({"title":"Which DB?","default":"postgres","due_in_seconds":600}),
    )
    .await;
    let mut out = Outbox::default();
    home.advance_secs(599);
    out.tick(&mut hub.lock(), home.now());
    assert!(out.sent.is_empty());
    home.advance_secs(1);
    out.tick(&mut hub.lock(), home.now());
    out.tick(&mut hub.lock(), home.now() + 1000);
    assert_eq!(out.sent.len(), 1);
    assert_eq!(
        out.sent[0].body,
        "Q: Which DB?\nNo answer by the deadline. Go ahead with your default: postgres"
    );
    assert_eq!(
        out.sent[0].dedupe_key.as_deref(),
        Some(&*format!("question:{id}:deadline"))
    );
    assert_eq!(out.sent[0].session.as_deref(), Some("s1"));
    let (_, closed) = questions_event(&hub);
    assert_eq!(closed[0]["closed_by"], "deadline");
    assert_eq!(closed[0]["answer"], "postgres");
    let err = questions::answer(&mut hub.lock(), &id, "mysql", |_, m| out.deliver(m)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("question {id} was already answered")
    );
    // Never again, also after a restart.
    drop(hub);
    let hub = home.open();
    out.tick(&mut hub.lock(), home.now());
    assert_eq!(out.sent.len(), 1);
}

#[tokio::test]
async fn closed_questions_are_listed_for_seven_days_and_reopen_without_a_passed_deadline() {
    let home = Home::new();
    let hub = home.open();
    let id = ask(&hub, json!({"title":"t","due_in_seconds":60})).await;
    hub.lock()
        .questions
        .close(&id, Some("later".into()))
        .unwrap();
    let (open, closed) = questions_event(&hub);
    assert!(open.is_empty());
    assert_eq!(closed[0]["closed_reason"], "later");
    assert_eq!(closed[0]["closed_by"], "user");
    // Closed: its deadline delivers nothing.
    let mut out = Outbox::default();
    home.advance_secs(120);
    out.tick(&mut hub.lock(), home.now());
    assert!(out.sent.is_empty());
    home.advance_secs(7 * 24 * 3600 - 121);
    assert_eq!(questions_event(&hub).1.len(), 1, "still within 7 days");
    home.advance_secs(1);
    assert!(questions_event(&hub).1.is_empty(), "7 days after closing");
    // Reopened after its deadline: it waits for an answer.
    assert_eq!(hub.lock().questions.reopen(&id).unwrap(), "s1");
    let (open, _) = questions_event(&hub);
    assert_eq!(open[0]["due_at"], Value::Null);
    out.tick(&mut hub.lock(), home.now());
    assert!(out.sent.is_empty());
    let err = hub.lock().questions.reopen(&id).unwrap_err().to_string();
    assert_eq!(err, format!("question {id} is not closed"));
}

#[tokio::test]
async fn deleting_an_agent_cancels_its_timers_and_closes_its_questions() {
    let home = Home::new();
    let hub = home.open();
    tool(
        &hub,
        &caller("ops", "s1"),
        "timer",
        json!({"action":"set","in_seconds":5,"body":"b"}),
    )
    .await
    .unwrap();
    tool(
        &hub,
        &caller("qa", "s2"),
        "timer",
        json!({"action":"set","in_seconds":5,"body":"b"}),
    )
    .await
    .unwrap();
    let id = ask(&hub, json!({"title":"t","due_in_seconds":5})).await;
    hub.lock().agent_deleted_items("ops").unwrap();
    let left: Vec<String> = hub
        .lock()
        .timers
        .list(None)
        .into_iter()
        .map(|t| t.agent)
        .collect();
    assert_eq!(left, ["qa"]);
    let (open, closed) = questions_event(&hub);
    assert!(open.is_empty());
    assert_eq!(closed[0]["closed_by"], "agent_deleted");
    let err = hub.lock().questions.reopen(&id).unwrap_err().to_string();
    assert_eq!(err, format!("the agent of question {id} was deleted"));
    let mut out = Outbox::default();
    home.advance_secs(10);
    out.tick(&mut hub.lock(), home.now());
    assert_eq!(out.sent.len(), 1, "only qa's timer");
    assert_eq!(out.sent[0].to, "qa");
}

#[tokio::test]
async fn a_deadline_of_an_agent_removed_by_hand_closes_its_question() {
    let home = Home::new();
    let id = {
        let hub = home.open();
        ask(&hub, json!({"title":"t","due_in_seconds":60})).await
    };
    std::fs::remove_dir_all(home.home().join("agents/ops")).unwrap();
    home.advance_secs(60);
    let hub = home.open();
    let mut out = Outbox::default();
    out.tick(&mut hub.lock(), home.now());
    assert!(out.sent.is_empty());
    let (open, closed) = questions_event(&hub);
    assert!(open.is_empty());
    assert_eq!(closed[0]["id"], id.as_str());
    assert_eq!(closed[0]["closed_by"], "agent_deleted");
}

#[tokio::test]
async fn bad_question_and_report_input_is_refused_and_changes_nothing() {
    let home = Home::new();
    let hub = home.open();
    let ops = caller("ops", "s1");
    let cases = [
        (
            "question",
            json!({"title":" "}),
            "question: title must not be empty",
        ),
        (
            "question",
            json!({"body":"b"}),
            "question: missing field `title`",
        ),
        (
            "question",
            json!({"title":"t","due_in_seconds":0}),
            "question: due_in_seconds must be between 1 and 2592000",
        ),
        (
            "question",
            json!({"title":"t","due_in_seconds":10_000_000_000u64}),
            "question: due_in_seconds must be between",
        ),
        (
            "question",
            json!({"title":"t","importance":"urgent"}),
            "question: importance \"urgent\" is not low, normal or high",
        ),
        (
            "question",
            json!({"title":"x".repeat(201)}),
            "question: title is longer than 200 characters",
        ),
        (
            "question",
            json!({"title":"t","body":"x".repeat(8001)}),
            "question: body is longer than 8000 characters",
        ),
        (
            "question",
            json!({"title":"t","default":"x".repeat(2001)}),
            "question: default is longer than 2000 characters",
        ),
        (
            "report",
            json!({"title":"","body":"b"}),
            "report: title must not be empty",
        ),
        (
            "report",
            json!({"title":"t","body":"x".repeat(32_001)}),
            "report: body is longer than 32000 characters",
        ),
    ];
    for (name, args, want) in cases {
        let err = tool(&hub, &ops, name, args.clone()).await.unwrap_err();
        assert!(err.starts_with(want), "{args}: {err}");
    }
    assert_eq!(lines(&home.state("questions.jsonl")), 0);
    assert_eq!(lines(&home.state("reports.jsonl")), 0);
}

#[tokio::test]
async fn reports_are_listed_newest_first_and_marked_read_once() {
    let home = Home::new();
    let hub = home.open();
    let ops = caller("ops", "s1");
    let mut ids = Vec::new();
    for n in 0..3 {
        let r = tool(
            &hub,
            &ops,
            "report",
            json!({"title":format!("r{n}"),"body":"b"}),
        )
        .await
        .unwrap();
        ids.push(r["report"].as_str().unwrap().to_string());
        home.advance_secs(1);
    }
    let titles = |hub: &Hub, limit| -> Vec<String> {
        hub.lock()
            .reports
            .newest(limit)
            .into_iter()
            .map(|r| r.title)
            .collect()
    };
    assert_eq!(titles(&hub, 50), ["r2", "r1", "r0"]);
    assert_eq!(titles(&hub, 2), ["r2", "r1"]);
    assert!(hub.lock().reports.read(&ids[1]).unwrap());
    assert!(!hub.lock().reports.read(&ids[1]).unwrap(), "already read");
    assert_eq!(
        hub.lock().reports.read("r-0-0").unwrap_err().to_string(),
        "unknown report r-0-0"
    );
    drop(hub);
    let hub = home.open();
    let read: Vec<bool> = hub
        .lock()
        .reports
        .newest(50)
        .into_iter()
        .map(|r| r.read)
        .collect();
    assert_eq!(read, [false, true, false]);
}

#[test]
fn a_tick_takes_only_the_timers_due() {
    let home = Home::new();
    let hub = home.open();
    let now = home.now();
    {
        let mut inner = hub.lock();
        for n in 0..300u64 {
            inner
                .timers
                .set("ops", "s", now + 3_600_000 + n, "b".into(), false)
                .unwrap();
        }
    }
    let mut out = Outbox::default();
    out.tick(&mut hub.lock(), now + 3_600_000);
    assert_eq!(out.sent.len(), 1, "only the first is due");
    assert_eq!(hub.lock().timers.list(None).len(), 299);
}
