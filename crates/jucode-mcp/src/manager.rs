//! The live set of MCP connections of one session.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Map, Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::McpError;
use crate::config::{McpServerConfig, Transport, update_servers};
use crate::names::assign_names;

/// Connect and call timeout when a server sets none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Lines of a stdio server's stderr kept to explain a failed start.
const STDERR_TAIL_LINES: usize = 20;

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// Model-facing: `mcp__<server>__<tool>`, `[A-Za-z0-9_-]`, at most 64 characters.
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// What a tool call returned, flattened to text for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCallResult {
    pub text: String,
    pub is_error: bool,
}

/// MCP servers of one session: connections run in background tasks; the state is read
/// synchronously for events and the tool list.
pub struct McpManager {
    inner: Arc<Inner>,
}

struct Inner {
    config_path: PathBuf,
    state: Mutex<State>,
    version: watch::Sender<u64>,
    /// Parent of every connection's token: cancelled on shutdown and on drop.
    root: CancellationToken,
}

#[derive(Default)]
struct State {
    servers: Vec<Entry>,
    /// Increases with each connection attempt, so a stale task never overwrites a newer one.
    next_generation: u64,
    shut_down: bool,
}

struct Entry {
    config: McpServerConfig,
    status: Status,
    tools: Vec<rmcp::model::Tool>,
    peer: Option<Peer<RoleClient>>,
    generation: u64,
    cancel: Option<CancellationToken>,
    task: Option<JoinHandle<()>>,
}

#[derive(Debug, Clone, PartialEq)]
enum Status {
    Connecting,
    Connected,
    Failed(String),
    Disabled,
}

impl Status {
    fn as_str(&self) -> &'static str {
        match self {
            Status::Connecting => "connecting",
            Status::Connected => "connected",
            Status::Failed(_) => "failed",
            Status::Disabled => "disabled",
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Connection tasks hold only a Weak; cancelling lets them close their servers.
        self.root.cancel();
    }
}

impl McpManager {
    /// Connects the enabled servers in the background; returns at once.
    pub async fn start(config_path: PathBuf, servers: Vec<McpServerConfig>) -> McpManager {
        let (version, _) = watch::channel(0);
        let inner = Arc::new(Inner {
            config_path,
            state: Mutex::new(State::default()),
            version,
            root: CancellationToken::new(),
        });
        {
            let mut state = lock(&inner.state);
            for config in servers {
                if state.servers.iter().any(|e| e.config.name == config.name) {
                    tracing::warn!(server = %config.name, "duplicate MCP server name; the first one is kept");
                    continue;
                }
                let invalid = config.validate().err();
                let mut entry = Entry::new(config);
                if let Some(err) = invalid {
                    entry.status = Status::Failed(err.to_string());
                } else if entry.config.enabled {
                    connect(&inner, &mut state, &mut entry);
                }
                state.servers.push(entry);
            }
        }
        McpManager { inner }
    }

    /// `{"servers":[{name, transport, state, tools:[{name, description}], error?}]}` (tool
    /// names as the server gives them).
    pub fn servers_event(&self) -> Value {
        let state = lock(&self.inner.state);
        let servers: Vec<Value> = state
            .servers
            .iter()
            .map(|e| {
                let tools: Vec<Value> = e
                    .tools
                    .iter()
                    .map(|t| {
                        json!({
                            "name": t.name,
                            "description": t.description.as_deref().unwrap_or(""),
                        })
                    })
                    .collect();
                let mut server = json!({
                    "name": e.config.name,
                    "transport": e.config.transport.as_str(),
                    "state": e.status.as_str(),
                    "tools": tools,
                });
                if let (Status::Failed(error), Some(obj)) = (&e.status, server.as_object_mut()) {
                    obj.insert("error".to_string(), Value::String(error.clone()));
                }
                server
            })
            .collect();
        json!({ "servers": servers })
    }

