//! The driver loop: it starts turns, soft-interrupts busy ones, acks what a good turn carried,
//! retries failures, and follows the harness's signals.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::message::Acker;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Busy, Seat, State};
use crate::events::RunHint;
use crate::harness::{Harness, HarnessSignal, Steered, TurnFailure};
use crate::inbox;
use crate::presence::{Condition, Status};
use crate::runturn::RunTurn;
use crate::util::now_ms;
use crate::{Error, Result};

/// How long a stopping seat waits for the AG-UI emitter to wind down.
const EMITTER_STOP_LIMIT: Duration = Duration::from_secs(10);

/// The running AG-UI emitter and its stop signal.
type Emitting = (JoinHandle<Result<()>>, tokio::sync::watch::Sender<bool>);

/// What the interrupt task reports, in order, on one channel.
enum SteerEvent {
    /// The request was answered (or given up at its bound); accepted items
    /// stay held until [`SteerEvent::Carried`].
    Answered {
        ids: Vec<String>,
        accepted: std::result::Result<(), TurnFailure>,
    },
    /// The turn that really carried an accepted interrupt ended. `own`: it
    /// was the interrupt's own turn, so its failure is the seat's to retry.
    Carried {
        ids: Vec<String>,
        own: bool,
        res: std::result::Result<(), TurnFailure>,
    },
}

async fn ack_all(acks: Vec<Acker>) {
    for a in acks {
        if let Err(e) = a.ack().await {
            tracing::warn!(error = %e, "ack failed; the message will be redelivered");
        }
    }
}

