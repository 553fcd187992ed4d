//! `jucode-daemon`: parses arguments and runs the daemon ([`jucode_server::run`]), or with
//! `serve`, one session of the built-in engine over stdin/stdout ([`serve`]), or with
//! `agent-mcp`, the agent tools' stdio MCP server ([`jucode_agent_mcp`]), or with `open`, a
//! signed-in link to the remote page ([`open`]), or with `tui`, the built-in engine in a
//! terminal interface ([`tui`]).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use jucode_server::DaemonOptions;

#[cfg(debug_assertions)]
mod debug_clock;
mod open;
mod relay_admin;
mod serve;
mod service;
mod tui;

/// The hosted relay, used when the relay is turned on and no --relay is given.
const DEFAULT_RELAY: &str = "wss://app.jucode.net/relay/v1";

/// Hosts many coding-agent sessions in one long-running process.
#[derive(Debug, Parser)]
#[command(name = "jucode-daemon", version)]
struct Args {
    #[command(subcommand)]
    command: Option<Cmd>,
    /// Address to listen on (HTTP and WebSocket on one port).
    #[arg(long, default_value = "127.0.0.1:7788")]
    listen: SocketAddr,
    /// Directory of the remote web page (default: web/ next to this binary, if present).
    #[arg(long)]
    web: Option<PathBuf>,
    /// Relay to connect to when the relay is on.
    #[arg(long, default_value = DEFAULT_RELAY)]
    relay: String,
    /// Never connect to a relay, whatever the settings say.
    #[arg(long)]
    no_relay: bool,
    /// The jucode home (default ~/.jucode); state lives in its daemon/ directory.
    #[arg(long, env = "JUCODE_HOME", global = true)]
    home: Option<PathBuf>,
    /// A program speaking the serve protocol v2 to run as the jucode engine.
    #[arg(long, env = "JUCODE_SERVE_BIN")]
    serve_bin: Option<PathBuf>,
    /// Write the log to this file (rotated by size) instead of standard error.
    #[arg(long)]
    log_file: Option<PathBuf>,
    /// Seconds between pings to each WebSocket client; one that answers nothing for three
    /// intervals is disconnected. Lower it behind a proxy that closes quiet connections.
    #[arg(long, default_value_t = jucode_server::ws::KEEPALIVE.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    keepalive: u64,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run one session of the built-in jucode engine over stdin/stdout (serve protocol v2):
    /// `hello` first, then events one JSON object per line; ops are read one per line.
    Serve {
        /// The session (conversation) id; a new one by default.
        #[arg(long)]
        session: Option<String>,
        /// The directory the session works in (default: the current directory).
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// Continue the conversation saved under --session.
        #[arg(long, requires = "session")]
        resume: bool,
        /// Another directory the session may work in (repeatable).
        #[arg(long = "add-dir")]
        add_dir: Vec<PathBuf>,
    },
    /// Print (and open, when this machine has a browser) a link to the remote page that signs
    /// it in as a local client (the daemon token in the link's fragment).
    Open {
        /// Only print the link.
        #[arg(long)]
        no_browser: bool,
    },
    /// Print a link that pairs a phone through the relay (asks the daemon running at --listen).
    Pair,
    /// Turn the relay connection on or off, or show it (the running daemon's, else the setting).
    Relay {
        #[arg(value_enum)]
        action: relay_admin::RelayAction,
    },
    /// Start the daemon at login and whenever it exits: a systemd user unit on Linux, a
    /// launchd agent on macOS, with this shell's PATH and the flags given before `install`.
    Install,
    /// Stop the login service and remove it.
    Uninstall,
    /// The agent tools as a stdio MCP server, for a Claude Code or Codex agent session (the
    /// daemon starts it; it reads JUCODE_AGENT_URL and JUCODE_AGENT_CAPABILITY).
    #[command(hide = true)]
    AgentMcp,
    /// A terminal interface of the built-in jucode engine: a new conversation in the current
    /// directory (or --cwd), or the one --resume names.
    Tui {
        /// Continue this conversation (one not saved yet starts under this id).
        #[arg(long)]
        resume: Option<String>,
        /// The directory the session works in (default: the current directory).
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// Another directory the session may work in (repeatable).
        #[arg(long = "add-dir")]
        add_dir: Vec<PathBuf>,
        /// manual, auto-edit, auto or full-access.
        #[arg(long)]
        approval_mode: Option<String>,
        /// The model to use instead of config.json's.
        #[arg(long)]
        model: Option<String>,
    },
}

