//! The checks of a restarted daemon against what was acknowledged (`model.rs`). Each returns
//! the problems it found; a delivery seen twice is an error at once.

use std::collections::{HashMap, HashSet};

use anyhow::{Result, bail};
use serde_json::Value;

use super::model::{Action, CLOSE_REASON, DispatchSeen, Model, Shut, ToolAcks};

fn frame<'a>(batch: &'a [Value], kind: &str) -> Result<&'a Value> {
    match batch.iter().find(|f| f["type"] == kind) {
        Some(f) => Ok(f),
        None => bail!("the connect batch has no {kind} frame"),
    }
}

pub(super) fn list<'a>(f: &'a Value, field: &str) -> &'a [Value] {
    f[field].as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// The `id`s of the entries of `f[field]`.
pub(super) fn ids<'a>(f: &'a Value, field: &str) -> HashSet<&'a str> {
    list(f, field)
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect()
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
    // The model keeps "<id> <name>"; a task due by the clock is named as its prompt.
    let kept = model
        .schedules
        .iter()
        .map(|e| e.rsplit(' ').next().unwrap_or(e));
    let repeating = model.repeating.values().map(|t| t.name.as_str());
    for name in kept
        .chain(model.due.keys().map(String::as_str))
        .chain(repeating)
    {
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
    let open = ids(questions, "questions");
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

/// The deferrals a daemon since killed told the model of that `frame` does not list. A kill
/// between the engine's record and the daemon's leaves one unlisted until its session starts
/// again (the engine announces its open actions then): checked at the end of the run.
pub fn unlisted_told(model: &Model, frame: &Value) -> Vec<String> {
    let mut listed = ids(frame, "actions");
    listed.extend(ids(frame, "closed"));
    let mut out: Vec<String> = model
        .told_deferred
        .iter()
        .filter(|id| !listed.contains(id.as_str()))
        .cloned()
        .collect();
    out.sort();
    out
}

/// The connect batch's `actions` frame and the runs file against what was acknowledged:
/// every action listed once is listed;
/// an acknowledged decision stuck (decided that way, not open again), one sent but not
/// acknowledged is that decision or still open, one never sent is open; no command ran twice,
/// and none ran that was not allowed. `runs` counts each line of the runs file.
pub fn check_actions(model: &Model, frame: &Value, runs: &HashMap<String, usize>) -> Vec<String> {
    let mut problems = Vec::new();
    let open = ids(frame, "actions");
    let closed: HashMap<&str, &str> = list(frame, "closed")
        .iter()
        .filter_map(|a| Some((a["id"].as_str()?, a["closed_reason"].as_str().unwrap_or(""))))
        .collect();
    for (id, seen) in &model.actions {
        let word = |allow: bool| if allow { "allow" } else { "deny" };
        let is_open = open.contains(id.as_str());
        let reason = closed.get(id.as_str()).copied();
        match (seen.state, is_open, reason) {
            (_, false, None) => problems.push(format!("listed deferred action {id} lost")),
            (Action::Listed, true, _) => {}
            (Action::Listed, false, Some(r)) => {
                problems.push(format!(
                    "deferred action {id} never decided is closed ({r})"
                ));
            }
            (Action::Deciding(_), true, _) => {}
            (Action::Decided(allow), true, _) => problems.push(format!(
                "deferred action {id} decided {} is pending again",
                word(allow)
            )),
            (Action::Deciding(allow) | Action::Decided(allow), false, Some(r)) => {
                if r != word(allow) {
                    problems.push(format!(
                        "deferred action {id}: closed as {r}, decided {}",
                        word(allow)
                    ));
                }
            }
            (Action::Shut(shut), is_open, reason) => {
                if let Some(p) = shut_problem("deferred action", id, shut, is_open, reason) {
                    problems.push(p);
                }
            }
        }
        let ran = runs.get(&seen.mark).copied().unwrap_or(0);
        if ran > 1 {
            problems.push(format!("deferred action {id} ran {ran} times"));
        } else if ran == 1 && seen.state.decision() != Some(true) {
            problems.push(format!("deferred action {id} ran, never allowed"));
        }
    }
    problems
}

/// The commands of the dispatch tasks that ran (`runs` counts each line of the runs file)
/// and were never a deferred action the daemon listed: each asked for an approval nobody
/// gave, so none may run. (A task's session started again after a kill is no longer marked
/// attended, so its call may come back deferred; whether one of those ran rightly is
/// `check_actions`' to judge.)
pub fn unapproved_runs(model: &Model, runs: &HashMap<String, usize>) -> Vec<String> {
    let mut out: Vec<String> = runs
        .keys()
        .filter(|mark| mark.starts_with("ran-dtask-"))
        .filter(|mark| !model.actions.values().any(|a| &a.mark == *mark))
        .map(|mark| format!("{mark}: a task's command ran, nobody approved it"))
        .collect();
    out.sort();
    out
}

/// What is wrong with an item the client closed or reopened (`shut`), listed open or not, and
/// closed with `reason` if it is listed closed; `None` when nothing.
pub fn shut_problem(
    what: &str,
    id: &str,
    shut: Shut,
    is_open: bool,
    reason: Option<&str>,
) -> Option<String> {
    match (shut.must_be_open(), is_open, reason) {
        (Some(false), true, _) => Some(format!("{what} {id} was closed and is open again")),
        (Some(true), false, _) => Some(format!("{what} {id} was reopened and is closed")),
        (_, false, Some(r)) if r != CLOSE_REASON => Some(format!(
            "{what} {id} is closed as {r:?}, the client closed it as {CLOSE_REASON:?}"
        )),
        _ => None,
    }
}

/// The connect batch's `dispatches` frame against what was acknowledged: every dispatch is
/// listed with its text and at most its planned tasks; each task keeps the session it was
/// first seen with, no two tasks share one, and a task done had its text delivered. Notes
/// each task's session in the model.
pub fn check_dispatches(
    model: &mut Model,
    frame: &Value,
    held: &HashMap<String, usize>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let listed: HashMap<&str, &Value> = list(frame, "dispatches")
        .iter()
        .filter_map(|d| Some((d["id"].as_str()?, d)))
        .collect();
    for (id, want) in &model.dispatches {
        match listed.get(id.as_str()) {
            None => problems.push(format!("acknowledged dispatch {id} lost")),
            Some(d) if d["text"].as_str() != Some(&want.text) => {
                problems.push(format!("dispatch {id}: text {}", d["text"]));
            }
            Some(d) if list(d, "tasks").len() > want.tasks.len() => problems.push(format!(
                "dispatch {id}: {} tasks, {} planned",
                list(d, "tasks").len(),
                want.tasks.len()
            )),
            Some(_) => {}
        }
        if let Some(d) = listed.get(id.as_str()) {
            problems.extend(plan_problems(id, want, d, held));
        }
    }
    let mut owner: HashMap<&str, (String, u64)> = HashMap::new();
    for (id, d) in &listed {
        for t in list(d, "tasks") {
            let (Some(n), Some(session)) = (t["id"].as_u64(), t["session"].as_str()) else {
                continue;
            };
            let key = (id.to_string(), n);
            if let Some((d2, n2)) = owner.insert(session, key.clone()) {
                problems.push(format!(
                    "session {session} holds task {n} of {id} and task {n2} of {d2}"
                ));
            }
            match model.task_sessions.get(&key) {
                Some(first) if first != session => problems.push(format!(
                    "task {n} of dispatch {id} started again: session {session}, first {first}"
                )),
                Some(_) => {}
                None => {
                    model.task_sessions.insert(key, session.to_string());
                }
            }
            let text = model
                .dispatches
                .get(*id)
                .and_then(|w| w.tasks.get(n.saturating_sub(1) as usize));
            if t["status"] == "done"
                && let Some(text) = text
                && !held.contains_key(text)
            {
                problems.push(format!("task {n} of dispatch {id} is done, never sent"));
            }
        }
    }
    problems
}

/// A dispatch that waits for its plan to be confirmed: no task started nor sent before an
/// approval was sent, one turned down (acknowledged) is cancelled, one approved
/// (acknowledged) no longer waits.
fn plan_problems(
    id: &str,
    want: &DispatchSeen,
    listed: &Value,
    held: &HashMap<String, usize>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let status = listed["status"].as_str().unwrap_or("?");
    if !want.may_start() {
        for t in list(listed, "tasks") {
            if t["session"].is_string() {
                problems.push(format!(
                    "task {} of dispatch {id} started, its plan never approved",
                    t["id"]
                ));
            }
        }
        for text in want.tasks.iter().filter(|t| held.contains_key(*t)) {
            problems.push(format!(
                "dispatch {id}: {text} was sent, its plan never approved"
            ));
        }
    }
    match want.confirm {
        Some((false, true)) if status != "cancelled" => {
            problems.push(format!("dispatch {id} was turned down and is {status}"));
        }
        Some((true, true)) if matches!(status, "planning" | "awaiting" | "cancelled") => {
            problems.push(format!("dispatch {id} was approved and is {status}"));
        }
        _ => {}
    }
    problems
}

/// Deliveries seen by the engine (its saved conversations): nothing twice; and the
/// acknowledged deliveries not made yet. `runs` counts each line of the runs file.
pub fn check_deliveries(
    model: &Model,
    held: &HashMap<String, usize>,
    tool_acks: &ToolAcks,
    runs: &HashMap<String, usize>,
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
    // Every task's prompt (`tick-<name>` run by hand, `due-<tag>` by the clock) at most
    // once; those acknowledged exactly once.
    let mut ticks: HashMap<&str, usize> = HashMap::new();
    for (text, n) in held {
        for line in text
            .lines()
            .filter(|l| l.starts_with("tick-") || l.starts_with("due-"))
        {
            *ticks.entry(line).or_default() += n;
        }
    }
    for (line, n) in &ticks {
        if *n > 1 {
            bail!("scheduled task prompt {line:?} delivered {n} times");
        }
    }
    for prompt in model.runs.iter().chain(model.due.keys()) {
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
    // A decision reaches its session as one message naming the action. An allowed command
    // runs at most once (`check_actions`): once when the message says it ran; not known
    // when a kill came between the decision and its outcome, and not run again.
    for (id, seen) in &model.actions {
        let head = format!("[deferred action {id} ");
        let told: Vec<&String> = held.keys().filter(|t| t.starts_with(&head)).collect();
        if told.len() > 1 {
            bail!(
                "the decision on {id} reached its session {} times",
                told.len()
            );
        }
        if !told.is_empty() && seen.state.decision().is_none() {
            bail!("deferred action {id} was never decided and its session heard a decision");
        }
        let ran = runs.get(&seen.mark).copied().unwrap_or(0);
        if told
            .iter()
            .any(|t| t.starts_with(&format!("{head}approved and executed")))
            && ran != 1
        {
            bail!("the session heard that {id} ran, and it ran {ran} times");
        }
        if told.is_empty() && matches!(seen.state, Action::Decided(_)) {
            waiting.push(format!("the decision on {id}"));
        }
    }
    Ok(waiting)
}

#[cfg(test)]
mod tests {
    use super::super::model::{ActionSeen, Session};
    use super::*;
    use serde_json::json;

    /// An action of session `s1` whose command writes `mark`.
    fn seen(state: Action, mark: &str) -> ActionSeen {
        ActionSeen {
            state,
            session: "s1".into(),
            mark: mark.into(),
        }
    }

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
        m.due.insert("due-r1-1".into(), 60);
        let b = batch(
            json!([{"session":"s1","title":"t1"}]),
            json!([{"id":"R-1","text":"x"}]),
            json!([{"name":"k1"},{"name":"k2"}]),
        );
        let problems = check_batch(&m, &b).unwrap();
        // s1's title, s2 lost, /p/b lost, k2 back, due-r1-1 lost.
        assert_eq!(problems.len(), 5, "{problems:?}");
        let fine = batch(
            json!([{"session":"s1","title":"t2"},{"session":"s2"}]),
            json!([{"id":"R-1","text":"x"}]),
            json!([{"name":"k1"},{"name":"due-r1-1"}]),
        );
        m.projects.remove("/p/b");
        assert!(check_batch(&m, &fine).unwrap().is_empty());
    }

    #[test]
    fn a_second_delivery_fails_and_undelivered_ones_wait() {
        let mut m = Model::default();
        let runs = HashMap::new();
        m.messages.insert("hello".into());
        let none = ToolAcks::default();
        let held = HashMap::from([("hello".to_string(), 2)]);
        assert!(check_deliveries(&m, &held, &none, &runs).is_err());
        let held = HashMap::new();
        assert_eq!(
            check_deliveries(&m, &held, &none, &runs).unwrap(),
            vec!["hello"]
        );
        m.messages.clear();
        m.answers.insert("q-1".into(), "ans-1".into());
        let once = HashMap::from([("[question · q-1]\nQ: t\nA: ans-1".to_string(), 1)]);
        assert!(
            check_deliveries(&m, &once, &none, &runs)
                .unwrap()
                .is_empty()
        );
        let twice = HashMap::from([
            ("[question · q-1]\nQ: t\nA: ans-1".to_string(), 1),
            ("Q: t\nA: ans-1".to_string(), 1),
        ]);
        assert!(check_deliveries(&m, &twice, &none, &runs).is_err());
        // A scheduled task's prompt: waited for once run, at most once.
        m.answers.clear();
        m.runs.insert("tick-r1-2".into());
        assert_eq!(
            check_deliveries(&m, &HashMap::new(), &none, &runs).unwrap(),
            vec!["the run of tick-r1-2"]
        );
        let ran = HashMap::from([("[schedule · r1-2]\ntick-r1-2".to_string(), 1)]);
        assert!(check_deliveries(&m, &ran, &none, &runs).unwrap().is_empty());
        let again = HashMap::from([
            ("[schedule · r1-2]\ntick-r1-2".to_string(), 1),
            ("tick-r1-2".to_string(), 1),
        ]);
        assert!(check_deliveries(&m, &again, &none, &runs).is_err());
        // One due by the clock likewise.
        m.runs.clear();
        m.due.insert("due-r1-3".into(), 60);
        assert_eq!(
            check_deliveries(&m, &HashMap::new(), &none, &runs).unwrap(),
            vec!["the run of due-r1-3"]
        );
        let twice = HashMap::from([("a\ndue-r1-3".to_string(), 1), ("b\ndue-r1-3".into(), 1)]);
        assert!(check_deliveries(&m, &twice, &none, &runs).is_err());
        m.due.clear();
        m.answers.insert("q-1".into(), "ans-1".into());
        // Another question's answer that merely starts with this one's is not a second
        // delivery.
        let prefixed = HashMap::from([
            ("[question · q-1]\nQ: t\nA: ans-1".to_string(), 1),
            ("[question · q-2]\nQ: u\nA: ans-12".to_string(), 1),
        ]);
        assert!(
            check_deliveries(&m, &prefixed, &none, &runs)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_decision_is_waited_for_and_heard_once_and_a_command_runs_once() {
        let mut m = Model::default();
        let none = ToolAcks::default();
        m.actions
            .insert("act-1".into(), seen(Action::Decided(true), "ran-r1-1"));
        let nothing = HashMap::new();
        assert_eq!(
            check_deliveries(&m, &nothing, &none, &nothing).unwrap(),
            vec!["the decision on act-1"]
        );
        let told = HashMap::from([(
            "[deferred action act-1 approved and executed]\n`bash`".to_string(),
            1,
        )]);
        let ran = HashMap::from([("ran-r1-1".to_string(), 1)]);
        assert!(check_deliveries(&m, &told, &none, &ran).unwrap().is_empty());
        // Told it ran, and it did not.
        assert!(check_deliveries(&m, &told, &none, &nothing).is_err());
        // Its outcome cut off by a kill: heard once, run or not.
        let unknown = HashMap::from([(
            "[deferred action act-1 approved, outcome unknown]\n`bash`".to_string(),
            1,
        )]);
        assert!(
            check_deliveries(&m, &unknown, &none, &nothing)
                .unwrap()
                .is_empty()
        );
        let twice = HashMap::from([
            (
                "[deferred action act-1 approved and executed]\nx".to_string(),
                1,
            ),
            (
                "[deferred action act-1 approved, outcome unknown]\ny".to_string(),
                1,
            ),
        ]);
        assert!(check_deliveries(&m, &twice, &none, &ran).is_err());
        // Never decided, yet told.
        m.actions
            .insert("act-1".into(), seen(Action::Listed, "ran-r1-1"));
        assert!(check_deliveries(&m, &told, &none, &nothing).is_err());
    }

    #[test]
    fn lost_reopened_and_rerun_actions_are_found() {
        let mut m = Model::default();
        m.actions
            .insert("a1".into(), seen(Action::Decided(true), "ran-1"));
        m.actions
            .insert("a2".into(), seen(Action::Decided(false), "ran-2"));
        m.actions.insert("a3".into(), seen(Action::Listed, "ran-3"));
        m.actions
            .insert("a4".into(), seen(Action::Deciding(true), "ran-4"));
        m.told_deferred.insert("a5".into());
        let frame = json!({"actions":[{"id":"a1"}],"closed":[
            {"id":"a2","closed_reason":"allow"},{"id":"a4","closed_reason":"allow"}]});
        let runs = HashMap::from([("ran-1".to_string(), 2), ("ran-2".to_string(), 1)]);
        let problems = check_actions(&m, &frame, &runs);
        // a1 pending again and ran twice, a2 closed as allow and ran, a3 lost.
        assert_eq!(problems.len(), 5, "{problems:?}");
        assert_eq!(unlisted_told(&m, &frame), vec!["a5"]);
        let frame = json!({"actions":[{"id":"a3"},{"id":"a4"},{"id":"a5"}],"closed":[
            {"id":"a1","closed_reason":"allow"},{"id":"a2","closed_reason":"deny"}]});
        let runs = HashMap::from([("ran-1".to_string(), 1), ("ran-4".to_string(), 1)]);
        assert!(check_actions(&m, &frame, &runs).is_empty());
        assert!(unlisted_told(&m, &frame).is_empty());
    }

    #[test]
    fn actions_the_client_closed_stay_closed_and_reopened_ones_open() {
        let mut m = Model::default();
        m.actions
            .insert("a1".into(), seen(Action::Shut(Shut::Closed), "ran-1"));
        m.actions
            .insert("a2".into(), seen(Action::Shut(Shut::Closing), "ran-2"));
        m.actions
            .insert("a3".into(), seen(Action::Shut(Shut::Reopening), "ran-3"));
        let shut = json!({"closed_reason": CLOSE_REASON});
        let closed = |id: &str| {
            let mut a = shut.clone();
            a["id"] = json!(id);
            a
        };
        let fine = json!({"actions":[{"id":"a2"}],"closed":[closed("a1"), closed("a3")]});
        assert!(check_actions(&m, &fine, &HashMap::new()).is_empty());
        // a1 open again; a2 closed as allowed; a3 lost; and a1's command ran.
        let wrong = json!({"actions":[{"id":"a1"}],"closed":[
            {"id":"a2","closed_reason":"allow"}]});
        let runs = HashMap::from([("ran-1".to_string(), 1)]);
        assert_eq!(check_actions(&m, &wrong, &runs).len(), 4);
        // A dispatch task's command, which nobody approved; one deferred and listed is
        // check_actions' to judge.
        assert!(unapproved_runs(&m, &runs).is_empty());
        let task = HashMap::from([("ran-dtask-r1-2-1".to_string(), 1)]);
        assert_eq!(unapproved_runs(&m, &task).len(), 1);
        m.actions
            .insert("a4".into(), seen(Action::Decided(true), "ran-dtask-r1-2-1"));
        assert!(unapproved_runs(&m, &task).is_empty());
        // Heard a decision though none was sent.
        let told = HashMap::from([("[deferred action a1 declined]\nx".to_string(), 1)]);
        assert!(check_deliveries(&m, &told, &ToolAcks::default(), &HashMap::new()).is_err());
    }

    #[test]
    fn no_task_of_a_plan_starts_before_it_is_approved() {
        let want = |confirm| DispatchSeen {
            text: "plan".into(),
            tasks: vec!["dtask-1".into()],
            plan: true,
            confirm,
        };
        let waiting = json!({"status":"awaiting","tasks":[{"id":1,"session":null}]});
        let started = json!({"status":"running","tasks":[{"id":1,"session":"s1"}]});
        let none = HashMap::new();
        let sent = HashMap::from([("dtask-1".to_string(), 1)]);
        assert!(plan_problems("d1", &want(None), &waiting, &none).is_empty());
        // Started and sent, never approved.
        assert_eq!(plan_problems("d1", &want(None), &started, &sent).len(), 2);
        assert_eq!(
            plan_problems("d1", &want(Some((false, false))), &started, &none).len(),
            1
        );
        // Turned down: cancelled, not waiting still.
        assert_eq!(
            plan_problems("d1", &want(Some((false, true))), &waiting, &none).len(),
            1
        );
        let cancelled = json!({"status":"cancelled","tasks":[{"id":1,"session":null}]});
        assert!(plan_problems("d1", &want(Some((false, true))), &cancelled, &none).is_empty());
        // Approved: started, not waiting still.
        assert!(plan_problems("d1", &want(Some((true, true))), &started, &sent).is_empty());
        assert_eq!(
            plan_problems("d1", &want(Some((true, true))), &waiting, &none).len(),
            1
        );
        assert!(plan_problems("d1", &want(Some((true, false))), &waiting, &none).is_empty());
    }

    #[test]
    fn a_lost_dispatch_and_a_task_started_twice_are_found() {
        let mut m = Model::default();
        m.dispatches.insert(
            "d1".into(),
            DispatchSeen {
                text: "plan".into(),
                tasks: vec!["dtask-1".into(), "dtask-2".into()],
                plan: false,
                confirm: None,
            },
        );
        m.dispatches.insert(
            "d2".into(),
            DispatchSeen {
                text: "other".into(),
                tasks: vec![],
                plan: false,
                confirm: None,
            },
        );
        let held = HashMap::from([("dtask-1".to_string(), 1)]);
        let first = json!({"dispatches":[{"id":"d1","text":"plan","tasks":[
            {"id":1,"session":"s1","status":"done"},{"id":2,"session":"s2","status":"sent"}]}]});
        // d2 lost.
        assert_eq!(check_dispatches(&mut m, &first, &held).len(), 1);
        m.dispatches.remove("d2");
        assert!(check_dispatches(&mut m, &first, &held).is_empty());
        let again = json!({"dispatches":[{"id":"d1","text":"plan","tasks":[
            {"id":1,"session":"s1","status":"done"},{"id":2,"session":"s3","status":"done"}]}]});
        // Task 2 in a new session, and done though its text never arrived.
        assert_eq!(check_dispatches(&mut m, &again, &held).len(), 2);
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
