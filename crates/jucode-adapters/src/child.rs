//! An engine CLI as a child process: its own process group, JSON lines on stdin and stdout,
//! stderr kept (a short tail) for the error an unexpected exit reports.
//!
//! Every child has a generation number so an adapter that restarts its engine (Claude Code's
//! switch into full access) can tell the old process's last lines and exit from the new one's.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jucode_engine::EngineError;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;

/// How long a child gets after its stdin closes before its group is signalled.
const GRACE: Duration = Duration::from_secs(3);
/// Lines of stderr kept for an exit report.
const STDERR_TAIL: usize = 8;

/// What the child's reader tasks report.
#[derive(Debug)]
pub(crate) enum Input {
    /// One stdout line that looks like JSON, parsed.
    Frame(u64, Value),
    /// The child exited; the text says how.
    Exited(u64, String),
    /// A message from one of the adapter's own tasks (an ACP terminal that ended).
    Local(Value),
}

/// How to start a child.
pub(crate) struct Spawn<'a> {
    pub program: &'a Path,
    pub args: Vec<String>,
    pub cwd: &'a Path,
    pub env: &'a [(String, String)],
    /// Variables removed from the inherited environment.
    pub env_remove: &'a [&'a str],
    pub generation: u64,
    /// A name for logs and errors (`claude`, `codex`, the ACP agent's program).
    pub label: String,
}

/// A running child.
pub(crate) struct ChildProc {
    /// The process's stdin; boxed so a detached child (no process) can write nowhere.
    stdin: Option<Box<dyn AsyncWrite + Unpin + Send>>,
    pid: Option<u32>,
    exited: Arc<AtomicBool>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    pub generation: u64,
    pub label: String,
}

impl ChildProc {
    pub(crate) fn spawn(
        spec: Spawn<'_>,
        input: mpsc::UnboundedSender<Input>,
    ) -> Result<ChildProc, EngineError> {
        let mut cmd = Command::new(spec.program);
        cmd.args(&spec.args)
            .current_dir(spec.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        for name in spec.env_remove {
            cmd.env_remove(name);
        }
        for (name, value) in spec.env {
            cmd.env(name, value);
        }
        let mut child = cmd.spawn().map_err(|source| EngineError::Spawn {
            program: spec.program.display().to_string(),
            source,
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(EngineError::Unavailable(format!(
                "{}: stdio was not piped",
                spec.label
            )));
        };
        let pid = child.id();
        let exited = Arc::new(AtomicBool::new(false));
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let generation = spec.generation;
        let label = spec.label.clone();
        let stderr_tail = tail.clone();
        let stderr_label = label.clone();
        let stderr_task = tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!("{stderr_label} stderr: {line}");
                if let Ok(mut tail) = stderr_tail.lock() {
                    if tail.len() == STDERR_TAIL {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            }
        });
        let exit_flag = exited.clone();
        let exit_tail = tail.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            loop {
                match lines.next_line().await {
                    Ok(Some(line)) => {
                        if let Some(frame) = frame_of(&line, &label)
                            && input.send(Input::Frame(generation, frame)).is_err()
                        {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!("reading {label}'s output failed: {e}");
                        break;
                    }
                }
            }
            let status = child.wait().await;
            exit_flag.store(true, Ordering::SeqCst);
            // The stderr reader ends with the process; let it drain so the tail is complete.
            let _ = tokio::time::timeout(Duration::from_secs(2), stderr_task).await;
            let mut how = match status {
                Ok(status) => format!("{label} exited ({status})"),
                Err(e) => format!("{label} exited: {e}"),
            };
            if let Ok(tail) = exit_tail.lock()
                && !tail.is_empty()
            {
                let text: Vec<&str> = tail.iter().map(String::as_str).collect();
                how.push_str(": ");
                how.push_str(&crate::truncate(&text.join(" | "), 600));
            }
            let _ = input.send(Input::Exited(generation, how));
        });
        Ok(ChildProc {
            stdin: Some(Box::new(stdin)),
            pid,
            exited,
            stderr: tail,
            generation,
            label: spec.label,
        })
    }

