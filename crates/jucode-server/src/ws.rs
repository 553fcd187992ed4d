//! The WebSocket side: authentication at the handshake, then one reader and one writer per
//! connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use jucode_hub::{ClientId, Connection, FrameText, Frames, Hub, Kick, Outgoing};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Bytes, Error as WsError, Message, Utf8Bytes};

use crate::Shared;
use crate::http::{Body, text};

/// The largest message a client may send: a 4 MB upload chunk as base64 in JSON, with room.
pub const MAX_MESSAGE: usize = 8 * 1024 * 1024;
/// The largest single frame read before it is judged. Larger than [`MAX_MESSAGE`] so that a
/// client sending a somewhat oversized frame has finished sending it when the 1009 close
/// comes (closing while it still sends would reset the connection and lose the close frame);
/// beyond this the connection is cut without reading the rest.
const MAX_FRAME: usize = 2 * MAX_MESSAGE;
/// Frames written in one go before a flush.
const WRITE_BATCH: usize = 64;
/// How long one write (a batch of frames, or the close frame) may take before the client is
/// judged stalled and its connection reset. Generous for a slow link: even a 16 MiB catch-up
/// needs only about 4.5 Mbit/s to move within it.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the peer gets to answer our close frame before the socket is closed anyway.
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// How often each client is pinged (the daemon's `--keepalive`).
pub const KEEPALIVE: Duration = Duration::from_secs(20);
/// A client from which nothing (not even a pong) has come for this many keepalive ticks in a
/// row is judged gone and its connection reset. Socket buffers can hide a client that stopped
/// reading for many minutes when little is sent to it; an unanswered ping cannot.
pub const KEEPALIVE_MISSES: u32 = 3;

pub(crate) fn is_upgrade(req: &Request<Incoming>) -> bool {
    let has = |name: header::HeaderName, token: &str| {
        req.headers()
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|v| v.trim().eq_ignore_ascii_case(token))
    };
    has(header::UPGRADE, "websocket") && has(header::CONNECTION, "upgrade")
}

/// The token a client presents: `?token=` or `Authorization: Bearer`.
fn presented_token(req: &Request<Incoming>) -> Option<String> {
    if let Some(query) = req.uri().query() {
        for pair in query.split('&') {
            if let Some(value) = pair.strip_prefix("token=") {
                let decoded = percent_encoding::percent_decode_str(value)
                    .decode_utf8()
                    .ok()?;
                return Some(decoded.into_owned());
            }
        }
    }
    let auth = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = auth.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_string())
}

pub(crate) fn upgrade(req: Request<Incoming>, shared: Arc<Shared>) -> Response<Body> {
    let Some(auth) = presented_token(&req).and_then(|t| shared.hub.authenticate(&t)) else {
        return text(StatusCode::UNAUTHORIZED, "a valid token is needed\n");
    };
    let version_ok = req
        .headers()
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_some_and(|v| v == "13");
    let Some(key) = req.headers().get(header::SEC_WEBSOCKET_KEY).cloned() else {
        return text(StatusCode::BAD_REQUEST, "missing Sec-WebSocket-Key\n");
    };
    if !version_ok {
        let mut r = text(StatusCode::UPGRADE_REQUIRED, "WebSocket version 13 only\n");
        r.headers_mut().insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        return r;
    }
    let accept = derive_accept_key(key.as_bytes());
    let hub = shared.hub.clone();
    let timing = Timing {
        write: shared.write_timeout,
        keepalive: shared.keepalive,
    };
    // Held for the connection's life: the server waits for these to flush before it exits.
    let live = shared.live.clone();
    tokio::spawn(async move {
        let upgraded = match hyper::upgrade::on(req).await {
            Ok(upgraded) => upgraded,
            Err(e) => {
                tracing::debug!("upgrade failed: {e}");
                return;
            }
        };
        // Back to the TCP stream itself, so a stalled client can be reset rather than left
        // half-closed with megabytes queued; bytes hyper read past the request come along.
        let parts = match upgraded.downcast::<TokioIo<TcpStream>>() {
            Ok(parts) => parts,
            Err(_) => {
                tracing::warn!("an upgraded connection is not plain TCP; dropping it");
                return;
            }
        };
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE))
            .max_frame_size(Some(MAX_FRAME))
            .max_write_buffer_size(4 * MAX_MESSAGE);
        let ws = WebSocketStream::from_partially_read(
            parts.io.into_inner(),
            parts.read_buf.to_vec(),
            Role::Server,
            Some(config),
        )
        .await;
        let conn = hub.connect(auth);
        run(hub, ws, conn, timing, live).await;
    });
    let mut r = Response::new(Body::default());
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(accept) = HeaderValue::from_str(&accept) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    r
}

/// How the writer ended.
enum Ending {
    /// The close frame went out (or the peer was already gone): let the peer answer it.
    Closed,
    /// A write stalled or failed: reset the connection now.
    Abort,
}

/// What a WebSocket connection is carried on (the daemon's TCP streams).
pub(crate) trait Socket:
    tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static
{
    /// Makes dropping the socket reset the connection, discarding what the peer never read.
    fn reset_on_drop(&self) {}
}

