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
        let (ops_tx, ops) = mpsc::unbounded_channel();
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
        let reader = Reader {
            child,
            stdout: BufReader::new(stdout),
            line: String::new(),
            greeted: false,
            stopping,
            done: false,
        };
        Ok(EngineHandle {
            ops: ops_tx,
            events: reader.into_events(),
        })
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

/// The engine's stdout as it is read: by whoever takes the events (see [`crate::Events`]).
struct Reader {
    child: Child,
    stdout: BufReader<tokio::process::ChildStdout>,
    /// One buffer for every line: an engine streams thousands of small events a turn.
    line: String,
    greeted: bool,
    stopping: Arc<AtomicBool>,
    /// `Exited` has been given: nothing follows.
    done: bool,
}

impl Reader {
    /// Reads the output as a stream that ends after `Exited`.
    fn into_events(self) -> crate::Events {
        let stream = futures_util::stream::unfold(self, |mut reader| async move {
            let output = reader.next().await?;
            Some((output, reader))
        });
        crate::Events::reading(Box::pin(stream))
    }

    /// The next output: an event, or `Exited` once stdout ends; then `None`. Never cancelled
    /// halfway (`read_line` is not cancel-safe): the stream keeps an unfinished call between
    /// polls, and only dropping the whole stream ends one.
    async fn next(&mut self) -> Option<EngineOutput> {
        if self.done {
            return None;
        }
        let error = loop {
            // Never cut short (see above), so a line is never half read when this clears it.
            self.line.clear();
            match self.stdout.read_line(&mut self.line).await {
                Ok(0) => break None,
                Ok(_) => {
                    let line = self.line.strip_suffix('\n').unwrap_or(&self.line);
                    let line = line.strip_suffix('\r').unwrap_or(line);
                    if line.trim().is_empty() {
                        continue;
                    }
                    let output = match parse_line(line) {
                        Ok(output) => output,
                        Err(e) => {
                            tracing::warn!("engine printed a line that is not an event: {e}");
                            continue;
                        }
                    };
                    if self.greeted {
                        return Some(output);
                    }
                    let hello = match &output {
                        EngineOutput::Event(event) => Some(event),
                        _ => None,
                    };
                    let protocol = hello.and_then(|e| e.0.get("protocol")?.as_u64());
                    if hello.map(Event::kind) != Some("hello") || protocol != Some(PROTOCOL_VERSION)
                    {
                        let _ = self.child.start_kill();
                        break Some(format!(
                            "the engine does not speak protocol {PROTOCOL_VERSION} (first line: {})",
                            truncate(line, 200)
                        ));
                    }
                    self.greeted = true;
                }
                Err(e) => break Some(format!("reading the engine's output failed: {e}")),
            }
        };
        let status = self.child.wait().await;
        let mut error = error;
        if error.is_none() && !self.stopping.load(Ordering::SeqCst) {
            error = Some(match status {
                Ok(status) => format!("the engine exited unexpectedly ({status})"),
                Err(e) => format!("the engine exited unexpectedly: {e}"),
            });
        }
        self.done = true;
        Some(EngineOutput::Exited { error })
    }
}

/// The start of an `assistant_delta` line written the usual way: type first, then the text.
const DELTA_PREFIX: &str = r#"{"type":"assistant_delta","delta":"#;

