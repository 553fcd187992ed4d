//! The daemon's front end: one TCP port that answers plain HTTP (the remote page, pairing) and
//! WebSocket clients of the daemon protocol, plus the loopback-only endpoint the agent tools'
//! MCP server calls (`agent`).
//!
//! Only this crate knows HTTP and WebSocket framing: it authenticates a connection, hands each
//! text frame to [`jucode_hub::Hub::handle`] and writes what the hub queues back. Start at
//! [`Server::bind`] and [`Server::serve`]; [`http`] has the plain-HTTP routes and [`ws`] the
//! WebSocket loop.

mod agent;
pub mod billing;
pub mod gateway;
pub mod http;
pub mod skills;
pub mod title_model;
pub mod ws;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use jucode_hub::{Hub, HubConfig, HubError};
use tokio::net::TcpListener;

/// How long a client may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// What the front end needs.
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// The remote page's files, if any.
    pub web: Option<PathBuf>,
    pub hub: HubConfig,
    /// How long one write to a WebSocket client may stall before its connection is reset
    /// ([`ws::WRITE_TIMEOUT`] in the daemon; tests make it short).
    pub write_timeout: Duration,
    /// How often each WebSocket client is pinged; one silent for [`ws::KEEPALIVE_MISSES`]
    /// intervals is reset ([`ws::KEEPALIVE`] by default).
    pub keepalive: Duration,
}

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Hub(#[from] HubError),
    #[error("could not listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("HOME is not set")]
    NoHome,
    #[error("accepting connections failed: {0}")]
    Accept(std::io::Error),
}

/// State every connection shares.
pub(crate) struct Shared {
    pub(crate) hub: Arc<Hub>,
    pub(crate) web: Option<PathBuf>,
    pub(crate) write_timeout: Duration,
    pub(crate) keepalive: Duration,
    /// One clone per open WebSocket connection (its strong count tells how many are open).
    pub(crate) live: Arc<()>,
}

/// A bound, not yet serving daemon.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl Server {
    /// Binds the port and opens the hub (state directory, logs). The port comes first: the
    /// hub hands agent sessions' MCP servers the URL it listens on.
    pub async fn bind(config: ServerConfig) -> Result<Server, ServerError> {
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| ServerError::Bind {
                    addr: config.listen,
                    source,
                })?;
        let mut hub = config.hub;
        if hub.agent_mcp.program.is_some()
            && hub.agent_mcp.url.is_none()
            && let Ok(addr) = listener.local_addr()
        {
            hub.agent_mcp.url = Some(agent::url_for(addr));
        }
        let hub = Hub::open(hub)?;
        // Message retries and the items' due work run from here on.
        hub.start_background();
        Ok(Server {
            listener,
            shared: Arc::new(Shared {
                hub,
                web: config.web,
                write_timeout: config.write_timeout,
                keepalive: config.keepalive,
                live: Arc::new(()),
            }),
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// The hub, for hosts that need it (tests, admin commands).
    pub fn hub(&self) -> Arc<Hub> {
        self.shared.hub.clone()
    }

    /// Serves until `shutdown` completes or the hub asks to exit (`restart_when_idle`), then
    /// stops every engine.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), ServerError> {
        tokio::pin!(shutdown);
        let hub = self.shared.hub.clone();
        let exit = hub.exit_requested();
        tokio::pin!(exit);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                _ = &mut exit => {
                    tracing::info!("restart_when_idle: no session is in a turn; exiting");
                    break;
                }
                accepted = self.listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(pair) => pair,
                        Err(e) if is_transient(&e) => {
                            // Out of file descriptors and similar: back off instead of spinning.
                            tracing::warn!("accept: {e}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                        Err(e) => return Err(ServerError::Accept(e)),
                    };
                    let _ = stream.set_nodelay(true);
                    let shared = self.shared.clone();
                    tokio::spawn(async move {
                        // hyper's header timer starts with the first byte; a socket that sends
                        // nothing at all is closed here.
                        if tokio::time::timeout(HEADER_TIMEOUT, stream.readable()).await.is_err() {
                            return;
                        }
                        let Ok(local) = stream.local_addr() else { return };
                        let ends = http::Ends { peer, local };
                        let service =
                            service_fn(move |req| http::route(req, shared.clone(), ends));
                        let conn = http1::Builder::new()
                            .timer(TokioTimer::new())
                            .header_read_timeout(HEADER_TIMEOUT)
                            .serve_connection(TokioIo::new(stream), service)
                            .with_upgrades();
                        if let Err(e) = conn.await {
                            tracing::debug!("connection: {e}");
                        }
                    });
                }
            }
        }
        self.shared.hub.shutdown().await;
        // Every client's queue is written out (a `daemon_restarting` included), then closed
        // with "the daemon is stopping"; a peer that does not read is not waited for long.
        self.shared.hub.disconnect_all();
        let live = self.shared.live.clone();
        let _ = tokio::time::timeout(CLOSE_ALL, async move {
            while Arc::strong_count(&live) > 2 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        Ok(())
    }
}

