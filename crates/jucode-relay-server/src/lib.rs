//! `jucode-relay-server`: a self-hostable JuCode relay speaking relay-protocol v1, the same
//! protocol as the hosted relay. It forwards opaque bytes between one daemon (the host) and
//! its phones (clients), holds no keys of theirs and keeps nothing on disk but its VAPID key.
//!
//! Start at [`Relay::bind`] and [`Relay::serve`]. [`host`] has the host link (challenge auth,
//! replacement with 4409, binary framing), [`stream`] the client side (4404, 4410, 4429, 4400,
//! idle timeout), [`push`] the Web Push endpoint, [`limits`] the per-IP and per-host rates.

pub mod host;
pub mod limits;
pub mod push;
pub mod stream;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

pub use limits::Limits;

type Body = Full<Bytes>;

/// A floor for the write-buffer cap, above tungstenite's 128 KiB write buffer.
const WRITE_BUFFER_FLOOR: usize = 512 * 1024;

/// What the relay needs to run.
pub struct RelayConfig {
    pub listen: SocketAddr,
    pub limits: Limits,
    /// Web Push; `None` answers push requests with 501.
    pub push: Option<push::PushConfig>,
    /// Behind a TLS proxy on this machine: per-IP limits use the last `X-Forwarded-For`
    /// address of requests coming from loopback (the proxy), not the proxy's own address.
    pub behind_proxy: bool,
}

/// Why the relay could not start.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("could not listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("accepting connections failed: {0}")]
    Accept(std::io::Error),
}

/// What a host link's writer is asked to send.
pub(crate) enum HostOut {
    Frame(Vec<u8>),
    Close(u16, &'static str),
}

/// What a client stream's writer is asked to send.
pub(crate) enum ClientOut {
    /// The payload of a host data frame, sharing the host message's buffer (no copy).
    Data(tokio_tungstenite::tungstenite::Bytes),
    Close(u16, &'static str),
}

/// A connected host: its writer, its public key and its streams.
pub(crate) struct HostEntry {
    /// Which connection this is, so a replaced link does not remove its successor.
    pub(crate) generation: u64,
    pub(crate) public: Vec<u8>,
    pub(crate) tx: mpsc::Sender<HostOut>,
    pub(crate) streams: HashMap<u32, mpsc::Sender<ClientOut>>,
    pub(crate) next_stream: u32,
}

pub(crate) struct State {
    pub(crate) limits: Limits,
    pub(crate) hosts: Mutex<HashMap<String, HostEntry>>,
    pub(crate) rates: Mutex<limits::Rates>,
    pub(crate) push: Option<push::Pusher>,
    pub(crate) behind_proxy: bool,
    pub(crate) next_generation: std::sync::atomic::AtomicU64,
}

impl State {
    pub(crate) fn hosts(&self) -> MutexGuard<'_, HashMap<String, HostEntry>> {
        // Every change under this lock is a single map operation: poison leaves it consistent.
        self.hosts.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn rates(&self) -> MutexGuard<'_, limits::Rates> {
        self.rates.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A bound relay.
pub struct Relay {
    listener: TcpListener,
    state: Arc<State>,
}

impl Relay {
    pub async fn bind(config: RelayConfig) -> Result<Relay, RelayError> {
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| RelayError::Bind {
                    addr: config.listen,
                    source,
                })?;
        Ok(Relay {
            listener,
            state: Arc::new(State {
                limits: config.limits,
                hosts: Mutex::default(),
                rates: Mutex::default(),
                push: config.push.map(push::Pusher::new),
                behind_proxy: config.behind_proxy,
                next_generation: 1.into(),
            }),
        })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until `shutdown` completes.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), RelayError> {
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                _ = &mut shutdown => return Ok(()),
                accepted = self.listener.accept() => match accepted {
                    Ok(pair) => pair,
                    Err(e) if !matches!(e.kind(), std::io::ErrorKind::InvalidInput) => {
                        tracing::warn!("accept: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                    Err(e) => return Err(RelayError::Accept(e)),
                },
            };
            let _ = stream.set_nodelay(true);
            let state = self.state.clone();
            tokio::spawn(async move {
                // A socket that never sends a byte is dropped; hyper's header timer only
                // starts with the first byte.
                if tokio::time::timeout(Duration::from_secs(10), stream.readable())
                    .await
                    .is_err()
                {
                    return;
                }
                let service = service_fn(move |req| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(route(req, state, peer.ip()).await) }
                });
                let conn = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(10))
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades();
                if let Err(e) = conn.await {
                    tracing::debug!("connection: {e}");
                }
            });
        }
    }
}