impl Socket for TcpStream {
    fn reset_on_drop(&self) {
        // A zero linger sends RST at close instead of keeping megabytes the peer will not read.
        let _ = self.set_zero_linger();
    }
}

/// The per-connection time bounds.
#[derive(Clone, Copy)]
struct Timing {
    /// One write (a batch, a ping, the close frame) may take this long.
    write: Duration,
    /// Ping interval; [`KEEPALIVE_MISSES`] silent intervals end the connection.
    keepalive: Duration,
}

async fn run<S: Socket>(
    hub: Arc<Hub>,
    ws: WebSocketStream<S>,
    conn: Connection,
    timing: Timing,
    live: Arc<()>,
) {
    let Connection { id, frames, kicked } = conn;
    let write_timeout = timing.write;
    let (sink, mut stream) = ws.split();
    let (close_tx, close_rx) = tokio::sync::mpsc::channel::<CloseFrame>(1);
    let heard = Arc::new(AtomicU64::new(0));
    let out = Out {
        frames,
        kicked,
        close_rx,
        heard: heard.clone(),
    };
    let mut writer = tokio::spawn(write_loop(sink, out, timing));

    let written = read_loop(&hub, id, &mut stream, &close_tx, &heard, &mut writer).await;
    hub.disconnect(id);
    drop(close_tx);
    let written = match written {
        Some(w) => w,
        // The writer sends its close frame, each write bounded by the write timeout.
        None => (&mut writer).await,
    };
    // Everything queued, and the close frame, is written: a stopping daemon need not wait
    // for the peer's answer.
    drop(live);
    let Ok((sink, ending)) = written else {
        return;
    };
    if let Ending::Closed = ending {
        // Give the peer a moment to answer our close frame; a dead peer must not hold us.
        let _ = tokio::time::timeout(write_timeout.min(CLOSE_WAIT), async {
            while let Some(Ok(m)) = stream.next().await {
                if m.is_close() {
                    break;
                }
            }
        })
        .await;
    }
    if let Ok(ws) = sink.reunite(stream) {
        if let Ending::Abort = ending {
            ws.get_ref().reset_on_drop();
        }
        tracing::debug!("client {}: connection closed", id.0);
    }
}

/// What the writer reads from: the hub's frames and kick, the reader's close frame, and the
/// reader's count of messages heard from the client (the keepalive watches it).
struct Out {
    frames: Frames,
    kicked: watch::Receiver<Option<Kick>>,
    close_rx: tokio::sync::mpsc::Receiver<CloseFrame>,
    heard: Arc<AtomicU64>,
}

/// How one batch's write ended.
enum Written {
    Done,
    Kicked,
    Abort,
}

/// Counts keepalive ticks in which nothing came from the client.
struct Keepalive {
    heard: Arc<AtomicU64>,
    seen: u64,
    silent: u32,
}

impl Keepalive {
    /// One tick: true once the client has been silent for [`KEEPALIVE_MISSES`] ticks running.
    fn tick_is_dead(&mut self) -> bool {
        let now = self.heard.load(Ordering::Relaxed);
        if now == self.seen {
            self.silent += 1;
        } else {
            self.seen = now;
            self.silent = 0;
        }
        self.silent >= KEEPALIVE_MISSES
    }
}

