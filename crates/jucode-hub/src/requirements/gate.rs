//! The start gate (`requirement_begin`, `_confirm`, `_reply`): a session first explains its
//! understanding of a requirement (and, asked, writes a plan) while held read-only, and each
//! step waits for the user's confirmation before the next is sent.
//!
//! Invariants: while a gate stands on a session, every start of its engine and every
//! `set_approval_mode` a client sends use the engine's read-only mode ([`read_only`]); a gate
//! step is saved (fsynced) before the session is sent anything, so a restart finds the gate
//! where the user left it.

use std::path::PathBuf;
use std::sync::Arc;

use jucode_protocol::daemon::{DaemonEvent, RequirementGate};
use jucode_protocol::{ApprovalMode, Object};
use serde_json::Value;

use super::prompts::{self, Lang};
use super::{RequirementError, Stored};
use crate::cx::OpCx;
use crate::error::OpError;
use crate::sessions::{Created, SessionState};
use crate::{Hub, Inner, paths};

const UNDERSTAND: &str = "understand";
const PLAN: &str = "plan";
/// The mode to work in when a client names none.
const DEFAULT_MODE: &str = "auto";

/// The mode an engine is held in while a gate stands: nothing changes without the user.
/// Claude Code's read-only mode is its plan mode; Codex's manual mode runs in its read-only
/// sandbox; jucode and ACP agents ask before every change.
pub(crate) fn read_only(engine: &str) -> ApprovalMode {
    match engine {
        "claude" => ApprovalMode::Plan,
        _ => ApprovalMode::Manual,
    }
}

/// The mode a client named (`ask`, `plan`, `auto`, `edits`, `all`, or an engine's own name)
/// as `engine` takes it: jucode has no plan mode, so `plan` is manual there.
pub(crate) fn work_mode(engine: &str, name: &str) -> Result<ApprovalMode, RequirementError> {
    let mode = ApprovalMode::parse(name).ok_or_else(|| RequirementError::Mode(name.into()))?;
    Ok(match (engine, mode) {
        ("jucode", ApprovalMode::Plan) => ApprovalMode::Manual,
        (_, mode) => mode,
    })
}

fn set_mode(mode: ApprovalMode) -> Object {
    let mut op = Object::new();
    op.insert("op".into(), "set_approval_mode".into());
    op.insert("mode".into(), mode.as_str().into());
    op
}

fn user_message(content: String, images: &[String]) -> Object {
    let mut op = Object::new();
    op.insert("op".into(), "user_message".into());
    op.insert("content".into(), content.into());
    if !images.is_empty() {
        op.insert("images".into(), images.to_vec().into());
    }
    op
}

impl super::Requirements {
    /// The gate standing on `session`, if any.
    pub(crate) fn gate_of(&self, session: &str) -> Option<&RequirementGate> {
        self.store
            .map
            .values()
            .find_map(|r| r.gate.as_ref().filter(|g| g.session == session))
    }

    /// A turn of `session` ended without an error: a gate on it has its answer. Returns
    /// whether anything changed.
    pub(crate) fn turn_ended(&mut self, session: &str) -> Result<bool, RequirementError> {
        let Some(mut r) = self
            .store
            .map
            .values()
            .find(|r| {
                r.gate
                    .as_ref()
                    .is_some_and(|g| g.session == session && !g.answered)
            })
            .cloned()
        else {
            return Ok(false);
        };
        if let Some(gate) = r.gate.as_mut() {
            gate.answered = true;
        }
        self.save(r)?;
        Ok(true)
    }

    /// A client asked `session` for `mode` while a gate holds it: the gate keeps the mode to
    /// work in once it is passed. Returns the engine's read-only mode to send instead, or
    /// `None` when no gate stands on the session.
    pub(crate) fn hold_mode(
        &mut self,
        session: &str,
        engine: &str,
        mode: Option<&str>,
    ) -> Result<Option<ApprovalMode>, RequirementError> {
        let Some(mut r) = self
            .store
            .map
            .values()
            .find(|r| r.gate.as_ref().is_some_and(|g| g.session == session))
            .cloned()
        else {
            return Ok(None);
        };
        if let (Some(gate), Some(mode)) = (r.gate.as_mut(), mode)
            && ApprovalMode::parse(mode).is_some()
            && gate.mode != mode
        {
            gate.mode = mode.to_string();
            self.save(r)?;
        }
        Ok(Some(read_only(engine)))
    }

