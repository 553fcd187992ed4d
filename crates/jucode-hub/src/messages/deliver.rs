//! Handing pending messages to sessions within the run limits.
//!
//! A run is in progress in an agent's session while its engine is in a turn (`busy`, from
//! the session's events) or while a message delivered to it has not started its turn yet
//! (the engine queued it, or has not begun). The second half closes the gap between a
//! delivery and the engine's `user_message` echo, and between one turn's end and the start of
//! the one queued behind it: without it a pass could count a session as idle in that gap and
//! start a fifth run.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use jucode_protocol::Object;
use jucode_protocol::daemon::{DaemonEvent, Reply};
use jucode_store::StoreError;
use serde_json::Value;

use super::route::{self, Route, Wanted};
use super::{Pending, Record};
use crate::sessions::SessionState;
use crate::{Hub, Inner, to_value};

/// Runs in progress at once, over every agent.
pub(crate) const MAX_RUNS: usize = 4;
/// Runs in progress at once in one agent's sessions.
pub(crate) const MAX_RUNS_PER_AGENT: usize = 2;

/// Deliveries whose turn has not started yet, by session: the message ids and texts sent,
/// in order.
#[derive(Debug, Default)]
pub(crate) struct RunState {
    awaiting: HashMap<String, Vec<(String, String)>>,
}

impl RunState {
    fn delivered(&mut self, session: &str, id: String, text: String) {
        self.awaiting
            .entry(session.to_string())
            .or_default()
            .push((id, text));
    }

    /// The engine began a turn on `content` (its `user_message` echo): the delivery of that
    /// text, if it was one, is now the running turn. Returns its message id.
    pub(super) fn turn_started(&mut self, session: &str, content: &str) -> Option<String> {
        let texts = self.awaiting.get_mut(session)?;
        let id = texts
            .iter()
            .position(|(_, t)| t == content)
            .map(|i| texts.remove(i).0);
        if texts.is_empty() {
            self.awaiting.remove(session);
        }
        id
    }

    /// The engine stopped: what it had queued is gone with it. Returns the ids of the
    /// deliveries it never began.
    pub(super) fn engine_stopped(&mut self, session: &str) -> Vec<String> {
        self.awaiting
            .remove(session)
            .map(|texts| texts.into_iter().map(|(id, _)| id).collect())
            .unwrap_or_default()
    }

    /// The engine named its session (its first `startup`).
    pub(crate) fn renamed(&mut self, from: &str, to: &str) {
        if let Some(texts) = self.awaiting.remove(from) {
            self.awaiting.insert(to.to_string(), texts);
        }
    }

    /// Whether a delivery to `session` has not begun its turn yet.
    pub(crate) fn awaits(&self, session: &str) -> bool {
        self.awaiting.contains_key(session)
    }
}

/// The runs in progress, counted once per pass and kept up to date as it delivers.
struct Runs {
    sessions: HashSet<String>,
    per_agent: HashMap<String, usize>,
}

impl Runs {
    fn count(inner: &Inner) -> Runs {
        let mut runs = Runs {
            sessions: HashSet::new(),
            per_agent: HashMap::new(),
        };
        for (id, agent, busy) in inner.sessions.run_facts() {
            if let Some(agent) = agent
                && (busy || inner.messages.runs.awaits(id))
            {
                runs.add(id, agent);
            }
        }
        runs
    }

    fn add(&mut self, session: &str, agent: &str) {
        if self.sessions.insert(session.to_string()) {
            *self.per_agent.entry(agent.to_string()).or_default() += 1;
        }
    }

    fn in_progress(&self, session: &str) -> bool {
        self.sessions.contains(session)
    }

    /// Whether `agent` may start one more run.
    fn room_for(&self, agent: &str) -> bool {
        self.sessions.len() < MAX_RUNS
            && self.per_agent.get(agent).copied().unwrap_or(0) < MAX_RUNS_PER_AGENT
    }
}

/// A new message's record written with a pass, and what runs once it is durable.
type Staged<'a> = (Record, &'a mut dyn FnMut(&mut Inner));

/// A delivery decided in a pass, sent once its record is durable.
struct Send {
    id: String,
    agent: String,
    from: String,
    session: String,
    text: String,
    again: bool,
}

impl Hub {
    /// One pass over the pending messages, the user's first: each is routed and delivered if
    /// the run limits allow, left waiting if not (or while its agent is disabled), and marked
    /// undeliverable when it cannot be delivered at all. The pass's records are written with
    /// one fsync before any message is handed to an engine or announced.
    pub(crate) fn deliver_pending(self: &Arc<Self>, inner: &mut Inner) {
        if let Err(e) = self.pass(inner, None) {
            // Nothing was handed over; the next pass tries again (or the log stays poisoned
            // and says so each time).
            tracing::error!("messages: {e}");
        }
    }

    /// A pass that first records a new message: `staged` is its record, already applied in
    /// memory (so the pass routes it), written in the same write and fsync as the pass's own
    /// records; `acknowledge` runs once that write is durable and before anything is sent.
    /// On a failed write nothing is sent and the caller takes the message back out.
    pub(super) fn pass_recording(
        self: &Arc<Self>,
        inner: &mut Inner,
        staged: Record,
        acknowledge: &mut dyn FnMut(&mut Inner),
    ) -> Result<(), StoreError> {
        self.pass(inner, Some((staged, acknowledge)))
    }

