//! Ops that name a session and are not the daemon's: they go to that session's engine, after
//! the few the daemon answers or records itself (`decide_action`, `/quit`, `set_attended`).

use jucode_protocol::{ClientFrame, Object};
use serde_json::Value;

use super::{Record, SessionError};
use crate::cx::OpCx;
use crate::error::OpError;

/// Forwards a frame whose op is not the daemon's to the session it names.
pub(crate) fn forward(cx: &OpCx<'_>, mut frame: ClientFrame) -> Result<(), OpError> {
    let Some(session) = frame.session.clone() else {
        return Err(OpError::RequiresSession(frame.op));
    };
    let session = session.as_str();
    cx.hub.lock().sessions.not_in_tui(session)?;
    match frame.op.as_str() {
        "decide_action" => return decide_action(cx, &frame),
        "set_attended" => return Err(SessionError::SetAttended.into()),
        "command" => {
            let input = frame
                .fields
                .get("input")
                .and_then(Value::as_str)
                .unwrap_or("");
            let word = input.split_whitespace().next().unwrap_or("");
            if matches!(word, "/new" | "/resume" | "/clear") {
                return Err(SessionError::OneConversation(word.to_string()).into());
            }
            if matches!(word, "/quit" | "/exit") {
                return Ok(super::ops::close(cx.hub, session)?);
            }
        }
        _ => {}
    }
    let mut inner = cx.hub.lock();
    if frame.op == "set_approval_mode" {
        hold_read_only(&mut inner, session, &mut frame)?;
    }
    let s = inner.sessions.get_mut(session)?;
    let Some(running) = &s.running else {
        return Err(SessionError::NotOpenSendOpen(session.to_string()).into());
    };
    running
        .ops
        .send(frame.engine_op())
        .map_err(|_| SessionError::Stopping(session.to_string()))?;
    // An answered card leaves a later watcher's snapshot at once, not at the end of the
    // turn; an engine that refuses the answer sends the card again.
    if frame.op == "approve"
        && let Some(call_id) = frame.fields.get("call_id").and_then(Value::as_str)
    {
        s.view.approvals.retain(|(c, _)| c != call_id);
    }
    Ok(())
}

/// While a start gate holds the session, a client's mode becomes the one to work in after
/// the gate, and the engine is sent its read-only mode instead.
fn hold_read_only(
    inner: &mut crate::Inner,
    session: &str,
    frame: &mut ClientFrame,
) -> Result<(), OpError> {
    let engine = inner.sessions.get(session)?.engine.clone();
    let asked = frame
        .fields
        .get("mode")
        .and_then(Value::as_str)
        .map(str::to_string);
    let held = inner
        .requirements
        .hold_mode(session, &engine, asked.as_deref())?;
    if let Some(mode) = held {
        frame.fields.insert("mode".into(), mode.as_str().into());
        inner.broadcast_requirements();
    }
    Ok(())
}

/// Records a decision on a deferred action, then hands it to the session's engine,
/// reopening the session first when it is closed (or was hosted before a restart).
fn decide_action(cx: &OpCx<'_>, frame: &ClientFrame) -> Result<(), OpError> {
    let hub = cx.hub;
    let action = frame
        .fields
        .get("action")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        .ok_or(SessionError::DecideUsage)?;
    let allow = match frame.fields.get("decision").and_then(Value::as_str) {
        Some("allow") => true,
        Some("deny") => false,
        _ => return Err(SessionError::DecideUsage.into()),
    };
    let mut inner = hub.lock();
    if let Some(session) = inner.actions.session_of(action) {
        inner.sessions.not_in_tui(&session)?;
    }
    let decided = inner.actions.decide(action, allow)?;
    let list = inner.actions.event();
    cx.broadcast_list(&mut inner, list);
    let session = decided.session;
    let s = inner
        .sessions
        .map
        .get(&session)
        .ok_or_else(|| SessionError::ActionSessionUnknown(action.to_string()))?;
    if s.running.is_none() {
        let record = Record::Open {
            session: session.clone(),
            cwd: s.cwd.display().to_string(),
            engine: s.engine.clone(),
            agent: s.agent.clone(),
            chat: s.chat,
            at: hub.config.clock.now_ms(),
        };
        inner.sessions.append(&record)?;
        hub.start_engine(&mut inner, &session, Object::new(), true, None)?;
        inner.broadcast_sessions();
    }
    let mut op = Object::new();
    op.insert("op".into(), "decide_action".into());
    op.insert("action".into(), action.into());
    op.insert(
        "decision".into(),
        if allow { "allow" } else { "deny" }.into(),
    );
    if let Some(s) = inner.sessions.map.get(&session) {
        s.send(op);
    }
    Ok(())
}
