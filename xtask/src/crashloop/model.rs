//! What the clients saw acknowledged, and the checks of a restarted daemon against it.

use std::collections::{BTreeMap, HashMap, HashSet};

use anyhow::{Result, bail};
use serde_json::Value;

/// The kinds of state the loop changes; the table at the end counts acknowledgements per kind.
pub const KINDS: &[&str] = &[
    "session_create",
    "session_rename",
    "session_close",
    "workspace",
    "requirement",
    "schedule_save",
    "schedule_delete",
    "schedule_run",
    "device_pair",
    "device_revoke",
    "upload",
    "agent_message",
    "agent_timer",
    "agent_question",
    "question_answer",
    "agent_report",
    "report_read",
];

#[derive(Default)]
pub struct Session {
    /// The last title acknowledged (after a `ping` that followed it on the same connection).
    pub title: Option<String>,
    /// Titles sent since, not acknowledged before a kill: each may or may not have landed.
    pub unsure_titles: Vec<String>,
    pub closed: bool,
}

#[derive(Default)]
pub struct Model {
    pub sessions: HashMap<String, Session>,
    pub requirements: HashMap<String, String>,
    pub projects: HashSet<String>,
    pub schedules: HashSet<String>,
    pub deleted_schedules: HashSet<String>,
    /// Paired devices not revoked: (device id, token).
    pub devices: Vec<(String, String)>,
    /// Tokens of devices whose revoke was acknowledged.
    pub revoked: Vec<String>,
    /// Finished uploads: (path, the bytes sent).
    pub uploads: Vec<(String, Vec<u8>)>,
    /// Scheduled tasks (`id name`) whose `schedule_run` was sent, answered or not.
    pub runs_tried: HashSet<String>,
    /// Prompts of the tasks whose `schedule_run` was answered `schedule_started`.
    pub runs: HashSet<String>,
    /// Bodies of `message_send`s answered `message_accepted`.
    pub messages: HashSet<String>,
    /// Answers acknowledged by `question_answered`, by question id.
    pub answers: HashMap<String, String>,
    /// Reports whose `report_read` was acknowledged.
    pub reports_read: HashSet<String>,
    pub acked: BTreeMap<&'static str, u64>,
    /// What the agents' tools returned so far (read from the fake model's requests as they
    /// are taken).
    pub tools: ToolAcks,
}

impl Model {
    pub fn ack(&mut self, kind: &'static str) {
        *self.acked.entry(kind).or_default() += 1;
    }
}

fn frame<'a>(batch: &'a [Value], kind: &str) -> Result<&'a Value> {
    match batch.iter().find(|f| f["type"] == kind) {
        Some(f) => Ok(f),
        None => bail!("the connect batch has no {kind} frame"),
    }
}

fn list<'a>(f: &'a Value, field: &str) -> &'a [Value] {
    f[field].as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// The restarted daemon's connect batch against the model: every acknowledged record is
