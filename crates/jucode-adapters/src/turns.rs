//! What every adapter keeps the same way: the event sink (with state events deduplicated), the
//! queue of messages sent mid-turn, open approvals answered by whichever client is first, and
//! the shapes of the ops they share.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use jucode_engine::EngineOutput;
use jucode_protocol::serve::Event;
use jucode_protocol::{ApprovalMode, Object};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::{event, status};

/// Where events go. `false` from a send means the hub is gone and the adapter should stop.
pub(crate) struct Sink {
    tx: mpsc::Sender<EngineOutput>,
    /// The last copy of each state event sent, to send one again only when it changes.
    last: HashMap<String, Event>,
}

impl Sink {
    pub(crate) fn new(tx: mpsc::Sender<EngineOutput>) -> Sink {
        Sink {
            tx,
            last: HashMap::new(),
        }
    }

    pub(crate) async fn emit(&mut self, event: Event) -> bool {
        self.tx.send(EngineOutput::Event(event)).await.is_ok()
    }

    /// Sends a state event unless the same one was the last sent.
    pub(crate) async fn state(&mut self, event: Event) -> bool {
        let kind = event.kind().to_string();
        if self.last.get(&kind) == Some(&event) {
            return true;
        }
        self.last.insert(kind, event.clone());
        self.emit(event).await
    }

    /// Sends a state event even when unchanged: it answers a client's request.
    pub(crate) async fn answer(&mut self, event: Event) -> bool {
        self.last.insert(event.kind().to_string(), event.clone());
        self.emit(event).await
    }

    pub(crate) async fn exited(&mut self, error: Option<String>) {
        let _ = self.tx.send(EngineOutput::Exited { error }).await;
    }
}

/// A user message waiting for the running turn to end.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Message {
    pub content: String,
    pub images: Vec<String>,
}

impl Message {
    /// Reads a `user_message` op.
    pub(crate) fn from_op(op: &Object) -> Result<Message, String> {
        let content = op
            .get("content")
            .and_then(Value::as_str)
            .ok_or("user_message requires content")?
            .to_string();
        let images = match op.get("images") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or("images must be a list of paths")?,
            Some(_) => return Err("images must be a list of paths".into()),
        };
        Ok(Message { content, images })
    }

    /// The echo of a message whose `refused` images were not attached: they are left out, so
    /// the session's `user_message` names only images the engine got.
    pub(crate) fn event_without(&self, refused: &[String]) -> Event {
        Message {
            content: self.content.clone(),
            images: self
                .images
                .iter()
                .filter(|p| !refused.contains(p))
                .cloned()
                .collect(),
        }
        .event()
    }

    pub(crate) fn event(&self) -> Event {
        if self.images.is_empty() {
            event("user_message", json!({ "content": self.content }))
        } else {
            event(
                "user_message",
                json!({ "content": self.content, "images": self.images }),
            )
        }
    }
}

/// Messages sent while a turn runs; the next starts when the turn ends.
#[derive(Default)]
pub(crate) struct Queue {
    messages: VecDeque<Message>,
}

impl Queue {
    /// Queues `message` and returns the events saying so.
    pub(crate) fn push(&mut self, message: Message) -> Vec<Event> {
        self.messages.push_back(message);
        vec![
            self.pending_event(),
            status(&format!("queued: {}", self.messages.len())),
        ]
    }

    /// Takes the next message, with the updated queue event.
    pub(crate) fn pop(&mut self) -> Option<(Message, Event)> {
        let message = self.messages.pop_front()?;
        Some((message, self.pending_event()))
    }

    /// Takes every queued message (for steering them into the running turn).
    pub(crate) fn drain(&mut self) -> Vec<Message> {
        self.messages.drain(..).collect()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub(crate) fn pending_event(&self) -> Event {
        let messages: Vec<&str> = self.messages.iter().map(|m| m.content.as_str()).collect();
        event("pending_messages", json!({ "messages": messages }))
    }
}

/// An `approve` op.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub call_id: String,
    pub allow: bool,
    pub always: bool,
    /// `session` (default), `project`, `user` (Claude) or `rule` (Codex).
    pub always_scope: Option<String>,
    /// Answers to questions (an object or list as the client sent it).
    pub answers: Option<Value>,
}

