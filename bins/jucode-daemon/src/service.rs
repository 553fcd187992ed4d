//! `install` / `uninstall` (the login service, [`jucode_service`]) and `--log-file`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};
use jucode_service::log::{LOG_KEEP, LOG_MAX_BYTES, RotatingLog};
use jucode_service::{Dirs, Platform, ServiceSpec};

use crate::{Args, DEFAULT_RELAY};

fn user_home() -> Result<PathBuf> {
    Ok(PathBuf::from(
        std::env::var_os("HOME").context("HOME is not set")?,
    ))
}

fn dirs() -> Result<Dirs> {
    let home = user_home()?;
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| home.join(".config"));
    Ok(Dirs { home, config })
}

fn platform() -> Result<Platform> {
    Platform::current().ok_or(jucode_service::ServiceError::Unsupported.into())
}

fn absolute(path: &Path) -> Result<String> {
    let abs = std::path::absolute(path).with_context(|| format!("resolving {}", path.display()))?;
    abs.to_str()
        .map(str::to_string)
        .with_context(|| format!("{} is not valid UTF-8", abs.display()))
}

/// The daemon flags the service runs with: the ones this command was given.
fn daemon_flags(args: &Args) -> Result<Vec<String>> {
    let mut flags = vec!["--listen".to_string(), args.listen.to_string()];
    if let Some(home) = &args.home {
        flags.extend(["--home".into(), absolute(home)?]);
    }
    if let Some(web) = &args.web {
        flags.extend(["--web".into(), absolute(web)?]);
    }
    if args.no_relay {
        flags.push("--no-relay".into());
    } else if args.relay != DEFAULT_RELAY {
        flags.extend(["--relay".into(), args.relay.clone()]);
    }
    Ok(flags)
}

/// The state directory's log: `<jucode home>/daemon/daemon.log`.
fn log_path(args: &Args) -> Result<PathBuf> {
    let home = match &args.home {
        Some(home) => std::path::absolute(home)?,
        None => user_home()?.join(".jucode"),
    };
    Ok(home.join("daemon").join("daemon.log"))
}

pub(crate) fn install(args: &Args) -> Result<()> {
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .context("finding this program's path")?;
    let spec = ServiceSpec {
        exe,
        args: daemon_flags(args)?,
        path: std::env::var_os("PATH").unwrap_or_default(),
        log_file: log_path(args)?,
    };
    let installed = jucode_service::install(platform()?, &spec, &dirs()?)?;
    println!("installed {}", installed.file.display());
    println!("the daemon logs to {}", spec.log_file.display());
    for note in installed.notes {
        println!("note: {note}");
    }
    Ok(())
}

pub(crate) fn uninstall() -> Result<()> {
    match jucode_service::uninstall(platform()?, &dirs()?)? {
        Some(file) => println!("removed {}", file.display()),
        None => println!("no jucode service is installed"),
    }
    Ok(())
}

/// The log writer for `--log-file`: rotated by size, and the place panics are written too.
pub(crate) fn log_file(path: &Path) -> Result<Mutex<RotatingLog>> {
    let log = RotatingLog::open(path, LOG_MAX_BYTES, LOG_KEEP)
        .with_context(|| format!("opening the log file {}", path.display()))?;
    Ok(Mutex::new(log))
}
