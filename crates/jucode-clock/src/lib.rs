//! The one place jucode reads time.
//!
//! Everything time-driven in the daemon (pairing codes, deadlines, timers, schedules, purges)
//! asks a [`Clock`] instead of the operating system, so tests can run it on a [`ManualClock`]
//! and move time forward by hand instead of sleeping. Production code uses [`SystemClock`].
//! `clippy.toml` bans the operating system's clocks everywhere else.
//!
//! A clock has three faces, kept apart on purpose:
//! - wall time ([`Clock::now`], a `jiff::Timestamp`): what records store and users see; it can
//!   jump (NTP, a user changing the clock, a suspended laptop);
//! - the local time zone ([`Clock::time_zone`]), for local-time rules such as schedules;
//! - monotonic time ([`Clock::elapsed`], [`Clock::sleep`]): for timeouts, never goes back.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use tokio::sync::watch;

/// A sleep returned by [`Clock::sleep`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A source of time. Cheap to call; shared as `Arc<dyn Clock>`.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current wall time.
    fn now(&self) -> Timestamp;

    /// The local time zone.
    fn time_zone(&self) -> TimeZone;

    /// Monotonic time since this clock was made. Never goes back, whatever wall time does.
    fn elapsed(&self) -> Duration;

    /// Completes once `duration` of monotonic time has passed on this clock.
    fn sleep(&self, duration: Duration) -> Sleep;

    /// The current wall time in milliseconds since the Unix epoch (the protocol's unit), with
    /// times before the epoch read as 0.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.now().as_millisecond()).unwrap_or(0)
    }
}

/// The shared handle the hub and everything under it hold.
pub type SharedClock = Arc<dyn Clock>;

/// The operating system's clocks.
#[derive(Debug, Clone)]
pub struct SystemClock {
    zone: Option<TimeZone>,
    origin: tokio::time::Instant,
}

impl SystemClock {
    /// The system's clocks, with the system's time zone (which honours `TZ`).
    pub fn new() -> SystemClock {
        SystemClock {
            zone: None,
            origin: os_instant(),
        }
    }

    /// The system's clocks with `zone` as the local time zone.
    pub fn with_time_zone(zone: TimeZone) -> SystemClock {
        SystemClock {
            zone: Some(zone),
            origin: os_instant(),
        }
    }

    /// A shared system clock.
    pub fn shared() -> SharedClock {
        Arc::new(SystemClock::new())
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

// The only reads of the operating system's clocks in the workspace.
#[allow(clippy::disallowed_methods)]
fn os_now() -> Timestamp {
    Timestamp::now()
}

#[allow(clippy::disallowed_methods)]
fn os_instant() -> tokio::time::Instant {
    tokio::time::Instant::now()
}

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        os_now()
    }

    fn time_zone(&self) -> TimeZone {
        match &self.zone {
            Some(zone) => zone.clone(),
            // jiff reads `TZ` first, then the system's zone, and caches the result.
            None => TimeZone::system(),
        }
    }

