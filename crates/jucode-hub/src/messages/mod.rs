//! Messages to agents: recorded in `messages.jsonl` (fsynced) before anything is delivered,
//! then routed to a session and delivered as a user message.
//!
//! Other areas send through [`Hub::enqueue_message`] with a [`NewMessage`]: a fired timer, an
//! answered question, a scheduled task, another agent. This module keeps the log and its fold
//! (what is still pending, which session got what, the dedupe keys seen); [`route`] decides
//! where a message goes, [`deliver`] hands it over within the run limits, [`confirm`] makes
//! sure a message handed over reached its session exactly once, and [`tool`] is the
//! `message_agent` tool.

mod confirm;
mod deliver;
pub(crate) mod route;
pub(crate) mod tool;

use std::collections::HashMap;
use std::sync::Arc;

use jucode_protocol::daemon::{DaemonEvent, MessagesOp};
use jucode_store::{JsonlLog, StateDir, StoreError};
use serde::{Deserialize, Serialize};

use crate::cx::OpCx;
use crate::error::OpError;
use crate::util::new_id;
use crate::{Hub, HubError, Inner};

pub(crate) use deliver::RunState;
pub(crate) use route::is_delivery_header;

/// Where a message comes from; `as_wire` is the `from` of its record and of
/// `message_delivered`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    User,
    Agent(String),
    Timer(String),
    // Scheduled tasks (issue 13) send as this.
    #[allow(dead_code)]
    Schedule(String),
    Question(String),
}

impl Origin {
    pub(crate) fn as_wire(&self) -> String {
        match self {
            Origin::User => "user".into(),
            Origin::Agent(id) => format!("agent:{id}"),
            Origin::Timer(id) => format!("timer:{id}"),
            Origin::Schedule(id) => format!("schedule:{id}"),
            Origin::Question(id) => format!("question:{id}"),
        }
    }
}

/// A message to record and deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewMessage {
    /// The agent it goes to.
    pub(crate) to: String,
    pub(crate) from: Origin,
    pub(crate) body: String,
    /// The session it must go to.
    pub(crate) session: Option<String>,
    /// The message this one answers: it goes to the session that received that one.
    pub(crate) reply_to: Option<String>,
    /// A second message with the same key is not recorded or sent again.
    pub(crate) dedupe_key: Option<String>,
    /// Start a new session for it rather than route it.
    pub(crate) new_session: bool,
}

/// What recording a message gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Accepted {
    /// The message's id (the earlier one's for a duplicate).
    pub(crate) id: String,
    /// A message with this dedupe key was recorded before; nothing new was sent.
    pub(crate) duplicate: bool,
}

/// Why a message was not taken; the texts are the protocol's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MessageError {
    #[error("unknown agent {0}")]
    UnknownAgent(String),
    #[error("a message needs a body")]
    EmptyBody,
    #[error("could not save the message: {0}")]
    Save(StoreError),
}

/// One line of `messages.jsonl` (notes §9, plus `new_session` and `from_session`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(super) enum Record {
    Message {
        id: String,
        to: String,
        from: String,
        body: String,
        #[serde(default)]
        session: Option<String>,
        #[serde(default)]
        reply_to: Option<String>,
        #[serde(default)]
        dedupe_key: Option<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        new_session: bool,
        /// The session an agent sent it from (for routing replies back to it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_session: Option<String>,
        at: u64,
    },
    /// Handed to the session's engine. With `confirm` (every delivery this daemon writes) a
    /// `received` or `unverified` record settles it later; one without (an older daemon's)
    /// counts as received.
    Delivered {
        id: String,
        session: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        confirm: bool,
        /// For the user's: how many user items the session was known to hold at the hand-over,
        /// so a check looks for it only past them (absent in older records: from the start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<usize>,
        at: u64,
    },
    /// The session took it: its engine echoed it, or its saved transcript holds it.
    Received {
        id: String,
        at: u64,
    },
    /// Handed over and never confirmed, and its session's engine keeps no transcript the
    /// daemon can check: never sent again (at most once).
    Unverified {
        id: String,
        reason: String,
        at: u64,
    },
    Undeliverable {
        id: String,
        reason: String,
        at: u64,
    },
    /// A kind a newer daemon wrote: skipped.
    #[serde(other)]
    Other,
}

/// A recorded message not delivered yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pending {
    pub(super) id: String,
    pub(super) to: String,
    pub(super) from: String,
    pub(super) body: String,
    pub(super) session: Option<String>,
    pub(super) reply_to: Option<String>,
    pub(super) new_session: bool,
    /// Handed to this session before and found absent from it: it goes there again.
    pub(super) again_to: Option<String>,
}

