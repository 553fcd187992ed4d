//! Test support for the jucode daemon's integration tests.
//!
//! Start with [`Daemon::start`]: it runs the built `jucode-daemon` binary on a free loopback
//! port, with the scripted engine `jucode-fake-serve` (`src/bin/fake_serve.rs`) as its serve
//! engine. [`Daemon::client`] then opens a WebSocket [`Client`] that has already read the
//! connect batch. The fake engine's scripts (`sleep <ms>`, `approve <cmd>`, `flood <n>`,
//! `crash`, echo) are described at the top of that binary.
//!
//! Both binaries must be built before the tests run:
//! `cargo build -p jucode-testsupport -p jucode-daemon`.

pub mod bench_latency;
pub mod fake_model;
pub mod harness;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures_util::{SinkExt as _, StreamExt as _};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The frame types the daemon sends on connect, in order (`hello` first, `requirements` last).
pub const CONNECT_BATCH: &[&str] = &[
    "hello",
    "sessions",
    "workspaces",
    "agents",
    "schedules",
    "questions",
    "actions",
    "dispatches",
    "requirements",
];

/// The WebSocket type a [`Client`] wraps.
pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long a [`Client`] waits for a frame (or a connect) before failing the test.
pub const RECV_TIMEOUT: Duration = Duration::from_secs(20);
const START_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
const LISTEN_MARKER: &str = "listening on http://";

/// Query-string characters left as they are (RFC 3986 unreserved).
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The built `jucode-fake-serve` binary.
pub fn fake_serve_bin() -> Result<PathBuf> {
    find_bin("jucode-fake-serve", "jucode-testsupport")
}

/// The built `jucode-daemon` binary.
pub fn daemon_bin() -> Result<PathBuf> {
    find_bin("jucode-daemon", "jucode-daemon")
}

/// Looks next to the running test binary, then one level up: integration tests run from
/// `target/<profile>/deps`, binaries land in `target/<profile>`.
fn find_bin(name: &str, package: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locate the running test binary")?;
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    let dir = exe.parent();
    let mut looked = Vec::new();
    for dir in dir.into_iter().chain(dir.and_then(Path::parent)) {
        let candidate = dir.join(&file);
        if candidate.is_file() {
            return Ok(candidate);
        }
        looked.push(candidate.display().to_string());
    }
    bail!(
        "{file} is not built (looked at {}); run `cargo build -p {package}` first",
        looked.join(", ")
    )
}

type Logs = Arc<Mutex<Vec<String>>>;

fn snapshot(logs: &Logs) -> Vec<String> {
    // A panicking drain task cannot leave the Vec half-written, so poison is harmless.
    logs.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone()
}

fn push_log(logs: &Logs, line: String) {
    logs.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(line);
}

/// Reads a pipe to its end so the daemon never blocks on a full pipe.
async fn drain<R: AsyncRead + Unpin>(mut lines: tokio::io::Lines<BufReader<R>>, logs: Logs) {
    while let Ok(Some(line)) = lines.next_line().await {
        push_log(&logs, line);
    }
}

/// `jucode daemon listening on http://127.0.0.1:PORT` → the address.
fn parse_listen_line(line: &str) -> Option<Result<SocketAddr>> {
    let (_, rest) = line.split_once(LISTEN_MARKER)?;
    let addr = rest
        .split(|c: char| c.is_whitespace() || c == '/')
        .next()
        .unwrap_or_default();
    Some(
        addr.parse()
            .with_context(|| format!("cannot parse the listen address in {line:?}")),
    )
}

/// A running `jucode-daemon` child process with its own home directory.
pub struct Daemon {
    pub addr: SocketAddr,
    pub home: PathBuf,
    child: Child,
    logs: Logs,
}

impl Daemon {
    /// Spawns `jucode-daemon --listen 127.0.0.1:0 --home <home> --no-relay` with
    /// `JUCODE_SERVE_BIN` pointing at the fake engine, and waits (30 s at most) for its
    /// "listening on http://" line. Its stdout and stderr are collected into [`Daemon::logs`].
    pub async fn start(home: &Path) -> Result<Daemon> {
        Daemon::start_with(home, &[]).await
    }

    /// As [`Daemon::start`], with more command-line arguments (e.g. `--web <dir>`).
    pub async fn start_with(home: &Path, extra_args: &[&str]) -> Result<Daemon> {
        Daemon::spawn(home, extra_args, Some(fake_serve_bin()?)).await
    }

