//! `jucode-daemon`: parses arguments and runs the daemon ([`jucode_server::run`]).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use jucode_server::DaemonOptions;

/// The hosted relay, used when the relay is turned on and no --relay is given.
const DEFAULT_RELAY: &str = "wss://app.jucode.net/relay/v1";

/// Hosts many coding-agent sessions in one long-running process.
#[derive(Debug, Parser)]
#[command(name = "jucode-daemon", version)]
struct Args {
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
    #[arg(long, env = "JUCODE_HOME")]
    home: Option<PathBuf>,
    /// A program speaking the serve protocol v2 to run as the jucode engine.
    #[arg(long, env = "JUCODE_SERVE_BIN")]
    serve_bin: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let options = DaemonOptions {
        listen: args.listen,
        web: args.web,
        relay: (!args.no_relay).then_some(args.relay),
        home: args.home,
        serve_bin: args.serve_bin,
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(jucode_server::run(
        options,
        |addr, token| {
            println!("jucode daemon listening on http://{addr}");
            println!("token: {}", token.display());
        },
        shutdown_signal(),
    ))?;
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers the daemon runs until killed.
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    eprintln!("shutting down");
}
