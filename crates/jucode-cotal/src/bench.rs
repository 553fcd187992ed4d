//! Benchmark hook for `cargo xtask bench`: latency from a journal line being
//! written to its AG-UI frame being stored by the broker.

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::{mpsc, watch};

use crate::config::LaunchConfig;
use crate::events::Emitter;
use crate::harness::JournalSource;
use crate::mesh::Mesh;
use crate::{Error, Result};

/// Latency samples in microseconds, sorted.
#[derive(Debug, Clone)]
pub struct LatencyReport {
    pub samples_us: Vec<u64>,
}

impl LatencyReport {
    pub fn percentile(&self, p: f64) -> u64 {
        if self.samples_us.is_empty() {
            return 0;
        }
        let i = ((self.samples_us.len() - 1) as f64 * p).round() as usize;
        self.samples_us[i.min(self.samples_us.len() - 1)]
    }
}

/// Write `samples` assistant lines to a fresh journal and time each until its
/// frame is stored in JetStream. `server` is a nats-server URL with JetStream
/// (open mode); `poll` is the emitter's journal poll period.
#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
pub async fn journal_to_stored_latency(
    server: &str,
    samples: usize,
    poll: Duration,
) -> Result<LatencyReport> {
    let dir = tempfile::tempdir().map_err(|e| Error::Launch(e.to_string()))?;
    let sessions = dir.path().join("sessions");
    std::fs::create_dir_all(&sessions).map_err(|e| Error::io(&sessions, e))?;
    let space = format!("bench{}", crate::util::lifecycle_uid());
    let cfg = LaunchConfig::from_env(
        vec![
            ("COTAL_SPACE".into(), space),
            ("COTAL_NAME".into(), "bench".into()),
            ("COTAL_SERVERS".into(), server.to_string()),
            ("COTAL_EVENTS".into(), "1".into()),
            (
                "COTAL_WORKSPACE_ROOT".into(),
                dir.path().display().to_string(),
            ),
        ],
        false,
    )?;
    let mesh = Mesh::connect(&cfg).await?;
    let source = JournalSource {
        sessions_dir: sessions,
        session_id: "session_bench_1".into(),
    };
    let mut emitter = Emitter::open(&cfg, mesh, source.clone(), poll)?;
    let (stx, mut srx) = watch::channel(0u64);
    emitter.on_stored(stx);
    let (_htx, hrx) = mpsc::unbounded_channel();
    let task = tokio::spawn(emitter.run(hrx));
    let mut journal = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(source.journal_path())
        .map_err(|e| Error::io(source.journal_path(), e))?;
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples {
        let line = json!({"meta": {"status": "Active"}, "append_messages": [
            {"id": format!("message_{i}"), "role": "assistant", "content": [{"type": "text", "text": format!("sample {i}")}]}]});
        srx.borrow_and_update();
        let t0 = Instant::now();
        writeln!(journal, "{line}").map_err(|e| Error::io(source.journal_path(), e))?;
        tokio::time::timeout(Duration::from_secs(30), srx.changed())
            .await
            .map_err(|_| Error::Events("a frame was not stored within 30 s".into()))?
            .map_err(|_| Error::Events("the emitter stopped".into()))?;
        out.push(t0.elapsed().as_micros() as u64);
    }
    task.abort();
    out.sort_unstable();
    Ok(LatencyReport { samples_us: out })
}
