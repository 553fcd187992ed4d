//! Ops on the agents' work: messages whose `CALL` script makes agent `a` message, set a
//! timer, ask, report or propose a requirement; answers and read marks; calls agent `d`
//! (manual mode, nobody watching) must defer, and their decisions; dispatches planned by the
//! fake dispatcher, some waiting for the client to confirm their plan.

use anyhow::Result;
use serde_json::{Value, json};

use super::Round;
use crate::crashloop::model::{Action, ActionSeen, DispatchSeen};
use crate::crashloop::verify::lock;

pub async fn op(r: &mut Round, kind: &'static str, tag: String) -> Result<()> {
    match kind {
        "question_answer" | "report_read" => read_or_answer(r, kind, tag).await,
        "action_listed" => list_actions(r).await,
        "action_decide" => decide(r).await,
        "dispatch_send" => dispatch(r, tag).await,
        "dispatch_confirm" => confirm(r).await,
        _ => agent_turn(r, kind, tag).await,
    }
}

/// A message to an agent whose script makes it use a tool: few of these, each a model turn.
async fn agent_turn(r: &mut Round, kind: &'static str, tag: String) -> Result<()> {
    if r.rng.below(3) != 0 {
        return Ok(());
    }
    let (agent, body) = match kind {
        "agent_message" => (
            "a",
            format!(r#"CALL message_agent {{"agent":"b","body":"relay-{tag}"}}"#),
        ),
        "agent_timer" => (
            "a",
            format!(r#"CALL timer {{"action":"set","in_seconds":1,"body":"wake-{tag}"}}"#),
        ),
        // A day to answer: no default is delivered within the run.
        "agent_question" => (
            "a",
            format!(
                r#"CALL question {{"title":"q-{tag}","default":"go on","due_in_seconds":86400}}"#
            ),
        ),
        "agent_report" => (
            "a",
            format!(r#"CALL report {{"title":"rep-{tag}","body":"done"}}"#),
        ),
        // A proposal the client may accept or decline (`items.rs`).
        "agent_requirement" => (
            "a",
            format!(
                r#"CALL requirements {{"action":"propose_create","text":"prop-{tag}","reason":"the crash loop"}}"#
            ),
        ),
        // An escalated command in manual mode needs a person; nobody watches, so it is
        // deferred.
        _ => ("d", escalated_call(r, &tag)),
    };
    let reply =
        r.c.request(json!({"op":"message_send","agent":agent,"body":body}))
            .await?;
    if reply["type"] == "message_accepted" {
        let mut m = lock(&r.model);
        m.messages.insert(body);
        m.ack(kind);
    }
    Ok(())
}

/// A `CALL` of `bash`, escalated: in manual mode it needs a person (deferred when nobody
/// watches), and allowed, it appends its mark (`ran-<tag>`) to the runs file once.
fn escalated_call(r: &Round, tag: &str) -> String {
    let command = format!("echo ran-{tag} >> {}; echo ok", r.runs_file.display());
    let args = json!({"command":command,"escalate":true,"justification":"the crash loop"});
    format!("CALL bash {args}")
}

async fn read_or_answer(r: &mut Round, kind: &'static str, tag: String) -> Result<()> {
    let (list_op, field) = if kind == "question_answer" {
        ("question_list", "questions")
    } else {
        ("report_list", "reports")
    };
    let listed = r.c.request(json!({"op":list_op})).await?;
    let ids: Vec<String> = {
        let m = lock(&r.model);
        listed[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|i| i["read"] != true)
            .filter_map(|i| i["id"].as_str())
            .filter(|id| !m.answers.contains_key(*id) && !m.reports_read.contains(*id))
            .map(String::from)
            .collect()
    };
    let Some(id) = r.pick(ids) else {
        return Ok(());
    };
    if kind == "question_answer" {
        let answer = format!("ans-{tag}");
        // From here on it may be answered, whatever else the client did to it.
        lock(&r.model).answers_sent.insert(id.clone());
        let reply =
            r.c.request(json!({"op":"question_answer","question":id,"answer":answer}))
                .await?;
        if reply["type"] == "question_answered" {
            let mut m = lock(&r.model);
            m.answers.insert(id, answer);
            m.ack(kind);
        }
    } else {
        let reply = r.c.request(json!({"op":"report_read","report":id})).await?;
        if reply["type"] == "report_read" {
            let mut m = lock(&r.model);
            m.reports_read.insert(id);
            m.ack(kind);
        }
    }
    Ok(())
}

/// The mark (`ran-<tag>`) in a deferred action's command.
fn mark_of(action: &Value) -> String {
    let args = action["arguments"].as_str().unwrap_or_default();
    args.find("ran-")
        .map(|at| {
            args[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect()
        })
        .unwrap_or_default()
}

/// `actions_list`: an open action listed is recorded, so from now on it must stay listed.
async fn list_actions(r: &mut Round) -> Result<()> {
    let listed = r.c.request(json!({"op":"actions_list"})).await?;
    let mut m = lock(&r.model);
    for a in listed["actions"].as_array().into_iter().flatten() {
        let (Some(id), Some(session)) = (a["id"].as_str(), a["session_id"].as_str()) else {
            continue;
        };
        if !m.actions.contains_key(id) {
            m.actions.insert(
                id.to_string(),
                ActionSeen {
                    state: Action::Listed,
                    session: session.to_string(),
                    mark: mark_of(a),
                },
            );
            m.ack("action_listed");
        }
    }
    Ok(())
}

/// `decide_action` on an action listed and not decided, allow or deny. It has no reply of its
/// own: the `actions_list` after it (ops of a connection are handled in order) showing it
/// decided that way acknowledges it.
async fn decide(r: &mut Round) -> Result<()> {
    let open: Vec<(String, String)> = lock(&r.model)
        .actions
        .iter()
        .filter(|(_, a)| a.state == Action::Listed)
        .map(|(id, a)| (id.clone(), a.session.clone()))
        .collect();
    let Some((id, session)) = r.pick(open) else {
        return Ok(());
    };
    let allow = r.rng.below(2) == 0;
    let word = if allow { "allow" } else { "deny" };
    if let Some(a) = lock(&r.model).actions.get_mut(&id) {
        a.state = Action::Deciding(allow);
    }
    r.c.send(json!({"op":"decide_action","session":session,"action":id,"decision":word}))
        .await?;
    let listed = r.c.request(json!({"op":"actions_list"})).await?;
    let decided = listed["closed"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|a| a["id"] == id.as_str() && a["closed_reason"] == word);
    if decided {
        let mut m = lock(&r.model);
        if let Some(a) = m.actions.get_mut(&id) {
            a.state = Action::Decided(allow);
        }
        m.ack("action_decide");
    }
    Ok(())
}

/// `dispatch_send` of a plan of one or two tasks in an acknowledged project: the fake
/// dispatcher calls its tool with the plan as written, and each task's text (`dtask-…`, or an
/// escalated call) goes to a new session. Few of these: each is three or more model turns.
async fn dispatch(r: &mut Round, tag: String) -> Result<()> {
    if r.rng.below(4) != 0 {
        return Ok(());
    }
    let projects: Vec<String> = lock(&r.model).projects.iter().cloned().collect();
    let Some(project) = r.pick(projects) else {
        return Ok(());
    };
    // One in three runs its tasks in manual mode, each task an escalated call: a task's
    // session is marked attended, so the call waits for an `approve` nobody sends, across
    // every kill; its command must never run (`checks::unapproved_runs`).
    let manual = r.rng.below(3) == 0;
    let titles: Vec<String> = (1..=1 + r.rng.below(2))
        .map(|n| format!("dtask-{tag}-{n}"))
        .collect();
    let texts: Vec<String> = titles
        .iter()
        .map(|t| {
            if manual {
                escalated_call(r, t)
            } else {
                t.clone()
            }
        })
        .collect();
    let tasks: Vec<Value> = titles
        .iter()
        .zip(&texts)
        .map(|(title, text)| json!({"title":title,"project":project,"text":text}))
        .collect();
    let text = format!("CALL dispatch {}", json!({"action":"plan","tasks":tasks}));
    // Half of them wait for the client to confirm the plan (`confirm`).
    let plan = r.rng.below(2) == 0;
    let mode = if manual { "manual" } else { "auto" };
    let reply =
        r.c.request(json!({"op":"dispatch_send","text":text,"approval_mode":mode,"plan":plan}))
            .await?;
    if reply["type"] == "dispatch_started"
        && let Some(id) = reply["dispatch"].as_str()
    {
        let mut m = lock(&r.model);
        m.dispatches.insert(
            id.to_string(),
            DispatchSeen {
                text,
                tasks: texts,
                plan,
                confirm: None,
            },
        );
        m.ack("dispatch_send");
    }
    Ok(())
}

/// `dispatch_confirm` of a plan waiting for it: approved (its tasks start) or turned down
/// (none ever starts).
async fn confirm(r: &mut Round) -> Result<()> {
    let listed = r.c.request(json!({"op":"dispatch_list"})).await?;
    let awaiting: Vec<String> = {
        let m = lock(&r.model);
        listed["dispatches"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| d["status"] == "awaiting")
            .filter_map(|d| d["id"].as_str())
            .filter(|id| m.dispatches.get(*id).is_some_and(|d| d.confirm.is_none()))
            .map(String::from)
            .collect()
    };
    let Some(id) = r.pick(awaiting) else {
        return Ok(());
    };
    let approve = r.rng.below(2) == 0;
    if let Some(d) = lock(&r.model).dispatches.get_mut(&id) {
        d.confirm = Some((approve, false));
    }
    let reply =
        r.c.request(json!({"op":"dispatch_confirm","dispatch":id,"approve":approve}))
            .await?;
    if reply["type"] == "dispatch_confirmed" {
        let mut m = lock(&r.model);
        if let Some(d) = m.dispatches.get_mut(&id) {
            d.confirm = Some((approve, true));
        }
        m.ack("dispatch_confirm");
    }
    Ok(())
}