    /// Tools of the connected servers, with model-facing names.
    pub fn tools(&self) -> Vec<McpTool> {
        let state = lock(&self.inner.state);
        let listed = listed_tools(&state);
        let names = assign_names(
            &listed
                .iter()
                .map(|(e, t)| (e.config.name.as_str(), t.name.as_ref()))
                .collect::<Vec<_>>(),
        );
        listed
            .iter()
            .zip(names)
            .map(|((_, t), name)| McpTool {
                name,
                description: t.description.as_deref().unwrap_or("").to_string(),
                input_schema: Value::Object((*t.input_schema).clone()),
            })
            .collect()
    }

    /// Calls a tool by its model-facing name, within the server's timeout.
    pub async fn call(&self, name: &str, arguments: Value) -> Result<McpCallResult, McpError> {
        let arguments = match arguments {
            Value::Object(map) => Some(map),
            Value::Null => None,
            _ => {
                return Err(McpError::Call {
                    server: String::new(),
                    message: format!("arguments of {name} must be a JSON object"),
                });
            }
        };
        let (server, tool, peer, timeout) = {
            let state = lock(&self.inner.state);
            let listed = listed_tools(&state);
            let names = assign_names(
                &listed
                    .iter()
                    .map(|(e, t)| (e.config.name.as_str(), t.name.as_ref()))
                    .collect::<Vec<_>>(),
            );
            let Some(((entry, tool), _)) = listed.iter().zip(&names).find(|(_, n)| *n == name)
            else {
                return Err(McpError::UnknownTool(name.to_string()));
            };
            let Some(peer) = entry.peer.clone() else {
                return Err(McpError::NotConnected {
                    server: entry.config.name.clone(),
                    state: entry.status.as_str().to_string(),
                });
            };
            (
                entry.config.name.clone(),
                tool.name.to_string(),
                peer,
                timeout_of(&entry.config),
            )
        };
        let mut params = CallToolRequestParams::new(tool);
        params.arguments = arguments;
        let result = match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Err(_) => {
                return Err(McpError::Timeout {
                    server,
                    seconds: timeout.as_secs(),
                });
            }
            Ok(Err(err)) => {
                return Err(McpError::Call {
                    server,
                    message: err.to_string(),
                });
            }
            Ok(Ok(result)) => result,
        };
        let mut parts: Vec<String> = result.content.iter().filter_map(content_text).collect();
        if parts.is_empty()
            && let Some(structured) = &result.structured_content
        {
            parts.push(structured.to_string());
        }
        Ok(McpCallResult {
            text: parts.join("\n"),
            is_error: result.is_error.unwrap_or(false),
        })
    }

    /// Applies `mcp_set {server}`, `mcp_remove {name}` or `mcp_toggle {name, enabled}`:
    /// persists the change to config.json, then reconnects as needed.
    pub async fn apply(&self, op: &Map<String, Value>) -> Result<(), McpError> {
        let kind = op.get("op").and_then(Value::as_str).unwrap_or("");
        match kind {
            "mcp_set" => {
                let server = match op.get("server") {
                    Some(v @ Value::Object(_)) => {
                        serde_json::from_value::<McpServerConfig>(v.clone()).map_err(|e| {
                            McpError::Op(format!("mcp_set requires a server object: {e}"))
                        })?
                    }
                    _ => return Err(McpError::Op("mcp_set requires a server object".to_string())),
                };
                server.validate()?;
                let saved = server.clone();
                update_servers(&self.inner.config_path, move |list| {
                    match list.iter_mut().find(|s| s.name == saved.name) {
                        Some(existing) => *existing = saved,
                        None => list.push(saved),
                    }
                    Ok(())
                })?;
                let old_task = {
                    let mut state = lock(&self.inner.state);
                    let inner = &self.inner;
                    let pos = state
                        .servers
                        .iter()
                        .position(|e| e.config.name == server.name);
                    let mut entry = Entry::new(server);
                    if entry.config.enabled {
                        connect(inner, &mut state, &mut entry);
                    }
                    match pos {
                        Some(i) => {
                            let mut old = std::mem::replace(&mut state.servers[i], entry);
                            old.stop()
                        }
                        None => {
                            state.servers.push(entry);
                            None
                        }
                    }
                };
                self.bump();
                join(old_task).await;
                Ok(())
            }
            "mcp_remove" => {
                let name = match op.get("name").and_then(Value::as_str) {
                    Some(n) if !n.is_empty() => n.to_string(),
                    _ => return Err(McpError::Op("mcp_remove requires name".to_string())),
                };
                let target = name.clone();
                update_servers(&self.inner.config_path, move |list| {
                    list.retain(|s| s.name != target);
                    Ok(())
                })?;
                let old_task = {
                    let mut state = lock(&self.inner.state);
                    let pos = state.servers.iter().position(|e| e.config.name == name);
                    pos.and_then(|i| state.servers.remove(i).stop())
                };
                self.bump();
                join(old_task).await;
                Ok(())
            }
            "mcp_toggle" => {
                let (name, enabled) = match (
                    op.get("name").and_then(Value::as_str),
                    op.get("enabled").and_then(Value::as_bool),
                ) {
                    (Some(n), Some(e)) if !n.is_empty() => (n.to_string(), e),
                    _ => {
                        return Err(McpError::Op(
                            "mcp_toggle requires name and enabled".to_string(),
                        ));
                    }
                };
                let known = lock(&self.inner.state)
                    .servers
                    .iter()
                    .find(|e| e.config.name == name)
                    .map(|e| e.config.clone());
                let Some(mut saved) = known else {
                    return Err(McpError::Op(format!("unknown MCP server: {name}")));
                };
                saved.enabled = enabled;
                update_servers(&self.inner.config_path, move |list| {
                    match list.iter_mut().find(|s| s.name == saved.name) {
                        Some(s) => s.enabled = enabled,
                        // Known here but not in the file (another writer removed it): keep it.
                        None => list.push(saved),
                    }
                    Ok(())
                })?;
                let old_task = {
                    let mut state = lock(&self.inner.state);
                    let inner = &self.inner;
                    let Some(i) = state.servers.iter().position(|e| e.config.name == name) else {
                        return Ok(());
                    };
                    let status = state.servers[i].status.clone();
                    match (enabled, status) {
                        // Already up or on its way: keep the connection.
                        (true, Status::Connected | Status::Connecting) => {
                            state.servers[i].config.enabled = true;
                            None
                        }
                        (true, Status::Failed(_) | Status::Disabled) => {
                            let old = state.servers[i].stop();
                            let mut config = state.servers[i].config.clone();
                            config.enabled = true;
                            let mut fresh = Entry::new(config);
                            connect(inner, &mut state, &mut fresh);
                            state.servers[i] = fresh;
                            old
                        }
                        (false, _) => {
                            let entry = &mut state.servers[i];
                            let old = entry.stop();
                            entry.config.enabled = false;
                            entry.status = Status::Disabled;
                            old
                        }
                    }
                };
                self.bump();
                join(old_task).await;
                Ok(())
            }
            other => Err(McpError::Op(format!("not an MCP op: {other}"))),
        }
    }

    /// Bumps whenever `servers_event` changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.version.subscribe()
    }

    /// Closes every connection (stdio servers are stopped) and waits for them.
    pub async fn shutdown(&self) {
        let tasks: Vec<JoinHandle<()>> = {
            let mut state = lock(&self.inner.state);
            state.shut_down = true;
            state.servers.iter_mut().filter_map(Entry::stop).collect()
        };
        self.inner.root.cancel();
        for task in tasks {
            join(Some(task)).await;
        }
    }

    fn bump(&self) {
        self.inner.version.send_modify(|v| *v += 1);
    }
}

