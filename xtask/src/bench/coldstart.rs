//! Cold start: a state directory with many log lines, timed from spawn to the daemon's
//! "listening on" line, against a plain line-by-line `serde_json::Value` parse of the same files.

use std::io::{BufRead as _, BufReader, BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::daemon::{Bins, Daemon, Homes};

const RUNS: usize = 3;
/// Lines each session contributes to `sessions.jsonl`.
const LINES_PER_SESSION: usize = 10;

pub struct ColdStart {
    pub lines: usize,
    pub sessions: usize,
    pub device_lines: usize,
    pub daemon: Duration,
    pub reference: Duration,
}

pub async fn run(bins: &Bins, lines: usize) -> Result<ColdStart> {
    let tmp = tempfile::Builder::new().prefix("jucode-cold-").tempdir()?;
    let root = std::fs::canonicalize(tmp.path())?;
    let homes = Homes {
        home: root.join("home"),
        jucode_home: root.join("home").join(".jucode"),
        log: root.join("daemon.log"),
    };
    let state = homes.jucode_home.join("daemon");
    let (sessions, device_lines) = {
        let state = state.clone();
        tokio::task::spawn_blocking(move || generate(&state, lines)).await??
    };
    let files = vec![state.join("sessions.jsonl"), state.join("devices.jsonl")];

    let mut daemon_times = Vec::new();
    for run in 0..RUNS {
        let mut daemon = Daemon::start(bins, &homes).await?;
        daemon_times.push(daemon.started_in);
        // Once: check the daemon really folded every session.
        let listed = if run == 0 {
            count_sessions(&daemon).await
        } else {
            Ok(sessions)
        };
        // The exit status is not what is measured here.
        let _ = daemon.stop().await?;
        let listed = listed?;
        if listed != sessions {
            bail!("the daemon lists {listed} sessions, the logs hold {sessions}");
        }
    }
    let mut reference_times = Vec::new();
    for _ in 0..RUNS {
        let files = files.clone();
        reference_times.push(tokio::task::spawn_blocking(move || parse_all(&files)).await??);
    }
    Ok(ColdStart {
        lines: sessions * LINES_PER_SESSION + device_lines,
        sessions,
        device_lines,
        daemon: median(daemon_times),
        reference: median(reference_times),
    })
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

/// The reference: every line of every file read and parsed into a `Value`.
#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
fn parse_all(files: &[PathBuf]) -> Result<Duration> {
    let start = Instant::now();
    let mut parsed = 0usize;
    for path in files {
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        for line in BufReader::new(file).lines() {
            let value: Value = serde_json::from_str(&line?)?;
            parsed += usize::from(!value.is_null());
        }
    }
    let elapsed = start.elapsed();
    // Keeps the parse from being optimized away.
    if parsed == 0 {
        bail!("nothing parsed");
    }
    Ok(elapsed)
}

/// How many sessions the daemon's connect batch lists.
#[allow(
    clippy::disallowed_methods,
    reason = "deadlines for a real daemon run in real time"
)]
async fn count_sessions(daemon: &Daemon) -> Result<usize> {
    let url = format!("ws://{}/?token={}", daemon.addr, daemon.token);
    let stream = tokio::net::TcpStream::connect(daemon.addr).await?;
    let config = WebSocketConfig::default()
        .max_message_size(None)
        .max_frame_size(None);
    let (mut ws, _) =
        tokio_tungstenite::client_async_with_config(url, stream, Some(config)).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let next = tokio::time::timeout_at(deadline, ws.next())
            .await
            .context("no sessions frame in time")?;
        match next {
            Some(Ok(Message::Text(text))) => {
                let frame: Value = serde_json::from_str(text.as_str())?;
                if frame.get("type").and_then(Value::as_str) == Some("sessions") {
                    let list = frame.get("sessions").and_then(Value::as_array);
                    return Ok(list.map_or(0, Vec::len));
                }
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.into()),
            None => bail!("the daemon closed the connection"),
        }
    }
}

/// Writes `sessions.jsonl` and `devices.jsonl` in the shapes the hub folds, about `lines` lines
/// in all (1% device records). Returns (sessions, device lines).
fn generate(state: &Path, lines: usize) -> Result<(usize, usize)> {
    std::fs::create_dir_all(state)?;
    let device_lines = lines / 100;
    let sessions = (lines - device_lines) / LINES_PER_SESSION;
    let base: u64 = 1_750_000_000_000;

    let mut out = BufWriter::new(std::fs::File::create(state.join("sessions.jsonl"))?);
    for i in 0..sessions {
        let id = format!("{:08x}-0000-4000-8000-{:012x}", i, i * 7919);
        let cwd = format!("/home/user/code/project-{}", i % 50);
        let at = base + (i as u64) * 1000;
        let open = |at: u64| json!({"kind": "open", "session": id, "cwd": cwd, "engine": "jucode", "agent": null, "chat": false, "at": at});
        let close = |at: u64| json!({"kind": "close", "session": id, "at": at});
        let records = [
            open(at),
            json!({"kind": "title", "session": id, "title": format!("fix issue number {i} in the parser"), "at": at + 1}),
            json!({"kind": "meta", "session": id, "title": format!("Session {i}"), "at": at + 2}),
            close(at + 3),
            open(at + 4),
            json!({"kind": "meta", "session": id, "archived": i % 3 == 0, "at": at + 5}),
            close(at + 6),
            open(at + 7),
            json!({"kind": "meta", "session": id, "group": {"name": format!("g{}", i % 7)}, "at": at + 8}),
            close(at + 9),
        ];
        for record in records {
            writeln!(out, "{record}")?;
        }
    }
    out.flush()?;

    let mut out = BufWriter::new(std::fs::File::create(state.join("devices.jsonl"))?);
    let paired = device_lines.div_ceil(2);
    for i in 0..paired {
        let record = json!({"kind": "paired", "id": format!("dev-{base}-{i}"), "name": format!("phone {i}"), "token_hash": format!("{:064x}", i), "at": base + i as u64});
        writeln!(out, "{record}")?;
    }
    for i in 0..device_lines - paired {
        let record = json!({"kind": "revoked", "id": format!("dev-{base}-{i}"), "at": base + (paired + i) as u64});
        writeln!(out, "{record}")?;
    }
    out.flush()?;
    Ok((sessions, device_lines))
}
