//! ACP `terminal/*`: commands an agent asks the daemon to run for it.
//!
//! Each terminal is one process (the agent's `command` with its `args`, no shell) in its own
//! process group, with a working directory inside the session's directory. Its stdout and stderr
//! go into one buffer that keeps the last `outputByteLimit` bytes, cut on a character boundary.
//! `terminal/kill`, `terminal/release` and the session's end signal the whole group, so nothing
//! an agent started outlives the session.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::sync::{mpsc, watch};

use crate::child::{Input, inside};

/// The output kept when the agent names no limit, and the most it may ask for.
const DEFAULT_LIMIT: usize = 1024 * 1024;
const MAX_LIMIT: usize = 16 * 1024 * 1024;
/// How long the output readers may run on after the process exited (a grandchild may hold the
/// pipes open); a deadlock guard only.
const DRAIN: Duration = Duration::from_secs(2);

/// How a terminal's process ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Exit {
    pub code: Option<i32>,
    pub signal: Option<String>,
}

impl Exit {
    fn to_json(&self) -> Value {
        json!({"exitCode": self.code, "signal": self.signal})
    }
}

/// The retained tail of a terminal's output.
#[derive(Debug, Default)]
struct Captured {
    bytes: Vec<u8>,
    limit: usize,
    truncated: bool,
}

impl Captured {
    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        if self.bytes.len() <= self.limit {
            return;
        }
        let mut cut = self.bytes.len() - self.limit;
        // Never start inside a UTF-8 sequence: skip its continuation bytes too.
        while cut < self.bytes.len() && (self.bytes[cut] & 0xC0) == 0x80 {
            cut += 1;
        }
        self.bytes.drain(..cut);
        self.truncated = true;
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

struct Terminal {
    pid: Option<u32>,
    output: Arc<Mutex<Captured>>,
    exit: watch::Receiver<Option<Exit>>,
}

impl Terminal {
    fn exited(&self) -> Option<Exit> {
        self.exit.borrow().clone()
    }

    /// Signals the whole group, even after its leader exited: what it left running in the
    /// background goes too. The kernel does not reuse a pid while its group has members.
    fn kill(&self) {
        signal_group(self.pid, nix::sys::signal::Signal::SIGKILL);
    }
}

/// The terminals of one ACP session.
pub(crate) struct Terminals {
    roots: Vec<PathBuf>,
    next: u64,
    open: HashMap<String, Terminal>,
    /// `terminal/wait_for_exit` requests not answered yet: terminal id, request id, and the
    /// terminal's end.
    waiting: Vec<(String, Value, watch::Receiver<Option<Exit>>)>,
    /// Wakes the adapter when a terminal's process ends.
    wake: mpsc::UnboundedSender<Input>,
}

/// What a request is answered with: a result, or a JSON-RPC error message.
pub(crate) type Reply = Result<Value, String>;

impl Terminals {
    pub(crate) fn new(roots: Vec<PathBuf>, wake: mpsc::UnboundedSender<Input>) -> Terminals {
        Terminals {
            roots,
            next: 0,
            open: HashMap::new(),
            waiting: Vec::new(),
            wake,
        }
    }

    /// Handles a `terminal/*` request. `None` means the answer comes later (a process still
    /// running for `wait_for_exit`): [`Terminals::exited`] hands it over.
    pub(crate) fn request(&mut self, method: &str, id: &Value, params: &Value) -> Option<Reply> {
        let result = match method {
            "terminal/create" => self.create(params),
            "terminal/output" => self.terminal(params).map(|t| {
                let captured = t.output.lock().map(|c| (c.text(), c.truncated));
                let (output, truncated) = captured.unwrap_or_default();
                let mut result = json!({"output": output, "truncated": truncated});
                if let Some(exit) = t.exited() {
                    result["exitStatus"] = exit.to_json();
                }
                result
            }),
            "terminal/wait_for_exit" => match self.terminal(params) {
                Ok(t) => match t.exited() {
                    Some(exit) => Ok(exit.to_json()),
                    None => {
                        let exit = t.exit.clone();
                        let name = terminal_id(params).unwrap_or_default().to_string();
                        self.waiting.push((name, id.clone(), exit));
                        return None;
                    }
                },
                Err(e) => Err(e),
            },
            "terminal/kill" => self.terminal(params).map(|t| {
                t.kill();
                json!({})
            }),
            "terminal/release" => match terminal_id(params) {
                Some(name) => match self.open.remove(name) {
                    Some(t) => {
                        t.kill();
                        Ok(json!({}))
                    }
                    None => Err(format!("no terminal {name}")),
                },
                None => Err("terminalId is required".into()),
            },
            other => Err(format!("{other} is not supported by this client")),
        };
        Some(result)
    }

    /// A terminal's process ended: the `wait_for_exit` requests it answers (released
    /// terminals included: a waiter still learns how the process ended).
    pub(crate) fn exited(&mut self, name: &str) -> Vec<(Value, Value)> {
        let waiting = std::mem::take(&mut self.waiting);
        let mut done = Vec::new();
        for (t, id, exit) in waiting {
            match (t == name, exit.borrow().clone()) {
                (true, Some(exit)) => done.push((id, exit.to_json())),
                _ => self.waiting.push((t, id, exit.clone())),
            }
        }
        done
    }

    /// The current output of a terminal the agent still holds (for a tool card that shows it).
    pub(crate) fn output_of(&self, name: &str) -> Option<String> {
        let t = self.open.get(name)?;
        t.output.lock().ok().map(|c| c.text())
    }

