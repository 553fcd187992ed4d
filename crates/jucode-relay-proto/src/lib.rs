//! `jucode-relay-proto`: the relay protocol v1 as both sides speak it (relay-protocol.md), with
//! no hub and no daemon logic in it. The daemon's side is `jucode-relay-host`; the relay server
//! is `jucode-relay-server`; both build on this crate and only this crate links them.
//!
//! Start at [`frame`] (the binary open/data/close framing on the host link), [`noise`] (the
//! `Noise_IK_25519_ChaChaPoly_SHA256` layer of each client stream and its chunking) and
//! [`identity`] (host keys, host id, the protocol's base64). [`close`] and [`limits`] are the
//! numbers both sides must agree on; [`push`] is the signed push request. [`connect`] opens a
//! socket to a relay and answers the host challenge; [`batch`] is how every writer on the relay
//! path flushes once per burst; [`client`] is the phone's end of a stream (tests and
//! benchmarks); [`bench`](mod@bench) measures stream throughput through a relay.

pub mod batch;
pub mod bench;
pub mod client;
pub mod connect;
pub mod frame;
pub mod identity;
pub mod noise;
pub mod push;

/// The signature prefix of host authentication: `jucode-relay-v1:` then the raw nonce.
pub const AUTH_CONTEXT: &[u8] = b"jucode-relay-v1:";
/// The signature prefix of a push request: `jucode-relay-push-v1:` then the body bytes.
pub const PUSH_CONTEXT: &[u8] = b"jucode-relay-push-v1:";

/// Relay close codes (relay-protocol §6).
pub mod close {
    /// Protocol error (a text frame from a client).
    pub const PROTOCOL: u16 = 4400;
    /// Host authentication failed.
    pub const AUTH: u16 = 4401;
    /// Host offline (also every stream when the host goes).
    pub const OFFLINE: u16 = 4404;
    /// Replaced by a newer host connection with the same host id.
    pub const REPLACED: u16 = 4409;
    /// The host closed the stream.
    pub const HOST_CLOSED: u16 = 4410;
    /// Too many connections.
    pub const BUSY: u16 = 4429;
}

/// Limits and timers both sides rely on (relay-protocol §7). The server's configurable
/// `Limits` default to these; the host sizes its link and keepalive by them.
pub mod limits {
    use std::time::Duration;

    /// The largest WebSocket message on either side of the relay.
    pub const MAX_MESSAGE: usize = 1024 * 1024;
    /// Streams one host may have open at the relay; the next client gets 4429.
    pub const STREAMS_PER_HOST: usize = 32;
    /// The relay pings each host this often (and the host pings as often).
    pub const PING_EVERY: Duration = Duration::from_secs(30);
    /// A host link silent this long is dead, seen from either end.
    pub const HOST_DEAD: Duration = Duration::from_secs(75);
    /// The time a host has to answer the relay's challenge.
    pub const HANDSHAKE: Duration = Duration::from_secs(10);
    /// The largest push payload (serialized JSON) the relay forwards.
    pub const PUSH_PAYLOAD: usize = 3 * 1024;
}
