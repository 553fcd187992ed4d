//! What a fake engine saves of its conversation, where and as the real CLI does, when
//! `FAKE_ENGINE_SAVE` is set: Claude Code's session JSONL
//! (`$CLAUDE_CONFIG_DIR` or `~/.claude`, `projects/<munged cwd>/<session>.jsonl`) and Codex's
//! rollout (`$CODEX_HOME` or `~/.codex`, `sessions/YYYY/MM/DD/rollout-<time>-<thread>.jsonl`).
//! A user message is written when the fake reads it, as the CLI saves it when its turn begins;
//! an assistant message when the fake writes it. Only the lines and fields the daemon reads
//! back (and that the CLIs write) are produced.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::replay::Flavor;

/// Appends a fake's conversation to the engine's own saved file.
pub struct Saver {
    flavor: Flavor,
    root: PathBuf,
    cwd: String,
    /// Claude: the session id (`--session-id` / `--resume`).
    session: Option<String>,
    lines: u64,
}

/// Claude Code's project directory name for a working directory.
fn munge(cwd: &str) -> String {
    cwd.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn env_dir(name: &str, default: &str) -> Option<PathBuf> {
    match std::env::var_os(name).filter(|v| !v.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => std::env::var_os("HOME").map(|h| Path::new(&h).join(default)),
    }
}

impl Saver {
    /// A saver when `FAKE_ENGINE_SAVE` asks for one (ACP agents save nothing the daemon reads).
    pub fn from_env(flavor: Flavor, cwd: &str, session: Option<String>) -> Option<Saver> {
        std::env::var_os("FAKE_ENGINE_SAVE")?;
        let root = match flavor {
            Flavor::Claude => env_dir("CLAUDE_CONFIG_DIR", ".claude")?,
            Flavor::Codex => env_dir("CODEX_HOME", ".codex")?,
            Flavor::Acp => return None,
        };
        Some(Saver {
            flavor,
            root,
            cwd: cwd.to_string(),
            session,
            lines: 0,
        })
    }

    /// A frame the adapter wrote to the fake.
    pub fn input(&mut self, frame: &Value) -> Result<()> {
        match self.flavor {
            Flavor::Claude if frame.get("type").and_then(Value::as_str) == Some("user") => {
                let message = frame.get("message").cloned().unwrap_or(Value::Null);
                self.claude("user", message)
            }
            Flavor::Codex if frame.get("method").and_then(Value::as_str) == Some("turn/start") => {
                let params = &frame["params"];
                let Some(thread) = params.get("threadId").and_then(Value::as_str) else {
                    return Ok(());
                };
                let content: Vec<Value> = params["input"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|i| i.get("text").and_then(Value::as_str))
                    .map(|t| json!({"type": "input_text", "text": t}))
                    .collect();
                self.codex(thread, "user", content)
            }
            _ => Ok(()),
        }
    }

    /// A frame the fake writes to the adapter.
    pub fn output(&mut self, frame: &Value) -> Result<()> {
        match self.flavor {
            Flavor::Claude if frame.get("type").and_then(Value::as_str) == Some("assistant") => {
                let message = frame.get("message").cloned().unwrap_or(Value::Null);
                self.claude("assistant", message)
            }
            Flavor::Codex
                if frame.get("method").and_then(Value::as_str) == Some("item/completed")
                    && frame.pointer("/params/item/type").and_then(Value::as_str)
                        == Some("agentMessage") =>
            {
                let params = &frame["params"];
                let (Some(thread), Some(text)) = (
                    params.get("threadId").and_then(Value::as_str),
                    params.pointer("/item/text").and_then(Value::as_str),
                ) else {
                    return Ok(());
                };
                let content = vec![json!({"type": "output_text", "text": text})];
                self.codex(thread, "assistant", content)
            }
            _ => Ok(()),
        }
    }

    fn claude(&mut self, kind: &str, message: Value) -> Result<()> {
        let Some(session) = self.session.clone() else {
            return Ok(());
        };
        self.lines += 1;
        let path = self
            .root
            .join("projects")
            .join(munge(&self.cwd))
            .join(format!("{session}.jsonl"));
        let line = json!({
            "type": kind,
            "isSidechain": false,
            "sessionId": session,
            "cwd": self.cwd,
            "uuid": format!("00000000-0000-4000-8000-{:012x}", self.lines),
            "message": message,
        });
        append(&path, &[line])
    }

    fn codex(&mut self, thread: &str, role: &str, content: Vec<Value>) -> Result<()> {
        let path = self
            .root
            .join("sessions/2026/01/01")
            .join(format!("rollout-2026-01-01T00-00-00-{thread}.jsonl"));
        let mut lines = Vec::new();
        if !path.exists() {
            lines.push(json!({"type": "session_meta", "payload": {"id": thread, "cwd": self.cwd}}));
        }
        lines.push(json!({
            "type": "response_item",
            "payload": {"type": "message", "role": role, "content": content},
        }));
        append(&path, &lines)
    }
}

fn append(path: &Path, lines: &[Value]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    }
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("{}", path.display()))?;
    let mut text = String::new();
    for line in lines {
        text.push_str(&line.to_string());
        text.push('\n');
    }
    file.write_all(text.as_bytes())?;
    Ok(())
}
