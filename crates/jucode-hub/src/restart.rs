//! `restart_when_idle`: the desktop asks this daemon to step aside for a newer one. Every
//! client hears `daemon_restarting`; from then on the background loop starts no new work of
//! its own (messages, timers and scheduled runs wait, durably, for the next daemon), and once
//! no session is in a turn the hub asks its host to exit ([`Hub::exit_requested`]).
//!
//! A client's own ops still run: a person who starts a turn meanwhile only delays the exit.

use std::sync::atomic::{AtomicBool, Ordering};

use jucode_protocol::daemon::{DaemonEvent, Reply};
use tokio::sync::watch;

use crate::cx::OpCx;
use crate::{Hub, Inner, to_value};

/// Whether a restart was asked for, and the signal to the host that it may exit now.
pub(crate) struct Restart {
    requested: AtomicBool,
    exit: watch::Sender<bool>,
}

impl Default for Restart {
    fn default() -> Restart {
        Restart {
            requested: AtomicBool::new(false),
            exit: watch::Sender::new(false),
        }
    }
}

impl Restart {
    /// Whether `restart_when_idle` was asked for.
    pub(crate) fn pending(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }
}

/// The op: announces the restart (once) and exits at once when nothing runs.
pub(crate) fn handle(cx: &OpCx<'_>) {
    let hub = cx.hub;
    let mut inner = hub.lock();
    if !hub.restart.requested.swap(true, Ordering::SeqCst) {
        tracing::info!("restart_when_idle: exiting once no session is in a turn");
        let frame = to_value(&Reply::to(None, DaemonEvent::DaemonRestarting));
        inner.broadcast(&frame);
    }
    hub.exit_if_idle(&inner);
}

impl Hub {
    /// Completes once the daemon should exit for `restart_when_idle` (never otherwise). The
    /// host serves until this or its own shutdown signal.
    pub async fn exit_requested(&self) {
        let mut rx = self.restart.exit.subscribe();
        let _ = rx.wait_for(|exit| *exit).await;
    }

    /// Signals the exit when a restart is pending and no session is in a turn.
    pub(crate) fn exit_if_idle(&self, inner: &Inner) {
        if self.restart.pending() && !inner.sessions.any_in_turn() {
            self.restart.exit.send_replace(true);
        }
    }
}
