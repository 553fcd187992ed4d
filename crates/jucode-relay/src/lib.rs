//! `jucode-relay`: how phones reach the daemon from anywhere through a JuCode relay that sees
//! only ciphertext (relay-protocol.md).
//!
//! Start at [`start`]: the daemon's one outbound WebSocket to the relay ([`host`]), which
//! authenticates with the Ed25519 key in `relay-identity.json` ([`identity`]), multiplexes client
//! streams with the binary framing of [`frame`], and runs each stream as a
//! `Noise_IK_25519_ChaChaPoly_SHA256` responder ([`noise`]) that then behaves like a device's
//! local WebSocket, driven through the hub's transport-free API. [`client`] is the other end (a
//! phone, in tests and benchmarks); [`push`] sends notifications through the relay; [`mod@bench`]
//! measures stream throughput and latency through a relay next to raw ChaCha20-Poly1305.
//!
//! The relay server itself is `jucode-relay-server`; this crate holds what both sides share
//! (framing, Noise, keys).

pub mod bench;
pub mod client;
pub mod frame;
pub mod host;
pub mod identity;
pub mod noise;
pub mod push;

pub use host::start;

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
