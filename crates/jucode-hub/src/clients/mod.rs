//! Connected clients and their outgoing queues.
//!
//! Each queue is bounded twice, in frames and in bytes; a client that falls behind either bound
//! is dropped with close 1008 (`client too slow`) rather than let grow without limit or stall
//! the others. The front end closes the socket itself when a write stalls.

mod queue;
mod text;

use std::collections::HashMap;

use serde_json::Value;
use tokio::sync::watch;

use queue::Offer;
pub use queue::{Frames, TryRecvError};
pub use text::FrameText;

/// How many frames may wait for one client before it counts as too slow and is dropped. A
/// turn's stream of small deltas is the burst this must absorb while a client catches up: an
/// engine that floods deltas outruns even a local reader for a while (4096, then 32,768,
/// dropped clients of the fan-out bench's 50,000-delta flood each time the daemon's own path got
/// faster). A queued frame costs its client a 32-byte slot (the text is shared), so this many
/// is at most 4 MiB of slots; the queue grows only as it fills.
pub const CLIENT_QUEUE: usize = 131_072;
/// How many bytes of frames may wait for one client before it counts as too slow and is
/// dropped. The largest single frames are snapshots (a view holds up to 4 MiB of conversation
/// text, which JSON escaping can roughly double), so this holds a full snapshot with a burst of
/// events behind it; a frame arriving at an empty queue is always taken, so no frame is too big
/// to send at all. A slow client thus pins at most this much plus one frame.
pub const CLIENT_QUEUE_BYTES: usize = 16 * 1024 * 1024;

/// A connection's id, unique for the daemon's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId(pub u64);

/// Who a connection authenticated as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// Holds the daemon token: the desktop or another local client.
    Local,
    /// A paired device, by device id.
    Device(String),
}

/// Something for the front end to write to a client.
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    /// One JSON text frame, serialized once for every recipient.
    Frame(FrameText),
}

impl Outgoing {
    /// Its bytes, as the queue's byte budget counts them.
    fn len(&self) -> usize {
        let Outgoing::Frame(text) = self;
        text.len()
    }
}

/// Why the hub ended a connection: a WebSocket close code and reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Kick {
    pub code: u16,
    pub reason: &'static str,
}

/// The front end's end of a registered connection.
#[derive(Debug)]
pub struct Connection {
    pub id: ClientId,
    /// Frames to write, in order. Ends when the hub drops the client.
    pub frames: Frames,
    /// Becomes `Some` when the hub ends the connection (revoked, too slow): close at once with
    /// this code, without draining `frames`.
    pub kicked: watch::Receiver<Option<Kick>>,
}

struct Client {
    auth: Auth,
    tx: queue::Sender,
    kick: watch::Sender<Option<Kick>>,
}

const TOO_SLOW: Kick = Kick {
    code: 1008,
    reason: "client too slow",
};

/// A frame's JSON text. `serde_json::to_string` writes straight into a byte buffer, where
/// `Value`'s `Display` goes through a formatter for every piece: about half the cost of each
/// broadcast frame.
pub(crate) fn json_text(frame: &Value) -> FrameText {
    serde_json::to_string(frame)
        .unwrap_or_else(|_| frame.to_string())
        .into()
}

#[derive(Default)]
pub(crate) struct Clients {
    next: u64,
    map: HashMap<ClientId, Client>,
}

impl Clients {
    pub(crate) fn add(&mut self, auth: Auth) -> Connection {
        self.next += 1;
        let id = ClientId(self.next);
        let (tx, frames) = queue::queue();
        let (kick, kicked) = watch::channel(None);
        self.map.insert(id, Client { auth, tx, kick });
        Connection { id, frames, kicked }
    }

    pub(crate) fn remove(&mut self, id: ClientId) {
        self.map.remove(&id);
    }

    pub(crate) fn auth(&self, id: ClientId) -> Option<Auth> {
        self.map.get(&id).map(|c| c.auth.clone())
    }

