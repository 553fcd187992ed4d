//! A requirement as the list shows it: what is kept, plus what its sessions say now.

use std::collections::BTreeMap;

use jucode_protocol::daemon::{RequirementInfo, RequirementState};
use serde_json::Value;

use super::Stored;
use crate::sessions::Sessions;

/// How much of the latest reply `last_reply` carries (its end), in characters.
pub(super) const LAST_REPLY_CHARS: usize = 400;

pub(super) fn info(r: &Stored, sessions: &Sessions) -> RequirementInfo {
    let mut session_states = BTreeMap::new();
    let mut waiting = false;
    let mut running = false;
    for s in &r.sessions {
        let Some(facts) = sessions.facts(s) else {
            continue;
        };
        let state = if facts.waiting {
            waiting = true;
            "waiting"
        } else if facts.busy {
            running = true;
            "running"
        } else if facts.failed {
            "failed"
        } else {
            "idle"
        };
        session_states.insert(s.clone(), state.to_string());
    }
    let latest = r.sessions.last().and_then(|s| sessions.facts(s));
    let gate_idle = r.gate.as_ref().is_some_and(|g| {
        g.answered
            && sessions
                .facts(&g.session)
                .is_some_and(|f| !f.busy && !f.waiting)
    });
    let close_proposal = r
        .proposal
        .as_ref()
        .and_then(|p| p.get("kind"))
        .and_then(Value::as_str)
        == Some("close");
    let status = match r.state {
        RequirementState::Idea | RequirementState::Open if close_proposal => "proposal",
        RequirementState::Open if waiting => "approval",
        RequirementState::Open if gate_idle => "confirm",
        RequirementState::Open if latest.as_ref().is_some_and(|f| f.failed && !f.busy) => "failed",
        RequirementState::Open if running => "running",
        RequirementState::Open if !session_states.is_empty() => "review",
        state => state.as_str(),
    };
    let last_reply = match status {
        "review" | "confirm" | "failed" => latest
            .and_then(|f| f.last_reply)
            .map(|text| tail(&text, LAST_REPLY_CHARS)),
        _ => None,
    };
    RequirementInfo {
        id: r.id.clone(),
        text: r.text.clone(),
        // Records written by hand or by older builds may carry no title.
        title: if r.title.is_empty() {
            super::title_for(&r.text)
        } else {
            r.title.clone()
        },
        title_auto: r.title_auto,
        images: r.images.clone(),
        project: r.project.clone(),
        state: r.state,
        sessions: r.sessions.clone(),
        progress: r.progress.clone(),
        progress_at: r.progress_at,
        source: r.source.clone(),
        source_session: r.source_session.clone(),
        gate: r.gate.clone(),
        proposal: r.proposal.clone(),
        status: status.to_string(),
        session_states,
        last_reply,
        created_at: r.created_at,
        updated_at: r.updated_at,
    }
}

/// The last `max` characters of `text`.
fn tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    text.chars().skip(count.saturating_sub(max)).collect()
}
