//! Building and running the real `jucode-daemon` binary with the fake engine, for the
//! conformance fixtures and the benchmarks.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const LISTEN_MARKER: &str = "jucode daemon listening on http://";
const START_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// The workspace root (xtask lives one level below it).
pub fn workspace_root() -> Result<PathBuf> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .context("xtask has no parent directory")
}

/// The cargo that ran us (so toolchain overrides carry over), else `cargo`.
pub fn cargo_program() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// Where cargo puts build output.
pub fn target_dir() -> Result<PathBuf> {
    Ok(match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => workspace_root()?.join("target"),
    })
}

/// `cargo` in the workspace root.
pub fn cargo() -> Command {
    let mut cmd = Command::new(cargo_program());
    if let Ok(root) = workspace_root() {
        cmd.current_dir(root);
    }
    cmd
}

/// The two binaries a run needs.
#[derive(Debug, Clone)]
pub struct Bins {
    pub daemon: PathBuf,
    pub fake_serve: PathBuf,
}

impl Bins {
    /// The binaries of a profile (`debug` or `release`), which must exist.
    pub fn of_profile(profile: &str) -> Result<Bins> {
        let dir = target_dir()?.join(profile);
        let bins = Bins {
            daemon: dir.join("jucode-daemon"),
            fake_serve: dir.join("jucode-fake-serve"),
        };
        for bin in [&bins.daemon, &bins.fake_serve] {
            if !bin.is_file() {
                bail!(
                    "{} is missing: build it with `cargo build{} -p jucode-daemon -p jucode-testsupport`",
                    bin.display(),
                    if profile == "release" {
                        " --release"
                    } else {
                        ""
                    }
                );
            }
        }
        // The daemon runs the engine from other working directories.
        Ok(Bins {
            daemon: std::fs::canonicalize(&bins.daemon)?,
            fake_serve: std::fs::canonicalize(&bins.fake_serve)?,
        })
    }
}

/// Builds the daemon and the fake engine.
pub async fn build(release: bool) -> Result<()> {
    let mut cmd = cargo();
    cmd.args(["build", "-p", "jucode-daemon", "-p", "jucode-testsupport"]);
    if release {
        cmd.arg("--release");
    }
    let status = cmd.status().await.context("running cargo build")?;
    if !status.success() {
        bail!("cargo build failed ({status})");
    }
    Ok(())
}

/// Where a daemon keeps its state and what it runs with.
#[derive(Debug, Clone)]
pub struct Homes {
    /// `HOME` for the daemon (the user's home: `~` in paths).
    pub home: PathBuf,
    /// `--home`: the jucode home; state lives in its `daemon/` directory.
    pub jucode_home: PathBuf,
    /// The daemon's stderr goes here (appended across restarts).
    pub log: PathBuf,
}

impl Homes {
    /// The layout every bench and load run uses under one temporary directory.
    pub fn under(root: &Path) -> Homes {
        Homes {
            home: root.join("home"),
            jucode_home: root.join("home").join(".jucode"),
            log: root.join("daemon.log"),
        }
    }
}

/// A running daemon process.
pub struct Daemon {
    child: Child,
    pub addr: SocketAddr,
    pub token: String,
    /// From spawn to the "listening on" line.
    pub started_in: Duration,
}

impl Daemon {
    /// Spawns the daemon on a free loopback port and waits for its "listening on" line.
    pub async fn start(bins: &Bins, homes: &Homes) -> Result<Daemon> {
        Self::start_with(bins, homes, &[]).await
    }

    /// [`Daemon::start`] with more command-line flags.
    #[allow(
        clippy::disallowed_methods,
        reason = "a real daemon's start-up is timed in real time"
    )]
    pub async fn start_with(bins: &Bins, homes: &Homes, flags: &[&str]) -> Result<Daemon> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&homes.log)
            .with_context(|| format!("opening {}", homes.log.display()))?;
        let begun = Instant::now();
        let mut child = Command::new(&bins.daemon)
            .args(["--listen", "127.0.0.1:0", "--no-relay", "--home"])
            .arg(&homes.jucode_home)
            .args(flags)
            .env("HOME", &homes.home)
            .env("JUCODE_SERVE_BIN", &bins.fake_serve)
            .env_remove("JUCODE_HOME")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawning {}", bins.daemon.display()))?;
        let stdout = child.stdout.take().context("daemon stdout was not piped")?;
        let mut lines = BufReader::new(stdout).lines();
        let addr = tokio::time::timeout(START_TIMEOUT, async {
            while let Some(line) = lines.next_line().await? {
                if let Some(rest) = line.strip_prefix(LISTEN_MARKER) {
                    return rest
                        .trim()
                        .parse::<SocketAddr>()
                        .with_context(|| format!("bad listen line {line:?}"));
                }
            }
            bail!(
                "the daemon exited before listening (see {})",
                homes.log.display()
            )
        })
        .await
        .context("the daemon did not start listening in time")??;
        let started_in = begun.elapsed();
        // Keep draining stdout so the daemon never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let token_path = homes.jucode_home.join("daemon").join("token");
        let token = std::fs::read_to_string(&token_path)
            .with_context(|| format!("reading {}", token_path.display()))?
            .trim()
            .to_string();
        Ok(Daemon {
            child,
            addr,
            token,
            started_in,
        })
    }

    /// SIGTERM, then waits for the daemon to exit (it stops its engines first). Only a daemon
    /// that does not exit in time is an error; the caller judges the exit status.
    pub async fn stop(&mut self) -> Result<ExitStatus> {
        if let Some(pid) = self.child.id().and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        match tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await {
            Ok(status) => status.context("waiting for the daemon"),
            Err(_) => {
                self.kill9().await?;
                bail!("the daemon did not exit within {STOP_TIMEOUT:?} of SIGTERM")
            }
        }
    }

    /// The daemon's process id, while it runs (the timers bench reads `/proc/<pid>`).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// SIGKILL: no shutdown at all, as a crash or power cut would leave things.
    pub async fn kill9(&mut self) -> Result<()> {
        self.child.start_kill().context("killing the daemon")?;
        self.child.wait().await.context("waiting for the daemon")?;
        Ok(())
    }
}
