//! Conversations the engines saved on disk: Claude Code's transcripts
//! (`~/.claude/projects/<munged cwd>/<session>.jsonl`) and Codex's rollouts
//! (`~/.codex/sessions/YYYY/MM/DD/rollout-…-<thread>.jsonl`, or `.jsonl.zst` when a newer
//! Codex saved it zstd-compressed).
//!
//! Used for `session_history`, for `session_open` of a conversation the daemon never hosted, and
//! for the transcript a reopened session starts from. The files are the engines' own and change
//! between versions: every line is read leniently and a line that does not fit is skipped.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use jucode_protocol::serve::TranscriptItem;
use ruzstd::decoding::{FrameDecoder, StreamingDecoder};
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

/// How far a compressed rollout is read: past this many decompressed bytes it is cut off, so
/// a hostile file (a zstd bomb) costs bounded time.
const MAX_DECOMPRESSED: u64 = 1 << 30;
/// The longest line kept; the rest of a longer one is skipped without being held in memory.
const MAX_LINE: u64 = 64 << 20;
/// The largest zstd window accepted (the decoder allocates it up front).
const MAX_WINDOW: u64 = 64 << 20;

/// The JSON lines of a saved file (plain, or zstd-compressed when it ends in `.zst`); lines
/// that are not JSON or are longer than [`MAX_LINE`] are skipped, a read error ends them.
pub(crate) fn lines(path: &Path) -> impl Iterator<Item = Value> {
    bounded_lines(path, MAX_DECOMPRESSED, MAX_LINE)
}

fn bounded_lines(path: &Path, max_total: u64, max_line: u64) -> impl Iterator<Item = Value> {
    let reader = open(path, max_total);
    let mut lines = JsonLines { reader, max_line };
    std::iter::from_fn(move || lines.next_value())
}

fn open(path: &Path, max_total: u64) -> Option<Box<dyn BufRead>> {
    let file = BufReader::new(std::fs::File::open(path).ok()?);
    if path.extension().and_then(|e| e.to_str()) != Some("zst") {
        return Some(Box::new(file));
    }
    let frames = ZstdFrames::new(file).ok()?;
    Some(Box::new(BufReader::new(frames.take(max_total))))
}

struct JsonLines {
    reader: Option<Box<dyn BufRead>>,
    max_line: u64,
}

impl JsonLines {
    fn next_value(&mut self) -> Option<Value> {
        loop {
            let reader = self.reader.as_mut()?;
            let mut line = Vec::new();
            let read = reader.take(self.max_line).read_until(b'\n', &mut line);
            match read {
                Ok(0) | Err(_) => {
                    self.reader = None;
                    return None;
                }
                Ok(_) => {}
            }
            if !line.ends_with(b"\n") && line.len() as u64 == self.max_line {
                if !skip_line(reader) {
                    self.reader = None;
                }
                continue;
            }
            if let Ok(value) = serde_json::from_slice(&line) {
                return Some(value);
            }
        }
    }
}

/// Consumes the rest of an over-long line; false at its end of input or on an error.
fn skip_line(reader: &mut dyn BufRead) -> bool {
    loop {
        let Ok(buf) = reader.fill_buf() else {
            return false;
        };
        if buf.is_empty() {
            return false;
        }
        match buf.iter().position(|b| *b == b'\n') {
            Some(at) => {
                reader.consume(at + 1);
                return true;
            }
            None => {
                let len = buf.len();
                reader.consume(len);
            }
        }
    }
}

/// A zstd stream of one or more frames (a writer that flushes by frames leaves several).
struct ZstdFrames<R: BufRead> {
    decoder: Option<StreamingDecoder<R, FrameDecoder>>,
}

impl<R: BufRead> ZstdFrames<R> {
    fn new(source: R) -> Result<Self, ruzstd::decoding::errors::FrameDecoderError> {
        let decoder = StreamingDecoder::new_with_max_window_size(source, MAX_WINDOW)?;
        Ok(ZstdFrames {
            decoder: Some(decoder),
        })
    }
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let Some(decoder) = self.decoder.as_mut() else {
                return Ok(0);
            };
            let n = decoder.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            // This frame is done: decode the next one, if any follows.
            let Some(done) = self.decoder.take() else {
                return Ok(0);
            };
            let (mut source, frame) = done.into_parts();
            if source.fill_buf()?.is_empty() {
                return Ok(0);
            }
            let next =
                StreamingDecoder::new_with_decoder(source, frame).map_err(std::io::Error::other)?;
            self.decoder = Some(next);
        }
    }
}