impl Entry {
    fn new(config: McpServerConfig) -> Entry {
        let status = if config.enabled {
            Status::Connecting
        } else {
            Status::Disabled
        };
        Entry {
            config,
            status,
            tools: Vec::new(),
            peer: None,
            generation: 0,
            cancel: None,
            task: None,
        }
    }

    /// Cancels the connection; the returned task ends once the server is closed.
    fn stop(&mut self) -> Option<JoinHandle<()>> {
        if let Some(cancel) = self.cancel.take() {
            cancel.cancel();
        }
        self.peer = None;
        self.tools.clear();
        self.generation = 0;
        self.task.take()
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic elsewhere must not take the tool list down with it.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn join(task: Option<JoinHandle<()>>) {
    if let Some(task) = task
        && let Err(err) = task.await
        && err.is_panic()
    {
        tracing::warn!("an MCP connection task panicked");
    }
}

fn timeout_of(config: &McpServerConfig) -> Duration {
    config
        .timeout_seconds
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT)
}

fn listed_tools(state: &State) -> Vec<(&Entry, &rmcp::model::Tool)> {
    state
        .servers
        .iter()
        .filter(|e| e.status == Status::Connected)
        .flat_map(|e| e.tools.iter().map(move |t| (e, t)))
        .collect()
}

/// Text of one content block, read through its JSON form so new block kinds degrade to a
/// short note instead of failing the call.
fn content_text(block: &rmcp::model::ContentBlock) -> Option<String> {
    let value = serde_json::to_value(block).ok()?;
    let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
    let field = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_string);
    match kind {
        "text" => field("text"),
        "image" | "audio" => Some(format!(
            "[{kind}: {}]",
            field("mimeType").unwrap_or_else(|| "unknown type".to_string())
        )),
        "resource" => {
            let resource = value.get("resource")?;
            resource
                .get("text")
                .and_then(Value::as_str)
                .or_else(|| resource.get("uri").and_then(Value::as_str))
                .map(str::to_string)
        }
        "resource_link" => field("uri").map(|uri| format!("[resource: {uri}]")),
        _ => Some(value.to_string()),
    }
}