    /// Starts the daemon with its built-in jucode engine (no `JUCODE_SERVE_BIN`), after
    /// writing `config` as `<home>/config.json` (e.g. [`fake_model::FakeModel::config`]).
    pub async fn start_builtin(home: &Path, config: &Value) -> Result<Daemon> {
        std::fs::create_dir_all(home).with_context(|| format!("create {}", home.display()))?;
        let path = home.join("config.json");
        std::fs::write(&path, serde_json::to_vec_pretty(config)?)
            .with_context(|| format!("write {}", path.display()))?;
        Daemon::spawn(home, &[], None).await
    }

    async fn spawn(home: &Path, extra_args: &[&str], serve_bin: Option<PathBuf>) -> Result<Daemon> {
        let daemon = daemon_bin()?;
        std::fs::create_dir_all(home).with_context(|| format!("create {}", home.display()))?;
        let mut command = Command::new(&daemon);
        match &serve_bin {
            Some(engine) => command.env("JUCODE_SERVE_BIN", engine),
            None => command.env_remove("JUCODE_SERVE_BIN"),
        };
        let mut child = command
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--home")
            .arg(home)
            .arg("--no-relay")
            .args(extra_args)
            // The user's home is the temporary directory around the jucode home, so `~` and
            // new projects stay inside the test's directory.
            .env("HOME", home.parent().unwrap_or(home))
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawn {}", daemon.display()))?;
        let logs: Logs = Arc::default();
        let stdout = child.stdout.take().context("daemon stdout is not piped")?;
        let stderr = child.stderr.take().context("daemon stderr is not piped")?;
        let stderr_done = tokio::spawn(drain(BufReader::new(stderr).lines(), logs.clone()));

        let mut lines = BufReader::new(stdout).lines();
        let wait_for_listen = async {
            while let Some(line) = lines.next_line().await.context("read daemon stdout")? {
                let parsed = parse_listen_line(&line);
                push_log(&logs, line);
                if let Some(addr) = parsed {
                    return addr.map(Some);
                }
            }
            Ok(None)
        };
        let addr = match tokio::time::timeout(START_TIMEOUT, wait_for_listen).await {
            Ok(Ok(Some(addr))) => addr,
            Ok(Ok(None)) => {
                let status = child.wait().await.context("wait for the daemon")?;
                // Its last words are on stderr: read them all before reporting.
                let _ = tokio::time::timeout(Duration::from_secs(5), stderr_done).await;
                bail!(
                    "daemon exited ({status}) before listening; output:\n{}",
                    snapshot(&logs).join("\n")
                );
            }
            Ok(Err(err)) => {
                let _ = child.start_kill();
                return Err(err.context(format!("output:\n{}", snapshot(&logs).join("\n"))));
            }
            Err(_) => {
                let _ = child.start_kill();
                bail!(
                    "daemon printed no {LISTEN_MARKER:?} line within 30 s; output:\n{}",
                    snapshot(&logs).join("\n")
                );
            }
        };
        tokio::spawn(drain(lines, logs.clone()));
        Ok(Daemon {
            addr,
            home: home.to_path_buf(),
            child,
            logs,
        })
    }

    /// The daemon's client token, `<home>/daemon/token`.
    pub fn token(&self) -> Result<String> {
        let path = self.home.join("daemon").join("token");
        let token =
            std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
        Ok(token.trim().to_string())
    }

    /// `ws://<addr>/?token=<token>`, the token percent-encoded.
    pub fn url(&self, token: &str) -> String {
        format!(
            "ws://{}/?token={}",
            self.addr,
            utf8_percent_encode(token, QUERY_VALUE)
        )
    }

    /// Connects with the daemon's token and reads the connect batch.
    pub async fn client(&self) -> Result<Client> {
        let token = self.token()?;
        Client::connect_and_greet(&self.url(&token)).await
    }

    /// SIGKILL, no cleanup: for crash-recovery tests.
    pub fn kill9(&mut self) {
        // Fails only if the child is already gone, which is what the caller wants anyway.
        let _ = self.child.start_kill();
    }

    /// SIGKILL and wait until the process is gone (its lock on the state directory with it).
    pub async fn kill9_and_wait(&mut self) -> Result<ExitStatus> {
        self.kill9();
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .context("the killed daemon did not go away within 10 s")?
            .context("wait for the daemon")
    }

