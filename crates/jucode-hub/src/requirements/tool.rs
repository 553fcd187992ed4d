//! The agents' `requirements` tool: `list`, `get`, `progress`, and the two proposals
//! (`propose_create`, `propose_close`) the user decides with `requirement_proposal`.
//!
//! Each change is saved (fsynced) before the tool answers and the list is broadcast after,
//! without marking it the user's: a new proposal notifies the paired devices.

use std::sync::Arc;

use jucode_protocol::daemon::limits::{REASON_CHARS, REQUIREMENT_TEXT_CHARS};
use jucode_protocol::daemon::{Progress, RequirementState};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{RequirementError, Stored, status, title_for};
use crate::agents::tools::{Caller, ToolError};
use crate::error::OpError;
use crate::{Hub, Inner};

pub(crate) const NAME: &str = "requirements";

/// One progress item (a line of decided, done, doing, blocked or next), in characters.
pub(crate) const PROGRESS_ITEM_CHARS: usize = 2000;
/// How many items one of those lists may hold.
pub(crate) const PROGRESS_ITEMS: usize = 200;
/// The progress note, in characters.
pub(crate) const PROGRESS_NOTE_CHARS: usize = 8000;

#[derive(Debug, Deserialize)]
struct Args {
    action: String,
    #[serde(default)]
    requirement: Option<String>,
    #[serde(default)]
    project: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    decided: Vec<String>,
    #[serde(default)]
    done: Vec<String>,
    #[serde(default)]
    doing: Vec<String>,
    #[serde(default)]
    blocked: Vec<String>,
    #[serde(default)]
    next: Vec<String>,
    #[serde(default)]
    note: Option<String>,
}

/// The `requirements` tool as a model sees it.
pub(crate) fn def() -> jucode_engine::agent::ToolDef {
    let items =
        json!({"type": "array", "items": {"type": "string", "maxLength": PROGRESS_ITEM_CHARS}});
    jucode_engine::agent::ToolDef {
        name: NAME.into(),
        description: "The user's requirements (what they mean to get done). `list` shows \
            those of your project (all when you have none; filter with `project`, \"none\" for \
            unassigned, and `state`); `get` one by `requirement`. `progress` records where the \
            work stands on `requirement` (default: the one this session works on): items \
            added to decided, done, doing, blocked and next (each once) and `note` replaced. \
            You cannot note or close a requirement yourself, only propose it for the user to \
            decide: `propose_create` (`text`, `reason`) and `propose_close` (`requirement`, \
            `reason`, `outcome` done or parked, on an idea or open one)."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "action": {"type": "string",
                           "enum": ["list", "get", "progress", "propose_create", "propose_close"]},
                "requirement": {"type": "string", "description": "its id, R-<n>"},
                "project": {"type": "string", "description": "a project id, or none"},
                "state": {"type": "string", "enum": ["idea", "open", "done", "parked", "proposed"]},
                "text": {"type": "string", "maxLength": REQUIREMENT_TEXT_CHARS},
                "reason": {"type": "string", "maxLength": REASON_CHARS},
                "outcome": {"type": "string", "enum": ["done", "parked"]},
                "decided": items,
                "done": items,
                "doing": items,
                "blocked": items,
                "next": items,
                "note": {"type": "string", "maxLength": PROGRESS_NOTE_CHARS},
            },
            "required": ["action"],
        }),
    }
}