/// Every message's id: where it went and where it came from (for `reply_to`).
#[derive(Debug, Clone, Default)]
struct Known {
    delivered_to: Option<String>,
    sent_from: Option<String>,
}

/// One delivered message, as [`Messages::deliveries_from`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Delivery {
    pub(crate) id: String,
    pub(crate) session: String,
    /// When it was delivered (milliseconds).
    pub(crate) at: u64,
}

/// The fold of `messages.jsonl`, plus which sessions have a delivery whose turn has not
/// begun ([`RunState`]).
pub(crate) struct Messages {
    log: JsonlLog,
    /// In record order.
    pending: Vec<Pending>,
    known: HashMap<String, Known>,
    dedupe: HashMap<String, String>,
    /// The sender (`from`) of every message recorded, by id: to index its delivery.
    senders: HashMap<String, String>,
    /// Deliveries by sender (`from`), in delivery order: a scheduled task's run sessions,
    /// for its `last_session` and its usage.
    by_sender: HashMap<String, Vec<Delivery>>,
    /// Messages handed over and not yet confirmed received.
    handed: HashMap<String, confirm::Handed>,
    /// Every delivery of the user's to each session, in hand-over order: delivered verbatim,
    /// they are told apart in a transcript by position (see [`confirm::absent`]).
    user_deliveries: HashMap<String, Vec<confirm::UserDelivery>>,
    /// Hand-over order, so messages sent again go in the order they first went.
    next_seq: u64,
    pub(crate) runs: RunState,
}

impl Messages {
    /// Whether a message with this dedupe key was ever accepted.
    pub(crate) fn has_dedupe_key(&self, key: &str) -> bool {
        self.dedupe.contains_key(key)
    }

    pub(crate) fn open(store: &StateDir) -> Result<Messages, HubError> {
        let (log, records) = store.open_log::<Record>("messages.jsonl")?;
        let mut messages = Messages {
            log,
            pending: Vec::new(),
            known: HashMap::new(),
            dedupe: HashMap::new(),
            senders: HashMap::new(),
            by_sender: HashMap::new(),
            handed: HashMap::new(),
            user_deliveries: HashMap::new(),
            next_seq: 0,
            runs: RunState::default(),
        };
        for record in records {
            messages.apply(record);
        }
        Ok(messages)
    }

    /// Applies one record (read at start, or just written).
    fn apply(&mut self, record: Record) {
        match record {
            Record::Message {
                id,
                to,
                from,
                body,
                session,
                reply_to,
                dedupe_key,
                new_session,
                from_session,
                ..
            } => {
                if let Some(key) = dedupe_key {
                    self.dedupe.insert(key, id.clone());
                }
                self.senders.insert(id.clone(), from.clone());
                self.known.insert(
                    id.clone(),
                    Known {
                        delivered_to: None,
                        sent_from: from_session,
                    },
                );
                self.pending.push(Pending {
                    id,
                    to,
                    from,
                    body,
                    session,
                    reply_to,
                    new_session,
                    again_to: None,
                });
            }
            Record::Delivered {
                id,
                session,
                confirm,
                after,
                at,
            } => {
                let waiting = self
                    .pending
                    .iter()
                    .position(|p| p.id == id)
                    .map(|i| self.pending.remove(i))
                    .or_else(|| self.handed.remove(&id).map(|h| h.msg));
                if let Some(msg) = waiting {
                    self.next_seq += 1;
                    if msg.from == "user" {
                        let list = self.user_deliveries.entry(session.clone()).or_default();
                        // Sent again: it is looked for where it went the second time.
                        list.retain(|d| d.id != id);
                        list.push(confirm::UserDelivery {
                            id: id.clone(),
                            hash: confirm::text_hash(&msg.body),
                            after: after.unwrap_or(0),
                            seq: self.next_seq,
                        });
                    }
                    if confirm {
                        let handed = confirm::Handed {
                            msg,
                            session: session.clone(),
                            seq: self.next_seq,
                        };
                        self.handed.insert(id.clone(), handed);
                    }
                }
                if let Some(from) = self.senders.get(&id) {
                    let list = self.by_sender.entry(from.clone()).or_default();
                    // A second record for one message (never written, but read defensively)
                    // is not a second delivery.
                    if !list.iter().any(|d| d.id == id) {
                        list.push(Delivery {
                            id: id.clone(),
                            session: session.clone(),
                            at,
                        });
                    }
                }
                self.known.entry(id).or_default().delivered_to = Some(session);
            }
            Record::Received { id, .. } => {
                self.handed.remove(&id);
            }
            Record::Unverified { id, .. } => {
                self.handed.remove(&id);
            }
            Record::Undeliverable { id, .. } => {
                self.pending.retain(|p| p.id != id);
                self.handed.remove(&id);
            }
            Record::Other => {}
        }
    }

