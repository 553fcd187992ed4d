//! The TUI's state and what keys and engine events do to it. Nothing here draws or does IO:
//! a key gives at most one [`Action`] for the loop to carry out, an engine event changes the
//! state, and [`crate::view`] draws whatever the state is.

use std::collections::VecDeque;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use jucode_protocol::serve::{Event, TranscriptItem};
use serde_json::{Value, json};

/// Lines of a tool's output shown under its call; the rest is counted.
pub const TOOL_LINES: usize = 12;

/// One thing in the scrolling transcript.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    User(String),
    Assistant(String),
    Reasoning(String),
    Tool {
        call_id: String,
        name: String,
        /// `None` while the call runs.
        output: Option<String>,
        is_error: bool,
    },
    Info(String),
    Error(String),
}

/// A call waiting for a person's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub call_id: String,
    pub name: String,
    pub summary: String,
    /// The proposed edit's lines (`+`/`-`/context), already flattened, when it is one.
    pub diff: Vec<String>,
}

/// What the loop should do after a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send this serve-v2 op to the engine.
    Send(Value),
    /// Stop the session (it saves) and leave.
    Quit,
}

#[derive(Debug, Default)]
pub struct App {
    pub session: String,
    pub title: Option<String>,
    pub model: Option<String>,
    pub cwd: Option<String>,
    pub entries: Vec<Entry>,
    pub approvals: VecDeque<Approval>,
    /// The input line and the cursor in it (a char index).
    pub input: String,
    pub cursor: usize,
    /// A turn runs: from its `user_message` to `status: ready`.
    pub busy: bool,
    /// Messages queued behind the running turn.
    pub queued: usize,
    /// The last `status` that is not `ready`, shown while busy.
    pub status: String,
    /// Lines scrolled up from the bottom of the transcript (0 follows new output).
    pub scroll: usize,
    /// Asked to leave; the loop waits for the engine to stop.
    pub quitting: bool,
}

/// Terminal-safe text: control characters (escape sequences from a tool's output, a model
/// that prints them) become U+FFFD so they cannot drive the user's terminal; tabs become
/// spaces and carriage returns go (a CRLF is one line break).
pub fn clean(text: &str) -> String {
    text.chars()
        .filter(|c| *c != '\r')
        .map(|c| match c {
            '\n' => '\n',
            '\t' => ' ',
            c if c.is_control() => '\u{fffd}',
            c => c,
        })
        .collect()
}

impl App {
    pub fn new(session: &str) -> App {
        App {
            session: session.to_string(),
            ..App::default()
        }
    }

    /// Applies one engine event.
    pub fn on_event(&mut self, event: &Event) {
        let text = |field: &str| clean(event.str(field).unwrap_or(""));
        match event.kind() {
            "startup" => {
                if let Some(model) = event.str("model") {
                    self.model = Some(clean(model));
                }
                if let Some(cwd) = event.str("cwd") {
                    self.cwd = Some(clean(cwd));
                }
            }
            "model_status" => {
                if let Some(model) = event.str("model") {
                    self.model = Some(clean(model));
                }
            }
            "session_title" => self.title = Some(text("title")),
            "transcript" => self.load(event.0.get("items")),
            "user_message" => {
                self.entries.push(Entry::User(text("content")));
                self.busy = true;
                self.status.clear();
                self.follow();
            }
            "assistant_start" => self.entries.push(Entry::Assistant(String::new())),
            "assistant_delta" => {
                let delta = text("delta");
                match self.entries.last_mut() {
                    Some(Entry::Assistant(t)) => t.push_str(&delta),
                    _ => self.entries.push(Entry::Assistant(delta)),
                }
            }
            "thinking_start" => self.entries.push(Entry::Reasoning(String::new())),
            "reasoning_delta" => {
                let delta = text("delta");
                match self.entries.last_mut() {
                    Some(Entry::Reasoning(t)) => t.push_str(&delta),
                    _ => self.entries.push(Entry::Reasoning(delta)),
                }
            }
            "tool_start" => self.entries.push(Entry::Tool {
                call_id: text("call_id"),
                name: text("name"),
                output: None,
                is_error: false,
            }),
            "tool_output" => self.tool_output(event),
            "approval_request" => self.approval(event),
            "action_deferred" => self.entries.push(Entry::Info(format!(
                "{} deferred as action {}",
                text("name"),
                text("id")
            ))),
            "pending_messages" => {
                self.queued = event
                    .0
                    .get("messages")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
            }
            "status" => {
                let message = text("message");
                if message == "ready" {
                    self.busy = false;
                    self.status.clear();
                    self.queued = 0;
                } else {
                    if message == "interrupted" {
                        self.entries.push(Entry::Info("interrupted".into()));
                        self.approvals.clear();
                    }
                    self.status = message;
                }
            }
            "info" => self.entries.push(Entry::Info(text("message"))),
            "error" => self.entries.push(Entry::Error(text("message"))),
            _ => {}
        }
    }