    /// Bytes queued for `id` and not yet taken by the front end; `None` once it is gone.
    pub(crate) fn backlog(&self, id: ClientId) -> Option<usize> {
        self.map.get(&id).map(|c| c.tx.backlog())
    }

    pub(crate) fn ids(&self) -> Vec<ClientId> {
        self.map.keys().copied().collect()
    }

    /// Queues a frame for one client. A client whose queue is full (in frames or bytes) is
    /// dropped.
    pub(crate) fn send(&mut self, id: ClientId, frame: &Value) {
        let text = json_text(frame);
        self.send_text(id, text);
    }

    /// Queues a new connection's connect batch whole, whatever its size: the client cannot be
    /// behind before it has had its first frames, and a daemon with a long history (tens of
    /// thousands of sessions make a `sessions` list of many MiB) must still let clients in.
    /// The bytes count toward the budget, so what follows waits for the client to read them.
    pub(crate) fn send_batch(&mut self, id: ClientId, frames: &[Value]) {
        for frame in frames {
            self.send_text_bounded(id, json_text(frame), false);
        }
    }

    /// Queues a frame already serialized (a hot path builds its JSON text itself). Returns
    /// false when the client was dropped.
    pub(crate) fn send_text(&mut self, id: ClientId, text: FrameText) -> bool {
        self.send_text_bounded(id, text, true)
    }

    fn send_text_bounded(&mut self, id: ClientId, text: FrameText, bounded: bool) -> bool {
        let Some(client) = self.map.get(&id) else {
            return true;
        };
        match client.tx.offer(Outgoing::Frame(text), bounded) {
            Offer::Taken => true,
            Offer::Closed => {
                self.map.remove(&id);
                false
            }
            Offer::TooSlow => {
                self.kick(id, TOO_SLOW);
                false
            }
        }
    }

    /// Queues a frame for every client, serialized once. Returns the clients dropped for being
    /// too slow, so their watches can end.
    pub(crate) fn broadcast(&mut self, frame: &Value) -> Vec<ClientId> {
        self.broadcast_except(frame, None)
    }

    pub(crate) fn broadcast_except(
        &mut self,
        frame: &Value,
        except: Option<ClientId>,
    ) -> Vec<ClientId> {
        self.broadcast_text_except(json_text(frame), except)
    }

    /// Queues a frame already serialized for every client but `except`. Returns the clients
    /// dropped for being too slow.
    pub(crate) fn broadcast_text_except(
        &mut self,
        text: FrameText,
        except: Option<ClientId>,
    ) -> Vec<ClientId> {
        // One walk over the map, not a lookup per client: this runs for every event, for
        // every client. Who has to go is settled after the walk.
        let mut closed = Vec::new();
        let mut slow = Vec::new();
        let mut targets = self
            .map
            .iter()
            .filter(|(id, _)| Some(**id) != except)
            .peekable();
        let mut text = Some(text);
        while let Some((id, client)) = targets.next() {
            // The last one takes the text itself: one reference count less per event.
            let frame = if targets.peek().is_some() {
                text.clone()
            } else {
                text.take()
            };
            let Some(frame) = frame else {
                break;
            };
            match client.tx.offer(Outgoing::Frame(frame), true) {
                Offer::Taken => {}
                Offer::Closed => closed.push(*id),
                Offer::TooSlow => slow.push(*id),
            }
        }
        for id in &closed {
            self.map.remove(id);
        }
        for id in &slow {
            self.kick(*id, TOO_SLOW);
        }
        closed.extend(slow);
        closed
    }

    fn kick(&mut self, id: ClientId, kick: Kick) {
        if let Some(client) = self.map.remove(&id) {
            let _ = client.kick.send(Some(kick));
        }
    }

