//! Terminals: programs on a pty of this computer, each owned by the one connection that opened
//! it. `term_open` runs the user's login shell; the TUI hand-off runs an engine's own terminal
//! interface through the same [`Hub::open_process`]. Only the owner gets a terminal's events and
//! may drive it; ops naming another client's terminal get the same error as an unknown id.
//!
//! Invariants: a terminal's `term_exit` is queued only after its process is reaped and after
//! its last output frame; a connection that goes away has its terminals killed (SIGHUP to the
//! process group, SIGKILL after a grace period) and reaped; a slow client pauses the pty read
//! instead of letting its queue grow (see [`pty`]).

mod pty;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use jucode_protocol::daemon::terminals::{MAX_TERMINALS_PER_CLIENT, TERM_DEFAULT_SIZE, clamp_size};
use jucode_protocol::daemon::{DaemonEvent, TerminalsOp};
use tokio::sync::{mpsc, oneshot};

use crate::cx::OpCx;
use crate::error::OpError;
use crate::files::{self, FilesError};
use crate::{ClientId, Hub, Inner};

/// A terminal's id (`t-` and 16 hex digits), as clients name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct TermId(pub(crate) String);

impl TermId {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for TermId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What to run on a pty. The child gets the daemon's environment, then the terminal variables
/// (`TERM`, `COLORTERM`, `LANG` when unset), then `env`, then loses every name in
/// `env_remove`.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProcessSpec {
    pub(crate) program: OsString,
    pub(crate) args: Vec<OsString>,
    pub(crate) cwd: PathBuf,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) env_remove: Vec<OsString>,
}

/// Columns × rows of a pty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TermSize {
    pub(crate) cols: u16,
    pub(crate) rows: u16,
}

impl TermSize {
    /// A size as a client asks for it: 80 × 24 by default, each kept within 2–1000.
    pub(crate) fn from_request(cols: Option<i64>, rows: Option<i64>) -> TermSize {
        TermSize {
            cols: clamp_size(cols, TERM_DEFAULT_SIZE.0),
            rows: clamp_size(rows, TERM_DEFAULT_SIZE.1),
        }
    }
}

/// A terminal just opened: its id, and what its exit code arrives on (after `term_exit` was
/// queued; `None` when a signal killed it).
#[derive(Debug)]
#[allow(dead_code)]
pub(crate) struct OpenedTerm {
    pub(crate) id: TermId,
    pub(crate) exited: oneshot::Receiver<Option<i32>>,
}

/// Why a terminal op failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TermError {
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error("term_open: {path} is not a directory")]
    NotADirectory { path: String },
    #[error("term_open: a client may have at most {MAX_TERMINALS_PER_CLIENT} terminals open")]
    TooMany,
    /// The same text for an unknown id and another client's, so ids do not leak.
    #[error("{op}: no terminal {term} is open on this connection")]
    Unknown { op: &'static str, term: String },
    #[error("term_input: data is not base64")]
    NotBase64,
    #[error("term_input: the terminal is not reading its input")]
    InputFull,
    #[error("{op}: cannot start {program}: {message}")]
    Spawn {
        op: &'static str,
        program: String,
        message: String,
    },
    #[error("term_open: cannot make a terminal id")]
    Random,
}

/// One open terminal, as the hub keeps it.
struct Term {
    client: ClientId,
    input: mpsc::Sender<Vec<u8>>,
    /// Resizes the pty.
    resizer: Box<dyn portable_pty::MasterPty + Send>,
    /// Taken (and fired) by `term_close`; dropped when the owner leaves. Either kills the shell.
    close: Option<oneshot::Sender<()>>,
}

/// Every open terminal by id.
#[derive(Default)]
pub(crate) struct Terminals {
    map: HashMap<TermId, Term>,
}

impl Terminals {
    fn count_for(&self, client: ClientId) -> usize {
        self.map.values().filter(|t| t.client == client).count()
    }

    fn owned(&self, client: ClientId, op: &'static str, term: &str) -> Result<&Term, TermError> {
        self.map
            .get(&TermId(term.to_string()))
            .filter(|t| t.client == client)
            .ok_or_else(|| TermError::Unknown {
                op,
                term: term.to_string(),
            })
    }

