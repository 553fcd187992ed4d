//! Conversations the engines saved on disk: Claude Code's transcripts
//! (`~/.claude/projects/<munged cwd>/<session>.jsonl`) and Codex's rollouts
//! (`~/.codex/sessions/YYYY/MM/DD/rollout-…-<thread>.jsonl`).
//!
//! Used for `session_history`, for `session_open` of a conversation the daemon never hosted, and
//! for the transcript a reopened session starts from. The files are the engines' own and change
//! between versions: every line is read leniently and a line that does not fit is skipped.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use jucode_protocol::serve::TranscriptItem;
use serde_json::Value;

use crate::{claude_tool_name, text_of, truncate};

/// How long a title may be.
const TITLE_CHARS: usize = 80;

pub use jucode_engine::SavedConversation;

/// The conversations `engine` (`claude` or `codex`) saved for `cwd`, newest first. Other
/// engines save nothing the daemon can list.
pub fn saved_conversations(engine: &str, cwd: &Path, user_home: &Path) -> Vec<SavedConversation> {
    let mut out = match engine {
        "claude" => claude_conversations(&user_home.join(".claude"), cwd),
        "codex" => codex_conversations(&user_home.join(".codex"), cwd),
        _ => Vec::new(),
    };
    out.sort_by_key(|c| std::cmp::Reverse(c.updated_at));
    out
}

pub(crate) fn lines(path: &Path) -> impl Iterator<Item = Value> {
    std::fs::File::open(path)
        .ok()
        .map(BufReader::new)
        .into_iter()
        .flat_map(|r| r.lines().map_while(Result::ok))
        .filter_map(|line| serde_json::from_str::<Value>(&line).ok())
}

fn mtime_ms(path: &Path) -> u64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

// ---- Claude Code ----

/// The project directories Claude Code may have used for `cwd` (names over 200 characters are
/// cut and given a hash suffix that differs between CLI builds, so those match by prefix).
fn claude_project_dirs(config_dir: &Path, cwd: &Path) -> Vec<PathBuf> {
    let mut cwds = vec![cwd.to_path_buf()];
    if let Ok(real) = std::fs::canonicalize(cwd)
        && real != cwd
    {
        cwds.push(real);
    }
    let projects = config_dir.join("projects");
    let mut dirs = Vec::new();
    for cwd in cwds {
        let name = crate::claude::munge_cwd(&cwd);
        if name.len() <= 200 {
            dirs.push(projects.join(&name));
        } else if let Ok(entries) = std::fs::read_dir(&projects) {
            let prefix = &name[..200];
            dirs.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                    .map(|e| e.path()),
            );
        }
    }
    dirs.dedup();
    dirs
}

fn claude_conversations(config_dir: &Path, cwd: &Path) -> Vec<SavedConversation> {
    let mut out = Vec::new();
    for dir in claude_project_dirs(config_dir, cwd) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("jsonl") || !path.is_file() {
                continue;
            }
            let Some(session) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if let Some(conversation) = claude_summary(&path, session) {
                out.push(conversation);
            }
        }
    }
    out
}

