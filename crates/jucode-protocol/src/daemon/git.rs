//! A repository's state as `git status` and `git diff` see it, inside the known directories.

use serde::{Deserialize, Serialize};

use crate::daemon::limits::{PATH_BYTES, TooLong, bytes};

/// Ops of [`crate::daemon::ops::Area::Git`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum GitOp {
    /// The changed files under `path` (a directory in a repository).
    GitStatus { path: String },
    /// The unified diff of the changes under `path` against `HEAD`, untracked files included;
    /// with `file` (a path as `git_status` names it, relative to the repository's top) only
    /// that file's.
    GitDiff {
        path: String,
        #[serde(default)]
        file: Option<String>,
    },
}

/// One changed file of a `git_status` reply: `path` relative to the repository's top,
/// `status` the two porcelain letters (`" M"`, `"A "`, `"??"`, `"R "`…), `from` the old path
/// of a rename or copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GitFile {
    pub path: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// How much of a diff `git_diff` returns.
pub const GIT_DIFF_MAX_BYTES: usize = 1024 * 1024;
/// The most files one `git_status` reply holds; more set `truncated`.
pub const GIT_STATUS_MAX_FILES: usize = 5000;

impl GitOp {
    pub(crate) fn check_limits(&self) -> Result<(), TooLong> {
        match self {
            GitOp::GitStatus { path } => bytes("path", Some(path), PATH_BYTES),
            GitOp::GitDiff { path, file } => {
                bytes("path", Some(path), PATH_BYTES)?;
                bytes("file", file.as_deref(), PATH_BYTES)
            }
        }
    }
}
