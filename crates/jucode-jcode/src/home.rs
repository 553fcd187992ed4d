//! The seat's private jcode home: `<workspace>/.cotal/jcode/<slug>-<sha12>`,
//! keyed by space and name, owner-only, never reached through a symlink; its
//! runtime directory; the short socket alias; the connector log.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::{Error, Result};

/// Project MCP files jcode merges in from the working directory.
pub const PROJECT_MCP_FILES: [&str; 3] = [".jcode/mcp.json", ".mcp.json", ".claude/mcp.json"];

/// Refuse a working directory holding a project MCP file.
pub fn refuse_project_mcp(workdir: &Path) -> Result<()> {
    for rel in PROJECT_MCP_FILES {
        let p = workdir.join(rel);
        if std::fs::symlink_metadata(&p).is_ok() {
            return Err(Error::ProjectMcpConfig(p));
        }
    }
    Ok(())
}

/// Lower-case hex of SHA-256.
pub fn sha256_hex(parts: &[&[u8]]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for p in parts {
        ctx.update(p);
    }
    hex(ctx.finish().as_ref())
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh random hex string (launch nonces).
pub fn nonce() -> Result<String> {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| Error::PrivateState("no randomness for the launch nonce".into()))?;
    Ok(hex(&b))
}

/// The paths of one seat's private instance.
#[derive(Debug, Clone)]
pub struct PrivateHome {
    /// `JCODE_HOME` of the private instance.
    pub root: PathBuf,
    /// The real runtime directory, `<root>/run`.
    pub run_dir: PathBuf,
    /// The short alias directory (`<tmp>/jc-<hash>`), owner-only.
    pub alias_dir: PathBuf,
    /// `JCODE_RUNTIME_DIR` as jcode sees it: `<alias_dir>/r` → `run_dir`.
    pub runtime_dir: PathBuf,
}

fn slug(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(32)
        .collect();
    if out.is_empty() {
        out.push('x');
    }
    out
}

/// Make `dir` (and missing parents) owner-only, refusing any symlinked component
/// below `base`.
fn ensure_private_dir(base: &Path, rel: &Path) -> Result<PathBuf> {
    let mut cur = base.to_path_buf();
    for comp in rel.components() {
        cur.push(comp);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Error::PrivateState(format!(
                    "{} is a symlink; refusing it",
                    cur.display()
                )));
            }
            Ok(m) if !m.is_dir() => {
                return Err(Error::PrivateState(format!(
                    "{} is not a directory",
                    cur.display()
                )));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(&cur)
                    .map_err(|e| Error::io(&cur, e))?;
            }
            Err(e) => return Err(Error::io(&cur, e)),
        }
    }
    Ok(cur)
}

