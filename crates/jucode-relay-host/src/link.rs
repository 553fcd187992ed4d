//! The daemon's side of the relay: one outbound WebSocket, its keepalive and reconnects, and
//! one Noise responder per client stream.
//!
//! Shape: a supervisor loop ([`start`]) follows the hub's relay switch and reconnects with
//! jittered backoff; while connected, a reader routes frames to per-stream tasks and a single
//! writer task owns the socket (our pings, pongs flushed at once, stream data). Each stream
//! task authorizes or pairs the phone's Noise key, then speaks to the hub exactly as a local
//! WebSocket does, as `Auth::Device`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use jucode_clock::{Clock as _, SystemClock};
use jucode_hub::{Auth, Hub, Outgoing, PairError, RelayLinkError};
use jucode_relay_proto::batch::send_batch;
use jucode_relay_proto::close;
use jucode_relay_proto::connect::{ConnectError, RelayWs, authenticate, open_socket};
use jucode_relay_proto::frame::{Frame, FrameRef, PAYLOAD_AT};
use jucode_relay_proto::identity::{Identity, b64};
use jucode_relay_proto::limits;
use jucode_relay_proto::noise::{self, Channel};
use ring::rand::{SecureRandom, SystemRandom};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::{self, Bytes, Message};

use crate::identity::LoadError;
use crate::push::PushClient;

/// The relay's ping period; we ping as often to find half-open TCP.
const PING_EVERY: Duration = limits::PING_EVERY;
/// Silence this long means the link is dead.
const DEAD_AFTER: Duration = limits::HOST_DEAD;
/// A phone gets this long to send its first Noise message.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(15);
const BACKOFF_START: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// A link must stay up this long before the backoff starts again from 1 s.
const STABLE_AFTER: Duration = Duration::from_secs(30);
/// Handshakes that fail (unknown key without a good code, bad message) per minute before new
/// streams are refused unread for the rest of the minute: each costs two X25519 operations.
const MAX_FAILED_HANDSHAKES: usize = 10;
/// Streams the daemon serves at once (twice the relay's own limit).
const MAX_STREAMS: usize = 64;
/// Noise messages waiting for one stream task; a full queue closes that stream.
const STREAM_QUEUE: usize = 512;
/// Frames waiting for the socket writer (shared by every stream).
const WRITER_QUEUE: usize = 1024;
/// How long a write may stall: one to the relay socket before the link is judged dead, or one
/// of a stream's frames into the link writer's queue before that stream is closed.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// The relay's message limit, with room for the frame header.
const MAX_LINK_MESSAGE: usize = limits::MAX_MESSAGE + 64;

/// Starts the relay task for `url` (`--relay`). It connects whenever the hub's relay switch is
/// on (the `relay` setting and no `--no-relay`) and disconnects when it goes off.
pub fn start(hub: Arc<Hub>, url: String, version: String) -> tokio::task::JoinHandle<()> {
    let link = Arc::new(Link::new(hub.state_dir(), url.clone()));
    hub.attach_relay(link.clone());
    tokio::spawn(supervise(hub, link, url, version))
}

/// The hub's handle on the relay: identity on demand, push through the relay.
pub(crate) struct Link {
    dir: std::path::PathBuf,
    identity: Mutex<Option<Arc<Identity>>>,
    push: PushClient,
}

impl Link {
    fn new(dir: std::path::PathBuf, url: String) -> Link {
        Link {
            dir,
            identity: Mutex::new(None),
            push: PushClient::new(&url),
        }
    }

    fn identity(&self) -> Result<Arc<Identity>, LoadError> {
        let mut slot = self.identity.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(id) = &*slot {
            return Ok(id.clone());
        }
        let id = Arc::new(crate::identity::load_or_create(&self.dir)?);
        *slot = Some(id.clone());
        Ok(id)
    }
}

impl jucode_hub::RelayLink for Link {
    fn identity(&self) -> Result<(String, String), RelayLinkError> {
        let id = Link::identity(self).map_err(|e| RelayLinkError::Identity(e.into()))?;
        Ok((id.host_id(), b64(id.static_public())))
    }