    fn load(&mut self, items: Option<&Value>) {
        let items: Vec<TranscriptItem> = items
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default();
        self.entries = items
            .into_iter()
            .map(|item| match item {
                TranscriptItem::User { content, .. } => Entry::User(clean(&content)),
                TranscriptItem::Assistant { content } => Entry::Assistant(clean(&content)),
                TranscriptItem::Tool { name, output } => Entry::Tool {
                    call_id: String::new(),
                    name: clean(&name),
                    output: Some(clean(&output)),
                    is_error: false,
                },
                TranscriptItem::Branch { label } => Entry::Info(clean(&label)),
            })
            .collect();
        self.follow();
    }

    fn tool_output(&mut self, event: &Event) {
        let call_id = event.str("call_id").unwrap_or("");
        let output = clean(event.str("output").unwrap_or(""));
        let is_error = event
            .0
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        self.approvals.retain(|a| a.call_id != call_id);
        let open = self.entries.iter_mut().rev().find_map(|e| match e {
            Entry::Tool {
                call_id: id,
                output: out @ None,
                is_error: err,
                ..
            } if id == call_id => Some((out, err)),
            _ => None,
        });
        match open {
            Some((out, err)) => {
                *out = Some(output);
                *err = is_error;
            }
            None => self.entries.push(Entry::Tool {
                call_id: clean(call_id),
                name: clean(event.str("name").unwrap_or("")),
                output: Some(output),
                is_error,
            }),
        }
    }

