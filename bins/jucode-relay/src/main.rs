//! `jucode-relay`: a self-hostable JuCode relay ([`jucode_relay_server`]). Put it behind a
//! TLS-terminating proxy and point daemons at `wss://<host>/relay/v1` with `--relay`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use jucode_relay_server::push::{PushConfig, load_or_create_vapid};
use jucode_relay_server::{Limits, Relay, RelayConfig};

/// Forwards end-to-end encrypted streams between a jucode daemon and its phones.
#[derive(Debug, Parser)]
#[command(name = "jucode-relay", version)]
struct Args {
    /// Address to listen on (plain HTTP and WebSocket; terminate TLS in front).
    #[arg(long, default_value = "127.0.0.1:18095")]
    listen: SocketAddr,
    /// VAPID private key file (created, mode 0600, when missing). Without it, push answers 501.
    #[arg(long, env = "JUCODE_RELAY_VAPID_KEY")]
    vapid_key: Option<PathBuf>,
    /// Contact for push services (the VAPID `sub` claim).
    #[arg(long, default_value = "mailto:admin@localhost")]
    vapid_contact: String,
    /// Also accept push endpoints starting with this prefix (a self-hosted push service).
    #[arg(long = "push-endpoint-prefix")]
    push_endpoint_prefixes: Vec<String>,
    /// Behind a TLS proxy on this machine: take client addresses from X-Forwarded-For.
    #[arg(long)]
    behind_proxy: bool,
    /// New client connections allowed per IP per minute.
    #[arg(long, default_value_t = Limits::default().connects_per_ip)]
    connects_per_ip: usize,
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
    let push = match &args.vapid_key {
        None => None,
        Some(path) => Some(PushConfig {
            vapid: load_or_create_vapid(path)?,
            contact: args.vapid_contact.clone(),
            extra_endpoints: args.push_endpoint_prefixes.clone(),
        }),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let relay = Relay::bind(RelayConfig {
            listen: args.listen,
            limits: Limits {
                connects_per_ip: args.connects_per_ip,
                ..Limits::default()
            },
            push,
            behind_proxy: args.behind_proxy,
        })
        .await?;
        let addr = relay.local_addr().unwrap_or(args.listen);
        println!("jucode-relay listening on http://{addr}/relay/v1");
        relay.serve(shutdown_signal()).await?;
        Ok(())
    })
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