    /// Writes `records` with one fsync and applies them.
    fn append(&mut self, records: Vec<Record>) -> Result<(), StoreError> {
        self.log.append_all(&records)?;
        for record in records {
            self.apply(record);
        }
        Ok(())
    }

    /// Applies a new message's record in memory before it is written (see
    /// [`Hub::pass_recording`]).
    fn stage(&mut self, record: &Record) {
        self.apply(record.clone());
    }

    /// Takes a staged message back out after its write failed.
    fn unstage(&mut self, record: &Record) {
        if let Record::Message { id, dedupe_key, .. } = record {
            self.pending.retain(|p| p.id != *id);
            self.known.remove(id);
            self.senders.remove(id);
            if let Some(key) = dedupe_key {
                self.dedupe.remove(key);
            }
        }
    }

    /// Writes a staged message's record and then `records` with one fsync, applying only
    /// `records` (the message is applied already).
    fn append_after_staged(
        &mut self,
        message: Record,
        records: Vec<Record>,
    ) -> Result<(), StoreError> {
        let mut all = Vec::with_capacity(records.len() + 1);
        all.push(message);
        all.extend(records.iter().cloned());
        self.log.append_all(&all)?;
        for record in records {
            self.apply(record);
        }
        Ok(())
    }

    /// The deliveries of every message from `from` (its wire form, as `schedule:<id>`), oldest
    /// first.
    // Read by scheduled tasks and their usage (issue 13).
    #[allow(dead_code)]
    /// A session's engine named it `to`: deliveries to `from` are listed under `to`.
    pub(crate) fn session_renamed(&mut self, from: &str, to: &str) {
        self.follow_renames(|id| (id == from).then(|| to.to_string()));
    }

    /// Lists every delivery under the id its session goes by now (the log keeps the first).
    /// `renamed` gives a session's new id, or `None` when it kept its own.
    pub(crate) fn follow_renames(&mut self, renamed: impl Fn(&str) -> Option<String>) {
        for delivery in self.by_sender.values_mut().flatten() {
            if let Some(now) = renamed(&delivery.session) {
                delivery.session = now;
            }
        }
    }

    pub(crate) fn deliveries_from(&self, from: &str) -> &[Delivery] {
        self.by_sender.get(from).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The engine of `session` began a turn on `content` (its `user_message` echo): a
    /// delivery of that text is now received, and recorded so.
    pub(crate) fn turn_started(&mut self, session: &str, content: &str, at: u64) {
        let Some(id) = self.runs.turn_started(session, content) else {
            return;
        };
        if !self.handed.contains_key(&id) {
            return;
        }
        if let Err(e) = self.append(vec![Record::Received { id: id.clone(), at }]) {
            // Unconfirmed, it is checked against the session's transcript at the next start.
            tracing::error!("messages: could not record {id} received: {e}");
        }
    }

    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The message `reply_to` names, as routing reads it.
    fn earlier(&self, id: &str) -> Option<route::Earlier> {
        self.known.get(id).map(|k| route::Earlier {
            delivered_to: k.delivered_to.clone(),
            sent_from: k.sent_from.clone(),
        })
    }
}

impl Hub {
    /// Records `msg` (fsynced) and tries to deliver it at once; what cannot be delivered now
    /// is retried every second. Called with the hub's lock held.
    pub(crate) fn enqueue_message(
        self: &Arc<Self>,
        inner: &mut Inner,
        msg: NewMessage,
    ) -> Result<Accepted, OpError> {
        Ok(self.accept_message(inner, msg, None, &mut |_, _| {})?)
    }

