//! The seat's memory: the release `jucode-cotal-jcode` joined to a real nats-server, driving
//! `jucode-fake-jcode` (the jcode test double, so only the connector is measured), next to an
//! idle `node` process, the floor under a connector host written in TypeScript.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::daemon;

/// Resident and peak resident memory of one process, in KiB.
#[derive(Debug, Clone, Copy)]
pub struct Rss {
    pub rss_kib: u64,
    pub hwm_kib: u64,
}

/// `VmRSS` and `VmHWM` out of `/proc/<pid>/status` text.
pub fn parse_status(status: &str) -> Option<Rss> {
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    Some(Rss {
        rss_kib: field("VmRSS:")?,
        hwm_kib: field("VmHWM:")?,
    })
}

fn rss_of(pid: u32) -> Result<Rss> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_status(&text).with_context(|| format!("{path} has no VmRSS/VmHWM"))
}

/// How long both processes sit idle before they are read.
const SETTLE: Duration = Duration::from_secs(2);
/// How long the seat may take to join.
const JOIN_GUARD: Duration = Duration::from_secs(60);

fn release_bin(name: &str) -> Result<PathBuf> {
    let p = daemon::target_dir()?.join("release").join(name);
    if !p.is_file() {
        bail!(
            "{} is missing: cargo build --release -p jucode-cotal-jcode -p jucode-jcode",
            p.display()
        );
    }
    Ok(p)
}

/// The seat's RSS once it joined and sat idle.
#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
pub async fn seat_rss(nats_url: &str) -> Result<Rss> {
    let seat = release_bin("jucode-cotal-jcode")?;
    let fake = release_bin("jucode-fake-jcode")?;
    let ws = tempfile::tempdir().context("a temporary workspace")?;
    let op = ws.path().join("operator");
    std::fs::create_dir_all(op.join(".jcode"))?;
    std::fs::write(
        op.join(".jcode/config.toml"),
        "[provider]\ndefault_provider = \"fake\"\n",
    )?;
    let work = ws.path().join("work");
    std::fs::create_dir_all(&work)?;
    let space = format!("rss{}", std::process::id());
    let mut child = Command::new(&seat)
        .arg("--no-events")
        .current_dir(&work)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &op)
        .env("COTAL_SPACE", &space)
        .env("COTAL_NAME", "bench")
        .env("COTAL_SERVERS", nats_url)
        .env("COTAL_JCODE_BIN", &fake)
        .env("COTAL_JCODE_HOME", ws.path())
        .env("COTAL_JCODE_TUI", "0")
        .env("JUCODE_COTAL_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", seat.display()))?;
    let pid = child.id().context("the seat has no pid")?;
    let client = async_nats::connect(nats_url).await?;
    let js = async_nats::jetstream::new(client);
    let start = Instant::now();
    loop {
        if let Ok(kv) = js.get_key_value(format!("cotal_presence_{space}")).await
            && matches!(kv.get("local.bench").await, Ok(Some(_)))
        {
            break;
        }
        if let Some(status) = child.try_wait()? {
            bail!("the seat exited ({status}) before it joined");
        }
        if start.elapsed() > JOIN_GUARD {
            bail!("the seat did not join within {JOIN_GUARD:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(SETTLE).await;
    let rss = rss_of(pid)?;
    // SIGTERM: the seat stops its private (fake) jcode tree on the way out.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    if tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .is_err()
    {
        child.kill().await?;
    }
    Ok(rss)
}

/// Whether the reference `node` can be started: `JUCODE_NODE` names a file, or `node` is on
/// `PATH`.
pub fn node_available() -> bool {
    match std::env::var_os("JUCODE_NODE") {
        Some(node) => Path::new(&node).is_file(),
        None => std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join("node").is_file())),
    }
}

/// An idle `node` (`JUCODE_NODE`, else `node` on PATH) after the same settle time.
#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
pub async fn idle_node_rss() -> Result<Rss> {
    let node = std::env::var_os("JUCODE_NODE").unwrap_or_else(|| "node".into());
    let mut child = Command::new(&node)
        .args([
            "-e",
            "process.stdout.write('ready\\n'); setInterval(() => {}, 1 << 30);",
        ])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| {
            format!(
                "starting {} (the bench's reference; install Node.js 20 or later)",
                Path::new(&node).display()
            )
        })?;
    let pid = child.id().context("node has no pid")?;
    let out = child.stdout.take().context("node's stdout")?;
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(20),
        BufReader::new(out).read_line(&mut line),
    )
    .await
    .context("node did not start")??;
    tokio::time::sleep(SETTLE).await;
    let rss = rss_of(pid)?;
    child.kill().await?;
    Ok(rss)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read() {
        let s = "Name:\tx\nVmHWM:\t   12345 kB\nVmRSS:\t    6789 kB\n";
        let r = parse_status(s).unwrap();
        assert_eq!((r.rss_kib, r.hwm_kib), (6789, 12345));
        assert!(parse_status("Name: x\n").is_none());
    }
}