    /// The owner left: every terminal of it is killed (dropping its close sender tells the pump).
    pub(crate) fn client_gone(&mut self, client: ClientId) {
        self.map.retain(|_, t| t.client != client);
    }

    /// The process exited: its entry goes.
    fn remove(&mut self, id: &TermId) {
        self.map.remove(id);
    }
}

impl Hub {
    /// Runs `spec` on a new pty owned by `client`. `announce` runs under the hub's lock once
    /// the terminal is registered and before any of its output can be queued: a caller queues
    /// its reply (`term_opened`) and broadcasts there so they come first. Counts toward the
    /// client's four terminals. The caller checks `spec.cwd` against its own rule.
    pub(crate) fn open_process(
        self: &Arc<Self>,
        client: ClientId,
        spec: ProcessSpec,
        size: TermSize,
        announce: impl FnOnce(&mut Inner, &TermId),
    ) -> Result<OpenedTerm, TermError> {
        if self.lock().terminals.count_for(client) >= MAX_TERMINALS_PER_CLIENT {
            return Err(TermError::TooMany);
        }
        let bytes = crate::util::random_bytes::<8>().map_err(|_| TermError::Random)?;
        let id = TermId(format!("t-{}", crate::util::hex(&bytes)));
        let (master, running) = pty::spawn(&spec, size)?;
        let (exit_tx, exited) = oneshot::channel();
        let (close_tx, close_rx) = oneshot::channel();
        let (input_tx, input_rx) = mpsc::channel(pty::INPUT_QUEUE);
        let mut inner = self.lock();
        // Checked again under the lock: two opens may have raced past the first check.
        if inner.terminals.count_for(client) >= MAX_TERMINALS_PER_CLIENT
            || inner.clients.auth(client).is_none()
        {
            drop(inner);
            drop((master, close_tx));
            // With its close sender dropped, the pump kills and reaps what we just started.
            running.start(
                Arc::downgrade(self),
                id,
                client,
                close_rx,
                input_rx,
                exit_tx,
            );
            return Err(TermError::TooMany);
        }
        inner.terminals.map.insert(
            id.clone(),
            Term {
                client,
                input: input_tx,
                resizer: master,
                close: Some(close_tx),
            },
        );
        announce(&mut inner, &id);
        drop(inner);
        running.start(
            Arc::downgrade(self),
            id.clone(),
            client,
            close_rx,
            input_rx,
            exit_tx,
        );
        Ok(OpenedTerm { id, exited })
    }

    /// Kills a terminal whoever owns it (the TUI hand-off ending its TUI); `term_exit` follows
    /// to its owner. Returns whether it was open.
    #[allow(dead_code)]
    pub(crate) fn close_process(&self, term: &TermId) -> bool {
        let mut inner = self.lock();
        let Some(t) = inner.terminals.map.get_mut(term) else {
            return false;
        };
        if let Some(close) = t.close.take() {
            let _ = close.send(());
        }
        true
    }

    /// The pump's end of a terminal: queue its last frame and forget it, in one locked step.
    fn term_finished(&self, id: &TermId, client: ClientId, code: Option<i32>) {
        let mut inner = self.lock();
        inner.terminals.remove(id);
        let frame = crate::to_value(&jucode_protocol::daemon::Reply::to(
            None,
            DaemonEvent::TermExit {
                term: id.to_string(),
                code,
            },
        ));
        inner.clients.send(client, &frame);
    }

    /// Queues one output frame for the owner (`text` is the caller's buffer, reused so a
    /// stream of frames allocates one buffer a frame, not two). Returns how many bytes the
    /// owner has waiting, `None` once it is gone.
    fn term_output(
        &self,
        id: &TermId,
        client: ClientId,
        data: &[u8],
        text: &mut String,
    ) -> Option<usize> {
        let frame = output_frame(id.as_str(), data, text);
        let mut inner = self.lock();
        inner.clients.send_text(client, frame);
        inner.clients.backlog(client)
    }

    /// How many bytes wait in `client`'s queue; `None` once it is gone.
    fn client_backlog(&self, client: ClientId) -> Option<usize> {
        self.lock().clients.backlog(client)
    }
}

