//! Event fan-out: one session's `assistant_delta` flood to N clients, through the daemon,
//! through a bare tokio-tungstenite broadcaster and through a Node broadcaster on the `ws`
//! library (`xtask/node-ws`, what TypeScript daemons run on). Each delta is `t<unix ns at
//! emission>`; every client measures receive time minus that stamp, with the same reader code
//! for all three.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::daemon::{Bins, Daemon, Homes};

const RUN_TIMEOUT: Duration = Duration::from_secs(180);
/// Frames a broadcaster writer sends before one flush, as the daemon's writer does.
const WRITE_BATCH: usize = 64;
/// Lines the fake engine writes to its stdout at once. The bare broadcaster's producer costs
/// next to nothing; one write per line would put a pipe write and a wake-up per event into
/// the daemon's figure that no daemon-side change can remove (on two cores it held the
/// piped floor near 0.6-0.75x of bare). 32 lines (about 1.5 KiB) is what a writer buffering
/// a burst of deltas hands the pipe, and still leaves the daemon splitting and parsing every
/// line itself. `--lines-per-write 1` measures the per-line engine.
pub const LINES_PER_WRITE: usize = 32;

type Ws = WebSocketStream<TcpStream>;

/// One run's result.
pub struct Outcome {
    /// Frames per second per client (median over clients): frames / (last arrival − start).
    pub rate: f64,
    /// 99th percentile of every client's per-frame latency.
    pub p99: Duration,
    /// Whether every client got every frame.
    pub complete: bool,
    pub notes: Vec<String>,
}

impl Outcome {
    /// The median rate and the median p99 of several runs (each judged on its own).
    pub fn median(mut runs: Vec<Outcome>) -> Outcome {
        let complete = runs.iter().all(|r| r.complete);
        let notes = runs
            .iter_mut()
            .flat_map(|r| std::mem::take(&mut r.notes))
            .collect();
        let mut rates: Vec<f64> = runs.iter().map(|r| r.rate).collect();
        let mut p99s: Vec<Duration> = runs.iter().map(|r| r.p99).collect();
        rates.sort_by(f64::total_cmp);
        p99s.sort();
        Outcome {
            rate: rates.get(rates.len() / 2).copied().unwrap_or(0.0),
            p99: p99s.get(p99s.len() / 2).copied().unwrap_or_default(),
            complete,
            notes,
        }
    }
}

/// What one client saw.
struct Seen {
    received: usize,
    latencies_ns: Vec<u64>,
    last: Option<Instant>,
    ended: Option<String>,
}

#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The emission stamp of an `assistant_delta` frame, found without a full parse so that the
/// reader stays cheap next to what it measures.
fn stamp_of(text: &str) -> Option<u64> {
    const KEY: &str = "\"delta\":\"t";
    if !text.contains("\"type\":\"assistant_delta\"") {
        return None;
    }
    let start = text.find(KEY)? + KEY.len();
    let rest = &text[start..];
    rest[..rest.find('"')?].parse().ok()
}

async fn connect(url: &str, addr: SocketAddr) -> Result<Ws> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let config = WebSocketConfig::default()
        .max_message_size(None)
        .max_frame_size(None);
    let (ws, _) = tokio_tungstenite::client_async_with_config(url, stream, Some(config))
        .await
        .context("WebSocket handshake")?;
    Ok(ws)
}

/// Reads until `frames` stamped deltas arrived (or the connection ends).
#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
fn spawn_reader(mut stream: SplitStream<Ws>, frames: usize) -> tokio::task::JoinHandle<Seen> {
    tokio::spawn(async move {
        let mut seen = Seen {
            received: 0,
            latencies_ns: Vec::with_capacity(frames),
            last: None,
            ended: None,
        };
        while seen.received < frames {
            match stream.next().await {
                Some(Ok(Message::Text(text))) => {
                    if let Some(stamp) = stamp_of(text.as_str()) {
                        seen.latencies_ns.push(now_ns().saturating_sub(stamp));
                        seen.received += 1;
                        seen.last = Some(Instant::now());
                    }
                }
                Some(Ok(Message::Close(frame))) => {
                    seen.ended = Some(match frame {
                        Some(f) => format!("closed {} {}", u16::from(f.code), f.reason),
                        None => "closed".into(),
                    });
                    break;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    seen.ended = Some(e.to_string());
                    break;
                }
                None => {
                    seen.ended = Some("end of stream".into());
                    break;
                }
            }
        }
        seen
    })
}

