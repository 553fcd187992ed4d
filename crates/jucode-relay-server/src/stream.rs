//! The client side: one WebSocket per stream, carried to the host as open/data/close frames.

use std::sync::Arc;
use std::time::Duration;

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
    let write_timeout = state.limits.write_timeout;
    // Every write is bounded: a client that stops reading loses its connection, it does not
    // keep a blocked writer (and so its socket) alive.
    let mut writer = tokio::spawn(async move {
        while let Some(out) = rx.recv().await {
            let (message, last) = match out {
                ClientOut::Data(bytes) => (Message::binary(bytes), false),
                ClientOut::Close(code, reason) => (close_frame(code, reason), true),
            };
            match tokio::time::timeout(write_timeout, sink.send(message)).await {
                Ok(Ok(())) if !last => {}
                Ok(Ok(())) => break,
                Ok(Err(_)) | Err(_) => return,
            }
        }
        let _ = tokio::time::timeout(write_timeout, sink.close()).await;
    });
    // Why the client side ended, if the relay must tell the client.
    let mut ours: Option<(u16, &'static str)> = None;
    let mut writer_done = false;
    loop {
        let next = tokio::select! {
            next = tokio::time::timeout(state.limits.idle, stream.next()) => next,
            // The writer ended (a stalled or failed write, or the stream was dropped and its
            // close sent): stop reading, so both halves of the socket go.
            _ = &mut writer => {
                writer_done = true;
                break;
            }
        };
        let msg = match next {
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
                let frame = Frame::encode_data(id, &bytes);
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
    if !writer_done
        && tokio::time::timeout(Duration::from_secs(2), &mut writer)
            .await
            .is_err()
    {
        // Its socket half must not outlive the stream.
        writer.abort();
    }
}
