//! The agent tools (`message_agent`, `timer`, `brief`, `question`, `report`, `requirements`):
//! one entry point for every engine, whether it calls in process (jucode, through
//! [`HubAgentHost`]) or over the stdio MCP server (Claude Code, Codex, with a session capability).
//!
//! Each tool belongs to its area, which defines it (name, description, argument schema) and
//! runs it; this file only lists them and picks one by name.

use std::sync::{Arc, Weak};

use jucode_engine::agent::{AgentHost, McpLaunch, ToolDef, ToolFuture};
use serde_json::Value;

use crate::Hub;
use crate::error::OpError;

/// Who calls a tool: the agent and the session it runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    pub(crate) agent: String,
    pub(crate) session: String,
}

/// Why a tool call failed; the text is what the model is shown.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ToolError {
    #[error("unknown tool {0}")]
    Unknown(String),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Op(#[from] OpError),
}

/// Every agent tool, as a model sees it.
pub(crate) fn defs() -> Vec<ToolDef> {
    vec![
        super::brief::def(),
        crate::messages::tool::def(),
        crate::timers::tool_def(),
        crate::questions::tool_def(),
        crate::reports::tool_def(),
        crate::requirements::tool::def(),
    ]
}

/// Runs tool `name` for `caller`.
pub(crate) async fn call(
    hub: &Arc<Hub>,
    caller: &Caller,
    name: &str,
    args: Value,
) -> Result<Value, ToolError> {
    match name {
        "brief" => super::brief::call(hub, caller, args).await,
        "timer" => crate::timers::tool(hub, caller, args),
        "question" => crate::questions::tool(hub, caller, args),
        "report" => crate::reports::tool(hub, caller, args),
        crate::messages::tool::NAME => crate::messages::tool::call(hub, caller, args),
        crate::requirements::tool::NAME => crate::requirements::tool::call(hub, caller, args),
        _ => Err(ToolError::Unknown(name.to_string())),
    }
}

/// The hub's [`AgentHost`] for one agent session. Holds the hub weakly: an engine outliving
/// the hub (at shutdown) gets errors, not a hub kept alive.
pub(crate) struct HubAgentHost {
    pub(crate) hub: Weak<Hub>,
    pub(crate) caller: Caller,
    /// The prompt as it was when the engine started: what a call made under the hub's lock
    /// (from inside `EngineFactory::start`) gets.
    pub(crate) start_prompt: String,
}

impl AgentHost for HubAgentHost {
    /// Built again for every turn, so a brief the agent rewrote shows at once. Empty once
    /// the hub or the agent is gone. It takes the hub's lock for a moment, except when called
    /// under it (an engine's start): that call gets the prompt of the engine's start.
    fn prompt(&self) -> String {
        if Hub::lock_held_here() {
            return self.start_prompt.clone();
        }
        let Some(hub) = self.hub.upgrade() else {
            return String::new();
        };
        let facts = super::prompt::PromptFacts::gather(&hub.lock(), &self.caller.agent);
        facts.map(|f| f.render()).unwrap_or_default()
    }

    fn tools(&self) -> Vec<ToolDef> {
        defs()
    }

    fn call(&self, name: &str, args: Value) -> ToolFuture {
        let hub = self.hub.clone();
        let caller = self.caller.clone();
        let name = name.to_string();
        Box::pin(async move {
            let hub = hub.upgrade().ok_or("the daemon is stopping")?;
            call(&hub, &caller, &name, args)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn mcp_server(&self) -> Option<McpLaunch> {
        let hub = self.hub.upgrade()?;
        super::capability::launch(&hub, &self.caller)
    }
}
