//! Exactly once across a crash: a delivery is recorded `delivered` (handed over) before the
//! engine gets it, and `received` once the engine echoes it as `user_message`. A message
//! handed over and never confirmed (the daemon was killed, the engine died or stopped with it
//! queued) is checked against what its session holds: the engine's saved transcript, when
//! the engine keeps a durable one ([`EngineFactory::transcript_is_durable`]). Found, it is
//! recorded received; absent, it goes to that session again; with no transcript to read it
//! is recorded `unverified` and never sent again (at most once rather than twice).
//!
//! A message from another agent, a timer, a task or a question carries its id in its header
//! line, so finding it is exact. The user's are delivered verbatim: a transcript holding
//! more copies of the text than the session is known to have received counts as holding it.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use jucode_engine::EngineFactory;
use jucode_protocol::serve::TranscriptItem;

use super::{Pending, Record, route};
use crate::{Hub, Inner};

/// A message handed to a session and not yet confirmed received.
#[derive(Debug, Clone)]
pub(super) struct Handed {
    pub(super) msg: Pending,
    pub(super) session: String,
    /// Hand-over order.
    pub(super) seq: u64,
}

/// A stable-within-the-process hash of a user's text (the count of copies a session took).
pub(super) fn text_hash(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// What a session's engine tells of what it holds.
enum Holds {
    /// Its saved transcript (empty when it saved nothing).
    Transcript(Vec<TranscriptItem>),
    /// It keeps none the daemon can read, or the session is gone: nothing can be checked.
    Unknowable(String),
}

/// One unconfirmed delivery to check, as [`absent`] reads it.
pub(super) struct Check<'a> {
    pub(super) id: &'a str,
    pub(super) from_user: bool,
    /// The text it was delivered as.
    pub(super) text: String,
    /// For the user's: how many of that text the session is known to have received.
    pub(super) taken: usize,
}

