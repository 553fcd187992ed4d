use std::path::{Path, PathBuf};

/// Everything that can go wrong in the state directory. Each variant names
/// the file involved so the daemon can print it as is.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("another jucode daemon is using {}", .path.display())]
    Locked { path: PathBuf },

    #[error(
        "{} is readable by others (mode {mode:04o}); run chmod 600 {}",
        .path.display(),
        .path.display()
    )]
    InsecurePermissions { path: PathBuf, mode: u32 },

    #[error("{} line {line} is damaged: {reason}", .path.display())]
    Corrupt {
        path: PathBuf,
        line: usize,
        reason: String,
    },

    #[error("{}: {source}", .path.display())]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },

    /// The token file exists but does not hold a token. The reason never
    /// quotes the file's contents.
    #[error(
        "{} does not hold a valid token ({reason}); delete it to make a new one",
        .path.display()
    )]
    InvalidToken { path: PathBuf, reason: &'static str },

    /// A write or fsync on this log failed earlier; what reached the disk is
    /// unknown, so the log refuses further appends until reopened.
    #[error(
        "{} is unusable after an earlier failed write or fsync; restart the daemon",
        .path.display()
    )]
    Poisoned { path: PathBuf },

    #[error("the operating system's random number generator failed")]
    Random,
}

/// Result with [`StoreError`] as the default error.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Builds a `map_err` closure that tags an IO error with its path.
pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}
