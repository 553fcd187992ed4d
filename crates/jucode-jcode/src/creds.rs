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

use std::os::fd::{BorrowedFd, OwnedFd};
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
pub const EXTERNAL_LOGINS: [&str; 20] = [
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    ".cursor/auth.json",
    ".config/cursor/auth.json",
    "AppData/Roaming/Cursor/auth.json",
    // Cursor keeps its login in its editor state database, in one of six places.
    ".config/Cursor/User/globalStorage/state.vscdb",
    ".config/cursor/User/globalStorage/state.vscdb",
    "Library/Application Support/Cursor/User/globalStorage/state.vscdb",
    "Library/Application Support/cursor/User/globalStorage/state.vscdb",
    "AppData/Roaming/Cursor/User/globalStorage/state.vscdb",
    "AppData/Roaming/cursor/User/globalStorage/state.vscdb",
    ".config/github-copilot/hosts.json",
    ".config/github-copilot/apps.json",
    ".copilot/config.json",
    ".hermes/auth.json",
    ".pi/agent/auth.json",
    ".openclaw/agent/auth.json",
    ".openclaw/credentials/oauth.json",
    ".local/share/opencode/auth.json",
];

/// OpenClaw's per-agent store: `.openclaw/agents/<id>/agent/<file>`, one level of ids.
pub const OPENCLAW_AGENTS: &str = ".openclaw/agents";
/// The credential files of one OpenClaw agent.
pub const OPENCLAW_AGENT_FILES: [&str; 2] = ["auth-profiles.json", "auth.json"];

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
    let mut externals: Vec<PathBuf> = EXTERNAL_LOGINS.iter().map(PathBuf::from).collect();
    // OpenClaw agents of the operator, and those mirrored before (so a removed
    // agent's login is removed too).
    let mut agents: Vec<String> = Vec::new();
    if let Some(h) = &src.user_home {
        agent_ids(&h.join(OPENCLAW_AGENTS), &mut agents);
    }
    agent_ids(
        &private_root.join("external").join(OPENCLAW_AGENTS),
        &mut agents,
    );
    for id in agents {
        for f in OPENCLAW_AGENT_FILES {
            externals.push(Path::new(OPENCLAW_AGENTS).join(&id).join("agent").join(f));
        }
    }
    for rel in externals {
        out.push(Entry {
            source: src
                .user_home
                .as_ref()
                .map(|h| h.join(&rel))
                .unwrap_or_default(),
            dest: Path::new("external").join(&rel),
        });
    }
    out
}