/// Runs the `requirements` tool for `caller`.
pub(crate) fn call(hub: &Arc<Hub>, caller: &Caller, args: Value) -> Result<Value, ToolError> {
    let args: Args =
        serde_json::from_value(args).map_err(|e| invalid(format!("requirements: {e}")))?;
    let mut inner = hub.lock();
    let inner = &mut *inner;
    let session = inner.sessions.current_id(&caller.session).to_string();
    let answer = match args.action.as_str() {
        "list" => return list(inner, caller, args.project, args.state),
        "get" => {
            let id = needs(args.requirement, "get", "requirement")?;
            let r = inner.requirements.get(&id).map_err(op)?;
            return Ok(json!({"requirement": status::info(&r, &inner.sessions)}));
        }
        "progress" => progress(inner, &session, args)?,
        "propose_create" => propose_create(hub, inner, caller, &session, args)?,
        "propose_close" => propose_close(inner, caller, &session, args)?,
        other => {
            return Err(invalid(format!(
                "requirements: unknown action {other:?} (expected list, get, progress, \
                 propose_create or propose_close)"
            )));
        }
    };
    inner.broadcast_requirements();
    Ok(answer)
}

fn list(
    inner: &Inner,
    caller: &Caller,
    project: Option<String>,
    state: Option<String>,
) -> Result<Value, ToolError> {
    let state = state.map(|s| parse_state(&s)).transpose()?;
    // A filter the agent gives wins; else its own project; else everything.
    let project: Option<Option<String>> = match project.as_deref() {
        Some("none") => Some(None),
        Some(id) => Some(Some(id.to_string())),
        None => inner
            .agents
            .get(&caller.agent)
            .and_then(|a| a.config.project.clone())
            .map(Some),
    };
    let entries: Vec<Value> = inner
        .requirements
        .store
        .map
        .values()
        .filter(|r| project.as_ref().is_none_or(|p| r.project == *p))
        .filter(|r| state.is_none_or(|s| r.state == s))
        .map(|r| {
            let info = status::info(r, &inner.sessions);
            json!({
                "id": info.id,
                "title": info.title,
                "state": info.state,
                "status": info.status,
                "project": info.project,
                "sessions": info.sessions,
                "progress_at": info.progress_at,
            })
        })
        .collect();
    Ok(json!({"requirements": entries}))
}

fn progress(inner: &mut Inner, session: &str, args: Args) -> Result<Value, ToolError> {
    let id = match args.requirement {
        Some(id) => id,
        None => linked_to(inner, session).ok_or_else(|| {
            invalid("requirements: progress needs requirement (this session works on none)".into())
        })?,
    };
    let mut r = inner.requirements.get(&id).map_err(op)?;
    if let Some(note) = &args.note {
        too_long("note", note, PROGRESS_NOTE_CHARS)?;
    }
    let p = &mut r.progress;
    let mut added = 0;
    for (field, list, new) in [
        ("decided", &mut p.decided, args.decided),
        ("done", &mut p.done, args.done),
        ("doing", &mut p.doing, args.doing),
        ("blocked", &mut p.blocked, args.blocked),
        ("next", &mut p.next, args.next),
    ] {
        added += append_once(field, list, new)?;
    }
    if let Some(note) = args.note {
        p.note = note;
    }
    r.progress_at = inner.requirements.clock.now_ms();
    let progress = r.progress.clone();
    inner.requirements.save(r).map_err(op)?;
    Ok(json!({"requirement": id, "added": added, "progress": progress}))
}

/// Adds the items of `new` not in `list` yet (trimmed, blank ones skipped); returns how many.
fn append_once(field: &str, list: &mut Vec<String>, new: Vec<String>) -> Result<usize, ToolError> {
    let mut added = 0;
    for item in new {
        let item = item.trim();
        if item.is_empty() || list.iter().any(|have| have == item) {
            continue;
        }
        too_long(field, item, PROGRESS_ITEM_CHARS)?;
        if list.len() >= PROGRESS_ITEMS {
            return Err(invalid(format!(
                "requirements: {field} holds at most {PROGRESS_ITEMS} items"
            )));
        }
        list.push(item.to_string());
        added += 1;
    }
    Ok(added)
}