    fn push(
        &self,
        subscription: serde_json::Value,
        payload: serde_json::Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<u16, RelayLinkError>> + Send>>
    {
        let identity = Link::identity(self);
        let push = self.push.clone();
        Box::pin(async move {
            let identity = identity.map_err(|e| RelayLinkError::Identity(e.into()))?;
            push.send(&identity, subscription, payload)
                .await
                .map_err(|e| RelayLinkError::Push(e.into()))
        })
    }
}

/// Why a link ended.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("no word from the relay for 75 s")]
    Dead,
    #[error("the relay was turned off")]
    Off,
    #[error("a write to the relay stalled for 30 s")]
    Stalled,
}

impl From<tungstenite::Error> for LinkError {
    fn from(e: tungstenite::Error) -> LinkError {
        LinkError::Connect(ConnectError::Ws(e))
    }
}

impl LinkError {
    fn protocol(what: &str) -> LinkError {
        LinkError::Connect(ConnectError::Protocol(what.into()))
    }

    /// Whether the relay ended the link because a newer connection with our host id took it.
    fn replaced(&self) -> bool {
        matches!(self, LinkError::Connect(ConnectError::Closed(code, _)) if *code == close::REPLACED)
    }
}

async fn supervise(hub: Arc<Hub>, link: Arc<Link>, url: String, version: String) {
    let mut switch = hub.relay_switch();
    let mut backoff = Backoff::default();
    loop {
        if switch.wait_for(|on| *on).await.is_err() {
            return;
        }
        let identity = match link.identity() {
            Ok(id) => id,
            Err(e) => {
                tracing::error!("relay: {e}");
                let _ = switch.wait_for(|on| !*on).await;
                continue;
            }
        };
        let mut up_since = None;
        let result =
            connect_and_serve(&hub, &identity, &url, &version, &mut switch, &mut up_since).await;
        hub.set_relay_connected(false, None);
        let up_for = up_since.map(|since: SystemClock| since.elapsed());
        let replaced = result.as_ref().is_err_and(LinkError::replaced);
        match &result {
            Err(LinkError::Off) => {
                tracing::info!("relay: disconnected (turned off)");
                continue;
            }
            Err(e) if e.replaced() => {
                // Another daemon with this identity took the link: do not fight over it.
                tracing::warn!(
                    "relay: replaced by another connection with this host id (is a copy of this daemon running elsewhere?); waiting"
                );
            }
            Err(e) => tracing::warn!("relay: {e}"),
            Ok(()) => {}
        }
        let delay = backoff.next(up_for, replaced) + jitter();
        tracing::info!("relay: reconnecting in {} ms", delay.as_millis());
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = switch.wait_for(|on| !*on) => {}
        }
    }
}

/// Reconnect delays: 1 s doubling to 60 s; back to 1 s only after a link stayed up 30 s;
/// straight to 60 s when another connection with our identity replaced us (4409), so two
/// daemons sharing one identity do not take the link from each other in a loop.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            next: BACKOFF_START,
        }
    }
}

impl Backoff {
    /// The delay (before jitter) after a link that was up for `up_for` (`None`: never up).
    pub fn next(&mut self, up_for: Option<Duration>, replaced: bool) -> Duration {
        if up_for.is_some_and(|d| d >= STABLE_AFTER) {
            self.next = BACKOFF_START;
        }
        if replaced {
            self.next = BACKOFF_MAX;
        }
        let delay = self.next;
        self.next = (self.next * 2).min(BACKOFF_MAX);
        delay
    }
}

/// 0–1 s of random delay, so many daemons do not reconnect in step.
fn jitter() -> Duration {
    let mut b = [0u8; 2];
    let _ = SystemRandom::new().fill(&mut b);
    Duration::from_millis(u64::from(u16::from_le_bytes(b)) % 1000)
}

/// What the socket writer is asked to do.
enum Out {
    Frame(Frame),
    /// A frame already encoded (a data frame sealed behind its header, so not copied again).
    Encoded(Vec<u8>),
    /// A ping was read: get its queued pong onto the wire now.
    Flush,
}

impl Out {
    /// The encoded frame to write; `None` for a flush.
    fn into_frame(self) -> Option<Vec<u8>> {
        match self {
            Out::Frame(f) => Some(f.encode()),
            Out::Encoded(bytes) => Some(bytes),
            Out::Flush => None,
        }
    }
}

