//! The conversation log `<jucode home>/sessions/<session id>.jsonl`: every message, compaction,
//! deferred action, decision and title, appended and fsynced as it happens (jucode-store).
//! Reading it back gives the model's context, the transcript clients see, and the actions
//! still waiting for a decision.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use jucode_protocol::serve::TranscriptItem;
use jucode_store::JsonlLog;
use serde::{Deserialize, Serialize};

use crate::actions::DeferredAction;
use crate::model::Message;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// The session started (or resumed) in `cwd`.
    Start {
        session: String,
        cwd: String,
        at: u64,
    },
    Message {
        message: Message,
        at: u64,
    },
    /// The model's context was replaced by `summary` and the last `keep` messages.
    Compaction {
        summary: String,
        #[serde(default)]
        keep: usize,
        at: u64,
    },
    Deferred {
        action: DeferredAction,
    },
    Decided {
        id: String,
        allow: bool,
        at: u64,
    },
    Title {
        title: String,
        at: u64,
    },
    #[serde(other)]
    Unknown,
}

/// What a log holds, folded.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The model's context.
    pub messages: Vec<Message>,
    pub transcript: Vec<TranscriptItem>,
    /// Deferred actions not decided yet, oldest first.
    pub open_actions: Vec<DeferredAction>,
    /// Decisions by digest, for identical calls.
    pub decided: HashMap<String, bool>,
    /// The ids of every decided action.
    pub decided_ids: HashSet<String>,
    /// Decided actions (allowed?) whose outcome the conversation has not heard: a kill came
    /// between the decision and its message. Told at the next start.
    pub untold: Vec<(DeferredAction, bool)>,
    /// User messages so far.
    pub turns: u64,
    pub first_request: Option<String>,
    pub title: Option<String>,
}

impl Loaded {
    pub fn apply(&mut self, record: Record) {
        match record {
            Record::Message { message, .. } => {
                match &message {
                    Message::User { content, images } => {
                        self.untold
                            .retain(|(a, _)| !crate::actions::tells(content, &a.id));
                        self.turns += 1;
                        if self.first_request.is_none() {
                            self.first_request = Some(content.clone());
                        }
                        self.transcript.push(TranscriptItem::User {
                            content: content.clone(),
                            images: images.clone(),
                        });
                    }
                    Message::Assistant { content, .. } if !content.is_empty() => {
                        self.transcript.push(TranscriptItem::Assistant {
                            content: content.clone(),
                        });
                    }
                    Message::Assistant { .. } => {}
                    Message::Tool { name, output, .. } => {
                        self.transcript.push(TranscriptItem::Tool {
                            name: name.clone(),
                            output: output.clone(),
                        })
                    }
                }
                self.messages.push(message);
            }
            Record::Compaction { summary, keep, .. } => {
                let tail_start = self.messages.len().saturating_sub(keep);
                let tail = self.messages.split_off(tail_start);
                self.messages = vec![Message::User {
                    content: crate::prompt::summary_message(&summary),
                    images: vec![],
                }];
                self.messages.extend(tail);
            }
            Record::Deferred { action } => {
                if !self.open_actions.iter().any(|a| a.id == action.id) {
                    self.open_actions.push(action);
                }
            }
            Record::Decided { id, allow, .. } => {
                if let Some(pos) = self.open_actions.iter().position(|a| a.id == id) {
                    let action = self.open_actions.remove(pos);
                    self.decided.insert(action.digest.clone(), allow);
                    self.decided_ids.insert(id);
                    self.untold.push((action, allow));
                }
            }
            Record::Title { title, .. } => self.title = Some(title),
            Record::Start { .. } | Record::Unknown => {}
        }
    }
}

/// Why the log cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{0:?} cannot name a conversation file")]
    BadSession(String),
    #[error("could not create {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] jucode_store::StoreError),
}

/// An open conversation log.
#[derive(Debug)]
pub struct SessionLog {
    log: JsonlLog,
}

/// Whether `session` can name a file in the sessions directory.
fn is_file_name(session: &str) -> bool {
    !(session.is_empty()
        || session.len() > 200
        || session.starts_with('.')
        || session.contains(['/', '\\', '\0']))
}

/// The transcript of `session`'s saved log under `sessions_dir`, read without writing (the
/// daemon shows it before the engine starts); `None` when there is no such conversation.
pub fn saved_transcript(sessions_dir: &Path, session: &str) -> Option<Vec<TranscriptItem>> {
    use std::io::BufRead;
    if !is_file_name(session) {
        return None;
    }
    let file = std::fs::File::open(sessions_dir.join(format!("{session}.jsonl"))).ok()?;
    let mut loaded = Loaded::default();
    for line in std::io::BufReader::new(file).lines() {
        // A torn last line is skipped, as the engine's own open repairs it.
        let Ok(line) = line else { break };
        if let Ok(record) = serde_json::from_str::<Record>(&line) {
            loaded.apply(record);
        }
    }
    Some(loaded.transcript)
}

