//! Revoke → closed: a paired device connected over WebSocket, the desktop revokes it, and the
//! time from sending `device_revoke` to the device seeing its connection end is taken. Each
//! sample pairs a new device (a fresh code, `POST /api/pair`), so every one is a first revoke.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use jucode_testsupport::{Client, http};
use serde_json::json;

use crate::daemon::{Bins, Daemon, Homes};

/// Goal: a revoked device's connections are closed within this (issue 18).
pub const GOAL: Duration = Duration::from_millis(100);

pub struct Outcome {
    pub samples: usize,
    pub p50: Duration,
    pub max: Duration,
}

#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
pub async fn run(bins: &Bins, samples: usize) -> Result<Outcome> {
    let tmp = tempfile::Builder::new()
        .prefix("jucode-revoke-")
        .tempdir()?;
    let root = std::fs::canonicalize(tmp.path())?;
    let homes = Homes::under(&root);
    std::fs::create_dir_all(&homes.home)?;
    let mut daemon = Daemon::start(bins, &homes).await?;
    let outcome = async {
        let url = |token: &str| format!("ws://{}/?token={token}", daemon.addr);
        let mut desk = Client::connect_and_greet(&url(&daemon.token)).await?;
        let mut times = Vec::with_capacity(samples);
        for i in 0..samples {
            let pairing = desk.request(json!({"op": "pair_start"})).await?;
            let code = pairing["code"]
                .as_str()
                .context("pair_start gave no code")?;
            let body = json!({"code": code, "name": format!("phone {i}")}).to_string();
            let paired = http(daemon.addr, "POST", "/api/pair", Some(body.as_bytes())).await?;
            if paired.status != 200 {
                bail!("pairing answered {}", paired.status);
            }
            let paired = paired.json()?;
            let token = paired["token"].as_str().context("no token")?;
            let device = paired["device"].as_str().context("no device")?.to_string();
            let mut phone = Client::connect_and_greet(&url(token)).await?;
            // The phone reads until its connection ends, and says when.
            let watcher = tokio::spawn(async move {
                while phone.recv().await.is_ok() {}
                Instant::now()
            });
            let sent = Instant::now();
            let reply = desk
                .request(json!({"op": "device_revoke", "device": device}))
                .await?;
            if reply["type"] != "device_revoked" {
                bail!("device_revoke answered {reply}");
            }
            let closed = tokio::time::timeout(Duration::from_secs(10), watcher)
                .await
                .context("the revoked device stayed connected")??;
            times.push(closed.saturating_duration_since(sent));
        }
        times.sort();
        Ok::<_, anyhow::Error>(Outcome {
            samples,
            p50: times.get(times.len() / 2).copied().unwrap_or_default(),
            max: times.last().copied().unwrap_or_default(),
        })
    }
    .await;
    let _ = daemon.stop().await;
    outcome
}