/// Directory names directly under `dir` (real directories only, never a
/// symlink; names that are not plain UTF-8 components are skipped).
fn agent_ids(dir: &Path, out: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        if name != "." && name != ".." && !name.contains('/') && !out.contains(&name) {
            out.push(name);
        }
    }
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
        // Streamed, not read whole: Cursor's state database can be large.
        let source = if e.source.as_os_str().is_empty() {
            None
        } else {
            match std::fs::File::open(&e.source) {
                Ok(f) => match f.metadata() {
                    Ok(m) if m.is_file() => Some(f),
                    Ok(_) => None,
                    Err(err) => return Err(Error::io(&e.source, err)),
                },
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
                // A directory or an unreadable leaf of the allowlist is no login file.
                Err(err) if err.kind() == std::io::ErrorKind::NotADirectory => None,
                Err(err) => return Err(Error::io(&e.source, err)),
            }
        };
        let (parents, leaf) = split(&e.dest)?;
        let shown = private_root.join(&e.dest);
        match source {
            Some(mut file) => {
                let dir = walk(&root, private_root, &parents, true)?
                    .ok_or_else(|| no_pin(private_root, &e.dest))?;
                at_pinned(&dir, &shown, |at| publish(at, &leaf, &mut file))?
                    .map_err(|err| Error::io(&shown, err))?;
                report.copied.push(e.dest.clone());
            }
            None => {
                // ENOENT on a parent under a held pin: the mirror path is absent.
                let Some(dir) = walk(&root, private_root, &parents, false)? else {
                    continue;
                };
                let res = at_pinned(&dir, &shown, |at| {
                    rustix::fs::unlinkat(at, leaf.as_str(), AtFlags::empty())
                })?;
                match res {
                    Ok(()) => report.removed.push(e.dest.clone()),
                    Err(Errno::NOENT) => {}
                    Err(err) => return Err(Error::io(&shown, err.into())),
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

/// Prove the descriptor is the directory we think, where the pin is a
/// descriptor path: `/dev/fd/<fd>/.` must traverse to the same inode. A pin
/// that cannot be proven is refused by name and nothing is mirrored.
#[cfg(not(target_os = "macos"))]
fn verify_pin(fd: &OwnedFd, path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let st = rustix::fs::fstat(fd).map_err(|e| {
        Error::PrivateState(format!(
            "credential mirror: cannot stat the pin of {}: {e}",
            path.display()
        ))
    })?;
    let via = PathBuf::from(format!("/dev/fd/{}/.", fd.as_raw_fd()));
    match std::fs::metadata(&via) {
        Ok(m) if m.ino() == st.st_ino && m.dev() == st.st_dev => Ok(()),
        _ => Err(Error::PrivateState(format!(
            "credential mirror: the pin of {} does not hold (/dev/fd does not traverse)",
            path.display()
        ))),
    }
}

/// macOS has no subpath namespace under `/dev/fd/<fd>/`: the pin is the
/// working directory, proven when each leaf is reached ([`cwd_pin::enter`]).
#[cfg(target_os = "macos")]
fn verify_pin(_fd: &OwnedFd, _path: &Path) -> Result<()> {
    Ok(())
}

/// Run one leaf operation through the pinned parent `dir`: relative to the
/// descriptor itself, or on macOS relative to the verified working directory.
fn at_pinned<T, E>(
    dir: &OwnedFd,
    shown: &Path,
    op: impl FnOnce(BorrowedFd<'_>) -> std::result::Result<T, E>,
) -> Result<std::result::Result<T, E>> {
    #[cfg(target_os = "macos")]
    {
        let _pin = cwd_pin::enter(dir, shown)?;
        Ok(op(rustix::fs::CWD))
    }
    #[cfg(not(target_os = "macos"))]
    {
        let _ = shown;
        Ok(op(std::os::fd::AsFd::as_fd(dir)))
    }
}

/// The working-directory pin (the macOS mechanism; compiled everywhere so
/// it is built and tested on Linux too). The working directory is
/// process-wide, so one pin is held at a time, and it is restored when the
/// pin drops, on every exit including a refusal.
#[cfg_attr(not(target_os = "macos"), allow(dead_code))]
mod cwd_pin {
    use std::os::fd::OwnedFd;
    use std::path::Path;
    use std::sync::{Mutex, MutexGuard};

    use rustix::fs::{Mode, OFlags};

    use crate::{Error, Result};

    static HELD: Mutex<()> = Mutex::new(());

    pub(super) struct CwdPin {
        saved: OwnedFd,
        _held: MutexGuard<'static, ()>,
    }

    impl Drop for CwdPin {
        fn drop(&mut self) {
            let _ = rustix::process::fchdir(&self.saved);
        }
    }

    fn refuse(shown: &Path, why: &str) -> Error {
        Error::PrivateState(format!(
            "credential mirror: the working-directory pin of {} does not hold ({why}); mirrored nothing further",
            shown.display()
        ))
    }

    /// Enter `dir` (already opened `O_NOFOLLOW`) as the working directory and
    /// prove the entered directory is that descriptor's inode.
    pub(super) fn enter(dir: &OwnedFd, shown: &Path) -> Result<CwdPin> {
        let held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        let saved = rustix::fs::open(
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| refuse(shown, &format!("cannot hold the current directory: {e}")))?;
        rustix::process::fchdir(dir).map_err(|e| refuse(shown, &e.to_string()))?;
        // From here the drop restores the saved directory.
        let pin = CwdPin { saved, _held: held };
        let want = rustix::fs::fstat(dir).map_err(|e| refuse(shown, &e.to_string()))?;
        let got = rustix::fs::stat(".").map_err(|e| refuse(shown, &e.to_string()))?;
        if want.st_ino != got.st_ino || want.st_dev != got.st_dev {
            return Err(refuse(shown, "the entered directory is another inode"));
        }
        Ok(pin)
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
fn publish(
    dir: BorrowedFd<'_>,
    leaf: &str,
    src: &mut std::fs::File,
) -> std::result::Result<(), std::io::Error> {
    let tmp = format!(".{leaf}.cotal-tmp.{}", std::process::id());
    let _ = rustix::fs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
    let fd = rustix::fs::openat(
        dir,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut out = std::fs::File::from(fd);
    let copied = std::io::copy(src, &mut out).and_then(|_| out.sync_all());
    drop(out);
    if let Err(e) = copied {
        let _ = rustix::fs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
        return Err(e);
    }
    rustix::fs::renameat(dir, tmp.as_str(), dir, leaf).map_err(Into::into)
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

    #[test]
    fn cursor_state_databases_and_openclaw_agents_are_mirrored_and_removed() {
        let (_t, src, private) = setup();
        let home = src.user_home.clone().unwrap();
        let vscdb = ".config/Cursor/User/globalStorage/state.vscdb";
        let mac_vscdb = "Library/Application Support/Cursor/User/globalStorage/state.vscdb";
        // Large enough that it is streamed in many chunks.
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        for (rel, bytes) in [
            (vscdb, big.as_slice()),
            (mac_vscdb, b"mac".as_slice()),
            ("AppData/Roaming/Cursor/auth.json", b"{}".as_slice()),
            (
                ".openclaw/agents/a1/agent/auth-profiles.json",
                b"p1".as_slice(),
            ),
            (".openclaw/agents/a1/agent/auth.json", b"a1".as_slice()),
            (".openclaw/agents/b2/agent/auth.json", b"b2".as_slice()),
            (
                ".openclaw/agents/b2/agent/notes.json",
                b"not a login".as_slice(),
            ),
        ] {
            let p = home.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        }
        // A symlinked agent directory is not followed.
        let elsewhere = _t.path().join("elsewhere/agent");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("auth.json"), b"theirs").unwrap();
        std::os::unix::fs::symlink(
            _t.path().join("elsewhere"),
            home.join(".openclaw/agents/c3"),
        )
        .unwrap();

        let r = mirror(&private, &inventory(&src, &private)).unwrap();
        let ext = private.join("external");
        assert_eq!(std::fs::read(ext.join(vscdb)).unwrap(), big);
        assert_eq!(std::fs::read(ext.join(mac_vscdb)).unwrap(), b"mac");
        assert!(ext.join("AppData/Roaming/Cursor/auth.json").exists());
        assert_eq!(
            std::fs::read(ext.join(".openclaw/agents/a1/agent/auth-profiles.json")).unwrap(),
            b"p1"
        );
        assert!(ext.join(".openclaw/agents/b2/agent/auth.json").exists());
        assert!(!ext.join(".openclaw/agents/b2/agent/notes.json").exists());
        assert!(!ext.join(".openclaw/agents/c3").exists());
        assert_eq!(r.copied.len(), 6, "{r:?}");

        // The operator removed agent b2 and the Cursor database.
        std::fs::remove_dir_all(home.join(".openclaw/agents/b2")).unwrap();
        std::fs::remove_file(home.join(vscdb)).unwrap();
        let r = mirror(&private, &inventory(&src, &private)).unwrap();
        assert!(!ext.join(".openclaw/agents/b2/agent/auth.json").exists());
        assert!(!ext.join(vscdb).exists());
        assert!(ext.join(".openclaw/agents/a1/agent/auth.json").exists());
        assert_eq!(r.removed.len(), 2, "{r:?}");
    }

    #[test]
    fn every_allowlisted_external_login_has_a_plain_relative_path() {
        for rel in EXTERNAL_LOGINS {
            let (parents, leaf) = split(&Path::new("external").join(rel)).unwrap();
            assert!(!leaf.is_empty() && parents[0] == "external", "{rel}");
        }
        assert_eq!(
            EXTERNAL_LOGINS
                .iter()
                .filter(|r| r.ends_with("state.vscdb"))
                .count(),
            6
        );
    }

    /// The macOS mechanism, exercised on Linux: the leaf is created relative
    /// to the verified working directory, which is restored afterwards.
    #[test]
    fn the_working_directory_pin_creates_the_leaf_inside_and_restores_the_cwd() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("pinned");
        std::fs::create_dir(&dir).unwrap();
        let before = std::env::current_dir().unwrap();
        let fd = open_root(&dir).unwrap();
        {
            let _pin = cwd_pin::enter(&fd, &dir).unwrap();
            let mut src = tempfile::tempfile().unwrap();
            std::io::Write::write_all(&mut src, b"leaf").unwrap();
            std::io::Seek::rewind(&mut src).unwrap();
            publish(rustix::fs::CWD, "auth.json", &mut src).unwrap();
        }
        assert_eq!(std::env::current_dir().unwrap(), before);
        assert_eq!(std::fs::read(dir.join("auth.json")).unwrap(), b"leaf");

        // A descriptor that is no directory cannot be entered: refused by name.
        let file = dir.join("auth.json");
        let not_dir =
            rustix::fs::open(&file, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).unwrap();
        let err = cwd_pin::enter(&not_dir, &file).err().unwrap();
        assert!(err.to_string().contains("auth.json"), "{err}");
        assert!(err.to_string().contains("does not hold"), "{err}");
        assert_eq!(std::env::current_dir().unwrap(), before);
    }
}