async fn connect_and_serve(
    hub: &Arc<Hub>,
    identity: &Arc<Identity>,
    url: &str,
    version: &str,
    switch: &mut watch::Receiver<bool>,
    up_since: &mut Option<SystemClock>,
) -> Result<(), LinkError> {
    let connect = async {
        let endpoint = format!("{}/host", url.trim_end_matches('/'));
        let mut ws = open_socket(&endpoint, MAX_LINK_MESSAGE).await?;
        authenticate(&mut ws, identity, version).await?;
        Ok::<_, LinkError>(ws)
    };
    let ws = tokio::select! {
        ws = connect => ws?,
        _ = switch.wait_for(|on| !*on) => return Err(LinkError::Off),
    };
    tracing::info!("relay: connected to {url} as host {}", identity.host_id());
    hub.set_relay_connected(true, Some(identity.host_id()));
    // A clock started now measures how long the link stays up.
    *up_since = Some(SystemClock::new());
    serve(hub, identity, ws, switch).await
}

/// Failed handshakes in the last minute, shared by every stream of the daemon.
#[derive(Default)]
struct Limiter {
    clock: SystemClock,
    /// When each failure happened, on `clock`'s monotonic time.
    failures: VecDeque<Duration>,
}

impl Limiter {
    fn prune(&mut self) {
        while self
            .failures
            .front()
            .is_some_and(|t| self.clock.elapsed().saturating_sub(*t) > Duration::from_secs(60))
        {
            self.failures.pop_front();
        }
    }

    fn allow(&mut self) -> bool {
        self.prune();
        self.failures.len() < MAX_FAILED_HANDSHAKES
    }

    fn failed(&mut self) {
        self.prune();
        self.failures.push_back(self.clock.elapsed());
    }
}

async fn serve(
    hub: &Arc<Hub>,
    identity: &Arc<Identity>,
    ws: RelayWs,
    switch: &mut watch::Receiver<bool>,
) -> Result<(), LinkError> {
    let (mut sink, mut stream) = ws.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Out>(WRITER_QUEUE);
    // The one writer: stream frames, our pings, and a flush after every ping we read so the
    // automatic pong leaves even when nothing else is written.
    // Every write is bounded: a relay that stops reading ends the link instead of stalling it.
    let mut writer = tokio::spawn(async move {
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        loop {
            let write = async {
                tokio::select! {
                    out = out_rx.recv() => match out.map(Out::into_frame) {
                        None => None,
                        Some(None) => Some(sink.flush().await),
                        Some(Some(first)) => {
                            // A flush request needs nothing more: the batch ends in one.
                            let more = || loop {
                                match out_rx.try_recv().map(Out::into_frame) {
                                    Ok(Some(frame)) => return Some(frame),
                                    Ok(None) => continue,
                                    Err(_) => return None,
                                }
                            };
                            Some(send_batch(&mut sink, first, more).await)
                        }
                    },
                    _ = ping.tick() => Some(sink.send(Message::Ping(Vec::new().into())).await),
                }
            };
            match tokio::time::timeout(WRITE_TIMEOUT, write).await {
                Ok(Some(Ok(()))) => {}
                Ok(None) => break,
                Ok(Some(Err(_))) | Err(_) => return,
            }
        }
        let _ = tokio::time::timeout(WRITE_TIMEOUT, sink.close()).await;
    });
    let limiter = Arc::new(Mutex::new(Limiter::default()));
    let mut streams: HashMap<u32, mpsc::Sender<Bytes>> = HashMap::new();
    let result = loop {
        let next = tokio::select! {
            next = tokio::time::timeout(DEAD_AFTER, stream.next()) => next,
            _ = switch.wait_for(|on| !*on) => break Err(LinkError::Off),
            // The writer only stops on its own when a write failed or stalled.
            _ = &mut writer => break Err(LinkError::Stalled),
        };
        let msg = match next {
            Err(_) => break Err(LinkError::Dead),
            Ok(None) => break Err(LinkError::protocol("the relay hung up")),
            Ok(Some(Err(e))) => break Err(e.into()),
            Ok(Some(Ok(msg))) => msg,
        };
        match msg {
            Message::Binary(bytes) => {
                let frame = match Frame::decode_ref(&bytes) {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::warn!("relay: dropping a bad frame: {e}");
                        continue;
                    }
                };
                route(
                    hub,
                    identity,
                    &limiter,
                    &out_tx,
                    &mut streams,
                    frame,
                    &bytes,
                )
                .await;
            }
            Message::Ping(_) => {
                let _ = out_tx.send(Out::Flush).await;
            }
            Message::Close(frame) => {
                let (code, reason) = frame
                    .map(|f| (u16::from(f.code), f.reason.to_string()))
                    .unwrap_or((1005, String::new()));
                break Err(ConnectError::Closed(code, reason).into());
            }
            Message::Text(_) => tracing::warn!("relay: ignoring a text frame after ready"),
            Message::Pong(_) | Message::Frame(_) => {}
        }
    };
    // Dropping the senders ends every stream task, which disconnects its hub client.
    drop(streams);
    drop(out_tx);
    writer.abort();
    result
}