/// One line of an engine's stdout as its output. A line that is exactly
/// `{"type":"assistant_delta","delta":<string>}` (the bulk of a turn) becomes an
/// [`EngineOutput::Delta`] without building a map for it; any other line, that one written
/// otherwise included, is parsed as an event. Both give the same event.
pub fn parse_line(line: &str) -> Result<EngineOutput, serde_json::Error> {
    if let Some(text) = line
        .strip_prefix(DELTA_PREFIX)
        .and_then(|rest| rest.strip_suffix('}'))
        // Exactly one JSON string (and spaces) must remain: a further field makes this fail,
        // and that line takes the general road below.
        && let Ok(text) = serde_json::from_str::<String>(text)
    {
        return Ok(EngineOutput::Delta(text));
    }
    serde_json::from_str::<Event>(line).map(EngineOutput::Event)
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    /// Starts a shell script as a serve-v2 engine and takes every output it gives.
    async fn run_script(body: &str) -> Vec<EngineOutput> {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("engine.sh");
        std::fs::write(&program, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let spec = StartSpec {
            session: "s1".into(),
            cwd: dir.path().to_path_buf(),
            extra_dirs: Vec::new(),
            options: Object::new(),
            resume: false,
            agent: None,
        };
        let mut handle = ServeProcess { program }.start(spec).unwrap();
        let mut out = Vec::new();
        while let Some(output) = handle.events.recv().await {
            out.push(output);
        }
        out
    }

    #[tokio::test]
    async fn a_process_is_read_line_by_line_to_its_exit() {
        let out = run_script(concat!(
            r#"echo '{"type":"hello","protocol":2}'"#,
            "\n",
            r#"printf '{"type":"assistant_delta","delta":"hi"}\n\n{"type":"status","message":"ready"}\nnot json\n'"#,
        ))
        .await;
        assert_eq!(out.len(), 3, "{out:?}");
        assert_eq!(out[0], EngineOutput::Delta("hi".into()));
        assert_eq!(
            out[1].clone().into_event().unwrap().str("message"),
            Some("ready")
        );
        let EngineOutput::Exited { error: Some(error) } = &out[2] else {
            panic!("{out:?}")
        };
        assert!(error.contains("exited unexpectedly"), "{error}");
    }

    #[tokio::test]
    async fn a_wrong_greeting_ends_the_engine_with_its_first_line() {
        let out =
            run_script(r#"echo '{"type":"assistant_delta","delta":"no hello"}'; exec sleep 30"#)
                .await;
        assert_eq!(
            out,
            vec![EngineOutput::Exited {
                error: Some(
                    r#"the engine does not speak protocol 2 (first line: {"type":"assistant_delta","delta":"no hello"})"#
                        .into()
                )
            }]
        );
    }

    /// What the general parse makes of `line`, in the form `parse_line` returns for deltas.
    fn general(line: &str) -> Option<Event> {
        serde_json::from_str::<Event>(line).ok()
    }

    #[test]
    fn a_plain_delta_line_skips_the_map_and_means_the_same_event() {
        let cases = [
            r#"{"type":"assistant_delta","delta":"t123"}"#,
            r#"{"type":"assistant_delta","delta":"a \"q\" \n \u00e9 \ud83d\ude00"}"#,
            r#"{"type":"assistant_delta","delta":""}"#,
            r#"{"type":"assistant_delta","delta":"x" }"#,
        ];
        for line in cases {
            let got = parse_line(line).unwrap();
            assert!(matches!(got, EngineOutput::Delta(_)), "{line}");
            assert_eq!(got.into_event(), general(line), "{line}");
        }
    }

    #[test]
    fn any_other_line_is_an_event_or_an_error_as_before() {
        let cases = [
            r#"{"type":"assistant_delta","delta":"a","seq":1}"#,
            r#"{"type":"assistant_delta","delta":"a","delta":"b"}"#,
            r#"{"type":"assistant_delta","delta":7}"#,
            r#"{"type": "assistant_delta", "delta": "spaced"}"#,
            r#"{"delta":"a","type":"assistant_delta"}"#,
            r#"{"type":"status","message":"ready"}"#,
        ];
        for line in cases {
            let got = parse_line(line).unwrap();
            assert_eq!(got, EngineOutput::Event(general(line).unwrap()), "{line}");
        }
        for bad in [
            r#"{"type":"assistant_delta","delta":"open}"#,
            r#"{"type":"assistant_delta","delta":"a"}}"#,
            r#"{"type":"assistant_delta","delta":"\ud800"}"#,
            "not json",
        ] {
            assert!(parse_line(bad).is_err(), "{bad}");
            assert!(general(bad).is_none(), "{bad}");
        }
    }
}