    /// An engine named its session anew: links and gates follow.
    pub(crate) fn session_renamed(&mut self, from: &str, to: &str) -> Result<(), RequirementError> {
        let touched: Vec<Stored> = self
            .store
            .map
            .values()
            .filter(|r| r.sessions.iter().any(|s| s == from))
            .cloned()
            .collect();
        for mut r in touched {
            for s in &mut r.sessions {
                if s == from {
                    *s = to.to_string();
                }
            }
            if let Some(gate) = r.gate.as_mut().filter(|g| g.session == from) {
                gate.session = to.to_string();
            }
            self.save(r)?;
        }
        Ok(())
    }
}

impl Hub {
    /// Sends `ops` to `session`'s engine in order, starting it again first when it is closed.
    fn send_in_order(
        self: &Arc<Self>,
        inner: &mut Inner,
        session: &str,
        ops: Vec<Object>,
    ) -> Result<(), OpError> {
        match inner.sessions.state(session) {
            SessionState::Open => {}
            SessionState::Stopping => {
                return Err(crate::sessions::SessionError::Stopping(session.into()).into());
            }
            SessionState::Closed => self.reopen_session(inner, session)?,
        }
        for op in ops {
            inner.sessions.deliver(session, op);
        }
        Ok(())
    }
}

/// What `requirement_begin` (and `requirement_reply` on a new session) start with.
pub(super) struct Begin {
    pub(super) requirement: String,
    pub(super) session: String,
    pub(super) plan: bool,
    pub(super) mode: Option<String>,
    pub(super) text: Option<String>,
    pub(super) lang: Option<String>,
}

/// Links the session, holds it read-only and sends the requirement with the ask to explain
/// it. Everything is checked before anything changes.
pub(super) fn begin(hub: &Arc<Hub>, inner: &mut Inner, b: Begin) -> Result<String, OpError> {
    let lang = Lang::parse(b.lang.as_deref())?;
    inner.requirements.get(&b.requirement)?;
    let session = inner.known_session(&b.session)?;
    inner.sessions.not_in_tui(&session)?;
    let engine = inner
        .sessions
        .engine_of(&session)
        .unwrap_or_default()
        .to_string();
    let mode = b.mode.unwrap_or_else(|| DEFAULT_MODE.into());
    work_mode(&engine, &mode)?;
    if inner.sessions.busy(&session) {
        return Err(RequirementError::SessionBusy(session).into());
    }
    inner.link(&b.requirement, &session)?;
    let mut r = inner.requirements.get(&b.requirement)?;
    r.gate = Some(RequirementGate {
        session: session.clone(),
        stage: UNDERSTAND.into(),
        plan: b.plan,
        mode,
        answered: false,
    });
    let content = prompts::understand(lang, &r, b.text.as_deref());
    let images = r.images.clone();
    inner.requirements.save(r)?;
    let ops = vec![set_mode(read_only(&engine)), user_message(content, &images)];
    hub.send_in_order(inner, &session, ops)?;
    Ok(session)
}

/// Moves the gate on one step: to the plan, or to the work (the gate is removed and the
/// session switched to the mode it was begun with). Returns the stage reached.
pub(super) fn confirm(
    hub: &Arc<Hub>,
    inner: &mut Inner,
    requirement: &str,
    text: Option<&str>,
    lang: Option<&str>,
) -> Result<&'static str, OpError> {
    let lang = Lang::parse(lang)?;
    let mut r = inner.requirements.get(requirement)?;
    let Some(gate) = r.gate.clone() else {
        return Err(RequirementError::NoGate(requirement.into()).into());
    };
    let session = inner.sessions.current_id(&gate.session).to_string();
    inner.sessions.not_in_tui(&session)?;
    let facts = inner
        .sessions
        .facts(&session)
        .ok_or_else(|| RequirementError::UnknownSession(session.clone()))?;
    if facts.busy || facts.waiting {
        return Err(RequirementError::GateBusy(requirement.into()).into());
    }
    let engine = inner
        .sessions
        .engine_of(&session)
        .unwrap_or_default()
        .to_string();
    let (stage, ops) = if gate.stage == UNDERSTAND && gate.plan {
        r.gate = Some(RequirementGate {
            stage: PLAN.into(),
            answered: false,
            ..gate
        });
        ("plan", vec![user_message(prompts::plan(lang, text), &[])])
    } else {
        // A mode saved by an older build or by hand that no longer parses works manually.
        let mode = work_mode(&engine, &gate.mode).unwrap_or(ApprovalMode::Manual);
        r.gate = None;
        let planned = gate.stage == PLAN;
        (
            "go",
            vec![
                set_mode(mode),
                user_message(prompts::go(lang, planned, text), &[]),
            ],
        )
    };
    inner.requirements.save(r)?;
    hub.send_in_order(inner, &session, ops)?;
    Ok(stage)
}

