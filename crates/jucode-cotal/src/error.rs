//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong in the connector's mesh side.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The launch contract (environment, launch material, control socket) is not usable.
    #[error("launch: {0}")]
    Launch(String),
    /// A file the launch contract names could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The broker refused us, is too old, or a JetStream call failed.
    #[error("mesh: {0}")]
    Mesh(String),
    /// A message or frame does not follow the wire contract.
    #[error("wire: {0}")]
    Wire(String),
    /// The event write-ahead log is inconsistent; never repaired silently.
    #[error("event WAL: {0}")]
    Wal(String),
    /// The AG-UI emitter cannot go on (bracket violation, CAS loss, unreadable journal).
    #[error("events: {0}")]
    Events(String),
    /// The harness (the agent the seat drives) failed in a way the seat cannot recover from.
    #[error("harness: {0}")]
    Harness(String),
    /// The tool relay socket or the MCP bridge failed.
    #[error("relay: {0}")]
    Relay(String),
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
    pub(crate) fn mesh(e: impl std::fmt::Display) -> Self {
        Error::Mesh(e.to_string())
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
