//! jucode-mcp: the built-in engine's MCP client.
//!
//! Start reading at [`McpManager`] (`manager.rs`): it connects the servers listed under
//! `mcp_servers` in `~/.jucode/config.json` (stdio child processes or streamable HTTP, both via
//! `rmcp`), exposes their tools to the model under `mcp__<server>__<tool>` names (`names.rs`),
//! calls them with a per-server timeout, reports the `mcp_servers` event, and applies the
//! `mcp_set` / `mcp_remove` / `mcp_toggle` ops. `config.rs` reads and rewrites the config key.

mod config;
mod error;
mod manager;
mod names;

pub use config::{McpServerConfig, Transport, load_servers, save_servers};
pub use error::McpError;
pub use manager::{McpCallResult, McpManager, McpTool};
pub use names::model_tool_name;