/// What `requirement_reply` asks.
pub(super) struct ReplyReq {
    pub(super) requirement: String,
    pub(super) text: String,
    pub(super) new_session: bool,
    pub(super) cwd: Option<String>,
    pub(super) engine: Option<String>,
    pub(super) plan: bool,
    pub(super) mode: Option<String>,
    pub(super) lang: Option<String>,
}

/// Sends the words to the requirement's latest session; with `new_session`, or none yet,
/// starts one behind the gate. Returns the reply to send now (`None`: the new session's
/// engine answers once it has named the session).
pub(super) fn reply(
    cx: &OpCx<'_>,
    inner: &mut Inner,
    req: ReplyReq,
) -> Result<Option<DaemonEvent>, OpError> {
    let r = inner.requirements.get(&req.requirement)?;
    let latest = r
        .sessions
        .iter()
        .rev()
        .map(|s| inner.sessions.current_id(s).to_string())
        .find(|s| inner.sessions.cwd_of(s).is_some());
    if let (Some(session), false) = (&latest, req.new_session) {
        // Words for the session are the point of a reply; a new session starts from the
        // requirement itself, so there the words are optional (as for requirement_begin).
        if req.text.trim().is_empty() {
            return Err(RequirementError::EmptyText("requirement_reply").into());
        }
        inner.sessions.not_in_tui(session)?;
        cx.hub
            .send_in_order(inner, session, vec![user_message(req.text, &[])])?;
        return Ok(Some(DaemonEvent::RequirementReplied {
            session: session.clone(),
        }));
    }
    Lang::parse(req.lang.as_deref())?;
    let cwd = match req.cwd {
        Some(cwd) => cwd,
        None => latest
            .as_deref()
            .and_then(|s| inner.sessions.cwd_of(s))
            .map(|p| p.display().to_string())
            .or_else(|| {
                r.project
                    .as_deref()
                    .and_then(|p| inner.workspaces.project(p))
                    .map(|p| p.path.clone())
            })
            .ok_or_else(|| RequirementError::NoDirectory(req.requirement.clone()))?,
    };
    let cwd: PathBuf = paths::resolve_dir(&cwd, &cx.hub.config.user_home)?;
    let engine = match req.engine.filter(|e| e != "default") {
        Some(engine) => engine,
        None => latest
            .as_deref()
            .and_then(|s| inner.sessions.engine_of(s))
            .map(str::to_string)
            .unwrap_or_else(crate::sessions::default_engine),
    };
    let mode = req.mode.unwrap_or_else(|| DEFAULT_MODE.into());
    work_mode(&engine, &mode)?;
    let mut options = Object::new();
    options.insert(
        "approval_mode".into(),
        Value::from(read_only(&engine).as_str()),
    );
    let created = Created {
        client: Some(cx.client),
        id: cx.id.clone(),
        reply: |session| DaemonEvent::RequirementReplied { session },
    };
    let session = cx
        .hub
        .new_session(inner, cwd, engine, false, options, created)?;
    begin(
        cx.hub,
        inner,
        Begin {
            requirement: req.requirement,
            session,
            plan: req.plan,
            mode: Some(mode),
            text: Some(req.text).filter(|t| !t.trim().is_empty()),
            lang: req.lang,
        },
    )?;
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_mode_names_become_each_engines_modes() {
        let cases = [
            ("jucode", "ask", ApprovalMode::Manual),
            ("jucode", "plan", ApprovalMode::Manual),
            ("claude", "plan", ApprovalMode::Plan),
            ("codex", "plan", ApprovalMode::Plan),
            ("codex", "edits", ApprovalMode::AutoEdit),
            ("claude", "all", ApprovalMode::FullAccess),
            ("jucode", "auto", ApprovalMode::Auto),
            ("codex", "read-only", ApprovalMode::Manual),
            ("codex", "full-auto", ApprovalMode::FullAccess),
        ];
        for (engine, name, mode) in cases {
            assert_eq!(work_mode(engine, name).ok(), Some(mode), "{engine} {name}");
        }
        assert!(work_mode("jucode", "yolo").is_err());
    }

    #[test]
    fn the_gate_holds_each_engine_in_its_read_only_mode() {
        assert_eq!(read_only("jucode"), ApprovalMode::Manual);
        assert_eq!(read_only("claude"), ApprovalMode::Plan);
        assert_eq!(read_only("codex"), ApprovalMode::Manual);
        assert_eq!(read_only("acp"), ApprovalMode::Manual);
    }
}
