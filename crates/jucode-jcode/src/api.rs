//! The Harness API v1 client: NDJSON frames over the private bridge's Unix
//! socket. One reader task matches replies to requests by `reply_to` and hands
//! every streaming event (no `reply_to`) to one consumer, in order.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{mpsc, oneshot};

use crate::{Error, Result};

/// The only API major version this client speaks.
pub const API_VERSION: u64 = 1;
/// Longest frame the client reads (jcode's own client frame cap).
pub const MAX_FRAME: usize = 16 << 20;
/// How long a simple request may take before the connection counts as hung.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A reply and how many streaming events the reader forwarded before it, so
/// a caller can tell which events preceded the reply on the wire.
#[derive(Debug)]
pub struct Reply {
    pub frame: Value,
    pub events_before: u64,
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Reply>>>>;

/// Fields never written to the frame log (credentials a request could carry).
const SECRET_KEYS: [&str; 3] = ["api_key", "token", "authorization"];

/// An owner-only debug log of every Harness API frame, one JSON object a
/// line in the layout of the recorded frames (`t`, `conn`, `dir`, `frame`).
/// Credential fields are replaced before writing.
#[derive(Clone)]
pub struct FrameLog {
    file: Arc<Mutex<std::fs::File>>,
    /// Started when the log was opened: frames are stamped with the time since.
    opened: jucode_clock::SystemClock,
    conn: String,
}

impl FrameLog {
    /// Open (append) `path`, 0600, never through a symlink.
    pub fn open(path: &Path) -> Result<FrameLog> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        Ok(FrameLog {
            file: Arc::new(Mutex::new(file)),
            opened: jucode_clock::SystemClock::new(),
            conn: String::new(),
        })
    }

    /// The same file, labelling frames with connection `conn`.
    pub fn for_conn(&self, conn: impl Into<String>) -> FrameLog {
        FrameLog {
            conn: conn.into(),
            ..self.clone()
        }
    }

    /// Record one frame; `dir` is `>` (to the bridge), `<` (from it) or `<eof`.
    pub fn record(&self, dir: &str, frame: Option<&Value>) {
        use std::io::Write;
        let frame = frame.map(redacted).unwrap_or(Value::Null);
        let line = json!({
            "t": jucode_clock::Clock::elapsed(&self.opened).as_secs_f64(),
            "conn": self.conn,
            "dir": dir,
            "frame": frame,
        });
        let mut f = lock(&self.file);
        let _ = writeln!(f, "{line}");
    }
}

/// A copy of `v` with every credential field replaced.
fn redacted(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    if SECRET_KEYS.contains(&k.to_ascii_lowercase().as_str()) {
                        (k.clone(), json!("<redacted>"))
                    } else {
                        (k.clone(), redacted(v))
                    }
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(redacted).collect()),
        other => other.clone(),
    }
}

/// One session as `list_sessions` / `attached` report it.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct SessionInfo {
    pub session_id: String,
    #[serde(default)]
    pub working_dir: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub transcript_bytes: Option<u64>,
    #[serde(default)]
    pub archived: Option<bool>,
}

/// One provider route of `get_runtime_info`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Route {
    pub model: String,
    pub provider: String,
    #[serde(default)]
    pub api_method: Option<String>,
    #[serde(default)]
    pub available: bool,
    #[serde(default)]
    pub detail: Option<String>,
}

/// `runtime_info`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct RuntimeInfo {
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    #[serde(default)]
    pub routes: Vec<Route>,
}

/// A connected, handshaken client.
pub struct Client {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    next_id: AtomicU64,
    pending: Pending,
    frames: Option<FrameLog>,
    pub server: String,
    pub capabilities: Vec<String>,
}

impl Client {
    /// Connect to `socket`, say hello and check the version. Streaming events
    /// go to the returned receiver; it closes when the connection does.
    pub async fn connect(
        socket: &Path,
        client_name: &str,
    ) -> Result<(Client, mpsc::UnboundedReceiver<Value>)> {
        Client::connect_logged(socket, client_name, None).await
    }