async fn route(
    hub: &Arc<Hub>,
    identity: &Arc<Identity>,
    limiter: &Arc<Mutex<Limiter>>,
    out: &mpsc::Sender<Out>,
    streams: &mut HashMap<u32, mpsc::Sender<Bytes>>,
    frame: FrameRef<'_>,
    bytes: &Bytes,
) {
    match frame {
        FrameRef::Open(id) => {
            // The relay allows 32; a relay that opens more gets them closed unread.
            if streams.len() >= MAX_STREAMS && !streams.contains_key(&id) {
                let _ = out.send(Out::Frame(Frame::Close(id))).await;
                return;
            }
            let (tx, rx) = mpsc::channel(STREAM_QUEUE);
            // A reused id replaces (and so ends) the old stream.
            streams.insert(id, tx);
            let task = StreamTask {
                hub: hub.clone(),
                identity: identity.clone(),
                limiter: limiter.clone(),
                out: out.clone(),
                id,
            };
            tokio::spawn(task.run(rx));
        }
        FrameRef::Data(id, _) => {
            let Some(tx) = streams.get(&id) else {
                return;
            };
            // The payload as a slice of the message's buffer: no copy.
            if tx.try_send(bytes.slice(PAYLOAD_AT..)).is_err() {
                // Too slow, or already finished: either way the stream is over.
                streams.remove(&id);
                let _ = out.send(Out::Frame(Frame::Close(id))).await;
            }
        }
        FrameRef::Close(id) => {
            streams.remove(&id);
        }
    }
}

#[derive(Deserialize)]
struct Hello {
    #[serde(default)]
    name: String,
    #[serde(default)]
    pair: Option<String>,
}

struct StreamTask {
    hub: Arc<Hub>,
    identity: Arc<Identity>,
    limiter: Arc<Mutex<Limiter>>,
    out: mpsc::Sender<Out>,
    id: u32,
}

impl StreamTask {
    fn limiter(&self) -> std::sync::MutexGuard<'_, Limiter> {
        self.limiter.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends one encoded data frame of this stream.
    async fn send(&self, frame: Vec<u8>) -> bool {
        self.out.send(Out::Encoded(frame)).await.is_ok()
    }

    /// Tells the relay to close this stream; bounded, since a stalled link ends by itself.
    async fn close(&self) {
        let close = self.out.send(Out::Frame(Frame::Close(self.id)));
        let _ = tokio::time::timeout(WRITE_TIMEOUT, close).await;
    }

    async fn run(self, mut inbound: mpsc::Receiver<Bytes>) {
        let Ok(Some(msg1)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, inbound.recv()).await else {
            self.close().await;
            return;
        };
        let Some((device, channel)) = self.handshake(&msg1).await else {
            self.close().await;
            return;
        };
        self.serve(device, channel, inbound).await;
        self.close().await;
    }

