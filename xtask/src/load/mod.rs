//! `cargo xtask load`: the release daemon under many clients doing cheap ops while sessions
//! stream, with one client that stops reading. Pass criteria and how each is measured are in
//! docs/DECISIONS.md ("Proof under load").

mod client;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;

use crate::daemon::{self, Bins, Daemon, Homes};
use client::{Phase, Ws};

pub struct Options {
    pub quick: bool,
    pub build: bool,
    pub clients: Option<usize>,
    pub rate: Option<f64>,
    pub seconds: Option<u64>,
    pub sessions: Option<usize>,
    /// Milliseconds between one session's deltas.
    pub stream_ms: Option<u64>,
    /// The daemon's `--keepalive` in seconds.
    pub keepalive: Option<u64>,
}

/// The stalled client must be closed within this of its last read: it answers no ping, so the
/// daemon gives up after its unanswered keepalive intervals (the last pong it had may be up to
/// one interval old), with a few seconds for the check's granularity.
fn stall_bound(keepalive: Duration) -> Duration {
    keepalive * (jucode_server::ws::KEEPALIVE_MISSES + 1) + Duration::from_secs(5)
}
/// The others' op p99 with the stalled client, against the baseline's.
const P99_FACTOR: f64 = 2.0;
/// Below this a p99 is scheduling noise on a shared 2-core box; the factor applies above it.
const P99_FLOOR: Duration = Duration::from_millis(5);
/// Peak daemon RSS: a base plus a share per client.
const RSS_BASE_KIB: u64 = 64 * 1024;
const RSS_PER_CLIENT_KIB: u64 = 256;
const WARMUP: Duration = Duration::from_secs(2);
const DRAIN: Duration = Duration::from_secs(20);
const CHILD_ENV: &str = "JUCODE_XTASK_LOAD_CHILD";

struct Sizes {
    clients: usize,
    rate: f64,
    seconds: u64,
    sessions: usize,
    stream_ms: u64,
    keepalive: Duration,
}

pub fn run(options: Options) -> Result<bool> {
    // The clients are xtask code: unoptimized, they would be what is measured.
    if cfg!(debug_assertions) && std::env::var_os(CHILD_ENV).is_none() {
        return run_optimized(&options);
    }
    raise_fd_limit(options.clients.unwrap_or(500) as u64 * 2 + 256)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(run_all(options))
}

fn run_optimized(options: &Options) -> Result<bool> {
    if options.build {
        let status = std::process::Command::new(daemon::cargo_program())
            .current_dir(daemon::workspace_root()?)
            .args(["build", "--release", "-p", "jucode-daemon", "-p"])
            .args(["jucode-testsupport", "-p", "xtask"])
            .status()
            .context("running cargo build --release")?;
        if !status.success() {
            bail!("cargo build --release failed ({status})");
        }
    }
    let xtask = daemon::target_dir()?.join("release").join("xtask");
    let mut child = std::process::Command::new(&xtask);
    child.args(["load", "--no-build"]).env(CHILD_ENV, "1");
    if options.quick {
        child.arg("--quick");
    }
    let flags = [
        ("--clients", options.clients.map(|v| v.to_string())),
        ("--rate", options.rate.map(|v| v.to_string())),
        ("--seconds", options.seconds.map(|v| v.to_string())),
        ("--sessions", options.sessions.map(|v| v.to_string())),
        ("--stream-ms", options.stream_ms.map(|v| v.to_string())),
        ("--keepalive", options.keepalive.map(|v| v.to_string())),
    ];
    for (flag, value) in flags {
        if let Some(value) = value {
            child.arg(flag).arg(value);
        }
    }
    let status = child
        .status()
        .with_context(|| format!("running {} (build it with --release)", xtask.display()))?;
    Ok(status.success())
}

/// Each client is a socket here and one in the daemon, which inherits the limit.
fn raise_fd_limit(needed: u64) -> Result<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).context("reading RLIMIT_NOFILE")?;
    if soft >= needed {
        return Ok(());
    }
    if hard < needed {
        bail!("the open-file limit is {hard}, {needed} are needed: raise it (ulimit -Hn)");
    }
    setrlimit(Resource::RLIMIT_NOFILE, needed, hard).context("raising RLIMIT_NOFILE")?;
    Ok(())
}

async fn connect(url: &str, addr: SocketAddr, recv_buffer: Option<u32>) -> Result<(Ws, u16)> {
    let socket = TcpSocket::new_v4()?;
    if let Some(size) = recv_buffer {
        socket.set_recv_buffer_size(size)?;
    }
    let stream: TcpStream = socket.connect(addr).await?;
    stream.set_nodelay(true)?;
    let port = stream.local_addr()?.port();
    let (ws, _) = tokio_tungstenite::client_async(url, stream)
        .await
        .context("WebSocket handshake")?;
    Ok((ws, port))
}

