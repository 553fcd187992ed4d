//! Deferred actions: tool calls an unattended session could not ask a person about.
//!
//! Engines announce them with `action_deferred`; the hub keeps them in `actions.jsonl` so
//! they can be listed, decided (also after a restart, reopening the session first) or closed.
//! A decision is recorded before the engine is told, so an approved action is never offered
//! again after a restart.

use std::collections::HashMap;

use jucode_clock::SharedClock;
use jucode_protocol::Object;
use jucode_protocol::daemon::{ActionsOp, DaemonEvent};
use jucode_store::{JsonlLog, StateDir, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::HubError;
use crate::cx::OpCx;
use crate::error::OpError;

/// Why an action op failed; the texts are the protocol's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ActionError {
    #[error("could not save the action: {0}")]
    Save(StoreError),
    #[error("unknown action {0}")]
    Unknown(String),
    #[error("action {0} was already decided")]
    AlreadyDecided(String),
    #[error("action {0} is closed; reopen it first")]
    Closed(String),
    #[error("action {0} names no session")]
    NoSession(String),
    #[error("action {0} is not open")]
    NotOpen(String),
    #[error("action {0} is not closed")]
    NotClosed(String),
    #[error("unknown item kind `{0}` (expected question or action)")]
    UnknownKind(String),
}

