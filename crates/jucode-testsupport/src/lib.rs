//! Test support for jucode, in one place: every test that runs a daemon, a fake model or a
//! built binary goes through here.
//!
//! Where to start:
//! - [`Daemon::builder`] runs the real `jucode-daemon` binary on `127.0.0.1:0` with a temporary
//!   home, by default with the scripted engine `jucode-fake-serve` (`src/bin/fake_serve.rs`,
//!   whose scripts are described at its top); [`Daemon::client`] opens a WebSocket [`Client`]
//!   that has already read the connect batch ([`CONNECT_BATCH`]).
//! - [`fake_model::FakeModel`] is the one scripted model server: OpenAI chat completions,
//!   Anthropic Messages and OpenAI Responses on loopback; [`fake_model::FakeModel::gateway`]
//!   puts it behind the JuCode gateway's paths and key.
//! - [`fake_push::FakePush`] is a browser's push service: it checks VAPID, decrypts each
//!   message (RFC 8291) and answers the status a test sets.
//! - [`RelayServer`] runs the real `jucode-relay` binary on loopback, for a daemon started
//!   with [`DaemonBuilder::relay`].
//! - [`find_bin`] / [`build_bin`] find a built binary of the workspace wherever the target
//!   directory is.
//! - [`agent_endpoint::AgentEndpoint`] stands in for the daemon's agent tools endpoint, for
//!   the real `agent-mcp` server under a real Claude Code or Codex.
//! - [`real_cli`] finds the real Claude Code and Codex CLIs and writes what they need to run
//!   against the fake model server.
//! - [`harness`] runs a hub in-process on a manual clock, for time-driven tests that must not
//!   wait; wire tests stay on the real binary.
//!
//! Binaries must be built before tests that run them: `cargo build -p jucode-testsupport
//! -p jucode-daemon` (nextest and `cargo test` build a package's own binaries).

pub mod agent_endpoint;
pub mod bench_latency;
mod bins;
mod client;
mod daemon;
pub mod fake_billing;
pub mod fake_model;
pub mod fake_push;
pub mod fake_skills;
pub mod full_disk;
pub mod harness;
mod home;
mod process;
pub mod real_cli;
mod relay;

use std::time::Duration;

pub use bins::{build_bin, daemon_bin, fake_serve_bin, find_bin, fsync_fault_lib};
pub use client::{Client, HttpResponse, Ws, connect_status, http, http_with};
pub use daemon::{Daemon, DaemonBuilder, Engine};
pub use home::{TestHome, git};
pub use relay::RelayServer;

/// The frame types the daemon sends on connect, in order (`hello` first, `requirements` last).
pub const CONNECT_BATCH: &[&str] = &[
    "hello",
    "sessions",
    "workspaces",
    "agents",
    "schedules",
    "questions",
    "actions",
    "dispatches",
    "requirements",
];

/// How long a [`Client`] waits for a frame (or a connect) before failing the test.
pub const RECV_TIMEOUT: Duration = Duration::from_secs(20);
