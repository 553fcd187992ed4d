//! Credential mirroring: the operator's allow-listed jcode, provider-config
//! and external-login files are copied into the private home at every launch,
//! atomically, and a destination whose source is gone is removed. Nothing
//! outside that inventory is touched.
//!
//! Parents are walked one component at a time with `O_NOFOLLOW|O_DIRECTORY`
//! and every leaf is created, renamed or unlinked relative to the pinned
//! parent descriptor (`openat`/`renameat`/`unlinkat`), so swapping a walked
//! directory for a symlink cannot reach a namesake outside the home. Written
//! by hand because no crate offers a pinned-parent copy; rustix gives the calls.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::{Error, Result};

/// Files inherited from the operator's jcode home.
pub const JCODE_HOME_FILES: [&str; 7] = [
    "auth.json",
    "openai-auth.json",
    "antigravity_oauth.json",
    "gemini_oauth.json",
    "google_oauth.json",
    "google_credentials.json",
    "config.toml",
];

/// Provider `.env` files of jcode's app config dir (plus `provider-<name>.env`).
pub const PROVIDER_ENV_FILES: [&str; 8] = [
    "anthropic.env",
    "openai.env",
    "openrouter.env",
    "cursor.env",
    "gemini.env",
    "jcode-subscription.env",
    "openai-compatible.env",
    "jcode.env",
];

/// External logins, relative to the operator's `$HOME`; mirrored under `external/`.
pub const EXTERNAL_LOGINS: [&str; 14] = [
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    ".cursor/auth.json",
    ".config/cursor/auth.json",
    ".config/github-copilot/hosts.json",
    ".config/github-copilot/apps.json",
    ".copilot/config.json",
    ".hermes/auth.json",
    ".pi/agent/auth.json",
    ".openclaw/agent/auth.json",
    ".openclaw/credentials/oauth.json",
    ".local/share/opencode/auth.json",
    ".claude.json",
];

/// One mirrored file: where it comes from and where it goes (relative to the home).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub source: PathBuf,
    pub dest: PathBuf,
}

/// Where the operator's files are.
#[derive(Debug, Clone)]
pub struct Sources {
    pub jcode_home: PathBuf,
    pub app_config: Option<PathBuf>,
    pub user_home: Option<PathBuf>,
}

fn is_provider_env(name: &str) -> bool {
    PROVIDER_ENV_FILES.contains(&name)
        || name
            .strip_prefix("provider-")
            .and_then(|r| r.strip_suffix(".env"))
            .is_some_and(|n| {
                !n.is_empty()
                    && n.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            })
}

/// The explicit inventory for one launch. `private_root` is listed for
/// `provider-*.env` files that were mirrored before and whose source is gone.
pub fn inventory(src: &Sources, private_root: &Path) -> Vec<Entry> {
    let mut out: Vec<Entry> = JCODE_HOME_FILES
        .iter()
        .map(|f| Entry {
            source: src.jcode_home.join(f),
            dest: PathBuf::from(f),
        })
        .collect();
    let mut envs: Vec<String> = PROVIDER_ENV_FILES.iter().map(|s| s.to_string()).collect();
    let mut scan = |dir: &Path| {
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().to_string();
                if is_provider_env(&n) && !envs.contains(&n) {
                    envs.push(n);
                }
            }
        }
    };
    if let Some(app) = &src.app_config {
        scan(app);
    }
    scan(&private_root.join("config").join("jcode"));
    for n in envs {
        out.push(Entry {
            source: src
                .app_config
                .as_ref()
                .map(|a| a.join(&n))
                .unwrap_or_default(),
            dest: Path::new("config").join("jcode").join(n),
        });
    }
    for rel in EXTERNAL_LOGINS {
        out.push(Entry {
            source: src
                .user_home
                .as_ref()
                .map(|h| h.join(rel))
                .unwrap_or_default(),
            dest: Path::new("external").join(rel),
        });
    }
    out
}

/// What a mirror run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub copied: Vec<PathBuf>,
    pub removed: Vec<PathBuf>,
}

/// Refresh every entry under `private_root`.
pub fn mirror(private_root: &Path, entries: &[Entry]) -> Result<Report> {
    let root = open_root(private_root)?;
    let mut report = Report::default();
    for e in entries {
        let source = if e.source.as_os_str().is_empty() {
            None
        } else {
            match std::fs::metadata(&e.source) {
                Ok(m) if m.is_file() => {
                    Some(std::fs::read(&e.source).map_err(|err| Error::io(&e.source, err))?)
                }
                Ok(_) => None,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
                Err(err) => return Err(Error::io(&e.source, err)),
            }
        };
        let (parents, leaf) = split(&e.dest)?;
        match source {
            Some(bytes) => {
                let dir = walk(&root, private_root, &parents, true)?
                    .ok_or_else(|| no_pin(private_root, &e.dest))?;
                publish(&dir, &leaf, &bytes)
                    .map_err(|err| Error::io(private_root.join(&e.dest), err.into()))?;
                report.copied.push(e.dest.clone());
            }
            None => {
                // ENOENT on a parent under a held pin: the mirror path is absent.
                let Some(dir) = walk(&root, private_root, &parents, false)? else {
                    continue;
                };
                match rustix::fs::unlinkat(&dir, leaf.as_str(), AtFlags::empty()) {
                    Ok(()) => report.removed.push(e.dest.clone()),
                    Err(Errno::NOENT) => {}
                    Err(err) => {
                        return Err(Error::io(private_root.join(&e.dest), err.into()));
                    }
                }
            }
        }
    }
    Ok(report)
}

