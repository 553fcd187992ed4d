//! Notifications to paired devices: which events notify, and that none notifies twice.
//!
//! Triggers are seen under the hub's lock (a requirements broadcast, a question asked) and
//! only queued here; a task started with the background loop sends them one after another
//! through the relay (`devices/push.rs`), never holding the lock while it waits. Sending in
//! order keeps a phone's notifications in the order things happened.
//!
//! Requirements: the last `status` and `proposal` seen of each one are kept, seeded from the
//! list when the hub opens, so a re-broadcast or a restart with requirements already in
//! `review` sends nothing. An open requirement notifies when its status turns to `review`,
//! `confirm` or `approval`; any requirement when an agent's proposal appears on it. A change
//! the user made by a requirement op is taken in silently ([`Notifications::caused_by_user`]).
//! Dispatch's triggers (a plan waiting, a task waiting for approval, a dispatch done) are
//! found by `dispatch::notes` on each `dispatches` broadcast and queued here.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use jucode_protocol::daemon::{
    DaemonEvent, Importance, QuestionInfo, RequirementInfo, RequirementState,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::Hub;

/// Bodies are clipped to this many characters (plus `…`).
pub const BODY_CHARS: usize = 300;

/// One notification: what the relay is asked to show on the user's devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub title: String,
    pub body: String,
    /// A later notification with the same tag replaces the earlier one on the device.
    pub tag: String,
    /// The page to open; `None` is the remote page (`/remote`).
    pub url: Option<String>,
    /// The session it is about, which the Android app opens.
    pub session: Option<String>,
}

impl Notification {
    /// The payload sent: `{title, body, tag, url}` and `session` when there is one; the body
    /// clipped to 300 characters (`BODY_CHARS`) plus `…`.
    pub fn payload(&self) -> Value {
        let mut body: String = self.body.chars().take(BODY_CHARS).collect();
        if self.body.chars().count() > BODY_CHARS {
            body.push('…');
        }
        let mut payload = json!({
            "title": self.title,
            "body": body,
            "tag": self.tag,
            "url": self.url.as_deref().unwrap_or("/remote"),
        });
        if let Some(session) = &self.session {
            payload["session"] = json!(session);
        }
        payload
    }
}

/// What was last seen of one requirement.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    status: String,
    proposal: Option<Value>,
}

pub(crate) struct Notifications {
    seen: HashMap<String, Seen>,
    /// The next requirements broadcast comes from a client's own requirement op.
    by_user: bool,
    queue: mpsc::UnboundedSender<Notification>,
    /// Taken by the sending task when the background loop starts.
    pending: Option<mpsc::UnboundedReceiver<Notification>>,
}

impl Notifications {
    /// Starts from `requirements` as they are now: none of them notifies until it changes.
    pub(crate) fn new(requirements: &DaemonEvent) -> Notifications {
        let (queue, pending) = mpsc::unbounded_channel();
        let mut n = Notifications {
            seen: HashMap::new(),
            // Seeding notifies nothing.
            by_user: true,
            queue,
            pending: Some(pending),
        };
        n.requirements_seen(requirements);
        n
    }

    /// Queues a notification for the sending task.
    pub(crate) fn queue(&mut self, note: Notification) {
        // Fails only once the hub is going away (the task and its receiver are gone).
        let _ = self.queue.send(note);
    }

    /// The requirements broadcast about to be made is a client's own requirement op (the user
    /// set a state, linked a session, decided a proposal…): what it changes notifies nothing.
    pub(crate) fn caused_by_user(&mut self) {
        self.by_user = true;
    }