async fn collect(
    readers: Vec<tokio::task::JoinHandle<Seen>>,
    start: Instant,
    frames: usize,
) -> Result<Outcome> {
    let joined = tokio::time::timeout(RUN_TIMEOUT, futures_util::future::join_all(readers))
        .await
        .context("the run did not finish in time")?;
    let mut rates = Vec::new();
    let mut latencies = Vec::new();
    let mut notes = Vec::new();
    let mut short = 0;
    for seen in joined {
        let seen = seen.context("a reader task failed")?;
        if seen.received < frames {
            short += 1;
            if let Some(why) = &seen.ended
                && notes.len() < 3
            {
                notes.push(format!(
                    "a client got {}/{frames} frames: {why}",
                    seen.received
                ));
            }
        }
        if let Some(last) = seen.last {
            let secs = last.duration_since(start).as_secs_f64().max(1e-9);
            rates.push(seen.received as f64 / secs);
        }
        latencies.extend(seen.latencies_ns);
    }
    if short > 0 {
        notes.push(format!("{short} client(s) missed frames"));
    }
    if latencies.is_empty() {
        bail!("no client received a stamped frame");
    }
    rates.sort_by(f64::total_cmp);
    latencies.sort_unstable();
    let p99_index = (latencies.len() * 99).div_ceil(100).saturating_sub(1);
    Ok(Outcome {
        rate: rates.get(rates.len() / 2).copied().unwrap_or(0.0),
        p99: Duration::from_nanos(latencies[p99_index]),
        complete: short == 0,
        notes,
    })
}

/// The daemon with the fake engine's `flood-timed <n> <batch>` script.
#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
pub async fn daemon_run(
    bins: &Bins,
    clients: usize,
    frames: usize,
    batch: usize,
) -> Result<Outcome> {
    let tmp = tempfile::Builder::new().prefix("jucode-bench-").tempdir()?;
    let root = std::fs::canonicalize(tmp.path())?;
    let homes = Homes::under(&root);
    let project = homes.home.join("proj");
    std::fs::create_dir_all(&project)?;
    let mut daemon = Daemon::start(bins, &homes).await?;
    let url = format!("ws://{}/?token={}", daemon.addr, daemon.token);
    let outcome = async {
        let mut sinks: Vec<SplitSink<Ws, Message>> = Vec::new();
        let mut streams = Vec::new();
        for _ in 0..clients {
            let (sink, stream) = connect(&url, daemon.addr).await?.split();
            sinks.push(sink);
            streams.push(stream);
        }
        // The first client creates the session and waits until its engine is up.
        let mut first = streams.remove(0);
        let sink = sinks.first_mut().context("no clients")?;
        let create = json!({"op": "session_create", "cwd": project.display().to_string(), "id": 1});
        sink.send(Message::text(create.to_string())).await?;
        let session = wait_for_session(&mut first).await?;
        streams.insert(0, first);
        let readers: Vec<_> = streams
            .into_iter()
            .map(|s| spawn_reader(s, frames))
            .collect();
        let flood = json!({"op": "user_message", "session": session, "content": format!("flood-timed {frames} {batch}")});
        let start = Instant::now();
        sink.send(Message::text(flood.to_string())).await?;
        let outcome = collect(readers, start, frames).await?;
        drop(sinks);
        Ok::<_, anyhow::Error>(outcome)
    }
    .await;
    let _ = daemon.stop().await;
    let mut outcome = outcome?;
    if outcome.rate == 0.0 {
        outcome
            .notes
            .push("the fake engine sent no stamped deltas: does it know flood-timed?".into());
    }
    Ok(outcome)
}

/// Reads the creator's frames until the session's engine has finished starting (its
/// `mcp_servers` or `attended` event), and returns the session id.
#[allow(
    clippy::disallowed_methods,
    reason = "deadlines for a real daemon run in real time"
)]
async fn wait_for_session(stream: &mut SplitStream<Ws>) -> Result<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut session = None;
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next())
            .await
            .context("the session did not start in time")?;
        let Some(Ok(Message::Text(text))) = next else {
            if next.is_none() {
                bail!("the daemon closed the connection");
            }
            continue;
        };
        let frame: Value = serde_json::from_str(text.as_str())?;
        match frame.get("type").and_then(Value::as_str) {
            Some("session_created") => {
                session = frame
                    .get("session")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            Some("error") => bail!("session_create failed: {frame}"),
            Some("mcp_servers") => {
                if let Some(s) = &session {
                    return Ok(s.clone());
                }
            }
            _ => {}
        }
    }
}

