//! Terminals: throughput pty → client through the daemon against a raw pty read of the same
//! stream, and keystroke echo through the daemon against a raw pty's echo. Both sides run
//! `/bin/sh` on a pty and are sent the same command; output is counted as its zero bytes
//! (only `head -c N /dev/zero` prints them), so the echo of the command does not count.
//! Each side does what its client must: the daemon's parses every `term_output` frame's JSON
//! and decodes its base64 (the daemon had to encode it); the reference reads the pty in a
//! thread of its own and hands each read over a channel.

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use futures_util::{SinkExt as _, StreamExt as _};
use portable_pty::{CommandBuilder, PtySize};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::daemon::{Bins, Daemon, Homes};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

const WAIT: Duration = Duration::from_secs(60);
/// Throughput runs of each side.
const ROUNDS: usize = 3;

pub struct Sizes {
    /// Bytes of output per throughput run.
    pub bytes: usize,
    /// Keystrokes per echo measurement.
    pub keys: usize,
}

pub struct Report {
    pub bytes: usize,
    /// Bytes per second, each side's median over `rounds` runs: daemon, reference.
    pub throughput: (f64, f64),
    pub rounds: usize,
    pub keys: usize,
    /// Echo p50 and p99: daemon, reference.
    pub echo: ((Duration, Duration), (Duration, Duration)),
}

#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
fn now() -> Instant {
    Instant::now()
}

pub async fn run(bins: &Bins, sizes: &Sizes) -> Result<Report> {
    let tmp = tempfile::Builder::new().prefix("jucode-bench-").tempdir()?;
    let root = std::fs::canonicalize(tmp.path())?;
    let homes = Homes::under(&root);
    // An agent's working directory is a known directory: the terminal opens there.
    let project = homes.home.join("proj");
    std::fs::create_dir_all(&project)?;
    let agent_dir = homes.jucode_home.join("agents").join("bench");
    std::fs::create_dir_all(&agent_dir)?;
    std::fs::write(
        agent_dir.join("agent.json"),
        json!({"name": "Bench", "cwd": project}).to_string(),
    )?;
    let mut daemon = Daemon::start(bins, &homes).await?;
    let url = format!("ws://{}/?token={}", daemon.addr, daemon.token);
    let outcome = measure(&url, &project, sizes).await;
    let _ = daemon.stop().await;
    outcome
}

async fn measure(url: &str, project: &std::path::Path, sizes: &Sizes) -> Result<Report> {
    let (mut ws, _) = tokio_tungstenite::connect_async(url)
        .await
        .context("WebSocket handshake")?;
    let reply = request(
        &mut ws,
        json!({"op": "term_open", "cwd": project, "cols": 120, "rows": 40, "id": "t"}),
    )
    .await?;
    let term = reply["term"]
        .as_str()
        .context("no terminal id")?
        .to_string();
    let mut daemon = DaemonTerm { ws, term };
    let mut reference = RawTerm::open(project)?;
    // Both shells get the same start: no prompt, no line editing in the way.
    for t in [&mut daemon as &mut dyn Term, &mut reference] {
        t.write(b"PS1=; PS2=; stty -echoctl\n").await?;
        t.zeros(0).await?;
    }
    let cmd = format!("head -c {} /dev/zero\n", sizes.bytes);
    // Alternated, the reference first, so a burst of load elsewhere hits both alike; and
    // repeated, each side's median counting, so one burst does not decide the ratio.
    let mut rates = [Vec::new(), Vec::new()];
    for _ in 0..ROUNDS {
        for (side, t) in [&mut reference as &mut dyn Term, &mut daemon]
            .into_iter()
            .enumerate()
        {
            let start = now();
            t.write(cmd.as_bytes()).await?;
            t.zeros(sizes.bytes).await?;
            rates[side].push(sizes.bytes as f64 / (now() - start).as_secs_f64().max(1e-9));
        }
    }
    let [reference_rates, daemon_rates] = rates.map(median);
    // `cat` echoes each keystroke through the pty's line discipline.
    let mut echoes = Vec::new();
    for t in [&mut reference as &mut dyn Term, &mut daemon] {
        t.write(b"cat\n").await?;
        t.settle().await?;
        let mut samples = Vec::with_capacity(sizes.keys);
        for _ in 0..sizes.keys {
            let start = now();
            t.write(b"x").await?;
            t.until_byte(b'x').await?;
            samples.push(now() - start);
        }
        echoes.push(percentiles(samples));
    }
    Ok(Report {
        bytes: sizes.bytes,
        throughput: (daemon_rates, reference_rates),
        rounds: ROUNDS,
        keys: sizes.keys,
        echo: (echoes[1], echoes[0]),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn percentiles(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    let at = |p: f64| {
        v.get(((v.len().saturating_sub(1)) as f64 * p).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    (at(0.5), at(0.99))
}

/// One side of the comparison: it writes input and reads output chunks; the reading loops
/// are shared.
trait Term: Send {
    /// Writes input.
    fn write<'a>(&'a mut self, bytes: &'a [u8]) -> BoxFuture<'a, Result<()>>;
    /// The next output chunk; `None` when nothing came for `quiet`.
    fn chunk(&mut self, quiet: Duration) -> BoxFuture<'_, Result<Option<Vec<u8>>>>;

    /// Reads output until `n` zero bytes were seen (0: until the shell is quiet).
    fn zeros(&mut self, n: usize) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            if n == 0 {
                return self.settle().await;
            }
            let mut seen = 0;
            while seen < n {
                let chunk = self.chunk(WAIT).await?.context("no output in time")?;
                seen += chunk.iter().filter(|b| **b == 0).count();
            }
            Ok(())
        })
    }

    /// Reads and drops output until none arrives for a moment.
    fn settle(&mut self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            while self.chunk(Duration::from_millis(300)).await?.is_some() {}
            Ok(())
        })
    }

    /// Reads until `byte` appears.
    fn until_byte(&mut self, byte: u8) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            loop {
                let chunk = self.chunk(WAIT).await?.context("no echo in time")?;
                if chunk.contains(&byte) {
                    return Ok(());
                }
            }
        })
    }
}

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

