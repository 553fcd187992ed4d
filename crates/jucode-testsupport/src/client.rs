//! A WebSocket client speaking the daemon protocol, and a one-shot HTTP request.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::{CONNECT_BATCH, RECV_TIMEOUT};

/// The WebSocket type a [`Client`] wraps.
pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

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

    /// Connects, then reads the connect batch up to and including its last frame
    /// ([`CONNECT_BATCH`]) into [`Client::connect_batch`].
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
            let last = CONNECT_BATCH
                .last()
                .is_some_and(|l| frame_type(&frame) == *l);
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

    /// Creates a session of the default engine in `cwd` and waits until its engine is up (its
    /// first `mcp_servers`); returns the session's id.
    pub async fn start_session(&mut self, cwd: &std::path::Path) -> Result<String> {
        let created = self
            .request(serde_json::json!({"op": "session_create", "cwd": cwd.display().to_string()}))
            .await?;
        if created["type"] != "session_created" {
            bail!("session_create answered {created}");
        }
        let id = created["session"]
            .as_str()
            .context("no session id")?
            .to_string();
        self.recv_type("mcp_servers", Some(&id)).await?;
        Ok(id)
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
    http_with(addr, method, path, &[], body).await
}

/// As [`http`], with more request headers (`Accept-Encoding`, `If-None-Match`, …).
pub async fn http_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<HttpResponse> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .context("connect")?;
    let body = body.unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
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
