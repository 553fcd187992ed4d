use std::path::PathBuf;

/// Errors of the MCP client. Op errors carry the exact strings clients expect.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error(transparent)]
    Store(#[from] jucode_store::StoreError),
    /// A malformed `mcp_*` op (the message is what the client sees).
    #[error("{0}")]
    Op(String),
    #[error("invalid MCP server {name}: {message}")]
    InvalidServer { name: String, message: String },
    #[error("unknown MCP tool: {0}")]
    UnknownTool(String),
    #[error("MCP server {server} is not connected ({state})")]
    NotConnected { server: String, state: String },
    #[error("MCP server {server} did not answer within {seconds} s")]
    Timeout { server: String, seconds: u64 },
    #[error("MCP server {server}: {message}")]
    Call { server: String, message: String },
}