impl Seat {
    /// The driver: start turns, soft-interrupt busy turns, ack after success, retry failures.
    pub(super) async fn drive(
        self: Arc<Self>,
        harness: Arc<dyn Harness>,
        mut signals: tokio::sync::broadcast::Receiver<HarnessSignal>,
        shutdown: impl std::future::Future<Output = ()>,
        mut emitter: Option<Emitting>,
        mut run_turns: mpsc::UnboundedReceiver<RunTurn>,
    ) -> Result<()> {
        let (turn_tx, mut turn_rx) = mpsc::unbounded_channel::<Result<(), TurnFailure>>();
        let (int_tx, mut int_rx) = mpsc::unbounded_channel::<SteerEvent>();
        tokio::pin!(shutdown);
        loop {
            self.step(&harness, &turn_tx, &int_tx);
            let retry_at = self.state().retry_at;
            tokio::select! {
                _ = &mut shutdown => {
                    if let Some((task, stop)) = emitter.take() {
                        let _ = stop.send(true);
                        match tokio::time::timeout(EMITTER_STOP_LIMIT, task).await {
                            Ok(Ok(Ok(()))) => tracing::info!("AG-UI emitter stopped"),
                            Ok(Ok(Err(e))) => tracing::error!(error = %e, "AG-UI emitter failed"),
                            Ok(Err(e)) => tracing::error!(error = %e, "AG-UI emitter panicked"),
                            Err(_) => tracing::error!("AG-UI emitter did not stop in time"),
                        }
                    }
                    return Ok(());
                }
                _ = self.kick.notified() => {}
                Some(t) = run_turns.recv() => {
                    let id = t.turn.clone();
                    if self.state().runturns.offer(t) {
                        tracing::info!(turn = %id, "workflow run turn offered; it rides the next turn");
                    }
                }
                Some(res) = turn_rx.recv() => self.turn_ended(res).await,
                Some(ev) = int_rx.recv() => self.interrupt_event(ev).await,
                sig = signals.recv() => match sig {
                    Ok(s) => self.on_signal(s).await,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        return Err(Error::Harness("the harness closed its signal channel".into()));
                    }
                },
                _ = async {
                    match retry_at {
                        Some(t) => {
                            let clock = &self.opts.clock;
                            clock.sleep(t.saturating_sub(clock.elapsed())).await
                        }
                        None => std::future::pending().await,
                    }
                } => {
                    self.state().retry_at = None;
                }
                res = async {
                    match emitter.as_mut() {
                        Some((h, _)) => h.await,
                        None => std::future::pending().await,
                    }
                } => {
                    emitter = None;
                    match res {
                        Ok(Ok(())) => tracing::info!("AG-UI emitter stopped"),
                        Ok(Err(e)) => {
                            tracing::error!(error = %e, "AG-UI emitter failed");
                            if self.cfg.events_required {
                                return Err(e);
                            }
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "AG-UI emitter panicked");
                            if self.cfg.events_required {
                                return Err(Error::Events(e.to_string()));
                            }
                        }
                    }
                }
            }
        }
    }

    /// Decide what to do now; spawns the turn or interrupt it starts.
    fn step(
        self: &Arc<Self>,
        harness: &Arc<dyn Harness>,
        turn_tx: &mpsc::UnboundedSender<Result<(), TurnFailure>>,
        int_tx: &mpsc::UnboundedSender<SteerEvent>,
    ) {
        let mut st = self.state();
        if !st.mesh_ready || st.reconnecting {
            return;
        }
        match st.busy {
            Busy::Idle => {
                if st.retry_at.is_some() || !(st.inbox.wants_turn() || st.runturns.wants_send()) {
                    return;
                }
                let (items, mention) = st.inbox.begin_turn();
                // The seat's briefing is in the transcript already (the harness
                // puts it there before readiness): a turn carries only mail.
                let mut text = String::new();
                if !items.is_empty() {
                    text.push_str(&inbox::format_injection(&items));
                }
                if mention {
                    if !items.is_empty() {
                        text.push_str("\n\n");
                    }
                    text.push_str(&inbox::mention_notice(st.inbox.counts().1));
                }
                // Run turns ride this send; shown once the harness accepts it.
                st.sends += 1;
                let send = st.sends;
                if let Some(block) = st.runturns.carry(send) {
                    if !text.is_empty() {
                        text.push_str("\n\n");
                    }
                    text.push_str(&block);
                }
                st.busy = Busy::Ours;
                st.interrupt_failed = false;
                st.presence.condition = None;
                st.presence.set_status(Status::Working, now_ms());
                drop(st);
                self.hint(RunHint::TurnStarted);
                self.touch_presence();
                self.spawn_host_turn(harness.clone(), text, send, turn_tx.clone());
            }
            Busy::Ours | Busy::Foreign => {
                if st.interrupt || st.interrupt_failed || !st.inbox.has_directed() {
                    return;
                }
                let items = st.inbox.take_directed();
                let ids: Vec<String> = items.iter().map(|i| i.id.clone()).collect();
                st.interrupt = true;
                drop(st);
                let text = inbox::format_injection(&items);
                let h = harness.clone();
                let tx = int_tx.clone();
                let limit = self.opts.interrupt_timeout;
                tokio::spawn(async move {
                    let answer = match tokio::time::timeout(limit, h.soft_interrupt(&text)).await {
                        Ok(r) => r,
                        Err(_) => Err(TurnFailure {
                            code: None,
                            message: "soft interrupt timed out".into(),
                        }),
                    };
                    let (result, own) = match answer {
                        Ok(Steered::OwnTurn { result }) => (result, true),
                        Ok(Steered::Joined { result }) => (result, false),
                        Err(f) => {
                            let _ = tx.send(SteerEvent::Answered {
                                ids,
                                accepted: Err(f),
                            });
                            return;
                        }
                    };
                    let _ = tx.send(SteerEvent::Answered {
                        ids: ids.clone(),
                        accepted: Ok(()),
                    });
                    // The turn that really carried the text decides, not the
                    // one that was running when it was sent.
                    let res = result.await.unwrap_or_else(|_| {
                        Err(TurnFailure {
                            code: None,
                            message: "the harness dropped the turn carrying the interrupt".into(),
                        })
                    });
                    let _ = tx.send(SteerEvent::Carried { ids, own, res });
                });
            }
        }
    }

    async fn turn_ended(self: &Arc<Self>, res: Result<(), TurnFailure>) {
        let now = now_ms();
        let acks = {
            let mut st = self.state();
            st.busy = Busy::Idle;
            match &res {
                Ok(()) => {
                    st.failures = 0;
                    st.retry_at = None;
                    st.presence.set_status(Status::Idle, now);
                    st.inbox.finish_turn(true, now)
                }
                Err(f) => {
                    st.inbox.finish_turn(false, now);
                    self.hold_after_failure(&mut st, f, now, true);
                    Vec::new()
                }
            }
        };
        self.hint(RunHint::TurnEnded { ok: res.is_ok() });
        if res.is_ok() {
            self.auto_yield();
        }
        ack_all(acks).await;
        self.touch_presence();
    }

    /// A turn carrying a held batch failed: relay its code, back off, and
    /// after `max_failures` give the queue up un-acked. `idle`: no other turn
    /// runs, so presence shows the wait.
    fn hold_after_failure(&self, st: &mut State, f: &TurnFailure, now: u64, idle: bool) {
        if let Some(code) = &f.code {
            st.presence.condition =
                Some(Condition::from_native(code, Some(f.message.clone()), now));
        }
        st.failures += 1;
        if st.failures >= self.opts.max_failures {
            let n = st.inbox.abandon_queue();
            tracing::error!(
                failures = st.failures,
                dropped = n,
                "giving up on the held batch; it stays un-acked"
            );
            st.failures = 0;
            st.retry_at = None;
            if idle {
                st.presence.set_status(Status::Idle, now);
            }
        } else {
            let factor = 1u32 << (st.failures - 1).min(16);
            let delay = (self.opts.retry_base * factor).min(self.opts.retry_max);
            st.retry_at = Some(self.opts.clock.elapsed() + delay);
            if idle {
                st.presence.set_status(Status::Waiting, now);
            }
            tracing::warn!(error = %f.message, retry_in_ms = delay.as_millis() as u64, "turn failed; batch held un-acked");
        }
    }

    /// A soft interrupt's outcome: its messages are acked only once the turn
    /// that carried them is known to have succeeded.
    async fn interrupt_event(&self, ev: SteerEvent) {
        let now = now_ms();
        let acks = {
            let mut st = self.state();
            match ev {
                SteerEvent::Answered { ids, accepted } => {
                    st.interrupt = false;
                    match accepted {
                        // Held, outside any batch, until the carrying turn ends.
                        Ok(()) => {}
                        Err(f) => {
                            tracing::info!(reason = %f.message, "soft interrupt refused; messages wait for the next turn");
                            st.interrupt_failed = true;
                            st.inbox.return_to_queue(&ids);
                        }
                    }
                    Vec::new()
                }
                SteerEvent::Carried { ids, own, res } => {
                    let acks = st.inbox.settle_steered(&ids, res.is_ok(), now);
                    // A joined turn's failure is that turn's own (its batch or
                    // the TUI's); only an interrupt's own turn backs off here.
                    if own && let Err(f) = &res {
                        let idle = st.busy == Busy::Idle;
                        self.hold_after_failure(&mut st, f, now, idle);
                    }
                    acks
                }
            }
        };
        ack_all(acks).await;
        self.touch_presence();
    }

    async fn on_signal(&self, sig: HarnessSignal) {
        let now = now_ms();
        let mut hint = None;
        let acks = {
            let mut st = self.state();
            let mut acks = Vec::new();
            match sig {
                HarnessSignal::Activity => st.presence.active_at = Some(now),
                HarnessSignal::TurnStarted => {
                    st.presence.condition = None;
                    st.presence.active_at = Some(now);
                    if st.busy == Busy::Idle {
                        st.busy = Busy::Foreign;
                        st.interrupt_failed = false;
                        hint = Some(RunHint::TurnStarted);
                    }
                }
                HarnessSignal::TurnEnded { ok } => {
                    if st.busy == Busy::Foreign {
                        st.busy = Busy::Idle;
                        acks = st.inbox.finish_turn(ok, now);
                        hint = Some(RunHint::TurnEnded { ok });
                    }
                }
                HarnessSignal::Condition { code, message } => {
                    st.presence.condition = Some(Condition::from_native(&code, message, now));
                }
                HarnessSignal::Reconnecting => st.reconnecting = true,
                HarnessSignal::Reconnected => st.reconnecting = false,
            }
            acks
        };
        if let Some(h) = hint {
            self.hint(h);
        }
        ack_all(acks).await;
        self.touch_presence();
        self.kick();
    }

    fn hint(&self, h: RunHint) {
        if let Some(tx) = self.hints.get() {
            let _ = tx.send(h);
        }
    }
}