/// there as last acknowledged, nothing deleted came back. Returns the problems found.
pub fn check_batch(model: &Model, batch: &[Value]) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let sessions: HashMap<&str, &Value> = list(frame(batch, "sessions")?, "sessions")
        .iter()
        .filter_map(|s| Some((s["session"].as_str()?, s)))
        .collect();
    for (id, want) in &model.sessions {
        let Some(got) = sessions.get(id.as_str()) else {
            problems.push(format!("acknowledged session {id} lost"));
            continue;
        };
        if let Some(title) = &want.title {
            let have = got["title"].as_str();
            let ok = have == Some(title.as_str())
                || want.unsure_titles.iter().any(|t| have == Some(t.as_str()));
            if !ok {
                problems.push(format!(
                    "session {id}: title {have:?}, acknowledged {title:?}"
                ));
            }
        }
        if want.closed && got["open"] == true {
            problems.push(format!("session {id} was closed and is open again"));
        }
    }
    let requirements: HashMap<&str, &Value> = list(frame(batch, "requirements")?, "requirements")
        .iter()
        .filter_map(|r| Some((r["id"].as_str()?, r)))
        .collect();
    for (id, text) in &model.requirements {
        match requirements.get(id.as_str()) {
            None => problems.push(format!("acknowledged requirement {id} lost")),
            Some(r) if r["text"].as_str() != Some(text) => {
                problems.push(format!("requirement {id}: text {} not {text:?}", r["text"]));
            }
            Some(_) => {}
        }
    }
    let workspaces = frame(batch, "workspaces")?.to_string();
    for path in &model.projects {
        if !workspaces.contains(&serde_json::to_string(path)?) {
            problems.push(format!("acknowledged project {path} lost"));
        }
    }
    let mut names: HashMap<&str, usize> = HashMap::new();
    for s in list(frame(batch, "schedules")?, "schedules") {
        if let Some(name) = s["name"].as_str() {
            *names.entry(name).or_default() += 1;
        }
    }
    // The model keeps "<id> <name>".
    for entry in &model.schedules {
        let name = entry.rsplit(' ').next().unwrap_or(entry);
        if !names.contains_key(name) {
            problems.push(format!("acknowledged schedule {name} lost"));
        }
    }
    for entry in &model.deleted_schedules {
        let name = entry.rsplit(' ').next().unwrap_or(entry);
        if names.contains_key(name) {
            problems.push(format!("deleted schedule {name} came back"));
        }
    }
    for (name, n) in names {
        if n > 1 {
            problems.push(format!("schedule {name} listed {n} times"));
        }
    }
    Ok(problems)
}

/// The restarted daemon's `question_list` and `report_list` replies against what was
/// acknowledged: every question and report a tool returned is there, every acknowledged answer
/// closed its question, every acknowledged read stuck.
pub fn check_items(
    model: &Model,
    tools: &ToolAcks,
    questions: &Value,
    reports: &Value,
) -> Vec<String> {
    let mut problems = Vec::new();
    let open: HashSet<&str> = list(questions, "questions")
        .iter()
        .filter_map(|q| q["id"].as_str())
        .collect();
    let closed: HashMap<&str, &Value> = list(questions, "closed")
        .iter()
        .filter_map(|q| Some((q["id"].as_str()?, q)))
        .collect();
    for id in &tools.questions {
        if !open.contains(id.as_str()) && !closed.contains_key(id.as_str()) {
            problems.push(format!("acknowledged question {id} lost"));
        }
    }
    for (id, answer) in &model.answers {
        if open.contains(id.as_str()) {
            problems.push(format!("answered question {id} is open again"));
        } else if let Some(q) = closed.get(id.as_str())
            && q["answer"].as_str() != Some(answer)
        {
            problems.push(format!(
                "question {id}: answer {} not {answer:?}",
                q["answer"]
            ));
        }
    }
    let reports: HashMap<&str, &Value> = list(reports, "reports")
        .iter()
        .filter_map(|r| Some((r["id"].as_str()?, r)))
        .collect();
    for id in &tools.reports {
        match reports.get(id.as_str()) {
            None => problems.push(format!("acknowledged report {id} lost")),
            Some(r) if model.reports_read.contains(id) && r["read"] != true => {
                problems.push(format!("report {id} was read and is unread again"));
            }
            Some(_) => {}
        }
    }
    problems
}

