//! The fixture runner's view of the daemon: WebSocket clients that queue what they receive, and
//! a minimal HTTP/1.1 client for the plain-HTTP routes.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures_util::stream::SplitSink;
use futures_util::{SinkExt as _, StreamExt as _};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Something a client received, in order.
#[derive(Debug, Clone)]
pub enum Incoming {
    /// A text frame, as sent.
    Text(String),
    /// A binary frame (never part of the protocol), by size.
    Binary(usize),
    /// A close frame: its code, if any, and reason.
    Close(Option<u16>, String),
    /// The connection ended without a close frame.
    Gone(String),
}

impl Incoming {
    pub fn describe(&self) -> String {
        match self {
            Incoming::Text(t) => shorten(t, 400),
            Incoming::Binary(n) => format!("<binary frame of {n} bytes>"),
            Incoming::Close(Some(code), reason) => format!("<close {code} {reason:?}>"),
            Incoming::Close(None, _) => "<close without a code>".into(),
            Incoming::Gone(why) => format!("<connection ended: {why}>"),
        }
    }
}

pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() > max {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}…")
    } else {
        text.to_string()
    }
}

type Sink = SplitSink<WebSocketStream<TcpStream>, Message>;

/// An open WebSocket connection whose frames a background task queues on `rx`.
pub struct Client {
    /// `None` once a detached write took it.
    sink: Option<Sink>,
    pub rx: mpsc::UnboundedReceiver<Incoming>,
    _reader: Task,
    writer: Option<Task>,
}

/// A task aborted when its owner goes away.
pub struct Task(tokio::task::JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How a handshake ended.
pub enum Connected {
    Open(Client),
    /// The daemon answered the upgrade with an HTTP status instead.
    Refused {
        status: u16,
        body: String,
    },
}

/// How a client presents its token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TokenVia {
    Query,
    Header,
}

pub async fn connect(addr: SocketAddr, token: Option<&str>, via: TokenVia) -> Result<Connected> {
    let url = match (token, via) {
        (Some(t), TokenVia::Query) => format!(
            "ws://{addr}/?token={}",
            utf8_percent_encode(t, NON_ALPHANUMERIC)
        ),
        _ => format!("ws://{addr}/"),
    };
    let mut request = url.as_str().into_client_request()?;
    if let (Some(t), TokenVia::Header) = (token, via) {
        request.headers_mut().insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {t}")).context("token as a header")?,
        );
    }
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .context("connecting timed out")??;
    stream.set_nodelay(true)?;
    // The client may send and receive frames far above the daemon's limits (oversize tests).
    let config = WebSocketConfig::default()
        .max_message_size(None)
        .max_frame_size(None);
    let handshake = tokio_tungstenite::client_async_with_config(request, stream, Some(config));
    let ws = match tokio::time::timeout(CONNECT_TIMEOUT, handshake)
        .await
        .context("the WebSocket handshake timed out")?
    {
        Ok((ws, _)) => ws,
        Err(tungstenite::Error::Http(response)) => {
            let status = response.status().as_u16();
            let body = response
                .body()
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            return Ok(Connected::Refused { status, body });
        }
        Err(e) => return Err(e).context("WebSocket handshake"),
    };
    let (sink, mut stream) = ws.split();
    let (tx, rx) = mpsc::unbounded_channel();
    let reader = Task(tokio::spawn(async move {
        loop {
            let item = match stream.next().await {
                Some(Ok(Message::Text(t))) => Incoming::Text(t.as_str().to_string()),
                Some(Ok(Message::Binary(b))) => Incoming::Binary(b.len()),
                Some(Ok(Message::Close(frame))) => match frame {
                    Some(f) => Incoming::Close(Some(u16::from(f.code)), f.reason.to_string()),
                    None => Incoming::Close(None, String::new()),
                },
                Some(Ok(_)) => continue,
                Some(Err(e)) => Incoming::Gone(e.to_string()),
                None => Incoming::Gone("end of stream".into()),
            };
            let last = matches!(item, Incoming::Close(..) | Incoming::Gone(_));
            if tx.send(item).is_err() || last {
                break;
            }
        }
    }));
    Ok(Connected::Open(Client {
        sink: Some(sink),
        rx,
        _reader: reader,
        writer: None,
    }))
}

impl Client {
    fn sink(&mut self) -> Result<&mut Sink> {
        self.sink
            .as_mut()
            .context("this client's connection is busy with an oversized frame")
    }

    pub async fn send_text(&mut self, text: String) -> Result<()> {
        self.sink()?
            .send(Message::text(text))
            .await
            .context("sending a frame")
    }

    pub async fn send_binary(&mut self, bytes: Vec<u8>) -> Result<()> {
        self.sink()?
            .send(Message::binary(bytes))
            .await
            .context("sending a binary frame")
    }

    /// Sends without waiting for the write to finish: a peer that stops reading mid-frame
    /// (the oversize case) must not stall the fixture. The reader keeps receiving meanwhile.
    pub fn send_detached(&mut self, text: String) -> Result<()> {
        let mut sink = self
            .sink
            .take()
            .context("a detached write is already running")?;
        self.writer = Some(Task(tokio::spawn(async move {
            let _ = sink.send(Message::text(text)).await;
            // Hold the socket open until the fixture is done with this client.
            std::future::pending::<()>().await;
        })));
        Ok(())
    }

    /// Closes politely (close frame, then drop).
    pub async fn close(mut self) {
        if let Some(sink) = self.sink.as_mut() {
            let _ = tokio::time::timeout(Duration::from_secs(2), sink.close()).await;
        }
    }
}

/// A plain HTTP answer.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// One HTTP/1.1 request on its own connection (the daemon answers `Connection: close`).
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: Option<&[u8]>,
) -> Result<HttpResponse> {
    let mut stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .context("connecting timed out")??;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    if let Some(body) = body {
        stream.write_all(body).await?;
    }
    let mut raw = Vec::new();
    tokio::time::timeout(CONNECT_TIMEOUT, stream.read_to_end(&mut raw))
        .await
        .context("the HTTP answer timed out")??;
    parse_response(&raw)
}

fn parse_response(raw: &[u8]) -> Result<HttpResponse> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("the HTTP answer has no end of headers")?;
    let head = std::str::from_utf8(&raw[..split]).context("HTTP headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .with_context(|| format!("bad status line {status_line:?}"))?;
    let mut headers = Vec::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            bail!("bad header line {line:?}");
        };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let mut body = &raw[split + 4..];
    if let Some(len) = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
    {
        body = &body[..len.min(body.len())];
    }
    Ok(HttpResponse {
        status,
        headers,
        body: String::from_utf8_lossy(body).into_owned(),
    })
}
