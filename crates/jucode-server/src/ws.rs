//! The WebSocket side: authentication at the handshake, then one reader and one writer per
//! connection.

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use jucode_hub::{ClientId, Connection, Hub, Outgoing};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

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
    tokio::spawn(async move {
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => {
                let config = WebSocketConfig::default()
                    .max_message_size(Some(MAX_MESSAGE))
                    .max_frame_size(Some(MAX_FRAME))
                    .max_write_buffer_size(4 * MAX_MESSAGE);
                let ws = WebSocketStream::from_raw_socket(
                    TokioIo::new(upgraded),
                    Role::Server,
                    Some(config),
                )
                .await;
                let conn = hub.connect(auth);
                run(hub, ws, conn).await;
            }
            Err(e) => tracing::debug!("upgrade failed: {e}"),
        }
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

async fn run<S>(hub: Arc<Hub>, ws: WebSocketStream<S>, conn: Connection)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let Connection {
        id,
        mut frames,
        mut kicked,
    } = conn;
    let (mut sink, mut stream) = ws.split();
    let (close_tx, mut close_rx) = tokio::sync::mpsc::channel::<CloseFrame>(1);

    // The writer owns the sink: hub frames in batches, and the one close frame at the end.
    let writer = tokio::spawn(async move {
        let close = loop {
            tokio::select! {
                biased;
                // An error here only means the hub forgot the client; the close_rx or frames
                // branch then says why.
                Ok(()) = kicked.changed() => {
                    let kick = kicked.borrow().clone();
                    break kick.map(|k| CloseFrame { code: CloseCode::from(k.code), reason: k.reason.into() });
                }
                close = close_rx.recv() => break close,
                frame = frames.recv() => {
                    let Some(Outgoing::Frame(first)) = frame else {
                        break Some(CloseFrame { code: CloseCode::Away, reason: "the daemon is stopping".into() });
                    };
                    if sink.feed(Message::text(first.to_string())).await.is_err() {
                        return;
                    }
                    let mut n = 1;
                    while n < WRITE_BATCH {
                        let Ok(Outgoing::Frame(next)) = frames.try_recv() else { break };
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
        };
        let _ = sink.send(Message::Close(close)).await;
        let _ = sink.close().await;
    });

    read_loop(&hub, id, &mut stream, &close_tx).await;
    hub.disconnect(id);
    drop(close_tx);
    // Give the writer a moment to send its close frame; a dead peer must not hold us.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), writer).await;
}

async fn read_loop<S>(
    hub: &Arc<Hub>,
    id: ClientId,
    stream: &mut futures_util::stream::SplitStream<WebSocketStream<S>>,
    close_tx: &tokio::sync::mpsc::Sender<CloseFrame>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    while let Some(message) = stream.next().await {
        match message {
            Ok(Message::Text(text)) => hub.handle(id, text.as_str()).await,
            Ok(Message::Binary(_)) => {
                hub.send_error(
                    id,
                    "invalid frame: binary frames are not part of the protocol",
                );
            }
            Ok(Message::Close(_)) => break,
            Ok(_) => {}
            Err(WsError::Capacity(e)) => {
                let _ = close_tx
                    .send(CloseFrame {
                        code: CloseCode::Size,
                        reason: format!("frame too large: {e}").into(),
                    })
                    .await;
                break;
            }
            Err(e) => {
                tracing::debug!("client {}: {e}", id.0);
                let _ = close_tx
                    .send(CloseFrame {
                        code: CloseCode::Protocol,
                        reason: "protocol error".into(),
                    })
                    .await;
                break;
            }
        }
    }
}
