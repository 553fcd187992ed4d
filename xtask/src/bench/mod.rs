//! `cargo xtask bench`: the release daemon measured against references run in the same
//! process, so the ratios mean something on any machine.

mod coldstart;
mod fanout;
mod memory;
mod messages;
mod page;
mod paths;
mod revoke;
mod seat;
mod terminals;
mod timers;
mod upload;
mod usage;

use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::daemon::{self, Bins};

pub use fanout::NODE_PACKAGE;

pub struct Options {
    pub quick: bool,
    pub build: bool,
    /// The benches to run (`--only`); `None` runs all.
    pub only: Option<Vec<&'static str>>,
    /// Frames per fan-out run instead of the size's (`--frames`).
    pub frames: Option<usize>,
    /// Client counts of the fan-out runs instead of the size's (`--clients`).
    pub clients: Option<Vec<usize>>,
    /// Lines the fan-out's engine writes at once instead of [`fanout::LINES_PER_WRITE`]
    /// (`--lines-per-write`).
    pub lines_per_write: Option<usize>,
}

/// Every bench, by the name `--only` takes, in the order they run.
const BENCHES: &[&str] = &[
    "fanout",
    "coldstart",
    "memory",
    "revoke",
    "messages",
    "paths",
    "terminals",
    "timers",
    "usage",
    "upload",
    "page",
];

/// Reads `--clients`' comma-separated list of client counts.
pub fn client_counts(list: &str) -> Result<Vec<usize>> {
    list.split(',')
        .filter(|n| !n.trim().is_empty())
        .map(|n| {
            n.trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .with_context(|| format!("{n:?} is not a client count"))
        })
        .collect()
}

/// Reads `--only`'s comma-separated list.
pub fn select(list: &str) -> Result<Vec<&'static str>> {
    list.split(',')
        .filter(|n| !n.trim().is_empty())
        .map(|n| {
            BENCHES
                .iter()
                .copied()
                .find(|b| *b == n.trim())
                .with_context(|| format!("no bench named {n:?} (known: {})", BENCHES.join(", ")))
        })
        .collect()
}

impl Options {
    fn wants(&self, bench: &str) -> bool {
        self.only.as_ref().is_none_or(|o| o.contains(&bench))
    }
}

/// How big a run is.
struct Sizes {
    /// Frames per fan-out run.
    frames: usize,
    /// Connected clients per fan-out run.
    clients: &'static [usize],
    /// Runs per fan-out measurement (the median is shown).
    repeats: usize,
    /// Log lines of the cold-start state directory.
    lines: usize,
    /// The engine, relay and Cotal benches.
    paths: paths::PathSizes,
    /// Armed timers at rest.
    timers: timers::Sizes,
    /// Samples of each path of the message bench.
    messages: usize,
    /// Turns in the usage ledger.
    usage_turns: usize,
    /// Bytes of the uploaded file.
    upload_bytes: usize,
    /// The terminal bench.
    terminals: terminals::Sizes,
    /// Idle hosted sessions of the memory bench.
    memory_sessions: usize,
    /// Devices paired and revoked.
    revokes: usize,
}

const FULL: Sizes = Sizes {
    frames: 50_000,
    clients: &[1, 10, 100],
    repeats: 3,
    lines: 1_000_000,
    paths: paths::PathSizes {
        tokens: 500,
        relay_frames: 8_000,
        journal_samples: 300,
    },
    timers: timers::Sizes {
        agents: 1_000,
        timers: 10_000,
        idle: Duration::from_secs(20),
    },
    messages: 300,
    usage_turns: 1_000_000,
    upload_bytes: 100 * 1024 * 1024,
    terminals: terminals::Sizes {
        bytes: 64 * 1024 * 1024,
        keys: 500,
    },
    memory_sessions: 100,
    revokes: 50,
};

