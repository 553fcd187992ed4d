//! jucode-sandbox: where an agent's shell commands and file tools may reach.
//!
//! Two halves share one set of rules ([`Policy`]):
//! - [`Sandbox`] wraps a command in bubblewrap (`bwrap`) so the kernel enforces the policy:
//!   start at [`Sandbox::detect`] and [`Sandbox::command`] (in `bwrap.rs`).
//! - [`check_read`] and [`check_write`] apply the same rules to paths the file tools touch,
//!   after resolving symlinks (in `rules.rs`; the resolver is in `resolve.rs`).
//!
//! Beside them, [`commands::decide`] applies an agent's command rules (`allow`, `ask`,
//! `forbid` by word prefix) to a shell command, so the engine knows whether an escalation may
//! run, must ask a person, or never runs.
//!
//! Everything fails closed: a policy that cannot be expressed is an error, never a looser run.

mod bwrap;
pub mod commands;
mod error;
mod resolve;
mod rules;

use std::path::PathBuf;

pub use bwrap::Sandbox;
pub use commands::{CommandRule, RuleAction, Verdict};
pub use error::SandboxError;
pub use resolve::resolve_path;
pub use rules::{check_read, check_write, checked_read_path, checked_write_path};

/// How far a session's commands may reach (the agent's `sandbox` setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Nothing is writable but a private /tmp.
    ReadOnly,
    /// cwd, the rw directories, temp and package caches are writable.
    WorkspaceWrite,
    /// No sandbox at all.
    FullAccess,
}

impl Mode {
    /// Parses the wire names (`read-only`, `workspace-write`, `full-access`).
    pub fn parse(name: &str) -> Option<Mode> {
        match name {
            "read-only" => Some(Mode::ReadOnly),
            "workspace-write" => Some(Mode::WorkspaceWrite),
            "full-access" => Some(Mode::FullAccess),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::FullAccess => "full-access",
        }
    }
}

/// What one session may touch. All paths must be absolute.
#[derive(Debug, Clone)]
pub struct Policy {
    pub mode: Mode,
    /// The working directory: a writable root under workspace-write.
    pub cwd: PathBuf,
    /// Extra writable roots (the agent's `rw` directories, a project's dirs).
    pub writable: Vec<PathBuf>,
    /// Directories that stay read-only even inside a writable root (the agent's `ro` ones).
    pub readable: Vec<PathBuf>,
    /// Whether sandboxed commands may connect out.
    pub network: bool,
    /// The user's home: credentials under it are hidden.
    pub user_home: PathBuf,
    /// `~/.jucode`: its `auth.json` and `daemon` are hidden.
    pub jucode_home: PathBuf,
}

/// Directory names that stay read-only inside every writable root.
pub const PROTECTED_NAMES: [&str; 3] = [".git", ".jucode", ".agents"];

/// Credential paths under the user's home, hidden in every sandboxed mode. The spec names
/// .ssh, .gnupg and .aws; the others hold tokens just as well.
pub const HIDDEN_IN_HOME: [&str; 8] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".netrc",
    ".git-credentials",
    ".docker/config.json",
    ".kube",
    ".config/gcloud",
];

/// Files under `jucode_home` that are hidden in every sandboxed mode (the sign-in and the
/// daemon's state with its token).
pub const HIDDEN_IN_JUCODE_HOME: [&str; 2] = ["auth.json", "daemon"];

impl Policy {
    /// Credential paths as configured (not yet resolved).
    pub fn hidden_paths(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = HIDDEN_IN_HOME
            .iter()
            .map(|p| self.user_home.join(p))
            .collect();
        out.extend(
            HIDDEN_IN_JUCODE_HOME
                .iter()
                .map(|p| self.jucode_home.join(p)),
        );
        out
    }

    /// Roots the file tools may write under (cwd first), as configured.
    pub fn write_roots(&self) -> Vec<PathBuf> {
        let mut out = vec![self.cwd.clone()];
        out.extend(self.writable.iter().cloned());
        out
    }

    fn validate(&self) -> Result<(), SandboxError> {
        let named = [
            ("cwd", &self.cwd),
            ("user_home", &self.user_home),
            ("jucode_home", &self.jucode_home),
        ];
        let lists = self
            .writable
            .iter()
            .map(|p| ("writable", p))
            .chain(self.readable.iter().map(|p| ("readable", p)));
        for (what, path) in named.into_iter().chain(lists) {
            if !path.is_absolute() {
                return Err(SandboxError::BadPolicy(format!(
                    "{what} must be an absolute path: {}",
                    path.display()
                )));
            }
        }
        Ok(())
    }
}
