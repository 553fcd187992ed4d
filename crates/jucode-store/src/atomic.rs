//! Whole-file state: read, and replace atomically.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tempfile::NamedTempFile;

use crate::error::{Result, StoreError, io_err};
use crate::fsutil::{parent_dir, set_mode, sync_dir};

/// Reads a whole JSON file; `Ok(None)` when it does not exist.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(path)(e)),
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io_err(path))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|source| StoreError::Json {
            path: path.to_path_buf(),
            source,
        })
}

/// Atomically replaces `path` with `value` as pretty JSON; the file ends up
/// mode 0600. Readers see the old file or the new one, never a mix.
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| StoreError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    bytes.push(b'\n');
    write_atomic(path, &bytes, 0o600)
}

/// Atomically replaces `path` with `bytes`, leaving it with permission bits
/// `mode` (not filtered by the umask).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let dir = parent_dir(path);
    // Same directory, so the rename cannot cross filesystems.
    let mut tmp = NamedTempFile::new_in(dir).map_err(io_err(dir))?;
    set_mode(tmp.as_file(), mode, tmp.path())?;
    tmp.write_all(bytes).map_err(io_err(path))?;
    tmp.as_file().sync_all().map_err(io_err(path))?;
    tmp.persist(path).map_err(|e| io_err(path)(e.error))?;
    sync_dir(dir)
}
