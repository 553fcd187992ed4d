//! Files a client reads through the daemon: directory listings, the start of a file and
//! images, inside the known directories only (the hub's `files` module holds the rule).

use serde::{Deserialize, Serialize};

use crate::daemon::limits::{PATH_BYTES, TooLong, bytes};

/// Ops of [`crate::daemon::ops::Area::Files`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FilesOp {
    /// The entries of a directory (`~` is the home directory). With `dirs_only` only folders
    /// are listed, and any folder under the home directory may be browsed.
    FsList {
        path: String,
        #[serde(default)]
        dirs_only: bool,
    },
    /// The first [`FS_READ_MAX_BYTES`] of a file as text.
    FsRead { path: String },
    /// A png, jpeg, gif or webp image inside a known directory, as a data URL.
    FsImage { path: String },
}

/// One entry of an `fs_list` reply. `size` is the file's length in bytes (0 for a folder);
/// a symbolic link is described by what it points at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FsEntry {
    pub name: String,
    pub dir: bool,
    pub size: u64,
}

/// The largest image `fs_image` returns.
pub const FS_IMAGE_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// How much of a file `fs_read` returns.
pub const FS_READ_MAX_BYTES: u64 = 1024 * 1024;
/// The most entries one `fs_list` reply holds; more set `truncated`.
pub const FS_LIST_MAX_ENTRIES: usize = 5000;

impl FilesOp {
    pub(crate) fn check_limits(&self) -> Result<(), TooLong> {
        match self {
            FilesOp::FsList { path, .. } | FilesOp::FsRead { path } | FilesOp::FsImage { path } => {
                bytes("path", Some(path), PATH_BYTES)
            }
        }
    }
}
