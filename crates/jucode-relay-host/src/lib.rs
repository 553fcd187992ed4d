//! `jucode-relay-host`: the daemon's side of the relay, the "host" in relay terms
//! (relay-protocol.md). Phones reach the daemon from anywhere through a relay that sees only
//! ciphertext.
//!
//! Start at [`start`]: the daemon's one outbound WebSocket to the relay ([`link`]), which
//! authenticates with the Ed25519 key kept in `relay-identity.json` ([`identity`]), runs each
//! client stream as a Noise responder that then behaves like a device's local WebSocket (a hub
//! client as `Auth::Device`), and answers the hub's push requests through the relay ([`push`]).
//! The wire pieces (framing, Noise, keys, close codes, limits) are `jucode-relay-proto`.

pub mod identity;
pub mod link;
pub mod push;

pub use link::start;
