//! The client side: one WebSocket per stream, carried to the host as open/data/close frames.

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use jucode_relay_proto::close;
use jucode_relay_proto::frame::Frame;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::host::close_frame;
use crate::{ClientOut, HostOut, State, Ws};

/// Messages waiting for one client's writer.
const CLIENT_QUEUE: usize = 256;

/// Registers a stream with `host`: its id and the host's writer, or the close code to use.
fn register(
    state: &State,
    host: &str,
    tx: mpsc::Sender<ClientOut>,
) -> Result<(u32, u64, mpsc::Sender<HostOut>), (u16, &'static str)> {
    let mut hosts = state.hosts();
    let Some(entry) = hosts.get_mut(host) else {
        return Err((close::OFFLINE, "host offline"));
    };
    if entry.streams.len() >= state.limits.streams_per_host {
        return Err((close::BUSY, "too many connections"));
    }
    let mut id = entry.next_stream;
    while id == 0 || entry.streams.contains_key(&id) {
        id = id.wrapping_add(1);
    }
    entry.next_stream = id.wrapping_add(1);
    entry.streams.insert(id, tx);
    Ok((id, entry.generation, entry.tx.clone()))
}

pub(crate) async fn run(mut ws: Ws, state: Arc<State>, host: String) {
    let (tx, mut rx) = mpsc::channel(CLIENT_QUEUE);
    let (id, generation, host_tx) = match register(&state, &host, tx) {
        Ok(r) => r,
        Err((code, reason)) => {
            let _ = ws.send(close_frame(code, reason)).await;
            return;
        }
    };
    if host_tx
        .send(HostOut::Frame(Frame::Open(id).encode()))
        .await
        .is_err()
    {
        let _ = ws.send(close_frame(close::OFFLINE, "host offline")).await;
        return;
    }
    let (mut sink, mut stream) = ws.split();
    let writer = tokio::spawn(async move {
        while let Some(out) = rx.recv().await {
            match out {
                ClientOut::Data(bytes) => {
                    if sink.send(Message::binary(bytes)).await.is_err() {
                        break;
                    }
                }
                ClientOut::Close(code, reason) => {
                    let _ = sink.send(close_frame(code, reason)).await;
                    break;
                }
            }
        }
        let _ = sink.close().await;
    });
    // Why the client side ended, if the relay must tell the client.
    let mut ours: Option<(u16, &'static str)> = None;
    loop {
        let msg = match tokio::time::timeout(state.limits.idle, stream.next()).await {
            Err(_) => {
                ours = Some((1000, "idle"));
                break;
            }
            Ok(None) | Ok(Some(Ok(Message::Close(_)))) => break,
            Ok(Some(Err(WsError::Capacity(_)))) => {
                ours = Some((1009, "message too large"));
                break;
            }
            Ok(Some(Err(_))) => break,
            Ok(Some(Ok(msg))) => msg,
        };
        match msg {
            Message::Binary(bytes) => {
                let frame = Frame::Data(id, bytes.to_vec()).encode();
                // Waiting here pushes back on this client only until the host's queue drains.
                if host_tx.send(HostOut::Frame(frame)).await.is_err() {
                    break;
                }
            }
            Message::Text(_) => {
                ours = Some((close::PROTOCOL, "binary frames only"));
                break;
            }
            _ => {}
        }
    }
    // Still registered means the client ended it: tell the host.
    let mut was_ours = false;
    {
        let mut hosts = state.hosts();
        if let Some(entry) = hosts.get_mut(&host)
            && entry.generation == generation
        {
            let removed = entry.streams.remove(&id);
            if let Some(client) = removed {
                was_ours = true;
                if let Some((code, reason)) = ours {
                    let _ = client.try_send(ClientOut::Close(code, reason));
                }
            }
        }
    }
    if was_ours {
        let _ = host_tx.try_send(HostOut::Frame(Frame::Close(id).encode()));
    }
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), writer).await;
}