fn claude_summary(path: &Path, session: &str) -> Option<SavedConversation> {
    let mut named = None;
    let mut first_user = None;
    let mut entries = 0;
    for line in lines(path) {
        match line.get("type").and_then(Value::as_str).unwrap_or("") {
            "custom-title" => {
                named = line
                    .get("customTitle")
                    .or(line.get("title"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or(named);
            }
            "summary" if named.is_none() => {
                named = line
                    .get("summary")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            "user" | "assistant" if is_conversation(&line) => {
                entries += 1;
                if first_user.is_none() && line.get("type").and_then(Value::as_str) == Some("user")
                {
                    first_user = user_text(&line);
                }
            }
            _ => {}
        }
    }
    if entries == 0 {
        return None;
    }
    let title = named.or(first_user).unwrap_or_else(|| session.to_string());
    Some(SavedConversation {
        session: session.to_string(),
        title: truncate(title.lines().next().unwrap_or("").trim(), TITLE_CHARS),
        updated_at: mtime_ms(path),
        entries,
    })
}

/// A user or assistant line of the main conversation (not a side chain or meta message).
fn is_conversation(line: &Value) -> bool {
    line.get("isSidechain").and_then(Value::as_bool) != Some(true)
        && line.get("isMeta").and_then(Value::as_bool) != Some(true)
}

/// The text of a user line the user typed (tool results and injected blocks are not).
fn user_text(line: &Value) -> Option<String> {
    let content = line.pointer("/message/content")?;
    let text = match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    let trimmed = text.trim();
    (!trimmed.is_empty() && !trimmed.starts_with('<')).then(|| trimmed.to_string())
}

/// Where Claude Code saved conversation `session`, if it did.
pub fn claude_transcript_path(config_dir: &Path, session: &str) -> Option<PathBuf> {
    if session.is_empty() || session.contains(['/', '\\']) || session.starts_with('.') {
        return None;
    }
    let file = format!("{session}.jsonl");
    std::fs::read_dir(config_dir.join("projects"))
        .ok()?
        .flatten()
        .map(|d| d.path().join(&file))
        .find(|p| p.is_file())
}

/// The conversation in a Claude Code transcript as serve-v2 transcript items.
pub fn claude_transcript(path: &Path) -> Vec<TranscriptItem> {
    let mut items = Vec::new();
    let mut tools = std::collections::HashMap::new();
    for line in lines(path) {
        if !is_conversation(&line) {
            continue;
        }
        match line.get("type").and_then(Value::as_str).unwrap_or("") {
            "user" => {
                if let Some(text) = user_text(&line) {
                    items.push(TranscriptItem::User {
                        content: text,
                        images: Vec::new(),
                    });
                }
                for block in line
                    .pointer("/message/content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                {
                    let id = block
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    items.push(TranscriptItem::Tool {
                        name: tools.get(id).cloned().unwrap_or_else(|| "tool".to_string()),
                        output: text_of(block.get("content").unwrap_or(&Value::Null)),
                    });
                }
            }
            "assistant" => {
                for block in line
                    .pointer("/message/content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                            match items.last_mut() {
                                Some(TranscriptItem::Assistant { content }) => {
                                    content.push_str(text)
                                }
                                _ => items.push(TranscriptItem::Assistant {
                                    content: text.to_string(),
                                }),
                            }
                        }
                        Some("tool_use") => {
                            let id = block.get("id").and_then(Value::as_str).unwrap_or("");
                            let name = block.get("name").and_then(Value::as_str).unwrap_or("");
                            tools.insert(id.to_string(), claude_tool_name(name));
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    items
}

// ---- Codex ----

pub(crate) fn rollouts(codex_home: &Path) -> impl Iterator<Item = PathBuf> {
    walkdir::WalkDir::new(codex_home.join("sessions"))
        .max_depth(4)
        .follow_links(false)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(".jsonl"))
        })
}

/// The thread id and cwd a rollout's first line (`session_meta`) names.
fn rollout_meta(path: &Path) -> Option<(String, String)> {
    let first = lines(path).next()?;
    if first.get("type").and_then(Value::as_str) != Some("session_meta") {
        return None;
    }
    let payload = first.get("payload")?;
    let id = payload.get("id").and_then(Value::as_str)?.to_string();
    let cwd = payload.get("cwd").and_then(Value::as_str)?.to_string();
    Some((id, cwd))
}

fn codex_conversations(codex_home: &Path, cwd: &Path) -> Vec<SavedConversation> {
    let wanted: Vec<String> = [Some(cwd.to_path_buf()), std::fs::canonicalize(cwd).ok()]
        .into_iter()
        .flatten()
        .map(|p| p.display().to_string())
        .collect();
    rollouts(codex_home)
        .filter_map(|path| {
            let (id, rollout_cwd) = rollout_meta(&path)?;
            if !wanted.contains(&rollout_cwd) {
                return None;
            }
            let items = codex_transcript(&path);
            let entries = items
                .iter()
                .filter(|i| {
                    matches!(
                        i,
                        TranscriptItem::User { .. } | TranscriptItem::Assistant { .. }
                    )
                })
                .count();
            let title = items.iter().find_map(|i| match i {
                TranscriptItem::User { content, .. } => Some(content.clone()),
                _ => None,
            });
            Some(SavedConversation {
                title: truncate(
                    title
                        .as_deref()
                        .unwrap_or(&id)
                        .lines()
                        .next()
                        .unwrap_or("")
                        .trim(),
                    TITLE_CHARS,
                ),
                session: id,
                updated_at: mtime_ms(&path),
                entries,
            })
        })
        .collect()
}

/// Where Codex saved thread `thread`, if it did.
pub fn codex_rollout_path(codex_home: &Path, thread: &str) -> Option<PathBuf> {
    let suffix = format!("-{thread}.jsonl");
    rollouts(codex_home).find(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(&suffix))
    })
}

/// The conversation in a Codex rollout as serve-v2 transcript items.
pub fn codex_transcript(path: &Path) -> Vec<TranscriptItem> {
    let mut items = Vec::new();
    let mut calls = std::collections::HashMap::new();
    for line in lines(path) {
        if line.get("type").and_then(Value::as_str) != Some("response_item") {
            continue;
        }
        let payload = &line["payload"];
        match payload.get("type").and_then(Value::as_str).unwrap_or("") {
            "message" => {
                let text: String = payload
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n");
                match payload.get("role").and_then(Value::as_str) {
                    // Codex injects context blocks as user messages; they start with a tag.
                    Some("user") if !text.trim_start().starts_with('<') => {
                        items.push(TranscriptItem::User {
                            content: text,
                            images: Vec::new(),
                        })
                    }
                    Some("assistant") => items.push(TranscriptItem::Assistant { content: text }),
                    _ => {}
                }
            }
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                let id = payload.get("call_id").and_then(Value::as_str).unwrap_or("");
                let name = match payload.get("name").and_then(Value::as_str) {
                    Some("exec_command" | "shell" | "shell_command") | None => "bash",
                    Some("apply_patch") => "str_replace",
                    Some(other) => other,
                };
                calls.insert(id.to_string(), name.to_string());
            }
            "function_call_output" | "custom_tool_call_output" => {
                let id = payload.get("call_id").and_then(Value::as_str).unwrap_or("");
                let output = payload.get("output").map(text_of).unwrap_or_default();
                items.push(TranscriptItem::Tool {
                    name: calls.get(id).cloned().unwrap_or_else(|| "tool".to_string()),
                    output,
                });
            }
            _ => {}
        }
    }
    items
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write_lines(path: &Path, lines: &[Value]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        std::fs::write(path, text.join("\n") + "\n").unwrap();
    }

    #[test]
    fn claude_conversations_are_listed_with_titles_and_transcripts() {
        let home = tempfile::tempdir().unwrap();
        let cwd = Path::new("/srv/w/app");
        let file = home
            .path()
            .join(".claude/projects/-srv-w-app/b8019d2f-7723-4563-9d44-bfc0e5d93754.jsonl");
        write_lines(
            &file,
            &[
                json!({"type":"queue-operation"}),
                json!({"type":"user","isSidechain":false,"message":{"role":"user","content":"RUN: echo hi\nmore"}}),
                json!({"type":"assistant","isSidechain":false,"message":{"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}),
                json!({"type":"user","isSidechain":false,"message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"hi"}]}}),
                json!({"type":"assistant","isSidechain":false,"message":{"content":[{"type":"text","text":"tool said: hi"}]}}),
                json!({"type":"user","isSidechain":true,"message":{"content":"side"}}),
                "torn".into(),
            ],
        );
        let found = saved_conversations("claude", cwd, home.path());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].session, "b8019d2f-7723-4563-9d44-bfc0e5d93754");
        assert_eq!(found[0].title, "RUN: echo hi");
        assert_eq!(found[0].entries, 4);
        let items = claude_transcript(&file);
        assert_eq!(
            items,
            vec![
                TranscriptItem::User {
                    content: "RUN: echo hi\nmore".into(),
                    images: vec![]
                },
                TranscriptItem::Tool {
                    name: "bash".into(),
                    output: "hi".into()
                },
                TranscriptItem::Assistant {
                    content: "tool said: hi".into()
                },
            ]
        );
        assert!(saved_conversations("claude", Path::new("/other"), home.path()).is_empty());
        assert!(saved_conversations("acp", cwd, home.path()).is_empty());
    }

    #[test]
    fn codex_rollouts_are_listed_by_cwd() {
        let home = tempfile::tempdir().unwrap();
        let file = home
            .path()
            .join(".codex/sessions/2026/11/29/rollout-2026-11-29T21-35-27-01a2.jsonl");
        write_lines(
            &file,
            &[
                json!({"type":"session_meta","payload":{"id":"01a2","cwd":"/srv/w/x"}}),
                json!({"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>"}]}}),
                json!({"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"RUN: echo hi"}]}}),
                json!({"type":"response_item","payload":{"type":"function_call","name":"exec_command","call_id":"c1"}}),
                json!({"type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"hi"}}),
                json!({"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"tool said: hi"}]}}),
            ],
        );
        let found = saved_conversations("codex", Path::new("/srv/w/x"), home.path());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].session, "01a2");
        assert_eq!(found[0].title, "RUN: echo hi");
        assert_eq!(found[0].entries, 2);
        assert_eq!(
            codex_rollout_path(&home.path().join(".codex"), "01a2"),
            Some(file)
        );
        assert!(saved_conversations("codex", Path::new("/srv/w/y"), home.path()).is_empty());
    }
}
