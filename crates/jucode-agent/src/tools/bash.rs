//! `bash`: one command in its own process group, sandboxed unless it escalates.
//!
//! The group is killed when the command ends, times out, or the call is dropped (an interrupt
//! aborts the turn, which drops this future), so nothing it started outlives it.

use std::ffi::{OsStr, OsString};
use std::process::Stdio;
use std::time::Duration;

use jucode_sandbox::Mode;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::Deserialize;
use tokio::io::AsyncReadExt as _;
use tokio::sync::mpsc;

use super::{ToolEnv, cap_output};

/// The longest timeout a call may ask for.
const MAX_TIMEOUT_MS: u64 = 600_000;
/// Output kept in memory; the rest is counted, not stored.
const KEEP_BYTES: usize = 4 * 1024 * 1024;
/// How often progress (`tool_update`) is sent at most.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);
/// After the shell exits, how long its leftover children may hold the pipes open.
const DRAIN_GRACE: Duration = Duration::from_millis(300);

#[derive(Deserialize)]
pub struct Args {
    command: String,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    escalate: bool,
    #[serde(default)]
    justification: Option<String>,
}

#[derive(Debug, Clone)]
pub struct BashCall {
    pub command: String,
    pub timeout_ms: u64,
    pub escalate: bool,
    pub justification: Option<String>,
}

pub fn prepare(args: Args, env: &ToolEnv) -> Result<BashCall, String> {
    if args.command.trim().is_empty() {
        return Err("command is empty".into());
    }
    if args.command.contains('\0') {
        return Err("command contains a NUL byte".into());
    }
    if args.escalate
        && args
            .justification
            .as_deref()
            .is_none_or(|j| j.trim().is_empty())
    {
        return Err("escalate: true needs a justification".into());
    }
    Ok(BashCall {
        command: args.command,
        timeout_ms: args
            .timeout_ms
            .unwrap_or(env.bash_timeout_ms)
            .clamp(1, MAX_TIMEOUT_MS),
        escalate: args.escalate,
        justification: args.justification,
    })
}

/// Kills the whole process group when dropped.
struct Group(Option<Pid>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // ESRCH (already gone) is fine.
            let _ = killpg(pid, Signal::SIGKILL);
        }
    }
}

/// Runs the command; `sandboxed: false` runs it as the user (an approved escalation or full
/// access). Progress goes to `progress` as the output so far. Returns output and is_error.
pub async fn run(
    call: &BashCall,
    env: &ToolEnv,
    sandboxed: bool,
    progress: Option<mpsc::UnboundedSender<String>>,
) -> (String, bool) {
    let mut cmd = match command(call, env, sandboxed) {
        Ok(cmd) => cmd,
        Err(e) => return (e, true),
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return (format!("could not start bash: {e}"), true),
    };
    let _group = Group(
        child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw),
    );
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return ("bash's output was not piped".into(), true);
    };
    let mut out: Vec<u8> = Vec::new();
    let mut dropped = 0usize;
    let mut keep = |out: &mut Vec<u8>, bytes: &[u8]| {
        let room = KEEP_BYTES.saturating_sub(out.len());
        out.extend_from_slice(&bytes[..bytes.len().min(room)]);
        dropped += bytes.len().saturating_sub(room);
    };
    // Deadlines are points on the clock's monotonic time.
    let clock = &env.clock;
    let deadline = clock.elapsed() + Duration::from_millis(call.timeout_ms);
    let mut last_progress = clock.elapsed();
    let (mut out_open, mut err_open) = (true, true);
    let mut status = None;
    let mut drain_until: Option<Duration> = None;
    let mut timed_out = false;
    let mut buf_out = [0u8; 8192];
    let mut buf_err = [0u8; 8192];
    while out_open || err_open || status.is_none() {
        let until = drain_until.map_or(deadline, |d| d.min(deadline));
        tokio::select! {
            n = stdout.read(&mut buf_out), if out_open => match n {
                Ok(0) | Err(_) => out_open = false,
                Ok(n) => keep(&mut out, &buf_out[..n]),
            },
            n = stderr.read(&mut buf_err), if err_open => match n {
                Ok(0) | Err(_) => err_open = false,
                Ok(n) => keep(&mut out, &buf_err[..n]),
            },
            s = child.wait(), if status.is_none() => {
                status = Some(s);
                drain_until = Some(clock.elapsed() + DRAIN_GRACE);
            }
            () = clock.sleep(until.saturating_sub(clock.elapsed())) => {
                if drain_until.is_some_and(|d| d <= clock.elapsed()) && status.is_some() {
                    // The shell is done; a background child still holds the pipes.
                    break;
                }
                timed_out = true;
                break;
            }
        }
        if let Some(tx) = &progress
            && clock.elapsed().saturating_sub(last_progress) >= PROGRESS_EVERY
            && !out.is_empty()
        {
            last_progress = clock.elapsed();
            let _ = tx.send(cap_output(&String::from_utf8_lossy(&out)));
        }
    }
    drop(_group);
    let mut text = String::from_utf8_lossy(&out).into_owned();
    if dropped > 0 {
        text.push_str(&format!("\n({dropped} more bytes of output not kept)"));
    }
    let mut is_error = false;
    if timed_out {
        is_error = true;
        text.push_str(&format!(
            "\n(the command timed out after {} ms and was killed)",
            call.timeout_ms
        ));
    } else if let Some(Ok(status)) = status
        && !status.success()
    {
        is_error = true;
        match status.code() {
            Some(code) => text.push_str(&format!("\n(exit code {code})")),
            None => text.push_str("\n(killed by a signal)"),
        }
    }
    (cap_output(&text), is_error)
}

