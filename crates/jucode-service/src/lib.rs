//! Runs the daemon as a login service, and keeps the service's log bounded.
//!
//! `jucode-daemon install` writes a systemd user unit on Linux ([`systemd`]) or a launchd
//! agent on macOS ([`launchd`]) that runs this same binary with the flags it was given, the
//! installing shell's `PATH` and `--log-file ~/.jucode/daemon/daemon.log`, restarts it
//! whenever it exits, and asks the service manager to start it now. `uninstall` stops it and
//! removes the file. The daemon's log is a [`log::RotatingLog`].
//!
//! Start at [`install`]. The service manager is driven through its own command
//! (`systemctl --user`, `launchctl`), found in `PATH` like any other program.

pub mod launchd;
pub mod log;
pub mod systemd;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

/// Why the service could not be installed or removed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("this system has no service manager jucode can install into (systemd or launchd)")]
    Unsupported,
    #[error("{0:?} cannot be written into a service file (a line break or a NUL in it)")]
    Unwritable(String),
    #[error("{0} is not valid UTF-8, which a service file needs")]
    NotUtf8(String),
    #[error("writing {path}: {message}")]
    Write { path: PathBuf, message: String },
    #[error("removing {path}: {message}")]
    Remove { path: PathBuf, message: String },
    #[error("the property list: {0}")]
    Plist(String),
    #[error("{command} failed: {message}{hint}")]
    Manager {
        command: String,
        message: String,
        hint: String,
    },
}

/// Which service manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// A systemd user unit (Linux).
    Systemd,
    /// A launchd agent (macOS).
    Launchd,
}

impl Platform {
    /// This system's, if it has one jucode knows.
    pub fn current() -> Option<Platform> {
        if cfg!(target_os = "macos") {
            Some(Platform::Launchd)
        } else if cfg!(target_os = "linux") {
            Some(Platform::Systemd)
        } else {
            None
        }
    }
}

/// What the service runs.
#[derive(Debug, Clone)]
pub struct ServiceSpec {
    /// The daemon binary (absolute).
    pub exe: PathBuf,
    /// The daemon's own flags (`--listen …`, `--home …`, …), passed on as given.
    pub args: Vec<String>,
    /// The installing shell's `PATH`, so agents find the same commands as there.
    pub path: OsString,
    /// Where the daemon writes its log.
    pub log_file: PathBuf,
}

impl ServiceSpec {
    /// The whole command line: the binary, its flags, then `--log-file`.
    pub fn command(&self) -> Result<Vec<String>, ServiceError> {
        let mut out = vec![utf8(self.exe.as_os_str())?];
        out.extend(self.args.iter().cloned());
        out.push("--log-file".into());
        out.push(utf8(self.log_file.as_os_str())?);
        Ok(out)
    }

    pub(crate) fn path_var(&self) -> Result<String, ServiceError> {
        utf8(&self.path)
    }
}

fn utf8(s: &std::ffi::OsStr) -> Result<String, ServiceError> {
    s.to_str()
        .map(str::to_string)
        .ok_or_else(|| ServiceError::NotUtf8(s.to_string_lossy().into_owned()))
}

