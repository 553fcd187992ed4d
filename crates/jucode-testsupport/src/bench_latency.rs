//! The daemon's own streaming latency: from a model token leaving the fake model server to
//! its `assistant_delta` reaching a WebSocket client, next to the same stream read by the
//! engine's model client directly (the daemon bypassed).
//!
//! Both timestamps are taken in this process (the fake model server and the client run here),
//! so they share one monotonic clock. Tokens are spaced `gap` apart so that the measure is the
//! latency of one token, not a queue draining.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use jucode_agent::config::Config;
use jucode_agent::model::{Delta, Message, ModelClient, NO_IMAGES, Request};
use serde_json::json;

use crate::Daemon;
use crate::fake_model::FakeModel;

/// Two percentiles of a set of latencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Percentiles {
    pub p50: Duration,
    pub p99: Duration,
}

/// What [`bench_latency`] measured over `tokens` tokens per path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyReport {
    pub tokens: usize,
    /// Fake model → daemon (engine, hub, WebSocket) → client's `assistant_delta`.
    pub daemon: Percentiles,
    /// Fake model → the engine's model client in this process, no daemon.
    pub direct: Percentiles,
}

/// Runs both paths with `tokens` tokens sent `gap` apart. Needs the `jucode-daemon` binary
/// built (`cargo build -p jucode-daemon`).
pub async fn bench_latency(tokens: usize, gap: Duration) -> Result<LatencyReport> {
    if tokens == 0 {
        bail!("bench_latency needs at least one token");
    }
    let fake = FakeModel::start().await?;
    let dir = tempfile::tempdir().context("temporary directory")?;
    let home = dir.path().join(".jucode");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).context("create the project directory")?;
    let config = fake.config("chat");
    let script = format!("BENCH {tokens} {}", gap.as_millis());

    let direct = direct_path(&fake, &config, &home, &script, tokens).await?;
    let daemon = daemon_path(&fake, &config, &home, &project, &script, tokens).await?;
    Ok(LatencyReport {
        tokens,
        daemon: percentiles(daemon),
        direct: percentiles(direct),
    })
}

/// The engine's model client reading the stream itself.
#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
async fn direct_path(
    fake: &FakeModel,
    config: &serde_json::Value,
    home: &Path,
    script: &str,
    tokens: usize,
) -> Result<Vec<Duration>> {
    std::fs::create_dir_all(home).context("create the jucode home")?;
    let config = Config::parse(&config.to_string(), "bench config", |_| None)?;
    let client = ModelClient::new(&config)?;
    let messages = [Message::User {
        content: script.to_string(),
        images: vec![],
    }];
    let mut stream = client
        .open(Request {
            model: &config.model,
            system: "bench",
            messages: &messages,
            tools: &[],
            max_tokens: 1000,
            images: &NO_IMAGES,
        })
        .await?;
    let mut arrived = vec![None; tokens];
    while let Some(deltas) = stream.next().await? {
        let now = Instant::now();
        for delta in deltas {
            if let Delta::Text(text) = delta {
                note(&mut arrived, &text, now);
            }
        }
    }
    latencies(&fake.bench_sent(), &arrived)
}

/// Through the daemon binary: a session of the built-in engine, a watching client.
#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
async fn daemon_path(
    fake: &FakeModel,
    config: &serde_json::Value,
    home: &Path,
    project: &Path,
    script: &str,
    tokens: usize,
) -> Result<Vec<Duration>> {
    let mut daemon = Daemon::start_builtin(home, config).await?;
    let mut client = daemon.client().await?;
    let reply = client
        .request(json!({"op":"session_create","cwd":project.display().to_string()}))
        .await?;
    let session = reply["session"]
        .as_str()
        .with_context(|| format!("session_create answered {reply}"))?
        .to_string();
    client.recv_type("mcp_servers", Some(&session)).await?;
    client
        .request(json!({"op":"watch","session":session}))
        .await?;
    client
        .send(json!({"op":"user_message","session":session,"content":script}))
        .await?;
    let mut arrived = vec![None; tokens];
    loop {
        let frame = client.recv().await?;
        let now = Instant::now();
        if frame["session"] != session.as_str() {
            continue;
        }
        match frame["type"].as_str() {
            Some("assistant_delta") => {
                note(&mut arrived, frame["delta"].as_str().unwrap_or(""), now)
            }
            Some("error") => bail!("the session reported {frame}"),
            Some("status") if frame["message"] == "ready" => break,
            _ => {}
        }
    }
    client.close().await;
    daemon.stop().await?;
    latencies(&fake.bench_sent(), &arrived)
}

/// Marks every `tok<i>` in `text` as arrived at `now` (a delta may carry several).
fn note(arrived: &mut [Option<Instant>], text: &str, now: Instant) {
    for word in text.split_whitespace() {
        if let Some(i) = word
            .strip_prefix("tok")
            .and_then(|n| n.parse::<usize>().ok())
            && let Some(slot) = arrived.get_mut(i)
            && slot.is_none()
        {
            *slot = Some(now);
        }
    }
}

fn latencies(sent: &[Instant], arrived: &[Option<Instant>]) -> Result<Vec<Duration>> {
    if sent.len() != arrived.len() {
        bail!(
            "the fake model sent {} tokens, {} expected",
            sent.len(),
            arrived.len()
        );
    }
    sent.iter()
        .zip(arrived)
        .enumerate()
        .map(|(i, (sent, arrived))| {
            arrived
                .map(|a| a.saturating_duration_since(*sent))
                .with_context(|| format!("token {i} never arrived"))
        })
        .collect()
}

/// Nearest-rank percentiles.
fn percentiles(mut values: Vec<Duration>) -> Percentiles {
    values.sort();
    let rank = |p: usize| {
        let n = values.len();
        let i = (p * n).div_ceil(100).clamp(1, n.max(1)) - 1;
        values.get(i).copied().unwrap_or_default()
    };
    Percentiles {
        p50: rank(50),
        p99: rank(99),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let ms = |v: u64| Duration::from_millis(v);
        let p = percentiles((1..=100).map(ms).collect());
        assert_eq!(
            p,
            Percentiles {
                p50: ms(50),
                p99: ms(99)
            }
        );
        let p = percentiles(vec![ms(7)]);
        assert_eq!(
            p,
            Percentiles {
                p50: ms(7),
                p99: ms(7)
            }
        );
        let p = percentiles(vec![ms(3), ms(1), ms(2)]);
        assert_eq!(p.p50, ms(2));
        assert_eq!(p.p99, ms(3));
    }

    #[test]
    #[allow(clippy::disallowed_methods, reason = "latencies are real instants")]
    fn tokens_are_matched_by_index() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(5);
        let mut arrived = vec![None; 3];
        note(&mut arrived, "tok0 tok2 ", t1);
        note(&mut arrived, "tok2 tok9 x", t1 + Duration::from_millis(1));
        assert_eq!(arrived, vec![Some(t1), None, Some(t1)]);
        assert!(latencies(&[t0, t0, t0], &arrived).is_err());
        note(&mut arrived, "tok1", t1);
        let l = latencies(&[t0, t0, t0], &arrived).unwrap();
        assert_eq!(l, vec![Duration::from_millis(5); 3]);
        assert!(latencies(&[t0], &arrived).is_err());
    }
}
