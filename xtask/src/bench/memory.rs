//! Memory at rest: the daemon's resident set with no client and no session, and what each idle
//! hosted session adds. Sessions run the scripted engine; only the daemon's own process is
//! measured (`/proc/<pid>/status`), not the engines it spawned.

use std::time::Duration;

use anyhow::{Context, Result};
use jucode_testsupport::Client;

use crate::daemon::{Bins, Daemon, Homes};

/// Goal for an idle daemon, in bytes (issue 18: 20 MB).
pub const IDLE_GOAL: f64 = 20_000_000.0;
/// Goal for each idle hosted session, in bytes (issue 18: 50 KB).
pub const SESSION_GOAL: f64 = 50_000.0;
/// Sessions started before the baseline: the first ones pay for one-time set-up (the engine
/// registry, buffers that grow once) that is not a per-session cost.
const WARMUP: usize = 5;
/// How long the daemon settles before each reading, so start-up and session start-up work
/// has finished.
const SETTLE: Duration = Duration::from_secs(1);

pub struct Outcome {
    pub idle_kib: u64,
    pub sessions: usize,
    /// Resident bytes added per session, between the warmed-up baseline and the end.
    pub per_session: f64,
}

pub async fn run(bins: &Bins, sessions: usize) -> Result<Outcome> {
    let tmp = tempfile::Builder::new()
        .prefix("jucode-memory-")
        .tempdir()?;
    let root = std::fs::canonicalize(tmp.path())?;
    let homes = Homes::under(&root);
    let project = homes.home.join("proj");
    std::fs::create_dir_all(&project)?;
    let mut daemon = Daemon::start(bins, &homes).await?;
    let outcome = async {
        let pid = daemon.pid().context("the daemon has no pid")?;
        tokio::time::sleep(SETTLE).await;
        let idle_kib = super::timers::rss_kib(pid)?;
        let url = format!("ws://{}/?token={}", daemon.addr, daemon.token);
        let mut client = Client::connect_and_greet(&url).await?;
        for _ in 0..WARMUP {
            client.start_session(&project).await?;
        }
        tokio::time::sleep(SETTLE).await;
        let base = super::timers::rss_kib(pid)?;
        for i in 0..sessions {
            client
                .start_session(&project)
                .await
                .with_context(|| format!("starting session {}", WARMUP + i + 1))?;
        }
        tokio::time::sleep(SETTLE).await;
        let end = super::timers::rss_kib(pid)?;
        let added = end.saturating_sub(base) as f64 * 1024.0;
        Ok::<_, anyhow::Error>(Outcome {
            idle_kib,
            sessions,
            per_session: added / sessions.max(1) as f64,
        })
    }
    .await;
    let _ = daemon.stop().await;
    outcome
}