/// Where the user's service files live.
#[derive(Debug, Clone)]
pub struct Dirs {
    /// The user's home directory (`~/Library/LaunchAgents` is under it).
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME`, else `~/.config` (systemd user units are under it).
    pub config: PathBuf,
}

impl Dirs {
    /// The service file of `platform`.
    pub fn service_file(&self, platform: Platform) -> PathBuf {
        match platform {
            Platform::Systemd => self
                .config
                .join("systemd")
                .join("user")
                .join(systemd::UNIT_NAME),
            Platform::Launchd => self
                .home
                .join("Library")
                .join("LaunchAgents")
                .join(format!("{}.plist", launchd::LABEL)),
        }
    }
}

/// What `install` did.
#[derive(Debug)]
pub struct Installed {
    /// The service file written.
    pub file: PathBuf,
    /// Things the user should know (one line each).
    pub notes: Vec<String>,
}

/// Writes the service file and (re)starts the service, so a second install after a change of
/// `PATH` takes effect at once.
pub fn install(
    platform: Platform,
    spec: &ServiceSpec,
    dirs: &Dirs,
) -> Result<Installed, ServiceError> {
    let file = dirs.service_file(platform);
    let (bytes, mode) = match platform {
        Platform::Systemd => (systemd::unit(spec)?.into_bytes(), 0o644),
        Platform::Launchd => (launchd::plist(spec)?, 0o644),
    };
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| ServiceError::Write {
            path: dir.to_path_buf(),
            message: e.to_string(),
        })?;
    }
    jucode_store::write_atomic(&file, &bytes, mode).map_err(|e| ServiceError::Write {
        path: file.clone(),
        message: e.to_string(),
    })?;
    let mut notes = Vec::new();
    match platform {
        Platform::Systemd => {
            let hint = format!(
                "\n{} was written; start it by hand with `systemctl --user enable --now {}`",
                file.display(),
                systemd::UNIT_NAME
            );
            run("systemctl", &["--user", "daemon-reload"], &hint)?;
            run(
                "systemctl",
                &["--user", "enable", systemd::UNIT_NAME],
                &hint,
            )?;
            run(
                "systemctl",
                &["--user", "restart", systemd::UNIT_NAME],
                &hint,
            )?;
            if !lingering() {
                notes.push(
                    "the service starts when you log in; to start it at boot as well, run \
                     `loginctl enable-linger`"
                        .into(),
                );
            }
        }
        Platform::Launchd => {
            let domain = launchd_domain();
            // A loaded older copy must go first, or bootstrap refuses.
            let _ = output(
                "launchctl",
                &["bootout", &format!("{domain}/{}", launchd::LABEL)],
            );
            let path = utf8(file.as_os_str())?;
            let hint = format!(
                "\n{} was written; load it by hand with `launchctl bootstrap {domain} {path}`",
                file.display()
            );
            run("launchctl", &["bootstrap", &domain, &path], &hint)?;
        }
    }
    Ok(Installed { file, notes })
}

/// Stops the service and removes its file; `None` when none was installed.
pub fn uninstall(platform: Platform, dirs: &Dirs) -> Result<Option<PathBuf>, ServiceError> {
    let file = dirs.service_file(platform);
    if !file.exists() {
        return Ok(None);
    }
    match platform {
        Platform::Systemd => {
            // Stopping fails when it is not running; removing the file is what matters.
            let _ = output(
                "systemctl",
                &["--user", "disable", "--now", systemd::UNIT_NAME],
            );
        }
        Platform::Launchd => {
            let domain = launchd_domain();
            let _ = output(
                "launchctl",
                &["bootout", &format!("{domain}/{}", launchd::LABEL)],
            );
        }
    }
    std::fs::remove_file(&file).map_err(|e| ServiceError::Remove {
        path: file.clone(),
        message: e.to_string(),
    })?;
    if platform == Platform::Systemd {
        let _ = output("systemctl", &["--user", "daemon-reload"]);
    }
    Ok(Some(file))
}

fn launchd_domain() -> String {
    format!("gui/{}", nix::unistd::getuid())
}

/// Whether systemd keeps this user's services running without a login session.
fn lingering() -> bool {
    let uid = nix::unistd::getuid().to_string();
    output(
        "loginctl",
        &["show-user", &uid, "--property=Linger", "--value"],
    )
    .is_ok_and(|out| out.trim() == "yes")
}

/// Runs `program args`; its standard output, or why it failed.
fn output(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!("{} ({})", err.trim(), out.status))
    }
}

fn run(program: &str, args: &[&str], hint: &str) -> Result<(), ServiceError> {
    output(program, args)
        .map(drop)
        .map_err(|message| ServiceError::Manager {
            command: format!("{program} {}", args.join(" ")),
            message,
            hint: hint.to_string(),
        })
}
