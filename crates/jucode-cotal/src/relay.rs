//! The tool relay: an owner-only Unix socket in a private 0700 directory,
//! guarded by a per-launch token. The stdio MCP bridge (spawned by jcode, holding
//! no broker credential) sends one line per call and reads one line back:
//! `{"token","name","args"}` → `{"result":{"text","isError"}}` or `{"error"}`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinHandle;

use crate::config::LaunchConfig;
use crate::seat::Seat;
use crate::tools::{self, ToolGate};
use crate::{Error, Result};

/// Biggest request line the host reads.
pub const MAX_REQUEST: u64 = 1 << 20;
/// Biggest reply the bridge reads.
pub const MAX_REPLY: u64 = 4 << 20;
/// How long the bridge waits for one call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The three variables the MCP child gets, and nothing else of the launch.
pub const ENV_SOCKET: &str = "COTAL_JCODE_MCP_SOCKET";
pub const ENV_TOKEN: &str = "COTAL_JCODE_MCP_TOKEN";
pub const ENV_CONFIG: &str = "COTAL_JCODE_MCP_CONFIG";

/// What jcode's `mcp.json` entry for `cotal` needs.
#[derive(Clone)]
pub struct McpLaunch {
    pub command: PathBuf,
    pub args: Vec<String>,
    pub socket: PathBuf,
    pub token: String,
    /// Scrubbed tool configuration (no servers, creds or bearer).
    pub config: String,
}

impl std::fmt::Debug for McpLaunch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpLaunch")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

impl McpLaunch {
    /// The MCP child's whole Cotal environment.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            (ENV_SOCKET.into(), self.socket.display().to_string()),
            (ENV_TOKEN.into(), self.token.clone()),
            (ENV_CONFIG.into(), self.config.clone()),
        ]
    }

    /// jcode's `mcp.json` naming only the `cotal` server.
    pub fn mcp_json(&self) -> Value {
        let env: Map<String, Value> = self
            .env()
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        json!({"mcpServers": {"cotal": {
            "command": self.command.display().to_string(),
            "args": self.args,
            "env": env,
            "shared": true,
        }}})
    }
}

#[derive(Deserialize)]
struct Request {
    token: String,
    name: String,
    #[serde(default)]
    args: Map<String, Value>,
}

/// A tool result as it crosses the relay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub text: String,
    #[serde(rename = "isError")]
    pub is_error: bool,
}

/// The host side of the relay.
pub struct RelayServer {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    token: String,
    task: JoinHandle<()>,
}

impl RelayServer {
    pub(crate) async fn start(seat: Arc<Seat>) -> Result<RelayServer> {
        // tempfile creates the directory 0700; the socket is made 0600 too.
        let dir = tempfile::Builder::new()
            .prefix("cotal-relay-")
            .tempdir()
            .map_err(|e| Error::Relay(format!("cannot create the relay directory: {e}")))?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .map_err(|e| Error::io(dir.path(), e))?;
        let socket = dir.path().join("relay.sock");
        let listener = UnixListener::bind(&socket).map_err(|e| Error::io(&socket, e))?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| Error::io(&socket, e))?;
        let token = crate::util::secret_token()?;
        let tok = token.clone();
        let task = tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let seat = seat.clone();
                        let tok = tok.clone();
                        tokio::spawn(async move { serve_one(stream, &tok, seat).await });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "relay accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Ok(RelayServer {
            _dir: dir,
            socket,
            token,
            task,
        })
    }

    pub(crate) fn launch(
        &self,
        command: Option<(PathBuf, Vec<String>)>,
        cfg: &LaunchConfig,
    ) -> Result<McpLaunch> {
        let (command, args) = match command {
            Some(c) => c,
            None => (
                std::env::current_exe()
                    .map_err(|e| Error::Relay(format!("cannot find this binary: {e}")))?,
                vec!["mcp-bridge".to_string()],
            ),
        };
        let gate = ToolGate::from_config(cfg);
        Ok(McpLaunch {
            command,
            args,
            socket: self.socket.clone(),
            token: self.token.clone(),
            config: serde_json::to_string(&gate).map_err(|e| Error::Relay(e.to_string()))?,
        })
    }

    pub(crate) fn stop(self) {
        self.task.abort();
    }
}

async fn serve_one(stream: UnixStream, token: &str, seat: Arc<Seat>) {
    let (rd, mut wr) = stream.into_split();
    let mut line = String::new();
    let mut reader = BufReader::new(rd.take(MAX_REQUEST + 1));
    let read = tokio::time::timeout(Duration::from_secs(5), reader.read_line(&mut line)).await;
    let reply = match read {
        Ok(Ok(n)) if n > 0 && (n as u64) <= MAX_REQUEST && line.ends_with('\n') => {
            match serde_json::from_str::<Request>(&line) {
                Ok(req) => {
                    if !crate::util::token_eq(&req.token, token) {
                        // A bad token gets no answer at all.
                        return;
                    }
                    let r = tools::dispatch(&seat, &req.name, req.args).await;
                    json!({"result": r})
                }
                Err(e) => json!({"error": format!("bad relay request: {e}")}),
            }
        }
        Ok(Ok(_)) => json!({"error": "relay request too large or not one line"}),
        Ok(Err(e)) => json!({"error": format!("relay read failed: {e}")}),
        Err(_) => return,
    };
    let mut out = reply.to_string();
    out.push('\n');
    let _ = wr.write_all(out.as_bytes()).await;
    let _ = wr.shutdown().await;
}

/// The bridge side: one connection per call.
pub async fn call(
    socket: &Path,
    token: &str,
    name: &str,
    args: &Map<String, Value>,
) -> std::result::Result<ToolResult, String> {
    let work = async {
        let mut stream = UnixStream::connect(socket)
            .await
            .map_err(|e| format!("the Cotal seat is not reachable: {e}"))?;
        let mut line = json!({"token": token, "name": name, "args": args}).to_string();
        line.push('\n');
        stream
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("relay write failed: {e}"))?;
        let mut buf = Vec::new();
        stream
            .take(MAX_REPLY + 1)
            .read_to_end(&mut buf)
            .await
            .map_err(|e| format!("relay read failed: {e}"))?;
        if buf.len() as u64 > MAX_REPLY {
            return Err("relay reply larger than 4 MiB".to_string());
        }
        if buf.is_empty() {
            return Err("the seat refused the call (bad relay token?)".to_string());
        }
        let v: Value = serde_json::from_slice(&buf).map_err(|e| format!("bad relay reply: {e}"))?;
        if let Some(err) = v.get("error").and_then(Value::as_str) {
            return Err(err.to_string());
        }
        serde_json::from_value::<ToolResult>(v.get("result").cloned().unwrap_or(Value::Null))
            .map_err(|e| format!("bad relay result: {e}"))
    };
    tokio::time::timeout(CALL_TIMEOUT, work)
        .await
        .map_err(|_| "the seat did not answer within 30 s".to_string())?
}
