//! The context an op runs in, and the one way an area answers: [`OpCx::reply`] (or
//! [`OpCx::reply_locked`] when the reply must be queued in the same locked step as a
//! broadcast), with errors returned as [`crate::error::OpError`] for the router to send.

use std::sync::Arc;

use jucode_protocol::daemon::{DaemonEvent, Reply};
use serde_json::Value;

use crate::{Auth, ClientId, Hub, Inner, to_value};

/// One op being answered: who sent it, as whom, and the id its reply carries.
pub(crate) struct OpCx<'a> {
    pub(crate) hub: &'a Arc<Hub>,
    pub(crate) client: ClientId,
    pub(crate) auth: Auth,
    pub(crate) id: Option<Value>,
}

impl OpCx<'_> {
    /// Sends the reply to the client that asked.
    pub(crate) fn reply(&self, event: DaemonEvent) {
        let mut inner = self.hub.lock();
        self.reply_locked(&mut inner, event);
    }

    /// Sends the reply while the caller holds the lock, ordered with what it broadcasts.
    pub(crate) fn reply_locked(&self, inner: &mut Inner, event: DaemonEvent) {
        inner
            .clients
            .send(self.client, &to_value(&Reply::to(self.id.clone(), event)));
    }

    /// Sends a list every client keeps (`actions`, `sessions`, …) to every client.
    pub(crate) fn broadcast_list(&self, inner: &mut Inner, event: DaemonEvent) {
        inner.broadcast(&to_value(&Reply::to(None, event)));
    }

    /// Sends a list to every client but the one that asked (it gets the list as its reply).
    pub(crate) fn broadcast_to_others(&self, inner: &mut Inner, event: DaemonEvent) {
        let frame = to_value(&Reply::to(None, event));
        for dropped in inner.clients.broadcast_except(&frame, Some(self.client)) {
            inner.client_gone(dropped);
        }
    }

    pub(crate) fn is_device(&self) -> bool {
        matches!(self.auth, Auth::Device(_))
    }
}