/// Deliveries seen by the engine (its saved conversations): nothing twice; and the
/// acknowledged messages not yet delivered.
pub fn check_deliveries(
    model: &Model,
    held: &HashMap<String, usize>,
    tool_acks: &ToolAcks,
) -> Result<Vec<String>> {
    for (text, n) in held {
        if *n > 1 {
            bail!("delivered {n} times: {text:?}");
        }
    }
    let mut waiting: Vec<String> = model
        .messages
        .iter()
        .filter(|b| !held.contains_key(*b))
        .cloned()
        .collect();
    let named = |needle: &str| {
        held.keys()
            .filter(|t| t.lines().next().is_some_and(|h| h.contains(needle)))
            .count()
    };
    for id in &tool_acks.messages {
        match named(&format!("· {id}]")) {
            0 => waiting.push(id.clone()),
            1 => {}
            n => bail!("agent message {id} delivered {n} times"),
        }
    }
    for id in &tool_acks.timers {
        match named(&format!("timer {id} fired")) {
            0 => waiting.push(id.clone()),
            1 => {}
            n => bail!("timer {id} fired {n} times"),
        }
    }
    // Every task's prompt (`tick-<name>`) at most once; those acknowledged exactly once.
    let mut ticks: HashMap<&str, usize> = HashMap::new();
    for (text, n) in held {
        for line in text.lines().filter(|l| l.starts_with("tick-")) {
            *ticks.entry(line).or_default() += n;
        }
    }
    for (line, n) in &ticks {
        if *n > 1 {
            bail!("scheduled task prompt {line:?} delivered {n} times");
        }
    }
    for prompt in &model.runs {
        if !ticks.contains_key(prompt.as_str()) {
            waiting.push(format!("the run of {prompt}"));
        }
    }
    for (id, answer) in &model.answers {
        let line = format!("A: {answer}");
        match held
            .iter()
            // The whole line: `ans-r1-2` is a prefix of `ans-r1-23`.
            .filter(|(t, _)| t.lines().any(|l| l == line))
            .map(|(_, n)| n)
            .sum()
        {
            0 => waiting.push(format!("the answer to {id}")),
            1 => {}
            n => bail!("the answer to question {id} delivered {n} times"),
        }
    }
    Ok(waiting)
}

/// What the agents' tools returned, read from the tool results in the model's recorded
/// requests: message ids from `message_agent`, timer ids from `timer`, question and report
/// ids from `question` and `report`.
#[derive(Default, Clone)]
pub struct ToolAcks {
    pub messages: HashSet<String>,
    pub timers: HashSet<String>,
    pub questions: HashSet<String>,
    pub reports: HashSet<String>,
}