    /// SIGTERM, then waits up to 10 s. A daemon that does not exit by then is killed and
    /// the call fails.
    pub async fn stop(&mut self) -> Result<ExitStatus> {
        if let Some(pid) = self.child.id() {
            let pid = i32::try_from(pid).context("daemon pid out of range")?;
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            )
            .context("send SIGTERM to the daemon")?;
        }
        match tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await {
            Ok(status) => status.context("wait for the daemon"),
            Err(_) => {
                let _ = self.child.kill().await;
                bail!(
                    "daemon did not exit within 10 s of SIGTERM and was killed; output:\n{}",
                    self.logs().join("\n")
                )
            }
        }
    }

    /// Every line the daemon printed so far, stdout and stderr interleaved as read.
    pub fn logs(&self) -> Vec<String> {
        snapshot(&self.logs)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Connects to `url`, optionally with `Authorization: Bearer <bearer>`. `Ok(Err(status))`
/// when the server refused the handshake with an HTTP response (e.g. 401).
pub async fn connect_status(url: &str, bearer: Option<&str>) -> Result<Result<(), u16>> {
    let mut request = url
        .into_client_request()
        .with_context(|| format!("build a WebSocket request for {url}"))?;
    if let Some(token) = bearer {
        let value = HeaderValue::from_str(&format!("Bearer {token}"))
            .context("bearer token is not a valid header")?;
        request.headers_mut().insert("authorization", value);
    }
    let connected = tokio::time::timeout(RECV_TIMEOUT, tokio_tungstenite::connect_async(request))
        .await
        .map_err(|_| anyhow!("WebSocket connect to {url} timed out"))?;
    match connected {
        Ok((mut ws, _)) => {
            let _ = ws.close(None).await;
            Ok(Ok(()))
        }
        Err(tungstenite::Error::Http(response)) => Ok(Err(response.status().as_u16())),
        Err(err) => Err(err).with_context(|| format!("WebSocket connect to {url}")),
    }
}

/// A WebSocket client speaking the daemon protocol (JSON text frames).
pub struct Client {
    ws: Ws,
    next_id: u64,
    /// Frames read by [`Client::request`] that were not its reply; read first by
    /// [`Client::recv`] and [`Client::recv_until`].
    backlog: VecDeque<Value>,
    /// The frames read by [`Client::connect_and_greet`], `hello` through `requirements`.
    pub connect_batch: Vec<Value>,
}

impl Client {
    /// Connects and reads nothing.
    pub async fn connect(url: &str) -> Result<Client> {
        let connected = tokio::time::timeout(
            RECV_TIMEOUT,
            tokio_tungstenite::connect_async(url.to_string()),
        )
        .await
        .map_err(|_| anyhow!("WebSocket connect to {url} timed out"))?;
        let (ws, _) = connected.with_context(|| format!("WebSocket connect to {url}"))?;
        Ok(Client {
            ws,
            next_id: 1,
            backlog: VecDeque::new(),
            connect_batch: Vec::new(),
        })
    }

    /// Connects, then reads the connect batch up to and including `requirements` (its last
    /// frame) into [`Client::connect_batch`].
    pub async fn connect_and_greet(url: &str) -> Result<Client> {
        let mut client = Client::connect(url).await?;
        loop {
            let frame = client.recv().await.with_context(|| {
                format!(
                    "reading the connect batch; got so far: {:?}",
                    client
                        .connect_batch
                        .iter()
                        .map(frame_type)
                        .collect::<Vec<_>>()
                )
            })?;
            let last = frame_type(&frame) == "requirements";
            client.connect_batch.push(frame);
            if last {
                return Ok(client);
            }
        }
    }

    /// Sends one JSON text frame.
    pub async fn send(&mut self, frame: Value) -> Result<()> {
        self.send_text(&frame.to_string()).await
    }

    /// Sends raw text, e.g. something that is not JSON.
    pub async fn send_text(&mut self, text: &str) -> Result<()> {
        self.ws
            .send(Message::text(text))
            .await
            .context("send a WebSocket frame")
    }

    /// The next frame (backlog first), 20 s at most.
    pub async fn recv(&mut self) -> Result<Value> {
        if let Some(frame) = self.backlog.pop_front() {
            return Ok(frame);
        }
        tokio::time::timeout(RECV_TIMEOUT, self.next_frame())
            .await
            .map_err(|_| anyhow!("no frame from the daemon within 20 s"))?
    }

    /// Sends `op` with a fresh numeric `id` and returns the frame echoing that id. Other
    /// frames read meanwhile go to the backlog.
    pub async fn request(&mut self, mut op: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        op.as_object_mut()
            .context("request op must be a JSON object")?
            .insert("id".into(), Value::from(id));
        let kind = op.get("op").cloned().unwrap_or_default();
        self.send(op).await?;
        let wait = async {
            loop {
                let frame = self.next_frame().await?;
                if frame.get("id").and_then(Value::as_u64) == Some(id) {
                    return Ok(frame);
                }
                self.backlog.push_back(frame);
            }
        };
        tokio::time::timeout(RECV_TIMEOUT, wait)
            .await
            .map_err(|_| anyhow!("no reply to request {id} (op {kind}) within 20 s"))?
    }

    /// Reads (backlog first) until `pred` matches and returns that frame; the frames before
    /// it are dropped. 20 s at most.
    pub async fn recv_until(&mut self, mut pred: impl FnMut(&Value) -> bool) -> Result<Value> {
        // The last few skipped frame types make a timeout readable.
        let mut skipped: VecDeque<String> = VecDeque::new();
        let wait = async {
            loop {
                let frame = match self.backlog.pop_front() {
                    Some(frame) => frame,
                    None => self.next_frame().await?,
                };
                if pred(&frame) {
                    return Ok(frame);
                }
                if skipped.len() == 10 {
                    skipped.pop_front();
                }
                skipped.push_back(frame_type(&frame).to_string());
            }
        };
        match tokio::time::timeout(RECV_TIMEOUT, wait).await {
            Ok(result) => result,
            Err(_) => bail!("no matching frame within 20 s; last frames skipped: {skipped:?}"),
        }
    }

    /// Reads until a frame of type `kind` (for `session` when given).
    pub async fn recv_type(&mut self, kind: &str, session: Option<&str>) -> Result<Value> {
        self.recv_until(|frame| {
            frame_type(frame) == kind
                && session.is_none_or(|s| frame.get("session").and_then(Value::as_str) == Some(s))
        })
        .await
        .with_context(|| format!("waiting for a {kind:?} frame (session {session:?})"))
    }

    /// Closes the connection, waiting briefly for the close handshake.
    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            while let Some(Ok(_)) = self.ws.next().await {}
        })
        .await;
    }

    /// Raw access, for tests that send binary or oversized frames.
    pub fn ws(&mut self) -> &mut Ws {
        &mut self.ws
    }

    /// The next text frame off the socket, skipping ping/pong; no timeout of its own.
    async fn next_frame(&mut self) -> Result<Value> {
        loop {
            let message = self
                .ws
                .next()
                .await
                .context("the WebSocket ended without a close frame")?
                .context("WebSocket read failed")?;
            match message {
                Message::Text(text) => {
                    return serde_json::from_str(text.as_str()).with_context(|| {
                        format!(
                            "daemon sent a text frame that is not JSON: {}",
                            text.as_str()
                        )
                    });
                }
                Message::Binary(bytes) => {
                    bail!("daemon sent a binary frame ({} bytes)", bytes.len())
                }
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
                Message::Close(Some(close)) => bail!(
                    "daemon closed the WebSocket: code {} ({}), reason {:?}",
                    u16::from(close.code),
                    close.code,
                    close.reason.as_str()
                ),
                Message::Close(None) => bail!("daemon closed the WebSocket without a code"),
            }
        }
    }
}