/// Closed items stay in the `closed` list this long.
const CLOSED_LIST_MS: u64 = 7 * 24 * 60 * 60 * 1000;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record {
    Deferred {
        action: Object,
        at: u64,
    },
    Decided {
        id: String,
        allow: bool,
        at: u64,
    },
    Closed {
        id: String,
        #[serde(default)]
        reason: Option<String>,
        at: u64,
    },
    Reopened {
        id: String,
        at: u64,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    Open,
    Decided { allow: bool, at: u64 },
    Closed { reason: Option<String>, at: u64 },
}

struct Action {
    record: Object,
    state: State,
    order: u64,
}

impl Action {
    fn session(&self) -> Option<&str> {
        self.record.get("session_id").and_then(Value::as_str)
    }
}

pub(crate) struct Actions {
    clock: SharedClock,
    log: JsonlLog,
    map: HashMap<String, Action>,
    next_order: u64,
}

/// What a `decide_action` needs to go on: the session to forward it to.
pub(crate) struct Decided {
    pub session: String,
}

impl Actions {
    pub(crate) fn open(store: &StateDir, clock: SharedClock) -> Result<Actions, HubError> {
        let (log, records) = store.open_log::<Record>("actions.jsonl")?;
        let mut actions = Actions {
            clock,
            log,
            map: HashMap::new(),
            next_order: 0,
        };
        for record in records {
            actions.apply(record);
        }
        Ok(actions)
    }

    fn apply(&mut self, record: Record) {
        match record {
            Record::Deferred { action, .. } => {
                if let Some(id) = action.get("id").and_then(Value::as_str) {
                    self.next_order += 1;
                    self.map.entry(id.to_string()).or_insert(Action {
                        record: action.clone(),
                        state: State::Open,
                        order: self.next_order,
                    });
                }
            }
            Record::Decided { id, allow, at } => {
                if let Some(a) = self.map.get_mut(&id) {
                    a.state = State::Decided { allow, at };
                }
            }
            Record::Closed { id, reason, at } => {
                if let Some(a) = self.map.get_mut(&id) {
                    a.state = State::Closed { reason, at };
                }
            }
            Record::Reopened { id, .. } => {
                if let Some(a) = self.map.get_mut(&id) {
                    a.state = State::Open;
                }
            }
            Record::Unknown => {}
        }
    }

    fn write(&mut self, record: Record) -> Result<(), ActionError> {
        self.log.append(&record).map_err(ActionError::Save)?;
        self.apply(record);
        Ok(())
    }

    /// Records an `action_deferred` event. Returns whether the list changed.
    pub(crate) fn deferred(&mut self, event: &Object, session: &str) -> Result<bool, ActionError> {
        let Some(id) = event.get("id").and_then(Value::as_str) else {
            return Ok(false);
        };
        if self.map.contains_key(id) {
            return Ok(false);
        }
        let mut action = event.clone();
        action.remove("type");
        action.remove("session");
        action
            .entry("session_id")
            .or_insert_with(|| Value::String(session.to_string()));
        self.write(Record::Deferred {
            action,
            at: self.clock.now_ms(),
        })?;
        Ok(true)
    }

    /// Records an `action_decided` event for a decision the hub did not see coming in.
    pub(crate) fn decided_by_engine(&mut self, event: &Object) -> Result<bool, ActionError> {
        let Some(id) = event.get("id").and_then(Value::as_str) else {
            return Ok(false);
        };
        let allow = event.get("decision").and_then(Value::as_str) == Some("allow");
        match self.map.get(id) {
            Some(a) if a.state == State::Open => {
                self.write(Record::Decided {
                    id: id.to_string(),
                    allow,
                    at: self.clock.now_ms(),
                })?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Whether `event`'s action is recorded already.
    pub(crate) fn knows(&self, event: &Object) -> bool {
        event
            .get("id")
            .and_then(Value::as_str)
            .is_some_and(|id| self.map.contains_key(id))
    }

    /// The decision an engine announcing `event`'s action as open (as it does for every
    /// open action at its start) should have had: one recorded here before a kill kept it
    /// from the engine.
    pub(crate) fn decided_before(&self, event: &Object) -> Option<bool> {
        let id = event.get("id").and_then(Value::as_str)?;
        match self.map.get(id)?.state {
            State::Decided { allow, .. } => Some(allow),
            _ => None,
        }
    }

    /// The session an action belongs to, when it is known.
    pub(crate) fn session_of(&self, id: &str) -> Option<String> {
        self.map
            .get(id)
            .and_then(|a| a.session())
            .map(str::to_string)
    }

    /// Records a client's decision, before the engine hears of it.
    pub(crate) fn decide(&mut self, id: &str, allow: bool) -> Result<Decided, ActionError> {
        let action = self
            .map
            .get(id)
            .ok_or_else(|| ActionError::Unknown(id.to_string()))?;
        match action.state {
            State::Open => {}
            State::Decided { .. } => return Err(ActionError::AlreadyDecided(id.to_string())),
            State::Closed { .. } => return Err(ActionError::Closed(id.to_string())),
        }
        let session = action
            .session()
            .ok_or_else(|| ActionError::NoSession(id.to_string()))?
            .to_string();
        self.write(Record::Decided {
            id: id.to_string(),
            allow,
            at: self.clock.now_ms(),
        })?;
        Ok(Decided { session })
    }

    /// `item_close` for an action: closed without an answer; nothing is sent to the engine.
    pub(crate) fn close(&mut self, id: &str, reason: Option<String>) -> Result<(), ActionError> {
        match self.map.get(id).map(|a| &a.state) {
            None => Err(ActionError::Unknown(id.to_string())),
            Some(State::Open) => self.write(Record::Closed {
                id: id.to_string(),
                reason,
                at: self.clock.now_ms(),
            }),
            Some(_) => Err(ActionError::NotOpen(id.to_string())),
        }
    }

    /// `item_reopen` for an action. Returns its session.
    pub(crate) fn reopen(&mut self, id: &str) -> Result<Option<String>, ActionError> {
        match self.map.get(id) {
            None => Err(ActionError::Unknown(id.to_string())),
            Some(a) if matches!(a.state, State::Closed { .. }) => {
                let session = a.session().map(str::to_string);
                self.write(Record::Reopened {
                    id: id.to_string(),
                    at: self.clock.now_ms(),
                })?;
                Ok(session)
            }
            Some(_) => Err(ActionError::NotClosed(id.to_string())),
        }
    }

    /// The `actions` frame: open actions oldest first, and those closed or decided lately.
    pub(crate) fn event(&self) -> DaemonEvent {
        let now = self.clock.now_ms();
        let mut open: Vec<&Action> = Vec::new();
        let mut closed: Vec<(&Action, Value)> = Vec::new();
        for a in self.map.values() {
            match &a.state {
                State::Open => open.push(a),
                State::Decided { allow, at } if now.saturating_sub(*at) < CLOSED_LIST_MS => {
                    let decision = if *allow { "allow" } else { "deny" };
                    closed.push((
                        a,
                        json!({"closed_by": "user", "closed_reason": decision, "closed_at": at}),
                    ));
                }
                State::Closed { reason, at } if now.saturating_sub(*at) < CLOSED_LIST_MS => {
                    closed.push((
                        a,
                        json!({"closed_by": "user", "closed_reason": reason, "closed_at": at}),
                    ));
                }
                _ => {}
            }
        }
        open.sort_by_key(|a| a.order);
        closed.sort_by_key(|(a, _)| std::cmp::Reverse(a.order));
        DaemonEvent::Actions {
            actions: open
                .into_iter()
                .map(|a| Value::Object(a.record.clone()))
                .collect(),
            closed: closed
                .into_iter()
                .map(|(a, extra)| {
                    let mut record = a.record.clone();
                    if let Value::Object(extra) = extra {
                        record.extend(extra);
                    }
                    Value::Object(record)
                })
                .collect(),
        }
    }
}

/// Answers `actions_list`, `item_close` and `item_reopen`: a change is replied to, then the
/// new list goes to every client.
pub(crate) fn handle(cx: &OpCx<'_>, op: ActionsOp) -> Result<(), OpError> {
    let (kind, item, reason, closing) = match op {
        ActionsOp::ActionsList => {
            let event = cx.hub.lock().actions.event();
            cx.reply(event);
            return Ok(());
        }
        ActionsOp::ItemClose { kind, item, reason } => (kind, item, reason, true),
        ActionsOp::ItemReopen { kind, item } => (kind, item, None, false),
    };
    let mut inner = cx.hub.lock();
    let session = match (kind.as_str(), closing) {
        ("action", true) => inner.actions.close(&item, reason).map(|()| None)?,
        ("action", false) => inner.actions.reopen(&item)?,
        ("question", true) => inner.questions.close(&item, reason).map(|()| None)?,
        ("question", false) => Some(inner.questions.reopen(&item)?),
        _ => return Err(ActionError::UnknownKind(kind).into()),
    };
    let reply = if closing {
        DaemonEvent::ItemClosed { item }
    } else {
        DaemonEvent::ItemReopened { item }
    };
    cx.reply_locked(&mut inner, reply);
    if kind == "action" {
        let list = inner.actions.event();
        cx.broadcast_list(&mut inner, list);
    } else {
        inner.broadcast_questions();
    }
    // A reopened item brings its session back out of the archive.
    if let Some(session) = session {
        let at = cx.hub.config.clock.now_ms();
        if inner.sessions.unarchive(&session, at)? {
            inner.broadcast_sessions();
        }
    }
    Ok(())
}
