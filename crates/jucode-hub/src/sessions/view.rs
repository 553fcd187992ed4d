//! What the daemon keeps of a session's events to rebuild a watcher's snapshot.

use std::collections::HashMap;

use jucode_protocol::serve::{Event, Known, STATE_EVENTS, TranscriptItem};
use serde_json::json;

use super::Session;

/// Live sets other engines replace as a whole, kept for a watcher's snapshot as well.
const ENGINE_STATE_EVENTS: &[&str] = &["background_tasks", "agent_runs"];

/// How much conversation text a session's view keeps for snapshots: a session that runs for
/// weeks must not grow the daemon without bound, and one snapshot frame stays well under the
/// 8 MiB a client accepts. The oldest items go first; the newest is always kept.
pub(super) const VIEW_TEXT_BUDGET: usize = 4 << 20;

#[derive(Default)]
pub(super) struct View {
    pub(super) state: HashMap<String, Event>,
    pub(super) transcript: Vec<TranscriptItem>,
    /// Text bytes held in `transcript`.
    pub(super) bytes: usize,
    /// Items dropped from the front of `transcript` to keep within [`VIEW_TEXT_BUDGET`].
    pub(super) dropped: usize,
    /// Open approval requests, by call id, in arrival order.
    pub(super) approvals: Vec<(String, Event)>,
    /// User items the conversation has held (dropped ones included): where the next user
    /// message lands, as a delivery records it (`messages/confirm.rs`).
    pub(super) users: usize,
}

fn text_bytes(item: &TranscriptItem) -> usize {
    match item {
        TranscriptItem::User { content, images } => {
            content.len() + images.iter().map(String::len).sum::<usize>()
        }
        TranscriptItem::Assistant { content } => content.len(),
        TranscriptItem::Tool { name, output } => name.len() + output.len(),
        TranscriptItem::Branch { label } => label.len(),
    }
}

impl View {
    /// A view that starts from a conversation saved earlier (a reopened session).
    pub(super) fn with_transcript(items: Vec<TranscriptItem>) -> View {
        let mut view = View::default();
        view.set_transcript(items);
        view.trim();
        view
    }

    #[cfg(test)]
    pub(super) fn apply(&mut self, event: &Event) {
        self.apply_kind(None, event);
    }

    /// [`View::apply`] with the event's `type` given when the caller already read it (each
    /// read hashes the key, and deltas come by the thousand).
    pub(super) fn apply_kind(&mut self, kind: Option<&str>, event: &Event) {
        let kind = kind.unwrap_or_else(|| event.kind());
        self.apply_event(kind, event);
        self.trim();
    }

    /// Applies an `assistant_delta` of `delta` (an engine's short form of one).
    pub(super) fn apply_delta(&mut self, delta: &str) {
        self.add_delta(delta);
        self.trim();
    }

    fn add_delta(&mut self, delta: &str) {
        match self.transcript.last_mut() {
            Some(TranscriptItem::Assistant { content }) => {
                self.bytes += delta.len();
                content.push_str(delta);
            }
            _ => self.push(TranscriptItem::Assistant {
                content: delta.to_string(),
            }),
        }
    }

    /// Whether `event` is a `transcript` that says nothing the view (and so every snapshot
    /// sent since) does not already hold: forwarding it would only make clients redraw.
    pub(super) fn repeats(&self, event: &Event) -> bool {
        if event.kind() != "transcript" {
            return false;
        }
        match event.known() {
            Some(Known::Transcript { items }) => {
                self.dropped == 0 && !items.is_empty() && items == self.transcript
            }
            _ => false,
        }
    }

    /// Drops the oldest items while the text held is over budget.
    fn trim(&mut self) {
        if self.bytes <= VIEW_TEXT_BUDGET {
            return;
        }
        let mut cut = 0;
        let mut bytes = self.bytes;
        while bytes > VIEW_TEXT_BUDGET && cut + 1 < self.transcript.len() {
            bytes -= text_bytes(&self.transcript[cut]);
            cut += 1;
        }
        self.transcript.drain(..cut);
        self.bytes = bytes;
        self.dropped += cut;
    }

    fn push(&mut self, item: TranscriptItem) {
        if matches!(item, TranscriptItem::User { .. }) {
            self.users += 1;
        }
        self.bytes += text_bytes(&item);
        self.transcript.push(item);
    }

    fn set_transcript(&mut self, items: Vec<TranscriptItem>) {
        self.bytes = items.iter().map(text_bytes).sum();
        self.users = items
            .iter()
            .filter(|i| matches!(i, TranscriptItem::User { .. }))
            .count();
        self.dropped = 0;
        self.transcript = items;
    }

