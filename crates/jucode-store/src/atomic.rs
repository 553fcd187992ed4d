//! Whole-file state: read, and replace atomically.

use std::fs::{self, File};
use std::io::{ErrorKind, Read, Write};
use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tempfile::{NamedTempFile, TempPath};

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
///
/// On an error the old file is in place: a failed write or fsync of the new
/// file drops the temporary file, and a failed fsync of the directory after
/// the rename puts the old file back (best effort), so a refused change does
/// not come back after a restart.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let dir = parent_dir(path);
    // Same directory, so the rename cannot cross filesystems.
    let mut tmp = temp_file_in(dir)?;
    set_mode(tmp.as_file(), mode, tmp.path())?;
    tmp.write_all(bytes).map_err(io_err(path))?;
    tmp.as_file().sync_all().map_err(io_err(path))?;
    let old = keep_old(path, dir);
    tmp.persist(path).map_err(|e| io_err(path)(e.error))?;
    if let Err(e) = sync_dir(dir) {
        put_back(path, dir, old);
        return Err(e);
    }
    // Dropping `old` removes its second name.
    Ok(())
}

/// The file an atomic write replaces, kept until the directory is synced.
enum Old {
    /// There was none.
    Missing,
    /// A second name (hard link) for it, removed when dropped.
    Kept(TempPath),
    /// It could not be kept (a file system without hard links): no way back.
    Lost,
}

/// Gives the file at `path` a second, temporary name in `dir`.
fn keep_old(path: &Path, dir: &Path) -> Old {
    let linked = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .make_in(dir, |link| fs::hard_link(path, link));
    match linked {
        Ok(file) => Old::Kept(file.into_temp_path()),
        Err(e) if e.kind() == ErrorKind::NotFound => Old::Missing,
        Err(_) => Old::Lost,
    }
}

/// Undoes a rename whose directory sync failed: the old file back under `path`, or no file
/// when there was none. Best effort, as the failed sync is what the caller reports.
fn put_back(path: &Path, dir: &Path, old: Old) {
    let undone = match old {
        Old::Kept(link) => link.persist(path).map_err(|e| e.error),
        Old::Missing => fs::remove_file(path),
        Old::Lost => return,
    };
    if undone.is_ok() {
        let _ = sync_dir(dir);
    }
}

/// Every temporary file an atomic write makes starts with this; one left by a crash between
/// create and rename is removed by [`remove_stale_temps`] when the state directory opens.
pub(crate) const TEMP_PREFIX: &str = ".tmp";

/// A new temporary file in `dir`, named `TEMP_PREFIX` + random characters.
pub(crate) fn temp_file_in(dir: &Path) -> Result<NamedTempFile> {
    tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(dir)
        .map_err(io_err(dir))
}

/// Removes the regular files in `dir` named like an atomic write's temporary file: an
/// interrupted write (a SIGKILL between create and rename) leaves one behind, and nothing
/// else ever reads it. Only the holder of the directory's lock may call this. Returns how
/// many were removed.
pub(crate) fn remove_stale_temps(dir: &Path) -> Result<usize> {
    let mut removed = 0;
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let is_temp = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.starts_with(TEMP_PREFIX));
        if !is_temp {
            continue;
        }
        let path = entry.path();
        // symlink_metadata: a symlink or directory of that name is not ours to remove.
        let meta = fs::symlink_metadata(&path).map_err(io_err(&path))?;
        if !meta.file_type().is_file() {
            continue;
        }
        match fs::remove_file(&path) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&path)(e)),
        }
    }
    if removed > 0 {
        sync_dir(dir)?;
        tracing::warn!(
            dir = %dir.display(),
            removed,
            "removed temporary files left by interrupted writes"
        );
    }
    Ok(removed)
}