/// The bare broadcaster's side of a run: a queue and a writer per client, connected.
struct BareClients {
    queues: Vec<mpsc::UnboundedSender<Arc<str>>>,
    writers: Vec<tokio::task::JoinHandle<()>>,
    sinks: Vec<SplitSink<Ws, Message>>,
    readers: Vec<tokio::task::JoinHandle<Seen>>,
}

impl BareClients {
    /// Listens, connects `clients` clients and starts their readers.
    async fn connect(clients: usize, frames: usize) -> Result<BareClients> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let acceptor = tokio::spawn(async move {
            let mut queues = Vec::with_capacity(clients);
            let mut writers = Vec::with_capacity(clients);
            for _ in 0..clients {
                let (stream, _) = listener.accept().await?;
                stream.set_nodelay(true)?;
                let ws = tokio_tungstenite::accept_async(stream).await?;
                let (tx, rx) = mpsc::unbounded_channel::<Arc<str>>();
                queues.push(tx);
                writers.push(tokio::spawn(write_loop(ws.split().0, rx)));
            }
            Ok::<_, anyhow::Error>((queues, writers))
        });
        let url = format!("ws://{addr}/");
        let mut streams = Vec::with_capacity(clients);
        for _ in 0..clients {
            streams.push(connect(&url, addr).await?.split());
        }
        let (queues, writers) = acceptor.await.context("the acceptor failed")??;
        let mut sinks = Vec::with_capacity(clients);
        let mut readers = Vec::with_capacity(clients);
        for (sink, stream) in streams {
            sinks.push(sink);
            readers.push(spawn_reader(stream, frames));
        }
        Ok(BareClients {
            queues,
            writers,
            sinks,
            readers,
        })
    }

    fn stop(self) {
        for writer in self.writers {
            writer.abort();
        }
        drop(self.sinks);
    }
}

/// A bare broadcaster: per-client unbounded queue and a writer that feeds and flushes in
/// batches, frames serialized once and stamped as the fake engine stamps them.
#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
pub async fn reference_run(clients: usize, frames: usize) -> Result<Outcome> {
    let mut bare = BareClients::connect(clients, frames).await?;
    let readers = std::mem::take(&mut bare.readers);
    let queues = std::mem::take(&mut bare.queues);
    let start = Instant::now();
    let producer = std::thread::spawn(move || {
        produce(&queues, frames);
        queues
    });
    let outcome = collect(readers, start, frames).await;
    // The queues live until the readers are done, so no writer ends early.
    drop(producer.join());
    bare.stop();
    outcome
}

/// The bare broadcaster fed by the daemon's own engine process: the fake engine's
/// `flood-timed` lines are read from its stdout as the daemon reads them and sent on as they
/// are, with no parse, no state and no hub. What any daemon whose engines are processes must
/// at least do for each event, so the floor under the daemon's figure on this machine.
#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
pub async fn piped_run(
    bins: &Bins,
    clients: usize,
    frames: usize,
    batch: usize,
) -> Result<Outcome> {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

    let tmp = tempfile::Builder::new().prefix("jucode-bench-").tempdir()?;
    let mut bare = BareClients::connect(clients, frames).await?;
    let mut child = tokio::process::Command::new(&bins.fake_serve)
        .args([
            "serve",
            "--session",
            "00000000-0000-4000-8000-000000000000",
            "--cwd",
        ])
        .arg(tmp.path())
        .current_dir(tmp.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting the fake engine")?;
    let stdout = child.stdout.take().context("engine stdout was not piped")?;
    let mut stdin = child.stdin.take().context("engine stdin was not piped")?;
    let mut lines = BufReader::new(stdout).lines();
    let hello = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .context("the fake engine did not greet in time")??
        .context("the fake engine exited")?;
    if !hello.contains("\"hello\"") {
        bail!("the fake engine's first line is not hello: {hello}");
    }
    let readers = std::mem::take(&mut bare.readers);
    let queues = std::mem::take(&mut bare.queues);
    let forward = tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let text: Arc<str> = line.into();
            for q in &queues {
                let _ = q.send(text.clone());
            }
        }
        queues
    });
    let op = json!({"op": "user_message", "content": format!("flood-timed {frames} {batch}")});
    let start = Instant::now();
    stdin.write_all(format!("{op}\n").as_bytes()).await?;
    stdin.flush().await?;
    let outcome = collect(readers, start, frames).await;
    drop(stdin);
    let _ = child.kill().await;
    forward.abort();
    bare.stop();
    outcome
}

