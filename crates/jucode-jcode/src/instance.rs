//! The private jcode process tree: `jcode api-bridge` started with the seat's
//! own home (never the operator's bridge), and its PID-exact teardown.
//!
//! Each launch records its identity nonce and host PID in the home. Stop reads
//! the PIDs the home records (the bridge, the TUI, the daemon in
//! `servers.json`), sends SIGTERM, then SIGKILL to the exact survivors, and
//! fails if any survives. Nothing is ever signalled by name.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use jucode_clock::{Clock as _, SystemClock};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use tokio::process::Child;

use crate::home::{PrivateHome, write_atomic};
use crate::{Error, Result};

/// The variable carrying the launch nonce into the private tree.
pub const NONCE_VAR: &str = "JUCODE_JCODE_LAUNCH";
/// How long the bridge may take to accept a connection.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long SIGTERM gets before the exact-PID SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_secs(3);
/// How long SIGKILL gets before a survivor fails the stop.
pub const KILL_GRACE: Duration = Duration::from_secs(3);

/// `<home>/cotal-launch.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct LaunchRecord {
    pub nonce: String,
    pub host_pid: u32,
    #[serde(default)]
    pub bridge_pid: Option<u32>,
    #[serde(default)]
    pub tui_pid: Option<u32>,
    /// The jcode build this launch runs (`jcode version --json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jcode_version: Option<crate::version::JcodeVersion>,
}

impl LaunchRecord {
    pub fn read(home: &PrivateHome) -> Result<Option<LaunchRecord>> {
        let p = home.launch_record();
        match std::fs::read(&p) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| Error::PrivateState(format!("{}: {e}", p.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&p, e)),
        }
    }
    pub fn write(&self, home: &PrivateHome) -> Result<()> {
        let b = serde_json::to_vec(self).map_err(|e| Error::PrivateState(e.to_string()))?;
        write_atomic(&home.launch_record(), &b)
    }
}

/// Whether `pid` is a live process (a zombie counts as gone).
pub fn alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 || kill(Pid::from_raw(raw), None).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(true),
        Err(_) => true,
    }
}

/// Whether `pid` carries this home's identity (guards against PID reuse).
pub fn belongs(pid: u32, nonce: &str, root: &Path) -> bool {
    match read_environ(pid) {
        Ok(env) => {
            let want_nonce = format!("{NONCE_VAR}={nonce}");
            let want_home = format!("JCODE_HOME={}", root.display());
            env.split(|b| *b == 0)
                .any(|kv| kv == want_nonce.as_bytes() || kv == want_home.as_bytes())
        }
        // No /proc (macOS, BSD): the record itself is the identity.
        Err(_) => !Path::new("/proc/self").exists(),
    }
}

/// A live process's environment. A read that races the process's `exec` (the fake daemon is
/// `sh -c "exec …"`) can find the old image's memory already gone and return nothing; a live
/// process started with our variables never has an empty environment, so an empty read is
/// tried again for a short while.
fn read_environ(pid: u32) -> std::io::Result<Vec<u8>> {
    let path = format!("/proc/{pid}/environ");
    let mut env = std::fs::read(&path)?;
    for _ in 0..20 {
        if !env.is_empty() || !alive(pid) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
        env = std::fs::read(&path)?;
    }
    Ok(env)
}

/// Daemon PIDs the private home's `servers.json` records (none when it cannot be read).
pub fn recorded_daemons(home: &PrivateHome) -> Vec<u32> {
    parse_daemons(home).unwrap_or_default()
}

fn parse_daemons(home: &PrivateHome) -> Result<Vec<u32>> {
    let path = home.root.join("servers.json");
    let raw = match std::fs::read(&path) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::Teardown(format!("{}: {e}", path.display()))),
    };
    match serde_json::from_slice(&raw) {
        Ok(serde_json::Value::Object(m)) => Ok(m
            .values()
            .filter_map(|e| e["pid"].as_u64())
            .filter_map(|p| u32::try_from(p).ok())
            .collect()),
        Ok(_) => Err(Error::Teardown(format!(
            "{} is not an object",
            path.display()
        ))),
        Err(e) => Err(Error::Teardown(format!("{}: {e}", path.display()))),
    }
}