    /// Compares a `requirements` list with what was seen last and queues what notifies.
    pub(crate) fn requirements_seen(&mut self, event: &DaemonEvent) {
        let by_user = std::mem::take(&mut self.by_user);
        let DaemonEvent::Requirements { requirements } = event else {
            return;
        };
        let mut seen = HashMap::with_capacity(requirements.len());
        for r in requirements {
            let now = Seen {
                status: r.status.clone(),
                proposal: r.proposal.clone(),
            };
            let before = self.seen.remove(&r.id);
            if !by_user {
                for note in changes(r, before.as_ref()) {
                    self.queue(note);
                }
            }
            seen.insert(r.id.clone(), now);
        }
        // Deleted requirements are forgotten.
        self.seen = seen;
    }

    /// What is queued and not yet taken by the sending task (tests without the task).
    #[cfg(test)]
    pub(crate) fn take_queued(&mut self) -> Vec<Notification> {
        let mut out = Vec::new();
        if let Some(rx) = self.pending.as_mut() {
            while let Ok(note) = rx.try_recv() {
                out.push(note);
            }
        }
        out
    }

    /// An agent asked a question: an important one notifies.
    pub(crate) fn question_asked(&mut self, q: &QuestionInfo) {
        if q.importance != Importance::High {
            return;
        }
        self.queue(Notification {
            title: format!("Question from {}: {}", q.agent, q.title),
            body: q.body.clone(),
            tag: format!("question-{}", q.id),
            url: None,
            session: Some(q.session.clone()),
        });
    }
}

/// The notifications one requirement's change makes, given what was seen of it before
/// (`None`: a requirement not seen yet).
fn changes(r: &RequirementInfo, before: Option<&Seen>) -> Vec<Notification> {
    let mut notes = Vec::new();
    let url = Some(format!("/remote?requirement={}", r.id));
    let status_changed = before.is_none_or(|b| b.status != r.status);
    if r.state == RequirementState::Open && status_changed {
        let waiting = r
            .session_states
            .iter()
            .find(|(_, state)| *state == "waiting")
            .map(|(s, _)| s.clone());
        let reply = r.last_reply.clone().unwrap_or_default();
        let note = match r.status.as_str() {
            "review" => Some((
                format!("Ready for review: {}", r.title),
                or(reply, "A session finished its turn."),
                r.sessions.last().cloned(),
            )),
            "confirm" => Some((
                format!("Waiting for your go-ahead: {}", r.title),
                or(reply, "The session waits for you to confirm its next step."),
                r.gate.as_ref().map(|g| g.session.clone()),
            )),
            "approval" => Some((
                format!("Approval needed: {}", r.title),
                "A session asks for your approval.".to_string(),
                waiting.or_else(|| r.sessions.last().cloned()),
            )),
            _ => None,
        };
        if let Some((title, body, session)) = note {
            notes.push(Notification {
                title,
                body,
                tag: format!("requirement-{}", r.id),
                url: url.clone(),
                session,
            });
        }
    }
    let proposal_new = r
        .proposal
        .as_ref()
        .is_some_and(|p| before.is_none_or(|b| b.proposal.as_ref() != Some(p)));
    if let Some(p) = r.proposal.as_ref().filter(|_| proposal_new) {
        let field = |name: &str| p.get(name).and_then(Value::as_str).unwrap_or_default();
        let agent = match field("agent") {
            "" => "An agent",
            agent => agent,
        };
        let title = match field("kind") {
            "close" if field("outcome") == "parked" => {
                format!("{agent} proposes to park: {}", r.title)
            }
            "close" => format!("{agent} proposes to close: {}", r.title),
            _ => format!("{agent} proposes a requirement: {}", r.title),
        };
        let session = Some(field("session")).filter(|s| !s.is_empty());
        notes.push(Notification {
            title,
            body: or(field("reason").to_string(), &r.text),
            tag: format!("proposal-{}", r.id),
            url,
            session: session.map(str::to_string),
        });
    }
    notes
}

fn or(text: String, instead: &str) -> String {
    if text.trim().is_empty() {
        instead.to_string()
    } else {
        text
    }
}