const QUICK: Sizes = Sizes {
    // As many as the full form: 10,000 frames to one client lasted under 10 ms, so its figure
    // was mostly the run's start (0.6 to 1.15 of bare back to back).
    frames: 50_000,
    clients: &[1, 10, 100],
    repeats: 1,
    lines: 100_000,
    paths: paths::PathSizes {
        tokens: 50,
        relay_frames: 2_000,
        journal_samples: 30,
    },
    timers: timers::Sizes {
        agents: 1_000,
        timers: 10_000,
        idle: Duration::from_secs(5),
    },
    messages: 30,
    usage_turns: 50_000,
    upload_bytes: 16 * 1024 * 1024,
    terminals: terminals::Sizes {
        bytes: 16 * 1024 * 1024,
        keys: 100,
    },
    memory_sessions: 100,
    revokes: 10,
};

/// Set in the optimized child that a debug xtask hands the measurements to.
const CHILD_ENV: &str = "JUCODE_XTASK_BENCH_CHILD";

pub fn run(options: Options) -> Result<bool> {
    // The references and the measuring clients are xtask code: timing them unoptimized would
    // make every ratio meaningless, so a debug xtask builds and runs its release self.
    if cfg!(debug_assertions) && std::env::var_os(CHILD_ENV).is_none() {
        return run_optimized(&options);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(run_all(options))
}

fn run_optimized(options: &Options) -> Result<bool> {
    let root = daemon::workspace_root()?;
    if options.build {
        let status = std::process::Command::new(daemon::cargo_program())
            .current_dir(&root)
            .args([
                "build",
                "--release",
                "-p",
                "jucode-daemon",
                "-p",
                "jucode-testsupport",
                "-p",
                "jucode-cotal-jcode",
                "-p",
                "jucode-jcode",
            ])
            .args(["-p", "xtask"])
            .status()
            .context("running cargo build --release")?;
        if !status.success() {
            bail!("cargo build --release failed ({status})");
        }
    }
    let xtask = daemon::target_dir()?.join("release").join("xtask");
    let mut child = std::process::Command::new(&xtask);
    child.arg("bench").arg("--no-build").env(CHILD_ENV, "1");
    if options.quick {
        child.arg("--quick");
    }
    if let Some(only) = &options.only {
        child.arg("--only").arg(only.join(","));
    }
    if let Some(frames) = options.frames {
        child.arg("--frames").arg(frames.to_string());
    }
    if let Some(clients) = &options.clients {
        let list: Vec<String> = clients.iter().map(usize::to_string).collect();
        child.arg("--clients").arg(list.join(","));
    }
    if let Some(n) = options.lines_per_write {
        child.arg("--lines-per-write").arg(n.to_string());
    }
    let status = child
        .status()
        .with_context(|| format!("running {} (build it with --release)", xtask.display()))?;
    Ok(status.success())
}

async fn run_all(options: Options) -> Result<bool> {
    if options.build {
        daemon::build(true).await?;
        let status = daemon::cargo()
            .args([
                "build",
                "--release",
                "-p",
                "jucode-cotal-jcode",
                "-p",
                "jucode-jcode",
            ])
            .status()
            .await
            .context("building the Cotal seat")?;
        if !status.success() {
            bail!("cargo build --release of the Cotal seat failed ({status})");
        }
    }
    let bins = Bins::of_profile("release")?;
    let sizes = if options.quick { QUICK } else { FULL };
    let frames = options.frames.unwrap_or(sizes.frames);
    let clients = options.clients.as_deref().unwrap_or(sizes.clients);
    let batch = options.lines_per_write.unwrap_or(fanout::LINES_PER_WRITE);
    let mode = if options.quick { " (--quick)" } else { "" };
    let mut ok = true;
    if options.wants("fanout") {
        let node_missing = fanout::node_missing();
        println!(
            "fan-out{mode}: {} frames to each client, median of {}; the engine writes {batch} lines at once; latency = receive time - emission stamp; ratio = daemon / reference; goals: >= 0.8x bare, >= 3x Node ws; piped = bare fed by the engine process's pipe (the floor for engines that are processes)",
            frames, sizes.repeats
        );
        println!(
            "{:>7}  {:>13}  {:>13}  {:>6}  {:>13}  {:>6}  {:>13}  {:>6}  {:>11}  {:>11}  {:>6}  {:>11}  {:>11}",
            "clients",
            "daemon fr/s",
            "bare fr/s",
            "ratio",
            "piped fr/s",
            "ratio",
            "node ws fr/s",
            "ratio",
            "daemon p99",
            "bare p99",
            "ratio",
            "piped p99",
            "node p99"
        );
        for &n in clients {
            let mut daemon_runs = Vec::new();
            let mut reference_runs = Vec::new();
            let mut piped_runs = Vec::new();
            let mut node_runs = Vec::new();
            // Alternated, so a burst of load elsewhere on the machine hits all alike.
            for _ in 0..sizes.repeats {
                daemon_runs.push(
                    fanout::daemon_run(&bins, n, frames, batch)
                        .await
                        .with_context(|| format!("daemon fan-out to {n} clients"))?,
                );
                reference_runs.push(
                    fanout::reference_run(n, frames)
                        .await
                        .with_context(|| format!("reference fan-out to {n} clients"))?,
                );
                piped_runs.push(
                    fanout::piped_run(&bins, n, frames, batch)
                        .await
                        .with_context(|| format!("piped fan-out to {n} clients"))?,
                );
                if node_missing.is_none() {
                    node_runs.push(
                        fanout::node_run(n, frames)
                            .await
                            .with_context(|| format!("Node ws fan-out to {n} clients"))?,
                    );
                }
            }
            let daemon = fanout::Outcome::median(daemon_runs);
            let reference = fanout::Outcome::median(reference_runs);
            let piped = fanout::Outcome::median(piped_runs);
            let node = (!node_runs.is_empty()).then(|| fanout::Outcome::median(node_runs));
            let (node_rate, node_ratio, node_p99) = match &node {
                Some(node) => (
                    thousands(node.rate),
                    format!("{:.2}", daemon.rate / node.rate.max(1e-9)),
                    millis(node.p99),
                ),
                None => ("-".into(), "-".into(), "-".into()),
            };
            println!(
                "{:>7}  {:>13}  {:>13}  {:>6.2}  {:>13}  {:>6.2}  {:>13}  {:>6}  {:>11}  {:>11}  {:>6.2}  {:>11}  {:>11}",
                n,
                thousands(daemon.rate),
                thousands(reference.rate),
                daemon.rate / reference.rate,
                thousands(piped.rate),
                daemon.rate / piped.rate.max(1e-9),
                node_rate,
                node_ratio,
                millis(daemon.p99),
                millis(reference.p99),
                daemon.p99.as_secs_f64() / reference.p99.as_secs_f64().max(1e-9),
                millis(piped.p99),
                node_p99,
            );
            let node_notes = node.iter().flat_map(|o| &o.notes);
            for note in daemon
                .notes
                .iter()
                .chain(&reference.notes)
                .chain(&piped.notes)
                .chain(node_notes)
            {
                println!("         note: {note}");
            }
            ok &= daemon.complete && reference.complete && node.as_ref().is_none_or(|o| o.complete);
        }
        if let Some(why) = &node_missing {
            println!("         note: {why}");
        }
    }

    if options.wants("coldstart") {
        println!();
        let cold = coldstart::run(&bins, sizes.lines).await?;
        println!(
            "cold start{mode}: {} log lines ({} sessions, {} device records); median of 3; ratio = daemon / reference",
            thousands(cold.lines as f64),
            thousands(cold.sessions as f64),
            thousands(cold.device_lines as f64)
        );
        println!(
            "{:>24}  {:>24}  {:>6}",
            "daemon spawn→listening", "reference parse (Value)", "ratio"
        );
        println!(
            "{:>24}  {:>24}  {:>6.2}",
            millis(cold.daemon),
            millis(cold.reference),
            cold.daemon.as_secs_f64() / cold.reference.as_secs_f64().max(1e-9)
        );
    }
    if options.wants("memory") {
        println!();
        let m = memory::run(&bins, sizes.memory_sessions)
            .await
            .context("memory bench")?;
        println!(
            "memory at rest: the daemon process alone; {} idle sessions on the scripted engine after 5 to warm up; ratio = measured / goal",
            m.sessions
        );
        println!(
            "{:>24}  {:>14}  {:>14}  {:>6}",
            "", "measured", "goal", "ratio"
        );
        let idle = m.idle_kib as f64 * 1024.0;
        println!(
            "{:>24}  {:>11} KB  {:>11} KB  {:>6.2}",
            "idle daemon RSS",
            thousands(idle / 1000.0),
            thousands(memory::IDLE_GOAL / 1000.0),
            idle / memory::IDLE_GOAL
        );
        println!(
            "{:>24}  {:>11} KB  {:>11} KB  {:>6.2}",
            "per idle session",
            thousands(m.per_session / 1000.0),
            thousands(memory::SESSION_GOAL / 1000.0),
            m.per_session / memory::SESSION_GOAL
        );
    }
    if options.wants("revoke") {
        println!();
        let r = revoke::run(&bins, sizes.revokes)
            .await
            .context("revoke bench")?;
        println!(
            "device_revoke → the device's connection closed: {} paired devices, one at a time; ratio = measured / goal ({} ms)",
            r.samples,
            revoke::GOAL.as_millis()
        );
        println!("{:>6}  {:>12}  {:>6}", "", "measured", "ratio");
        for (name, d) in [("p50", r.p50), ("max", r.max)] {
            println!(
                "{name:>6}  {:>12}  {:>6.2}",
                millis(d),
                d.as_secs_f64() / revoke::GOAL.as_secs_f64()
            );
        }
    }
    if options.wants("messages") {
        let m = messages::run(&bins, sizes.messages)
            .await
            .context("message_send → message_delivered bench")?;
        println!();
        println!(
            "message_send → message_delivered ({} samples, the agent's session idle); reference: user_message → its echo in the same session",
            m.samples
        );
        println!(
            "{:>6}  {:>12}  {:>12}  {:>10}",
            "", "message", "echo", "added"
        );
        for (name, d, r) in [
            ("p50", m.message.0, m.echo.0),
            ("p99", m.message.1, m.echo.1),
        ] {
            let added = d.as_secs_f64() - r.as_secs_f64();
            println!(
                "{name:>6}  {:>12}  {:>12}  {:>7.3} ms",
                millis(d),
                millis(r),
                added * 1000.0
            );
        }
    }
    if options.wants("paths") {
        paths::run(&sizes.paths).await?;
    }

    if options.wants("terminals") {
        println!();
        let t = terminals::run(&bins, &sizes.terminals)
            .await
            .context("terminal bench")?;
        println!(
            "terminals{mode}: {} MiB pty → client (median of {} alternated runs), and {} keystrokes echoed; reference: the same shell command on a raw pty read in-process; goals: throughput ratio ≥ 0.60, echo p99 ≤ 5 ms added",
            t.bytes / (1024 * 1024),
            t.rounds,
            t.keys
        );
        println!(
            "{:>16}  {:>16}  {:>6}",
            "daemon MiB/s", "raw pty MiB/s", "ratio"
        );
        let mib = |r: f64| r / (1024.0 * 1024.0);
        println!(
            "{:>16.1}  {:>16.1}  {:>6.2}",
            mib(t.throughput.0),
            mib(t.throughput.1),
            t.throughput.0 / t.throughput.1.max(1e-9)
        );
        println!(
            "{:>6}  {:>12}  {:>12}  {:>10}",
            "echo", "daemon", "raw pty", "added"
        );
        for (name, d, r) in [
            ("p50", t.echo.0.0, t.echo.1.0),
            ("p99", t.echo.0.1, t.echo.1.1),
        ] {
            println!(
                "{name:>6}  {:>12}  {:>12}  {:>7.3} ms",
                millis(d),
                millis(r),
                (d.as_secs_f64() - r.as_secs_f64()) * 1000.0
            );
        }
    }

    if options.wants("timers") {
        println!();
        let rest = timers::run(&bins, &sizes.timers).await?;
        println!(
            "timers at rest{mode}: {} agents, {} armed timers, idle {} s each; goal: RSS under 2x idle, CPU under 1% of a core",
            thousands(sizes.timers.agents as f64),
            thousands(sizes.timers.timers as f64),
            sizes.timers.idle.as_secs()
        );
        println!(
            "{:>16}  {:>16}  {:>6}  {:>14}  {:>14}",
            "idle RSS", "armed RSS", "ratio", "idle CPU", "armed CPU"
        );
        println!(
            "{:>16}  {:>16}  {:>6.2}  {:>13.3}%  {:>13.3}%",
            format!("{} KiB", thousands(rest.idle.rss_kib as f64)),
            format!("{} KiB", thousands(rest.armed.rss_kib as f64)),
            rest.armed.rss_kib as f64 / (rest.idle.rss_kib as f64).max(1.0),
            rest.idle.cpu * 100.0,
            rest.armed.cpu * 100.0,
        );
    }
    if options.wants("usage") {
        println!();
        let u = usage::run(&bins, sizes.usage_turns)
            .await
            .context("session_usage bench")?;
        println!(
            "session_usage{mode}: a ledger of {} turns over 1,000 sessions, one session asked, median of 3; goal: at most 1.5x the reference",
            thousands(u.turns as f64)
        );
        println!(
            "{:>16}  {:>28}  {:>6}",
            "session_usage", "reference parse (Value) + sum", "ratio"
        );
        println!(
            "{:>16}  {:>28}  {:>6.3}",
            millis(u.daemon),
            millis(u.reference),
            u.daemon.as_secs_f64() / u.reference.as_secs_f64().max(1e-9)
        );
    }
    if options.wants("upload") {
        println!();
        let up = upload::run(&bins, sizes.upload_bytes)
            .await
            .context("upload bench")?;
        println!(
            "upload{mode}: {} MiB in 4 MiB chunks, median of 3; reference: base64 decode + write + fsync + rename; goal: ratio at least 0.6",
            up.bytes / (1024 * 1024)
        );
        println!(
            "{:>16}  {:>16}  {:>6}",
            "daemon MB/s", "reference MB/s", "ratio"
        );
        println!(
            "{:>16.1}  {:>16.1}  {:>6.2}",
            up.daemon / 1e6,
            up.reference / 1e6,
            up.daemon / up.reference.max(1e-9)
        );
    }
    if options.wants("page") {
        println!();
        let p = page::run(&bins)
            .await
            .context("the remote page's first load")?;
        println!(
            "remote page first load: as sent with gzip (unpacked); budget: {} KB of JS+CSS after gzip",
            page::BUDGET / 1000
        );
        for (path, sent, unpacked) in &p.files {
            println!(
                "{path:>16}  {:>9} B  ({:>9} B)",
                thousands(*sent as f64),
                thousands(*unpacked as f64)
            );
        }
        let used = p.script_and_style();
        println!(
            "{:>16}  {:>9} B  ratio to the budget {:.3}",
            "JS+CSS",
            thousands(used as f64),
            used as f64 / page::BUDGET as f64
        );
        if used > page::BUDGET {
            println!("bench: the page's first load is over its budget");
            ok = false;
        }
    }
    if !ok {
        println!("bench: some clients did not receive every frame (see notes)");
    }
    Ok(ok)
}

fn millis(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// `1234567.8` as `1,234,568`.
fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1234567.8), "1,234,568");
        assert_eq!(millis(Duration::from_micros(1500)), "1.50 ms");
    }
}
