//! Connected clients and their outgoing queues.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, watch};

/// How many frames may wait for one client before it counts as too slow and is dropped.
pub const CLIENT_QUEUE: usize = 4096;

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
    Frame(Arc<str>),
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
    pub frames: mpsc::Receiver<Outgoing>,
    /// Becomes `Some` when the hub ends the connection (revoked, too slow): close at once with
    /// this code, without draining `frames`.
    pub kicked: watch::Receiver<Option<Kick>>,
}

struct Client {
    auth: Auth,
    tx: mpsc::Sender<Outgoing>,
    kick: watch::Sender<Option<Kick>>,
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
        let (tx, frames) = mpsc::channel(CLIENT_QUEUE);
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

    pub(crate) fn ids(&self) -> Vec<ClientId> {
        self.map.keys().copied().collect()
    }

    /// Queues a frame for one client. A client whose queue is full is dropped.
    pub(crate) fn send(&mut self, id: ClientId, frame: &Value) {
        let text: Arc<str> = frame.to_string().into();
        self.send_text(id, text);
    }

    fn send_text(&mut self, id: ClientId, text: Arc<str>) -> bool {
        let Some(client) = self.map.get(&id) else {
            return true;
        };
        match client.tx.try_send(Outgoing::Frame(text)) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.map.remove(&id);
                false
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.kick(
                    id,
                    Kick {
                        code: 1008,
                        reason: "client too slow",
                    },
                );
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
        let text: Arc<str> = frame.to_string().into();
        let mut dropped = Vec::new();
        for id in self.ids() {
            if Some(id) != except && !self.send_text(id, text.clone()) {
                dropped.push(id);
            }
        }
        dropped
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