struct DaemonTerm {
    ws: Ws,
    term: String,
}

impl DaemonTerm {
    /// The next output chunk; `None` when nothing came for `quiet`.
    async fn next_chunk(&mut self, quiet: Duration) -> Result<Option<Vec<u8>>> {
        loop {
            let msg = match tokio::time::timeout(quiet, self.ws.next()).await {
                Err(_) => return Ok(None),
                Ok(None) => bail!("the daemon closed the connection"),
                Ok(Some(msg)) => msg?,
            };
            let Message::Text(text) = msg else { continue };
            let frame: Value = serde_json::from_str(text.as_str())?;
            match frame["type"].as_str() {
                Some("term_output") if frame["term"] == self.term.as_str() => {
                    let data = frame["data"].as_str().context("no data")?;
                    return Ok(Some(
                        base64::engine::general_purpose::STANDARD.decode(data)?,
                    ));
                }
                Some("term_exit") | Some("error") => bail!("the terminal answered {frame}"),
                _ => {}
            }
        }
    }
}

impl Term for DaemonTerm {
    fn write<'a>(&'a mut self, bytes: &'a [u8]) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let data = base64::engine::general_purpose::STANDARD.encode(bytes);
            let op = json!({"op": "term_input", "term": self.term, "data": data});
            self.ws.send(Message::text(op.to_string())).await?;
            Ok(())
        })
    }

    fn chunk(&mut self, quiet: Duration) -> BoxFuture<'_, Result<Option<Vec<u8>>>> {
        Box::pin(self.next_chunk(quiet))
    }
}

/// The reference: a pty read directly, in a thread of its own, handing chunks over a channel.
struct RawTerm {
    writer: Box<dyn std::io::Write + Send>,
    chunks: tokio::sync::mpsc::Receiver<Vec<u8>>,
    _child: Box<dyn portable_pty::Child + Send + Sync>,
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl RawTerm {
    fn open(cwd: &std::path::Path) -> Result<RawTerm> {
        let pair = portable_pty::native_pty_system()
            .openpty(PtySize {
                rows: 40,
                cols: 120,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| anyhow::anyhow!("openpty: {e}"))?;
        let mut cmd = CommandBuilder::new("/bin/sh");
        cmd.cwd(cwd);
        cmd.env("TERM", "xterm-256color");
        let child = pair
            .slave
            .spawn_command(cmd)
            .map_err(|e| anyhow::anyhow!("spawn /bin/sh: {e}"))?;
        drop(pair.slave);
        let mut reader = pair
            .master
            .try_clone_reader()
            .map_err(|e| anyhow::anyhow!("pty reader: {e}"))?;
        let writer = pair
            .master
            .take_writer()
            .map_err(|e| anyhow::anyhow!("pty writer: {e}"))?;
        let (tx, chunks) = tokio::sync::mpsc::channel(64);
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.blocking_send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Ok(RawTerm {
            writer,
            chunks,
            _child: child,
            _master: pair.master,
        })
    }

    async fn next_chunk(&mut self, quiet: Duration) -> Result<Option<Vec<u8>>> {
        match tokio::time::timeout(quiet, self.chunks.recv()).await {
            Err(_) => Ok(None),
            Ok(None) => bail!("the reference shell ended"),
            Ok(Some(chunk)) => Ok(Some(chunk)),
        }
    }
}

impl Term for RawTerm {
    fn write<'a>(&'a mut self, bytes: &'a [u8]) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.writer.write_all(bytes)?;
            self.writer.flush()?;
            Ok(())
        })
    }

    fn chunk(&mut self, quiet: Duration) -> BoxFuture<'_, Result<Option<Vec<u8>>>> {
        Box::pin(self.next_chunk(quiet))
    }
}

async fn request(ws: &mut Ws, op: Value) -> Result<Value> {
    let id = op["id"].clone();
    ws.send(Message::text(op.to_string())).await?;
    let read = async {
        while let Some(msg) = ws.next().await {
            if let Message::Text(text) = msg? {
                let frame: Value = serde_json::from_str(text.as_str())?;
                if frame["id"] == id {
                    if frame["type"] == "error" {
                        bail!("the daemon answered {frame}");
                    }
                    return Ok(frame);
                }
            }
        }
        bail!("the daemon closed the connection")
    };
    tokio::time::timeout(WAIT, read)
        .await
        .context("no answer from the daemon in time")?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bench's own plumbing on the debug build (its numbers mean nothing there):
    /// `cargo test -p xtask -- --ignored terminal_bench_runs`.
    #[tokio::test]
    #[ignore = "needs the debug daemon built"]
    async fn terminal_bench_runs() {
        let bins = Bins::of_profile("debug").unwrap();
        let sizes = Sizes {
            bytes: 8 * 1024 * 1024,
            keys: 20,
        };
        let r = run(&bins, &sizes).await.unwrap();
        eprintln!("throughput {:?} echo {:?}", r.throughput, r.echo);
        assert!(r.throughput.0 > 0.0 && r.throughput.1 > 0.0);
        assert!(r.echo.0.1 >= r.echo.0.0);
    }
}
