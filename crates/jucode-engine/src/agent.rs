//! What an engine gets when its session belongs to a long-lived agent: the agent's part of
//! the system prompt and the agent tools (`message_agent`, `timer`, `brief`, `question`,
//! `report`), both served by the hub through [`AgentHost`].
//!
//! An in-process engine (jucode) lists [`AgentHost::tools`] beside its own and calls
//! [`AgentHost::call`]; an engine that runs another program (Claude Code, Codex) hands that
//! program [`AgentHost::mcp_server`], a stdio MCP server that reaches the daemon with a
//! capability of this session only.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

/// A tool call's result: JSON for the model, or the error text it is shown.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<Value, String>> + Send>>;

/// One agent tool as a model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub parameters: Value,
}

/// How to start the stdio MCP server that serves the agent tools to another program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpLaunch {
    /// The MCP server's name in the engine's configuration.
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Carries the daemon's URL and the session's capability; never put on a command line.
    pub env: BTreeMap<String, String>,
}

/// The hub's side of an agent session.
pub trait AgentHost: Send + Sync {
    /// The agent's part of the system prompt (brief, memory index, other agents), read again
    /// for every turn because the agent may rewrite its brief.
    fn prompt(&self) -> String;
    /// The agent tools this session offers.
    fn tools(&self) -> Vec<ToolDef>;
    /// Runs one agent tool. Returns at once for everything but slow IO.
    fn call(&self, name: &str, args: Value) -> ToolFuture;
    /// The MCP server to hand a program that cannot call [`AgentHost::call`] in process;
    /// `None` when the daemon cannot serve one (no HTTP listener known).
    fn mcp_server(&self) -> Option<McpLaunch>;
}

/// A session's agent: its id and the host that serves it.
#[derive(Clone)]
pub struct AgentSeat {
    pub agent: String,
    pub host: Arc<dyn AgentHost>,
}

impl std::fmt::Debug for AgentSeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSeat")
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}
