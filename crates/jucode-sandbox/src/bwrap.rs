//! The command side: bubblewrap argument lists built from a [`Policy`].

use std::ffi::{OsStr, OsString};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::resolve::resolve_path;
use crate::rules::worktree_git_dirs;
use crate::{Mode, PROTECTED_NAMES, Policy, SandboxError};

/// Package caches under the user's home that stay writable in workspace-write, so builds and
/// installs work without leaving the sandbox.
const PACKAGE_CACHES: [&str; 5] = [
    ".cargo/registry",
    ".cargo/git",
    ".npm",
    ".cache",
    "go/pkg/mod",
];

/// Environment variables a sandboxed command inherits from the daemon; everything else
/// (JUCODE_* tokens included) is cleared.
const ENV_ALLOWLIST: [&str; 13] = [
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "USER",
    "LOGNAME",
    "SHELL",
    "TZ",
];

const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A working bubblewrap, found and probed once.
#[derive(Debug, Clone)]
pub struct Sandbox {
    bwrap: PathBuf,
    /// `--proc /proc` works here (some containers refuse a new procfs).
    mount_proc: bool,
    /// `--unshare-user` works here.
    unshare_user: bool,
}

impl Sandbox {
    /// Finds bwrap on PATH and probes it once (`bwrap … true`); Err with the exact reason
    /// (missing, or namespaces refused with bwrap's own message).
    pub fn detect() -> Result<Sandbox, SandboxError> {
        let bwrap = which::which("bwrap").map_err(|_| SandboxError::BwrapMissing)?;
        Sandbox::probe(bwrap)
    }

    /// Probes a given bwrap binary.
    pub fn with_bwrap(bwrap: PathBuf) -> Result<Sandbox, SandboxError> {
        Sandbox::probe(bwrap)
    }

    fn probe(bwrap: PathBuf) -> Result<Sandbox, SandboxError> {
        // Strongest first; each fallback stays closed (no host /proc, see `proc_args`).
        let mut first_error = None;
        for (mount_proc, unshare_user) in [(true, true), (true, false), (false, false)] {
            let candidate = Sandbox {
                bwrap: bwrap.clone(),
                mount_proc,
                unshare_user,
            };
            match candidate.run_probe() {
                Ok(()) => {
                    if !mount_proc {
                        tracing::warn!(
                            "bwrap cannot mount a new /proc here; sandboxed commands get an empty /proc"
                        );
                    }
                    return Ok(candidate);
                }
                Err(message) => {
                    first_error.get_or_insert(message);
                }
            }
        }
        Err(SandboxError::ProbeFailed {
            bwrap,
            message: first_error.unwrap_or_default(),
        })
    }