/// Sends `op` and reads until the frame with its `id` (other frames are dropped).
#[allow(clippy::disallowed_methods, reason = "deadlines for a real daemon")]
async fn request(ws: &mut Ws, mut op: Value, id: u64) -> Result<Value> {
    op["id"] = json!(id);
    ws.send(Message::text(op.to_string())).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let frame = tokio::time::timeout_at(deadline, ws.next())
            .await
            .context("no reply in time")?
            .context("the daemon closed the connection")??;
        let Message::Text(text) = frame else { continue };
        let frame: Value = serde_json::from_str(text.as_str())?;
        if frame.get("id").and_then(Value::as_u64) == Some(id) {
            return Ok(frame);
        }
    }
}

/// Creates a session and waits until its engine is up.
async fn create_session(ws: &mut Ws, cwd: &str, id: u64) -> Result<String> {
    let reply = request(ws, json!({"op": "session_create", "cwd": cwd}), id).await?;
    let session = reply
        .get("session")
        .and_then(Value::as_str)
        .with_context(|| format!("session_create: {reply}"))?
        .to_string();
    loop {
        let text = match ws.next().await {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(_)) => continue,
            _ => bail!("the daemon closed the desk's connection"),
        };
        let frame: Value = serde_json::from_str(text.as_str())?;
        if frame["type"] == "mcp_servers" && frame["session"] == session.as_str() {
            return Ok(session);
        }
    }
}

