//! The locked `<home>/daemon/` directory and the daemon token.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

use ring::rand::{SecureRandom, SystemRandom};
use serde::de::DeserializeOwned;

use crate::atomic::{remove_stale_temps, temp_file_in};
use crate::error::{Result, StoreError, io_err};
use crate::fsutil::{create_mode, mode_of, set_mode, sync_dir};
use crate::jsonl::JsonlLog;

const DAEMON_DIR: &str = "daemon";
const LOCK_FILE: &str = "lock";
const TOKEN_FILE: &str = "token";
/// 32 random bytes, hex encoded.
const TOKEN_HEX_LEN: usize = 64;
/// Anything longer than this cannot be a token; do not read it all.
const TOKEN_READ_LIMIT: u64 = 4096;

/// The daemon's state directory, held exclusively while this value lives.
///
/// Only one `StateDir` per home can exist at a time, across processes: the
/// lock on `<home>/daemon/lock` is released when this is dropped.
#[derive(Debug)]
pub struct StateDir {
    home: PathBuf,
    daemon_dir: PathBuf,
    /// Held only for its lock; closing the fd releases it.
    _lock: File,
}

impl StateDir {
    /// Creates `<home>` and `<home>/daemon` (mode 0700) if missing, then takes
    /// an exclusive non-blocking lock on `<home>/daemon/lock`.
    ///
    /// Temporary files left in `<home>/daemon` by atomic writes a crash interrupted are removed.
    ///
    /// Fails with [`StoreError::Locked`] when another `StateDir` (in this or
    /// another process) holds the same home.
    pub fn open(home: &Path) -> Result<StateDir> {
        fs::create_dir_all(home).map_err(io_err(home))?;
        let daemon_dir = home.join(DAEMON_DIR);
        create_private_dir(&daemon_dir, home)?;

        let lock_path = daemon_dir.join(LOCK_FILE);
        let mut opts = OpenOptions::new();
        opts.read(true).write(true).create(true).truncate(false);
        let lock = create_mode(&mut opts, 0o600)
            .open(&lock_path)
            .map_err(io_err(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(StoreError::Locked { path: lock_path }),
            Err(TryLockError::Error(e)) => return Err(io_err(&lock_path)(e)),
        }
        // Holding the lock, nobody else can be halfway through a write here.
        remove_stale_temps(&daemon_dir)?;

        Ok(StateDir {
            home: home.to_path_buf(),
            daemon_dir,
            _lock: lock,
        })
    }

    /// The root home this state directory lives in (e.g. `~/.jucode`).
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// `<home>/daemon`.
    pub fn daemon_dir(&self) -> &Path {
        &self.daemon_dir
    }

    /// `<home>/daemon/<file>`.
    pub fn path(&self, file: &str) -> PathBuf {
        self.daemon_dir.join(file)
    }

    /// `<home>/daemon/token`.
    pub fn token_path(&self) -> PathBuf {
        self.path(TOKEN_FILE)
    }

    /// Reads the daemon token, creating it on first start: 64 lowercase hex
    /// characters from 32 random bytes, in a mode 0600 file.
    ///
    /// Refuses a token file others can access ([`StoreError::InsecurePermissions`])
    /// and one that does not hold a token ([`StoreError::InvalidToken`]).
    pub fn load_or_create_token(&self) -> Result<String> {
        let path = self.token_path();
        match File::open(&path) {
            Ok(file) => read_token(&path, file),
            Err(e) if e.kind() == ErrorKind::NotFound => self.create_token(&path),
            Err(e) => Err(io_err(&path)(e)),
        }
    }

    /// Opens (creating if missing) the log `<home>/daemon/<file>`; see [`JsonlLog::open`].
    pub fn open_log<T: DeserializeOwned>(&self, file: &str) -> Result<(JsonlLog, Vec<T>)> {
        JsonlLog::open(&self.path(file))
    }

    fn create_token(&self, path: &Path) -> Result<String> {
        let token = random_token()?;
        // Written under a temporary name and linked into place without
        // overwriting, so a crash never leaves an empty or half-written token.
        let dir = &self.daemon_dir;
        let mut tmp = temp_file_in(dir)?;
        set_mode(tmp.as_file(), 0o600, tmp.path())?;
        tmp.write_all(token.as_bytes())
            .and_then(|()| tmp.write_all(b"\n"))
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(io_err(path))?;
        match tmp.persist_noclobber(path) {
            Ok(_) => {
                sync_dir(dir)?;
                Ok(token)
            }
            // Another caller created it first; theirs wins.
            Err(e) if e.error.kind() == ErrorKind::AlreadyExists => {
                let file = File::open(path).map_err(io_err(path))?;
                read_token(path, file)
            }
            Err(e) => Err(io_err(path)(e.error)),
        }
    }
}

/// Creates `dir` with mode 0700 if missing and fsyncs `parent` so the new name sticks.
fn create_private_dir(dir: &Path, parent: &Path) -> Result<()> {
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    match builder.create(dir) {
        Ok(()) => {
            // The umask may have stripped owner bits; set exactly 0700.
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io_err(dir))?;
            }
            sync_dir(parent)
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            let meta = fs::metadata(dir).map_err(io_err(dir))?;
            if meta.is_dir() {
                Ok(())
            } else {
                Err(io_err(dir)(std::io::Error::new(
                    ErrorKind::NotADirectory,
                    "exists but is not a directory",
                )))
            }
        }
        Err(e) => Err(io_err(dir)(e)),
    }
}

fn read_token(path: &Path, file: File) -> Result<String> {
    // Check before reading, so a leaked token is never even loaded.
    let meta = file.metadata().map_err(io_err(path))?;
    let mode = mode_of(&meta);
    if mode & 0o077 != 0 {
        return Err(StoreError::InsecurePermissions {
            path: path.to_path_buf(),
            mode,
        });
    }
    let mut bytes = Vec::with_capacity(TOKEN_HEX_LEN + 1);
    file.take(TOKEN_READ_LIMIT)
        .read_to_end(&mut bytes)
        .map_err(io_err(path))?;
    let invalid = |reason| StoreError::InvalidToken {
        path: path.to_path_buf(),
        reason,
    };
    let token = bytes.trim_ascii_end();
    if token.is_empty() {
        return Err(invalid("the file is empty"));
    }
    if !token.iter().all(u8::is_ascii_hexdigit) {
        return Err(invalid("expected only hex digits"));
    }
    if token.len() != TOKEN_HEX_LEN {
        return Err(invalid("expected 64 hex digits"));
    }
    // All ASCII hex, so this cannot fail; map anyway rather than unwrap.
    String::from_utf8(token.to_vec()).map_err(|_| invalid("expected only hex digits"))
}

fn random_token() -> Result<String> {
    let mut bytes = [0u8; TOKEN_HEX_LEN / 2];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| StoreError::Random)?;
    Ok(hex_lower(&bytes))
}

fn hex_lower(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase_and_two_digits_per_byte() {
        assert_eq!(hex_lower(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
    }
}
