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
    "device_pair",
    "agent_message",
    "agent_timer",
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
    pub device_tokens: Vec<String>,
    /// Bodies of `message_send`s answered `message_accepted`.
    pub messages: HashSet<String>,
    pub acked: BTreeMap<&'static str, u64>,
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

/// Deliveries seen by the engine (its saved conversations): nothing twice; and the
/// acknowledged messages not yet delivered.
pub fn check_deliveries(
    model: &Model,
    held: &HashMap<String, usize>,
    tool_acks: &(HashSet<String>, HashSet<String>),
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
    for id in &tool_acks.0 {
        match named(&format!("· {id}]")) {
            0 => waiting.push(id.clone()),
            1 => {}
            n => bail!("agent message {id} delivered {n} times"),
        }
    }
    for id in &tool_acks.1 {
        match named(&format!("timer {id} fired")) {
            0 => waiting.push(id.clone()),
            1 => {}
            n => bail!("timer {id} fired {n} times"),
        }
    }
    Ok(waiting)
}

/// What the model saw acknowledged by its tools: message ids `message_agent` returned, timer
/// ids `timer` set returned (the tool results in the recorded requests).
pub fn tool_acks(requests: &[(String, Value)]) -> (HashSet<String>, HashSet<String>) {
    let (mut messages, mut timers) = (HashSet::new(), HashSet::new());
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
        let none = (HashSet::new(), HashSet::new());
        let held = HashMap::from([("hello".to_string(), 2)]);
        assert!(check_deliveries(&m, &held, &none).is_err());
        let held = HashMap::new();
        assert_eq!(check_deliveries(&m, &held, &none).unwrap(), vec!["hello"]);
    }
}