    fn run_probe(&self) -> Result<(), String> {
        let mut args: Vec<OsString> = vec!["--ro-bind".into(), "/".into(), "/".into()];
        args.extend(["--dev", "/dev"].map(OsString::from));
        args.extend(self.proc_args());
        args.extend(["--tmpfs", "/tmp"].map(OsString::from));
        args.extend(self.namespace_args(false));
        args.extend(["--", "true"].map(OsString::from));
        let out = std::process::Command::new(&self.bwrap)
            .args(&args)
            .env_clear()
            .env("PATH", DEFAULT_PATH)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("cannot run it: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(if stderr.is_empty() {
            format!("it exited with {}", out.status)
        } else {
            stderr
        })
    }

    /// The bwrap binary in use.
    pub fn bwrap_path(&self) -> &Path {
        &self.bwrap
    }

    /// A bwrap-wrapped command for `program args` under `policy` (FullAccess: the bare
    /// command). The caller sets stdio and process group.
    pub fn command(
        &self,
        policy: &Policy,
        program: &OsStr,
        args: &[OsString],
    ) -> Result<tokio::process::Command, SandboxError> {
        self.command_with_env(policy, program, args, &[])
    }

    /// [`Sandbox::command`] with extra environment variables for the child (JUCODE_* names
    /// are refused).
    pub fn command_with_env(
        &self,
        policy: &Policy,
        program: &OsStr,
        args: &[OsString],
        extra_env: &[(OsString, OsString)],
    ) -> Result<tokio::process::Command, SandboxError> {
        policy.validate()?;
        for (name, _) in extra_env {
            if is_daemon_var(name) || name.is_empty() || name.to_string_lossy().contains('=') {
                return Err(SandboxError::BadPolicy(format!(
                    "environment variable {} cannot be passed to a command",
                    name.to_string_lossy()
                )));
            }
        }
        if policy.mode == Mode::FullAccess {
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args).current_dir(&policy.cwd);
            // No sandbox, but the daemon's own secrets still stay home.
            for (name, _) in std::env::vars_os() {
                if is_daemon_var(&name) {
                    cmd.env_remove(name);
                }
            }
            cmd.envs(extra_env.iter().map(|(k, v)| (k, v)));
            return Ok(cmd);
        }
        let mut bwrap_args = self.bwrap_args(policy)?;
        for (name, value) in extra_env {
            bwrap_args.extend([OsString::from("--setenv"), name.clone(), value.clone()]);
        }
        bwrap_args.push("--".into());
        bwrap_args.push(program.to_os_string());
        bwrap_args.extend(args.iter().cloned());
        let mut cmd = tokio::process::Command::new(&self.bwrap);
        cmd.args(bwrap_args)
            .env_clear()
            .env("PATH", DEFAULT_PATH)
            .current_dir("/");
        Ok(cmd)
    }

    /// Every bwrap option for `policy`, up to (not including) `--` and the program.
    pub fn bwrap_args(&self, policy: &Policy) -> Result<Vec<OsString>, SandboxError> {
        policy.validate()?;
        if policy.mode == Mode::FullAccess {
            return Err(SandboxError::BadPolicy(
                "full access runs commands without bwrap".to_string(),
            ));
        }
        let cwd = resolve_path(Path::new("/"), &policy.cwd)?;
        if !cwd.is_dir() {
            return Err(SandboxError::BadPolicy(format!(
                "cwd is not a directory: {}",
                policy.cwd.display()
            )));
        }
        let write = policy.mode == Mode::WorkspaceWrite;

        // The read-only root goes first, outside the sort below (a cwd of / must not be
        // covered by it).
        let base = Mount::new(PathBuf::from("/"), Kind::RoBind);
        let mut mounts: Vec<Mount> = vec![
            Mount::new(PathBuf::from("/dev"), Kind::Dev),
            Mount::new(PathBuf::from("/proc"), Kind::Proc),
            Mount::new(PathBuf::from("/tmp"), Kind::Tmpfs),
        ];
        let root_kind = if write { Kind::Bind } else { Kind::RoBind };
        mounts.push(Mount::new(cwd.clone(), root_kind));
        for dir in &policy.writable {
            if let Some(dir) = existing(dir)? {
                mounts.push(Mount::new(dir, root_kind));
            }
        }
        if write {
            for cache in PACKAGE_CACHES {
                if let Some(dir) = existing(&policy.user_home.join(cache))? {
                    mounts.push(Mount::new(dir, Kind::Bind));
                }
            }
        }
        for dir in &policy.readable {
            if let Some(dir) = existing(dir)? {
                mounts.push(Mount::new(dir, Kind::RoBind));
            }
        }
        // Parents before children, so a deeper mount is never covered by a later, wider one;
        // at equal paths read-only wins by coming last.
        mounts.sort_by_key(|m| (m.path.components().count(), m.kind.order()));
        mounts.dedup_by(|later, earlier| later.path == earlier.path && later.kind == earlier.kind);

        if write {
            let roots: Vec<PathBuf> = mounts
                .iter()
                .filter(|m| m.kind == Kind::Bind)
                .map(|m| m.path.clone())
                .collect();
            for root in roots {
                for name in PROTECTED_NAMES {
                    if let Some(p) = existing(&root.join(name))? {
                        mounts.push(Mount::new(p, Kind::RoBind));
                    }
                }
                for git_dir in worktree_git_dirs(&root)? {
                    if let Some(p) = existing(&git_dir)? {
                        mounts.push(Mount::new(p, Kind::RoBind));
                    }
                }
            }
        }

        // Last, so credentials stay hidden even under a writable root (cwd = home).
        // Resolved only: bwrap follows a symlinked destination to its target anyway.
        let mut hidden_paths = policy
            .hidden_paths()
            .iter()
            .map(|h| resolve_path(Path::new("/"), h))
            .collect::<Result<Vec<_>, _>>()?;
        hidden_paths.sort();
        hidden_paths.dedup();
        for hidden in hidden_paths {
            match std::fs::symlink_metadata(&hidden) {
                Ok(meta) if meta.is_dir() => mounts.push(Mount::new(hidden, Kind::Hide)),
                Ok(_) => mounts.push(Mount::new(hidden, Kind::NullFile)),
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(SandboxError::Io {
                        path: hidden,
                        source,
                    });
                }
            }
        }

        let mut args: Vec<OsString> = self.mount_args(&base);
        for m in &mounts {
            args.extend(self.mount_args(m));
        }
        args.extend(self.namespace_args(policy.network));
        args.push("--clearenv".into());
        for name in ENV_ALLOWLIST {
            let value = match std::env::var_os(name) {
                Some(v) => v,
                None if name == "PATH" => DEFAULT_PATH.into(),
                None => continue,
            };
            args.extend([OsString::from("--setenv"), name.into(), value]);
        }
        args.extend([
            OsString::from("--setenv"),
            "HOME".into(),
            policy.user_home.clone().into(),
        ]);
        args.extend(["--setenv", "TMPDIR", "/tmp"].map(OsString::from));
        args.extend([OsString::from("--chdir"), cwd.into()]);
        Ok(args)
    }

    fn mount_args(&self, m: &Mount) -> Vec<OsString> {
        let p = m.path.as_os_str().to_os_string();
        match m.kind {
            Kind::RoBind => vec!["--ro-bind".into(), p.clone(), p],
            Kind::Bind => vec!["--bind".into(), p.clone(), p],
            Kind::Tmpfs => vec!["--tmpfs".into(), p],
            Kind::Dev => vec!["--dev".into(), p],
            Kind::Proc => self.proc_args(),
            Kind::Hide => vec!["--tmpfs".into(), p.clone(), "--remount-ro".into(), p],
            Kind::NullFile => vec!["--ro-bind".into(), "/dev/null".into(), p],
        }
    }

    fn proc_args(&self) -> Vec<OsString> {
        // Without a new procfs, an empty one: the host's /proc would show other processes'
        // environments (the daemon's token among them).
        let flag = if self.mount_proc { "--proc" } else { "--tmpfs" };
        vec![flag.into(), "/proc".into()]
    }

    fn namespace_args(&self, network: bool) -> Vec<OsString> {
        let mut args: Vec<&str> = vec!["--unshare-pid", "--unshare-ipc"];
        if self.unshare_user {
            args.push("--unshare-user");
        }
        if !network {
            args.push("--unshare-net");
        }
        // --new-session: no TIOCSTI into the daemon's terminal (CVE-2017-5226).
        args.extend(["--new-session", "--die-with-parent", "--cap-drop", "ALL"]);
        args.into_iter().map(OsString::from).collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bind,
    RoBind,
    Tmpfs,
    Dev,
    Proc,
    /// A read-only empty tmpfs over a credential directory.
    Hide,
    /// /dev/null over a credential file.
    NullFile,
}

