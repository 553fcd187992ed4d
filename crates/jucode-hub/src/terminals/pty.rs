//! One terminal's process and its I/O: the child on a `portable-pty` pty, and two tasks on a
//! non-blocking duplicate of the master (tokio's `AsyncFd`), so no thread ever blocks in a read
//! a background process could keep open forever.
//!
//! The pump batches output: output after a quiet spell (nothing sent for
//! [`TERM_OUTPUT_QUIET_MS`]) or after the client typed goes out at once, so a keystroke's echo
//! is not delayed; output
//! behind it waits until [`TERM_OUTPUT_QUIET_MS`] pass without more, [`MAX_DELAY`] pass, or
//! [`TERM_OUTPUT_FRAME_BYTES`] are waiting. It stops reading while the owner has more than
//! [`BACKLOG_PAUSE`] bytes queued, so a slow client blocks the shell's writes instead of growing
//! memory. These waits are I/O batching of one process, not time rules of the hub, so they use
//! tokio's timer rather than the hub's clock (docs/DECISIONS.md, Terminals).

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use jucode_protocol::daemon::terminals::{TERM_OUTPUT_FRAME_BYTES, TERM_OUTPUT_QUIET_MS};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use portable_pty::{Child, CommandBuilder, MasterPty, PtySize};
use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Sleep;

use super::{ProcessSpec, TermError, TermId, TermSize};
use crate::{ClientId, Hub};

/// Input chunks that may wait for a shell that does not read.
pub(super) const INPUT_QUEUE: usize = 256;
/// Bytes queued for the owner above which the pump stops reading the pty.
pub(super) const BACKLOG_PAUSE: usize = 2 * 1024 * 1024;
/// How often a paused pump looks whether the owner has caught up.
const PAUSE_POLL: Duration = Duration::from_millis(10);
/// How long a shell has between SIGHUP and SIGKILL.
pub(super) const KILL_GRACE: Duration = Duration::from_secs(2);
/// After the process is reaped, how long output still in the pty is waited for (Linux hands
/// a pty's output over asynchronously) when something else keeps the pty open.
const DRAIN_WAIT: Duration = Duration::from_millis(200);
const QUIET: Duration = Duration::from_millis(TERM_OUTPUT_QUIET_MS);
/// A shell that never pauses for 10 ms (a line every few ms) still gets its output shown
/// this soon after it was written.
const MAX_DELAY: Duration = Duration::from_millis(50);

/// Waits for an armed timer; never returns while it is not armed.
async fn wait(timer: &mut Option<Pin<Box<Sleep>>>) {
    match timer {
        Some(sleep) => sleep.as_mut().await,
        None => std::future::pending().await,
    }
}

pub(super) fn pty_size(size: TermSize) -> PtySize {
    PtySize {
        rows: size.rows,
        cols: size.cols,
        pixel_width: 0,
        pixel_height: 0,
    }
}

/// A started child whose I/O has not begun.
pub(super) struct Running {
    fd: Arc<AsyncFd<OwnedFd>>,
    child: Box<dyn Child + Send + Sync>,
    /// The child's process group (it is a session leader).
    group: Option<Pid>,
}

fn spawn_error(spec: &ProcessSpec, message: impl std::fmt::Display) -> TermError {
    TermError::Spawn {
        op: "term_open",
        program: spec.program.to_string_lossy().into_owned(),
        message: message.to_string(),
    }
}

/// Starts `spec` on a new pty. Returns the master (kept for resizing) and the running child.
pub(super) fn spawn(
    spec: &ProcessSpec,
    size: TermSize,
) -> Result<(Box<dyn MasterPty + Send>, Running), TermError> {
    let pair = portable_pty::native_pty_system()
        .openpty(pty_size(size))
        .map_err(|e| spawn_error(spec, e))?;
    let mut cmd = CommandBuilder::new(&spec.program);
    cmd.args(&spec.args);
    cmd.cwd(&spec.cwd);
    cmd.env("TERM", "xterm-256color");
    cmd.env("COLORTERM", "truecolor");
    if cmd.get_env("LANG").is_none() {
        cmd.env("LANG", "en_US.UTF-8");
    }
    for (key, value) in &spec.env {
        cmd.env(key, value);
    }
    for key in &spec.env_remove {
        cmd.env_remove(key);
    }
    let child = pair
        .slave
        .spawn_command(cmd)
        .map_err(|e| spawn_error(spec, e))?;
    // Only the child holds the slave now, so the master reads EIO once the child's side closes.
    drop(pair.slave);
    let group = child
        .process_id()
        .and_then(|p| i32::try_from(p).ok())
        .map(Pid::from_raw);
    let fd = dup_master(pair.master.as_ref())
        .and_then(|fd| {
            let flags = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GETFL)?;
            let flags = nix::fcntl::OFlag::from_bits_retain(flags) | nix::fcntl::OFlag::O_NONBLOCK;
            nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETFL(flags))?;
            Ok(fd)
        })
        .map_err(io::Error::from)
        .and_then(register);
    let running = Running {
        fd: match fd {
            Ok(fd) => Arc::new(fd),
            Err(e) => {
                let mut child = child;
                kill_now(group);
                let _ = child.kill();
                // Reaped off this thread: it may take the grace of a busy system.
                tokio::task::spawn_blocking(move || child.wait());
                return Err(spawn_error(spec, e));
            }
        },
        child,
        group,
    };
    Ok((pair.master, running))
}