    /// A child with no process behind it: what it is sent is kept in `written`, stopping it
    /// does nothing. For [`crate::replay`], which feeds an adapter lines itself.
    pub(crate) fn detached(generation: u64, label: &str, written: Written) -> ChildProc {
        ChildProc {
            stdin: Some(Box::new(written)),
            pid: None,
            exited: Arc::new(AtomicBool::new(true)),
            stderr: Arc::new(Mutex::new(VecDeque::new())),
            generation,
            label: label.to_string(),
        }
    }

    /// Writes one frame as a line. A failure means the child is gone; its exit follows.
    pub(crate) async fn send(&mut self, frame: &Value) -> bool {
        let Some(stdin) = self.stdin.as_mut() else {
            return false;
        };
        let Ok(mut line) = serde_json::to_vec(frame) else {
            return false;
        };
        line.push(b'\n');
        let ok = stdin.write_all(&line).await.is_ok() && stdin.flush().await.is_ok();
        if !ok {
            tracing::debug!("{} no longer reads its input", self.label);
            self.stdin = None;
        }
        ok
    }

    /// Closes stdin (the engines exit on EOF), then signals the whole group if it lingers, so
    /// tools the engine started do not outlive it.
    pub(crate) fn stop(mut self) {
        self.stdin = None;
        // No process (a detached child, or one already reaped): nothing to signal.
        let Some(pid) = self.pid else {
            return;
        };
        let exited = self.exited.clone();
        tokio::spawn(async move {
            for (wait, signal) in [
                (GRACE, nix::sys::signal::Signal::SIGTERM),
                (Duration::from_secs(2), nix::sys::signal::Signal::SIGKILL),
            ] {
                tokio::time::sleep(wait).await;
                if exited.load(Ordering::SeqCst) {
                    return;
                }
                signal_group(Some(pid), signal);
            }
        });
    }

    /// The last lines the child wrote on stderr.
    #[allow(dead_code)]
    pub(crate) fn stderr_tail(&self) -> Vec<String> {
        self.stderr
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// What a detached child was sent, kept in memory.
#[derive(Debug, Clone, Default)]
pub(crate) struct Written(Arc<Mutex<Vec<u8>>>);

impl Written {
    /// Takes what was written so far.
    pub(crate) fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .map(|mut b| std::mem::take(&mut *b))
            .unwrap_or_default()
    }
}

impl AsyncWrite for Written {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let Ok(mut kept) = self.0.lock() else {
            return std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
        };
        kept.extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// One stdout line as the frame it carries: JSON objects only, since some builds print
/// diagnostics on stdout too.
pub(crate) fn frame_of(line: &str, label: &str) -> Option<Value> {
    let line = line.trim();
    if !line.starts_with('{') {
        if !line.is_empty() {
            tracing::debug!("{label} printed a non-JSON line: {line}");
        }
        return None;
    }
    match serde_json::from_str::<Value>(line) {
        Ok(frame) => Some(frame),
        Err(e) => {
            tracing::warn!("{label} printed a bad JSON line: {e}");
            None
        }
    }
}

/// Signals the child's process group (it leads its own group, see `process_group(0)`).
fn signal_group(pid: Option<u32>, signal: nix::sys::signal::Signal) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), signal);
    }
}

/// Resolves `path` (symlinks followed; for a file that does not exist yet, its parent) and
/// checks it lies inside one of `roots`. Returns the resolved path.
pub(crate) fn inside(path: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let resolved = match std::fs::canonicalize(path) {
        Ok(p) => p,
        Err(_) => {
            let parent = std::fs::canonicalize(path.parent()?).ok()?;
            let name = path.file_name()?;
            if name == ".." {
                return None;
            }
            parent.join(name)
        }
    };
    roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .any(|root| resolved.starts_with(&root))
        .then_some(resolved)
}

