//! Example programs for Rust tools that embed the jucode crates. This library is empty: the
//! programs are in `examples/`, built by `cargo build -p jucode-examples --examples` (and by
//! `cargo test`, which builds every example), run by `scripts/run-examples.sh`.
//!
//! - `client`: a daemon client on `jucode-protocol` over a WebSocket. It connects with the
//!   daemon token, lists the sessions, watches one and prints its events (docs/PROTOCOL.md
//!   describes every frame it meets).
//! - `embed`: the hub in-process with an engine of its own (it answers every message with the
//!   message reversed), driven through `Hub::connect` and `Hub::handle` with JSON frames.
//!
//! They live in a crate of their own so that the runtime and WebSocket crates they need stay
//! out of `jucode-protocol` (runtime-free) and the hub's manifests, and so that one command
//! builds both.