/// How long stopping waits for open connections to take their last frames and close.
const CLOSE_ALL: Duration = Duration::from_secs(2);

/// The daemon as its binary runs it: options as the command line gives them.
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    pub listen: SocketAddr,
    /// `--web`; `None` serves `web/` next to the binary when it exists.
    pub web: Option<PathBuf>,
    /// The relay URL, or `None` with `--no-relay`.
    pub relay: Option<String>,
    /// The jucode home; `None` is `~/.jucode`.
    pub home: Option<PathBuf>,
    /// A serve-v2 program to run as the `jucode` engine.
    pub serve_bin: Option<PathBuf>,
    /// The version `hello` reports.
    pub version: String,
    /// Where the hub reads time: the system's clocks, or in a debug build a test's override.
    pub clock: jucode_clock::SharedClock,
    /// `--keepalive`: how often each WebSocket client is pinged.
    pub keepalive: Duration,
}

/// Runs the daemon until `shutdown` completes. `on_ready` gets the bound address and the token
/// file's path once clients can connect.
pub async fn run(
    options: DaemonOptions,
    on_ready: impl FnOnce(SocketAddr, &std::path::Path),
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    let user_home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .ok_or(ServerError::NoHome)?;
    let home = options.home.unwrap_or_else(|| user_home.join(".jucode"));
    let web = options.web.or_else(|| {
        let exe = std::env::current_exe().ok()?;
        let dir = exe.parent()?.join("web");
        dir.is_dir().then_some(dir)
    });
    let mut engines: std::collections::HashMap<String, Arc<dyn jucode_engine::EngineFactory>> =
        Default::default();
    if let Some(program) = options.serve_bin {
        engines.insert(
            "jucode".into(),
            Arc::new(jucode_engine::process::ServeProcess { program }),
        );
    } else {
        engines.insert(
            "jucode".into(),
            Arc::new(jucode_agent::JucodeEngine::new(
                home.clone(),
                user_home.clone(),
            )),
        );
    }
    let account = billing::load_account(&home);
    let adapters = jucode_adapters::AdapterConfig {
        jucode_home: home.clone(),
        user_home: user_home.clone(),
        gateway: account.as_ref().map(|a| gateway::endpoint(&home, a)),
    };
    engines.insert(
        "claude".into(),
        Arc::new(jucode_adapters::claude::ClaudeEngine::new(adapters.clone())),
    );
    engines.insert(
        "codex".into(),
        Arc::new(jucode_adapters::codex::CodexEngine::new(adapters.clone())),
    );
    engines.insert(
        "acp".into(),
        Arc::new(jucode_adapters::acp::AcpEngine::new(adapters)),
    );
    let relay = options.relay.clone();
    let gateway_home = home.clone();
    let online = jucode_hub::Online {
        gateway: account.as_ref().and_then(|a| {
            gateway::GatewayGroups::new(&gateway_home, a)
                .map_err(|e| tracing::error!("gateway client: {e}"))
                .ok()
                .map(|g| g as Arc<dyn jucode_hub::Gateway>)
        }),
        skills: skills::SkillSources::new(gateway_home.clone(), account.clone())
            .map_err(|e| tracing::error!("skill sources' HTTP client: {e}"))
            .ok()
            .map(|s| Arc::new(s) as Arc<dyn jucode_hub::Skills>),
        title_model: Some(Arc::new(title_model::AgentTitleModel::new(&home))),
    };
    let version = options.version.clone();
    let server = Server::bind(ServerConfig {
        listen: options.listen,
        web,
        hub: HubConfig {
            home,
            user_home,
            version: options.version,
            relay_url: options.relay,
            engines,
            clock: options.clock,
            // This binary's own `agent-mcp` subcommand; the URL is filled in once bound.
            agent_mcp: jucode_hub::AgentMcp {
                program: std::env::current_exe().ok(),
                url: None,
            },
            online,
            billing: account.and_then(|account| {
                billing::GatewayBilling::new(account)
                    .map_err(|e| tracing::error!("gateway billing client: {e}"))
                    .ok()
                    .map(|b| b as Arc<dyn jucode_hub::Billing>)
            }),
        },
        write_timeout: ws::WRITE_TIMEOUT,
        keepalive: options.keepalive,
    })
    .await?;
    // With --no-relay there is no relay task at all; otherwise it follows the relay setting.
    if let Some(url) = relay {
        jucode_relay_host::start(server.hub(), url, version);
    }
    let addr = server.local_addr().unwrap_or(options.listen);
    on_ready(addr, &server.hub().token_path());
    server.serve(shutdown).await
}

fn is_transient(e: &std::io::Error) -> bool {
    !matches!(
        e.kind(),
        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::PermissionDenied
    )
}
