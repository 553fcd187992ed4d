//! The client's side of what the agents left: deferred actions and questions closed without
//! an answer (`item_close`) and reopened (`item_reopen`), and the agents' proposed
//! requirements accepted or declined (`requirement_proposal`).

use anyhow::Result;
use serde_json::{Value, json};

use super::Round;
use crate::crashloop::model::{Action, CLOSE_REASON, Shut};
use crate::crashloop::verify::lock;

pub async fn op(r: &mut Round, kind: &'static str) -> Result<()> {
    match kind {
        "proposal_decide" => decide_proposal(r).await,
        _ if r.rng.below(2) == 0 => action(r, kind).await,
        _ => question(r, kind).await,
    }
}

/// Closes an action listed and not decided, or reopens one the client closed.
async fn action(r: &mut Round, kind: &'static str) -> Result<()> {
    let closing = kind == "item_close";
    let want = if closing {
        Action::Listed
    } else {
        Action::Shut(Shut::Closed)
    };
    let ids: Vec<String> = lock(&r.model)
        .actions
        .iter()
        .filter(|(_, a)| a.state == want)
        .map(|(id, _)| id.clone())
        .collect();
    let Some(id) = r.pick(ids) else {
        return Ok(());
    };
    let (sent, acked) = if closing {
        (Shut::Closing, Action::Shut(Shut::Closed))
    } else {
        (Shut::Reopening, Action::Listed)
    };
    if let Some(a) = lock(&r.model).actions.get_mut(&id) {
        a.state = Action::Shut(sent);
    }
    if send(r, kind, "action", &id).await? {
        let mut m = lock(&r.model);
        if let Some(a) = m.actions.get_mut(&id) {
            a.state = acked;
        }
        m.ack(kind);
    }
    Ok(())
}

/// Closes an open question nobody answered, or reopens one the client closed.
async fn question(r: &mut Round, kind: &'static str) -> Result<()> {
    let closing = kind == "item_close";
    let ids: Vec<String> = if closing {
        let listed = r.c.request(json!({"op":"question_list"})).await?;
        let m = lock(&r.model);
        listed["questions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|q| q["id"].as_str())
            .filter(|id| !m.answers.contains_key(*id))
            .filter(|id| {
                m.questions_shut
                    .get(*id)
                    .is_none_or(|s| *s == Shut::Reopened)
            })
            .map(String::from)
            .collect()
    } else {
        lock(&r.model)
            .questions_shut
            .iter()
            .filter(|(_, s)| **s == Shut::Closed)
            .map(|(id, _)| id.clone())
            .collect()
    };
    let Some(id) = r.pick(ids) else {
        return Ok(());
    };
    let (sent, acked) = if closing {
        (Shut::Closing, Shut::Closed)
    } else {
        (Shut::Reopening, Shut::Reopened)
    };
    lock(&r.model).questions_shut.insert(id.clone(), sent);
    if send(r, kind, "question", &id).await? {
        let mut m = lock(&r.model);
        m.questions_shut.insert(id, acked);
        m.ack(kind);
    }
    Ok(())
}

/// `item_close` (with [`CLOSE_REASON`]) or `item_reopen`; whether its reply arrived.
async fn send(r: &mut Round, kind: &str, item_kind: &str, id: &str) -> Result<bool> {
    let mut op = json!({"op":kind,"kind":item_kind,"item":id});
    let reply_type = if kind == "item_close" {
        op["reason"] = Value::from(CLOSE_REASON);
        "item_closed"
    } else {
        "item_reopened"
    };
    let reply = r.c.request(op).await?;
    Ok(reply["type"] == reply_type)
}

/// Accepts or declines a requirement an agent proposed (`propose_create`) and nobody decided.
async fn decide_proposal(r: &mut Round) -> Result<()> {
    let listed = r.c.request(json!({"op":"requirement_list"})).await?;
    let ids: Vec<String> = {
        let m = lock(&r.model);
        listed["requirements"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|q| q["state"] == "proposed")
            .filter_map(|q| q["id"].as_str())
            .filter(|id| !m.proposals.contains_key(*id))
            .map(String::from)
            .collect()
    };
    let Some(id) = r.pick(ids) else {
        return Ok(());
    };
    let accept = r.rng.below(2) == 0;
    lock(&r.model).proposals.insert(id.clone(), (accept, false));
    let reply =
        r.c.request(json!({"op":"requirement_proposal","requirement":id,"accept":accept}))
            .await?;
    if reply["type"] == "requirement_proposal_decided" {
        let mut m = lock(&r.model);
        m.proposals.insert(id, (accept, true));
        m.ack("proposal_decide");
    }
    Ok(())
}
