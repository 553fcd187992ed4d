//! Files a client sends to this computer in base64 chunks (`upload`), so that an engine can
//! read them: images go to a message's `images`, other files are named by path.

use serde::Deserialize;

use crate::daemon::limits::{self, ID_CHARS, TooLong, UPLOAD_NAME_BYTES};

/// Ops of [`crate::daemon::ops::Area::Uploads`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum UploadsOp {
    /// One chunk. The first names the file (`name`) and has no `upload`; every later one
    /// names the upload and the `offset` it continues at (the bytes received so far). `last`
    /// ends the file: it is renamed from its `.part` and fsynced before the reply.
    Upload {
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        upload: Option<String>,
        #[serde(default)]
        offset: Option<u64>,
        /// The chunk's bytes, base64 (standard alphabet, padded).
        data: String,
        #[serde(default)]
        last: bool,
    },
}

impl UploadsOp {
    pub(crate) fn check_limits(&self) -> Result<(), TooLong> {
        let UploadsOp::Upload { name, upload, .. } = self;
        limits::bytes("name", name.as_deref(), UPLOAD_NAME_BYTES)?;
        limits::chars("upload", upload.as_deref(), ID_CHARS)
    }
}