    /// Reads msg1, authorizes or pairs the phone's key, writes msg2. `None` closes the stream.
    async fn handshake(&self, msg1: &[u8]) -> Option<(String, Channel)> {
        if !self.limiter().allow() {
            tracing::warn!("relay: too many failed handshakes this minute; refusing a stream");
            return None;
        }
        // msg1 opens with the phone's ephemeral key in clear: refuse weak ones unread.
        if msg1.len() > noise::MAX_NOISE_MESSAGE || msg1.get(..32).is_none_or(noise::is_weak_key) {
            self.limiter().failed();
            return None;
        }
        let mut hs = noise::responder(self.identity.static_private()).ok()?;
        let mut payload = vec![0u8; msg1.len()];
        let Ok(n) = hs.read_message(msg1, &mut payload) else {
            self.limiter().failed();
            return None;
        };
        let key = hs.get_remote_static()?.to_vec();
        if noise::is_weak_key(&key) {
            self.limiter().failed();
            return None;
        }
        let hello: Hello = serde_json::from_slice(&payload[..n]).unwrap_or(Hello {
            name: String::new(),
            pair: None,
        });
        let decision = match self.hub.relay_device(&key) {
            Some(found) => Ok(found),
            None => match hello.pair.as_deref() {
                Some(code) => self
                    .hub
                    .pair_relay_device(code, &hello.name, &key)
                    .map_err(|e| match e {
                        PairError::Store(_) => "the daemon could not save the device".to_string(),
                        other => other.to_string(),
                    }),
                None => Err("this device is not paired: open a new pairing link".to_string()),
            },
        };
        let reply = match &decision {
            Ok((device, name)) => json!({"ok": true, "device": device, "name": name}),
            Err(error) => {
                self.limiter().failed();
                json!({"ok": false, "error": error})
            }
        };
        let body = reply.to_string();
        let mut msg2 = vec![0u8; body.len() + 128];
        let n = hs.write_message(body.as_bytes(), &mut msg2).ok()?;
        msg2.truncate(n);
        if !self.send(Frame::encode_data(self.id, &msg2)).await {
            return None;
        }
        let (device, _) = decision.ok()?;
        let transport = hs.into_transport_mode().ok()?;
        Some((device, Channel::new(transport)))
    }