    fn pass(
        self: &Arc<Self>,
        inner: &mut Inner,
        staged: Option<Staged<'_>>,
    ) -> Result<(), StoreError> {
        if staged.is_none() && (!inner.messages.has_pending() || !inner.sessions.accepting()) {
            return Ok(());
        }
        // The user's first, record order within each group (the sort is stable). Indexes:
        // the pending list does not change until the pass writes.
        let mut order: Vec<usize> = (0..inner.messages.pending.len()).collect();
        order.sort_by_key(|&i| inner.messages.pending[i].from != "user");
        // While shutting down nothing new starts; a staged message is still recorded.
        if !inner.sessions.accepting() {
            order.clear();
        }
        let mut runs = Runs::count(inner);
        let mut facts = inner.sessions.route_facts();
        let mut records = Vec::new();
        let mut sends = Vec::new();
        let at = self.config.clock.now_ms();
        for i in order {
            let waiting = &inner.messages.pending[i];
            let enabled = inner.agents.get(&waiting.to).map(|a| a.config.enabled);
            if enabled == Some(false) {
                continue;
            }
            let msg: Pending = waiting.clone();
            let undeliverable = |reason: String| Record::Undeliverable {
                id: msg.id.clone(),
                reason,
                at,
            };
            if enabled.is_none() {
                records.push(undeliverable(format!("agent {} was deleted", msg.to)));
                continue;
            }
            let earlier = msg
                .reply_to
                .as_deref()
                .and_then(|id| inner.messages.earlier(id));
            let wanted = Wanted {
                to: &msg.to,
                from_user: msg.from == "user",
                session: msg.session.as_deref(),
                new_session: msg.new_session,
                reply_to: earlier.as_ref(),
            };
            // Handed to a session before and absent from it: that session again.
            let again = msg
                .again_to
                .as_ref()
                .filter(|s| facts.iter().any(|f| f.id == **s));
            let route = match again {
                Some(session) => Route::Session(session.clone()),
                None => route::route(&wanted, &facts),
            };
            let session = match route {
                Route::Undeliverable(reason) => {
                    records.push(undeliverable(reason));
                    continue;
                }
                Route::Session(session) => {
                    // Queueing behind a run in progress starts no new one.
                    if !runs.in_progress(&session) && !runs.room_for(&msg.to) {
                        continue;
                    }
                    match inner.sessions.state(&session) {
                        SessionState::Open => {}
                        // Its engine is going away; a later pass finds it closed.
                        SessionState::Stopping => continue,
                        SessionState::Closed => {
                            if let Err(e) = self.reopen_session(inner, &session) {
                                records.push(undeliverable(format!(
                                    "session {session} could not be reopened: {e}"
                                )));
                                continue;
                            }
                        }
                    }
                    session
                }
                Route::NewSession => {
                    if !runs.room_for(&msg.to) {
                        continue;
                    }
                    match self.start_agent_session(inner, &msg.to, None, Object::new()) {
                        Ok(session) => {
                            // Later messages of this pass may route to it.
                            facts = inner.sessions.route_facts();
                            session
                        }
                        Err(e) => {
                            records.push(undeliverable(format!(
                                "no session could be started for it: {e}"
                            )));
                            continue;
                        }
                    }
                }
            };
            runs.add(&session, &msg.to);
            records.push(Record::Delivered {
                id: msg.id.clone(),
                session: session.clone(),
                confirm: true,
                after: (msg.from == "user").then(|| inner.sessions.users_seen(&session)),
                at,
            });
            sends.push(Send {
                // Sent again where it went before: announced then, not twice.
                again: msg.again_to.as_deref() == Some(session.as_str()),
                text: route::delivery_text(&msg.id, &msg.from, &msg.body),
                id: msg.id,
                agent: msg.to,
                from: msg.from,
                session,
            });
        }
        match staged {
            Some((message, acknowledge)) => {
                inner.messages.append_after_staged(message, records)?;
                acknowledge(inner);
            }
            None if records.is_empty() => return Ok(()),
            None => inner.messages.append(records)?,
        }
        // A session that had no run in progress has one now: the agents list says so.
        let newly_running = sends.iter().any(|send| {
            !inner.sessions.busy(&send.session) && !inner.messages.runs.awaits(&send.session)
        });
        for send in sends {
            inner
                .messages
                .runs
                .delivered(&send.session, send.id.clone(), send.text.clone());
            inner
                .sessions
                .deliver(&send.session, user_message(send.text));
            if send.again {
                continue;
            }
            let frame = to_value(&Reply::to(
                None,
                DaemonEvent::MessageDelivered {
                    id: send.id,
                    agent: send.agent,
                    from: send.from,
                    session: send.session,
                },
            ));
            inner.broadcast(&frame);
            crate::schedules::delivered(inner, &frame);
        }
        if newly_running {
            inner.broadcast_agents();
        }
        Ok(())
    }
}

/// The op a delivery is: a user message the daemon itself sends.
fn user_message(content: String) -> Object {
    let mut op = Object::new();
    op.insert("op".into(), Value::String("user_message".into()));
    op.insert("content".into(), Value::String(content));
    op.insert("claimed".into(), Value::Bool(true));
    op
}