impl ToolAcks {
    /// Adds what the tool results in `requests` name.
    pub fn absorb(&mut self, requests: &[(String, Value)]) {
        let acks = self;
        for (_, body) in requests {
            for m in body["messages"].as_array().into_iter().flatten() {
                if m["role"] != "tool" {
                    continue;
                }
                let Some(v) = m["content"]
                    .as_str()
                    .and_then(|s| serde_json::from_str::<Value>(s).ok())
                else {
                    continue;
                };
                for (field, set) in [
                    ("message", &mut acks.messages),
                    ("timer", &mut acks.timers),
                    ("question", &mut acks.questions),
                    ("report", &mut acks.reports),
                ] {
                    if let Some(id) = v[field].as_str() {
                        set.insert(id.to_string());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn batch(sessions: Value, requirements: Value, schedules: Value) -> Vec<Value> {
        vec![
            json!({"type":"sessions","sessions":sessions}),
            json!({"type":"workspaces","rev":1,"workspaces":[{"projects":[{"path":"/p/a"}]}]}),
            json!({"type":"schedules","schedules":schedules}),
            json!({"type":"requirements","requirements":requirements}),
        ]
    }

    #[test]
    fn lost_renamed_and_resurrected_records_are_found() {
        let mut m = Model::default();
        m.sessions.insert(
            "s1".into(),
            Session {
                title: Some("t2".into()),
                ..Session::default()
            },
        );
        m.sessions.insert("s2".into(), Session::default());
        m.requirements.insert("R-1".into(), "x".into());
        m.projects.insert("/p/a".into());
        m.projects.insert("/p/b".into());
        m.schedules.insert("k1".into());
        m.deleted_schedules.insert("k2".into());
        let b = batch(
            json!([{"session":"s1","title":"t1"}]),
            json!([{"id":"R-1","text":"x"}]),
            json!([{"name":"k1"},{"name":"k2"}]),
        );
        let problems = check_batch(&m, &b).unwrap();
        assert_eq!(problems.len(), 4, "{problems:?}");
        let fine = batch(
            json!([{"session":"s1","title":"t2"},{"session":"s2"}]),
            json!([{"id":"R-1","text":"x"}]),
            json!([{"name":"k1"}]),
        );
        m.projects.remove("/p/b");
        assert!(check_batch(&m, &fine).unwrap().is_empty());
    }

    #[test]
    fn a_second_delivery_fails_and_undelivered_ones_wait() {
        let mut m = Model::default();
        m.messages.insert("hello".into());
        let none = ToolAcks::default();
        let held = HashMap::from([("hello".to_string(), 2)]);
        assert!(check_deliveries(&m, &held, &none).is_err());
        let held = HashMap::new();
        assert_eq!(check_deliveries(&m, &held, &none).unwrap(), vec!["hello"]);
        m.messages.clear();
        m.answers.insert("q-1".into(), "ans-1".into());
        let once = HashMap::from([("[question · q-1]\nQ: t\nA: ans-1".to_string(), 1)]);
        assert!(check_deliveries(&m, &once, &none).unwrap().is_empty());
        let twice = HashMap::from([
            ("[question · q-1]\nQ: t\nA: ans-1".to_string(), 1),
            ("Q: t\nA: ans-1".to_string(), 1),
        ]);
        assert!(check_deliveries(&m, &twice, &none).is_err());
        // A scheduled task's prompt: waited for once run, at most once.
        m.answers.clear();
        m.runs.insert("tick-r1-2".into());
        assert_eq!(
            check_deliveries(&m, &HashMap::new(), &none).unwrap(),
            vec!["the run of tick-r1-2"]
        );
        let ran = HashMap::from([("[schedule · r1-2]\ntick-r1-2".to_string(), 1)]);
        assert!(check_deliveries(&m, &ran, &none).unwrap().is_empty());
        let again = HashMap::from([
            ("[schedule · r1-2]\ntick-r1-2".to_string(), 1),
            ("tick-r1-2".to_string(), 1),
        ]);
        assert!(check_deliveries(&m, &again, &none).is_err());
        m.runs.clear();
        m.answers.insert("q-1".into(), "ans-1".into());
        // Another question's answer that merely starts with this one's is not a second
        // delivery.
        let prefixed = HashMap::from([
            ("[question · q-1]\nQ: t\nA: ans-1".to_string(), 1),
            ("[question · q-2]\nQ: u\nA: ans-12".to_string(), 1),
        ]);
        assert!(check_deliveries(&m, &prefixed, &none).unwrap().is_empty());
    }

    #[test]
    fn lost_questions_reopened_answers_and_unread_reports_are_found() {
        let mut m = Model::default();
        let tools = ToolAcks {
            questions: ["q-1", "q-2", "q-3"].map(String::from).into(),
            reports: ["r-1", "r-2"].map(String::from).into(),
            ..ToolAcks::default()
        };
        m.answers.insert("q-2".into(), "yes".into());
        m.answers.insert("q-3".into(), "no".into());
        m.reports_read.insert("r-1".into());
        let questions =
            json!({"questions":[{"id":"q-2"}],"closed":[{"id":"q-3","answer":"maybe"}]});
        let reports = json!({"reports":[{"id":"r-1","read":false}]});
        let problems = check_items(&m, &tools, &questions, &reports);
        // q-1 lost, q-2 open again, q-3's answer, r-1 unread, r-2 lost.
        assert_eq!(problems.len(), 5, "{problems:?}");
        let questions = json!({"questions":[{"id":"q-1"}],
            "closed":[{"id":"q-2","answer":"yes"},{"id":"q-3","answer":"no"}]});
        let reports = json!({"reports":[{"id":"r-1","read":true},{"id":"r-2","read":false}]});
        assert!(check_items(&m, &tools, &questions, &reports).is_empty());
    }
}
