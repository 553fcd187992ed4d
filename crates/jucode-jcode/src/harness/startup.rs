//! The post-join startup turn: once the seat's presence bind is confirmed,
//! the notice that the pre-join orientation predates the join, and the first
//! driven turn (the spawn `--prompt`, or with none the notice itself).
//!
//! Rules: nothing is sent before the bind; the startup turn stays pending
//! (not dropped, no attempt counted) while the native session is busy, its
//! bridge reconnects, or steering the seat sent is still being decided; once
//! the request was written it is consumed, and only a refusal the Harness
//! reported is tried again (on the seat's clock), never an ambiguous close;
//! mail buffered before it waits for the following turn.

use super::*;

/// How many refusals of the startup turn are tried again before it is given up.
pub const STARTUP_ATTEMPTS: u32 = 8;
/// The first pause after a refused startup turn (doubles, at most [`STARTUP_RETRY_MAX`]).
pub const STARTUP_RETRY_BASE: Duration = Duration::from_secs(1);
pub const STARTUP_RETRY_MAX: Duration = Duration::from_secs(60);
/// The connector log line while the startup turn waits for steering to be decided.
pub const WAITING_ON_STEERING: &str = "startup prompt waiting on in-flight steering";
/// The connector log line when the native state changed during that wait.
pub const DEFERRED_NATIVE_CHANGE: &str = "turn deferred because native state changed";

/// How one try of the startup turn ended.
enum Try {
    Done(std::result::Result<(), TurnFailure>),
    /// Never written to jcode: still pending.
    NotInvoked,
}

impl Shared {
    /// After the confirmed bind: the notice, then the startup turn; the gate
    /// for the seat's own turns opens once that turn is settled.
    pub(super) async fn startup_turns(self: Arc<Self>) {
        let res = match self.plan.prompt.clone() {
            Some(prompt) => {
                self.post_join_append().await;
                self.log.line("submitting the spawn --prompt");
                self.startup_turn(&prompt).await
            }
            None => self.startup_turn(JOIN_NOTICE).await,
        };
        // send_replace: `send` drops the value while no receiver exists, and a
        // turn that comes later would then wait on the gate forever.
        self.startup_gate.send_replace(true);
        match res {
            Ok(()) => self.log.line("startup turn done"),
            Err(f) => {
                self.log
                    .line("the startup turn did not succeed; the seat stays up");
                self.log.private(&format!("startup turn: {}", f.message));
            }
        }
    }

    /// With a spawn `--prompt`: the notice as a no-reply append. A refusal is
    /// logged and the joined seat carries on.
    async fn post_join_append(&self) {
        loop {
            self.until_startup_can_invoke().await;
            if self.ended() {
                return;
            }
            let Some(c) = self.client().await else {
                continue;
            };
            match c.send_no_reply(&self.plan.session_id, JOIN_NOTICE).await {
                Ok(()) => return,
                // Never reached jcode: still pending.
                Err(Error::Closed) => continue,
                Err(e) => {
                    let code = match &e {
                        Error::Api { code, .. } => code.as_str(),
                        other => other.code(),
                    };
                    self.log.line(&format!("post-join notice refused: {code}"));
                    self.log.private(&format!("post-join notice: {e}"));
                    return;
                }
            }
        }
    }

    /// The first driven turn, under the rules above.
    async fn startup_turn(self: &Arc<Self>, text: &str) -> std::result::Result<(), TurnFailure> {
        let mut refusals = 0u32;
        loop {
            self.until_startup_can_invoke().await;
            if self.ended() {
                return Err(TurnFailure {
                    code: None,
                    message: "the seat is stopping".into(),
                });
            }
            let failure = match self.try_startup(text).await {
                Try::NotInvoked => continue,
                Try::Done(Ok(())) => return Ok(()),
                Try::Done(Err(f)) => f,
            };
            // A close or transport error after the write is ambiguous: jcode may
            // have run it, so it is consumed rather than sent a second time.
            if failure.code.is_none() {
                self.log.line(
                    "the startup turn ended ambiguously (the connection closed); it is consumed, not retried",
                );
                return Err(failure);
            }
            refusals += 1;
            if refusals >= STARTUP_ATTEMPTS {
                self.log.line(&format!(
                    "the startup turn was refused {refusals} times; giving it up"
                ));
                return Err(failure);
            }
            let factor = 1u32 << (refusals - 1).min(16);
            let delay = (STARTUP_RETRY_BASE * factor).min(STARTUP_RETRY_MAX);
            self.log.line(&format!(
                "the startup turn was refused ({}); retrying in {}s",
                failure.code.as_deref().unwrap_or("?"),
                delay.as_secs()
            ));
            self.clock.sleep(delay).await;
        }
    }

    /// The seat is stopping, or the harness ended it (its signals are closed).
    fn ended(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst) || lock(&self.signals).is_none()
    }

    /// One try, seen by the seat as a turn it did not start.
    async fn try_startup(self: &Arc<Self>, text: &str) -> Try {
        let before = self.invoked.load(Ordering::SeqCst);
        self.signal(HarnessSignal::TurnStarted);
        let res = self.turn(text, |_| false).await.map(drop);
        self.signal(HarnessSignal::TurnEnded { ok: res.is_ok() });
        if res.is_err() && self.invoked.load(Ordering::SeqCst) == before {
            return Try::NotInvoked;
        }
        Try::Done(res)
    }

    /// Wait while the bridge reconnects, a turn the seat did not start runs,
    /// or steering is undecided; a wait on steering during which the native
    /// state changed (a TUI turn began) is deferred and logged as such.
    async fn until_startup_can_invoke(&self) {
        let mut steering_mark: Option<u64> = None;
        loop {
            let mut signals = lock(&self.signals).as_ref().map(|tx| tx.subscribe());
            let steer = self.steering_changed.notified();
            let pumped = self.pumped_changed.notified();
            let live = self.live_changed.notified();
            tokio::pin!(steer, pumped, live);
            steer.as_mut().enable();
            pumped.as_mut().enable();
            live.as_mut().enable();
            if self.ended() {
                return;
            }
            let reconnecting =
                self.reconnecting.load(Ordering::SeqCst) || self.client().await.is_none();
            let native_busy = self.foreign.load(Ordering::SeqCst);
            let (undecided, starts) = {
                let g = lock(&self.steering);
                (!g.idle(), g.foreign_starts)
            };
            if undecided && steering_mark.is_none() {
                self.log.line(WAITING_ON_STEERING);
                steering_mark = Some(starts);
            }
            if !undecided && let Some(mark) = steering_mark.take() {
                if mark != starts || native_busy {
                    self.log.line(DEFERRED_NATIVE_CHANGE);
                } else if !reconnecting {
                    return;
                }
            }
            if !reconnecting && !native_busy && !undecided {
                return;
            }
            // Each wake re-reads the state; the pace only guards a missed wake.
            tokio::select! {
                _ = steer => {}
                _ = pumped => {}
                _ = live => {}
                _ = async {
                    match signals.as_mut() {
                        Some(rx) => { let _ = rx.recv().await; }
                        None => std::future::pending().await,
                    }
                } => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }
}