/// How long a stopping child gets to exit before the adapter reports the stop anyway.
pub(crate) const EXIT_WAIT: Duration = Duration::from_secs(8);

/// An adapter that keeps one child process for the whole session (ACP, Codex): [`drive`]
/// runs its loop.
pub(crate) trait Driven {
    /// Handles one op from the hub; `false` ends the session.
    async fn on_op(&mut self, op: jucode_protocol::Object) -> bool;
    /// Handles one frame from the child; `false` ends the session.
    async fn on_frame(&mut self, frame: Value) -> bool;
    fn child(&mut self) -> &mut Option<ChildProc>;
    fn sink(&mut self) -> &mut crate::turns::Sink;
    /// Handles an [`Input::Local`] message; `false` ends the session.
    async fn on_local(&mut self, message: Value) -> bool {
        let _ = message;
        true
    }
    /// Work that needs the child's input stream (a restart waits there for the old process's
    /// exit), run after every op and frame; `false` ends the session.
    async fn between(&mut self, input: &mut mpsc::UnboundedReceiver<Input>) -> bool {
        let _ = input;
        true
    }
}

/// Waits (bounded) until child `generation` has exited; its last frames are dropped.
pub(crate) async fn wait_exit(input: &mut mpsc::UnboundedReceiver<Input>, generation: u64) {
    let wait = async {
        while let Some(got) = input.recv().await {
            if let Input::Exited(g, _) = got
                && g == generation
            {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(EXIT_WAIT, wait).await;
}

/// Feeds the hub's ops and the child's frames to `adapter` until either side ends, then stops
/// the child (waiting for it, bounded) and reports the exit: with the child's own account when
/// it died, as a requested stop otherwise.
pub(crate) async fn drive<A: Driven>(
    adapter: &mut A,
    ops: &mut mpsc::UnboundedReceiver<jucode_protocol::Object>,
    input: &mut mpsc::UnboundedReceiver<Input>,
) {
    loop {
        if !adapter.between(input).await {
            break;
        }
        let current = adapter.child().as_ref().map(|c| c.generation);
        tokio::select! {
            op = ops.recv() => {
                let Some(op) = op else { break };
                if !adapter.on_op(op).await {
                    break;
                }
            }
            got = input.recv() => match got {
                // A process the adapter replaced: its last lines and exit are not the session's.
                Some(Input::Frame(g, _) | Input::Exited(g, _))
                    if current.is_some_and(|c| c != g) => {}
                Some(Input::Frame(_, frame)) => {
                    if !adapter.on_frame(frame).await {
                        break;
                    }
                }
                Some(Input::Local(message)) => {
                    if !adapter.on_local(message).await {
                        break;
                    }
                }
                Some(Input::Exited(_, how)) => {
                    *adapter.child() = None;
                    adapter.sink().exited(Some(how)).await;
                    return;
                }
                None => break,
            },
        }
    }
    if let Some(child) = adapter.child().take() {
        child.stop();
        let wait = async {
            while let Some(got) = input.recv().await {
                if matches!(got, Input::Exited(..)) {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(EXIT_WAIT, wait).await;
    }
    adapter.sink().exited(None).await;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn paths_outside_the_roots_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("w");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.txt"), "a").unwrap();
        let roots = vec![root.clone()];
        assert!(inside(&root.join("a.txt"), &roots).is_some());
        assert!(inside(&root.join("new.txt"), &roots).is_some());
        assert!(inside(&root.join("../w/a.txt"), &roots).is_some());
        assert!(inside(&root.join("../x.txt"), &roots).is_none());
        assert!(inside(Path::new("/etc/passwd"), &roots).is_none());
        assert!(inside(Path::new("a.txt"), &roots).is_none());
        std::os::unix::fs::symlink("/etc", root.join("link")).unwrap();
        assert!(inside(&root.join("link/passwd"), &roots).is_none());
    }
}