fn propose_create(
    hub: &Arc<Hub>,
    inner: &mut Inner,
    caller: &Caller,
    session: &str,
    args: Args,
) -> Result<Value, ToolError> {
    let text = needs(args.text, "propose_create", "text")?;
    if text.trim().is_empty() {
        return Err(invalid(
            "requirements: propose_create: text must not be empty".into(),
        ));
    }
    too_long("text", &text, REQUIREMENT_TEXT_CHARS)?;
    let reason = args.reason.unwrap_or_default();
    too_long("reason", &reason, REASON_CHARS)?;
    // The agent's project, if it still exists (a deleted project leaves it unassigned).
    let project = inner
        .agents
        .get(&caller.agent)
        .and_then(|a| a.config.project.clone())
        .filter(|p| inner.workspaces.project(p).is_some());
    let now = inner.requirements.clock.now_ms();
    let id = inner.requirements.store.next_id();
    let title_text = text.clone();
    let r = Stored {
        id: id.clone(),
        title: title_for(&text),
        title_auto: false,
        text,
        images: Vec::new(),
        project,
        projects: None,
        state: RequirementState::Proposed,
        sessions: Vec::new(),
        progress: Progress::default(),
        progress_at: 0,
        source: "agent".into(),
        source_session: Some(session.to_string()),
        gate: None,
        proposal: Some(json!({
            "kind": "create",
            "agent": caller.agent,
            "session": session,
            "reason": reason,
            "at": now,
        })),
        created_at: now,
        updated_at: now,
    };
    inner.requirements.save(r).map_err(op)?;
    super::titles::ask_title(hub, &id, &title_text);
    Ok(json!({
        "requirement": id,
        "state": "proposed",
        "note": "proposed: the user decides whether to note it",
    }))
}

fn propose_close(
    inner: &mut Inner,
    caller: &Caller,
    session: &str,
    args: Args,
) -> Result<Value, ToolError> {
    let id = needs(args.requirement, "propose_close", "requirement")?;
    let outcome = needs(args.outcome, "propose_close", "outcome")?;
    if !matches!(outcome.as_str(), "done" | "parked") {
        return Err(invalid(format!(
            "requirements: outcome {outcome:?} is not done or parked"
        )));
    }
    let reason = args.reason.unwrap_or_default();
    too_long("reason", &reason, REASON_CHARS)?;
    let mut r = inner.requirements.get(&id).map_err(op)?;
    if !matches!(r.state, RequirementState::Idea | RequirementState::Open) {
        return Err(invalid(format!(
            "requirements: {id} is {}: only an idea or open requirement can be proposed for closing",
            r.state.as_str()
        )));
    }
    r.proposal = Some(json!({
        "kind": "close",
        "outcome": outcome,
        "agent": caller.agent,
        "session": session,
        "reason": reason,
        "at": inner.requirements.clock.now_ms(),
    }));
    inner.requirements.save(r).map_err(op)?;
    Ok(json!({
        "requirement": id,
        "proposal": "close",
        "outcome": outcome,
        "note": "proposed: the user decides whether to close it",
    }))
}

/// The requirement `session` works on.
fn linked_to(inner: &Inner, session: &str) -> Option<String> {
    inner
        .requirements
        .store
        .map
        .values()
        .find(|r| r.sessions.iter().any(|s| s == session))
        .map(|r| r.id.clone())
}

fn parse_state(text: &str) -> Result<RequirementState, ToolError> {
    serde_json::from_value(Value::String(text.to_string())).map_err(|_| {
        invalid(format!(
            "requirements: state {text:?} is not idea, open, done, parked or proposed"
        ))
    })
}

fn needs(value: Option<String>, action: &str, field: &str) -> Result<String, ToolError> {
    value.ok_or_else(|| invalid(format!("requirements: {action} needs {field}")))
}

fn too_long(field: &str, text: &str, max: usize) -> Result<(), ToolError> {
    if text.chars().count() > max {
        return Err(invalid(format!(
            "requirements: {field} is longer than {max} characters"
        )));
    }
    Ok(())
}

fn invalid(text: String) -> ToolError {
    ToolError::Invalid(text)
}

fn op(e: RequirementError) -> ToolError {
    ToolError::Op(OpError::from(e))
}