/// A duplicate of the master's descriptor, for non-blocking I/O of our own. Close-on-exec
/// from the start (`F_DUPFD_CLOEXEC`): the engines and shells the daemon starts later must
/// not inherit a way into this terminal.
#[allow(unsafe_code)]
fn dup_master(master: &dyn MasterPty) -> nix::Result<OwnedFd> {
    use std::os::fd::FromRawFd as _;
    let raw = master.as_raw_fd().ok_or(nix::errno::Errno::EBADF)?;
    // SAFETY: `raw` is the master's open descriptor and `master` is borrowed for longer than
    // this borrow, which only serves to duplicate it. portable-pty exposes no `AsFd`.
    let borrowed = unsafe { BorrowedFd::borrow_raw(raw) };
    let dup = nix::fcntl::fcntl(borrowed, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(0))?;
    // SAFETY: `dup` is a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(dup) })
}

/// `fd` on tokio's reactor.
#[allow(unsafe_code)]
fn register(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an `OwnedFd` stays open and names the same description for as long as the
    // `AsyncFd` owns it, which is all `register` asks.
    unsafe { AsyncFd::register(fd) }.map_err(|e| e.into_parts().1)
}

fn signal_group(group: Option<Pid>, signal: Signal) {
    if let Some(group) = group {
        // ESRCH: the group is gone already.
        let _ = killpg(group, signal);
    }
}

fn kill_now(group: Option<Pid>) {
    signal_group(group, Signal::SIGKILL);
}

/// The child's exit as the protocol reports it: the code, `None` when a signal ended it.
fn exit_code(status: io::Result<portable_pty::ExitStatus>) -> Option<i32> {
    let status = status.ok()?;
    if status.signal().is_some() {
        return None;
    }
    i32::try_from(status.exit_code()).ok()
}

impl Running {
    /// Starts the reaper, the input writer and the output pump.
    pub(super) fn start(
        self,
        hub: Weak<Hub>,
        id: TermId,
        client: ClientId,
        close: oneshot::Receiver<()>,
        input: mpsc::Receiver<Vec<u8>>,
        exit: oneshot::Sender<Option<i32>>,
    ) {
        let Running {
            fd,
            mut child,
            group,
        } = self;
        let (reaped_tx, reaped) = oneshot::channel();
        // `wait` blocks, but only until the child dies, which the close path guarantees.
        tokio::task::spawn_blocking(move || {
            let _ = reaped_tx.send(exit_code(child.wait()));
        });
        let typed = Arc::new(AtomicBool::new(false));
        let writer = tokio::spawn(write_input(fd.clone(), input, typed.clone()));
        let pump = Pump {
            hub,
            id,
            client,
            fd,
            group,
            buf: vec![0; TERM_OUTPUT_FRAME_BYTES],
            filled: 0,
            text: String::new(),
            paused: false,
            typed,
        };
        tokio::spawn(pump.run(close, reaped, writer, exit));
    }
}

/// Reads what the pty has now, up to `buf`'s length: a pty hands over a few KiB a read, so
/// one wake-up takes several. `WouldBlock` only when nothing at all was there.
fn read_some(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    let mut total = 0;
    while total < buf.len() {
        match nix::unistd::read(fd, &mut buf[total..]) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) if total > 0 => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(total)
}

/// Sleeps one pause poll. Async, so a `select!` branch that is off creates no timer.
async fn pause_poll() {
    tokio::time::sleep(PAUSE_POLL).await;
}

/// Writes the client's input to the pty in order, waiting while the pty is full.
async fn write_input(
    fd: Arc<AsyncFd<OwnedFd>>,
    mut input: mpsc::Receiver<Vec<u8>>,
    typed: Arc<AtomicBool>,
) {
    while let Some(bytes) = input.recv().await {
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let Ok(mut guard) = fd.writable().await else {
                return;
            };
            // Set before the write as well as after: the echo can be read by the pump before
            // this task gets back from `write`, and it must not wait for the quiet spell.
            typed.store(true, Ordering::Release);
            match guard.try_io(|f| nix::unistd::write(f.get_ref(), rest).map_err(io::Error::from)) {
                Ok(Ok(n)) => {
                    rest = &rest[n..];
                    typed.store(true, Ordering::Release);
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                // EIO: the shell's side is closed; its exit is on its way.
                Ok(Err(_)) => return,
                Err(_would_block) => {}
            }
        }
    }
}