pub(crate) fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The client's address: the peer, or what the local proxy says the peer was.
fn client_ip(req: &Request<Incoming>, peer: IpAddr, behind_proxy: bool) -> IpAddr {
    if !behind_proxy || !peer.is_loopback() {
        return peer;
    }
    req.headers()
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|a| a.trim().parse::<IpAddr>().ok())
        .next_back()
        .unwrap_or(peer)
}

async fn route(req: Request<Incoming>, state: Arc<State>, peer: IpAddr) -> Response<Body> {
    let ip = client_ip(&req, peer, state.behind_proxy);
    let path = req.uri().path().to_string();
    match (req.method(), path.as_str()) {
        (&Method::GET, "/relay/v1/healthz") => text(StatusCode::OK, "ok"),
        (&Method::GET, "/relay/v1/host") => {
            if !state.rates().host_auth(ip, &state.limits) {
                return text(StatusCode::TOO_MANY_REQUESTS, "too many host connections\n");
            }
            upgrade(req, &state, host::run)
        }
        (&Method::GET, "/relay/v1/connect") => {
            if !state.rates().client_connect(ip, &state.limits) {
                return text(StatusCode::TOO_MANY_REQUESTS, "too many connections\n");
            }
            let host = req
                .uri()
                .query()
                .unwrap_or_default()
                .split('&')
                .find_map(|kv| kv.strip_prefix("host="))
                .unwrap_or_default()
                .to_string();
            upgrade(req, &state, move |ws, state| stream::run(ws, state, host))
        }
        (&Method::GET, "/relay/v1/push/key") => push::key(&state),
        (&Method::POST, "/relay/v1/push") => push::handle(req, &state).await,
        // The remote page, so a pairing link opens it from this relay's origin.
        (&Method::GET | &Method::HEAD, "/") => {
            let mut r = text(StatusCode::FOUND, "");
            r.headers_mut()
                .insert(header::LOCATION, HeaderValue::from_static("/remote"));
            r
        }
        (&Method::GET | &Method::HEAD, p) if !p.starts_with("/relay/") => {
            let head = req.method() == Method::HEAD;
            let mut r = jucode_web::respond(p, req.headers())
                .map(|bytes| Body::from(hyper::body::Bytes::from_static(bytes)));
            if head {
                *r.body_mut() = Body::default();
            }
            r.headers_mut().insert(
                "x-content-type-options",
                HeaderValue::from_static("nosniff"),
            );
            r.headers_mut()
                .insert("referrer-policy", HeaderValue::from_static("no-referrer"));
            r
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// The relay's sockets: frames up to the message limit, nothing bigger buffered.
pub(crate) type Ws = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

fn upgrade<F, Fut>(req: Request<Incoming>, state: &Arc<State>, run: F) -> Response<Body>
where
    F: FnOnce(Ws, Arc<State>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let is_ws = req
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let Some(key) = req.headers().get(header::SEC_WEBSOCKET_KEY).cloned() else {
        return text(StatusCode::BAD_REQUEST, "a WebSocket upgrade is needed\n");
    };
    if !is_ws {
        return text(StatusCode::BAD_REQUEST, "a WebSocket upgrade is needed\n");
    }
    let accept = derive_accept_key(key.as_bytes());
    let state = state.clone();
    tokio::spawn(async move {
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => {
                let max = state.limits.max_message;
                let config = WebSocketConfig::default()
                    .max_message_size(Some(max))
                    .max_frame_size(Some(max))
                    // Must exceed the 128 KiB write buffer or tungstenite panics.
                    .max_write_buffer_size((4 * max).max(WRITE_BUFFER_FLOOR));
                let ws = WebSocketStream::from_raw_socket(
                    TokioIo::new(upgraded),
                    Role::Server,
                    Some(config),
                )
                .await;
                run(ws, state).await;
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
