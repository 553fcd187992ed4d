//! Armed timers at rest: a daemon with 1,000 agents and 10,000 armed timers (none due) against
//! an idle daemon with an empty home, each left ticking for the same while. Measured from
//! `/proc/<pid>`: resident memory at the end and CPU time used while idle.

use std::io::{BufWriter, Write as _};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use crate::daemon::{Bins, Daemon, Homes};

pub struct Sizes {
    pub agents: usize,
    pub timers: usize,
    /// How long each daemon idles while its CPU time is counted.
    pub idle: Duration,
}

/// One daemon's figures.
pub struct Rest {
    pub rss_kib: u64,
    /// CPU time per second of idling, as a fraction of one core.
    pub cpu: f64,
}

pub struct Outcome {
    pub idle: Rest,
    pub armed: Rest,
}

pub async fn run(bins: &Bins, sizes: &Sizes) -> Result<Outcome> {
    let idle = measure(bins, sizes, false).await.context("idle daemon")?;
    let armed = measure(bins, sizes, true).await.context("armed daemon")?;
    Ok(Outcome { idle, armed })
}

async fn measure(bins: &Bins, sizes: &Sizes, armed: bool) -> Result<Rest> {
    let tmp = tempfile::Builder::new()
        .prefix("jucode-timers-")
        .tempdir()?;
    let root = std::fs::canonicalize(tmp.path())?;
    let homes = Homes {
        home: root.join("home"),
        jucode_home: root.join("home").join(".jucode"),
        log: root.join("daemon.log"),
    };
    std::fs::create_dir_all(&homes.jucode_home)?;
    if armed {
        let (home, agents, timers) = (homes.home.clone(), sizes.agents, sizes.timers);
        let jucode_home = homes.jucode_home.clone();
        tokio::task::spawn_blocking(move || seed(&home, &jucode_home, agents, timers)).await??;
    }
    let mut daemon = Daemon::start(bins, &homes).await?;
    let pid = daemon.pid().context("the daemon has no pid")?;
    // Start-up work (folding the logs) is not what is measured.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = cpu_ticks(pid)?;
    tokio::time::sleep(sizes.idle).await;
    let after = cpu_ticks(pid)?;
    let rss_kib = rss_kib(pid)?;
    let _ = daemon.stop().await?;
    let ticks = after.saturating_sub(before) as f64;
    Ok(Rest {
        rss_kib,
        cpu: ticks / clock_ticks_per_second() / sizes.idle.as_secs_f64(),
    })
}

/// `agents` agents, each with an `agent.json`, and `timers` armed timers spread over them,
/// all due a year from now.
fn seed(home: &Path, jucode_home: &Path, agents: usize, timers: usize) -> Result<()> {
    for i in 0..agents {
        let dir = jucode_home.join("agents").join(format!("agent-{i}"));
        std::fs::create_dir_all(&dir)?;
        let config = json!({"name": format!("Agent {i}"), "cwd": home});
        std::fs::write(dir.join("agent.json"), config.to_string())?;
    }
    let state = jucode_home.join("daemon");
    std::fs::create_dir_all(&state)?;
    let mut out = BufWriter::new(std::fs::File::create(state.join("timers.jsonl"))?);
    // Far ahead of any clock the bench runs under, so none fires.
    let base: u64 = 4_000_000_000_000;
    for t in 0..timers {
        let agent = t % agents.max(1);
        let record = json!({"kind": "set", "id": format!("tm-{base}-{t}"), "agent": format!("agent-{agent}"),
            "session": format!("s-{agent}"), "fire_at": base + t as u64 * 1000,
            "body": format!("reminder {t}: look at the build again"), "at": 1});
        writeln!(out, "{record}")?;
    }
    out.flush()?;
    Ok(())
}

/// utime + stime of `pid`, in clock ticks (`/proc/<pid>/stat` fields 14 and 15).
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces; the fields after it follow its ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("odd /proc stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Result<u64> {
        // `rest` starts at field 3.
        fields
            .get(n - 3)
            .context("short /proc stat")?
            .parse()
            .context("bad /proc stat field")
    };
    Ok(field(14)? + field(15)?)
}

pub(super) fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmRSS in /proc status")
}

fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}