    /// The stream as a device connection: hub frames out, client frames in.
    async fn serve(
        &self,
        device: String,
        mut channel: Channel,
        mut inbound: mpsc::Receiver<Bytes>,
    ) {
        let conn = self.hub.connect(Auth::Device(device));
        let client = conn.id;
        let mut frames = conn.frames;
        let mut kicked = conn.kicked;
        loop {
            tokio::select! {
                biased;
                Ok(()) = kicked.changed() => break,
                msg = inbound.recv() => {
                    let Some(msg) = msg else { break };
                    match channel.open(&msg) {
                        Ok(None) => {}
                        Ok(Some(frame)) => match std::str::from_utf8(&frame) {
                            Ok(text) => self.hub.handle(client, text).await,
                            Err(_) => break,
                        },
                        Err(e) => {
                            tracing::debug!("relay stream {}: {e}", self.id);
                            break;
                        }
                    }
                }
                frame = frames.recv() => {
                    let Some(Outgoing::Frame(text)) = frame else { break };
                    let header = Frame::data_header(self.id);
                    let Ok(messages) = channel.seal_framed(text.as_bytes(), &header) else { break };
                    let send_all = async {
                        for m in messages {
                            if !self.send(m).await {
                                return false;
                            }
                        }
                        true
                    };
                    let sent = tokio::select! {
                        // The write first: one that completes at once is never cut short.
                        biased;
                        sent = tokio::time::timeout(WRITE_TIMEOUT, send_all) => sent.unwrap_or(false),
                        // Dropped by the hub (too slow, revoked) while waiting on the link.
                        Ok(()) = kicked.changed() => false,
                    };
                    if !sent {
                        break;
                    }
                }
            }
        }
        self.hub.disconnect(client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jucode_relay_proto::connect::IoBox;
    use tokio_tungstenite::WebSocketStream;

    #[test]
    fn backoff_doubles_to_a_minute_and_resets_only_after_30_s_up() {
        let mut b = Backoff::default();
        let never: Vec<u64> = (0..8).map(|_| b.next(None, false).as_secs()).collect();
        assert_eq!(never, [1, 2, 4, 8, 16, 32, 60, 60]);
        // A short-lived link does not reset it.
        assert_eq!(b.next(Some(Duration::from_secs(29)), false).as_secs(), 60);
        assert_eq!(b.next(Some(Duration::from_secs(30)), false).as_secs(), 1);
        assert_eq!(b.next(None, false).as_secs(), 2);
        // Replaced by another daemon with our identity: wait the longest.
        assert_eq!(b.next(Some(Duration::from_secs(300)), true).as_secs(), 60);
    }

    fn hub(dir: &std::path::Path) -> Arc<Hub> {
        Hub::open(jucode_hub::HubConfig {
            home: dir.join(".jucode"),
            user_home: dir.to_path_buf(),
            version: "test".into(),
            relay_url: Some("ws://relay.invalid/relay/v1".into()),
            engines: Default::default(),
            clock: jucode_clock::SystemClock::shared(),
            agent_mcp: Default::default(),
            billing: None,
            online: Default::default(),
        })
        .unwrap()
    }

    /// An in-memory link: the daemon's side as `serve` gets it, and the relay's side.
    async fn link() -> (
        WebSocketStream<Box<dyn IoBox>>,
        WebSocketStream<tokio::io::DuplexStream>,
    ) {
        link_with_buffer(1 << 20).await
    }

    /// As [`link`], with `buffer` bytes of room each way.
    async fn link_with_buffer(
        buffer: usize,
    ) -> (
        WebSocketStream<Box<dyn IoBox>>,
        WebSocketStream<tokio::io::DuplexStream>,
    ) {
        use tokio_tungstenite::tungstenite::protocol::Role;
        let (a, b) = tokio::io::duplex(buffer);
        let daemon =
            WebSocketStream::from_raw_socket(Box::new(a) as Box<dyn IoBox>, Role::Client, None)
                .await;
        let relay = WebSocketStream::from_raw_socket(b, Role::Server, None).await;
        (daemon, relay)
    }

    /// Four relay pings 30 s apart (120 s of virtual time) to an idle daemon: each gets its
    /// pong and the link stays up.
    #[tokio::test(start_paused = true)]
    async fn an_idle_daemon_answers_pings_past_90_seconds() {
        let dir = tempfile::tempdir().unwrap();
        let hub = hub(dir.path());
        let identity = Arc::new(Identity::generate().unwrap());
        let (daemon, mut relay) = link().await;
        let (_on, mut switch) = watch::channel(true);
        let serving =
            tokio::spawn(async move { serve(&hub, &identity, daemon, &mut switch).await });
        for i in 0u8..4 {
            tokio::time::sleep(PING_EVERY).await;
            relay.send(Message::Ping(vec![i].into())).await.unwrap();
            loop {
                match relay.next().await.unwrap().unwrap() {
                    Message::Pong(p) => {
                        assert_eq!(p.to_vec(), vec![i]);
                        break;
                    }
                    // The daemon's own keepalive pings (answered automatically).
                    Message::Ping(_) => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
        assert!(!serving.is_finished(), "the link must still be up");
        serving.abort();
    }

    /// A relay that goes silent (no pings, no pongs) is declared dead after 75 s.
    #[tokio::test(start_paused = true)]
    async fn a_silent_relay_is_dead_after_75_seconds() {
        let dir = tempfile::tempdir().unwrap();
        let hub = hub(dir.path());
        let identity = Arc::new(Identity::generate().unwrap());
        let (daemon, _relay) = link().await;
        let (_on, mut switch) = watch::channel(true);
        let clock = SystemClock::new();
        let result = serve(&hub, &identity, daemon, &mut switch).await;
        assert!(matches!(result, Err(LinkError::Dead)), "{result:?}");
        assert!(clock.elapsed() >= DEAD_AFTER);
    }

    /// A relay that keeps talking but never reads: the daemon's pongs fill the link, the
    /// writer's write stalls, and after the write timeout the link ends as stalled (before
    /// the 75 s silence rule could notice anything, since the relay is not silent).
    #[tokio::test(start_paused = true)]
    #[allow(
        clippy::disallowed_methods,
        reason = "tokio's paused test clock: this reads virtual time, not the system's"
    )]
    async fn a_relay_that_stops_reading_ends_the_link_after_the_write_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let hub = hub(dir.path());
        let identity = Arc::new(Identity::generate().unwrap());
        let (daemon, mut relay) = link_with_buffer(1024).await;
        let (_on, mut switch) = watch::channel(true);
        let pings = tokio::spawn(async move {
            for _ in 0..200 {
                if relay
                    .send(Message::Ping(vec![7u8; 100].into()))
                    .await
                    .is_err()
                {
                    break;
                }
            }
            // Keep the relay's end open (and unread) until the test is over.
            std::future::pending::<()>().await;
        });
        let start = tokio::time::Instant::now();
        let result = serve(&hub, &identity, daemon, &mut switch).await;
        assert!(matches!(result, Err(LinkError::Stalled)), "{result:?}");
        assert!(start.elapsed() >= WRITE_TIMEOUT && start.elapsed() < DEAD_AFTER);
        pings.abort();
    }

    #[test]
    fn jitter_stays_under_a_second() {
        for _ in 0..100 {
            assert!(jitter() < Duration::from_secs(1));
        }
    }
}
