//! The pump that carries a session's engine output into the hub: events taken in batches,
//! each batch under one hold of the hub's lock; per event the state kept for snapshots,
//! titles, deferred actions, usage, requirements and dispatch, then the broadcast.

use std::sync::Arc;

use jucode_engine::EngineOutput;
use jucode_protocol::Object;
use jucode_protocol::daemon::limits::TITLE_CHARS;
use jucode_protocol::daemon::{DaemonEvent, Reply};
use jucode_protocol::serve::Event;
use serde_json::{Value, json};

use super::engine::model_of;
use super::{Record, title_from};
use crate::{FrameText, Hub, Inner, to_value};

/// Events handled under one hold of the hub's lock. A burst of deltas then costs one lock and
/// one wake-up for many events, and an op waiting for the lock waits for at most this many.
const EVENT_BATCH: usize = 64;

/// The kinds of event the pump acts on, read from `type` once per event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    AssistantDelta,
    Startup,
    UserMessage,
    Connecting,
    Error,
    Status,
    SessionTitle,
    Usage,
    ApprovalRequest,
    ToolStart,
    ToolOutput,
    ActionDeferred,
    ActionDecided,
    Transcript,
    Other,
}

impl Kind {
    fn of(kind: &str) -> Kind {
        match kind {
            "assistant_delta" => Kind::AssistantDelta,
            "startup" => Kind::Startup,
            "user_message" => Kind::UserMessage,
            "connecting" => Kind::Connecting,
            "error" => Kind::Error,
            "status" => Kind::Status,
            "session_title" => Kind::SessionTitle,
            "usage" => Kind::Usage,
            "approval_request" => Kind::ApprovalRequest,
            "tool_start" => Kind::ToolStart,
            "tool_output" => Kind::ToolOutput,
            "action_deferred" => Kind::ActionDeferred,
            "action_decided" => Kind::ActionDecided,
            "transcript" => Kind::Transcript,
            _ => Kind::Other,
        }
    }

    /// The kind's name for the view, which needs it only for the delta fast path; any other
    /// kind is read from the event there.
    fn name(self) -> Option<&'static str> {
        (self == Kind::AssistantDelta).then_some("assistant_delta")
    }
}

/// The event as clients receive it, stamped with its session. Written straight from the
/// engine's map with `"session"` added at the end, instead of inserting it into the map (a
/// hash and an allocation per event) and serializing the result; the text is the same as
/// that insertion gives. An event that carries a `session` of its own has it replaced in
/// place, as the insertion does.
pub(super) fn session_frame(event: Event, session: &str) -> FrameText {
    let mut map = event.0;
    if !map.contains_key("session")
        && let Some(text) = with_session_after(&map, session)
    {
        return FrameText::from_json(text);
    }
    map.insert("session".into(), Value::String(session.to_string()));
    crate::clients::json_text(&Value::Object(map))
}