    fn apply_event(&mut self, kind: &str, event: &Event) {
        if STATE_EVENTS.contains(&kind) || ENGINE_STATE_EVENTS.contains(&kind) {
            self.state.insert(kind.to_string(), event.clone());
            return;
        }
        // The stream's bulk, read without the typed view: a turn is thousands of these.
        if kind == "assistant_delta"
            && let Some(delta) = event.str("delta")
        {
            self.add_delta(delta);
            return;
        }
        match event.known() {
            Some(Known::UserMessage { content, images }) => {
                self.push(TranscriptItem::User { content, images });
            }
            Some(Known::AssistantStart) => self.push(TranscriptItem::Assistant {
                content: String::new(),
            }),
            Some(Known::AssistantDelta { delta }) => match self.transcript.last_mut() {
                Some(TranscriptItem::Assistant { content }) => {
                    self.bytes += delta.len();
                    content.push_str(&delta);
                }
                _ => self.push(TranscriptItem::Assistant { content: delta }),
            },
            Some(Known::ToolStart { call_id, .. }) => self.approvals.retain(|(c, _)| *c != call_id),
            Some(Known::ToolOutput {
                call_id,
                name,
                output,
                ..
            }) => {
                self.approvals.retain(|(c, _)| *c != call_id);
                self.push(TranscriptItem::Tool { name, output });
            }
            Some(Known::ApprovalRequest { call_id, .. }) => {
                self.approvals.retain(|(c, _)| *c != call_id);
                self.approvals.push((call_id, event.clone()));
            }
            Some(Known::ActionDeferred { call_id, .. }) => {
                self.approvals.retain(|(c, _)| *c != call_id)
            }
            Some(Known::Transcript { items }) => self.set_transcript(items),
            Some(Known::Status { message }) if message == "ready" || message == "interrupted" => {
                self.approvals.clear()
            }
            _ => {}
        }
    }
}

/// A watcher's snapshot: latest state events, the transcript so far, `connecting` while a turn
/// runs, open approvals, and the attended state.
pub(super) fn snapshot(s: &Session) -> Vec<Event> {
    let mut out = Vec::new();
    for kind in STATE_EVENTS.iter().chain(ENGINE_STATE_EVENTS) {
        if let Some(event) = s.view.state.get(*kind) {
            out.push(event.clone().with_session(&s.id));
        }
    }
    out.push(Event::new("transcript", json!({ "items": s.view.transcript })).with_session(&s.id));
    if s.busy {
        out.push(Event::new("connecting", json!({})).with_session(&s.id));
    }
    for (_, approval) in &s.view.approvals {
        out.push(approval.clone().with_session(&s.id));
    }
    out.push(
        Event::new("attended", json!({ "attended": !s.watchers.is_empty() })).with_session(&s.id),
    );
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn event(value: serde_json::Value) -> Event {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_view_rebuilds_a_transcript_and_tracks_open_approvals() {
        let mut view = View::default();
        let events = [
            json!({"type":"model_status","model":"m"}),
            json!({"type":"user_message","content":"hi"}),
            json!({"type":"assistant_start"}),
            json!({"type":"assistant_delta","delta":"he"}),
            json!({"type":"assistant_delta","delta":"llo"}),
            json!({"type":"approval_request","call_id":"c1","name":"bash","summary":"ls","subagent_id":null,"hunks":null}),
        ];
        for e in events {
            view.apply(&event(e));
        }
        assert_eq!(view.approvals.len(), 1);
        assert_eq!(
            view.transcript,
            vec![
                TranscriptItem::User {
                    content: "hi".into(),
                    images: vec![]
                },
                TranscriptItem::Assistant {
                    content: "hello".into()
                },
            ]
        );
        view.apply(&event(
            json!({"type":"tool_output","call_id":"c1","name":"bash","output":"ok","is_error":false}),
        ));
        assert!(view.approvals.is_empty());
        assert!(view.state.contains_key("model_status"));
    }

    #[test]
    fn the_view_drops_the_oldest_text_past_its_budget_and_keeps_the_newest() {
        let mut view = View::default();
        let big = "x".repeat(VIEW_TEXT_BUDGET / 3);
        for i in 0..5 {
            view.apply(&event(
                json!({"type":"user_message","content":format!("{i}{big}")}),
            ));
        }
        assert_eq!(view.transcript.len(), 2, "only what fits the budget stays");
        assert_eq!(view.dropped, 3);
        assert!(view.bytes <= VIEW_TEXT_BUDGET);
        assert!(
            matches!(&view.transcript[1], TranscriptItem::User { content, .. } if content.starts_with('4'))
        );
        // Deltas count too, and one item bigger than the budget is still kept.
        view.apply(&event(json!({"type":"assistant_start"})));
        view.apply(&event(
            json!({"type":"assistant_delta","delta":"y".repeat(VIEW_TEXT_BUDGET + 1)}),
        ));
        assert_eq!(view.transcript.len(), 1);
        assert_eq!(view.dropped, 5);
        assert_eq!(view.bytes, VIEW_TEXT_BUDGET + 1);
    }

    #[test]
    fn the_view_keeps_the_latest_agent_runs_and_background_tasks() {
        let mut view = View::default();
        for e in [
            json!({"type":"agent_runs","workflows":[],"agents":[{"id":"a1"}]}),
            json!({"type":"agent_runs","workflows":[],"agents":[{"id":"a2"}]}),
            json!({"type":"background_tasks","tasks":[{"id":"b1"}]}),
        ] {
            view.apply(&event(e));
        }
        assert_eq!(view.state["agent_runs"].0["agents"][0]["id"], "a2");
        assert_eq!(view.state["background_tasks"].0["tasks"][0]["id"], "b1");
        assert!(view.transcript.is_empty());
    }

    #[test]
    fn a_saved_conversation_seeds_the_view_and_its_echo_is_not_news() {
        let items = vec![
            TranscriptItem::User {
                content: "hi".into(),
                images: vec![],
            },
            TranscriptItem::Assistant {
                content: "hello".into(),
            },
        ];
        let view = View::with_transcript(items.clone());
        assert_eq!(view.transcript, items);
        let echo = event(json!({"type":"transcript","items":items}));
        assert!(view.repeats(&echo));
        let other = event(json!({"type":"transcript","items":[{"role":"user","content":"x"}]}));
        assert!(!view.repeats(&other));
        assert!(!View::default().repeats(&event(json!({"type":"transcript","items":[]}))));
    }
}
