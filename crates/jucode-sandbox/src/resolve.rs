//! Path resolution for the file-tool checks.
//!
//! Written by hand because the checks need exact kernel semantics for paths that do not exist
//! yet: `std::fs::canonicalize` needs the whole path to exist, and the crates that allow a
//! missing tail normalise that tail lexically, so `missing/../link/x` would skip the symlink
//! `link` that `mkdir -p` + write would then follow.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::SandboxError;

/// The kernel's own limit on symlinks followed in one lookup (MAXSYMLINKS).
const MAX_SYMLINKS: usize = 40;

/// Resolves `path` (relative ones against the absolute `base`): every existing component is
/// looked at, symlinks are followed wherever they occur, `..` climbs from the resolved
/// directory. A missing tail is appended as written. No component of the result is a symlink.
pub fn resolve_path(base: &Path, path: &Path) -> Result<PathBuf, SandboxError> {
    let bad = |reason: &str| SandboxError::BadPath {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    if path.as_os_str().is_empty() {
        return Err(bad("the path is empty"));
    }
    if path.as_os_str().as_bytes().contains(&0) {
        return Err(bad("the path contains a NUL byte"));
    }
    let full = if path.is_absolute() {
        path.to_path_buf()
    } else if base.is_absolute() {
        base.join(path)
    } else {
        return Err(bad("a relative path needs an absolute base directory"));
    };

    let mut pending: VecDeque<OsString> = VecDeque::new();
    push_components(&mut pending, &full, false);
    let mut resolved = PathBuf::from("/");
    // How many trailing components of `resolved` do not exist.
    let mut missing = 0usize;
    let mut links = 0usize;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            resolved.pop();
            missing = missing.saturating_sub(1);
            continue;
        }
        let candidate = resolved.join(&name);
        if missing > 0 {
            resolved = candidate;
            missing += 1;
            continue;
        }
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(bad("too many levels of symbolic links"));
                }
                let target = std::fs::read_link(&candidate).map_err(|source| SandboxError::Io {
                    path: candidate.clone(),
                    source,
                })?;
                if target.is_absolute() {
                    resolved = PathBuf::from("/");
                }
                push_components(&mut pending, &target, true);
            }
            Ok(meta) => {
                if !meta.is_dir() && !pending.is_empty() {
                    return Err(bad("a component in the middle is not a directory"));
                }
                resolved = candidate;
            }
            Err(err) if err.kind() == ErrorKind::NotFound => {
                resolved = candidate;
                missing = 1;
            }
            Err(err) if err.kind() == ErrorKind::NotADirectory => {
                return Err(bad("a component in the middle is not a directory"));
            }
            Err(source) => {
                return Err(SandboxError::Io {
                    path: candidate,
                    source,
                });
            }
        }
    }
    Ok(resolved)
}

/// Queues the names of `path` (`.` dropped, `..` kept) at the back, or at the front when a
/// symlink's target is spliced in before the rest of the walk.
fn push_components(queue: &mut VecDeque<OsString>, path: &Path, front: bool) {
    let names: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    if front {
        for name in names.into_iter().rev() {
            queue.push_front(name);
        }
    } else {
        queue.extend(names);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn existing_paths_match_canonicalize() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(real.join("a/b")).unwrap();
        symlink(real.join("a/b"), real.join("l")).unwrap();
        let got = resolve_path(&real, Path::new("l/../b/./")).unwrap();
        // l/.. climbs from a/b, not from the link's directory.
        assert_eq!(got, real.join("a/b"));
        assert_eq!(
            got,
            std::fs::canonicalize(real.join("l/../b")).unwrap(),
            "same answer as the kernel"
        );
    }

    #[test]
    fn missing_tail_is_kept_and_dotdot_climbs_back_to_real_links() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(real.join("secret")).unwrap();
        std::fs::create_dir_all(real.join("cwd")).unwrap();
        symlink(real.join("secret"), real.join("cwd/link")).unwrap();
        let got = resolve_path(&real.join("cwd"), Path::new("new/../link/key")).unwrap();
        assert_eq!(got, real.join("secret/key"));
        let got = resolve_path(&real.join("cwd"), Path::new("new/deeper/file")).unwrap();
        assert_eq!(got, real.join("cwd/new/deeper/file"));
    }

    #[test]
    fn relative_links_resolve_from_their_directory_and_loops_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(real.join("x/y")).unwrap();
        symlink("../z", real.join("x/y/rel")).unwrap();
        assert_eq!(
            resolve_path(&real, Path::new("x/y/rel/f")).unwrap(),
            real.join("x/z/f")
        );
        symlink("loop2", real.join("loop1")).unwrap();
        symlink("loop1", real.join("loop2")).unwrap();
        let err = resolve_path(&real, Path::new("loop1/f")).unwrap_err();
        assert!(err.to_string().contains("too many levels"), "{err}");
    }

    #[test]
    fn bad_input_is_refused() {
        let base = Path::new("/");
        assert!(resolve_path(base, Path::new("")).is_err());
        let nul = PathBuf::from(std::ffi::OsStr::from_bytes(b"/tmp/a\0b"));
        assert!(resolve_path(base, &nul).is_err());
        assert!(resolve_path(Path::new("rel"), Path::new("x")).is_err());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), b"x").unwrap();
        let err = resolve_path(dir.path(), Path::new("file/below")).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
    }

    #[test]
    fn dotdot_never_climbs_above_root() {
        assert_eq!(
            resolve_path(Path::new("/"), Path::new("/../../etc/../")).unwrap(),
            PathBuf::from("/")
        );
    }
}