    /// Ends every connection of a revoked device at once.
    pub(crate) fn drop_device(&mut self, device: &str) -> Vec<ClientId> {
        let ids: Vec<ClientId> = self
            .map
            .iter()
            .filter(|(_, c)| matches!(&c.auth, Auth::Device(d) if d == device))
            .map(|(id, _)| *id)
            .collect();
        for id in &ids {
            self.kick(
                *id,
                Kick {
                    code: 1008,
                    reason: "device revoked",
                },
            );
        }
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(bytes: usize) -> Value {
        Value::String("x".repeat(bytes))
    }

    #[tokio::test]
    async fn a_client_over_the_byte_budget_is_dropped_with_1008() {
        let mut clients = Clients::default();
        let mut conn = clients.add(Auth::Local);
        // Any frame is taken into an empty queue, even one over the whole budget.
        clients.send(conn.id, &frame(CLIENT_QUEUE_BYTES + 10));
        assert!(clients.auth(conn.id).is_some());
        let Some(Outgoing::Frame(big)) = conn.frames.recv().await else {
            panic!("the big frame was not queued")
        };
        assert_eq!(big.len(), CLIENT_QUEUE_BYTES + 12);
        // Taking it freed its bytes: frames up to the budget fit again, and one more does not.
        let half = CLIENT_QUEUE_BYTES / 2 - 2;
        clients.send(conn.id, &frame(half));
        clients.send(conn.id, &frame(half));
        assert!(clients.auth(conn.id).is_some());
        clients.send(conn.id, &frame(1));
        assert!(clients.auth(conn.id).is_none(), "still registered");
        assert_eq!(
            *conn.kicked.borrow(),
            Some(Kick {
                code: 1008,
                reason: "client too slow"
            })
        );
    }

    #[tokio::test]
    async fn a_connect_batch_over_the_byte_budget_is_taken_whole() {
        let mut clients = Clients::default();
        let mut conn = clients.add(Auth::Local);
        let batch = [frame(10), frame(CLIENT_QUEUE_BYTES), frame(10), frame(10)];
        clients.send_batch(conn.id, &batch);
        assert!(
            clients.auth(conn.id).is_some(),
            "the batch dropped the client"
        );
        for want in [12, CLIENT_QUEUE_BYTES + 2, 12, 12] {
            let Some(Outgoing::Frame(f)) = conn.frames.recv().await else {
                panic!("a batch frame is missing")
            };
            assert_eq!(f.len(), want);
        }
        // The batch counted: a live frame over the budget behind an unread batch still drops.
        clients.send_batch(conn.id, &[frame(CLIENT_QUEUE_BYTES)]);
        clients.send(conn.id, &frame(10));
        assert!(clients.auth(conn.id).is_none());
    }

    #[test]
    fn a_client_over_the_frame_budget_is_dropped_with_1008() {
        let mut clients = Clients::default();
        let conn = clients.add(Auth::Local);
        for _ in 0..CLIENT_QUEUE {
            clients.send(conn.id, &frame(1));
        }
        assert!(clients.auth(conn.id).is_some());
        assert_eq!(clients.broadcast(&frame(1)), vec![conn.id]);
        assert!(clients.auth(conn.id).is_none());
        assert_eq!(conn.kicked.borrow().as_ref().map(|k| k.code), Some(1008));
    }

    #[tokio::test]
    async fn a_broadcast_drops_the_slow_and_the_gone_and_reaches_the_rest() {
        let mut clients = Clients::default();
        let slow = clients.add(Auth::Local);
        let gone = clients.add(Auth::Local);
        let mut fine = clients.add(Auth::Local);
        let except = clients.add(Auth::Local);
        for _ in 0..CLIENT_QUEUE {
            clients.send(slow.id, &frame(1));
        }
        let gone_id = gone.id;
        drop(gone);
        let mut dropped = clients.broadcast_except(&frame(3), Some(except.id));
        dropped.sort();
        assert_eq!(dropped, vec![slow.id, gone_id]);
        assert!(clients.auth(slow.id).is_none() && clients.auth(gone_id).is_none());
        assert_eq!(slow.kicked.borrow().as_ref().map(|k| k.code), Some(1008));
        let Ok(Outgoing::Frame(got)) = fine.frames.try_recv() else {
            panic!("the live client got nothing")
        };
        assert_eq!(&*got, "\"xxx\"");
        assert_eq!(clients.backlog(fine.id), Some(0));
        assert_eq!(clients.backlog(except.id), Some(0));
    }
}