/// Starts a connection task for `entry` (not yet in the list or being replaced).
fn connect(inner: &Arc<Inner>, state: &mut State, entry: &mut Entry) {
    if state.shut_down {
        entry.status = Status::Failed("the session is shutting down".to_string());
        return;
    }
    state.next_generation += 1;
    let generation = state.next_generation;
    let cancel = inner.root.child_token();
    entry.generation = generation;
    entry.status = Status::Connecting;
    entry.cancel = Some(cancel.clone());
    let task = tokio::spawn(run_connection(
        Arc::downgrade(inner),
        entry.config.clone(),
        generation,
        cancel,
    ));
    entry.task = Some(task);
}

/// Updates the entry of `name` if it still belongs to `generation`, and announces it.
fn update(inner: &Weak<Inner>, name: &str, generation: u64, change: impl FnOnce(&mut Entry)) {
    let Some(inner) = inner.upgrade() else {
        return;
    };
    let changed = {
        let mut state = lock(&inner.state);
        match state
            .servers
            .iter_mut()
            .find(|e| e.config.name == name && e.generation == generation)
        {
            Some(entry) => {
                change(entry);
                true
            }
            None => false,
        }
    };
    if changed {
        inner.version.send_modify(|v| *v += 1);
    }
}

async fn run_connection(
    inner: Weak<Inner>,
    config: McpServerConfig,
    generation: u64,
    cancel: CancellationToken,
) {
    let name = config.name.clone();
    let timeout = timeout_of(&config);
    let started = tokio::select! {
        _ = cancel.cancelled() => return,
        r = tokio::time::timeout(timeout, open(&config)) => match r {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {} s", timeout.as_secs())),
        },
    };
    let (service, stderr_tail) = match started {
        Ok(ok) => ok,
        Err(message) => {
            update(&inner, &name, generation, |e| {
                e.status = Status::Failed(message)
            });
            return;
        }
    };
    let listed = tokio::select! {
        _ = cancel.cancelled() => None,
        r = tokio::time::timeout(timeout, service.peer().list_all_tools()) => Some(r),
    };
    let tools = match listed {
        None => {
            close(service).await;
            return;
        }
        Some(Ok(Ok(tools))) => tools,
        Some(Ok(Err(err))) => {
            let message = format!("listing tools failed: {err}");
            update(&inner, &name, generation, |e| {
                e.status = Status::Failed(message)
            });
            close(service).await;
            return;
        }
        Some(Err(_)) => {
            let message = format!("listing tools took over {} s", timeout.as_secs());
            update(&inner, &name, generation, |e| {
                e.status = Status::Failed(message)
            });
            close(service).await;
            return;
        }
    };
    let peer = service.peer().clone();
    update(&inner, &name, generation, |e| {
        e.status = Status::Connected;
        e.tools = tools;
        e.peer = Some(peer);
    });

    let service_cancel = service.cancellation_token();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        _ = &mut waiting => {
            let mut message = "the server closed the connection".to_string();
            if let Some(tail) = stderr_tail.as_ref().map(tail_text).filter(|t| !t.is_empty()) {
                message = format!("{message}: {tail}");
            }
            update(&inner, &name, generation, |e| {
                e.status = Status::Failed(message);
                e.peer = None;
                e.tools.clear();
            });
        }
        _ = cancel.cancelled() => {
            service_cancel.cancel();
            let _ = waiting.await;
        }
    }
}