fn no_pin(root: &Path, rel: &Path) -> Error {
    Error::PrivateState(format!(
        "credential mirror: no pinned parent for {}; mirrored nothing further",
        root.join(rel).display()
    ))
}

fn split(rel: &Path) -> Result<(Vec<String>, String)> {
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().to_string()),
            _ => {
                return Err(Error::PrivateState(format!(
                    "credential mirror: {} is not a plain relative path",
                    rel.display()
                )));
            }
        }
    }
    let leaf = parts
        .pop()
        .ok_or_else(|| Error::PrivateState("credential mirror: empty path".into()))?;
    Ok((parts, leaf))
}

fn open_root(root: &Path) -> Result<OwnedFd> {
    let fd = rustix::fs::open(
        root,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY,
        Mode::empty(),
    )
    .map_err(|e| {
        Error::PrivateState(format!(
            "credential mirror: cannot pin {}: {e}",
            root.display()
        ))
    })?;
    verify_pin(&fd, root)?;
    Ok(fd)
}

/// Prove the descriptor is the directory we think: on Linux `/dev/fd/<fd>/.`
/// must traverse to the same inode; a pin that cannot be proven is refused.
fn verify_pin(fd: &OwnedFd, path: &Path) -> Result<()> {
    let st = rustix::fs::fstat(fd).map_err(|e| {
        Error::PrivateState(format!(
            "credential mirror: cannot stat the pin of {}: {e}",
            path.display()
        ))
    })?;
    if cfg!(target_os = "linux") {
        use std::os::fd::AsRawFd;
        let via = PathBuf::from(format!("/dev/fd/{}/.", fd.as_raw_fd()));
        match std::fs::metadata(&via) {
            Ok(m) if m.ino() == st.st_ino && m.dev() == st.st_dev => Ok(()),
            _ => Err(Error::PrivateState(format!(
                "credential mirror: the pin of {} does not hold (/dev/fd does not traverse)",
                path.display()
            ))),
        }
    } else {
        Ok(())
    }
}

/// Walk `parents` below `root` without following symlinks; create missing
/// directories (0700) when `create`, otherwise report absence as `None`.
fn walk(
    root: &OwnedFd,
    root_path: &Path,
    parents: &[String],
    create: bool,
) -> Result<Option<OwnedFd>> {
    let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY;
    let mut cur = rustix::io::dup(root).map_err(|e| Error::PrivateState(e.to_string()))?;
    let mut shown = root_path.to_path_buf();
    for p in parents {
        shown.push(p);
        let next = match rustix::fs::openat(&cur, p.as_str(), flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) if create => {
                match rustix::fs::mkdirat(&cur, p.as_str(), Mode::from_raw_mode(0o700)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(Error::io(&shown, e.into())),
                }
                rustix::fs::openat(&cur, p.as_str(), flags, Mode::empty())
                    .map_err(|e| refuse(&shown, e))?
            }
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(refuse(&shown, e)),
        };
        cur = next;
    }
    verify_pin(&cur, &shown)?;
    Ok(Some(cur))
}

fn refuse(path: &Path, e: Errno) -> Error {
    if e == Errno::LOOP || e == Errno::NOTDIR {
        Error::PrivateState(format!(
            "credential mirror: {} is a symlink or not a directory; refusing to walk it",
            path.display()
        ))
    } else {
        Error::PrivateState(format!("credential mirror: {}: {e}", path.display()))
    }
}

