//! The hub's background loop: once a second on the hub's clock it retries pending messages
//! and runs the items' due work (timers, question deadlines, scheduled tasks); after
//! `restart_when_idle` it only watches for the moment nothing runs.
//!
//! The loop holds the hub weakly and ends when the hub is gone. It is supervised: a tick that
//! panics is logged and the loop starts again a second later, so one bad record cannot stop
//! message delivery for good. A tick takes the lock once, never across an await, and writes
//! (and fsyncs) only when it has something to record.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jucode_clock::SharedClock;
use tokio::sync::watch;

use crate::{Hub, Inner};

/// How often the loop ticks.
pub(crate) const TICK: Duration = Duration::from_secs(1);

/// The loop's state on the hub: whether it was started, and how many ticks have run.
pub(crate) struct Background {
    started: AtomicBool,
    ticks: watch::Sender<u64>,
}

impl Default for Background {
    fn default() -> Background {
        Background {
            started: AtomicBool::new(false),
            ticks: watch::Sender::new(0),
        }
    }
}

impl Hub {
    /// Starts the background loop on the current tokio runtime; a second call does nothing.
    /// The daemon calls it once the hub is open (and test hubs that want time-driven work).
    pub fn start_background(self: &Arc<Self>) {
        if self.background.started.swap(true, Ordering::SeqCst) {
            return;
        }
        let hub = Arc::downgrade(self);
        let clock = self.config.clock.clone();
        // The first deadline is taken now, not when the task first runs: a clock moved on
        // in between still wakes it.
        let first = clock.elapsed() + TICK;
        let step: Step = Arc::new(move || match hub.upgrade() {
            Some(hub) => {
                hub.tick();
                true
            }
            None => false,
        });
        tokio::spawn(supervise(clock, first, step));
        self.start_notifications();
    }

    /// The number of background ticks completed so far; tests wait on it to know a tick has
    /// run after they moved the clock.
    pub fn ticks(&self) -> watch::Receiver<u64> {
        self.background.ticks.subscribe()
    }

    /// One tick: messages waiting for a slot or left from before a restart, then the items'
    /// due work.
    fn tick(self: &Arc<Self>) {
        let mut inner = self.lock();
        let now_ms = self.config.clock.now_ms();
        if self.restart.pending() {
            // Stepping aside: what is due waits, durably, for the next daemon.
            self.exit_if_idle(&inner);
        } else {
            self.deliver_pending(&mut inner);
            self.item_ticks(&mut inner, now_ms);
        }
        drop(inner);
        self.background.ticks.send_modify(|n| *n += 1);
    }

    /// Timers that came due and question deadlines that passed; both deliver through
    /// [`Hub::enqueue_message`] before they record themselves done.
    fn item_ticks(self: &Arc<Self>, inner: &mut Inner, now_ms: u64) {
        self.fire_due_timers(inner, now_ms);
        self.deliver_overdue_questions(inner, now_ms);
        self.run_due_schedules(inner);
    }
}

/// One tick of the loop; false once there is nothing left to tick for (the hub is gone).
type Step = Arc<dyn Fn() -> bool + Send + Sync>;

/// Runs the loop, starting it again a tick later after a panic.
async fn supervise(clock: SharedClock, first: Duration, step: Step) {
    let mut first = first;
    loop {
        let run = tokio::spawn(run(clock.clone(), first, step.clone()));
        match run.await {
            Ok(()) => return,
            Err(e) if e.is_panic() => {
                tracing::error!("the hub's background loop panicked; it starts again in a second");
                first = clock.elapsed() + TICK;
            }
            Err(_) => return,
        }
    }
}

/// Ticks every [`TICK`] of the clock's monotonic time from `first` on until `step` says
/// stop. The deadlines follow a fixed grid, so a clock moved on before the loop began to wait
/// still wakes it; after a long stall (a suspended machine) it ticks once and goes on.
async fn run(clock: SharedClock, first: Duration, step: Step) {
    let mut due = first;
    loop {
        let now = clock.elapsed();
        if due > now {
            clock.sleep(due - now).await;
        }
        if !step() {
            return;
        }
        due += TICK;
        // More than a whole tick behind (a suspended machine, a stalled runtime): one tick
        // now was enough, the grid starts again from here.
        let now = clock.elapsed();
        if due + TICK <= now {
            due = now + TICK;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use jucode_clock::ManualClock;

    use super::*;

    /// A loop whose ticks are counted (and published), the second of which panics.
    fn counted(clock: &ManualClock) -> (Arc<AtomicU64>, watch::Receiver<u64>) {
        let calls = Arc::new(AtomicU64::new(0));
        let (tx, rx) = watch::channel(0);
        let seen = calls.clone();
        let step: Step = Arc::new(move || {
            let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
            tx.send_replace(n);
            assert_ne!(n, 2, "the second tick fails");
            n < 6
        });
        let shared = clock.shared();
        let first = shared.elapsed() + TICK;
        tokio::spawn(supervise(shared, first, step));
        (calls, rx)
    }

    async fn reach(rx: &mut watch::Receiver<u64>, n: u64) {
        tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|c| *c >= n))
            .await
            .expect("the loop ticked")
            .expect("the loop is alive");
    }

    #[tokio::test]
    async fn the_loop_ticks_once_a_second_and_survives_a_panicking_tick() {
        let clock = ManualClock::new("2026-03-01T12:00:00Z".parse().unwrap());
        let (calls, mut rx) = counted(&clock);
        // Moved on before the task first ran: the first deadline was taken at the start.
        clock.advance(TICK);
        reach(&mut rx, 1).await;
        clock.advance(TICK);
        reach(&mut rx, 2).await;
        // The panic of tick 2 restarts the loop a tick later.
        for n in 3..=6 {
            clock.advance(TICK);
            reach(&mut rx, n).await;
        }
        // Tick 6 said stop: no more ticks however far the clock goes.
        clock.advance(TICK * 10);
        tokio::task::yield_now().await;
        assert_eq!(calls.load(Ordering::SeqCst), 6);
    }

    #[tokio::test]
    async fn a_long_stall_gives_one_tick_not_a_burst() {
        let clock = ManualClock::new("2026-03-01T12:00:00Z".parse().unwrap());
        let (calls, mut rx) = counted(&clock);
        clock.advance(TICK);
        reach(&mut rx, 1).await;
        calls.store(2, Ordering::SeqCst); // past the panicking tick
        clock.advance(TICK * 30);
        reach(&mut rx, 3).await;
        for _ in 0..5 {
            tokio::task::yield_now().await;
        }
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        clock.advance(TICK);
        reach(&mut rx, 4).await;
    }
}
