//! The relay's limits (relay-protocol §7) and the sliding-window rates behind them.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

use jucode_clock::{Clock as _, SystemClock};
use jucode_relay_proto::limits as proto;

/// Every limit and timer of the relay; [`Limits::default`] is the protocol's (the shared
/// numbers come from `jucode_relay_proto::limits`).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest WebSocket message, either side.
    pub max_message: usize,
    /// Streams one host may have open; the next client gets 4429.
    pub streams_per_host: usize,
    /// New client connections per IP per minute.
    pub connects_per_ip: usize,
    /// Host connection attempts per IP per minute.
    pub host_auth_per_ip: usize,
    /// Time a host has to answer the challenge.
    pub handshake: Duration,
    /// A client stream silent this long is closed.
    pub idle: Duration,
    /// The relay pings each host this often.
    pub ping: Duration,
    /// A host silent this long is dropped.
    pub host_dead: Duration,
    /// Push requests per host per minute.
    pub pushes_per_host: usize,
    /// Largest push payload (serialized JSON).
    pub push_payload: usize,
    /// How far a push request's `ts` may be from now.
    pub push_skew: Duration,
    /// How long one write to a client may stall before its connection is closed.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_message: proto::MAX_MESSAGE,
            streams_per_host: proto::STREAMS_PER_HOST,
            connects_per_ip: 20,
            host_auth_per_ip: 10,
            handshake: proto::HANDSHAKE,
            idle: Duration::from_secs(600),
            ping: proto::PING_EVERY,
            host_dead: proto::HOST_DEAD,
            pushes_per_host: 60,
            push_payload: proto::PUSH_PAYLOAD,
            push_skew: Duration::from_secs(300),
            write_timeout: Duration::from_secs(30),
        }
    }
}

const WINDOW: Duration = Duration::from_secs(60);

/// Events in the last minute, per key.
struct Window<K> {
    /// The relay server has no hub to give it a clock: the system's.
    clock: SystemClock,
    /// Event times per key, on `clock`'s monotonic time.
    seen: HashMap<K, VecDeque<Duration>>,
}

impl<K> Default for Window<K> {
    fn default() -> Self {
        Window {
            clock: SystemClock::new(),
            seen: HashMap::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone> Window<K> {
    /// Records an event for `key` if fewer than `max` happened in the last minute.
    fn admit(&mut self, key: &K, max: usize) -> bool {
        let now = self.clock.elapsed();
        // Forget keys whose events are all old, so the map does not grow without bound.
        self.seen.retain(|_, q| {
            while q.front().is_some_and(|t| now.saturating_sub(*t) > WINDOW) {
                q.pop_front();
            }
            !q.is_empty()
        });
        let q = self.seen.entry(key.clone()).or_default();
        if q.len() >= max {
            return false;
        }
        q.push_back(now);
        true
    }
}

/// The relay's rate limits.
#[derive(Default)]
pub struct Rates {
    connects: Window<IpAddr>,
    host_auth: Window<IpAddr>,
    pushes: Window<String>,
}

impl Rates {
    pub fn client_connect(&mut self, ip: IpAddr, limits: &Limits) -> bool {
        self.connects.admit(&ip, limits.connects_per_ip)
    }

    pub fn host_auth(&mut self, ip: IpAddr, limits: &Limits) -> bool {
        self.host_auth.admit(&ip, limits.host_auth_per_ip)
    }

    pub fn push(&mut self, host: &str, limits: &Limits) -> bool {
        self.pushes.admit(&host.to_string(), limits.pushes_per_host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn windows_admit_up_to_the_limit_then_recover() {
        let limits = Limits::default();
        let mut rates = Rates::default();
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..20 {
            assert!(rates.client_connect(ip, &limits));
        }
        assert!(!rates.client_connect(ip, &limits));
        assert!(rates.client_connect(other, &limits));
        tokio::time::advance(Duration::from_secs(61)).await;
        assert!(rates.client_connect(ip, &limits));
    }
}