/// The TCP state of the daemon's end of the connection from `client_port` (`/proc/net/tcp`:
/// `01` is established), or `None` once that end is gone.
fn daemon_side_state(daemon_port: u16, client_port: u16) -> Option<String> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let local = format!(":{daemon_port:04X}");
    let remote = format!(":{client_port:04X}");
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let ok = f.get(1)?.ends_with(&local) && f.get(2)?.ends_with(&remote);
        ok.then(|| f.get(3).map(|s| s.to_string())).flatten()
    })
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn percentile(sorted: &[u32], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = (sorted.len() * p).div_ceil(100).saturating_sub(1);
    Duration::from_micros(u64::from(sorted[i.min(sorted.len() - 1)]))
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

#[allow(clippy::disallowed_methods, reason = "a load test measures real time")]
async fn run_all(options: Options) -> Result<bool> {
    if options.build {
        daemon::build(true).await?;
    }
    let (c, r, s, m) = if options.quick {
        (100, 20.0, 10, 5)
    } else {
        (500, 20.0, 60, 20)
    };
    let sizes = Sizes {
        clients: options.clients.unwrap_or(c),
        rate: options.rate.unwrap_or(r),
        seconds: options.seconds.unwrap_or(s),
        sessions: options.sessions.unwrap_or(m).max(1),
        stream_ms: options.stream_ms.unwrap_or(100).max(1),
        // Short in the CI form so the stall phase is short; the daemon's own default otherwise.
        keepalive: Duration::from_secs(options.keepalive.unwrap_or(if options.quick {
            5
        } else {
            jucode_server::ws::KEEPALIVE.as_secs()
        }))
        .max(Duration::from_secs(1)),
    };
    let bins = Bins::of_profile("release")?;
    let tmp = tempfile::Builder::new().prefix("jucode-load-").tempdir()?;
    let root = std::fs::canonicalize(tmp.path())?;
    let homes = Homes::under(&root);
    let project = homes.home.join("proj");
    std::fs::create_dir_all(&project)?;
    let keepalive = sizes.keepalive.as_secs().to_string();
    let mut daemon = Daemon::start_with(&bins, &homes, &["--keepalive", &keepalive]).await?;
    let outcome = drive(&daemon, &sizes, &project.display().to_string()).await;
    let _ = daemon.stop().await;
    if outcome.is_err() {
        eprintln!("load: the daemon's log is {}", homes.log.display());
        // Keep the directory for a look at the log.
        let _ = tmp.keep();
    }
    outcome
}

#[allow(clippy::disallowed_methods, reason = "a load test measures real time")]
async fn drive(daemon: &Daemon, sizes: &Sizes, cwd: &str) -> Result<bool> {
    let pid = daemon.pid().context("the daemon has no pid")?;
    let url = format!("ws://{}/?token={}", daemon.addr, daemon.token);
    let rss_idle = rss_kib(pid).unwrap_or(0);

    // The desk: checks that every op of the mix is answered, then creates the sessions.
    let (mut desk, _) = connect(&url, daemon.addr, None).await?;
    for (i, op) in client::MIX.iter().enumerate() {
        let reply = request(&mut desk, json!({"op": op}), 1_000_000 + i as u64).await?;
        if reply["type"] == "error" {
            bail!("{op} is refused, so it cannot be in the mix: {reply}");
        }
    }
    let mut sessions = Vec::new();
    for i in 0..sizes.sessions {
        sessions.push(create_session(&mut desk, cwd, 2_000_000 + i as u64).await?);
    }

    // Every client (and the stalled one) connects before the streams start, so each must see
    // every delta the desk sees.
    let mut clients = Vec::with_capacity(sizes.clients);
    for chunk in (0..sizes.clients).collect::<Vec<_>>().chunks(50) {
        let batch = chunk.iter().map(|_| connect(&url, daemon.addr, None));
        for ws in futures_util::future::join_all(batch).await {
            clients.push(ws.context("connecting a load client")?.0);
        }
    }
    // A small receive window, as a phone on a poor link has: the kernel holds little for it.
    let (stalled, stalled_port) = connect(&url, daemon.addr, Some(4096)).await?;
    let rss_connected = rss_kib(pid).unwrap_or(0);

    let (phase_tx, phase_rx) = watch::channel(Phase::Warmup);
    let stall_bound = stall_bound(sizes.keepalive);
    let total = WARMUP + Duration::from_secs(sizes.seconds) + stall_bound + DRAIN;
    let deltas = total.as_millis() as u64 / sizes.stream_ms + 1;
    let stream = format!("stream {deltas} {}", sizes.stream_ms);
    let n = sessions.len();
    let desk_task = tokio::spawn(client::run(
        desk,
        1.0,
        Duration::ZERO,
        Some(client::Desk { sessions, stream }),
        n,
        phase_rx.clone(),
    ));
    let mut tasks = Vec::with_capacity(clients.len());
    for (i, ws) in clients.into_iter().enumerate() {
        // Spread over one period, so the ops do not all leave in the same instant.
        let offset = Duration::from_secs_f64(i as f64 / sizes.clients as f64 / sizes.rate);
        tasks.push(tokio::spawn(client::run(
            ws,
            sizes.rate,
            offset,
            None,
            n,
            phase_rx.clone(),
        )));
    }
    // The stalled client reads like the others until the stall begins, then keeps its socket
    // open and never reads again.
    let mut stall_rx = phase_rx.clone();
    let stall_task = tokio::spawn(async move {
        let mut ws = stalled;
        loop {
            tokio::select! {
                _ = ws.next() => {}
                changed = stall_rx.changed() => {
                    if changed.is_err() || *stall_rx.borrow() >= Phase::Stall {
                        return ws;
                    }
                }
            }
        }
    });
    let rss_task = tokio::spawn(async move {
        let mut samples = Vec::new();
        while let Some(kib) = rss_kib(pid) {
            samples.push(kib);
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        samples
    });

    tokio::time::sleep(WARMUP).await;
    let half = Duration::from_secs(sizes.seconds) / 2;
    let _ = phase_tx.send(Phase::Baseline);
    tokio::time::sleep(half).await;
    let _ = phase_tx.send(Phase::Stall);
    let held = stall_task.await.context("the stalled client's task")?;
    let stalled_at = Instant::now();
    let stall_end = stalled_at + half;
    let mut closed_after = None;
    loop {
        let state = daemon_side_state(daemon.addr.port(), stalled_port);
        if closed_after.is_none() && state.as_deref() != Some("01") {
            closed_after = Some(stalled_at.elapsed());
        }
        let now = Instant::now();
        if now >= stall_end && (closed_after.is_some() || stalled_at.elapsed() >= stall_bound) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stall_phase = stalled_at.elapsed();
    let _ = phase_tx.send(Phase::Drain);
    let drained = tokio::time::timeout(DRAIN, async {
        let mut all = Vec::new();
        for t in tasks.iter_mut() {
            all.push(t.await);
        }
        all
    })
    .await;
    let _ = phase_tx.send(Phase::Done);
    let results = match drained {
        Ok(all) => all,
        Err(_) => {
            let mut all = Vec::new();
            for t in tasks {
                all.push(t.await);
            }
            all
        }
    };
    let desk_stats = desk_task.await.context("the desk's task")?;
    drop(held);
    let rss_end = rss_kib(pid).unwrap_or(0);
    rss_task.abort();
    let rss_peak = rss_task
        .await
        .unwrap_or_default()
        .into_iter()
        .max()
        .unwrap_or(rss_end);

    // Figures.
    let mut base = Vec::new();
    let mut stall = Vec::new();
    let mut dbase = Vec::new();
    let mut dstall = Vec::new();
    let (mut sent, mut errors, mut missing, mut ended, mut short) = (0, 0, 0, 0, 0);
    let mut notes = Vec::new();
    for stats in results {
        let stats = stats.context("a client task failed")?;
        sent += stats.sent;
        errors += stats.errors;
        missing += stats.missing;
        if stats.deltas != desk_stats.deltas {
            short += 1;
        }
        if let Some(why) = &stats.ended {
            ended += 1;
            if notes.len() < 3 {
                notes.push(why.clone());
            }
        }
        notes.extend(stats.first_errors.into_iter().take(3 - notes.len().min(3)));
        base.extend(stats.baseline);
        stall.extend(stats.stall);
        dbase.extend(stats.delta_baseline);
        dstall.extend(stats.delta_stall);
    }
    errors += desk_stats.errors;
    missing += desk_stats.missing;
    for v in [&mut base, &mut stall, &mut dbase, &mut dstall] {
        v.sort_unstable();
    }
    let measured = Duration::from_secs(sizes.seconds) / 2 + stall_phase;
    let achieved = (base.len() + stall.len()) as f64 / measured.as_secs_f64().max(1e-9);
    println!(
        "load: {} clients x {} ops/s for {} s ({} s baseline, {:.1} s with a stalled client), {} sessions streaming a delta every {} ms to every client",
        sizes.clients,
        sizes.rate,
        sizes.seconds,
        half.as_secs(),
        stall_phase.as_secs_f64(),
        sizes.sessions,
        sizes.stream_ms
    );
    println!(
        "ops: {sent} sent, achieved {:.0} ops/s of {:.0} asked; {errors} errors, {missing} missing replies; {} renames (p50 {}); session deltas: {} per client, {short} clients short",
        achieved,
        sizes.clients as f64 * sizes.rate,
        desk_stats.renames.len(),
        ms(percentile(
            &{
                let mut r = desk_stats.renames.clone();
                r.sort_unstable();
                r
            },
            50
        )),
        desk_stats.deltas
    );
    println!(
        "{:>22}  {:>10}  {:>10}  {:>10}  {:>10}",
        "", "samples", "p50", "p99", "max"
    );
    for (name, v) in [
        ("op latency, baseline", &base),
        ("op latency, stalled", &stall),
        ("delta, baseline", &dbase),
        ("delta, stalled", &dstall),
    ] {
        println!(
            "{name:>22}  {:>10}  {:>10}  {:>10}  {:>10}",
            v.len(),
            ms(percentile(v, 50)),
            ms(percentile(v, 99)),
            ms(percentile(v, 100))
        );
    }
    let rss_bound = RSS_BASE_KIB + RSS_PER_CLIENT_KIB * sizes.clients as u64;
    println!(
        "daemon RSS: idle {} KiB, connected {} KiB, peak {} KiB, end {} KiB (bound {} KiB)",
        rss_idle, rss_connected, rss_peak, rss_end, rss_bound
    );
    match closed_after {
        Some(d) => println!(
            "stalled client: closed by the daemon {} after it stopped reading (keepalive {} s, bound {} s)",
            ms(d),
            sizes.keepalive.as_secs(),
            stall_bound.as_secs()
        ),
        None => println!(
            "stalled client: still open {} s after it stopped reading (keepalive {} s)",
            stall_bound.as_secs(),
            sizes.keepalive.as_secs()
        ),
    }
    for note in &notes {
        println!("  note: {note}");
    }

    let mut ok = true;
    let mut fail = |why: String| {
        println!("load: FAILED: {why}");
        ok = false;
    };
    if errors + missing > 0 {
        fail(format!("{errors} error replies, {missing} missing replies"));
    }
    if ended > 0 {
        fail(format!("{ended} load clients lost their connection"));
    }
    if short > 0 || desk_stats.deltas == 0 {
        fail(format!(
            "{short} clients did not get every delta ({} expected)",
            desk_stats.deltas
        ));
    }
    if rss_peak > rss_bound {
        fail(format!("peak RSS {rss_peak} KiB over {rss_bound} KiB"));
    }
    match closed_after {
        Some(d) if d <= stall_bound => {}
        _ => fail("the stalled client was not closed in time".into()),
    }
    let (p99_base, p99_stall) = (percentile(&base, 99), percentile(&stall, 99));
    let allowed = p99_base.mul_f64(P99_FACTOR).max(P99_FLOOR);
    if base.is_empty() || stall.is_empty() || p99_stall > allowed {
        fail(format!(
            "op p99 with the stalled client {} over {} ({P99_FACTOR}x the baseline, at least {})",
            ms(p99_stall),
            ms(allowed),
            ms(P99_FLOOR)
        ));
    }
    Ok(ok)
}