struct Pump {
    hub: Weak<Hub>,
    id: TermId,
    client: ClientId,
    fd: Arc<AsyncFd<OwnedFd>>,
    group: Option<Pid>,
    /// One frame's worth of output: the pty is read straight into `buf[filled..]`.
    buf: Vec<u8>,
    filled: usize,
    /// The last frame's JSON text, kept for its capacity.
    text: String,
    paused: bool,
    /// Set by the writer: the client typed since the last frame, so what comes now is
    /// (likely) its echo and goes out at once.
    typed: Arc<AtomicBool>,
}

impl Pump {
    async fn run(
        mut self,
        mut close: oneshot::Receiver<()>,
        mut reaped: oneshot::Receiver<Option<i32>>,
        writer: JoinHandle<()>,
        exit: oneshot::Sender<Option<i32>>,
    ) {
        let mut eof = false;
        let mut closing = false;
        // Each wait is a timer of its own, armed when its condition starts.
        let mut quiet: Option<Pin<Box<Sleep>>> = None;
        let mut oldest: Option<Pin<Box<Sleep>>> = None;
        let mut kill: Option<Pin<Box<Sleep>>> = None;
        let mut drain: Option<Pin<Box<Sleep>>> = None;
        // Armed by every frame sent: output arriving after it lapsed goes out at once.
        let mut hold: Option<Pin<Box<Sleep>>> = None;
        let mut drained = false;
        let mut code: Option<Option<i32>> = None;
        let code = loop {
            if let Some(code) = code
                && (eof || drained)
            {
                break code;
            }
            let room = self.buf.len() - self.filled;
            tokio::select! {
                got = &mut reaped, if code.is_none() => {
                    code = Some(got.unwrap_or(None));
                    drain = Some(Box::pin(tokio::time::sleep(DRAIN_WAIT)));
                    self.paused = false;
                }
                ready = self.fd.readable(), if !eof && !self.paused && room > 0 => {
                    let Ok(mut guard) = ready else {
                        eof = true;
                        continue;
                    };
                    let read =
                        guard.try_io(|f| read_some(f.get_ref(), &mut self.buf[self.filled..]));
                    match read {
                        Ok(Ok(0)) => eof = true,
                        Ok(Ok(n)) => {
                            let first = self.filled == 0;
                            self.filled += n;
                            let echo = self.typed.swap(false, Ordering::AcqRel);
                            if echo
                                || (first && hold.is_none())
                                || self.filled == self.buf.len()
                            {
                                // A keystroke's echo after a quiet spell, or a full frame.
                                self.flush(code.is_none());
                                (quiet, oldest) = (None, None);
                                hold = Some(Box::pin(tokio::time::sleep(QUIET)));
                            } else {
                                if first {
                                    oldest = Some(Box::pin(tokio::time::sleep(MAX_DELAY)));
                                }
                                quiet = Some(Box::pin(tokio::time::sleep(QUIET)));
                            }
                        }
                        Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                        // EIO: every holder of the shell's side closed it.
                        Ok(Err(_)) => eof = true,
                        Err(_would_block) => {}
                    }
                }
                () = wait(&mut quiet) => {
                    self.flush(code.is_none());
                    (quiet, oldest) = (None, None);
                    hold = Some(Box::pin(tokio::time::sleep(QUIET)));
                }
                () = wait(&mut oldest) => {
                    self.flush(code.is_none());
                    (quiet, oldest) = (None, None);
                    hold = Some(Box::pin(tokio::time::sleep(QUIET)));
                }
                () = wait(&mut hold) => hold = None,
                () = pause_poll(), if self.paused => {
                    let backlog = self.hub.upgrade().and_then(|h| h.client_backlog(self.client));
                    self.paused = backlog.is_some_and(|b| b > BACKLOG_PAUSE);
                }
                _ = &mut close, if !closing && code.is_none() => {
                    // term_close, or the owner left (the sender dropped): hang up, then kill.
                    closing = true;
                    signal_group(self.group, Signal::SIGHUP);
                    kill = Some(Box::pin(tokio::time::sleep(KILL_GRACE)));
                }
                () = wait(&mut kill), if code.is_none() => {
                    kill_now(self.group);
                    kill = None;
                }
                () = wait(&mut drain) => drained = true,
            }
        };
        if self.filled > 0 {
            self.flush(false);
        }
        writer.abort();
        if let Some(hub) = self.hub.upgrade() {
            hub.term_finished(&self.id, self.client, code);
        }
        let _ = exit.send(code);
    }

    /// Sends what is buffered; pauses reading when the owner is behind (unless `may_pause` is
    /// false: the last output of an exited process is sent whole).
    fn flush(&mut self, may_pause: bool) {
        if self.filled == 0 {
            return;
        }
        let data = &self.buf[..self.filled];
        let backlog = self
            .hub
            .upgrade()
            .and_then(|h| h.term_output(&self.id, self.client, data, &mut self.text));
        self.filled = 0;
        self.paused = may_pause && backlog.is_some_and(|b| b > BACKLOG_PAUSE);
    }
}
