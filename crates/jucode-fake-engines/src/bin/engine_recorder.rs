//! Records the frames between an adapter and a real engine CLI, in the format the fakes replay.
//!
//! Run in place of the engine (`options.bin`), with `RECORD_TARGET` naming the real program and
//! `RECORD_OUT` the recording to write. Every argument is passed on; every stdin line is
//! recorded as `in`, every stdout line as `out`, then the exit as `meta`. The environment is not
//! recorded (it may hold keys).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::{Value, json};

type Log = Arc<Mutex<std::fs::File>>;

fn record(log: &Log, start: Instant, dir: &str, line: &str) {
    let frame = serde_json::from_str::<Value>(line).unwrap_or_else(|_| json!({"raw": line}));
    let entry = json!({"dir": dir, "t": start.elapsed().as_secs_f64(), "frame": frame});
    if let Ok(mut f) = log.lock() {
        let _ = writeln!(f, "{entry}");
    }
}

#[allow(
    clippy::disallowed_methods,
    reason = "a recording is stamped with real time"
)]
fn main() -> Result<()> {
    let target =
        std::env::var("RECORD_TARGET").context("RECORD_TARGET must name the real engine")?;
    let out = std::env::var("RECORD_OUT").context("RECORD_OUT must name the recording file")?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let start = Instant::now();
    let file = std::fs::File::create(&out).with_context(|| format!("creating {out}"))?;
    let log: Log = Arc::new(Mutex::new(file));
    let cwd = std::env::current_dir()?.display().to_string();
    let mut argv = vec![target.clone()];
    argv.extend(args.iter().cloned());
    if let Ok(mut f) = log.lock() {
        writeln!(
            f,
            "{}",
            json!({"dir":"meta","t":0.0,"meta":{"argv": argv, "cwd": cwd}})
        )?;
    }
    let mut child = Command::new(&target)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {target}"))?;
    let (Some(mut child_in), Some(child_out)) = (child.stdin.take(), child.stdout.take()) else {
        anyhow::bail!("child stdio not piped");
    };
    let in_log = log.clone();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            record(&in_log, start, "in", &line);
            if writeln!(child_in, "{line}")
                .and_then(|_| child_in.flush())
                .is_err()
            {
                break;
            }
        }
        // Dropping child_in closes the engine's stdin, as the adapter closing ours asks.
    });
    let mut stdout = std::io::stdout().lock();
    for line in BufReader::new(child_out).lines().map_while(Result::ok) {
        record(&log, start, "out", &line);
        writeln!(stdout, "{line}")?;
        stdout.flush()?;
    }
    let status = child.wait()?;
    if let Ok(mut f) = log.lock() {
        writeln!(
            f,
            "{}",
            json!({"dir":"meta","t":start.elapsed().as_secs_f64(),"meta":{"exit_code": status.code()}})
        )?;
    }
    std::process::exit(status.code().unwrap_or(1))
}
