//! Files a client reads through the daemon. This build answers `fs_image` (how the remote page
//! shows a message's images); `fs_list` and `fs_read` share its rule of known directories.

use serde::Deserialize;

/// Ops of [`crate::daemon::ops::Area::Files`] this build answers.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FilesOp {
    /// A png, jpeg, gif or webp image inside a known directory, as a data URL.
    FsImage { path: String },
}

/// The largest image `fs_image` returns.
pub const FS_IMAGE_MAX_BYTES: u64 = 16 * 1024 * 1024;

impl FilesOp {
    pub(crate) fn check_limits(&self) -> Result<(), crate::daemon::limits::TooLong> {
        match self {
            FilesOp::FsImage { path } => {
                crate::daemon::limits::bytes("path", Some(path), crate::daemon::limits::PATH_BYTES)
            }
        }
    }
}