    /// Checks `msg`, records it and delivers what can go now, the message's record and the
    /// deliveries in one write. `acknowledge` runs once the message is durable, before any
    /// delivery is sent or announced (a duplicate is acknowledged at once: nothing is
    /// written). `from_session` is the session an agent sent it from.
    pub(super) fn accept_message(
        self: &Arc<Self>,
        inner: &mut Inner,
        msg: NewMessage,
        from_session: Option<String>,
        acknowledge: &mut dyn FnMut(&mut Inner, &Accepted),
    ) -> Result<Accepted, MessageError> {
        if !inner.agents.map.contains_key(&msg.to) {
            return Err(MessageError::UnknownAgent(msg.to));
        }
        if msg.body.trim().is_empty() {
            return Err(MessageError::EmptyBody);
        }
        if let Some(id) = msg
            .dedupe_key
            .as_ref()
            .and_then(|key| inner.messages.dedupe.get(key))
        {
            let accepted = Accepted {
                id: id.clone(),
                duplicate: true,
            };
            acknowledge(inner, &accepted);
            return Ok(accepted);
        }
        let at = self.config.clock.now_ms();
        let id = new_id("m", at);
        let record = Record::Message {
            id: id.clone(),
            to: msg.to,
            from: msg.from.as_wire(),
            body: msg.body,
            session: msg.session,
            reply_to: msg.reply_to,
            dedupe_key: msg.dedupe_key,
            new_session: msg.new_session,
            from_session,
            at,
        };
        let accepted = Accepted {
            id,
            duplicate: false,
        };
        inner.messages.stage(&record);
        let staged = record.clone();
        if let Err(e) =
            self.pass_recording(inner, record, &mut |inner| acknowledge(inner, &accepted))
        {
            inner.messages.unstage(&staged);
            return Err(MessageError::Save(e));
        }
        Ok(accepted)
    }
}

/// Answers `message_send`: the reply first, then the delivery (and its broadcast).
pub(crate) fn handle(cx: &OpCx<'_>, op: MessagesOp) -> Result<(), OpError> {
    match op {
        MessagesOp::MessageSend {
            agent,
            body,
            session,
            reply_to,
            dedupe_key,
            new_session,
        } => {
            let msg = NewMessage {
                to: agent,
                from: Origin::User,
                body,
                session,
                reply_to,
                dedupe_key,
                new_session,
            };
            let mut inner = cx.hub.lock();
            cx.hub
                .accept_message(&mut inner, msg, None, &mut |inner, accepted| {
                    cx.reply_locked(
                        inner,
                        DaemonEvent::MessageAccepted {
                            message: accepted.id.clone(),
                            duplicate: accepted.duplicate,
                        },
                    )
                })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str, from: &str) -> Record {
        Record::Message {
            id: id.into(),
            to: "ops".into(),
            from: from.into(),
            body: "b".into(),
            session: None,
            reply_to: None,
            dedupe_key: None,
            new_session: false,
            from_session: None,
            at: 1,
        }
    }

    fn delivered(id: &str, session: &str, at: u64) -> Record {
        Record::Delivered {
            id: id.into(),
            session: session.into(),
            confirm: true,
            after: None,
            at,
        }
    }

    #[test]
    fn deliveries_are_indexed_by_sender_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateDir::open(dir.path()).unwrap();
        let mut messages = Messages::open(&store).unwrap();
        messages
            .append(vec![
                message("m1", "schedule:sch-1"),
                message("m2", "user"),
                message("m3", "schedule:sch-1"),
                message("m4", "schedule:sch-2"),
                delivered("m1", "s-a", 10),
                delivered("m2", "s-b", 11),
                delivered("m3", "s-c", 12),
                delivered("m3", "s-c", 13),
            ])
            .unwrap();
        let want = vec![
            Delivery {
                id: "m1".into(),
                session: "s-a".into(),
                at: 10,
            },
            Delivery {
                id: "m3".into(),
                session: "s-c".into(),
                at: 12,
            },
        ];
        assert_eq!(messages.deliveries_from("schedule:sch-1"), want.as_slice());
        // Recorded but not delivered yet: nothing listed.
        assert!(messages.deliveries_from("schedule:sch-2").is_empty());
        assert!(messages.deliveries_from("schedule:nope").is_empty());
        drop(messages);
        let reopened = Messages::open(&store).unwrap();
        assert_eq!(reopened.deliveries_from("schedule:sch-1"), want.as_slice());
        assert_eq!(reopened.deliveries_from("user").len(), 1);
    }

    /// A session its engine renamed: its deliveries are listed under the new id, at once and
    /// after a reopen that follows the sessions log's renames.
    #[test]
    fn deliveries_follow_a_renamed_session() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateDir::open(dir.path()).unwrap();
        let mut messages = Messages::open(&store).unwrap();
        messages
            .append(vec![
                message("m1", "schedule:sch-1"),
                message("m2", "schedule:sch-1"),
                delivered("m1", "tmp", 10),
                delivered("m2", "other", 11),
            ])
            .unwrap();
        messages.session_renamed("tmp", "thread-1");
        let sessions = |m: &Messages| -> Vec<String> {
            m.deliveries_from("schedule:sch-1")
                .iter()
                .map(|d| d.session.clone())
                .collect()
        };
        assert_eq!(sessions(&messages), ["thread-1", "other"]);
        drop(messages);
        let mut reopened = Messages::open(&store).unwrap();
        assert_eq!(sessions(&reopened), ["tmp", "other"]);
        reopened.follow_renames(|id| (id == "tmp").then(|| "thread-1".to_string()));
        assert_eq!(sessions(&reopened), ["thread-1", "other"]);
    }
}