    /// [`Client::connect`], writing every frame to `frames` when given.
    pub async fn connect_logged(
        socket: &Path,
        client_name: &str,
        frames: Option<FrameLog>,
    ) -> Result<(Client, mpsc::UnboundedReceiver<Value>)> {
        let stream = UnixStream::connect(socket).await.map_err(|e| {
            let what = format!("{}: {e}", socket.display());
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                Error::ConnectDenied(what)
            } else {
                Error::Connect(what)
            }
        })?;
        let (rd, wr) = stream.into_split();
        let pending: Pending = Arc::default();
        let (ev_tx, ev_rx) = mpsc::unbounded_channel();
        tokio::spawn(read_loop(
            BufReader::new(rd),
            pending.clone(),
            ev_tx,
            frames.clone(),
        ));
        let mut client = Client {
            writer: tokio::sync::Mutex::new(wr),
            next_id: AtomicU64::new(1),
            pending,
            frames,
            server: String::new(),
            capabilities: Vec::new(),
        };
        let hello = client
            .request(
                "hello",
                json!({"min_version": API_VERSION, "max_version": API_VERSION, "client": client_name}),
            )
            .await;
        let hello = match hello {
            Ok(v) => v,
            Err(Error::Api { code, message, .. }) if code == "unsupported_version" => {
                return Err(Error::UnsupportedVersion(message));
            }
            Err(Error::Api { code, message, .. }) => {
                return Err(Error::Handshake(format!("{code}: {message}")));
            }
            Err(Error::Closed) => return Err(Error::Handshake("closed during hello".into())),
            Err(e) => return Err(e),
        };
        if hello["ev"] != "hello_ok" {
            return Err(Error::Handshake(format!(
                "unexpected reply {}",
                hello["ev"]
            )));
        }
        if hello["version"].as_u64() != Some(API_VERSION) {
            return Err(Error::UnsupportedVersion(format!(
                "bridge chose version {}",
                hello["version"]
            )));
        }
        client.server = hello["server"].as_str().unwrap_or_default().to_string();
        client.capabilities = hello["capabilities"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|c| c.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        Ok((client, ev_rx))
    }