impl Hub {
    /// Starts the task that sends queued notifications (with the background loop).
    pub(crate) fn start_notifications(self: &Arc<Self>) {
        let Some(pending) = self.lock().notifications.pending.take() else {
            return;
        };
        tokio::spawn(send_all(Arc::downgrade(self), pending));
    }
}

/// Sends each queued notification in turn; ends with the hub (its queue closes).
async fn send_all(hub: Weak<Hub>, mut pending: mpsc::UnboundedReceiver<Notification>) {
    while let Some(note) = pending.recv().await {
        let Some(hub) = hub.upgrade() else {
            return;
        };
        hub.send_notification(&note).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::BTreeMap;

    use jucode_protocol::daemon::{Progress, RequirementGate};

    use super::*;

    fn requirement(id: &str, state: RequirementState, status: &str) -> RequirementInfo {
        RequirementInfo {
            id: id.into(),
            text: format!("{id} text"),
            title: format!("{id} title"),
            title_auto: false,
            images: vec![],
            project: None,
            state,
            sessions: vec!["s1".into()],
            progress: Progress::default(),
            progress_at: 0,
            source: "desktop".into(),
            source_session: None,
            gate: None,
            proposal: None,
            status: status.into(),
            session_states: BTreeMap::from([("s1".to_string(), "idle".to_string())]),
            last_reply: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    fn list(requirements: Vec<RequirementInfo>) -> DaemonEvent {
        DaemonEvent::Requirements { requirements }
    }

    fn drain(n: &mut Notifications) -> Vec<Notification> {
        let rx = n.pending.as_mut().unwrap();
        let mut out = Vec::new();
        while let Ok(note) = rx.try_recv() {
            out.push(note);
        }
        out
    }

    #[test]
    fn what_is_there_at_start_notifies_nothing_until_it_changes() {
        let open = RequirementState::Open;
        let mut n = Notifications::new(&list(vec![requirement("R-1", open, "review")]));
        n.requirements_seen(&list(vec![requirement("R-1", open, "review")]));
        assert_eq!(drain(&mut n), vec![]);
        n.requirements_seen(&list(vec![requirement("R-1", open, "running")]));
        assert_eq!(drain(&mut n), vec![]);
        let mut done = requirement("R-1", open, "review");
        done.last_reply = Some("All tests pass.".into());
        n.requirements_seen(&list(vec![done.clone()]));
        assert_eq!(
            drain(&mut n),
            vec![Notification {
                title: "Ready for review: R-1 title".into(),
                body: "All tests pass.".into(),
                tag: "requirement-R-1".into(),
                url: Some("/remote?requirement=R-1".into()),
                session: Some("s1".into()),
            }]
        );
        // The same status again (another change broadcast the list): nothing.
        n.requirements_seen(&list(vec![done]));
        assert_eq!(drain(&mut n), vec![]);
    }

    #[test]
    fn approval_and_confirm_notify_with_their_session_but_not_other_states() {
        let open = RequirementState::Open;
        let mut n = Notifications::new(&list(vec![requirement("R-1", open, "running")]));
        let mut waiting = requirement("R-1", open, "approval");
        waiting.sessions = vec!["s1".into(), "s2".into()];
        waiting.session_states.insert("s2".into(), "waiting".into());
        n.requirements_seen(&list(vec![waiting]));
        let notes = drain(&mut n);
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].title, "Approval needed: R-1 title");
        assert_eq!(notes[0].session.as_deref(), Some("s2"));
        let mut gate = requirement("R-1", open, "confirm");
        gate.gate = Some(RequirementGate {
            session: "s1".into(),
            stage: "understand".into(),
            plan: false,
            mode: "auto".into(),
            answered: true,
        });
        n.requirements_seen(&list(vec![gate]));
        let notes = drain(&mut n);
        assert_eq!(notes[0].title, "Waiting for your go-ahead: R-1 title");
        assert_eq!(notes[0].session.as_deref(), Some("s1"));
        // Failed, and an idea that is not open, notify nothing.
        n.requirements_seen(&list(vec![requirement("R-1", open, "failed")]));
        n.requirements_seen(&list(vec![requirement(
            "R-1",
            RequirementState::Idea,
            "review",
        )]));
        assert_eq!(drain(&mut n), vec![]);
    }

    #[test]
    fn a_change_by_the_users_own_op_is_taken_in_silently_once() {
        let open = RequirementState::Open;
        let mut n = Notifications::new(&list(vec![requirement(
            "R-1",
            RequirementState::Idea,
            "idea",
        )]));
        n.caused_by_user();
        n.requirements_seen(&list(vec![requirement("R-1", open, "review")]));
        assert_eq!(drain(&mut n), vec![]);
        // The mark covers one broadcast only.
        n.requirements_seen(&list(vec![requirement("R-1", open, "running")]));
        n.requirements_seen(&list(vec![requirement("R-1", open, "review")]));
        assert_eq!(drain(&mut n).len(), 1);
    }

    #[test]
    fn a_proposal_appearing_notifies_once_and_a_deleted_requirement_is_forgotten() {
        let mut n = Notifications::new(&list(vec![]));
        let mut proposed = requirement("R-2", RequirementState::Proposed, "proposed");
        proposed.sessions = vec![];
        proposed.proposal = Some(json!({"kind":"create","agent":"ops","session":"s9",
            "reason":"the logs fill the disk","at":5}));
        n.requirements_seen(&list(vec![proposed.clone()]));
        let notes = drain(&mut n);
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].title, "ops proposes a requirement: R-2 title");
        assert_eq!(notes[0].body, "the logs fill the disk");
        assert_eq!(notes[0].tag, "proposal-R-2");
        assert_eq!(notes[0].session.as_deref(), Some("s9"));
        n.requirements_seen(&list(vec![proposed.clone()]));
        assert_eq!(drain(&mut n), vec![]);
        // A close proposal on an open requirement (its status becomes `proposal`).
        let mut close = requirement("R-1", RequirementState::Open, "proposal");
        n.requirements_seen(&list(vec![close.clone(), proposed.clone()]));
        assert_eq!(drain(&mut n), vec![]);
        close.proposal = Some(json!({"kind":"close","outcome":"parked","agent":"ops",
            "session":"s1","reason":"","at":7}));
        n.requirements_seen(&list(vec![close.clone(), proposed.clone()]));
        let notes = drain(&mut n);
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].title, "ops proposes to park: R-1 title");
        assert_eq!(
            notes[0].body, "R-1 text",
            "no reason: the requirement's words"
        );
        // R-2 deleted, then one with the same id and proposal appears: it is new again.
        n.requirements_seen(&list(vec![close.clone()]));
        n.requirements_seen(&list(vec![close, proposed]));
        assert_eq!(drain(&mut n).len(), 1);
    }

    #[test]
    fn only_important_questions_notify() {
        let mut n = Notifications::new(&list(vec![]));
        let mut q = QuestionInfo {
            id: "q-1".into(),
            agent: "ops".into(),
            session: "s1".into(),
            title: "Deploy now?".into(),
            body: "x".repeat(400),
            assumption: String::new(),
            default: String::new(),
            importance: Importance::Normal,
            due_at: None,
            asked_at: 0,
        };
        n.question_asked(&q);
        assert_eq!(drain(&mut n), vec![]);
        q.importance = Importance::High;
        n.question_asked(&q);
        let notes = drain(&mut n);
        assert_eq!(notes.len(), 1);
        let payload = notes[0].payload();
        assert_eq!(payload["title"], "Question from ops: Deploy now?");
        assert_eq!(payload["url"], "/remote");
        assert_eq!(payload["session"], "s1");
        let body = payload["body"].as_str().unwrap();
        assert_eq!(body.chars().count(), BODY_CHARS + 1);
        assert!(body.ends_with('…'));
    }
}
