//! `upload` of one file in 4 MiB chunks over a WebSocket, against a reference in the same run
//! that does the daemon's unavoidable work and nothing else: decode the same base64 chunks,
//! write them to a file, fsync and rename it. Goal: the daemon's throughput at least 0.6 of
//! the reference's.

use std::io::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

use crate::daemon::{Bins, Daemon, Homes};

const CHUNK: usize = 4 * 1024 * 1024;
const WAIT: Duration = Duration::from_secs(60);

pub struct Outcome {
    pub bytes: usize,
    /// Bytes per second through the daemon (first chunk sent → `uploaded`).
    pub daemon: f64,
    /// Bytes per second of decode + write + fsync + rename.
    pub reference: f64,
}

pub async fn run(bins: &Bins, bytes: usize) -> Result<Outcome> {
    let tmp = tempfile::Builder::new()
        .prefix("jucode-upload-")
        .tempdir()?;
    let root = std::fs::canonicalize(tmp.path())?;
    // Varied bytes, so neither side meets a degenerate case.
    let data: Vec<u8> = (0..bytes)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let chunks: Vec<String> = data
        .chunks(CHUNK)
        .map(|c| base64::engine::general_purpose::STANDARD.encode(c))
        .collect();

    let dir = root.join("reference");
    std::fs::create_dir_all(&dir)?;
    let mut reference = Vec::new();
    for i in 0..3 {
        let (dir, chunks) = (dir.clone(), chunks.clone());
        let took = tokio::task::spawn_blocking(move || reference_write(&dir, i, &chunks)).await??;
        reference.push(took);
    }

    let homes = Homes {
        home: root.join("home"),
        jucode_home: root.join("home").join(".jucode"),
        log: root.join("daemon.log"),
    };
    std::fs::create_dir_all(&homes.jucode_home)?;
    let mut daemon = Daemon::start(bins, &homes).await?;
    let url = format!("ws://{}/?token={}", daemon.addr, daemon.token);
    let measured = measure(&url, &chunks, bytes).await;
    let _ = daemon.stop().await;
    let runs = measured?;
    let rate = |d: Duration| bytes as f64 / d.as_secs_f64().max(1e-9);
    Ok(Outcome {
        bytes,
        daemon: rate(median(runs)),
        reference: rate(median(reference)),
    })
}

fn reference_write(dir: &std::path::Path, run: usize, chunks: &[String]) -> Result<Duration> {
    let part = dir.join(format!("f{run}.part"));
    let start = now();
    let mut file = std::fs::File::create(&part)?;
    for chunk in chunks {
        let bytes = base64::engine::general_purpose::STANDARD.decode(chunk)?;
        file.write_all(&bytes)?;
    }
    file.sync_all()?;
    std::fs::rename(&part, dir.join(format!("f{run}")))?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(start.elapsed())
}

async fn measure(url: &str, chunks: &[String], bytes: usize) -> Result<Vec<Duration>> {
    let (mut ws, _) = tokio_tungstenite::connect_async(url)
        .await
        .context("WebSocket handshake")?;
    let mut runs = Vec::new();
    for run in 0..3 {
        let start = now();
        let mut upload = String::new();
        let mut offset = 0usize;
        for (i, chunk) in chunks.iter().enumerate() {
            let last = i + 1 == chunks.len();
            let frame = if i == 0 {
                format!(
                    r#"{{"op":"upload","id":{i},"name":"bench-{run}.bin","data":"{chunk}","last":{last}}}"#
                )
            } else {
                format!(
                    r#"{{"op":"upload","id":{i},"upload":"{upload}","offset":{offset},"data":"{chunk}","last":{last}}}"#
                )
            };
            ws.send(Message::text(frame)).await?;
            let reply = reply(&mut ws, i).await?;
            offset += CHUNK.min(bytes - offset);
            if last {
                if reply["type"] != "uploaded" || reply["size"] != bytes {
                    bail!("the last chunk was answered {reply}");
                }
            } else {
                match reply["upload"].as_str() {
                    Some(id) if reply["type"] == "upload_part" => upload = id.to_string(),
                    _ => bail!("a chunk was answered {reply}"),
                }
            }
        }
        runs.push(start.elapsed());
    }
    Ok(runs)
}

async fn reply<S>(ws: &mut S, id: usize) -> Result<Value>
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    tokio::time::timeout(WAIT, async {
        while let Some(msg) = ws.next().await {
            if let Message::Text(text) = msg? {
                let frame: Value = serde_json::from_str(text.as_str())?;
                if frame["id"] == id {
                    return Ok(frame);
                }
            }
        }
        bail!("the daemon closed the connection")
    })
    .await
    .context("no upload reply in time")?
}

#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
fn now() -> Instant {
    Instant::now()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bench's own mechanics on the debug daemon (build it first): three chunks, the last
    /// one short, all answered, and both rates measured.
    #[test]
    #[ignore = "needs the debug daemon built (cargo build -p jucode-daemon)"]
    fn the_bench_uploads_a_file_in_chunks() -> Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let bins = Bins::of_profile("debug")?;
        let out = runtime.block_on(run(&bins, 2 * CHUNK + 12_345))?;
        assert_eq!(out.bytes, 2 * CHUNK + 12_345);
        assert!(out.daemon > 0.0 && out.reference > 0.0);
        Ok(())
    }
}