impl Answer {
    pub(crate) fn from_op(op: &Object) -> Result<Answer, String> {
        let call_id = op
            .get("call_id")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .ok_or("approve requires call_id")?
            .to_string();
        let allow = match op.get("decision").and_then(Value::as_str) {
            Some("allow") => true,
            Some("deny") => false,
            _ => return Err("approve requires decision: allow or deny".into()),
        };
        Ok(Answer {
            call_id,
            allow,
            always: op.get("always").and_then(Value::as_bool).unwrap_or(false),
            always_scope: op
                .get("always_scope")
                .and_then(Value::as_str)
                .map(str::to_string),
            answers: op.get("answers").cloned().filter(|v| !v.is_null()),
        })
    }
}

/// Open approval prompts, keyed by call id, each with what the engine needs for the answer.
pub(crate) struct Approvals<T> {
    open: Vec<(String, T)>,
    answered: HashSet<String>,
}

impl<T> Default for Approvals<T> {
    fn default() -> Self {
        Approvals {
            open: Vec::new(),
            answered: HashSet::new(),
        }
    }
}

/// The error an answer to no open prompt gets (not one another client answered first).
pub(crate) fn no_open_approval(call_id: &str) -> Event {
    crate::error(format!("no open approval request {call_id}"))
}

/// What happened to an answer.
pub(crate) enum Taken<T> {
    Open(T),
    /// Another client answered first: nothing to do.
    AlreadyAnswered,
    Unknown,
}

impl<T> Approvals<T> {
    pub(crate) fn open(&mut self, call_id: String, pending: T) {
        self.answered.remove(&call_id);
        self.open.retain(|(c, _)| *c != call_id);
        self.open.push((call_id, pending));
    }

    /// Takes the prompt `call_id` answers; the first answer wins.
    pub(crate) fn take(&mut self, call_id: &str) -> Taken<T> {
        match self.open.iter().position(|(c, _)| c == call_id) {
            Some(i) => {
                self.answered.insert(call_id.to_string());
                Taken::Open(self.open.remove(i).1)
            }
            None if self.answered.contains(call_id) => Taken::AlreadyAnswered,
            None => Taken::Unknown,
        }
    }

    /// Whether `call_id` is open or was answered (a prompt the engine repeats is shown once).
    pub(crate) fn knows(&self, call_id: &str) -> bool {
        self.answered.contains(call_id) || self.open.iter().any(|(c, _)| c == call_id)
    }

    /// Forgets a prompt the engine withdrew.
    pub(crate) fn withdraw(&mut self, call_id: &str) -> Option<T> {
        let i = self.open.iter().position(|(c, _)| c == call_id)?;
        self.answered.insert(call_id.to_string());
        Some(self.open.remove(i).1)
    }

    /// Takes every open prompt (interrupt, a switch into full access).
    pub(crate) fn take_all(&mut self) -> Vec<(String, T)> {
        for (c, _) in &self.open {
            self.answered.insert(c.clone());
        }
        std::mem::take(&mut self.open)
    }

    pub(crate) fn find(&self, pred: impl Fn(&T) -> bool) -> Option<&str> {
        self.open
            .iter()
            .find(|(_, t)| pred(t))
            .map(|(c, _)| c.as_str())
    }
}

/// Reads a `set_approval_mode` op.
pub(crate) fn mode_of(op: &Object) -> Result<ApprovalMode, String> {
    let name = op
        .get("mode")
        .and_then(Value::as_str)
        .ok_or("set_approval_mode requires mode")?;
    ApprovalMode::parse(name).ok_or_else(|| {
        format!(
            "unknown approval mode `{name}` (expected manual, plan, auto, auto-edit or full-access)"
        )
    })
}

/// The text block that names an attached image's path just before it, so that a transcript
/// read back (Claude Code keeps only the image's bytes) can show the image again.
pub(crate) fn image_note(path: &str) -> String {
    format!("[image: {path}]")
}

