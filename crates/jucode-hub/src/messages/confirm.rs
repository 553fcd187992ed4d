//! Exactly once across a crash: a delivery is recorded `delivered` (handed over) before the
//! engine gets it, and `received` once the engine echoes it as `user_message`. A message
//! handed over and never confirmed (the daemon was killed, the engine died or stopped with it
//! queued) is checked against what its session holds: the engine's saved transcript, when
//! the engine keeps a durable one ([`EngineFactory::transcript_is_durable`]). Found, it is
//! recorded received; absent, it goes to that session again; with no transcript to read it
//! is recorded `unverified` and never sent again (at most once rather than twice).
//!
//! A message from another agent, a timer, a task or a question carries its id in its header
//! line, so finding it is exact. The user's are delivered verbatim and told apart by
//! position: each delivery records how many user items the session was known to hold when it
//! was handed over (`after`), and every delivery of the user's to that session, received ones
//! included, claims in hand-over order the first unclaimed copy of its text at or past its
//! `after`. A copy sent before the hand-over, or taken by an earlier delivery of the same
//! text, is never mistaken for it.

use std::collections::BTreeMap;
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

/// One delivery of the user's to a session, as the fold keeps it for checks.
#[derive(Debug, Clone)]
pub(super) struct UserDelivery {
    pub(super) id: String,
    /// [`text_hash`] of its body.
    pub(super) hash: u64,
    /// The user items the session was known to hold at the hand-over.
    pub(super) after: usize,
    /// Hand-over order.
    pub(super) seq: u64,
}

/// A stable-within-the-process hash of a user's text, trimmed as engines save it.
pub(super) fn text_hash(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.trim().hash(&mut h);
    h.finish()
}

/// What a session's engine tells of what it holds.
enum Holds {
    /// Its saved transcript (empty when it saved nothing).
    Transcript(Vec<TranscriptItem>),
    /// It keeps none the daemon can read, or the session is gone: nothing can be checked.
    Unknowable(String),
}

/// One delivery to place in a session's transcript, as [`absent`] reads it.
pub(super) struct Check<'a> {
    pub(super) id: &'a str,
    pub(super) what: Look,
    /// Unconfirmed: [`absent`] says whether it was found. Received ones only claim their copy.
    pub(super) checked: bool,
}

/// How a delivery is looked for.
pub(super) enum Look {
    /// The user's: a copy of the text (by [`text_hash`]) at or past user item `after`.
    User { hash: u64, after: usize },
    /// Any other: a user item whose first line is this header (it names the message id).
    Header(String),
}

/// The ids of the checked deliveries among `checks` (one session's, in hand-over order)
/// that `transcript` does not hold. Each delivery claims the first user item it matches that
/// no earlier one claimed.
pub(super) fn absent(transcript: &[TranscriptItem], checks: &[Check<'_>]) -> Vec<String> {
    let users: Vec<&str> = transcript
        .iter()
        .filter_map(|item| match item {
            TranscriptItem::User { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    let hashes: Vec<u64> = users.iter().map(|u| text_hash(u)).collect();
    let mut claimed = vec![false; users.len()];
    let mut out = Vec::new();
    for check in checks {
        let at = match &check.what {
            Look::User { hash, after } => {
                (*after..users.len()).find(|&i| !claimed[i] && hashes[i] == *hash)
            }
            Look::Header(header) => (0..users.len()).find(|&i| {
                !claimed[i] && users[i].trim_start().lines().next() == Some(header.as_str())
            }),
        };
        match at {
            Some(i) => claimed[i] = true,
            None if check.checked => out.push(check.id.to_string()),
            None => {}
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
                let session = handed.first().map(|h| h.session.as_str()).unwrap_or("");
                // Every delivery of the user's to this session claims its copy, received ones
                // too; the others are found by their header.
                let mut checks: Vec<(u64, Check<'_>)> = messages
                    .user_deliveries
                    .get(session)
                    .into_iter()
                    .flatten()
                    .map(|d| {
                        let what = Look::User {
                            hash: d.hash,
                            after: d.after,
                        };
                        let checked = handed.iter().any(|h| h.msg.id == d.id);
                        (
                            d.seq,
                            Check {
                                id: &d.id,
                                what,
                                checked,
                            },
                        )
                    })
                    .collect();
                checks.extend(handed.iter().filter(|h| h.msg.from != "user").map(|h| {
                    let text = route::delivery_text(&h.msg.id, &h.msg.from, &h.msg.body);
                    let header = text.lines().next().unwrap_or_default().to_string();
                    let check = Check {
                        id: &h.msg.id,
                        what: Look::Header(header),
                        checked: true,
                    };
                    (h.seq, check)
                }));
                checks.sort_by_key(|(seq, _)| *seq);
                let checks: Vec<Check<'_>> = checks.into_iter().map(|(_, c)| c).collect();
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

    fn user_check<'a>(id: &'a str, body: &str, after: usize, checked: bool) -> Check<'a> {
        Check {
            id,
            what: Look::User {
                hash: text_hash(body),
                after,
            },
            checked,
        }
    }

    fn headed<'a>(id: &'a str, from: &str, body: &str) -> Check<'a> {
        let text = route::delivery_text(id, from, body);
        Check {
            id,
            what: Look::Header(text.lines().next().unwrap_or_default().to_string()),
            checked: true,
        }
    }

    #[test]
    fn a_headed_message_is_found_by_its_id_and_the_users_by_position() {
        let transcript = vec![
            user("hello"),
            TranscriptItem::Assistant {
                content: "[message from agent a · m-2]\nhi".into(),
            },
            user("[message from agent a · m-1]\nhi"),
            user("hello\n"),
        ];
        let checks = [
            // Found by its header, whatever its body became.
            headed("m-1", "agent:a", "hi"),
            // Only in an assistant message: not taken.
            headed("m-2", "agent:a", "hi"),
            // Received, handed over when the session held nothing: it claims the first copy.
            user_check("m-0", "hello", 0, false),
            // Handed over after one user item: the second copy (trimmed as engines save it).
            user_check("m-3", "hello", 1, true),
            // A third copy is not there.
            user_check("m-4", "hello", 1, true),
            user_check("m-5", "bye", 0, true),
        ];
        assert_eq!(absent(&transcript, &checks), ["m-2", "m-4", "m-5"]);
        assert_eq!(absent(&[], &[headed("m-1", "timer:tm-1", "wake")]), ["m-1"]);
    }

    /// The text typed into the session before the hand-over is not the message, however many
    /// copies of it the session holds; a received delivery of the same text claims its own.
    #[test]
    fn a_copy_from_before_the_hand_over_is_not_the_message() {
        let transcript = vec![user("same"), user("same"), user("other")];
        // Handed over when the session held three user items: nothing of it is there.
        assert_eq!(
            absent(&transcript, &[user_check("m-1", "same", 3, true)]),
            ["m-1"]
        );
        // Handed over at one: the second copy is it, unless an earlier delivery took it.
        assert!(absent(&transcript, &[user_check("m-1", "same", 1, true)]).is_empty());
        assert_eq!(
            absent(
                &transcript,
                &[
                    user_check("m-0", "same", 1, false),
                    user_check("m-1", "same", 1, true)
                ]
            ),
            ["m-1"]
        );
    }
}
