//! `session_usage` over a ledger of many turns (spread over 1,000 sessions), against a plain
//! `serde_json` parse of the same file summing the same session, in the same run. The daemon
//! folds the ledger once at start into an index by session; the reference reads it whole.

use std::io::{BufWriter, Write as _};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::daemon::{Bins, Daemon, Homes};

const SESSIONS: usize = 1_000;
const WAIT: Duration = Duration::from_secs(60);

pub struct Outcome {
    pub turns: usize,
    /// Median `session_usage` round trip.
    pub daemon: Duration,
    /// Median time to parse the ledger and sum the session.
    pub reference: Duration,
}

pub async fn run(bins: &Bins, turns: usize) -> Result<Outcome> {
    let tmp = tempfile::Builder::new().prefix("jucode-usage-").tempdir()?;
    let root = std::fs::canonicalize(tmp.path())?;
    let homes = Homes {
        home: root.join("home"),
        jucode_home: root.join("home").join(".jucode"),
        log: root.join("daemon.log"),
    };
    let dir = homes.jucode_home.join("daemon");
    std::fs::create_dir_all(&dir)?;
    let ledger = dir.join("usage.jsonl");
    let path = ledger.clone();
    tokio::task::spawn_blocking(move || seed(&path, turns)).await??;
    let want = turns / SESSIONS;

    let mut reference = Vec::new();
    for _ in 0..3 {
        let path = ledger.clone();
        let (took, n) = tokio::task::spawn_blocking(move || reference_sum(&path)).await??;
        if n != want as u64 {
            bail!("the reference counted {n} turns, not {want}");
        }
        reference.push(took);
    }

    let mut daemon = Daemon::start(bins, &homes).await?;
    let url = format!("ws://{}/?token={}", daemon.addr, daemon.token);
    let measured = measure(&url, want).await;
    let _ = daemon.stop().await;
    let daemon_runs = measured?;
    Ok(Outcome {
        turns,
        daemon: median(daemon_runs),
        reference: median(reference),
    })
}

fn seed(path: &std::path::Path, turns: usize) -> Result<()> {
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    for i in 0..turns {
        let row = json!({"session": format!("s-{}", i % SESSIONS), "turn_id": format!("t-{i}"),
            "channel_kind": "jucode", "model": "claude-sonnet-4", "input_tokens": 1200,
            "cached_input_tokens": 300, "output_tokens": 80, "reasoning_tokens": 0,
            "requests": 1, "estimated_cost_usd": 0.0045, "ended_at": 1_790_000_000_000u64 + i as u64});
        writeln!(out, "{row}")?;
    }
    out.flush()?;
    Ok(())
}

/// Parses every line as a `Value` and sums the turns of session `s-7`.
fn reference_sum(path: &std::path::Path) -> Result<(Duration, u64)> {
    let start = now();
    let text = std::fs::read_to_string(path)?;
    let mut turns = 0u64;
    let mut input = 0u64;
    for line in text.lines() {
        let v: Value = serde_json::from_str(line)?;
        if v["session"] == "s-7" {
            turns += 1;
            input += v["input_tokens"].as_u64().unwrap_or(0);
        }
    }
    std::hint::black_box(input);
    Ok((start.elapsed(), turns))
}

async fn measure(url: &str, want: usize) -> Result<Vec<Duration>> {
    let (mut ws, _) = tokio_tungstenite::connect_async(url)
        .await
        .context("WebSocket handshake")?;
    let mut runs = Vec::new();
    for i in 0..3 {
        let start = now();
        let op = json!({"op": "session_usage", "session": "s-7", "id": i});
        ws.send(Message::text(op.to_string())).await?;
        let reply = tokio::time::timeout(WAIT, async {
            while let Some(msg) = ws.next().await {
                if let Message::Text(text) = msg? {
                    let frame: Value = serde_json::from_str(text.as_str())?;
                    if frame["id"] == i {
                        return Ok(frame);
                    }
                }
            }
            bail!("the daemon closed the connection")
        })
        .await
        .context("no session_usage reply in time")??;
        runs.push(start.elapsed());
        if reply["totals"]["turns"] != want {
            bail!("session_usage answered {}", reply["totals"]);
        }
    }
    Ok(runs)
}

#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
fn now() -> Instant {
    Instant::now()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}