impl Kind {
    fn order(self) -> u8 {
        match self {
            Kind::Bind => 0,
            Kind::Tmpfs | Kind::Dev | Kind::Proc => 1,
            Kind::RoBind => 2,
            Kind::Hide | Kind::NullFile => 3,
        }
    }
}

#[derive(Debug, Clone)]
struct Mount {
    path: PathBuf,
    kind: Kind,
}

impl Mount {
    fn new(path: PathBuf, kind: Kind) -> Mount {
        Mount { path, kind }
    }
}

/// The resolved path when it exists; None when it does not (nothing to mount).
fn existing(path: &Path) -> Result<Option<PathBuf>, SandboxError> {
    let resolved = resolve_path(Path::new("/"), path)?;
    match std::fs::metadata(&resolved) {
        Ok(_) => Ok(Some(resolved)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SandboxError::Io {
            path: resolved,
            source,
        }),
    }
}

fn is_daemon_var(name: &OsStr) -> bool {
    name.to_string_lossy()
        .to_ascii_uppercase()
        .starts_with("JUCODE_")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake() -> Sandbox {
        Sandbox {
            bwrap: PathBuf::from("/usr/bin/bwrap"),
            mount_proc: true,
            unshare_user: false,
        }
    }

    fn policy(root: &Path, mode: Mode) -> Policy {
        Policy {
            mode,
            cwd: root.join("proj"),
            writable: vec![],
            readable: vec![],
            network: false,
            user_home: root.join("home"),
            jucode_home: root.join("home/.jucode"),
        }
    }

    fn joined(args: &[OsString]) -> String {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn read_only_binds_nothing_writable_and_hides_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("proj/.git")).unwrap();
        std::fs::create_dir_all(root.join("home/.ssh")).unwrap();
        std::fs::create_dir_all(root.join("home/.jucode/daemon")).unwrap();
        std::fs::write(root.join("home/.jucode/auth.json"), b"{}").unwrap();
        let args = joined(&fake().bwrap_args(&policy(&root, Mode::ReadOnly)).unwrap());
        assert!(!args.contains("--bind "), "{args}");
        let ssh = root.join("home/.ssh");
        assert!(
            args.contains(&format!("--tmpfs {0} --remount-ro {0}", ssh.display())),
            "{args}"
        );
        let auth = root.join("home/.jucode/auth.json");
        assert!(
            args.contains(&format!("--ro-bind /dev/null {}", auth.display())),
            "{args}"
        );
        assert!(args.contains("--unshare-net"), "{args}");
        assert!(args.contains("--clearenv"), "{args}");
        assert!(!args.contains("JUCODE_"), "{args}");
    }

    #[test]
    fn workspace_write_orders_mounts_and_protects_git() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("proj/.git")).unwrap();
        std::fs::create_dir_all(root.join("proj/vendor")).unwrap();
        std::fs::create_dir_all(root.join("home/.cargo/registry")).unwrap();
        let mut p = policy(&root, Mode::WorkspaceWrite);
        p.network = true;
        p.readable = vec![root.join("proj/vendor")];
        p.writable = vec![root.join("missing-is-skipped")];
        let args = joined(&fake().bwrap_args(&p).unwrap());
        let proj = root.join("proj");
        let bind = format!("--bind {0} {0}", proj.display());
        let git = format!("--ro-bind {0}/.git {0}/.git", proj.display());
        let vendor = format!("--ro-bind {0}/vendor {0}/vendor", proj.display());
        let tmp = args.find("--tmpfs /tmp").unwrap();
        let b = args.find(&bind).unwrap();
        assert!(tmp < b, "{args}");
        assert!(args.find(&git).unwrap() > b, "{args}");
        assert!(args.find(&vendor).unwrap() > b, "{args}");
        assert!(args.contains(&format!(
            "--bind {0} {0}",
            root.join("home/.cargo/registry").display()
        )));
        assert!(!args.contains("missing-is-skipped"), "{args}");
        assert!(!args.contains("--unshare-net"), "{args}");
    }

    #[test]
    fn the_read_only_root_comes_first_even_when_cwd_is_root() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = policy(dir.path(), Mode::WorkspaceWrite);
        p.cwd = PathBuf::from("/");
        let args = joined(&fake().bwrap_args(&p).unwrap());
        assert!(args.starts_with("--ro-bind / / "), "{args}");
        let bind = args.find("--bind / /").unwrap();
        assert!(args.find("--tmpfs /tmp").unwrap() > bind, "{args}");
    }

    #[test]
    fn missing_cwd_and_relative_paths_fail_closed() {
        let dir = tempfile::tempdir().unwrap();
        let p = policy(dir.path(), Mode::WorkspaceWrite);
        assert!(fake().bwrap_args(&p).is_err());
        let mut p = policy(dir.path(), Mode::WorkspaceWrite);
        p.cwd = PathBuf::from("relative");
        assert!(fake().bwrap_args(&p).is_err());
    }

    #[test]
    fn daemon_variables_cannot_be_passed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proj")).unwrap();
        let p = policy(dir.path(), Mode::WorkspaceWrite);
        let env = [(OsString::from("JUCODE_TOKEN"), OsString::from("x"))];
        assert!(
            fake()
                .command_with_env(&p, OsStr::new("true"), &[], &env)
                .is_err()
        );
    }
}