    fn approval(&mut self, event: &Event) {
        let call_id = event.str("call_id").unwrap_or("").to_string();
        if call_id.is_empty() || self.approvals.iter().any(|a| a.call_id == call_id) {
            // The engine shows a card again after a refused answer: keep one.
            return;
        }
        let mut diff = Vec::new();
        for hunk in event
            .0
            .get("hunks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let file = hunk.get("file").and_then(Value::as_str).unwrap_or("");
            let header = hunk.get("header").and_then(Value::as_str).unwrap_or("");
            diff.push(clean(&format!("{file} {header}")));
            for line in hunk
                .get("lines")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                diff.push(clean(line.as_str().unwrap_or("")));
            }
        }
        self.approvals.push_back(Approval {
            call_id,
            name: clean(event.str("name").unwrap_or("")),
            summary: clean(event.str("summary").unwrap_or("")),
            diff,
        });
    }

    /// Back to following new output.
    fn follow(&mut self) {
        self.scroll = 0;
    }

    /// Pasted text goes into the input line as typed (newlines as spaces: one line).
    pub fn on_paste(&mut self, text: &str) {
        for c in clean(text).chars() {
            self.insert(if c == '\n' { ' ' } else { c });
        }
    }

    fn insert(&mut self, c: char) {
        let at = self.byte_at(self.cursor);
        self.input.insert(at, c);
        self.cursor += 1;
    }

    fn byte_at(&self, chars: usize) -> usize {
        self.input
            .char_indices()
            .nth(chars)
            .map_or(self.input.len(), |(i, _)| i)
    }

    /// Applies one key; returns what the loop must do, if anything.
    pub fn on_key(&mut self, key: KeyEvent) -> Option<Action> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('c') if ctrl => return self.ctrl_c(),
            KeyCode::Char('d') if ctrl => {
                if self.input.is_empty() {
                    return self.quit();
                }
                return None;
            }
            _ => {}
        }
        if let Some(approval) = self.approvals.front() {
            let answer = match key.code {
                KeyCode::Char('y' | 'Y') => Some(("allow", false)),
                KeyCode::Char('n' | 'N') | KeyCode::Esc => Some(("deny", false)),
                KeyCode::Char('a' | 'A') => Some(("allow", true)),
                _ => None,
            };
            if let Some((decision, always)) = answer {
                let mut op =
                    json!({"op": "approve", "call_id": approval.call_id, "decision": decision});
                if always {
                    op["always"] = Value::Bool(true);
                }
                self.approvals.pop_front();
                return Some(Action::Send(op));
            }
            // Scrolling still works while a card waits; typing does not.
            self.scroll_key(key.code);
            return None;
        }
        match key.code {
            KeyCode::Enter => return self.submit(),
            KeyCode::Char(c) if !ctrl => self.insert(c),
            KeyCode::Char('u') if ctrl => {
                self.input.clear();
                self.cursor = 0;
            }
            KeyCode::Backspace if self.cursor > 0 => {
                self.cursor -= 1;
                let at = self.byte_at(self.cursor);
                self.input.remove(at);
            }
            KeyCode::Delete if self.cursor < self.input.chars().count() => {
                let at = self.byte_at(self.cursor);
                self.input.remove(at);
            }
            KeyCode::Left => self.cursor = self.cursor.saturating_sub(1),
            KeyCode::Right => self.cursor = (self.cursor + 1).min(self.input.chars().count()),
            KeyCode::Home => self.cursor = 0,
            KeyCode::End => self.cursor = self.input.chars().count(),
            code => self.scroll_key(code),
        }
        None
    }

    fn scroll_key(&mut self, code: KeyCode) {
        match code {
            KeyCode::PageUp => self.scroll = self.scroll.saturating_add(10),
            KeyCode::PageDown => self.scroll = self.scroll.saturating_sub(10),
            KeyCode::Up => self.scroll = self.scroll.saturating_add(1),
            KeyCode::Down => self.scroll = self.scroll.saturating_sub(1),
            _ => {}
        }
    }

    fn ctrl_c(&mut self) -> Option<Action> {
        if self.busy {
            return Some(Action::Send(json!({"op": "interrupt"})));
        }
        if !self.input.is_empty() {
            self.input.clear();
            self.cursor = 0;
            return None;
        }
        self.entries
            .push(Entry::Info("Ctrl-D or /quit leaves".into()));
        self.follow();
        None
    }

    fn quit(&mut self) -> Option<Action> {
        self.quitting = true;
        Some(Action::Quit)
    }

    fn submit(&mut self) -> Option<Action> {
        let line = std::mem::take(&mut self.input);
        self.cursor = 0;
        let line = line.trim();
        if line.is_empty() {
            return None;
        }
        self.follow();
        match line {
            "/quit" | "/exit" => self.quit(),
            _ if line.starts_with('/') => {
                Some(Action::Send(json!({"op": "command", "input": line})))
            }
            _ => Some(Action::Send(json!({"op": "user_message", "content": line}))),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn ev(v: Value) -> Event {
        Event(v.as_object().cloned().unwrap())
    }

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    fn typed(app: &mut App, text: &str) -> Option<Action> {
        for c in text.chars() {
            assert_eq!(app.on_key(key(KeyCode::Char(c))), None);
        }
        app.on_key(key(KeyCode::Enter))
    }

    #[test]
    fn a_turn_streams_into_one_assistant_entry_and_ends_at_ready() {
        let mut app = App::new("s1");
        app.on_event(&ev(json!({"type":"user_message","content":"hi"})));
        assert!(app.busy);
        app.on_event(&ev(json!({"type":"assistant_start"})));
        app.on_event(&ev(json!({"type":"assistant_delta","delta":"hel"})));
        app.on_event(&ev(json!({"type":"assistant_delta","delta":"lo"})));
        app.on_event(&ev(
            json!({"type":"tool_start","call_id":"c1","name":"bash"}),
        ));
        app.on_event(&ev(
            json!({"type":"tool_output","call_id":"c1","name":"bash","output":"ok\n","is_error":true}),
        ));
        app.on_event(&ev(json!({"type":"status","message":"ready"})));
        assert!(!app.busy);
        assert_eq!(
            app.entries,
            vec![
                Entry::User("hi".into()),
                Entry::Assistant("hello".into()),
                Entry::Tool {
                    call_id: "c1".into(),
                    name: "bash".into(),
                    output: Some("ok\n".into()),
                    is_error: true
                },
            ]
        );
    }

    #[test]
    fn enter_sends_a_message_slash_commands_and_quit() {
        let mut app = App::new("s1");
        assert_eq!(
            typed(&mut app, "hello"),
            Some(Action::Send(json!({"op":"user_message","content":"hello"})))
        );
        assert!(app.input.is_empty());
        assert_eq!(
            typed(&mut app, "/model x"),
            Some(Action::Send(json!({"op":"command","input":"/model x"})))
        );
        assert_eq!(typed(&mut app, "   "), None);
        assert_eq!(typed(&mut app, "/quit"), Some(Action::Quit));
        assert!(app.quitting);
    }

    #[test]
    fn ctrl_c_interrupts_a_turn_else_clears_the_line_and_ctrl_d_quits() {
        let mut app = App::new("s1");
        app.on_event(&ev(json!({"type":"user_message","content":"x"})));
        assert_eq!(
            app.on_key(ctrl('c')),
            Some(Action::Send(json!({"op":"interrupt"})))
        );
        app.on_event(&ev(json!({"type":"status","message":"interrupted"})));
        app.on_event(&ev(json!({"type":"status","message":"ready"})));
        app.on_key(key(KeyCode::Char('a')));
        assert_eq!(app.on_key(ctrl('c')), None);
        assert!(app.input.is_empty());
        app.on_key(key(KeyCode::Char('a')));
        assert_eq!(
            app.on_key(ctrl('d')),
            None,
            "Ctrl-D with text typed does not quit"
        );
        app.on_key(ctrl('u'));
        assert_eq!(app.on_key(ctrl('d')), Some(Action::Quit));
    }

    #[test]
    fn approvals_are_answered_in_order_with_y_n_and_a() {
        let mut app = App::new("s1");
        for id in ["c1", "c2", "c3"] {
            app.on_event(&ev(
                json!({"type":"approval_request","call_id":id,"name":"bash","summary":"rm x"}),
            ));
        }
        // Shown again after a refused answer: still one card.
        app.on_event(&ev(
            json!({"type":"approval_request","call_id":"c1","name":"bash","summary":"rm x"}),
        ));
        assert_eq!(app.approvals.len(), 3);
        // Typing does not reach the input line while a card waits.
        assert_eq!(app.on_key(key(KeyCode::Char('x'))), None);
        assert!(app.input.is_empty());
        assert_eq!(
            app.on_key(key(KeyCode::Char('y'))),
            Some(Action::Send(
                json!({"op":"approve","call_id":"c1","decision":"allow"})
            ))
        );
        assert_eq!(
            app.on_key(key(KeyCode::Char('n'))),
            Some(Action::Send(
                json!({"op":"approve","call_id":"c2","decision":"deny"})
            ))
        );
        assert_eq!(
            app.on_key(key(KeyCode::Char('a'))),
            Some(Action::Send(
                json!({"op":"approve","call_id":"c3","decision":"allow","always":true})
            ))
        );
        assert!(app.approvals.is_empty());
    }

    #[test]
    fn a_transcript_replaces_the_entries_and_hostile_text_is_made_inert() {
        let mut app = App::new("s1");
        app.on_event(&ev(json!({"type":"info","message":"old"})));
        app.on_event(&ev(json!({"type":"transcript","items":[
            {"role":"user","content":"q"},
            {"role":"assistant","content":"a\u{1b}[2J\u{7}"},
            {"role":"tool","name":"bash","output":"out"},
        ]})));
        assert_eq!(app.entries.len(), 3);
        assert_eq!(
            app.entries[1],
            Entry::Assistant("a\u{fffd}[2J\u{fffd}".into())
        );
    }

    #[test]
    fn the_cursor_edits_inside_the_line() {
        let mut app = App::new("s1");
        app.on_paste("héllo\nwörld");
        assert_eq!(app.input, "héllo wörld");
        app.on_key(key(KeyCode::Home));
        app.on_key(key(KeyCode::Right));
        app.on_key(key(KeyCode::Delete));
        app.on_key(key(KeyCode::Char('e')));
        app.on_key(key(KeyCode::End));
        app.on_key(key(KeyCode::Backspace));
        assert_eq!(app.input, "hello wörl");
    }
}
