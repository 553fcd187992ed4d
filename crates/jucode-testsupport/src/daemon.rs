//! The one daemon launcher: the real `jucode-daemon` binary on a free loopback port.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;
use tokio::process::{Child, Command};

use crate::bins::{daemon_bin, fake_serve_bin};
use crate::client::Client;
use crate::process::{Listening, Logs, snapshot, spawn_listening};

const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Query-string characters left as they are (RFC 3986 unreserved).
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Which engine serves the daemon's default `jucode` sessions.
#[derive(Debug, Clone)]
pub enum Engine {
    /// The scripted `jucode-fake-serve` of this crate (the default).
    FakeServe,
    /// Another serve-v2 program, as `JUCODE_SERVE_BIN`.
    ServeBin(PathBuf),
    /// The daemon's built-in engine (no `JUCODE_SERVE_BIN`); give it a model with
    /// [`DaemonBuilder::config`].
    Builtin,
}

/// How to start a [`Daemon`]: `Daemon::builder(home)`, options, then [`DaemonBuilder::start`].
///
/// The daemon always listens on `127.0.0.1:0` with `--home <home>`, and `HOME` is the home's
/// parent directory, so nothing a test does leaves its temporary directory.
#[derive(Debug, Clone)]
pub struct DaemonBuilder {
    home: PathBuf,
    engine: Engine,
    config: Option<Value>,
    args: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    relay: Option<String>,
    bin: Option<PathBuf>,
}

impl DaemonBuilder {
    /// The engine behind `jucode` sessions.
    pub fn engine(mut self, engine: Engine) -> Self {
        self.engine = engine;
        self
    }

    /// Shorthand for `engine(Engine::ServeBin(program))`: the daemon's `--serve-bin`.
    pub fn serve_bin(self, program: impl Into<PathBuf>) -> Self {
        self.engine(Engine::ServeBin(program.into()))
    }

    /// Writes `config` as `<home>/config.json` before the start.
    pub fn config(mut self, config: &Value) -> Self {
        self.config = Some(config.clone());
        self
    }

    /// One more command-line argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// More command-line arguments (e.g. `--web <dir>`).
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for the daemon.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), Some(value.into())));
        self
    }

    /// Removes an environment variable from the daemon's environment.
    pub fn env_remove(mut self, key: impl Into<OsString>) -> Self {
        self.env.push((key.into(), None));
        self
    }

    /// Connects to the relay at `url` (`--relay <url>`) instead of starting with `--no-relay`.
    pub fn relay(mut self, url: impl Into<String>) -> Self {
        self.relay = Some(url.into());
        self
    }

    /// Runs this daemon binary instead of the built debug one (e.g. a release build).
    pub fn bin(mut self, program: impl Into<PathBuf>) -> Self {
        self.bin = Some(program.into());
        self
    }

    /// Spawns the daemon and waits (30 s at most) for its "listening on http://" line. Its
    /// stdout and stderr are collected into [`Daemon::logs`].
    pub async fn start(self) -> Result<Daemon> {
        Daemon::spawn(self).await
    }
}

/// A running `jucode-daemon` child process with its own home directory.
pub struct Daemon {
    pub addr: SocketAddr,
    pub home: PathBuf,
    child: Child,
    logs: Logs,
}

impl Daemon {
    /// Options before starting; see [`DaemonBuilder`].
    pub fn builder(home: &Path) -> DaemonBuilder {
        DaemonBuilder {
            home: home.to_path_buf(),
            engine: Engine::FakeServe,
            config: None,
            args: Vec::new(),
            env: Vec::new(),
            relay: None,
            bin: None,
        }
    }

    /// The daemon with the fake serve engine and no relay (`Daemon::builder(home).start()`).
    pub async fn start(home: &Path) -> Result<Daemon> {
        Daemon::builder(home).start().await
    }

    /// As [`Daemon::start`], with more command-line arguments (e.g. `--web <dir>`).
    pub async fn start_with(home: &Path, extra_args: &[&str]) -> Result<Daemon> {
        Daemon::builder(home).args(extra_args).start().await
    }

    /// The daemon with its built-in jucode engine, after writing `config` as
    /// `<home>/config.json` (e.g. [`crate::fake_model::FakeModel::config`]).
    pub async fn start_builtin(home: &Path, config: &Value) -> Result<Daemon> {
        Daemon::builder(home)
            .engine(Engine::Builtin)
            .config(config)
            .start()
            .await
    }