fn main() -> Result<()> {
    let args = Args::parse();
    // serve's stdout is the protocol: logs go to stderr, quieter by default.
    let default_filter = match args.command {
        // A log line on stderr would be drawn over the TUI's screen: its errors are shown in it.
        Some(Cmd::Tui { .. }) => "off",
        Some(_) => "warn",
        None => "info",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    match (&args.log_file, &args.command) {
        (Some(path), None) => {
            tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_ansi(false)
                .with_writer(service::log_file(path)?)
                .init();
            // Under a service nobody reads standard error: a panic goes to the log too.
            let default_hook = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                tracing::error!("panic: {info}");
                default_hook(info);
            }));
        }
        _ => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init(),
    }
    match &args.command {
        Some(Cmd::Install) => return service::install(&args),
        Some(Cmd::Uninstall) => return service::uninstall(),
        _ => {}
    }
    if let Some(Cmd::AgentMcp) = &args.command {
        let config = jucode_agent_mcp::Config::from_env(std::env::vars())?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        runtime.block_on(jucode_agent_mcp::serve_stdio(config))?;
        // The stdin reader may still wait for input: do not wait for it.
        runtime.shutdown_background();
        return Ok(());
    }
    if let Some(Cmd::Open { no_browser }) = &args.command {
        let home = match args.home.clone() {
            Some(h) => h,
            None => {
                PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?).join(".jucode")
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        return runtime.block_on(open::run(args.listen, home, *no_browser));
    }
    if let Some(Cmd::Pair | Cmd::Relay { .. }) = &args.command {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        return runtime.block_on(async {
            match args.command {
                Some(Cmd::Relay { action }) => {
                    relay_admin::relay(args.listen, args.home, action).await
                }
                _ => relay_admin::pair(args.listen, args.home).await,
            }
        });
    }
    if let Some(Cmd::Tui {
        resume,
        cwd,
        add_dir,
        approval_mode,
        model,
    }) = args.command
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        let result = runtime.block_on(tui::run(tui::TuiCmd {
            resume,
            cwd,
            extra_dirs: add_dir,
            approval_mode,
            model,
            home: args.home,
        }));
        // crossterm's input reader may still wait on the terminal: do not wait for it.
        runtime.shutdown_background();
        return result;
    }
    if let Some(Cmd::Serve {
        session,
        cwd,
        resume,
        add_dir,
    }) = args.command
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        let result = runtime.block_on(serve::run(serve::ServeArgs {
            session,
            cwd,
            resume,
            extra_dirs: add_dir,
            home: args.home,
        }));
        // The blocking stdin reader may still wait for input: do not wait for it.
        runtime.shutdown_background();
        return result;
    }
    let options = DaemonOptions {
        listen: args.listen,
        web: args.web,
        relay: (!args.no_relay).then_some(args.relay),
        home: args.home,
        serve_bin: args.serve_bin,
        version: env!("CARGO_PKG_VERSION").into(),
        clock: daemon_clock()?,
        keepalive: std::time::Duration::from_secs(args.keepalive),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(async {
        // Handlers go in before "listening" is printed: a SIGTERM right after that line must
        // still stop the engines cleanly.
        let shutdown = shutdown_signal()?;
        jucode_server::run(
            options,
            |addr, token| {
                println!("jucode daemon listening on http://{addr}");
                tracing::info!(
                    version = env!("CARGO_PKG_VERSION"),
                    "listening on http://{addr}"
                );
                println!("token: {}", token.display());
            },
            shutdown,
        )
        .await
        .map_err(anyhow::Error::from)
    });
    if let Err(e) = &result {
        // With --log-file this is where a service's failure to start can be read.
        tracing::error!("the daemon stopped: {e:#}");
    }
    result
}

/// The hub's clock: the system's. A debug build also reads the test-only override
/// (`debug_clock`); a release build has no such code, so no environment can move its time.
fn daemon_clock() -> Result<jucode_clock::SharedClock> {
    #[cfg(debug_assertions)]
    if let Some(clock) = debug_clock::from_env()? {
        return Ok(clock);
    }
    Ok(jucode_clock::SystemClock::shared())
}

/// Installs the SIGINT and SIGTERM handlers now; the future resolves on either signal.
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        eprintln!("shutting down");
        tracing::info!("shutting down on a signal");
    })
}