/// The frame of an engine's short-form delta: the text [`session_frame`] gives for its map
/// form, written directly.
pub(super) fn delta_frame(delta: &str, session: &str) -> FrameText {
    let mut out = Vec::with_capacity(64 + delta.len() + session.len());
    out.extend_from_slice(br#"{"type":"assistant_delta","delta":"#);
    if serde_json::to_writer(&mut out, delta).is_ok() {
        out.push(b',');
        if let Some(text) = end_with_session(out, session) {
            // The buffer becomes the frame as it is: no copy.
            return FrameText::from_json(text);
        }
    }
    // Not taken: writing strings into a buffer does not fail.
    session_frame(jucode_engine::delta_event(delta.to_string()), session)
}

/// `map` serialized with `"session":<session>` written after its last entry; `None` if
/// serializing failed (then the caller inserts and serializes as usual).
fn with_session_after(map: &Object, session: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(64 + session.len());
    serde_json::to_writer(&mut out, map).ok()?;
    if out.pop() != Some(b'}') {
        return None;
    }
    if !map.is_empty() {
        out.push(b',');
    }
    end_with_session(out, session)
}

/// An object's text so far (open, ready for one more entry) ended with the session entry.
fn end_with_session(mut out: Vec<u8>, session: &str) -> Option<Vec<u8>> {
    out.extend_from_slice(b"\"session\":");
    serde_json::to_writer(&mut out, session).ok()?;
    out.push(b'}');
    Some(out)
}

impl Hub {
    /// Carries a session's engine output into the hub until the engine exits (an engine that
    /// ends its channel without a word counts as exited).
    pub(super) fn spawn_pump(
        self: &Arc<Self>,
        session: String,
        generation: u64,
        mut events: jucode_engine::Events,
    ) {
        let hub = self.clone();
        tokio::spawn(async move {
            let mut id = session;
            let mut exited = false;
            let mut batch = Vec::with_capacity(EVENT_BATCH);
            while !exited && events.recv_many(&mut batch, EVENT_BATCH).await > 0 {
                let mut inner = hub.lock();
                for output in batch.drain(..) {
                    if exited {
                        break;
                    }
                    exited = matches!(output, EngineOutput::Exited { .. });
                    if let Some(named) = hub.on_engine(&mut inner, &id, generation, output) {
                        id = named;
                    }
                }
            }
            if !exited {
                let mut inner = hub.lock();
                hub.on_engine(
                    &mut inner,
                    &id,
                    generation,
                    EngineOutput::Exited {
                        error: Some("the engine stopped without a word".into()),
                    },
                );
            }
        });
    }

    /// Everything an engine emits passes here: state kept for snapshots, then broadcast.
    /// Returns the session's new id when the engine named it.
    fn on_engine(
        self: &Arc<Self>,
        inner: &mut Inner,
        session: &str,
        generation: u64,
        output: EngineOutput,
    ) -> Option<String> {
        let shutting_down = inner.sessions.shutting_down;
        let current = inner
            .sessions
            .map
            .get(session)
            .and_then(|s| s.running.as_ref())
            .map(|r| r.generation);
        if current != Some(generation) {
            return None;
        }
        // Read once: every read of `type` hashes the key, and this runs for each delta.
        let kind = match &output {
            EngineOutput::Event(event) => Kind::of(event.kind()),
            EngineOutput::Delta(_) => Kind::AssistantDelta,
            EngineOutput::Exited { .. } => Kind::Other,
        };
        let named = match &output {
            EngineOutput::Event(event) if kind == Kind::Startup => {
                self.take_engine_name(inner, session, event)
            }
            _ => None,
        };
        let session = named.as_deref().unwrap_or(session);
        let Some(s) = inner.sessions.map.get_mut(session) else {
            return named;
        };
        match output {
            // The stream's bulk, in its short form: the view and the clients are all a delta
            // touches (as the map form's road below shows), so it goes straight there.
            EngineOutput::Delta(text) => {
                s.view.apply_delta(&text);
                inner.broadcast_text(delta_frame(&text, session));
            }
            EngineOutput::Event(event) => {
                let created = match kind {
                    Kind::Startup => s.created.take(),
                    _ => None,
                };
                let was_busy = s.busy;
                // A transcript the view (and so every snapshot) already holds is not news.
                let mut forward = !(kind == Kind::Transcript && s.view.repeats(&event));
                s.view.apply_kind(kind.name(), &event);
                let mut title = None;
                // A turn began on this text: a delivery of it is now that turn (run limits).
                let started = (kind == Kind::UserMessage)
                    .then(|| event.str("content").unwrap_or_default().to_string());
                match kind {
                    Kind::UserMessage => {
                        s.busy = true;
                        s.failed = false;
                        s.updated_at = self.config.clock.now_ms();
                        if s.client_title.is_none() && s.auto_title.is_none() {
                            title = event.str("content").and_then(title_from);
                        }
                    }
                    Kind::Connecting => s.busy = true,
                    Kind::Error if s.busy => s.failed = true,
                    Kind::Status if event.str("message") == Some("ready") => {
                        s.busy = false;
                        s.updated_at = self.config.clock.now_ms();
                    }
                    _ => {}
                }
                // A title the engine's title model chose replaces the first-message one; a
                // title a client set is never replaced, so the engine's is not even shown.
                if kind == Kind::SessionTitle {
                    if s.client_title.is_some() {
                        forward = false;
                    } else {
                        title = event
                            .str("title")
                            .map(str::trim)
                            .filter(|t| !t.is_empty())
                            .map(|t| t.chars().take(TITLE_CHARS).collect());
                    }
                }
                let changed = was_busy != s.busy || title.is_some();
                // What a linked requirement's status is derived from.
                let for_requirements = was_busy != s.busy
                    || matches!(kind, Kind::ApprovalRequest | Kind::Error | Kind::ToolStart);
                // A finished turn's usage: the model it ran on, for the ledger's price.
                let usage_of = (kind == Kind::Usage).then(|| (s.engine.clone(), model_of(&s.view)));
                let agent_turn = was_busy != s.busy && s.agent.is_some();
                // A turn that ended without an error answers a start gate's step.
                let turn_ended = was_busy && !s.busy && !s.failed;
                // What moves a dispatch's task or its dispatcher.
                let for_dispatch = was_busy != s.busy
                    || matches!(
                        kind,
                        Kind::ApprovalRequest | Kind::ToolStart | Kind::ToolOutput | Kind::Error
                    );
                let dispatch_change = crate::dispatch::Change {
                    ended: was_busy && !s.busy,
                    exited: false,
                };
                if let Some(title) = &title {
                    s.auto_title = Some(title.clone());
                }
                if let Some(content) = &started {
                    let now = self.config.clock.now_ms();
                    inner.messages.turn_started(session, content, now);
                }
                if let Some(title) = title {
                    let record = Record::Title {
                        session: session.to_string(),
                        title,
                        at: self.config.clock.now_ms(),
                    };
                    if let Err(e) = inner.sessions.append(&record) {
                        tracing::error!("{e}");
                    }
                }
                // An engine announces its open actions at every start: one recorded already is
                // not news, and one decided here before a kill kept the decision from the engine
                // is decided again.
                if kind == Kind::ActionDeferred && inner.actions.knows(&event.0) {
                    forward = false;
                    if let Some(allow) = inner.actions.decided_before(&event.0)
                        && let Some(s) = inner.sessions.map.get(session)
                    {
                        s.send(decide_op(&event.0, allow));
                    }
                }
                let actions_changed = match kind {
                    Kind::ActionDeferred => inner.actions.deferred(&event.0, session),
                    Kind::ActionDecided => inner.actions.decided_by_engine(&event.0),
                    _ => Ok(false),
                }
                .unwrap_or_else(|e| {
                    tracing::error!("{e}");
                    false
                });
                if let Some(c) = created
                    && let Some(client) = c.client
                {
                    let reply = to_value(&Reply::to(c.id, (c.reply)(session.to_string())));
                    inner.clients.send(client, &reply);
                }
                // Usage hook: the turn is in the ledger (fsynced) before clients see its key.
                let event = match usage_of {
                    Some((engine, model)) => {
                        self.usage_passes(inner, session, &engine, model, event)
                    }
                    None => event,
                };
                if forward {
                    inner.broadcast_text(session_frame(event, session));
                }
                if changed || named.is_some() {
                    inner.broadcast_sessions();
                }
                if agent_turn {
                    inner.broadcast_agents();
                }
                if turn_ended && let Err(e) = inner.requirements.turn_ended(session) {
                    tracing::error!("{e}");
                }
                if turn_ended {
                    crate::requirements::titles::turn_ended(self, inner, session);
                }
                if for_requirements && inner.requirements.is_linked(session) {
                    inner.broadcast_requirements();
                }
                if for_dispatch {
                    self.dispatch_follow(inner, session, dispatch_change);
                }
                if actions_changed {
                    let list = to_value(&Reply::to(None, inner.actions.event()));
                    inner.broadcast(&list);
                }
            }
            EngineOutput::Exited { error } => {
                // The program that held this session's agent capability is gone.
                self.agent_caps.revoke_session(session);
                let running = s.running.take();
                let created = s.created.take();
                let of_agent = s.agent.is_some();
                s.busy = false;
                s.watchers.clear();
                self.deliveries_dropped(inner, session);
                if let Some(c) = created
                    && let Some(client) = c.client
                {
                    let why = error.as_deref().unwrap_or("it stopped");
                    let reply = to_value(&Reply::error(
                        c.id,
                        format!("the session could not be opened: {why}"),
                    ));
                    inner.clients.send(client, &reply);
                }
                if let Some(error) = &error {
                    tracing::warn!(session, "engine stopped: {error}");
                    let frame = json!({
                        "type": "error",
                        "session": session,
                        "message": format!("the engine stopped: {error}"),
                    });
                    inner.broadcast(&frame);
                }
                if !shutting_down {
                    let record = Record::Close {
                        session: session.to_string(),
                        at: self.config.clock.now_ms(),
                    };
                    if let Err(e) = inner.sessions.append(&record) {
                        tracing::error!("{e}");
                    }
                }
                let closed = to_value(&Reply::to(
                    None,
                    DaemonEvent::SessionClosed {
                        session: session.to_string(),
                    },
                ));
                inner.broadcast(&closed);
                inner.broadcast_sessions();
                let change = crate::dispatch::Change {
                    ended: false,
                    exited: true,
                };
                self.dispatch_follow(inner, session, change);
                if of_agent {
                    inner.broadcast_agents();
                }
                if let Some(running) = running {
                    let _ = running.done.send(true);
                }
            }
        }
        named
    }
}

/// `decide_action` for the action of `event` (an `action_deferred`), sent again.
fn decide_op(event: &Object, allow: bool) -> Object {
    let mut op = Object::new();
    op.insert("op".into(), "decide_action".into());
    op.insert(
        "action".into(),
        event.get("id").cloned().unwrap_or_default(),
    );
    op.insert(
        "decision".into(),
        if allow { "allow" } else { "deny" }.into(),
    );
    op
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn event(value: Value) -> Event {
        serde_json::from_value(value).unwrap()
    }

    /// The text the frame had before: the session inserted into the map, then serialized.
    fn inserted(event: Event, session: &str) -> String {
        serde_json::to_string(&Value::Object(event.with_session(session).0)).unwrap()
    }

    #[test]
    fn a_short_delta_frame_is_the_text_of_its_map_form() {
        for delta in ["t123", "", "a \"q\"\n\u{1}é😀", "</script>"] {
            for session in ["00000000-0000-4000-8000-000000000000", "odd \"id\"\\"] {
                let long = jucode_engine::delta_event(delta.to_string());
                assert_eq!(delta_frame(delta, session), session_frame(long, session));
            }
        }
    }

    #[test]
    fn a_session_frame_is_the_text_the_insertion_gives() {
        let cases = [
            json!({"type": "assistant_delta", "delta": "t123"}),
            json!({"type": "tool_output", "output": "a \"quoted\"\n\u{1}line", "n": 1.5}),
            json!({}),
            json!({"type": "x", "nested": {"session": "inner"}, "list": [1, {"a": null}]}),
            // A session of the engine's own is replaced where it stands.
            json!({"session": "theirs", "type": "status", "message": "ready"}),
            json!({"type": "status", "session": 7}),
        ];
        for session in ["00000000-0000-4000-8000-000000000000", "odd \"id\"\\"] {
            for case in &cases {
                let got = session_frame(event(case.clone()), session);
                assert_eq!(&*got, inserted(event(case.clone()), session), "{case}");
                let parsed: Value = serde_json::from_str(&got).unwrap();
                assert_eq!(parsed["session"], session);
            }
        }
    }
}
