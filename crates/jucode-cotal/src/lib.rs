//! `jucode-cotal`: the mesh side of the Cotal connector for jcode.
//!
//! A seat joins a Cotal mesh (NATS + JetStream) as one lateral peer: it reads
//! the launch contract ([`config`]), connects ([`mesh`]), publishes presence
//! ([`presence`]), buffers peer mail in a bounded [`inbox`], drives the agent
//! through the [`harness::Harness`] seam, serves the `cotal_*` tools
//! ([`tools`]) over an owner-only relay socket ([`relay`]) that the stdio MCP
//! bridge ([`bridge`]) forwards to, answers the manager's control socket
//! ([`control`]) and publishes the agent's journal as AG-UI frames
//! ([`events`]). Start reading at [`seat::run`]; a process calls [`run_process`].

pub mod argcheck;
pub mod bench;
pub mod bridge;
pub mod config;
pub mod control;
pub mod envelope;
pub mod error;
pub mod events;
pub mod harness;
pub mod inbox;
pub mod manager;
pub mod mesh;
pub mod presence;
pub mod relay;
pub mod runturn;
pub mod seat;
pub mod subject;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod tools;
pub mod util;

pub use error::{Error, Result};

/// A whole seat process: the launch contract from this process's environment,
/// SIGTERM/SIGINT (and the control socket, which [`seat::run`] serves) as the ways to stop it.
pub async fn run_process(
    no_events: bool,
    factory: &dyn seat::HarnessFactory,
    opts: seat::SeatOptions,
) -> Result<()> {
    let cfg = config::LaunchConfig::from_env(std::env::vars(), no_events)?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Error::Launch(format!("cannot watch SIGTERM: {e}")))?;
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM"),
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT"),
        }
    };
    seat::run(cfg, factory, opts, shutdown).await
}