    async fn spawn(options: DaemonBuilder) -> Result<Daemon> {
        let DaemonBuilder {
            home,
            engine,
            config,
            args,
            env,
            relay,
            bin,
        } = options;
        let daemon = match bin {
            Some(bin) => bin,
            None => daemon_bin()?,
        };
        std::fs::create_dir_all(&home).with_context(|| format!("create {}", home.display()))?;
        if let Some(config) = config {
            let path = home.join("config.json");
            std::fs::write(&path, serde_json::to_vec_pretty(&config)?)
                .with_context(|| format!("write {}", path.display()))?;
        }
        let mut command = Command::new(&daemon);
        match engine {
            Engine::FakeServe => command.env("JUCODE_SERVE_BIN", fake_serve_bin()?),
            Engine::ServeBin(program) => command.env("JUCODE_SERVE_BIN", program),
            Engine::Builtin => command.env_remove("JUCODE_SERVE_BIN"),
        };
        command
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--home")
            .arg(&home);
        match &relay {
            Some(url) => command.arg("--relay").arg(url),
            None => command.arg("--no-relay"),
        };
        command
            .args(&args)
            // The user's home is the temporary directory around the jucode home, so `~` and
            // new projects stay inside the test's directory.
            .env("HOME", home.parent().unwrap_or(&home))
            .env_remove("RUST_LOG");
        for (key, value) in &env {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        let Listening { child, addr, logs } =
            spawn_listening(command, &format!("daemon {}", daemon.display())).await?;
        Ok(Daemon {
            addr,
            home,
            child,
            logs,
        })
    }

    /// The daemon's client token, `<home>/daemon/token`.
    pub fn token(&self) -> Result<String> {
        let path = self.home.join("daemon").join("token");
        let token =
            std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
        Ok(token.trim().to_string())
    }

    /// `ws://<addr>/?token=<token>`, the token percent-encoded.
    /// Pairs a device through `desk` (a local client: `pair_start`, then `POST /api/pair`) and
    /// connects it; returns the device's client, greeted.
    pub async fn paired_device(&self, desk: &mut Client) -> Result<Client> {
        let pairing = desk
            .request(serde_json::json!({"op": "pair_start"}))
            .await?;
        let body = serde_json::json!({"code": pairing["code"], "name": "phone"}).to_string();
        let paired = crate::http(self.addr, "POST", "/api/pair", Some(body.as_bytes())).await?;
        anyhow::ensure!(paired.status == 200, "pairing answered {}", paired.status);
        let token = paired.json()?["token"]
            .as_str()
            .context("the pairing answer has no token")?
            .to_string();
        Client::connect_and_greet(&self.url(&token)).await
    }

    pub fn url(&self, token: &str) -> String {
        format!(
            "ws://{}/?token={}",
            self.addr,
            utf8_percent_encode(token, QUERY_VALUE)
        )
    }

    /// Connects with the daemon's token and reads the connect batch.
    pub async fn client(&self) -> Result<Client> {
        let token = self.token()?;
        Client::connect_and_greet(&self.url(&token)).await
    }

    /// SIGKILL, no cleanup: for crash-recovery tests.
    pub fn kill9(&mut self) {
        // Fails only if the child is already gone, which is what the caller wants anyway.
        let _ = self.child.start_kill();
    }

    /// SIGKILL and wait until the process is gone (its lock on the state directory with it).
    pub async fn kill9_and_wait(&mut self) -> Result<ExitStatus> {
        self.kill9();
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .context("the killed daemon did not go away within 10 s")?
            .context("wait for the daemon")
    }

    /// SIGTERM, then waits up to 10 s. A daemon that does not exit by then is killed and
    /// the call fails.
    pub async fn stop(&mut self) -> Result<ExitStatus> {
        if let Some(pid) = self.child.id() {
            let pid = i32::try_from(pid).context("daemon pid out of range")?;
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            )
            .context("send SIGTERM to the daemon")?;
        }
        match tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await {
            Ok(status) => status.context("wait for the daemon"),
            Err(_) => {
                let _ = self.child.kill().await;
                bail!(
                    "daemon did not exit within 10 s of SIGTERM and was killed; output:\n{}",
                    self.logs().join("\n")
                )
            }
        }
    }

    /// Waits up to `within` for the daemon to exit on its own; an error if it is still running.
    pub async fn exited_within(&mut self, within: Duration) -> Result<ExitStatus> {
        tokio::time::timeout(within, self.child.wait())
            .await
            .with_context(|| format!("the daemon was still running after {within:?}"))?
            .context("wait for the daemon")
    }

    /// Whether the daemon process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Every line the daemon printed so far, stdout and stderr interleaved as read.
    pub fn logs(&self) -> Vec<String> {
        snapshot(&self.logs)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
