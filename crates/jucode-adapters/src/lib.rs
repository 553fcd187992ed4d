//! Engine adapters: Claude Code, Codex and ACP agents behind the jucode `EngineFactory`.
//!
//! Each adapter runs the engine's own CLI as a child process (in its own process group), speaks
//! that engine's wire protocol on its stdio, and translates both ways: serve-v2 ops from the hub
//! into engine frames, engine frames into the same serve-v2 events a jucode session sends.
//!
//! Start reading at [`claude::ClaudeEngine`] (stream-json and the control protocol), then
//! [`codex::CodexEngine`] (`codex app-server` JSON-RPC) and [`acp::AcpEngine`] (Agent Client
//! Protocol). Shared parts: [`options`] (the client's `options`), [`discover`] (finding the CLI),
//! [`history`] (conversations the engines saved on disk), and the private `child` (process
//! plumbing), `turns` (the message queue and approvals every adapter keeps), `runs` (the
//! subagent entries and lifecycle events Claude Code and Codex traces share) and
//! `agent_tools` (a long-lived agent's MCP server and prompt for Claude Code and Codex).
//! [`replay`] feeds an adapter stdout lines with no process behind it (the fuzz targets' seam).

pub mod acp;
mod acp_terminal;
mod agent_tools;
mod child;
pub mod claude;
mod claude_elicit;
mod claude_extras;
mod claude_hunks;
mod claude_runs;
pub mod codex;
mod codex_agents;
mod codex_hunks;
mod codex_saved;
pub mod discover;
pub mod gateway;
pub mod history;
pub mod options;
pub mod replay;
mod runs;
pub mod tui;
mod turns;

use std::path::PathBuf;

pub use history::{SavedConversation, saved_conversations};
use jucode_protocol::serve::Event;
pub use options::EngineOptions;
use serde_json::{Value, json};

/// What every adapter needs to know about the daemon it runs in.
#[derive(Debug, Clone)]
pub struct AdapterConfig {
    /// The jucode home (`~/.jucode`): uploads live under it, and Codex keeps its session map
    /// in `<home>/daemon/`.
    pub jucode_home: PathBuf,
    /// The user's home directory: where `~/.claude`, `~/.codex` and the usual install
    /// directories are looked for.
    pub user_home: PathBuf,
    /// The JuCode gateway for sessions with `jucode_gateway: true`; `None` when not signed in.
    pub gateway: Option<gateway::GatewayEndpoint>,
}

impl AdapterConfig {
    /// The directories image attachments may come from besides a session's own directories.
    fn upload_dir(&self) -> PathBuf {
        self.jucode_home.join("uploads")
    }
}

/// Builds a serve-v2 event.
pub(crate) fn event(kind: &str, fields: Value) -> Event {
    Event::new(kind, fields)
}

pub(crate) fn status(message: &str) -> Event {
    event("status", json!({ "message": message }))
}

pub(crate) fn info(message: impl Into<String>) -> Event {
    event("info", json!({ "message": message.into() }))
}

pub(crate) fn error(message: impl Into<String>) -> Event {
    event("error", json!({ "message": message.into() }))
}

/// The serve-v2 tool name shown for a Claude Code tool (engines.md §4.2); tools without a
/// serve-v2 counterpart keep their own name.
pub fn claude_tool_name(tool: &str) -> String {
    match tool {
        "Bash" => "bash",
        "Write" => "write",
        "Edit" | "MultiEdit" | "NotebookEdit" => "str_replace",
        "Read" => "read",
        "Grep" | "Glob" => "ripgrep",
        "WebSearch" => "web_search",
        "WebFetch" => "web_fetch",
        other => return other.to_string(),
    }
    .to_string()
}

/// Cuts `s` to at most `max` characters.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A JSON-RPC response's `error` as text (its `message`, else the whole error), if it has one.
pub(crate) fn rpc_error(frame: &Value) -> Option<String> {
    let err = frame.get("error")?;
    Some(
        err.get("message")
            .map(text_of)
            .unwrap_or_else(|| err.to_string()),
    )
}

/// A JSON value's text: strings as they are, anything else compact JSON.
pub(crate) fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Array(items) => items
            .iter()
            .map(|item| match item.get("text").and_then(Value::as_str) {
                Some(text) => text.to_string(),
                None => text_of(item),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_tools_map_to_serve_names() {
        assert_eq!(claude_tool_name("Bash"), "bash");
        assert_eq!(claude_tool_name("MultiEdit"), "str_replace");
        assert_eq!(claude_tool_name("Glob"), "ripgrep");
        assert_eq!(claude_tool_name("Task"), "Task");
    }

    #[test]
    fn text_of_joins_text_blocks() {
        let blocks = json!([{"type":"text","text":"a"},{"type":"text","text":"b"}]);
        assert_eq!(text_of(&blocks), "a\nb");
        assert_eq!(text_of(&json!("x")), "x");
        assert_eq!(truncate("abcdef", 3), "abc…");
    }
}
