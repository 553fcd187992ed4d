//! The stdio MCP bridge jcode spawns as its `cotal` server (`mcp-bridge`).
//! It holds no broker credential: it lists the tools and relays each call to
//! the seat over the owner-only relay socket with the per-launch token.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InitializeResult,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};

use crate::relay::{self, ENV_CONFIG, ENV_SOCKET, ENV_TOKEN};
use crate::tools::{self, ToolGate};
use crate::{Error, Result};

/// The bridge's state: where the seat is and which tools it exposes.
#[derive(Clone)]
pub struct Bridge {
    socket: PathBuf,
    token: String,
    gate: ToolGate,
}

impl Bridge {
    /// Read the three variables the bridge is given (nothing else of the launch).
    pub fn from_env(vars: impl IntoIterator<Item = (String, String)>) -> Result<Bridge> {
        let mut socket = None;
        let mut token = None;
        let mut config = None;
        for (k, v) in vars {
            match k.as_str() {
                ENV_SOCKET => socket = Some(PathBuf::from(v)),
                ENV_TOKEN => token = Some(v),
                ENV_CONFIG => config = Some(v),
                _ => {}
            }
        }
        let (Some(socket), Some(token), Some(config)) = (socket, token, config) else {
            return Err(Error::Relay(format!(
                "mcp-bridge needs {ENV_SOCKET}, {ENV_TOKEN} and {ENV_CONFIG}"
            )));
        };
        let gate: ToolGate = serde_json::from_str(&config)
            .map_err(|e| Error::Relay(format!("{ENV_CONFIG} is not valid: {e}")))?;
        Ok(Bridge {
            socket,
            token,
            gate,
        })
    }

    fn tools(&self) -> Vec<Tool> {
        tools::SPECS
            .iter()
            .filter(|s| self.gate.allows(s.name))
            .map(|s| Tool::new(s.name, s.description, Arc::new(s.schema(true))))
            .collect()
    }

    /// Serve MCP on stdin/stdout until the client goes away.
    pub async fn serve_stdio(self) -> Result<()> {
        let service = self
            .serve(rmcp::transport::io::stdio())
            .await
            .map_err(|e| Error::Relay(format!("MCP handshake failed: {e}")))?;
        service
            .waiting()
            .await
            .map_err(|e| Error::Relay(format!("MCP service failed: {e}")))?;
        Ok(())
    }
}

fn text_result(text: String, is_error: bool) -> CallToolResult {
    let content = vec![ContentBlock::text(text)];
    if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_instructions(format!(
                "Cotal mesh tools for {} in space {}.",
                self.gate.name, self.gate.space
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let Some(spec) = tools::spec(&name).filter(|_| self.gate.allows(&name)) else {
            return Ok(text_result(format!("unknown tool {name}"), true).into());
        };
        let args = match spec.validate(request.arguments.unwrap_or_default()) {
            Ok(a) => a,
            Err(e) => return Ok(text_result(e, true).into()),
        };
        let res = match relay::call(&self.socket, &self.token, &name, &args).await {
            Ok(r) => text_result(r.text, r.is_error),
            Err(e) => text_result(e, true),
        };
        Ok(res.into())
    }
}
