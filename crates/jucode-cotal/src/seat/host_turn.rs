//! A Cotal-owned turn and the workflow run turns riding it: the send's
//! accepted hook settles the ledger before the seat hears the turn ended, and
//! a turn that ended well yields `done` for what it showed and left open.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::Seat;
use crate::harness::{Harness, TurnFailure};

impl Seat {
    /// Run `text` as send `send`; its outcome goes to `done`.
    pub(super) fn spawn_host_turn(
        self: &Arc<Self>,
        h: Arc<dyn Harness>,
        text: String,
        send: u64,
        done: mpsc::UnboundedSender<Result<(), TurnFailure>>,
    ) {
        let seat = self.clone();
        tokio::spawn(async move {
            let (accepted, was_accepted) = oneshot::channel();
            let ledger = tokio::spawn(async move {
                let ok = was_accepted.await.is_ok();
                let mut st = seat.state();
                if ok {
                    let shown = st.runturns.accepted(send);
                    if !shown.is_empty() {
                        tracing::info!(turns = ?shown, "workflow run turns shown");
                    }
                } else {
                    st.runturns.not_accepted(send);
                }
            });
            let res = h.send_turn_accepted(&text, accepted).await;
            // The ledger is settled before the seat hears the turn ended.
            let _ = ledger.await;
            let _ = done.send(res);
        });
    }

    /// Ending a host turn yields `done` for each run turn it showed that the
    /// agent did not settle itself; a failed yield stays open for the next end.
    pub(super) fn auto_yield(self: &Arc<Self>) {
        let due: Vec<String> = {
            let mut st = self.state();
            let due: Vec<String> = st
                .runturns
                .open_shown()
                .into_iter()
                .filter(|t| !st.auto_yielding.contains(t))
                .collect();
            st.auto_yielding.extend(due.iter().cloned());
            due
        };
        for turn in due {
            let seat = self.clone();
            tokio::spawn(async move {
                let args = serde_json::json!({"status": "done", "turn": turn});
                let res = seat
                    .manager
                    .call(&seat.mesh, &seat.cfg, "turn-yield", args)
                    .await;
                let mut st = seat.state();
                st.auto_yielding.remove(&turn);
                match res {
                    Ok(_) => {
                        st.runturns.settle(&turn);
                        tracing::info!(turn = %turn, "workflow run turn yielded done as its turn ended");
                    }
                    Err(e) => {
                        tracing::warn!(turn = %turn, error = %e, "automatic yield failed; the run turn stays open")
                    }
                }
            });
        }
    }
}