/// A rollout file's name without its `.jsonl` / `.jsonl.zst` ending, when it is one.
pub(crate) fn rollout_stem(name: &str) -> Option<&str> {
    name.strip_suffix(".jsonl.zst")
        .or_else(|| name.strip_suffix(".jsonl"))
        .filter(|stem| stem.starts_with("rollout-"))
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
        Value::Array(blocks) => text_blocks(blocks)
            .filter(|t| crate::turns::image_note_path(t).is_none())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    let trimmed = text.trim();
    (!trimmed.is_empty() && !trimmed.starts_with('<')).then(|| trimmed.to_string())
}

fn text_blocks(blocks: &[Value]) -> impl Iterator<Item = &str> {
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
}

/// The images the adapter named (with their notes) in a Claude Code user message.
fn user_images(line: &Value) -> Vec<String> {
    match line.pointer("/message/content") {
        Some(Value::Array(blocks)) => text_blocks(blocks)
            .filter_map(crate::turns::image_note_path)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
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

/// Codex saves an attached image between `<image name=[Image #1] path="…">` and `</image>`
/// text parts: `Some(path)` for the opening one (the path it names), `Some(None)` for the
/// closing one, `None` for any other text.
fn codex_image_tag(text: &str) -> Option<Option<&str>> {
    if text == "</image>" {
        return Some(None);
    }
    let rest = text.strip_prefix("<image ")?.strip_suffix('>')?;
    let path = rest
        .find("path=\"")
        .map(|i| &rest[i + 6..])
        .and_then(|p| p.strip_suffix('"'))
        .filter(|p| p.starts_with('/'));
    Some(path)
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
                        images: user_images(&line),
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
                .is_some_and(|n| rollout_stem(n).is_some())
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
    let suffix = format!("-{thread}");
    rollouts(codex_home).find(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .and_then(rollout_stem)
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
                let mut images = Vec::new();
                let text: String = payload
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .filter(|t| match codex_image_tag(t) {
                        Some(path) => {
                            images.extend(path.map(str::to_string));
                            false
                        }
                        None => true,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                match payload.get("role").and_then(Value::as_str) {
                    // Codex injects context blocks as user messages; they start with a tag.
                    Some("user") if !text.trim_start().starts_with('<') => {
                        items.push(TranscriptItem::User {
                            content: text,
                            images,
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
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    fn write_lines(path: &Path, lines: &[Value]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        std::fs::write(path, text.join("\n") + "\n").unwrap();
    }

    #[test]
    fn a_codex_message_gets_its_images_back_from_their_tags() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rollout.jsonl");
        write_lines(
            &file,
            &[
                json!({"type":"response_item","payload":{"type":"message","role":"user","content":[
                    {"type":"input_text","text":"what is in this picture?"},
                    {"type":"input_text","text":"<image name=[Image #1] path=\"/w/shot.png\">"},
                    {"type":"input_image","image_url":"data:image/png;base64,iVBO"},
                    {"type":"input_text","text":"</image>"},
                ]}}),
            ],
        );
        assert_eq!(
            codex_transcript(&file),
            vec![TranscriptItem::User {
                content: "what is in this picture?".into(),
                images: vec!["/w/shot.png".into()],
            }]
        );
        assert_eq!(codex_image_tag("<image name=x>"), Some(None));
        assert_eq!(codex_image_tag("<environment_context>"), None);
    }

    #[test]
    fn a_claude_message_gets_its_images_back_from_their_notes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.jsonl");
        write_lines(
            &file,
            &[
                json!({"type":"user","isSidechain":false,"message":{"role":"user","content":[
                    {"type":"text","text":"look"},
                    {"type":"text","text":"[image: /u/.jucode/uploads/d/u-1-1-a.png]"},
                    {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}},
                    {"type":"text","text":"[image: not/absolute]"},
                ]}}),
            ],
        );
        assert_eq!(
            claude_transcript(&file),
            vec![TranscriptItem::User {
                content: "look\n[image: not/absolute]".into(),
                images: vec!["/u/.jucode/uploads/d/u-1-1-a.png".into()],
            }]
        );
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

    /// `text` as a zstd stream of two frames (split at a line), as a frame-flushing writer
    /// leaves it.
    pub(crate) fn zstd_frames(text: &str) -> Vec<u8> {
        use ruzstd::encoding::{CompressionLevel, compress_to_vec};
        let cut = text[..text.len() / 2].rfind('\n').map_or(0, |at| at + 1);
        let mut out = compress_to_vec(&text.as_bytes()[..cut], CompressionLevel::Fastest);
        out.extend(compress_to_vec(
            &text.as_bytes()[cut..],
            CompressionLevel::Fastest,
        ));
        out
    }

    fn codex_lines() -> Vec<Value> {
        vec![
            json!({"type":"session_meta","payload":{"id":"01b3","cwd":"/srv/w/z"}}),
            json!({"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"RUN: echo hi"}]}}),
            json!({"type":"response_item","payload":{"type":"function_call","name":"exec_command","call_id":"c1"}}),
            json!({"type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"hi"}}),
            json!({"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"tool said: hi"}]}}),
        ]
    }

    fn jsonl(lines: &[Value]) -> String {
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    #[test]
    fn compressed_codex_rollouts_are_listed_and_read() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join(".codex/sessions/2026/11/30");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("rollout-2026-11-30T08-00-00-01b3.jsonl.zst");
        let compressed = zstd_frames(&jsonl(&codex_lines()));
        assert_ne!(&compressed[..4], b"{\"ty");
        std::fs::write(&file, compressed).unwrap();
        let found = saved_conversations("codex", Path::new("/srv/w/z"), home.path());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].session, "01b3");
        assert_eq!(found[0].title, "RUN: echo hi");
        assert_eq!(found[0].entries, 2);
        assert_eq!(
            codex_rollout_path(&home.path().join(".codex"), "01b3"),
            Some(file.clone())
        );
        assert_eq!(
            codex_transcript(&file),
            vec![
                TranscriptItem::User {
                    content: "RUN: echo hi".into(),
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
        // Not a rollout of its own: a `.zst` that is not `.jsonl.zst`.
        std::fs::write(dir.join("rollout-2026-11-30T09-00-00-01c4.json.zst"), b"x").unwrap();
        assert_eq!(
            codex_rollout_path(&home.path().join(".codex"), "01c4"),
            None
        );
    }

    #[test]
    fn a_compressed_file_is_read_only_up_to_its_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rollout-x.jsonl.zst");
        let lines = codex_lines();
        let text = jsonl(&lines);
        std::fs::write(&file, zstd_frames(&text)).unwrap();
        assert_eq!(lines_of(&file, u64::MAX, u64::MAX), lines);
        // Cut off after the first two lines: the rest is never decompressed.
        let two = (lines[0].to_string().len() + lines[1].to_string().len() + 2) as u64;
        assert_eq!(lines_of(&file, two, u64::MAX), lines[..2]);
        // A line over the line bound is skipped, the lines after it still read.
        let long = lines[2].to_string().len() as u64;
        let kept: Vec<Value> = lines
            .iter()
            .filter(|l| (l.to_string().len() as u64) < long)
            .cloned()
            .collect();
        assert!(kept.len() < lines.len() && kept.len() >= 2);
        assert_eq!(lines_of(&file, u64::MAX, long), kept);
        // The same bounds hold for a plain file.
        let plain = dir.path().join("rollout-x.jsonl");
        std::fs::write(&plain, &text).unwrap();
        assert_eq!(lines_of(&plain, u64::MAX, long), kept);
    }

    fn lines_of(path: &Path, max_total: u64, max_line: u64) -> Vec<Value> {
        bounded_lines(path, max_total, max_line).collect()
    }

    #[test]
    fn a_bad_compressed_file_reads_as_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rollout-bad.jsonl.zst");
        // A frame declaring a 1 TiB window: refused before anything is allocated.
        std::fs::write(&file, [0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xf0, 1, 2, 3, 4]).unwrap();
        assert_eq!(lines(&file).count(), 0);
        // Not zstd at all, and a valid stream cut short.
        std::fs::write(&file, b"{\"type\":\"session_meta\"}\n").unwrap();
        assert_eq!(lines(&file).count(), 0);
        let whole = zstd_frames(&jsonl(&codex_lines()));
        std::fs::write(&file, &whole[..whole.len() - 5]).unwrap();
        assert!(lines(&file).count() < codex_lines().len());
    }
}