impl PrivateHome {
    /// Derive and prepare the home for `space`/`name` under `workspace`.
    pub fn prepare(workspace: &Path, space: &str, name: &str) -> Result<PrivateHome> {
        let key = sha256_hex(&[space.as_bytes(), b"\0", name.as_bytes()]);
        let leaf = format!("{}-{}", slug(&format!("{space}-{name}")), &key[..12]);
        let rel = Path::new(".cotal").join("jcode").join(leaf);
        let root = ensure_private_dir(workspace, &rel)?;
        let meta = std::fs::metadata(&root).map_err(|e| Error::io(&root, e))?;
        if meta.uid() != nix::unistd::geteuid().as_raw() {
            return Err(Error::PrivateState(format!(
                "{} belongs to another user",
                root.display()
            )));
        }
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| Error::io(&root, e))?;
        let run_dir = ensure_private_dir(&root, Path::new("run"))?;
        ensure_private_dir(&root, Path::new("logs"))?;
        let alias_key = sha256_hex(&[root.as_os_str().as_encoded_bytes()]);
        let alias_dir = std::env::temp_dir().join(format!("jc-{}", &alias_key[..12]));
        let runtime_dir = alias_dir.join("r");
        Ok(PrivateHome {
            root,
            run_dir,
            alias_dir,
            runtime_dir,
        })
    }

    /// Reclaim the short alias: whatever a left-over server made of it, it
    /// becomes our symlink to `run_dir` again.
    pub fn reclaim_alias(&self) -> Result<()> {
        match std::fs::symlink_metadata(&self.alias_dir) {
            Ok(m) => {
                if m.file_type().is_symlink() || !m.is_dir() {
                    return Err(Error::PrivateState(format!(
                        "{} is not a directory",
                        self.alias_dir.display()
                    )));
                }
                if m.uid() != nix::unistd::geteuid().as_raw() {
                    return Err(Error::PrivateState(format!(
                        "{} belongs to another user",
                        self.alias_dir.display()
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(&self.alias_dir)
                    .map_err(|e| Error::io(&self.alias_dir, e))?;
            }
            Err(e) => return Err(Error::io(&self.alias_dir, e)),
        }
        std::fs::set_permissions(&self.alias_dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| Error::io(&self.alias_dir, e))?;
        match std::fs::symlink_metadata(&self.runtime_dir) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&self.runtime_dir)
                .map_err(|e| Error::io(&self.runtime_dir, e))?,
            Ok(_) => std::fs::remove_file(&self.runtime_dir)
                .map_err(|e| Error::io(&self.runtime_dir, e))?,
            Err(_) => {}
        }
        std::os::unix::fs::symlink(&self.run_dir, &self.runtime_dir)
            .map_err(|e| Error::io(&self.runtime_dir, e))?;
        // Stale sockets from a previous launch (as the SDK clears them).
        for f in [
            "jcode-api.sock",
            "jcode.sock",
            "jcode-debug.sock",
            "jcode.sock.hash",
        ] {
            let _ = std::fs::remove_file(self.run_dir.join(f));
        }
        Ok(())
    }

    /// Remove the alias after a proven stop (the next launch would reclaim it anyway).
    pub fn drop_alias(&self) {
        if std::fs::read_link(&self.runtime_dir).is_ok_and(|t| t == self.run_dir) {
            let _ = std::fs::remove_file(&self.runtime_dir);
            let _ = std::fs::remove_dir(&self.alias_dir);
        }
    }

    pub fn api_socket(&self) -> PathBuf {
        self.runtime_dir.join("jcode-api.sock")
    }
    pub fn daemon_socket(&self) -> PathBuf {
        self.runtime_dir.join("jcode.sock")
    }
    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }
    pub fn launch_record(&self) -> PathBuf {
        self.root.join("cotal-launch.json")
    }
    pub fn resume_record(&self) -> PathBuf {
        self.root.join("cotal-resume.json")
    }

    /// `sessions/` that exists but refuses a write is refused before launch;
    /// a missing one is a first launch. Never repaired here.
    pub fn check_sessions_writable(&self) -> Result<()> {
        let dir = self.sessions_dir();
        match std::fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(Error::SessionsUnwritable {
                    path: dir,
                    errno: e.to_string(),
                });
            }
            Ok(_) => {}
        }
        let probe = dir.join(format!(".cotal-probe-{}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&probe)
        {
            Ok(_) => {
                let _ = std::fs::remove_file(&probe);
                Ok(())
            }
            Err(e) => Err(Error::SessionsUnwritable {
                path: dir,
                errno: e.to_string(),
            }),
        }
    }

    /// Write `bytes` to `<root>/<name>` atomically, owner-only.
    pub fn write_private(&self, name: &str, bytes: &[u8]) -> Result<()> {
        write_atomic(&self.root.join(name), bytes)
    }
}

/// Temp file beside `path` (0600, O_EXCL), fsync, rename over.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::PrivateState(format!("{} has no parent", path.display())))?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(|e| Error::io(&tmp, e))?;
    f.write_all(bytes).map_err(|e| Error::io(&tmp, e))?;
    f.sync_all().map_err(|e| Error::io(&tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

/// How far jcode's own logs (`<home>/logs/jcode-<date>.log`, appended across
/// launches) had grown when a launch began, so a later look reads only what
/// this launch's jcode wrote.
#[derive(Debug, Clone, Default)]
pub struct JcodeLogMark {
    dir: PathBuf,
    sizes: std::collections::HashMap<std::ffi::OsString, u64>,
}

/// The most of one log a look reads past its mark.
const LOG_LOOK_CAP: u64 = 8 << 20;

impl JcodeLogMark {
    pub fn take(home: &PrivateHome) -> JcodeLogMark {
        let dir = home.root.join("logs");
        let mut sizes = std::collections::HashMap::new();
        for (name, len) in jcode_logs(&dir) {
            sizes.insert(name, len);
        }
        JcodeLogMark { dir, sizes }
    }

    /// Whether a line jcode appended since the mark contains `needle`. A hint
    /// only (jcode's log wording is not a contract): callers bound the wait.
    pub fn appended_contains(&self, needle: &str) -> bool {
        use std::io::{Read, Seek, SeekFrom};
        for (name, len) in jcode_logs(&self.dir) {
            let from = self.sizes.get(&name).copied().unwrap_or(0);
            if len <= from {
                continue;
            }
            let Ok(mut f) = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(self.dir.join(&name))
            else {
                continue;
            };
            let mut buf = Vec::new();
            if f.seek(SeekFrom::Start(from)).is_err()
                || f.take(LOG_LOOK_CAP).read_to_end(&mut buf).is_err()
            {
                continue;
            }
            if String::from_utf8_lossy(&buf).contains(needle) {
                return true;
            }
        }
        false
    }
}

/// `jcode-*.log` files directly in `dir` (regular files only) and their sizes.
fn jcode_logs(dir: &Path) -> Vec<(std::ffi::OsString, u64)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("jcode-") && n.ends_with(".log")
        })
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            m.is_file().then(|| (e.file_name(), m.len()))
        })
        .collect()
}

/// The connector log: every line to stderr and to an owner-only
/// `<home>/logs/connector-<timestamp>-<pid>.log`.
#[derive(Clone)]
pub struct ConnectorLog {
    file: std::sync::Arc<Mutex<Option<std::fs::File>>>,
    pub path: Option<PathBuf>,
}