    /// Write one request frame and return the receiver of its reply.
    pub async fn start_request(
        &self,
        req: &str,
        fields: Value,
    ) -> Result<oneshot::Receiver<Reply>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut frame = Map::new();
        frame.insert("v".into(), json!(API_VERSION));
        frame.insert("id".into(), json!(id));
        frame.insert("req".into(), json!(req));
        if let Value::Object(f) = fields {
            frame.extend(f);
        }
        let frame = Value::Object(frame);
        if let Some(log) = &self.frames {
            log.record(">", Some(&frame));
        }
        let mut line = serde_json::to_vec(&frame).map_err(|e| Error::Protocol(e.to_string()))?;
        line.push(b'\n');
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        let mut w = self.writer.lock().await;
        if w.write_all(&line).await.is_err() || w.flush().await.is_err() {
            lock(&self.pending).remove(&id);
            return Err(Error::Closed);
        }
        Ok(rx)
    }

    /// One request and its reply; an `error` reply is [`Error::Api`].
    pub async fn request(&self, req: &str, fields: Value) -> Result<Value> {
        self.request_ordered(req, fields).await.map(|r| r.frame)
    }

    /// [`Client::request`], keeping where the reply sat among the events.
    pub async fn request_ordered(&self, req: &str, fields: Value) -> Result<Reply> {
        let rx = self.start_request(req, fields).await?;
        let reply = match tokio::time::timeout(REQUEST_TIMEOUT, rx).await {
            Ok(Ok(v)) => v,
            Ok(Err(_)) => return Err(Error::Closed),
            Err(_) => return Err(Error::Protocol(format!("no reply to {req}"))),
        };
        Ok(Reply {
            frame: check_reply(req, reply.frame)?,
            events_before: reply.events_before,
        })
    }

    pub async fn list_sessions(&self, include_archived: bool) -> Result<Vec<SessionInfo>> {
        let v = self
            .request(
                "list_sessions",
                json!({"include_archived": include_archived}),
            )
            .await?;
        serde_json::from_value(v["sessions"].clone())
            .map_err(|e| Error::Protocol(format!("sessions: {e}")))
    }

    pub async fn create_session(&self, working_dir: &Path) -> Result<SessionInfo> {
        let v = self
            .request(
                "create_session",
                json!({"working_dir": working_dir.display().to_string()}),
            )
            .await?;
        attached(v)
    }

    /// Attach `session_id`; an attach that returns another session is refused
    /// (jcode silently creates a new session for an unknown id).
    pub async fn attach_session(&self, session_id: &str) -> Result<SessionInfo> {
        let v = self
            .request("attach_session", json!({"session_id": session_id}))
            .await?;
        let got = attached(v)?;
        if got.session_id != session_id {
            return Err(Error::AttachMismatch {
                asked: session_id.to_string(),
                got: got.session_id,
            });
        }
        Ok(got)
    }

    pub async fn set_model(&self, session_id: &str, model: &str) -> Result<()> {
        self.request(
            "set_model",
            json!({"session_id": session_id, "model": model}),
        )
        .await
        .map(drop)
    }

    pub async fn set_reasoning_effort(&self, session_id: &str, effort: &str) -> Result<()> {
        self.request(
            "set_reasoning_effort",
            json!({"session_id": session_id, "effort": effort}),
        )
        .await
        .map(drop)
    }

    pub async fn runtime_info(&self, session_id: &str) -> Result<RuntimeInfo> {
        let v = self
            .request("get_runtime_info", json!({"session_id": session_id}))
            .await?;
        serde_json::from_value(v).map_err(|e| Error::Protocol(format!("runtime_info: {e}")))
    }

    /// Start a turn. Success has no reply frame (the turn's events say how it
    /// went); the returned receiver yields a refusal if the bridge sends one.
    pub async fn send_message(
        &self,
        session_id: &str,
        content: &str,
    ) -> Result<oneshot::Receiver<Reply>> {
        self.start_request(
            "send_message",
            json!({"session_id": session_id, "content": content}),
        )
        .await
    }

    /// Context only: no turn runs.
    pub async fn send_no_reply(&self, session_id: &str, content: &str) -> Result<()> {
        self.request(
            "send_message",
            json!({"session_id": session_id, "content": content, "no_reply": true}),
        )
        .await
        .map(drop)
    }

    /// Queue `content` for injection into the running turn.
    pub async fn soft_interrupt(
        &self,
        session_id: &str,
        content: &str,
        urgent: bool,
    ) -> Result<Reply> {
        self.request_ordered(
            "soft_interrupt",
            json!({"session_id": session_id, "content": content, "urgent": urgent}),
        )
        .await
    }

    /// Drop every queued soft interrupt of the session.
    pub async fn cancel_soft_interrupts(&self, session_id: &str) -> Result<()> {
        self.request("cancel_soft_interrupts", json!({"session_id": session_id}))
            .await
            .map(drop)
    }

    /// The flattened transcript (`{role, content}` rows).
    pub async fn history(&self, session_id: &str) -> Result<Vec<(String, String)>> {
        let v = self
            .request("get_history", json!({"session_id": session_id}))
            .await?;
        Ok(v["messages"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|m| {
                        (
                            m["role"].as_str().unwrap_or_default().to_string(),
                            m["content"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    pub async fn detach(&self, session_id: &str) -> Result<()> {
        self.request("detach_session", json!({"session_id": session_id}))
            .await
            .map(drop)
    }
}

/// An `error` reply becomes [`Error::Api`].
pub fn check_reply(req: &str, reply: Value) -> Result<Value> {
    if reply["ev"] == "error" {
        return Err(Error::Api {
            req: req.to_string(),
            code: reply["code"].as_str().unwrap_or("internal").to_string(),
            message: reply["message"].as_str().unwrap_or_default().to_string(),
        });
    }
    Ok(reply)
}

fn attached(v: Value) -> Result<SessionInfo> {
    if v["ev"] != "attached" {
        return Err(Error::Protocol(format!(
            "expected attached, got {}",
            v["ev"]
        )));
    }
    serde_json::from_value(v["session"].clone())
        .map_err(|e| Error::Protocol(format!("attached: {e}")))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn read_loop(
    mut rd: BufReader<tokio::net::unix::OwnedReadHalf>,
    pending: Pending,
    events: mpsc::UnboundedSender<Value>,
    frames: Option<FrameLog>,
) {
    let mut buf = Vec::new();
    let mut forwarded = 0u64;
    loop {
        buf.clear();
        // Bounded read: a frame over the cap ends the connection.
        let mut limited = (&mut rd).take(MAX_FRAME as u64 + 1);
        match limited.read_until(b'\n', &mut buf).await {
            Ok(0) => break,
            Ok(_) if buf.len() > MAX_FRAME => {
                tracing::warn!("Harness API frame over {MAX_FRAME} bytes; closing");
                break;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(error = %e, "Harness API read failed");
                break;
            }
        }
        let line = buf.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let Ok(frame) = serde_json::from_slice::<Value>(line) else {
            tracing::warn!("Harness API sent a frame that is not JSON; closing");
            break;
        };
        if let Some(log) = &frames {
            log.record("<", Some(&frame));
        }
        match frame.get("reply_to").and_then(Value::as_u64) {
            Some(id) => {
                if let Some(tx) = lock(&pending).remove(&id) {
                    let _ = tx.send(Reply {
                        frame,
                        events_before: forwarded,
                    });
                }
            }
            None => {
                forwarded += 1;
                let _ = events.send(frame);
            }
        }
    }
    if let Some(log) = &frames {
        log.record("<eof", None);
    }
    // Dropping every pending sender makes each waiter see the close.
    lock(&pending).clear();
}

use tokio::io::AsyncReadExt as _;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_frame_log_is_owner_only_and_never_holds_a_key() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("frames.jsonl");
        let log = FrameLog::open(&path).unwrap().for_conn("2");
        log.record(
            ">",
            Some(
                &json!({"v": 1, "id": 3, "req": "set_api_key", "provider": "openai-api",
                "api_key": "sk-SECRET", "nested": [{"Authorization": "Bearer SECRET2"}]}),
            ),
        );
        log.record("<eof", None);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("SECRET"), "{text}");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["conn"], "2");
        assert_eq!(lines[0]["dir"], ">");
        assert_eq!(lines[0]["frame"]["api_key"], "<redacted>");
        assert_eq!(lines[0]["frame"]["req"], "set_api_key");
        assert_eq!(lines[1]["dir"], "<eof");
        assert!(lines[1]["frame"].is_null());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        // A symlink planted at the path is not followed.
        let victim = t.path().join("victim");
        std::fs::write(&victim, b"").unwrap();
        let link = t.path().join("link.jsonl");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(FrameLog::open(&link).is_err());
    }
}
