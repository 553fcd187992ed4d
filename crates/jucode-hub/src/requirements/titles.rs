//! The title model's work on requirements: a title for words longer than [`TITLE_CHARS`]
//! (`title_auto`), and after each turn of a linked session a rewrite of the progress record.
//!
//! The hub has no model client: the host gives it a [`TitleModel`] (the daemon's is the
//! built-in engine's title model). Each question runs in its own task, never under the hub's
//! lock and never holding up the op that caused it; the answer is saved (fsynced) and the list
//! broadcast only if the requirement is still as it was when asked. Any failure changes
//! nothing and is logged.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use jucode_protocol::daemon::Progress;
use serde::Deserialize;
use serde_json::Value;

use super::tool::{PROGRESS_ITEM_CHARS, PROGRESS_ITEMS, PROGRESS_NOTE_CHARS};
use super::{RequirementError, Requirements, TITLE_CHARS, title_for};
use crate::{Hub, Inner};

/// The model's answer (its text), or why there is none.
pub type TitleFuture = Pin<Box<dyn Future<Output = Result<String, TitleModelError>> + Send>>;

/// Why the title model gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum TitleModelError {
    /// No model is set up (no config); nothing to ask.
    #[error("no title model is configured")]
    NotConfigured,
    #[error("the title model failed: {0}")]
    Failed(String),
}

/// A small model the host reaches for the hub: one system prompt, one user message, text back.
pub trait TitleModel: Send + Sync {
    fn complete(&self, system: &str, user: &str, max_tokens: u64) -> TitleFuture;
}

pub(crate) const TITLE_SYSTEM: &str = "You name a requirement: something a user wants done in \
    a software project. Answer with the title only, in the requirement's language: at most \
    eight words, no quotes, no final period.";

pub(crate) const PROGRESS_SYSTEM: &str = "You keep the progress record of a requirement that \
    coding sessions work on, so that the next session starts where the last one stopped. \
    Answer with one JSON object and nothing else: {\"goal\": string, \"decided\": [string], \
    \"done\": [string], \"doing\": [string], \"blocked\": [string], \"next\": [string], \
    \"files\": [string], \"note\": string}. Keep what still holds from the previous record, \
    drop what no longer does, add what the session shows; short items, paths for files.";

/// How much of each text goes into a question, in characters.
const TEXT_CHARS: usize = 2000;
const REQUEST_CHARS: usize = 1000;
const REPLY_TAIL_CHARS: usize = 1500;
/// A title the model writes is cut to this.
const MODEL_TITLE_CHARS: usize = 80;

pub(crate) fn title_request(text: &str) -> String {
    format!(
        "Requirement:\n{}\n\nWrite the title.",
        head(text, TEXT_CHARS)
    )
}

/// What one progress question is asked from.
#[derive(Debug, Clone)]
pub(crate) struct ProgressAsk {
    pub(crate) requirement: String,
    pub(crate) text: String,
    /// The record as it was when asked: the answer replaces only that.
    pub(crate) previous: Progress,
    pub(crate) first: String,
    pub(crate) latest: String,
    pub(crate) reply: String,
}

impl ProgressAsk {
    pub(crate) fn request(&self) -> String {
        let previous = serde_json::to_string(&self.previous).unwrap_or_else(|_| "{}".into());
        format!(
            "Requirement {}:\n{}\n\nPrevious record:\n{previous}\n\nFirst request of the \
             session:\n{}\n\nLatest request:\n{}\n\nEnd of the latest reply:\n{}\n\nWrite the \
             new record.",
            self.requirement,
            head(&self.text, TEXT_CHARS),
            head(&self.first, REQUEST_CHARS),
            head(&self.latest, REQUEST_CHARS),
            tail(&self.reply, REPLY_TAIL_CHARS),
        )
    }
}

