//! Capabilities of agent sessions whose engine runs another program (Claude Code, Codex): that
//! program's stdio MCP server (`jucode-daemon agent-mcp`) reaches the daemon over loopback
//! HTTP with a capability of its session only, never the daemon token.
//!
//! A capability is 32 random bytes issued when the session's engine starts (the first time the
//! engine asks for its MCP server), mapped to the session's [`Caller`], and revoked when that
//! engine stops. They live in memory only, so none is valid across a restart of the daemon.
//! The map is keyed by the capability's SHA-256, so a lookup compares digests rather than the
//! secret itself.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use jucode_engine::agent::{McpLaunch, ToolDef};
use serde_json::Value;

use super::tools::{self, Caller};
use crate::Hub;
use crate::util::{hex, random_bytes, sha256_hex};

/// The variable holding the daemon's URL in the MCP server's environment.
pub const ENV_URL: &str = "JUCODE_AGENT_URL";
/// The variable holding the session's capability in the MCP server's environment.
pub const ENV_CAPABILITY: &str = "JUCODE_AGENT_CAPABILITY";
/// The MCP server's name in the engine's configuration (its tools show as
/// `mcp__jucode__<tool>`).
pub const MCP_NAME: &str = "jucode";
/// The subcommand of the daemon binary that runs the MCP server.
pub const MCP_SUBCOMMAND: &str = "agent-mcp";

/// How the hub hands out its agent MCP server, set by the host once it knows both (the
/// server fills `url` after it binds). With either missing, no MCP server is offered.
#[derive(Debug, Clone, Default)]
pub struct AgentMcp {
    /// The daemon's own executable, whose `agent-mcp` subcommand is the server.
    pub program: Option<PathBuf>,
    /// The loopback URL the daemon listens on, e.g. `http://127.0.0.1:7788`.
    pub url: Option<String>,
}

/// Why an agent tool request over HTTP was not run.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum AgentToolError {
    /// Unknown, revoked or from before a restart: all look the same to the caller.
    #[error("unknown or revoked agent capability")]
    Refused,
    /// The tool ran and failed; the text is what the model is shown.
    #[error("{0}")]
    Tool(String),
}

/// The live capabilities: digest → caller.
#[derive(Debug, Default)]
pub(crate) struct Capabilities {
    map: Mutex<HashMap<String, Caller>>,
}

impl Capabilities {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Caller>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new capability for `caller`'s engine. The session's previous one is revoked: a
    /// session runs one engine (one program) at a time.
    fn issue(&self, caller: &Caller) -> Option<String> {
        let bytes: [u8; 32] = random_bytes().ok()?;
        let capability = hex(&bytes);
        let mut map = self.lock();
        map.retain(|_, c| c.session != caller.session);
        map.insert(sha256_hex(capability.as_bytes()), caller.clone());
        Some(capability)
    }

    /// Who holds `capability`, if it is live.
    fn caller(&self, capability: &str) -> Option<Caller> {
        if capability.is_empty() {
            return None;
        }
        self.lock().get(&sha256_hex(capability.as_bytes())).cloned()
    }

    /// Revokes `session`'s capability (its engine stopped or failed to start).
    pub(crate) fn revoke_session(&self, session: &str) {
        self.lock().retain(|_, c| c.session != session);
    }

    /// The session took the id its engine gave it: calls now come from that id.
    pub(crate) fn renamed(&self, from: &str, to: &str) {
        for caller in self.lock().values_mut() {
            if caller.session == from {
                caller.session = to.to_string();
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// The MCP server launch for `caller`, or `None` when the host set no program or URL.
pub(crate) fn launch(hub: &Hub, caller: &Caller) -> Option<McpLaunch> {
    let AgentMcp {
        program: Some(program),
        url: Some(url),
    } = hub.config.agent_mcp.clone()
    else {
        return None;
    };
    let capability = hub.agent_caps.issue(caller)?;
    Some(McpLaunch {
        name: MCP_NAME.to_string(),
        program,
        args: vec![MCP_SUBCOMMAND.to_string()],
        env: BTreeMap::from([
            (ENV_URL.to_string(), url),
            (ENV_CAPABILITY.to_string(), capability),
        ]),
    })
}

impl Hub {
    /// The agent tools the session holding `capability` offers.
    pub fn agent_tool_defs(&self, capability: &str) -> Result<Vec<ToolDef>, AgentToolError> {
        self.agent_caps
            .caller(capability)
            .ok_or(AgentToolError::Refused)?;
        Ok(tools::defs())
    }

    /// Runs agent tool `name` for the session holding `capability`.
    pub async fn agent_tool_call(
        self: &Arc<Self>,
        capability: &str,
        name: &str,
        args: Value,
    ) -> Result<Value, AgentToolError> {
        let caller = self
            .agent_caps
            .caller(capability)
            .ok_or(AgentToolError::Refused)?;
        tools::call(self, &caller, name, args)
            .await
            .map_err(|e| AgentToolError::Tool(e.to_string()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn caller(session: &str) -> Caller {
        Caller {
            agent: "scout".into(),
            session: session.into(),
        }
    }

    #[test]
    fn a_capability_names_its_caller_until_revoked() {
        let caps = Capabilities::default();
        let cap = caps.issue(&caller("s1")).unwrap();
        assert_eq!(cap.len(), 64);
        assert_eq!(caps.caller(&cap), Some(caller("s1")));
        assert_eq!(caps.caller("nope"), None);
        assert_eq!(caps.caller(""), None);
        caps.revoke_session("s2");
        assert_eq!(caps.caller(&cap), Some(caller("s1")));
        caps.revoke_session("s1");
        assert_eq!(caps.caller(&cap), None);
    }

    #[test]
    fn a_new_start_replaces_the_sessions_capability() {
        let caps = Capabilities::default();
        let first = caps.issue(&caller("s1")).unwrap();
        let other = caps.issue(&caller("s2")).unwrap();
        let second = caps.issue(&caller("s1")).unwrap();
        assert_ne!(first, second);
        assert_eq!(caps.caller(&first), None);
        assert_eq!(caps.caller(&second), Some(caller("s1")));
        assert_eq!(caps.caller(&other), Some(caller("s2")));
        assert_eq!(caps.len(), 2);
    }

    #[test]
    fn a_renamed_session_keeps_its_capability() {
        let caps = Capabilities::default();
        let cap = caps.issue(&caller("s1")).unwrap();
        caps.renamed("s1", "thread-1");
        assert_eq!(caps.caller(&cap), Some(caller("thread-1")));
        caps.revoke_session("thread-1");
        assert_eq!(caps.caller(&cap), None);
    }
}
