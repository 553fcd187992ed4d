//! The stdio MCP server of the agent tools (`message_agent`, `timer`, `brief`, `question`,
//! `report`) for an agent session that runs another program (Claude Code, Codex). The daemon
//! names it in that program's MCP configuration as `jucode-daemon agent-mcp`.
//!
//! It holds no state and no daemon token: `tools/list` asks the daemon for the session's
//! tools, `tools/call` forwards the call, both over loopback HTTP (`POST /api/agent/tools`,
//! `POST /api/agent/call`) with the session's capability. The daemon's URL and the capability
//! come from the environment ([`ENV_URL`], [`ENV_CAPABILITY`]), never from a command line.
//!
//! Start at [`Config::from_env`] and [`serve_stdio`]; [`Daemon`] is the HTTP side.

mod daemon;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InitializeResult,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

pub use daemon::{Daemon, ToolAnswer, ToolListing};

/// The variable holding the daemon's URL (`http://127.0.0.1:<port>`).
pub const ENV_URL: &str = "JUCODE_AGENT_URL";
/// The variable holding the session's capability.
pub const ENV_CAPABILITY: &str = "JUCODE_AGENT_CAPABILITY";

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0} is not set: this server is started by the jucode daemon for an agent session")]
    Missing(&'static str),
    #[error("{ENV_URL} must be http://<address>:<port> on this machine, got {0}")]
    BadUrl(String),
    #[error("the daemon could not be reached: {0}")]
    Unreachable(String),
    #[error("the daemon refused: {0}")]
    Refused(String),
    #[error("the daemon's answer was not understood: {0}")]
    BadAnswer(String),
    #[error("MCP: {0}")]
    Mcp(String),
}

/// Where the daemon is and the capability to show it.
#[derive(Clone)]
pub struct Config {
    pub url: String,
    pub capability: String,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The capability is a secret: never printed.
        f.debug_struct("Config")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Reads [`ENV_URL`] and [`ENV_CAPABILITY`] from `vars` (the process environment).
    pub fn from_env(vars: impl IntoIterator<Item = (String, String)>) -> Result<Config, Error> {
        let (mut url, mut capability) = (None, None);
        for (k, v) in vars {
            match k.as_str() {
                ENV_URL => url = Some(v),
                ENV_CAPABILITY => capability = Some(v),
                _ => {}
            }
        }
        let url = url
            .filter(|u| !u.is_empty())
            .ok_or(Error::Missing(ENV_URL))?;
        let capability = capability
            .filter(|c| !c.is_empty())
            .ok_or(Error::Missing(ENV_CAPABILITY))?;
        Ok(Config { url, capability })
    }
}

/// The MCP server: every request goes to the daemon.
#[derive(Clone)]
pub struct AgentTools {
    daemon: Arc<Daemon>,
}

impl AgentTools {
    pub fn new(config: Config) -> Result<AgentTools, Error> {
        Ok(AgentTools {
            daemon: Arc::new(Daemon::new(config)?),
        })
    }
}

/// Serves MCP on stdin/stdout until the client goes away.
pub async fn serve_stdio(config: Config) -> Result<(), Error> {
    let service = AgentTools::new(config)?
        .serve(rmcp::transport::io::stdio())
        .await
        .map_err(|e| Error::Mcp(format!("the handshake failed: {e}")))?;
    service
        .waiting()
        .await
        .map_err(|e| Error::Mcp(e.to_string()))?;
    Ok(())
}

/// The text a model is shown for a tool's JSON result: a string as it is, else JSON.
fn result_text(result: &Value) -> String {
    match result {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl ServerHandler for AgentTools {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_instructions(
                "The tools of this jucode agent: messages to other agents, timers, its brief, \
                 questions to the user and reports.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let defs = self
            .daemon
            .tools()
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let tools = defs
            .into_iter()
            .map(|d| {
                let schema = match d.input_schema {
                    Value::Object(o) => o,
                    _ => serde_json::Map::from_iter([("type".to_string(), "object".into())]),
                };
                Tool::new(d.name, d.description, Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let result = match self.daemon.call(&request.name, args).await {
            Ok(ToolAnswer::Ok(value)) => {
                CallToolResult::success(vec![ContentBlock::text(result_text(&value))])
            }
            Ok(ToolAnswer::Failed(text)) => CallToolResult::error(vec![ContentBlock::text(text)]),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
        };
        Ok(result.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn both_variables_are_needed() {
        let both = Config::from_env(vars(&[
            (ENV_URL, "http://127.0.0.1:1"),
            (ENV_CAPABILITY, "c"),
            ("OTHER", "x"),
        ]));
        assert!(matches!(both, Ok(c) if c.url == "http://127.0.0.1:1" && c.capability == "c"));
        assert!(matches!(
            Config::from_env(vars(&[(ENV_URL, "http://127.0.0.1:1")])),
            Err(Error::Missing(ENV_CAPABILITY))
        ));
        assert!(matches!(
            Config::from_env(vars(&[(ENV_URL, ""), (ENV_CAPABILITY, "c")])),
            Err(Error::Missing(ENV_URL))
        ));
    }

    #[test]
    fn the_capability_is_never_printed() {
        let config = Config {
            url: "http://127.0.0.1:1".into(),
            capability: "s3cret".into(),
        };
        assert!(!format!("{config:?}").contains("s3cret"));
    }

    #[test]
    fn results_are_shown_as_text() {
        assert_eq!(result_text(&json!("done")), "done");
        assert_eq!(result_text(&json!({"id": "r-1"})), r#"{"id":"r-1"}"#);
    }
}