impl SessionLog {
    /// Opens (or creates) the log of `session` under `home/sessions` and folds it.
    pub fn open(home: &Path, session: &str) -> Result<(SessionLog, Loaded), LogError> {
        if !is_file_name(session) {
            return Err(LogError::BadSession(session.to_string()));
        }
        let dir = home.join("sessions");
        std::fs::create_dir_all(&dir).map_err(|source| LogError::Dir {
            path: dir.clone(),
            source,
        })?;
        let (log, records) = JsonlLog::open::<Record>(&dir.join(format!("{session}.jsonl")))?;
        let mut loaded = Loaded::default();
        for record in records {
            loaded.apply(record);
        }
        Ok((SessionLog { log }, loaded))
    }

    pub fn append(&mut self, record: &Record) -> Result<(), LogError> {
        Ok(self.log.append(record)?)
    }

    pub fn path(&self) -> &Path {
        self.log.path()
    }
}

/// The conversations saved under `sessions_dir` that ran in `cwd` (the daemon's, or those of
/// `jucode-daemon serve`), newest first. Read-only: a file being written may end in a torn
/// line, which is skipped here rather than repaired under its writer.
pub fn saved_in(sessions_dir: &Path, cwd: &Path) -> Vec<jucode_engine::SavedConversation> {
    use std::io::BufRead;
    let Ok(entries) = std::fs::read_dir(sessions_dir) else {
        return Vec::new();
    };
    let wanted = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(session) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".jsonl"))
            .map(str::to_string)
        else {
            continue;
        };
        let Ok(file) = std::fs::File::open(&path) else {
            continue;
        };
        let mut loaded = Loaded::default();
        let mut ran_here = false;
        for line in std::io::BufReader::new(file).lines() {
            let Ok(line) = line else { break };
            let Ok(record) = serde_json::from_str::<Record>(&line) else {
                continue;
            };
            if let Record::Start { cwd: ran_in, .. } = &record {
                // As recorded, or as it resolves today.
                ran_here |= Path::new(ran_in) == wanted || Path::new(ran_in) == cwd;
            }
            loaded.apply(record);
        }
        if !ran_here {
            continue;
        }
        let updated_at = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        let title = loaded
            .title
            .clone()
            .or_else(|| {
                loaded.first_request.as_deref().and_then(|r| {
                    r.lines()
                        .map(str::trim)
                        .find(|l| !l.is_empty())
                        .map(|l| l.chars().take(40).collect())
                })
            })
            .unwrap_or_default();
        out.push(jucode_engine::SavedConversation {
            session,
            title,
            updated_at,
            entries: loaded.transcript.len(),
        });
    }
    out.sort_by_key(|c| std::cmp::Reverse(c.updated_at));
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn user(text: &str) -> Record {
        Record::Message {
            message: Message::User {
                content: text.into(),
                images: vec![],
            },
            at: 1,
        }
    }

    #[test]
    fn a_log_reopens_with_context_transcript_and_open_actions() {
        let home = tempfile::tempdir().unwrap();
        let (mut log, loaded) = SessionLog::open(home.path(), "s1").unwrap();
        assert!(loaded.messages.is_empty());
        let action = |id: &str, digest: &str| DeferredAction {
            id: id.into(),
            session_id: "s1".into(),
            cwd: "/w".into(),
            call_id: "c".into(),
            name: "bash".into(),
            arguments: "{}".into(),
            summary: "ls".into(),
            subagent_id: None,
            digest: digest.into(),
            created_at: 1,
        };
        for record in [
            user("first"),
            Record::Message {
                message: Message::Assistant {
                    content: "hello".into(),
                    reasoning: String::new(),
                    signature: None,
                    tool_calls: vec![],
                },
                at: 2,
            },
            Record::Deferred {
                action: action("a1", "d1"),
            },
            Record::Deferred {
                action: action("a2", "d2"),
            },
            Record::Decided {
                id: "a1".into(),
                allow: false,
                at: 3,
            },
            user("second"),
            Record::Compaction {
                summary: "S".into(),
                keep: 1,
                at: 4,
            },
            Record::Title {
                title: "T".into(),
                at: 5,
            },
        ] {
            log.append(&record).unwrap();
        }
        drop(log);
        let (_, loaded) = SessionLog::open(home.path(), "s1").unwrap();
        assert_eq!(loaded.turns, 2);
        assert_eq!(loaded.first_request.as_deref(), Some("first"));
        assert_eq!(loaded.transcript.len(), 3);
        assert_eq!(loaded.messages.len(), 2);
        assert!(
            matches!(&loaded.messages[0], Message::User { content, .. } if content.contains("S"))
        );
        assert!(
            matches!(&loaded.messages[1], Message::User { content, .. } if content == "second")
        );
        assert_eq!(loaded.open_actions.len(), 1);
        assert_eq!(loaded.open_actions[0].id, "a2");
        assert_eq!(loaded.decided.get("d1"), Some(&false));
        assert_eq!(loaded.title.as_deref(), Some("T"));
    }

    #[test]
    fn session_ids_cannot_leave_the_directory() {
        let home = tempfile::tempdir().unwrap();
        for bad in ["", "../x", "a/b", ".hidden"] {
            assert!(SessionLog::open(home.path(), bad).is_err(), "{bad}");
        }
    }
}
