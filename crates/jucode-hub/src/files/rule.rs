//! The one rule every file read follows. A path is expanded (`~`), resolved with symlinks
//! followed, and must then lie inside a known directory (or, for folder browsing, under the
//! home directory) and outside every credential path. Opening re-checks what was opened: the
//! opened descriptor's real path must pass the same rule (a link swapped in between the check
//! and the open is caught), and a file with more than one hard link must not be one of the
//! credential files under another name.

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::files::FilesError;
use crate::paths::expand_home;

/// Where a path may lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Inside a project, session or agent directory, or the uploads.
    Known,
    /// Anywhere under the home directory (`fs_list` with `dirs_only`).
    Home,
}

/// The known directories and the credentials, resolved once per request.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub(crate) user_home: PathBuf,
    real_home: Option<PathBuf>,
    known: Vec<PathBuf>,
    secret: Vec<PathBuf>,
    /// (device, inode) of the credential files, walked once per request when first needed.
    secret_inodes: OnceLock<HashSet<(u64, u64)>>,
}

/// How many entries of the credential directories are looked at when comparing hard links.
const SECRET_WALK_MAX: usize = 20_000;

impl Rule {
    /// Resolves both lists (a project reached through a symlink still counts); entries that do
    /// not exist are dropped. Does file system work: call it off the hub's lock.
    pub(crate) fn new(user_home: &Path, known: &[PathBuf], secret: &[PathBuf]) -> Rule {
        let resolve = |p: &PathBuf| std::fs::canonicalize(p).ok();
        Rule {
            user_home: user_home.to_path_buf(),
            real_home: std::fs::canonicalize(user_home).ok(),
            known: known.iter().filter_map(resolve).collect(),
            secret: secret.iter().filter_map(resolve).collect(),
            secret_inodes: OnceLock::new(),
        }
    }

    /// `path` as the client sent it, resolved and checked.
    pub(crate) fn check(
        &self,
        op: &'static str,
        path: &str,
        scope: Scope,
    ) -> Result<PathBuf, FilesError> {
        let expanded = expand_home(path, &self.user_home)?;
        let real = std::fs::canonicalize(&expanded).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => FilesError::Missing {
                op,
                path: path.to_string(),
            },
            _ => FilesError::Io {
                op,
                path: path.to_string(),
                message: e.to_string(),
            },
        })?;
        self.check_real(op, path, &real, scope)?;
        Ok(real)
    }

    /// The rule on an already resolved path.
    pub(crate) fn check_real(
        &self,
        op: &'static str,
        path: &str,
        real: &Path,
        scope: Scope,
    ) -> Result<(), FilesError> {
        if self.is_secret(real) {
            return Err(FilesError::Credentials {
                op,
                path: path.to_string(),
            });
        }
        let inside = match scope {
            Scope::Known => self.known.iter().any(|k| real.starts_with(k)),
            Scope::Home => {
                self.known.iter().any(|k| real.starts_with(k))
                    || self.real_home.as_ref().is_some_and(|h| real.starts_with(h))
            }
        };
        if inside {
            Ok(())
        } else {
            Err(FilesError::Outside {
                op,
                path: path.to_string(),
                scope,
            })
        }
    }

    /// The credential paths, resolved.
    pub(crate) fn secrets(&self) -> &[PathBuf] {
        &self.secret
    }

    /// Whether a resolved path is, or is under, a credential path.
    pub(crate) fn is_secret(&self, real: &Path) -> bool {
        self.secret.iter().any(|s| real.starts_with(s))
    }

    /// Opens `real` (from [`Rule::check`]) and checks what was opened.
    pub(crate) fn open(
        &self,
        op: &'static str,
        path: &str,
        real: &Path,
        scope: Scope,
    ) -> Result<File, FilesError> {
        let io = |e: std::io::Error| FilesError::Io {
            op,
            path: path.to_string(),
            message: e.to_string(),
        };
        let file = File::open(real).map_err(io)?;
        self.verify(op, path, &file, real, scope)?;
        Ok(file)
    }

    /// The checks on an open descriptor: where it really is, and which inode it is.
    pub(crate) fn verify(
        &self,
        op: &'static str,
        path: &str,
        file: &File,
        real: &Path,
        scope: Scope,
    ) -> Result<(), FilesError> {
        let io = |e: std::io::Error| FilesError::Io {
            op,
            path: path.to_string(),
            message: e.to_string(),
        };
        let meta = file.metadata().map_err(io)?;
        let opened = opened_path(file, real, &meta).map_err(io)?;
        self.check_real(op, path, &opened, scope)?;
        if meta.is_file()
            && meta.nlink() > 1
            && self
                .secret_inodes
                .get_or_init(|| self.walk_secrets())
                .contains(&inode(&meta))
        {
            return Err(FilesError::Credentials {
                op,
                path: path.to_string(),
            });
        }
        Ok(())
    }

    /// (device, inode) of every file under the credential paths (a bounded walk; only done
    /// for a file with several hard links).
    fn walk_secrets(&self) -> HashSet<(u64, u64)> {
        let mut seen = HashSet::new();
        let mut stack: Vec<PathBuf> = self.secret.clone();
        let mut budget = SECRET_WALK_MAX;
        while let Some(dir) = stack.pop() {
            let Ok(meta) = std::fs::symlink_metadata(&dir) else {
                continue;
            };
            if meta.is_file() {
                seen.insert(inode(&meta));
                continue;
            }
            if !meta.is_dir() {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if budget == 0 {
                    return seen;
                }
                budget -= 1;
                stack.push(entry.path());
            }
        }
        seen
    }
}

fn inode(meta: &std::fs::Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

/// Where an open descriptor really is. Linux names it in `/proc/self/fd`; elsewhere the path
/// is stat'ed again and must be the same inode as the descriptor.
#[cfg(target_os = "linux")]
fn opened_path(file: &File, _real: &Path, _meta: &std::fs::Metadata) -> std::io::Result<PathBuf> {
    use std::os::fd::AsRawFd as _;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

#[cfg(not(target_os = "linux"))]
fn opened_path(_file: &File, real: &Path, meta: &std::fs::Metadata) -> std::io::Result<PathBuf> {
    let again = std::fs::symlink_metadata(real)?;
    if inode(&again) == inode(meta) {
        Ok(real.to_path_buf())
    } else {
        Err(std::io::Error::other(
            "the file changed while it was opened",
        ))
    }
}

/// A path that names the open descriptor itself (Linux), so a later read cannot be sent
/// elsewhere by a swapped link; elsewhere the checked path.
#[cfg(target_os = "linux")]
pub(crate) fn through(file: &File, _real: &Path) -> PathBuf {
    use std::os::fd::AsRawFd as _;
    PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn through(_file: &File, real: &Path) -> PathBuf {
    real.to_path_buf()
}
