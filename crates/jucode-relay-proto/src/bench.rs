//! Stream throughput and latency through a running relay, next to raw ChaCha20-Poly1305 on the
//! same data in the same run (so the ratio, not the absolute number, is what to compare).
//!
//! [`run`] connects a throwaway echo host (fresh keys in memory, accepting any device) to the
//! relay, opens `streams` phone streams to it and has each send `frames` frames of
//! `frame_bytes` with up to four of them in flight (the protocol never waits for the peer,
//! so one frame at a time would measure the round trip, not the stream); the round trips are a
//! separate run with one frame in flight. Every byte crosses the relay twice, each way sealed
//! and chunked exactly as daemon frames are. `jucode-relay-server`'s `relay_bench` example runs
//! it against an in-process relay for 1 and 32 streams.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::{Bytes, Message};

use crate::batch::send_batch;
use crate::client::{ClientError, DeviceKeys, Phone};
use crate::connect::{ConnectError, authenticate, open_socket};
use crate::frame::{Frame, FrameRef, PAYLOAD_AT};
use crate::identity::{Identity, IdentityError};
use crate::noise::{self, Channel, NoiseError};

/// One benchmark's numbers.
#[derive(Debug, Clone)]
pub struct BenchReport {
    pub streams: usize,
    pub frame_bytes: usize,
    pub frames_per_stream: usize,
    /// Payload bytes per second through the relay, both directions counted.
    pub relay_bytes_per_sec: f64,
    /// The same with one frame in flight per stream (the round-trip run): what per-frame
    /// latency costs.
    pub serial_bytes_per_sec: f64,
    /// Median and 99th percentile round trip of one frame.
    pub rtt_p50: Duration,
    pub rtt_p99: Duration,
    /// Seal + open of the same bytes in memory (one ChaCha20-Poly1305 pass each way).
    pub raw_bytes_per_sec: f64,
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |b: f64| b / (1024.0 * 1024.0);
        write!(
            f,
            "{} stream(s), {} x {} B: relay {:.1} MiB/s ({:.1} one frame in flight; rtt p50 {:?}, p99 {:?}); raw ChaCha20-Poly1305 {:.1} MiB/s; ratio {:.3}",
            self.streams,
            self.frames_per_stream,
            self.frame_bytes,
            mib(self.relay_bytes_per_sec),
            mib(self.serial_bytes_per_sec),
            self.rtt_p50,
            self.rtt_p99,
            mib(self.raw_bytes_per_sec),
            self.relay_bytes_per_sec / self.raw_bytes_per_sec.max(1.0),
        )
    }
}

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Link(#[from] ConnectError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Noise(#[from] NoiseError),
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error("the echo did not match what was sent")]
    Mismatch,
}