/// A `term_output` frame's JSON text, the same bytes serde writes for the event, built in
/// `out`: the base64 goes straight into it, without a `String` and a `Value` in between and
/// without scanning 87 KiB of base64 for characters to escape (it has none).
fn output_frame(term: &str, data: &[u8], out: &mut String) -> crate::FrameText {
    let engine = &base64::engine::general_purpose::STANDARD;
    out.clear();
    out.reserve(64 + term.len() + base64::encoded_len(data.len(), true).unwrap_or(0));
    out.push_str(r#"{"type":"term_output","term":"#);
    // A string always serializes; the fallback is never taken.
    let term = serde_json::to_string(term).unwrap_or_else(|_| String::from("\"\""));
    out.push_str(&term);
    out.push_str(r#","data":""#);
    engine.encode_string(data, out);
    out.push_str(r#""}"#);
    crate::FrameText::from(out.as_str())
}

/// The user's login shell: `$SHELL -l`, else the platform's usual shell.
fn login_shell() -> (OsString, Vec<OsString>) {
    let shell = std::env::var_os("SHELL")
        .filter(|s| !s.is_empty() && Path::new(s).is_file())
        .or_else(|| {
            let fallbacks: &[&str] = if cfg!(target_os = "macos") {
                &["/bin/zsh", "/bin/bash", "/bin/sh"]
            } else {
                &["/bin/bash", "/bin/sh"]
            };
            fallbacks
                .iter()
                .find(|p| Path::new(p).is_file())
                .map(OsString::from)
        })
        .unwrap_or_else(|| OsString::from("/bin/sh"));
    (shell, vec![OsString::from("-l")])
}

pub(crate) fn handle(cx: &OpCx<'_>, op: TerminalsOp) -> Result<(), OpError> {
    match op {
        TerminalsOp::TermOpen { cwd, cols, rows } => open(cx, &cwd, cols, rows),
        TerminalsOp::TermInput { term, data } => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data.as_bytes())
                .map_err(|_| TermError::NotBase64)?;
            let inner = cx.hub.lock();
            let t = inner.terminals.owned(cx.client, "term_input", &term)?;
            if bytes.is_empty() {
                return Ok(());
            }
            match t.input.try_send(bytes) {
                Ok(()) => Ok(()),
                // The shell is gone and its exit is on its way: nothing to write to.
                Err(mpsc::error::TrySendError::Closed(_)) => Ok(()),
                Err(mpsc::error::TrySendError::Full(_)) => Err(TermError::InputFull.into()),
            }
        }
        TerminalsOp::TermResize { term, cols, rows } => {
            let size = TermSize::from_request(cols, rows);
            let inner = cx.hub.lock();
            let t = inner.terminals.owned(cx.client, "term_resize", &term)?;
            // A pty whose shell just exited may refuse; its exit follows anyway.
            let _ = t.resizer.resize(pty::pty_size(size));
            Ok(())
        }
        TerminalsOp::TermClose { term } => {
            let mut inner = cx.hub.lock();
            inner.terminals.owned(cx.client, "term_close", &term)?;
            if let Some(t) = inner.terminals.map.get_mut(&TermId(term))
                && let Some(close) = t.close.take()
            {
                let _ = close.send(());
            }
            Ok(())
        }
    }
}

fn open(cx: &OpCx<'_>, cwd: &str, cols: Option<i64>, rows: Option<i64>) -> Result<(), OpError> {
    let (known, secret) = {
        let inner = cx.hub.lock();
        (
            files::known_dirs(&inner, &cx.hub.config.home),
            files::credentials(&cx.hub.config.home, &cx.hub.config.user_home),
        )
    };
    let rule = files::Rule::new(&cx.hub.config.user_home, &known, &secret);
    let real = rule
        .check("term_open", cwd, files::Scope::Known)
        .map_err(TermError::from)?;
    if !real.is_dir() {
        return Err(TermError::NotADirectory {
            path: cwd.to_string(),
        }
        .into());
    }
    let (program, args) = login_shell();
    let spec = ProcessSpec {
        program,
        args,
        cwd: real,
        ..ProcessSpec::default()
    };
    cx.hub.open_process(
        cx.client,
        spec,
        TermSize::from_request(cols, rows),
        |inner, id| {
            cx.reply_locked(
                inner,
                DaemonEvent::TermOpened {
                    term: id.to_string(),
                },
            )
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests;
