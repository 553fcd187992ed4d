//! Wire types of the jucode daemon protocol (`spec/daemon-protocol.md`) and of the serve
//! protocol v2 that hosted engines speak.
//!
//! Pure data: serde types and parsing rules, no async runtime and no IO. Start with
//! [`ClientFrame::parse`], which splits a client's JSON frame into its envelope (`op`, `id`,
//! `session`) and fields, then [`daemon::ops::OPS`], the op table (area, gate, session use),
//! and [`DaemonOp`], the typed ops the daemon answers itself, one enum per area. Everything
//! an engine emits is a [`serve::Event`]: a JSON object the daemon forwards unchanged with
//! `session` added, and reads through the typed views in [`serve`] where it has to interpret it.
//! With the `schema` feature, `schema` builds the JSON Schemas of every frame from these types.

// The op table test writes one sample of every op in a single `json!`.
#![cfg_attr(test, recursion_limit = "256")]

pub mod daemon;
pub mod mode;
#[cfg(feature = "schema")]
pub mod schema;
pub mod serve;

pub use daemon::{ClientFrame, DaemonOp, FrameError, InvalidFrame};
pub use mode::ApprovalMode;

/// The protocol version the daemon speaks; a client that does not speak it must disconnect.
pub const PROTOCOL_VERSION: u64 = 2;

/// JSON object type used for pass-through frames.
pub type Object = serde_json::Map<String, serde_json::Value>;
