//! The real `jucode-relay` server binary on loopback, for end-to-end remote-access tests.

use std::net::SocketAddr;
use std::process::ExitStatus;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::process::{Child, Command};

use crate::bins::build_bin;
use crate::process::{Listening, Logs, snapshot, spawn_listening};

/// A running `jucode-relay` child process.
pub struct RelayServer {
    pub addr: SocketAddr,
    child: Child,
    logs: Logs,
}

impl RelayServer {
    /// Starts the relay on `listen` (`127.0.0.1:0` for a free port, or an address a killed
    /// relay used) with more command-line arguments, and waits for its "listening on" line.
    /// The binary is built first if it is missing (the daemon's tests do not build it).
    pub async fn start(listen: &str, args: &[&str]) -> Result<RelayServer> {
        let bin = build_bin("jucode-relay", "jucode-relay")?;
        let mut command = Command::new(&bin);
        command
            .arg("--listen")
            .arg(listen)
            .args(args)
            .env_remove("RUST_LOG");
        let Listening { child, addr, logs } =
            spawn_listening(command, &format!("relay {}", bin.display())).await?;
        Ok(RelayServer { addr, child, logs })
    }

    /// `ws://<addr>/relay/v1`, what a daemon's `--relay` takes.
    pub fn url(&self) -> String {
        format!("ws://{}/relay/v1", self.addr)
    }

    /// SIGKILL and wait until the process is gone (its port free again).
    pub async fn kill_and_wait(&mut self) -> Result<ExitStatus> {
        // Fails only if the child is already gone, which is what the caller wants anyway.
        let _ = self.child.start_kill();
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .context("the killed relay did not go away within 10 s")?
            .context("wait for the relay")
    }

    /// Every line the relay printed so far, stdout and stderr interleaved as read.
    pub fn logs(&self) -> Vec<String> {
        snapshot(&self.logs)
    }
}
