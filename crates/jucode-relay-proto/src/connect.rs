//! Opening a WebSocket to a relay (TCP, TLS for `wss`, upgrade, each step bounded) and the
//! host's challenge authentication (relay-protocol §4). Both the daemon's host link and the
//! test phones connect this way.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};

use crate::identity::{Identity, b64, unb64};

/// Each connect step (TCP, TLS, upgrade) and the challenge wait (relay-protocol §7).
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// A floor for the write-buffer cap, above tungstenite's 128 KiB write buffer.
const WRITE_BUFFER_FLOOR: usize = 512 * 1024;

/// Why a connection to the relay could not be made or ended.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("{0} timed out")]
    Timeout(&'static str),
    #[error("relay URL {0:?}: {1}")]
    Url(String, String),
    #[error("connect: {0}")]
    Io(#[from] std::io::Error),
    #[error("websocket: {0}")]
    Ws(#[from] tungstenite::Error),
    #[error("tls: {0}")]
    Tls(String),
    #[error("relay protocol: {0}")]
    Protocol(String),
    #[error("the relay closed the link ({0}: {1})")]
    Closed(u16, String),
}

/// Anything the WebSocket can run over (TCP, or TLS over TCP).
pub trait IoBox: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> IoBox for T {}

/// A WebSocket to the relay over TCP or TLS.
pub type RelayWs = WebSocketStream<Box<dyn IoBox>>;

async fn step<T, E: Into<ConnectError>>(
    what: &'static str,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, ConnectError> {
    match tokio::time::timeout(STEP_TIMEOUT, fut).await {
        Ok(r) => r.map_err(Into::into),
        Err(_) => Err(ConnectError::Timeout(what)),
    }
}

/// TCP, then TLS for `wss`, then the WebSocket upgrade, each bounded by 10 s.
pub async fn open_socket(url: &str, max_message: usize) -> Result<RelayWs, ConnectError> {
    let bad = |m: &str| ConnectError::Url(url.to_string(), m.to_string());
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
    let tls = match uri.scheme_str() {
        Some("wss") => true,
        Some("ws") => false,
        _ => return Err(bad("the scheme must be ws or wss")),
    };
    let host = uri.host().ok_or_else(|| bad("no host"))?.to_string();
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let host_for_tcp = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let tcp = step(
        "TCP connect",
        tokio::net::TcpStream::connect((host_for_tcp.as_str(), port)),
    )
    .await?;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn IoBox> = if tls {
        let connector = tokio_rustls::TlsConnector::from(tls_config()?);
        let name = rustls::pki_types::ServerName::try_from(host_for_tcp.clone())
            .map_err(|e| bad(&e.to_string()))?;
        Box::new(step("TLS handshake", connector.connect(name, tcp)).await?)
    } else {
        Box::new(tcp)
    };
    let config = WebSocketConfig::default()
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message))
        // Must exceed the 128 KiB write buffer or tungstenite panics.
        .max_write_buffer_size((4 * max_message).max(WRITE_BUFFER_FLOOR));
    let (ws, _) = step(
        "WebSocket upgrade",
        tokio_tungstenite::client_async_with_config(url, stream, Some(config)),
    )
    .await?;
    Ok(ws)
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, ConnectError> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| ConnectError::Tls(e.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

#[derive(Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum RelayText {
    Challenge { nonce: String },
    Ready { host: String },
}

/// Answers the relay's challenge and waits for `ready` (a host link's first step).
pub async fn authenticate(
    ws: &mut RelayWs,
    identity: &Identity,
    version: &str,
) -> Result<(), ConnectError> {
    let nonce = match read_text(ws).await? {
        RelayText::Challenge { nonce } => nonce,
        RelayText::Ready { .. } => {
            return Err(ConnectError::Protocol("ready before challenge".into()));
        }
    };
    let nonce = unb64(&nonce)
        .filter(|n| n.len() == 32)
        .ok_or_else(|| ConnectError::Protocol("the challenge nonce is not 32 bytes".into()))?;
    let mut signed = crate::AUTH_CONTEXT.to_vec();
    signed.extend_from_slice(&nonce);
    let auth = json!({
        "t": "auth",
        "pub": b64(identity.public()),
        "sig": b64(&identity.sign(&signed)),
        "v": version,
    });
    step("sending auth", ws.send(Message::text(auth.to_string()))).await?;
    match read_text(ws).await? {
        RelayText::Ready { host } => {
            if host != identity.host_id() {
                return Err(ConnectError::Protocol(format!(
                    "the relay calls us {host}, not {}",
                    identity.host_id()
                )));
            }
            Ok(())
        }
        RelayText::Challenge { .. } => Err(ConnectError::Protocol("a second challenge".into())),
    }
}

async fn read_text(ws: &mut RelayWs) -> Result<RelayText, ConnectError> {
    loop {
        let msg = match tokio::time::timeout(STEP_TIMEOUT, ws.next()).await {
            Err(_) => return Err(ConnectError::Timeout("relay authentication")),
            Ok(None) => return Err(ConnectError::Protocol("the relay hung up".into())),
            Ok(Some(m)) => m?,
        };
        match msg {
            Message::Text(t) => {
                return serde_json::from_str(t.as_str())
                    .map_err(|e| ConnectError::Protocol(format!("unexpected text {e}")));
            }
            Message::Close(frame) => {
                let (code, reason) = frame
                    .map(|f| (u16::from(f.code), f.reason.to_string()))
                    .unwrap_or((1005, String::new()));
                return Err(ConnectError::Closed(code, reason));
            }
            Message::Ping(_) => {
                ws.flush().await?;
            }
            _ => return Err(ConnectError::Protocol("binary before ready".into())),
        }
    }
}