/// Write a temp leaf in the pinned parent and rename it over `leaf` there.
fn publish(dir: &OwnedFd, leaf: &str, bytes: &[u8]) -> std::result::Result<(), Errno> {
    let tmp = format!(".{leaf}.cotal-tmp.{}", std::process::id());
    let _ = rustix::fs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
    let fd = rustix::fs::openat(
        dir,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut off = 0;
    while off < bytes.len() {
        off += rustix::io::write(fd.as_fd(), &bytes[off..])?;
    }
    rustix::fs::fsync(&fd)?;
    drop(fd);
    rustix::fs::renameat(dir, tmp.as_str(), dir, leaf)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn setup() -> (tempfile::TempDir, Sources, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let op = t.path().join("op-jcode");
        let app = t.path().join("app");
        let home = t.path().join("home");
        let private = t.path().join("private");
        for d in [&op, &app, &home, &private] {
            std::fs::create_dir_all(d).unwrap();
        }
        let src = Sources {
            jcode_home: op,
            app_config: Some(app),
            user_home: Some(home),
        };
        (t, src, private)
    }

    #[test]
    fn copies_refreshes_and_removes_the_inventory_only() {
        let (_t, src, private) = setup();
        std::fs::write(src.jcode_home.join("auth.json"), b"{\"a\":1}").unwrap();
        std::fs::write(src.jcode_home.join("config.toml"), b"x = 1").unwrap();
        std::fs::write(
            src.app_config.as_ref().unwrap().join("provider-fake.env"),
            b"K=v",
        )
        .unwrap();
        std::fs::create_dir_all(src.user_home.as_ref().unwrap().join(".codex")).unwrap();
        std::fs::write(
            src.user_home.as_ref().unwrap().join(".codex/auth.json"),
            b"{}",
        )
        .unwrap();
        std::fs::write(private.join("transcript-ish.json"), b"keep").unwrap();

        let r = mirror(&private, &inventory(&src, &private)).unwrap();
        assert_eq!(r.copied.len(), 4, "{r:?}");
        assert_eq!(
            std::fs::read(private.join("auth.json")).unwrap(),
            b"{\"a\":1}"
        );
        assert_eq!(
            std::fs::read(private.join("config/jcode/provider-fake.env")).unwrap(),
            b"K=v"
        );
        assert_eq!(
            std::fs::read(private.join("external/.codex/auth.json")).unwrap(),
            b"{}"
        );
        let mode = std::fs::metadata(private.join("auth.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);

        // Refresh: a changed login is re-copied; removed sources are removed.
        std::fs::write(src.jcode_home.join("auth.json"), b"{\"a\":2}").unwrap();
        std::fs::remove_file(src.app_config.as_ref().unwrap().join("provider-fake.env")).unwrap();
        std::fs::remove_file(src.user_home.as_ref().unwrap().join(".codex/auth.json")).unwrap();
        let r = mirror(&private, &inventory(&src, &private)).unwrap();
        assert_eq!(
            std::fs::read(private.join("auth.json")).unwrap(),
            b"{\"a\":2}"
        );
        assert!(!private.join("config/jcode/provider-fake.env").exists());
        assert!(!private.join("external/.codex/auth.json").exists());
        assert_eq!(r.removed.len(), 2, "{r:?}");
        assert_eq!(
            std::fs::read(private.join("transcript-ish.json")).unwrap(),
            b"keep"
        );
    }

    #[test]
    fn a_symlinked_parent_is_refused_and_nothing_outside_is_written() {
        let (t, src, private) = setup();
        let outside = t.path().join("outside");
        std::fs::create_dir_all(outside.join(".codex")).unwrap();
        std::fs::create_dir_all(src.user_home.as_ref().unwrap().join(".codex")).unwrap();
        std::fs::write(
            src.user_home.as_ref().unwrap().join(".codex/auth.json"),
            b"secret",
        )
        .unwrap();
        std::os::unix::fs::symlink(&outside, private.join("external")).unwrap();
        let err = mirror(&private, &inventory(&src, &private)).unwrap_err();
        assert!(err.to_string().contains("external"), "{err}");
        assert!(err.to_string().contains("symlink"), "{err}");
        assert!(!outside.join(".codex/auth.json").exists());
    }

    #[test]
    fn removal_through_a_symlinked_parent_is_refused_and_the_namesake_survives() {
        let (t, src, private) = setup();
        let outside = t.path().join("outside");
        std::fs::create_dir_all(outside.join("jcode")).unwrap();
        std::fs::write(outside.join("jcode/openai.env"), b"theirs").unwrap();
        std::os::unix::fs::symlink(&outside, private.join("config")).unwrap();
        let err = mirror(&private, &inventory(&src, &private)).unwrap_err();
        assert!(err.to_string().contains("config"), "{err}");
        assert_eq!(
            std::fs::read(outside.join("jcode/openai.env")).unwrap(),
            b"theirs"
        );
    }

    #[test]
    fn a_symlinked_leaf_is_replaced_not_followed() {
        let (t, src, private) = setup();
        let outside = t.path().join("victim");
        std::fs::write(&outside, b"victim").unwrap();
        std::fs::write(src.jcode_home.join("auth.json"), b"new").unwrap();
        std::os::unix::fs::symlink(&outside, private.join("auth.json")).unwrap();
        mirror(&private, &inventory(&src, &private)).unwrap();
        assert_eq!(std::fs::read(&outside).unwrap(), b"victim");
        assert!(
            !std::fs::symlink_metadata(private.join("auth.json"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
}