/// Writes hub frames in batches, a ping every keepalive interval, then the one close frame.
/// Every write is bounded by the write timeout, and a kick or a dead keepalive is seen even
/// in the middle of a write: after a kick only the close frame is written; a client that
/// answered nothing for [`KEEPALIVE_MISSES`] intervals is reset.
async fn write_loop<S: Socket>(
    mut sink: SplitSink<WebSocketStream<S>, Message>,
    out: Out,
    timing: Timing,
) -> (SplitSink<WebSocketStream<S>, Message>, Ending) {
    let Out {
        mut frames,
        mut kicked,
        mut close_rx,
        heard,
    } = out;
    let write_timeout = timing.write;
    let mut ticks = tokio::time::interval(timing.keepalive);
    // The first tick one interval from now, not at once.
    ticks.reset();
    // A tick missed while a write ran is not made up in a burst.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut alive = Keepalive {
        seen: heard.load(Ordering::Relaxed),
        heard,
        silent: 0,
    };
    let gone = |timing: Timing| {
        tracing::info!(
            "a client answered nothing for {:?}: closing it",
            timing.keepalive * KEEPALIVE_MISSES
        );
    };
    let close = loop {
        tokio::select! {
            biased;
            // An error here only means the hub forgot the client; the close_rx or frames
            // branch then says why.
            Ok(()) = kicked.changed() => break kick_frame(&kicked),
            close = close_rx.recv() => break close,
            _ = ticks.tick() => {
                if alive.tick_is_dead() {
                    gone(timing);
                    return (sink, Ending::Abort);
                }
                let ping = sink.send(Message::Ping(Bytes::new()));
                if !matches!(tokio::time::timeout(write_timeout, ping).await, Ok(Ok(()))) {
                    return (sink, Ending::Abort);
                }
            }
            frame = frames.recv() => {
                let Some(Outgoing::Frame(first)) = frame else {
                    break Some(CloseFrame { code: CloseCode::Away, reason: "the daemon is stopping".into() });
                };
                let written = {
                    let batch = tokio::time::timeout(write_timeout, write_batch(&mut sink, &mut frames, first));
                    tokio::pin!(batch);
                    loop {
                        tokio::select! {
                            // The write first: one that completes at once is never cut short.
                            biased;
                            done = &mut batch => break match done {
                                Ok(Ok(())) => Written::Done,
                                Ok(Err(_)) => Written::Abort,
                                Err(_) => {
                                    tracing::info!("a client stopped reading for {write_timeout:?}: closing it");
                                    Written::Abort
                                }
                            },
                            // Dropped by the hub while the peer is not reading: stop writing
                            // frames at once. The close frame queues behind what is already
                            // buffered, so a peer that resumes reading within the write
                            // timeout still learns why; one that does not is reset when that
                            // runs out.
                            Ok(()) = kicked.changed() => break Written::Kicked,
                            // No ping can go out mid-write, but silence still counts.
                            _ = ticks.tick() => if alive.tick_is_dead() {
                                gone(timing);
                                break Written::Abort;
                            },
                        }
                    }
                };
                match written {
                    Written::Done => {}
                    Written::Kicked => break kick_frame(&kicked),
                    Written::Abort => return (sink, Ending::Abort),
                }
            }
        }
    };
    let sent = tokio::time::timeout(write_timeout, async {
        sink.send(Message::Close(close)).await?;
        sink.close().await
    })
    .await;
    match sent {
        Ok(_) => (sink, Ending::Closed),
        Err(_) => (sink, Ending::Abort),
    }
}

fn kick_frame(kicked: &watch::Receiver<Option<Kick>>) -> Option<CloseFrame> {
    kicked.borrow().as_ref().map(|k| CloseFrame {
        code: CloseCode::from(k.code),
        reason: k.reason.into(),
    })
}

/// `first` and whatever else is waiting (up to [`WRITE_BATCH`] frames), then one flush.
async fn write_batch<S: Socket>(
    sink: &mut SplitSink<WebSocketStream<S>, Message>,
    frames: &mut Frames,
    first: FrameText,
) -> Result<(), WsError> {
    sink.feed(text_message(first)?).await?;
    let mut batch = Vec::new();
    let mut room = WRITE_BATCH - 1;
    room -= frames.take(&mut batch, room);
    if room > 0 {
        // One turn for the rest of the runtime before the write: in a burst the hub has
        // queued more by then, and they leave in this write instead of one write each.
        tokio::task::yield_now().await;
        frames.take(&mut batch, room);
    }
    for Outgoing::Frame(next) in batch {
        sink.feed(text_message(next)?).await?;
    }
    sink.flush().await
}

/// A hub frame as a text message without copying it (a terminal's output frames are 87 KiB):
/// the message shares the hub's buffer.
fn text_message(text: FrameText) -> Result<Message, WsError> {
    // Checking is a fast scan of text that is known to be UTF-8; it never fails.
    Ok(Message::Text(Utf8Bytes::try_from(text.into_bytes())?))
}

/// Hands client frames to the hub until the client leaves or errs, or the writer ends first
/// (kicked, stalled, daemon stopping): then reading stops too, so the socket is really closed
/// and not only forgotten by the hub, and the writer's result comes back. The writer is only
/// watched between frames, so an op is never cut off halfway through.
async fn read_loop<S, W>(
    hub: &Arc<Hub>,
    id: ClientId,
    stream: &mut futures_util::stream::SplitStream<WebSocketStream<S>>,
    close_tx: &tokio::sync::mpsc::Sender<CloseFrame>,
    heard: &AtomicU64,
    writer: &mut tokio::task::JoinHandle<W>,
) -> Option<Result<W, tokio::task::JoinError>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        let message = tokio::select! {
            message = stream.next() => message?,
            written = &mut *writer => return Some(written),
        };
        // Anything at all, a pong included, shows the client is reading.
        heard.fetch_add(1, Ordering::Relaxed);
        match message {
            Ok(Message::Text(text)) => hub.handle(id, text.as_str()).await,
            Ok(Message::Binary(_)) => {
                hub.send_error(
                    id,
                    "invalid frame: binary frames are not part of the protocol",
                );
            }
            Ok(Message::Close(_)) => return None,
            Ok(_) => {}
            Err(WsError::Capacity(e)) => {
                let _ = close_tx
                    .send(CloseFrame {
                        code: CloseCode::Size,
                        reason: format!("frame too large: {e}").into(),
                    })
                    .await;
                return None;
            }
            Err(e) => {
                tracing::debug!("client {}: {e}", id.0);
                let _ = close_tx
                    .send(CloseFrame {
                        code: CloseCode::Protocol,
                        reason: "protocol error".into(),
                    })
                    .await;
                return None;
            }
        }
    }
}