/// The first line of the model's answer, without quotes, a `Title:` label or a final period.
pub(crate) fn clean_title(raw: &str) -> Option<String> {
    let line = raw.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line.strip_prefix("Title:").unwrap_or(line).trim();
    // Quotes and a final period in either order: `"Fast search".` and `"Fast search."`.
    let line = line
        .trim_end_matches(['.', '。'])
        .trim_matches(|c| matches!(c, '"' | '\'' | '`' | '*' | '“' | '”' | '「' | '」'))
        .trim_end_matches(['.', '。'])
        .trim();
    (!line.is_empty()).then(|| line.chars().take(MODEL_TITLE_CHARS).collect())
}

/// The record an answer holds. A key left out keeps its previous value; a key of the wrong
/// type makes the whole answer unusable.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ProgressAnswer {
    goal: Option<String>,
    decided: Option<Vec<String>>,
    done: Option<Vec<String>>,
    doing: Option<Vec<String>>,
    blocked: Option<Vec<String>>,
    next: Option<Vec<String>>,
    files: Option<Vec<String>>,
    note: Option<String>,
}

/// The JSON object of an answer: the whole text, or one fenced block in it.
pub(crate) fn parse_progress(raw: &str) -> Option<ProgressAnswer> {
    let text = raw.trim();
    let text = match text.strip_prefix("```") {
        Some(rest) => {
            let rest = rest.strip_prefix("json").unwrap_or(rest);
            rest.strip_suffix("```")?.trim()
        }
        None => text,
    };
    let value: Value = serde_json::from_str(text).ok()?;
    if !value.is_object() {
        return None;
    }
    serde_json::from_value(value).ok()
}

impl ProgressAnswer {
    /// `previous` with the answer's keys in place, each within the tool's bounds.
    pub(crate) fn merged(self, previous: &Progress) -> Progress {
        let list = |new: Option<Vec<String>>, old: &Vec<String>| match new {
            None => old.clone(),
            Some(items) => {
                let mut out: Vec<String> = Vec::new();
                for item in items {
                    let item = head(item.trim(), PROGRESS_ITEM_CHARS);
                    if !item.is_empty() && !out.contains(&item) && out.len() < PROGRESS_ITEMS {
                        out.push(item);
                    }
                }
                out
            }
        };
        let text = |new: Option<String>, old: &String| match new {
            None => old.clone(),
            Some(t) => head(t.trim(), PROGRESS_NOTE_CHARS),
        };
        Progress {
            goal: text(self.goal, &previous.goal),
            decided: list(self.decided, &previous.decided),
            done: list(self.done, &previous.done),
            doing: list(self.doing, &previous.doing),
            blocked: list(self.blocked, &previous.blocked),
            next: list(self.next, &previous.next),
            files: list(self.files, &previous.files),
            note: text(self.note, &previous.note),
        }
    }
}

impl Requirements {
    /// Saves the model's `title` for `id` if its words are still `text` and its title is not
    /// one the user chose. Returns whether it changed.
    pub(crate) fn set_auto_title(
        &mut self,
        id: &str,
        text: &str,
        title: String,
    ) -> Result<bool, RequirementError> {
        let Some(mut r) = self.store.get(id).cloned() else {
            return Ok(false);
        };
        if r.text != text || is_users_title(&r.title, r.title_auto, &r.text) {
            return Ok(false);
        }
        if r.title_auto && r.title == title {
            return Ok(false);
        }
        r.title = title;
        r.title_auto = true;
        self.save(r)?;
        Ok(true)
    }

    /// Saves the progress the model wrote for `ask` if the record is still the one it was
    /// asked about (the agent's `progress` or another session's rewrite may have come first).
    /// Returns whether it changed.
    pub(crate) fn set_progress(
        &mut self,
        ask: &ProgressAsk,
        answer: ProgressAnswer,
    ) -> Result<bool, RequirementError> {
        let Some(mut r) = self.store.get(&ask.requirement).cloned() else {
            return Ok(false);
        };
        if r.progress != ask.previous {
            tracing::info!(
                requirement = %ask.requirement,
                "progress changed while the title model wrote it: its answer is dropped"
            );
            return Ok(false);
        }
        r.progress = answer.merged(&ask.previous);
        r.progress_at = self.clock.now_ms();
        self.save(r)?;
        Ok(true)
    }
}