/// Runs the benchmark against the relay at `relay_url` (`ws://…/relay/v1`).
pub async fn run(
    relay_url: &str,
    streams: usize,
    frame_bytes: usize,
    frames_per_stream: usize,
) -> Result<BenchReport, BenchError> {
    let identity = Arc::new(Identity::generate()?);
    let host = identity.host_id();
    let host_static = identity.static_public().to_vec();
    let echo = tokio::spawn(echo_host(relay_url.to_string(), identity));
    let result = measure(
        relay_url,
        &host,
        &host_static,
        streams,
        frame_bytes,
        frames_per_stream,
    )
    .await;
    echo.abort();
    let (relay_bytes_per_sec, serial_bytes_per_sec, mut rtts) = result?;
    rtts.sort();
    let pick = |q: f64| {
        rtts.get(((rtts.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    Ok(BenchReport {
        streams,
        frame_bytes,
        frames_per_stream,
        relay_bytes_per_sec,
        serial_bytes_per_sec,
        rtt_p50: pick(0.5),
        rtt_p99: pick(0.99),
        raw_bytes_per_sec: raw(streams * frames_per_stream, frame_bytes)?,
    })
}

fn payload(frame_bytes: usize) -> String {
    // A JSON string of the wanted size: the frame is `"xxx…"`.
    json!("x".repeat(frame_bytes.saturating_sub(2))).to_string()
}

#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
async fn measure(
    relay_url: &str,
    host: &str,
    host_static: &[u8],
    streams: usize,
    frame_bytes: usize,
    frames: usize,
) -> Result<(f64, f64, Vec<Duration>), BenchError> {
    // The echo host needs a moment to authenticate: retry the first stream until it is there.
    let keys = DeviceKeys::generate()?;
    let mut phones = Vec::with_capacity(streams);
    let deadline = Instant::now() + Duration::from_secs(20);
    while phones.is_empty() {
        match Phone::open(relay_url, host, host_static, &keys, "bench", None).await {
            Ok(p) => phones.push(p),
            Err(ClientError::Closed(4404, _)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    for _ in 1..streams {
        phones.push(Phone::open(relay_url, host, host_static, &keys, "bench", None).await?);
    }
    let text = payload(frame_bytes);
    // Round trips first, one frame in flight (a latency, so the throughput run's queueing is
    // not in it), then the throughput run with a small window of frames in flight.
    let rtt_frames = (frames / 4).max(1);
    let start = Instant::now();
    let runs = phones.into_iter().map(|mut p| {
        let text = text.clone();
        tokio::spawn(async move {
            let mut rtts = Vec::with_capacity(rtt_frames);
            for _ in 0..rtt_frames {
                let t = Instant::now();
                p.send_text(&text).await?;
                check(&p.recv_bytes().await?, &text)?;
                rtts.push(t.elapsed());
            }
            Ok::<_, BenchError>((p, rtts))
        })
    });
    let mut rtts = Vec::new();
    let mut phones = Vec::with_capacity(streams);
    for r in futures_util::future::join_all(runs).await {
        let (p, mut v) = r.map_err(|_| BenchError::Mismatch)??;
        rtts.append(&mut v);
        phones.push(p);
    }
    let rtt_secs = start.elapsed().as_secs_f64().max(1e-9);
    let serial = (2 * streams * rtt_frames * text.len()) as f64 / rtt_secs;
    let start = Instant::now();
    let runs = phones.into_iter().map(|mut p| {
        let text = text.clone();
        tokio::spawn(async move {
            let (mut sent, mut back) = (0, 0);
            while back < frames {
                // The protocol has no acknowledgements: a sender never waits for the peer.
                while sent < frames && sent - back < WINDOW {
                    p.send_text(&text).await?;
                    sent += 1;
                }
                check(&p.recv_bytes().await?, &text)?;
                back += 1;
            }
            p.close().await;
            Ok::<_, BenchError>(())
        })
    });
    for r in futures_util::future::join_all(runs).await {
        r.map_err(|_| BenchError::Mismatch)??;
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    let bytes = (2 * streams * frames * text.len()) as f64;
    Ok((bytes / secs, serial, rtts))
}

/// Frames one stream keeps in flight in the throughput run: enough to keep every hop busy
/// (phone, relay, echo host), few enough that no socket buffer fills.
const WINDOW: usize = 4;

fn check(back: &[u8], text: &str) -> Result<(), BenchError> {
    if back.len() != text.len() {
        return Err(BenchError::Mismatch);
    }
    Ok(())
}

/// The same bytes sealed and opened in memory, both directions, as the relay run does.
#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
fn raw(total_frames: usize, frame_bytes: usize) -> Result<f64, BenchError> {
    let (ip, _) = noise::generate_keypair()?;
    let (rp, rpub) = noise::generate_keypair()?;
    let mut i = noise::initiator(&ip, &rpub)?;
    let mut r = noise::responder(&rp)?;
    let mut buf = vec![0u8; 256];
    let mut out = vec![0u8; 256];
    let n = i.write_message(b"", &mut buf).map_err(NoiseError::from)?;
    r.read_message(&buf[..n], &mut out)
        .map_err(NoiseError::from)?;
    let n = r.write_message(b"", &mut buf).map_err(NoiseError::from)?;
    i.read_message(&buf[..n], &mut out)
        .map_err(NoiseError::from)?;
    let mut a = Channel::new(i.into_transport_mode().map_err(NoiseError::from)?);
    let mut b = Channel::new(r.into_transport_mode().map_err(NoiseError::from)?);
    let text = payload(frame_bytes);
    let start = Instant::now();
    for _ in 0..total_frames {
        round_trip_leg(&mut a, &mut b, text.as_bytes())?;
        round_trip_leg(&mut b, &mut a, text.as_bytes())?;
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    Ok((2 * total_frames * text.len()) as f64 / secs)
}

fn round_trip_leg(from: &mut Channel, to: &mut Channel, text: &[u8]) -> Result<(), BenchError> {
    let mut done = None;
    for m in from.seal(text)? {
        done = to.open(&m)?;
    }
    if done.map(|f| f.len()) != Some(text.len()) {
        return Err(BenchError::Mismatch);
    }
    Ok(())
}

/// A host that accepts any device and sends every frame straight back.
async fn echo_host(relay_url: String, identity: Arc<Identity>) -> Result<(), BenchError> {
    let url = format!("{}/host", relay_url.trim_end_matches('/'));
    let mut ws = open_socket(&url, crate::limits::MAX_MESSAGE + 64).await?;
    authenticate(&mut ws, &identity, "bench").await?;
    let (mut sink, mut source) = ws.split();
    // Encoded host-link frames: data frames are sealed straight behind their header. Written
    // as the daemon's link writer does, a burst with one flush.
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(1024);
    let writer = tokio::spawn(async move {
        while let Some(f) = out_rx.recv().await {
            let more = || out_rx.try_recv().ok();
            if send_batch(&mut sink, f, more).await.is_err() {
                break;
            }
        }
    });
    let mut streams: HashMap<u32, mpsc::Sender<Bytes>> = HashMap::new();
    while let Some(Ok(msg)) = source.next().await {
        let Message::Binary(bytes) = msg else {
            continue;
        };
        match Frame::decode_ref(&bytes) {
            Ok(FrameRef::Open(id)) => {
                let (tx, rx) = mpsc::channel(512);
                streams.insert(id, tx);
                tokio::spawn(echo_stream(id, identity.clone(), rx, out_tx.clone()));
            }
            Ok(FrameRef::Data(id, _)) => {
                if let Some(tx) = streams.get(&id) {
                    let _ = tx.send(bytes.slice(PAYLOAD_AT..)).await;
                }
            }
            Ok(FrameRef::Close(id)) => {
                streams.remove(&id);
            }
            Err(_) => {}
        }
    }
    writer.abort();
    Ok(())
}

async fn echo_stream(
    id: u32,
    identity: Arc<Identity>,
    mut rx: mpsc::Receiver<Bytes>,
    out: mpsc::Sender<Vec<u8>>,
) -> Result<(), BenchError> {
    let Some(msg1) = rx.recv().await else {
        return Ok(());
    };
    let mut hs = noise::responder(identity.static_private())?;
    let mut scratch = vec![0u8; msg1.len()];
    hs.read_message(&msg1, &mut scratch)
        .map_err(NoiseError::from)?;
    let body = json!({"ok": true, "device": "bench", "name": "bench"}).to_string();
    let mut msg2 = vec![0u8; body.len() + 128];
    let n = hs
        .write_message(body.as_bytes(), &mut msg2)
        .map_err(NoiseError::from)?;
    msg2.truncate(n);
    let _ = out.send(Frame::encode_data(id, &msg2)).await;
    let mut channel = Channel::new(hs.into_transport_mode().map_err(NoiseError::from)?);
    while let Some(m) = rx.recv().await {
        if let Some(frame) = channel.open(&m)? {
            for sealed in channel.seal_framed(&frame, &Frame::data_header(id))? {
                let _ = out.send(sealed).await;
            }
        }
    }
    Ok(())
}