impl ConnectorLog {
    /// A log that only writes to stderr (before the home exists).
    pub fn stderr_only() -> ConnectorLog {
        ConnectorLog {
            file: std::sync::Arc::new(Mutex::new(None)),
            path: None,
        }
    }

    pub fn open(home: &PrivateHome) -> ConnectorLog {
        let ts = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
        let path = home
            .root
            .join("logs")
            .join(format!("connector-{ts}-{}.log", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
            .ok();
        ConnectorLog {
            file: std::sync::Arc::new(Mutex::new(file)),
            path: Some(path),
        }
    }

    /// A line for both the terminal and the private log.
    pub fn line(&self, msg: &str) {
        eprintln!("[cotal-jcode] {msg}");
        self.private(msg);
    }

    /// A detail only the private log gets (never provider output on the terminal).
    pub fn private(&self, msg: &str) {
        let mut g = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = g.as_mut() {
            let _ = writeln!(f, "{} {msg}", chrono::Utc::now().to_rfc3339());
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn home_is_keyed_by_space_and_name_and_owner_only() {
        let ws = tempfile::tempdir().unwrap();
        let a = PrivateHome::prepare(ws.path(), "dev", "alice").unwrap();
        let b = PrivateHome::prepare(ws.path(), "dev", "bob").unwrap();
        let a2 = PrivateHome::prepare(ws.path(), "dev", "alice").unwrap();
        assert_ne!(a.root, b.root);
        assert_eq!(a.root, a2.root);
        assert!(a.root.starts_with(ws.path().join(".cotal/jcode")));
        let mode = std::fs::metadata(&a.root).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn symlinked_home_component_is_refused() {
        let ws = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), ws.path().join(".cotal")).unwrap();
        let err = PrivateHome::prepare(ws.path(), "dev", "alice").unwrap_err();
        assert!(err.to_string().contains("symlink"), "{err}");
    }

    #[test]
    fn alias_is_reclaimed_when_a_server_made_it_a_directory() {
        let ws = tempfile::tempdir().unwrap();
        let h = PrivateHome::prepare(ws.path(), "dev", "reclaim").unwrap();
        h.reclaim_alias().unwrap();
        std::fs::remove_file(&h.runtime_dir).unwrap();
        std::fs::create_dir(&h.runtime_dir).unwrap();
        std::fs::write(h.runtime_dir.join("jcode.sock"), b"").unwrap();
        h.reclaim_alias().unwrap();
        let m = std::fs::symlink_metadata(&h.runtime_dir).unwrap();
        assert!(m.file_type().is_symlink());
        assert_eq!(std::fs::read_link(&h.runtime_dir).unwrap(), h.run_dir);
        let _ = std::fs::remove_dir_all(&h.alias_dir);
    }

    #[test]
    fn the_jcode_log_mark_sees_only_what_was_appended_after_it() {
        let ws = tempfile::tempdir().unwrap();
        let h = PrivateHome::prepare(ws.path(), "dev", "marks").unwrap();
        let old = h.root.join("logs/jcode-2026-11-29.log");
        std::fs::write(&old, "MCP: Connected to 'cotal' with 3 tools\n").unwrap();
        let mark = JcodeLogMark::take(&h);
        assert!(!mark.appended_contains("Connected to 'cotal'"));
        let mut f = std::fs::OpenOptions::new().append(true).open(&old).unwrap();
        writeln!(f, "MCP: Connecting to 'cotal'").unwrap();
        assert!(!mark.appended_contains("Connected to 'cotal'"));
        // A new day's file is read from its start.
        std::fs::write(
            h.root.join("logs/jcode-2026-11-30.log"),
            "MCP: Connected to 'cotal' with 3 tools\n",
        )
        .unwrap();
        assert!(mark.appended_contains("Connected to 'cotal'"));
    }

    #[test]
    fn project_mcp_files_are_refused_by_name() {
        let ws = tempfile::tempdir().unwrap();
        refuse_project_mcp(ws.path()).unwrap();
        std::fs::create_dir(ws.path().join(".claude")).unwrap();
        std::fs::write(ws.path().join(".claude/mcp.json"), b"{}").unwrap();
        let err = refuse_project_mcp(ws.path()).unwrap_err();
        assert_eq!(err.code(), "project_mcp_config");
        assert!(err.to_string().contains(".claude/mcp.json"));
    }

    #[test]
    fn unwritable_sessions_dir_is_refused_with_its_errno() {
        let ws = tempfile::tempdir().unwrap();
        let h = PrivateHome::prepare(ws.path(), "dev", "ro").unwrap();
        h.check_sessions_writable().unwrap();
        // A file where the directory should be cannot take a write either (works as root too).
        std::fs::write(h.sessions_dir(), b"x").unwrap();
        let err = h.check_sessions_writable().unwrap_err();
        assert_eq!(err.code(), "sessions_unwritable");
        assert!(err.to_string().contains("sessions"), "{err}");
    }
}