/// Whether a title is one a person chose: neither the model's nor the cut of the words.
pub(crate) fn is_users_title(title: &str, auto: bool, text: &str) -> bool {
    !auto && !title.is_empty() && title != title_for(text)
}

fn model(hub: &Arc<Hub>) -> Option<Arc<dyn TitleModel>> {
    // A task needs a runtime; every caller runs in one, but a missing one must not panic.
    tokio::runtime::Handle::try_current().ok()?;
    hub.config.online.title_model.clone()
}

fn log_failure(what: &str, requirement: &str, e: &TitleModelError) {
    match e {
        TitleModelError::NotConfigured => tracing::debug!(requirement, "{what}: {e}"),
        TitleModelError::Failed(_) => tracing::warn!(requirement, "{what}: {e}"),
    }
}

/// Asks for a title for requirement `id` whose words are `text`, when they are long.
pub(crate) fn ask_title(hub: &Arc<Hub>, id: &str, text: &str) {
    if text.chars().count() <= TITLE_CHARS {
        return;
    }
    let Some(model) = model(hub) else {
        return;
    };
    let weak: Weak<Hub> = Arc::downgrade(hub);
    let id = id.to_string();
    let text = text.to_string();
    tokio::spawn(async move {
        let answer = model
            .complete(TITLE_SYSTEM, &title_request(&text), 48)
            .await;
        let title = match answer {
            Ok(raw) => clean_title(&raw),
            Err(e) => return log_failure("title", &id, &e),
        };
        let Some(title) = title else {
            tracing::warn!(requirement = %id, "the title model answered no title");
            return;
        };
        let Some(hub) = weak.upgrade() else {
            return;
        };
        let mut inner = hub.lock();
        match inner.requirements.set_auto_title(&id, &text, title) {
            Ok(true) => inner.broadcast_requirements(),
            Ok(false) => {}
            Err(e) => tracing::error!(requirement = %id, "{e}"),
        }
    });
}

/// A turn of `session` ended: asks for the progress of the requirement it works on, if any.
/// Called under the hub's lock (it only reads and spawns).
pub(crate) fn turn_ended(hub: &Arc<Hub>, inner: &Inner, session: &str) {
    let Some(model) = model(hub) else {
        return;
    };
    let session = inner.sessions.current_id(session);
    let Some(r) = inner
        .requirements
        .store
        .map
        .values()
        .find(|r| r.sessions.iter().any(|s| s == session))
    else {
        return;
    };
    let Some((first, latest, reply)) = inner.sessions.requests_and_reply(session) else {
        return;
    };
    let ask = ProgressAsk {
        requirement: r.id.clone(),
        text: r.text.clone(),
        previous: r.progress.clone(),
        first,
        latest,
        reply,
    };
    let weak: Weak<Hub> = Arc::downgrade(hub);
    tokio::spawn(async move {
        let answer = model.complete(PROGRESS_SYSTEM, &ask.request(), 1024).await;
        let raw = match answer {
            Ok(raw) => raw,
            Err(e) => return log_failure("progress", &ask.requirement, &e),
        };
        let Some(parsed) = parse_progress(&raw) else {
            tracing::warn!(
                requirement = %ask.requirement,
                "the title model's progress is not a JSON record: nothing changes"
            );
            return;
        };
        let Some(hub) = weak.upgrade() else {
            return;
        };
        let mut inner = hub.lock();
        match inner.requirements.set_progress(&ask, parsed) {
            Ok(true) => inner.broadcast_requirements(),
            Ok(false) => {}
            Err(e) => tracing::error!(requirement = %ask.requirement, "{e}"),
        }
    });
}

fn head(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

fn tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    text.chars().skip(count.saturating_sub(max)).collect()
}