    fn elapsed(&self) -> Duration {
        os_instant().saturating_duration_since(self.origin)
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// For tests of the real daemon binary only, and absent from release builds: the system's
/// clocks, except that wall time starts at `start` and runs `speed` times as fast as real
/// time. Monotonic time and sleeps stay real, so the daemon's loops keep their pace while
/// local times come due quickly.
#[cfg(debug_assertions)]
#[derive(Debug, Clone)]
pub struct DebugClock {
    system: SystemClock,
    start: Timestamp,
    speed: u32,
}

#[cfg(debug_assertions)]
impl DebugClock {
    pub fn new(start: Timestamp, speed: u32) -> DebugClock {
        DebugClock {
            system: SystemClock::new(),
            start,
            speed: speed.max(1),
        }
    }
}

#[cfg(debug_assertions)]
impl Clock for DebugClock {
    fn now(&self) -> Timestamp {
        let run = self.system.elapsed().saturating_mul(self.speed);
        let step = jiff::SignedDuration::try_from(run).unwrap_or(jiff::SignedDuration::MAX);
        self.start.saturating_add(step).unwrap_or(Timestamp::MAX)
    }

    fn time_zone(&self) -> TimeZone {
        self.system.time_zone()
    }

    fn elapsed(&self) -> Duration {
        self.system.elapsed()
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        self.system.sleep(duration)
    }
}

/// A clock that moves only when a test moves it.
///
/// [`ManualClock::advance`] moves wall and monotonic time together and wakes every sleep that is
/// due; [`ManualClock::set_wall`] changes wall time alone, as a user changing the system clock
/// would, and leaves monotonic time (and so sleeps) where they are.
#[derive(Debug, Clone)]
pub struct ManualClock {
    inner: Arc<Mutex<ManualState>>,
    elapsed: watch::Sender<Duration>,
}

#[derive(Debug)]
struct ManualState {
    wall: Timestamp,
    zone: TimeZone,
}

impl ManualClock {
    /// A clock standing at `start` in UTC.
    pub fn new(start: Timestamp) -> ManualClock {
        ManualClock::with_time_zone(start, TimeZone::UTC)
    }

    /// A clock standing at `start` in `zone`.
    pub fn with_time_zone(start: Timestamp, zone: TimeZone) -> ManualClock {
        ManualClock {
            inner: Arc::new(Mutex::new(ManualState { wall: start, zone })),
            elapsed: watch::Sender::new(Duration::ZERO),
        }
    }

    /// Moves wall and monotonic time forward by `by`, waking every sleep now due.
    pub fn advance(&self, by: Duration) {
        {
            let mut state = self.state();
            let step = jiff::SignedDuration::try_from(by).unwrap_or(jiff::SignedDuration::MAX);
            state.wall = state.wall.saturating_add(step).unwrap_or(Timestamp::MAX);
        }
        self.elapsed.send_modify(|e| *e = e.saturating_add(by));
    }

    /// Sets wall time alone (a clock change); monotonic time does not move.
    pub fn set_wall(&self, to: Timestamp) {
        self.state().wall = to;
    }

    /// Changes the local time zone.
    pub fn set_time_zone(&self, zone: TimeZone) {
        self.state().zone = zone;
    }

    /// This clock as the shared handle.
    pub fn shared(&self) -> SharedClock {
        Arc::new(self.clone())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ManualState> {
        // The state is two plain values: a panic elsewhere cannot leave it half-written.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        self.state().wall
    }

    fn time_zone(&self) -> TimeZone {
        self.state().zone.clone()
    }

    fn elapsed(&self) -> Duration {
        *self.elapsed.borrow()
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        let mut rx = self.elapsed.subscribe();
        let due = rx.borrow().saturating_add(duration);
        Box::pin(async move {
            // `wait_for` checks the current value first, so a zero sleep completes at once.
            // An error means the clock is gone: nothing will ever wake this sleep, so it pends.
            if rx.wait_for(|now| *now >= due).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn manual_time_moves_only_when_told() {
        let clock = ManualClock::new(at("2026-03-29T00:30:00Z"));
        assert_eq!(clock.now(), at("2026-03-29T00:30:00Z"));
        assert_eq!(clock.elapsed(), Duration::ZERO);
        clock.advance(Duration::from_secs(90));
        assert_eq!(clock.now(), at("2026-03-29T00:31:30Z"));
        assert_eq!(clock.elapsed(), Duration::from_secs(90));
        assert_eq!(clock.now_ms(), 1_774_744_290_000);
    }

    #[test]
    fn a_wall_change_leaves_monotonic_time_alone() {
        let clock = ManualClock::new(at("2026-01-01T00:00:00Z"));
        clock.advance(Duration::from_secs(5));
        clock.set_wall(at("2025-12-31T23:00:00Z"));
        assert_eq!(clock.now(), at("2025-12-31T23:00:00Z"));
        assert_eq!(clock.elapsed(), Duration::from_secs(5));
    }

    #[test]
    fn the_zone_is_the_one_given() {
        let zone = TimeZone::get("Europe/Berlin").unwrap();
        let clock = ManualClock::with_time_zone(at("2026-07-01T10:00:00Z"), zone);
        let local = clock.now().to_zoned(clock.time_zone());
        assert_eq!(local.hour(), 12);
    }

    #[tokio::test]
    async fn a_sleep_wakes_when_the_clock_passes_its_deadline() {
        let clock = ManualClock::new(at("2026-01-01T00:00:00Z"));
        let mut sleep = clock.sleep(Duration::from_secs(10));
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_secs(9));
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_secs(1));
        assert!(sleep.as_mut().poll(&mut cx).is_ready());
        // A wall change does not wake sleeps.
        let mut later = clock.sleep(Duration::from_secs(1));
        clock.set_wall(at("2030-01-01T00:00:00Z"));
        assert!(later.as_mut().poll(&mut cx).is_pending());
        // A zero sleep is due at once.
        clock.sleep(Duration::ZERO).await;
    }

    #[test]
    fn a_debug_clock_starts_where_told_and_runs_faster() {
        let clock = DebugClock::new(at("2040-01-01T00:00:00Z"), 3600);
        let now = clock.now();
        assert!(now >= at("2040-01-01T00:00:00Z"));
        // An hour of wall time per real second: a test takes far less than a day.
        assert!(now < at("2040-01-02T00:00:00Z"));
    }

    #[test]
    fn the_system_clock_reads_the_system() {
        let clock = SystemClock::new();
        assert!(clock.now() > at("2024-01-01T00:00:00Z"));
        let a = clock.elapsed();
        assert!(clock.elapsed() >= a);
    }
}
