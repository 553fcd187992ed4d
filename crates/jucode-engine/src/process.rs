//! An engine that is a child process speaking the serve protocol v2 on its stdio.
//!
//! The program is run as `<program> serve --session <id> --cwd <dir> [--resume]` in its own
//! process group, with the options as JSON in `JUCODE_ENGINE_OPTIONS`. Its first stdout line
//! must be `hello` with protocol 2; every later line is one event. Ops go to its stdin one JSON
//! object per line. An agent session's program finds the agent tools' MCP server in
//! `JUCODE_AGENT_MCP`. Stopping sends `shutdown`, closes stdin, and after a grace period signals
//! the whole group, so tools the engine started do not outlive it.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jucode_protocol::{Object, PROTOCOL_VERSION, serve::Event};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::{EngineError, EngineFactory, EngineHandle, EngineOutput, StartSpec};

/// How long a stopping engine gets after `shutdown` before its group is signalled.
const GRACE: Duration = Duration::from_secs(5);

/// Starts sessions as child processes of one serve-v2 program.
#[derive(Debug, Clone)]
pub struct ServeProcess {
    pub program: PathBuf,
}

impl EngineFactory for ServeProcess {
    /// A serve-v2 program stands in for the built-in engine and reads the same config.
    fn reads_mcp_config(&self) -> bool {
        true
    }

    fn start(&self, spec: StartSpec) -> Result<EngineHandle, EngineError> {
        let options = serde_json::to_string(&spec.options)
            .map_err(|e| EngineError::BadOptions(e.to_string()))?;
        let mut cmd = Command::new(&self.program);
        cmd.arg("serve")
            .arg("--session")
            .arg(&spec.session)
            .arg("--cwd")
            .arg(&spec.cwd);
        if spec.resume {
            cmd.arg("--resume");
        }
        for dir in &spec.extra_dirs {
            cmd.arg("--add-dir").arg(dir);
        }
        // An agent session's tools: the daemon's stdio MCP server, named in `JUCODE_AGENT_MCP`
        // (program and arguments only); its variables, the capability among them, go in this
        // process's environment, never on a command line.
        if let Some(mcp) = spec.agent.as_ref().and_then(|seat| seat.host.mcp_server()) {
            let launch = serde_json::json!({
                "name": mcp.name,
                "command": mcp.program,
                "args": mcp.args,
            });
            cmd.env("JUCODE_AGENT_MCP", launch.to_string());
            cmd.envs(&mcp.env);
        }
        cmd.current_dir(&spec.cwd)
            .env("JUCODE_ENGINE_OPTIONS", options)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|source| EngineError::Spawn {
            program: self.program.display().to_string(),
            source,
        })?;
        let (handle, ops, events) = crate::channel();
        let stopping = Arc::new(AtomicBool::new(false));
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(EngineError::Unavailable(
                "engine stdio was not piped".into(),
            ));
        };
        let pid = child.id();
        tokio::spawn(write_ops(stdin, ops, stopping.clone(), pid));
        tokio::spawn(log_stderr(stderr, spec.session.clone()));
        tokio::spawn(read_events(child, stdout, events, stopping));
        Ok(handle)
    }
}

async fn write_ops(
    mut stdin: tokio::process::ChildStdin,
    mut ops: mpsc::UnboundedReceiver<Object>,
    stopping: Arc<AtomicBool>,
    pid: Option<u32>,
) {
    while let Some(op) = ops.recv().await {
        if op.get("op").and_then(Value::as_str) == Some("shutdown") {
            stopping.store(true, Ordering::SeqCst);
        }
        let Ok(mut line) = serde_json::to_vec(&op) else {
            continue;
        };
        line.push(b'\n');
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
    // The hub dropped its sender (or the engine stopped reading): ask once, then insist.
    stopping.store(true, Ordering::SeqCst);
    let _ = stdin.write_all(b"{\"op\":\"shutdown\"}\n").await;
    drop(stdin);
    tokio::time::sleep(GRACE).await;
    signal_group(pid, nix::sys::signal::Signal::SIGTERM);
    tokio::time::sleep(Duration::from_secs(2)).await;
    signal_group(pid, nix::sys::signal::Signal::SIGKILL);
}

/// Signals the engine's process group (it leads its own group, see `process_group(0)`).
/// Harmless when the group is already gone.
fn signal_group(pid: Option<u32>, signal: nix::sys::signal::Signal) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), signal);
    }
}

async fn log_stderr(stderr: tokio::process::ChildStderr, session: String) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(session = %session, "engine stderr: {line}");
    }
}

async fn read_events(
    mut child: Child,
    stdout: tokio::process::ChildStdout,
    events: mpsc::Sender<EngineOutput>,
    stopping: Arc<AtomicBool>,
) {
    let mut reader = BufReader::new(stdout);
    // One buffer for every line: an engine streams thousands of small events a turn.
    let mut buf = String::new();
    let mut error = None;
    let mut greeted = false;
    loop {
        buf.clear();
        match reader.read_line(&mut buf).await {
            Ok(0) => break,
            Ok(_) => {
                let line = buf.strip_suffix('\n').unwrap_or(&buf);
                let line = line.strip_suffix('\r').unwrap_or(line);
                if line.trim().is_empty() {
                    continue;
                }
                let event = match serde_json::from_str::<Event>(line) {
                    Ok(event) => event,
                    Err(e) => {
                        tracing::warn!("engine printed a line that is not an event: {e}");
                        continue;
                    }
                };
                if !greeted {
                    let protocol = event.0.get("protocol").and_then(Value::as_u64);
                    if event.kind() != "hello" || protocol != Some(PROTOCOL_VERSION) {
                        error = Some(format!(
                            "the engine does not speak protocol {PROTOCOL_VERSION} (first line: {})",
                            truncate(line, 200)
                        ));
                        let _ = child.start_kill();
                        break;
                    }
                    greeted = true;
                    continue;
                }
                if events.send(EngineOutput::Event(event)).await.is_err() {
                    break;
                }
            }
            Err(e) => {
                error = Some(format!("reading the engine's output failed: {e}"));
                break;
            }
        }
    }
    let status = child.wait().await;
    if error.is_none() && !stopping.load(Ordering::SeqCst) {
        error = Some(match status {
            Ok(status) => format!("the engine exited unexpectedly ({status})"),
            Err(e) => format!("the engine exited unexpectedly: {e}"),
        });
    }
    let _ = events.send(EngineOutput::Exited { error }).await;
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