    fn terminal(&self, params: &Value) -> Result<&Terminal, String> {
        let name = terminal_id(params).ok_or("terminalId is required")?;
        self.open
            .get(name)
            .ok_or_else(|| format!("no terminal {name}"))
    }

    fn create(&mut self, params: &Value) -> Reply {
        let command = params
            .get("command")
            .and_then(Value::as_str)
            .filter(|c| !c.trim().is_empty())
            .ok_or("command is required")?;
        let args: Vec<String> = match params.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|a| a.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .ok_or("args must be a list of strings")?,
            Some(_) => return Err("args must be a list of strings".into()),
        };
        let cwd = match params.get("cwd").and_then(Value::as_str) {
            Some(path) => inside(Path::new(path), &self.roots)
                .filter(|p| p.is_dir())
                .ok_or_else(|| {
                    format!("cwd {path} is not a directory inside the session's directory")
                })?,
            None => self
                .roots
                .first()
                .cloned()
                .ok_or("the session has no directory")?,
        };
        let env = env_of(params)?;
        let limit = match params.get("outputByteLimit") {
            None | Some(Value::Null) => DEFAULT_LIMIT,
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or("outputByteLimit must be a non-negative integer")?
                .min(MAX_LIMIT),
        };
        let mut cmd = Command::new(command);
        cmd.args(&args)
            .current_dir(&cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        for (name, value) in env {
            cmd.env(name, value);
        }
        let mut child = cmd.spawn().map_err(|e| format!("{command}: {e}"))?;
        self.next += 1;
        let name = format!("term-{}", self.next);
        let output = Arc::new(Mutex::new(Captured {
            limit,
            ..Captured::default()
        }));
        let (exit_tx, exit_rx) = watch::channel(None);
        let readers: Vec<_> = [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn AsyncRead + Send + Unpin>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn AsyncRead + Send + Unpin>),
        ]
        .into_iter()
        .flatten()
        .map(|stream| tokio::spawn(capture(stream, output.clone())))
        .collect();
        let pid = child.id();
        let wake = self.wake.clone();
        let woken = name.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            for reader in readers {
                let _ = tokio::time::timeout(DRAIN, reader).await;
            }
            let exit = match status {
                Ok(status) => {
                    use std::os::unix::process::ExitStatusExt;
                    Exit {
                        code: status.code(),
                        signal: status.signal().map(signal_name),
                    }
                }
                Err(e) => {
                    tracing::warn!("waiting for an ACP terminal failed: {e}");
                    Exit {
                        code: None,
                        signal: None,
                    }
                }
            };
            let _ = exit_tx.send(Some(exit));
            let _ = wake.send(Input::Local(json!({ "terminal_exited": woken })));
        });
        self.open.insert(
            name.clone(),
            Terminal {
                pid,
                output,
                exit: exit_rx,
            },
        );
        Ok(json!({ "terminalId": name }))
    }
}

impl Drop for Terminals {
    /// The session ended: whatever its terminals still run is stopped.
    fn drop(&mut self) {
        for t in self.open.values() {
            t.kill();
        }
    }
}

async fn capture(mut stream: Box<dyn AsyncRead + Send + Unpin>, output: Arc<Mutex<Captured>>) {
    let mut buf = vec![0u8; 8192];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if let Ok(mut out) = output.lock() {
                    out.push(&buf[..n]);
                }
            }
        }
    }
}

fn terminal_id(params: &Value) -> Option<&str> {
    params.get("terminalId").and_then(Value::as_str)
}

/// `env: [{name, value}]`, with the same name rules as a session's `options.env`.
fn env_of(params: &Value) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let list = match params.get("env") {
        None | Some(Value::Null) => return Ok(out),
        Some(Value::Array(list)) => list,
        Some(_) => return Err("env must be a list of {name, value}".into()),
    };
    for entry in list {
        let (Some(name), Some(value)) = (
            entry.get("name").and_then(Value::as_str),
            entry.get("value").and_then(Value::as_str),
        ) else {
            return Err("env must be a list of {name, value}".into());
        };
        let plain =
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !plain || name.starts_with("LD_") || name.starts_with("DYLD_") {
            return Err(format!("env: {name} is not an allowed variable name"));
        }
        out.push((name.to_string(), value.to_string()));
    }
    Ok(out)
}

fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| signal.to_string())
}

fn signal_group(pid: Option<u32>, signal: nix::sys::signal::Signal) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), signal);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn output_is_cut_from_the_start_on_a_char_boundary() {
        let mut c = Captured {
            limit: 11,
            ..Captured::default()
        };
        c.push("ab\nh".as_bytes());
        assert!(!c.truncated);
        c.push("éllo wörld".as_bytes());
        // 16 bytes, 5 too many: the cut lands inside `é`, which goes too.
        assert_eq!(c.text(), "llo wörld");
        assert!(c.truncated);
    }

    #[test]
    fn env_names_are_checked() {
        assert!(env_of(&json!({"env":[{"name":"A_1","value":"x"}]})).is_ok());
        assert!(env_of(&json!({"env":[{"name":"LD_PRELOAD","value":"x"}]})).is_err());
        assert!(env_of(&json!({"env":[{"name":"A=B","value":"x"}]})).is_err());
        assert!(env_of(&json!({"env":{"A":"x"}})).is_err());
    }

    #[tokio::test]
    async fn a_command_outside_the_roots_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, _rx) = mpsc::unbounded_channel();
        let mut t = Terminals::new(vec![dir.path().to_path_buf()], tx);
        let refused = t
            .request(
                "terminal/create",
                &json!(1),
                &json!({"command":"true","cwd":"/etc"}),
            )
            .unwrap()
            .unwrap_err();
        assert!(refused.contains("/etc"), "{refused}");
    }
}