/// The ids among `checks` (one session's, in hand-over order) that `transcript` does not
/// hold. A headed message is found by its header line (it names the message id); the user's
/// by count: the copies of its text beyond those already received are the first ones
/// checked.
pub(super) fn absent(transcript: &[TranscriptItem], checks: &[Check<'_>]) -> Vec<String> {
    let users: Vec<&str> = transcript
        .iter()
        .filter_map(|item| match item {
            TranscriptItem::User { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    // Copies of each user text still unaccounted for, as checks use them up.
    let mut spare: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::new();
    for check in checks {
        let found = if check.from_user {
            let left = spare.entry(check.text.as_str()).or_insert_with(|| {
                let held = users.iter().filter(|u| **u == check.text).count();
                held.saturating_sub(check.taken)
            });
            let found = *left > 0;
            *left = left.saturating_sub(1);
            found
        } else {
            let header = check.text.lines().next().unwrap_or_default();
            users.iter().any(|u| u.lines().next() == Some(header))
        };
        if !found {
            out.push(check.id.to_string());
        }
    }
    out
}

impl Hub {
    /// At start, before the first tick: every delivery handed over and not confirmed by the
    /// last run is checked against its session.
    pub(crate) fn confirm_at_start(self: &Arc<Self>) {
        let mut inner = self.lock();
        let mut by_session: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (id, h) in &inner.messages.handed {
            by_session
                .entry(h.session.clone())
                .or_default()
                .push(id.clone());
        }
        for (session, ids) in by_session {
            let Some(holds) = self.holds_now(&inner, &session) else {
                continue;
            };
            let holds = match holds {
                Ok((factory, session)) => {
                    Holds::Transcript(factory.saved_transcript(&session).unwrap_or_default())
                }
                Err(why) => Holds::Unknowable(why),
            };
            self.settle(&mut inner, &ids, holds, false);
        }
    }

    /// The engine of `session` stopped: deliveries it had not begun are checked against its
    /// saved transcript (read off the async threads) and sent again when absent.
    pub(crate) fn deliveries_dropped(self: &Arc<Self>, inner: &mut Inner, session: &str) {
        let ids = inner.messages.runs.engine_stopped(session);
        let ids: Vec<String> = ids
            .into_iter()
            .filter(|id| inner.messages.handed.contains_key(id))
            .collect();
        if ids.is_empty() {
            return;
        }
        match self.holds_now(inner, session) {
            // Its engine is not configured in this run: checked at the next start.
            None => {}
            Some(Err(why)) => self.settle(inner, &ids, Holds::Unknowable(why), false),
            Some(Ok((factory, session))) => {
                let hub = self.clone();
                tokio::spawn(async move {
                    let read = tokio::task::spawn_blocking(move || {
                        factory.saved_transcript(&session).unwrap_or_default()
                    })
                    .await;
                    let mut inner = hub.lock();
                    match read {
                        Ok(transcript) => {
                            hub.settle(&mut inner, &ids, Holds::Transcript(transcript), true)
                        }
                        // Left unconfirmed: the next start checks it.
                        Err(e) => tracing::error!("messages: reading a transcript failed: {e}"),
                    }
                });
            }
        }
    }

    /// Whether `session`'s holdings can be read: its engine's factory and the session id to
    /// ask it, or why not; `None` when its engine is not configured in this run (asked again
    /// at the next start).
    #[allow(clippy::type_complexity)]
    fn holds_now(
        &self,
        inner: &Inner,
        session: &str,
    ) -> Option<Result<(Arc<dyn EngineFactory>, String), String>> {
        let Some(engine) = inner.sessions.engine_of(session) else {
            return Some(Err(format!("session {session} is gone")));
        };
        let factory = self.config.engines.get(engine)?;
        if !factory.transcript_is_durable() {
            return Some(Err(format!(
                "the {engine} engine keeps no transcript the daemon can check"
            )));
        }
        Some(Ok((factory.clone(), session.to_string())))
    }

    /// Settles the unconfirmed deliveries `ids` (of one session) by what it holds: received,
    /// sent again, or unverified. The records are written with one fsync before anything is
    /// sent again.
    /// `now`: a pass runs right after (not at start).
    fn settle(self: &Arc<Self>, inner: &mut Inner, ids: &[String], holds: Holds, now: bool) {
        let at = self.config.clock.now_ms();
        let messages = &inner.messages;
        let mut handed: Vec<&Handed> = ids
            .iter()
            .filter_map(|id| messages.handed.get(id))
            .collect();
        handed.sort_by_key(|h| h.seq);
        let (records, again): (Vec<Record>, Vec<String>) = match holds {
            Holds::Unknowable(reason) => {
                let records = handed
                    .iter()
                    .map(|h| Record::Unverified {
                        id: h.msg.id.clone(),
                        reason: reason.clone(),
                        at,
                    })
                    .collect();
                (records, Vec::new())
            }
            Holds::Transcript(transcript) => {
                let checks: Vec<Check<'_>> = handed
                    .iter()
                    .map(|h| Check {
                        id: &h.msg.id,
                        from_user: h.msg.from == "user",
                        text: route::delivery_text(&h.msg.id, &h.msg.from, &h.msg.body),
                        taken: messages
                            .user_taken
                            .get(&(h.session.clone(), text_hash(&h.msg.body)))
                            .copied()
                            .unwrap_or(0),
                    })
                    .collect();
                let missing = absent(&transcript, &checks);
                let records = handed
                    .iter()
                    .filter(|h| !missing.contains(&h.msg.id))
                    .map(|h| Record::Received {
                        id: h.msg.id.clone(),
                        at,
                    })
                    .collect();
                let again: Vec<&Handed> = handed
                    .iter()
                    .copied()
                    .filter(|h| missing.contains(&h.msg.id))
                    .collect();
                (
                    records,
                    again.into_iter().map(|h| h.msg.id.clone()).collect(),
                )
            }
        };
        if !records.is_empty()
            && let Err(e) = inner.messages.append(records)
        {
            // Nothing settled: the next start checks them again.
            tracing::error!("messages: {e}");
            return;
        }
        if again.is_empty() {
            return;
        }
        // Back in front of the waiting ones, in the order they first went; the next pass
        // (the next tick at the latest) hands them over again, to the same session.
        let mut back = Vec::new();
        for id in &again {
            if let Some(h) = inner.messages.handed.remove(id) {
                tracing::warn!(
                    "message {id} never reached session {}; it goes again",
                    h.session
                );
                back.push(Pending {
                    again_to: Some(h.session),
                    ..h.msg
                });
            }
        }
        back.append(&mut inner.messages.pending);
        inner.messages.pending = back;
        // At once rather than at the next tick; at start the first tick does it, once the
        // hub is open.
        if now {
            self.deliver_pending(inner);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn user(text: &str) -> TranscriptItem {
        TranscriptItem::User {
            content: text.into(),
            images: vec![],
        }
    }

    fn check<'a>(id: &'a str, from: &str, body: &str, taken: usize) -> Check<'a> {
        Check {
            id,
            from_user: from == "user",
            text: route::delivery_text(id, from, body),
            taken,
        }
    }

    #[test]
    fn a_headed_message_is_found_by_its_id_and_the_users_by_count() {
        let transcript = vec![
            user("hello"),
            TranscriptItem::Assistant {
                content: "[message from agent a · m-2]\nhi".into(),
            },
            user("[message from agent a · m-1]\nhi"),
            user("hello"),
        ];
        let checks = [
            // Found by its header, whatever its body became.
            check("m-1", "agent:a", "hi", 0),
            // Only in an assistant message: not taken.
            check("m-2", "agent:a", "hi", 0),
            // Two copies of "hello", one received before: this one is the second.
            check("m-3", "user", "hello", 1),
            // A third copy is not there.
            check("m-4", "user", "hello", 1),
            check("m-5", "user", "bye", 0),
        ];
        assert_eq!(absent(&transcript, &checks), ["m-2", "m-4", "m-5"]);
        assert_eq!(
            absent(&[], &[check("m-1", "timer:tm-1", "wake", 0)]),
            ["m-1"]
        );
    }
}