/// The producer runs on its own thread, as the engine is its own process: it emits at its
/// natural pace and the runtime's writers drain the queues meanwhile.
fn produce(queues: &[mpsc::UnboundedSender<Arc<str>>], frames: usize) {
    let session = "00000000-0000-4000-8000-000000000000";
    let send_all = |frame: Value| {
        let text: Arc<str> = frame.to_string().into();
        for q in queues {
            let _ = q.send(text.clone());
        }
    };
    send_all(json!({"type": "assistant_start", "session": session}));
    for _ in 0..frames {
        // Written as text, as the fake engine writes its flood lines: the two producers cost
        // about the same, so the ratio compares what happens after them.
        let text = format!(
            r#"{{"type":"assistant_delta","delta":"t{}","session":"{session}"}}"#,
            now_ns()
        );
        let text: Arc<str> = text.into();
        for q in queues {
            let _ = q.send(text.clone());
        }
    }
    send_all(json!({"type": "status", "message": "ready", "session": session}));
}

async fn write_loop(mut sink: SplitSink<Ws, Message>, mut rx: mpsc::UnboundedReceiver<Arc<str>>) {
    while let Some(first) = rx.recv().await {
        if sink.feed(Message::text(first.to_string())).await.is_err() {
            return;
        }
        let mut n = 1;
        while n < WRITE_BATCH {
            let Ok(next) = rx.try_recv() else { break };
            if sink.feed(Message::text(next.to_string())).await.is_err() {
                return;
            }
            n += 1;
        }
        if sink.flush().await.is_err() {
            return;
        }
    }
}

/// Where the Node reference lives, relative to the workspace root.
pub const NODE_PACKAGE: &str = "xtask/node-ws";

/// Why the Node reference cannot run here, if it cannot: the bench installs nothing, it says
/// what to run instead.
pub fn node_missing() -> Option<String> {
    let node = crate::extension::node_program();
    let runs = std::process::Command::new(&node)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        return Some(format!(
            "Node reference skipped: {} does not run (install Node.js 20 or later, or set JUCODE_NODE)",
            node.display()
        ));
    }
    let installed = crate::daemon::workspace_root()
        .map(|r| {
            r.join(NODE_PACKAGE)
                .join("node_modules")
                .join("ws")
                .is_dir()
        })
        .unwrap_or(false);
    if !installed {
        return Some(format!(
            "Node reference skipped: its ws library is not installed (run: npm ci --prefix {NODE_PACKAGE})"
        ));
    }
    None
}

/// The Node broadcaster (`broadcast.mjs`): it serialises each frame once, sends the same
/// buffer to every client and yields to its event loop every 64 frames.
#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
pub async fn node_run(clients: usize, frames: usize) -> Result<Outcome> {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

    let dir = crate::daemon::workspace_root()?.join(NODE_PACKAGE);
    let mut child = tokio::process::Command::new(crate::extension::node_program())
        .current_dir(&dir)
        .arg("broadcast.mjs")
        .arg(clients.to_string())
        .arg(frames.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting the Node broadcaster")?;
    let stdout = child.stdout.take().context("node stdout was not piped")?;
    let mut stdin = child.stdin.take().context("node stdin was not piped")?;
    let mut lines = BufReader::new(stdout).lines();
    let mut next_line = async || {
        tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .context("the Node broadcaster did not answer in time")?
            .context("reading the Node broadcaster")?
            .context("the Node broadcaster exited")
    };
    let port: u16 = next_line()
        .await?
        .strip_prefix("listening ")
        .and_then(|p| p.trim().parse().ok())
        .context("the Node broadcaster did not say where it listens")?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let url = format!("ws://{addr}/");
    let mut sinks = Vec::with_capacity(clients);
    let mut readers = Vec::with_capacity(clients);
    for _ in 0..clients {
        let (sink, stream) = connect(&url, addr).await?.split();
        sinks.push(sink);
        readers.push(spawn_reader(stream, frames));
    }
    if next_line().await? != "ready" {
        bail!("the Node broadcaster did not see every client");
    }
    let start = Instant::now();
    stdin.write_all(b"go\n").await?;
    stdin.flush().await?;
    let outcome = collect(readers, start, frames).await;
    drop(stdin);
    let _ = child.kill().await;
    drop(sinks);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_read_from_deltas_only() {
        assert_eq!(
            stamp_of(r#"{"type":"assistant_delta","delta":"t123","session":"s"}"#),
            Some(123)
        );
        assert_eq!(
            stamp_of(r#"{"type":"assistant_delta","delta":"echo"}"#),
            None
        );
        assert_eq!(stamp_of(r#"{"type":"info","delta":"t5"}"#), None);
    }
}