fn command(
    call: &BashCall,
    env: &ToolEnv,
    sandboxed: bool,
) -> Result<tokio::process::Command, String> {
    let program = OsStr::new("bash");
    let args = [OsString::from("-c"), OsString::from(&call.command)];
    let mut policy = env.policy.clone();
    if !sandboxed {
        policy.mode = Mode::FullAccess;
    }
    if policy.mode == Mode::FullAccess {
        // No bubblewrap needed to run as the user; the sandbox crate still strips the
        // daemon's own variables, and without it we do the same here.
        return Ok(match &env.sandbox {
            Ok(sandbox) => sandbox
                .command(&policy, program, &args)
                .map_err(|e| e.to_string())?,
            Err(_) => {
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(&args).current_dir(&env.cwd);
                for (name, _) in std::env::vars_os() {
                    if name.to_string_lossy().starts_with("JUCODE_") {
                        cmd.env_remove(name);
                    }
                }
                cmd
            }
        });
    }
    match &env.sandbox {
        Ok(sandbox) => sandbox
            .command(&policy, program, &args)
            .map_err(|e| format!("the sandbox refused the command: {e}")),
        Err(why) => Err(format!(
            "no sandbox available: {why}. Sandboxed commands do not run; full-access mode or an approved escalation (escalate: true) runs commands outside it."
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::tools::tests::env_in;

    fn call(command: &str, timeout_ms: u64) -> BashCall {
        BashCall {
            command: command.into(),
            timeout_ms,
            escalate: false,
            justification: None,
        }
    }

    #[tokio::test]
    async fn output_exit_codes_and_timeouts() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_in(dir.path(), &[]);
        let (out, err) = run(&call("echo hi; echo oops >&2", 10_000), &env, false, None).await;
        assert!(!err);
        assert!(out.contains("hi") && out.contains("oops"), "{out}");
        let (out, err) = run(&call("exit 3", 10_000), &env, false, None).await;
        assert!(err);
        assert!(out.contains("exit code 3"));
        let (out, err) = run(&call("sleep 30", 200), &env, false, None).await;
        assert!(err);
        assert!(out.contains("timed out"), "{out}");
        // Runs in cwd.
        let (out, _) = run(&call("pwd", 10_000), &env, false, None).await;
        assert_eq!(out.trim(), env.cwd.display().to_string());
    }

    #[tokio::test]
    async fn a_sandboxed_command_without_a_sandbox_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_in(dir.path(), &[]);
        let (out, err) = run(&call("echo hi", 10_000), &env, true, None).await;
        assert!(err);
        assert!(out.starts_with("no sandbox available"), "{out}");
    }

    #[tokio::test]
    async fn dropping_the_call_kills_its_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_in(dir.path(), &[]);
        let marker = dir.path().join("pid");
        let command = format!("sleep 60 & echo $! > {}; wait", marker.display());
        let c = call(&command, 60_000);
        let fut = run(&c, &env, false, None);
        // Give the command a moment to start, then drop the future (as an interrupt does).
        let _ = tokio::time::timeout(Duration::from_millis(500), fut).await;
        let pid: i32 = std::fs::read_to_string(&marker)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The background sleep must be gone (reaped by init or a zombie no longer running).
        let mut gone = false;
        for _ in 0..50 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat.is_empty() || stat.contains(") Z") {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(gone, "sleep {pid} survived");
    }

    #[test]
    fn escalation_needs_a_justification() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_in(dir.path(), &[]);
        let args: Args = serde_json::from_str(r#"{"command":"git push","escalate":true}"#).unwrap();
        assert!(prepare(args, &env).unwrap_err().contains("justification"));
        let args: Args = serde_json::from_str(r#"{"command":"  "}"#).unwrap();
        assert!(prepare(args, &env).is_err());
    }
}
