//! The host link: challenge, Ed25519 auth, then binary open/data/close frames.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures_util::{SinkExt, StreamExt};
use jucode_relay_proto::batch::send_batch;
use jucode_relay_proto::close;
use jucode_relay_proto::frame::{Frame, FrameRef, PAYLOAD_AT};
use jucode_relay_proto::identity::{b64, host_id, unb64};
use ring::rand::{SecureRandom, SystemRandom};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::{ClientOut, HostEntry, HostOut, State, Ws};

/// Frames waiting for one host's writer.
const HOST_QUEUE: usize = 1024;

#[derive(Deserialize)]
struct Auth {
    t: String,
    #[serde(rename = "pub")]
    public: String,
    sig: String,
}

pub(crate) fn close_frame(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code: CloseCode::from(code),
        reason: reason.to_string().into(),
    }))
}

/// Verifies the host's answer to `nonce`: its public key when the signature holds.
fn verify(text: &str, nonce: &[u8]) -> Option<Vec<u8>> {
    let auth: Auth = serde_json::from_str(text).ok()?;
    if auth.t != "auth" {
        return None;
    }
    let public = unb64(&auth.public).filter(|k| k.len() == 32)?;
    let sig = unb64(&auth.sig).filter(|s| s.len() == 64)?;
    let mut signed = jucode_relay_proto::AUTH_CONTEXT.to_vec();
    signed.extend_from_slice(nonce);
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &public)
        .verify(&signed, &sig)
        .ok()?;
    Some(public)
}

pub(crate) async fn run(mut ws: Ws, state: Arc<State>) {
    let mut nonce = [0u8; 32];
    if SystemRandom::new().fill(&mut nonce).is_err() {
        return;
    }
    let challenge = json!({"t": "challenge", "nonce": b64(&nonce)}).to_string();
    if ws.send(Message::text(challenge)).await.is_err() {
        return;
    }
    let answer = tokio::time::timeout(state.limits.handshake, async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(t))) => return Some(t.to_string()),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                _ => return None,
            }
        }
    })
    .await
    .ok()
    .flatten();
    let Some(public) = answer.and_then(|t| verify(&t, &nonce)) else {
        let _ = ws.send(close_frame(close::AUTH, "auth failed")).await;
        return;
    };
    let host = host_id(&public);
    let generation = state.next_generation.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::channel(HOST_QUEUE);
    let replaced = state.hosts().insert(
        host.clone(),
        HostEntry {
            generation,
            public,
            tx,
            streams: Default::default(),
            next_stream: 1,
        },
    );
    if let Some(old) = replaced {
        let _ = old.tx.try_send(HostOut::Close(close::REPLACED, "replaced"));
        for (_, client) in old.streams {
            let _ = client.try_send(ClientOut::Close(close::OFFLINE, "host offline"));
        }
    }
    tracing::info!("host {host} connected");
    if ws
        .send(Message::text(
            json!({"t": "ready", "host": host}).to_string(),
        ))
        .await
        .is_ok()
    {
        serve(ws, &state, &host, generation, rx).await;
    }
    // Only this connection's entry goes; a newer one for the same id stays.
    let mut hosts = state.hosts();
    if hosts.get(&host).is_some_and(|h| h.generation == generation)
        && let Some(entry) = hosts.remove(&host)
    {
        for (_, client) in entry.streams {
            let _ = client.try_send(ClientOut::Close(close::OFFLINE, "host offline"));
        }
        tracing::info!("host {host} disconnected");
    }
}

async fn serve(
    ws: Ws,
    state: &Arc<State>,
    host: &str,
    generation: u64,
    mut rx: mpsc::Receiver<HostOut>,
) {
    let (mut sink, mut stream) = ws.split();
    let ping_every = state.limits.ping;
    let writer = tokio::spawn(async move {
        let mut ping = tokio::time::interval(ping_every);
        ping.tick().await;
        loop {
            // A close queued behind a burst of frames: sent once the burst is out.
            let mut close = None;
            let result = tokio::select! {
                out = rx.recv() => match out {
                    None => break,
                    Some(HostOut::Frame(bytes)) => {
                        let more = || match rx.try_recv() {
                            Ok(HostOut::Frame(bytes)) => Some(bytes),
                            Ok(HostOut::Close(code, reason)) => {
                                close = Some((code, reason));
                                None
                            }
                            Err(_) => None,
                        };
                        send_batch(&mut sink, bytes, more).await
                    }
                    Some(HostOut::Close(code, reason)) => {
                        close = Some((code, reason));
                        Ok(())
                    }
                },
                _ = ping.tick() => sink.send(Message::Ping(Vec::new().into())).await,
            };
            if result.is_err() {
                break;
            }
            if let Some((code, reason)) = close {
                let _ = sink.send(close_frame(code, reason)).await;
                break;
            }
        }
        let _ = sink.close().await;
    });
    loop {
        let msg = match tokio::time::timeout(state.limits.host_dead, stream.next()).await {
            Ok(Some(Ok(msg))) => msg,
            _ => break,
        };
        match msg {
            Message::Binary(bytes) => match Frame::decode_ref(&bytes) {
                Ok(FrameRef::Data(id, _)) => {
                    let client = state
                        .hosts()
                        .get(host)
                        // A replaced link's frames must not reach its successor's streams.
                        .filter(|h| h.generation == generation)
                        .and_then(|h| h.streams.get(&id).cloned());
                    if let Some(client) = client
                        && client
                            .try_send(ClientOut::Data(bytes.slice(PAYLOAD_AT..)))
                            .is_err()
                    {
                        // A client that cannot keep up loses its stream, not the host link;
                        // the host is told, so it lets go of its end too.
                        drop_stream(state, host, generation, id, 1008, "too slow");
                        let host_tx = state.hosts().get(host).map(|h| h.tx.clone());
                        if let Some(tx) = host_tx {
                            let _ = tx.try_send(HostOut::Frame(Frame::Close(id).encode()));
                        }
                    }
                }
                Ok(FrameRef::Close(id)) => drop_stream(
                    state,
                    host,
                    generation,
                    id,
                    close::HOST_CLOSED,
                    "host closed",
                ),
                Ok(FrameRef::Open(_)) | Err(_) => {
                    tracing::debug!("host {host}: ignoring a bad frame");
                }
            },
            Message::Close(_) => break,
            Message::Text(_) => {
                if let Some(h) = state
                    .hosts()
                    .get(host)
                    .filter(|h| h.generation == generation)
                {
                    let _ =
                        h.tx.try_send(HostOut::Close(close::PROTOCOL, "binary frames only"));
                }
                break;
            }
            _ => {}
        }
    }
    // Let the writer send a queued close (4409, 4400) before it goes.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), writer).await;
}

/// Forgets a stream and closes its client with `code`.
pub(crate) fn drop_stream(
    state: &State,
    host: &str,
    generation: u64,
    id: u32,
    code: u16,
    reason: &'static str,
) {
    let client = state
        .hosts()
        .get_mut(host)
        .filter(|h| h.generation == generation)
        .and_then(|h| h.streams.remove(&id));
    if let Some(client) = client {
        let _ = client.try_send(ClientOut::Close(code, reason));
    }
}