fn frame_type(frame: &Value) -> &str {
    frame
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listen_line_gives_the_address() -> Result<()> {
        let line = "jucode daemon listening on http://127.0.0.1:45123";
        let addr = parse_listen_line(line).context("marker not found")??;
        assert_eq!(addr, "127.0.0.1:45123".parse::<SocketAddr>()?);
        let addr = parse_listen_line("x listening on http://[::1]:80/ now")
            .context("marker not found")??;
        assert_eq!(addr.port(), 80);
        assert!(parse_listen_line("starting up").is_none());
        assert!(
            parse_listen_line("listening on http://nowhere")
                .context("marker not found")?
                .is_err()
        );
        Ok(())
    }

    #[test]
    fn a_missing_binary_says_how_to_build_it() -> Result<()> {
        let err = find_bin("no-such-binary", "some-package")
            .err()
            .context("found a binary that does not exist")?;
        assert!(
            err.to_string().contains("cargo build -p some-package"),
            "{err}"
        );
        Ok(())
    }
}

/// A plain HTTP/1.1 response: status, lower-cased headers and body.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Result<Value> {
        serde_json::from_slice(&self.body).context("response body is not JSON")
    }
}

/// Sends one HTTP/1.1 request over a fresh TCP connection and reads the whole response (the
/// daemon answers plain HTTP with `Connection: close`).
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
) -> Result<HttpResponse> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .context("connect")?;
    let body = body.unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(RECV_TIMEOUT, stream.read_to_end(&mut raw))
        .await
        .context("the HTTP response did not come within 20 s")??;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of headers in the response")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .context("no status line")?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(HttpResponse {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    })
}