/// The path an [`image_note`] names, if `text` is one.
pub(crate) fn image_note_path(text: &str) -> Option<&str> {
    text.strip_prefix("[image: ")
        .and_then(|t| t.strip_suffix(']'))
        .filter(|p| p.starts_with('/') && !p.contains('\n'))
}

/// The largest image sent inline; bigger files go as a path for the engine to read.
pub(crate) const INLINE_IMAGE_MAX: u64 = 3_750_000;

/// An attached image, checked to lie in an allowed directory.
pub(crate) enum Image {
    Inline {
        media_type: String,
        data: String,
    },
    /// Too large to send inline: the engine reads the file itself.
    Path(PathBuf),
}

/// Loads an attachment that must lie inside `roots` and be a png/jpeg/gif/webp file.
pub(crate) fn load_image(path: &str, roots: &[PathBuf]) -> Result<Image, String> {
    let resolved = crate::child::inside(Path::new(path), roots).ok_or_else(|| {
        format!("{path}: images must be files in the session's directories or uploads")
    })?;
    let ext = resolved
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let media_type = match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => return Err(format!("{path}: not a png, jpeg, gif or webp image")),
    };
    let meta = std::fs::metadata(&resolved).map_err(|e| format!("{path}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{path}: not a file"));
    }
    if meta.len() > INLINE_IMAGE_MAX {
        return Ok(Image::Path(resolved));
    }
    let bytes = std::fs::read(&resolved).map_err(|e| format!("{path}: {e}"))?;
    Ok(Image::Inline {
        media_type: media_type.to_string(),
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
    })
}

/// An `approve` op's `hunks`: absent, or a list of hunk ids.
pub(crate) fn hunk_choice(op: &Object) -> Result<Option<Vec<String>>, String> {
    match op.get("hunks") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|h| h.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| "hunks must be an array of hunk id strings".into()),
        Some(_) => Err("hunks must be an array of hunk id strings".into()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_reports_itself() {
        let mut q = Queue::default();
        let events = q.push(Message {
            content: "a".into(),
            images: vec![],
        });
        assert_eq!(events[0].0["messages"], json!(["a"]));
        assert_eq!(events[1].str("message"), Some("queued: 1"));
        let (m, ev) = q.pop().unwrap();
        assert_eq!(m.content, "a");
        assert_eq!(ev.0["messages"], json!([]));
        assert!(q.pop().is_none());
    }

    #[test]
    fn the_first_answer_wins() {
        let mut a: Approvals<u32> = Approvals::default();
        a.open("c1".into(), 7);
        assert!(matches!(a.take("c1"), Taken::Open(7)));
        assert!(matches!(a.take("c1"), Taken::AlreadyAnswered));
        assert!(matches!(a.take("c2"), Taken::Unknown));
    }

    #[test]
    fn approve_ops_are_checked() {
        let op = |v: Value| match v {
            Value::Object(m) => m,
            _ => Object::new(),
        };
        assert!(Answer::from_op(&op(json!({"decision":"allow"}))).is_err());
        assert!(Answer::from_op(&op(json!({"call_id":"c","decision":"maybe"}))).is_err());
        let a = Answer::from_op(&op(
            json!({"call_id":"c","decision":"allow","always":true,"always_scope":"project"}),
        ))
        .unwrap();
        assert!(a.allow && a.always);
        assert_eq!(a.always_scope.as_deref(), Some("project"));
    }

    #[test]
    fn images_must_be_pictures_inside_the_roots() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.png"), [1u8, 2, 3]).unwrap();
        std::fs::write(dir.path().join("a.txt"), "x").unwrap();
        let roots = vec![dir.path().to_path_buf()];
        let p = |n: &str| dir.path().join(n).display().to_string();
        assert!(matches!(
            load_image(&p("a.png"), &roots),
            Ok(Image::Inline { ref media_type, .. }) if media_type == "image/png"
        ));
        assert!(load_image(&p("a.txt"), &roots).is_err());
        assert!(load_image("/etc/passwd", &roots).is_err());
    }
}