/// The daemon PIDs a stop must prove gone. A `servers.json` that exists but
/// cannot be read (tried again briefly: jcode may be rewriting it) leaves the
/// daemon unknown, so the stop cannot be proven and fails.
pub async fn provable_daemons(home: &PrivateHome) -> Result<Vec<u32>> {
    let mut last = None;
    for _ in 0..10 {
        match parse_daemons(home) {
            Ok(p) => return Ok(p),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(last.unwrap_or_else(|| Error::Teardown("servers.json unreadable".into())))
}

/// SIGTERM, wait, SIGKILL the exact survivors, wait; a survivor fails the stop.
pub async fn stop_pids(pids: &[u32]) -> Result<()> {
    let live: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    for p in &live {
        let _ = kill(Pid::from_raw(*p as i32), Signal::SIGTERM);
    }
    if wait_gone(&live, TERM_GRACE).await {
        return Ok(());
    }
    let survivors: Vec<u32> = live.iter().copied().filter(|p| alive(*p)).collect();
    for p in &survivors {
        tracing::warn!(pid = p, "private jcode process ignored SIGTERM; SIGKILL");
        let _ = kill(Pid::from_raw(*p as i32), Signal::SIGKILL);
    }
    if wait_gone(&survivors, KILL_GRACE).await {
        return Ok(());
    }
    let left: Vec<String> = survivors
        .iter()
        .filter(|p| alive(**p))
        .map(u32::to_string)
        .collect();
    Err(Error::Teardown(format!(
        "private jcode process(es) {} survived SIGKILL",
        left.join(", ")
    )))
}

async fn wait_gone(pids: &[u32], limit: Duration) -> bool {
    let clock = SystemClock::new();
    loop {
        if pids.iter().all(|p| !alive(*p)) {
            return true;
        }
        if clock.elapsed() >= limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Before a launch: stop the tree a dead seat left behind; refuse while its host lives.
pub async fn stop_stale(home: &PrivateHome) -> Result<()> {
    let Some(rec) = LaunchRecord::read(home)? else {
        return Ok(());
    };
    if rec.host_pid != std::process::id() && alive(rec.host_pid) {
        return Err(Error::StartupFailed(format!(
            "the seat's previous host (pid {}) still serves this private home",
            rec.host_pid
        )));
    }
    let mut pids: Vec<u32> = provable_daemons(home).await?;
    pids.extend(rec.bridge_pid);
    pids.extend(rec.tui_pid);
    pids.retain(|p| *p != std::process::id() && alive(*p) && belongs(*p, &rec.nonce, &home.root));
    if !pids.is_empty() {
        tracing::info!(?pids, "stopping the private jcode tree a dead seat left");
    }
    stop_pids(&pids).await
}

/// What a launch needs.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    pub binary: PathBuf,
    pub home: PrivateHome,
    pub working_dir: PathBuf,
    /// The agent environment (no `COTAL_*`).
    pub env: Vec<(String, String)>,
    /// What `jcode version --json` reported at the seat's launch.
    pub version: Option<crate::version::JcodeVersion>,
}

/// A running private bridge (and, through it, the daemon).
pub struct Instance {
    pub home: PrivateHome,
    pub nonce: String,
    child: Child,
    pub bridge_pid: u32,
}

impl Instance {
    /// Start `jcode api-bridge` on the private home and wait until it accepts.
    pub async fn launch(spec: &LaunchSpec) -> Result<Instance> {
        let mut never: jucode_clock::Sleep = Box::pin(std::future::pending());
        Instance::launch_until(spec, &mut never).await
    }

    /// [`Instance::launch`], cut off when `cancel` completes: the launch's
    /// tree is then stopped, awaited and proven gone before
    /// [`Error::WindowExpired`] returns (a failed proof returns its error).
    pub async fn launch_until(
        spec: &LaunchSpec,
        cancel: &mut jucode_clock::Sleep,
    ) -> Result<Instance> {
        let home = &spec.home;
        stop_stale(home).await?;
        home.reclaim_alias()?;
        let nonce = crate::home::nonce()?;
        let mut rec = LaunchRecord {
            nonce: nonce.clone(),
            host_pid: std::process::id(),
            jcode_version: spec.version.clone(),
            ..Default::default()
        };
        rec.write(home)?;
        let socket = home.api_socket();
        let ts = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
        let err_path = home.root.join("logs").join(format!("bridge-{ts}.log"));
        let err_file = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .open(&err_path)
                .map_err(|e| Error::io(&err_path, e))?
        };
        let mut cmd = tokio::process::Command::new(&spec.binary);
        cmd.arg("--no-update")
            .arg("api-bridge")
            .arg("--api-socket")
            .arg(&socket)
            .current_dir(&spec.working_dir)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .env("JCODE_HOME", &home.root)
            .env("JCODE_RUNTIME_DIR", &home.runtime_dir)
            .env("JCODE_API_SOCKET", &socket)
            .env("JCODE_SOCKET", home.daemon_socket())
            .env("JCODE_NO_AUTO_UPDATE", "1")
            .env("JCODE_DISABLE_CLAUDE_MCP", "1")
            .env("JCODE_NO_TELEMETRY", "1")
            .env(NONCE_VAR, &nonce)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(err_file));
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                home.drop_alias();
                return Err(if e.kind() == std::io::ErrorKind::NotFound {
                    Error::NotFound(spec.binary.display().to_string())
                } else {
                    Error::StartupFailed(format!("{}: {e}", spec.binary.display()))
                });
            }
        };
        let bridge_pid = child.id().unwrap_or_default();
        rec.bridge_pid = Some(bridge_pid);
        rec.write(home)?;
        let clock = SystemClock::new();
        loop {
            if tokio::net::UnixStream::connect(&socket).await.is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                let tail = std::fs::read_to_string(&err_path).unwrap_or_default();
                let tail: String = tail
                    .chars()
                    .rev()
                    .take(2000)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                // The bridge may have started a daemon before it died.
                let inst = Instance {
                    home: home.clone(),
                    nonce,
                    child,
                    bridge_pid,
                };
                inst.stop().await?;
                home.drop_alias();
                return Err(Error::StartupFailed(format!(
                    "bridge exited {status}: {tail}"
                )));
            }
            if clock.elapsed() >= STARTUP_TIMEOUT {
                let inst = Instance {
                    home: home.clone(),
                    nonce,
                    child,
                    bridge_pid,
                };
                inst.stop().await?;
                return Err(Error::StartupTimeout);
            }
            tokio::select! {
                _ = &mut *cancel => {
                    let inst = Instance {
                        home: home.clone(),
                        nonce,
                        child,
                        bridge_pid,
                    };
                    inst.stop().await?;
                    home.drop_alias();
                    return Err(Error::WindowExpired);
                }
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        Ok(Instance {
            home: home.clone(),
            nonce,
            child,
            bridge_pid,
        })
    }

    /// Record the TUI's PID so a later launch can stop it too.
    pub fn record_tui(&self, pid: u32) -> Result<()> {
        let mut rec = LaunchRecord::read(&self.home)?.unwrap_or_default();
        rec.tui_pid = Some(pid);
        rec.write(&self.home)
    }

    /// Prove the private tree is gone.
    pub async fn stop(mut self) -> Result<()> {
        let mut pids = vec![self.bridge_pid];
        // Unknown daemons cannot be proven gone; the bridge is still stopped.
        let daemons = provable_daemons(&self.home).await;
        pids.extend(
            daemons
                .as_ref()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .copied()
                .filter(|p| *p != std::process::id() && belongs(*p, &self.nonce, &self.home.root)),
        );
        if let Ok(Some(rec)) = LaunchRecord::read(&self.home) {
            pids.extend(rec.tui_pid);
        }
        // Reap the bridge as it exits so it does not linger as our zombie.
        let reap = async {
            let _ = self.child.wait().await;
        };
        let (res, _) = tokio::join!(stop_pids(&pids), async {
            let _ = tokio::time::timeout(TERM_GRACE + KILL_GRACE, reap).await;
        });
        res?;
        daemons.map(drop)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn stop_escalates_to_sigkill_for_a_process_ignoring_sigterm() {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg("trap '' TERM; echo ready; while :; do sleep 1 </dev/null >/dev/null 2>&1; done")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        // The trap is in place once the shell says so.
        let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).await.unwrap();
        assert_eq!(line.trim(), "ready");
        let waiter = tokio::spawn(async move { child.wait().await });
        stop_pids(&[pid]).await.unwrap();
        let status = waiter.await.unwrap().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9));
    }

    #[test]
    fn zombies_and_missing_pids_count_as_gone() {
        assert!(!alive(0));
        assert!(!alive(u32::MAX));
        assert!(alive(std::process::id()));
    }
}