async fn close(service: RunningService<RoleClient, ClientConfig>) {
    let _ = service.cancel().await;
}

type StderrTail = Arc<Mutex<Vec<String>>>;

fn tail_text(tail: &StderrTail) -> String {
    tail.lock()
        .map(|lines| lines.join("\n"))
        .unwrap_or_default()
}

/// Spawns or connects to the server and runs the MCP handshake.
async fn open(
    config: &McpServerConfig,
) -> Result<(RunningService<RoleClient, ClientConfig>, Option<StderrTail>), String> {
    let client = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("jucode", env!("CARGO_PKG_VERSION")),
    );
    match config.transport {
        Transport::Stdio => {
            let program = config.command.as_deref().unwrap_or_default();
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(&config.args);
            // The daemon's own secrets stay out of third-party servers.
            for (key, _) in std::env::vars_os() {
                if key
                    .to_string_lossy()
                    .to_ascii_uppercase()
                    .starts_with("JUCODE_")
                {
                    cmd.env_remove(key);
                }
            }
            cmd.envs(&config.env);
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start {program}: {e}"))?;
            let tail: StderrTail = Arc::new(Mutex::new(Vec::new()));
            if let Some(stderr) = stderr {
                let tail = tail.clone();
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        if let Ok(mut t) = tail.lock() {
                            if t.len() == STDERR_TAIL_LINES {
                                t.remove(0);
                            }
                            t.push(line);
                        }
                    }
                });
            }
            match client.serve(transport).await {
                Ok(service) => Ok((service, Some(tail))),
                Err(err) => {
                    // Give the stderr reader a moment to collect the server's last words.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let text = tail_text(&tail);
                    Err(if text.is_empty() {
                        err.to_string()
                    } else {
                        format!("{err}: {text}")
                    })
                }
            }
        }
        Transport::Http => {
            let url = config.url.as_deref().unwrap_or_default();
            let mut headers = HashMap::new();
            let mut auth = None;
            for (key, value) in &config.headers {
                // rmcp adds "Bearer " itself to its auth header.
                if key.eq_ignore_ascii_case("authorization")
                    && let Some(token) = value.strip_prefix("Bearer ")
                {
                    auth = Some(token.to_string());
                    continue;
                }
                let name = reqwest::header::HeaderName::from_bytes(key.as_bytes())
                    .map_err(|_| format!("invalid header name {key:?}"))?;
                let value = reqwest::header::HeaderValue::from_str(value)
                    .map_err(|_| format!("invalid value for header {key}"))?;
                headers.insert(name, value);
            }
            let mut transport_config =
                StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
            if let Some(token) = auth {
                transport_config = transport_config.auth_header(token);
            }
            let http = http_client().map_err(|e| format!("cannot set up HTTPS: {e}"))?;
            let transport = StreamableHttpClientTransport::with_client(http, transport_config);
            let service = client.serve(transport).await.map_err(|e| e.to_string())?;
            Ok((service, None))
        }
    }
}

/// A reqwest client on rustls with the ring provider and the system's roots (reqwest's
/// rustls-no-provider build would otherwise panic without a process-wide provider).
fn http_client() -> Result<reqwest::Client, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls_platform_verifier::Verifier::new(provider.clone()).map_err(|e| e.to_string())?;
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .build()
        .map_err(|e| e.to_string())
}
