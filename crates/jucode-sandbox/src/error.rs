use std::path::PathBuf;

/// Why a command cannot be sandboxed or a path is refused.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "the sandbox is missing: bubblewrap (bwrap) was not found on PATH; install it (Debian: apt-get install bubblewrap)"
    )]
    BwrapMissing,
    #[error("the sandbox does not work here: {bwrap} failed its probe: {message}")]
    ProbeFailed { bwrap: PathBuf, message: String },
    #[error("invalid sandbox policy: {0}")]
    BadPolicy(String),
    #[error("invalid path {path}: {reason}")]
    BadPath { path: PathBuf, reason: String },
    #[error("reading {path} is not allowed: it holds credentials")]
    ReadDenied { path: PathBuf },
    #[error("writing {path} is not allowed: {reason}")]
    WriteDenied { path: PathBuf, reason: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
