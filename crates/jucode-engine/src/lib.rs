//! The one interface every hosted coding agent sits behind, and the serve-v2 process engine.
//!
//! An engine is started for one session ([`EngineFactory::start`] with a [`StartSpec`]) and then
//! is nothing but two channels in an [`EngineHandle`]: serve-v2 ops in, serve-v2 events out
//! (ending with [`EngineOutput::Exited`]). The hub never learns how an engine is built. Start
//! reading at [`EngineFactory`]; [`process::ServeProcess`] runs any program that speaks the
//! serve protocol v2 on its stdio.

pub mod agent;
mod events;
pub mod process;

pub use events::{Events, TryRecvError};

use std::path::PathBuf;

use jucode_protocol::Object;
use jucode_protocol::serve::{Event, TranscriptItem};
use tokio::sync::mpsc;

/// Everything an engine needs to start a session.
#[derive(Debug, Clone)]
pub struct StartSpec {
    /// The session id: also the engine's conversation id.
    pub session: String,
    /// The directory the session works in.
    pub cwd: PathBuf,
    /// Extra directories the session may work in (a project's `dirs`).
    pub extra_dirs: Vec<PathBuf>,
    /// The client's `options` (approval mode, model, engine-specific fields).
    pub options: Object,
    /// Continue a conversation saved earlier under this id rather than start a new one.
    pub resume: bool,
    /// The long-lived agent this session runs as, when it is one. Its settings (approval
    /// mode, sandbox, network, directories, command rules) come in `options` like a client's.
    pub agent: Option<agent::AgentSeat>,
}

/// What comes out of a running engine.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineOutput {
    /// A serve-v2 event, without `session` (the hub adds it).
    Event(Event),
    /// An `assistant_delta` event with no field but its text: the same event as
    /// `{"type":"assistant_delta","delta":<text>}`, kept out of a map because a turn streams
    /// thousands of them. An engine may send either form.
    Delta(String),
    /// The engine has stopped; nothing follows. `error` says why when it was not asked to.
    Exited { error: Option<String> },
}

impl EngineOutput {
    /// The output as a serve-v2 event (a [`EngineOutput::Delta`] in its map form); `None` for
    /// [`EngineOutput::Exited`]. For consumers with no use for the delta's short form.
    pub fn into_event(self) -> Option<Event> {
        match self {
            EngineOutput::Event(event) => Some(event),
            EngineOutput::Delta(text) => Some(delta_event(text)),
            EngineOutput::Exited { .. } => None,
        }
    }
}

/// The map form of [`EngineOutput::Delta`].
pub fn delta_event(text: String) -> Event {
    let mut map = jucode_protocol::Object::new();
    map.insert("type".into(), "assistant_delta".into());
    map.insert("delta".into(), text.into());
    Event(map)
}

/// A running engine, as the hub holds it.
#[derive(Debug)]
pub struct EngineHandle {
    /// Ops for the engine, in order. Dropping the sender asks the engine to stop.
    pub ops: mpsc::UnboundedSender<Object>,
    /// The engine's events, ending with [`EngineOutput::Exited`].
    pub events: Events,
}

/// Why an engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{0}")]
    Unavailable(String),
    #[error("could not start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    BadOptions(String),
}

/// Starts engines of one kind (`jucode`, `claude`, …).
pub trait EngineFactory: Send + Sync {
    /// Starts an engine for one session. Must not block: slow start-up work belongs in the
    /// engine's own tasks, reported through its events.
    fn start(&self, spec: StartSpec) -> Result<EngineHandle, EngineError>;

    /// Whether a session of this engine is open only at its first `startup` event (Codex
    /// opens its thread after the process is up). The hub then answers `session_create` at
    /// that event, or with an error when the engine stops before it.
    fn opens_at_startup(&self) -> bool {
        false
    }

    /// Whether the engine names a new session itself: its first `startup` carries the
    /// conversation id in `session_id` (Codex names its thread only once it is open), and the
    /// hub lists and answers `session_create` under that id instead of the one it started the
    /// engine with. Meaningful with [`EngineFactory::opens_at_startup`].
    fn names_its_session(&self) -> bool {
        false
    }

    /// Whether a session runs whatever program the client names in its options (an ACP
    /// session runs `options.command`): only local clients may start one.
    fn runs_named_program(&self) -> bool {
        false
    }

    /// Whether sessions read `mcp_servers` from the jucode home's `config.json` and take the
    /// serve protocol's `mcp_set`/`mcp_remove`/`mcp_toggle`: the daemon sends them a change it
    /// saved to that file, so they reconnect.
    fn reads_mcp_config(&self) -> bool {
        false
    }

    /// Whether sessions may run through the JuCode gateway (`options.jucode_gateway`): the
    /// engine then takes the endpoint and key from its own host configuration, never from a
    /// client, and takes `set_gateway` (restarting on the same conversation).
    fn takes_gateway(&self) -> bool {
        false
    }

    /// Whether the engine keeps a conversation's name itself and takes a `rename` op (the
    /// daemon forwards a title a client sets).
    fn keeps_titles(&self) -> bool {
        false
    }

    /// The conversation `session` holds so far, read from the engine's saved copy, when the
    /// engine keeps one the daemon may read before the session starts. A reopened session's
    /// first snapshot shows it at once; the engine's own `transcript` comes after start-up.
    /// Called off the async threads; `session` is a client's string and must be checked.
    fn saved_transcript(&self, session: &str) -> Option<Vec<TranscriptItem>> {
        let _ = session;
        None
    }

    /// Whether [`EngineFactory::saved_transcript`] is a true account of what a session took:
    /// a user message the engine took is in it by the time the hub looks (the engine stopped,
    /// or the daemon restarted), one it did not take is not, and a session with no saved copy
    /// took nothing. The built-in engine saves (fsynced) before it echoes; the Claude Code and
    /// Codex adapters hand a message to their CLI only after echoing it, and the CLI saves it
    /// as the turn begins. The hub then checks a message it handed over but never saw echoed
    /// (a crash, an engine that died) against it, and sends it again only when it is absent.
    fn transcript_is_durable(&self) -> bool {
        false
    }

    /// Conversations this kind of engine saved for `cwd`, whoever ran them (a TUI, another
    /// tool), newest first: what `session_history` lists beside the daemon's own sessions.
    fn saved_conversations(&self, cwd: &std::path::Path) -> Vec<SavedConversation> {
        let _ = cwd;
        Vec::new()
    }

    /// The engine's own terminal interface on `spec`'s conversation, for the TUI hand-off
    /// (`session_tui`): `None` when this kind of engine has none. Called off the async
    /// threads (it may look for a binary and a saved conversation on disk).
    fn tui_command(&self, spec: &TuiSpec) -> Option<Result<TuiCommand, EngineError>> {
        let _ = spec;
        None
    }

    /// The TUI of `spec` exited. `before` is what [`EngineFactory::saved_conversations`]
    /// listed for its directory just before it started: an engine whose TUI may have begun a
    /// new conversation (plain `codex`) links that one to the session here, so the engine
    /// resumes it. Called off the async threads.
    fn tui_finished(&self, spec: &TuiSpec, before: &[SavedConversation]) {
        let _ = (spec, before);
    }
}

/// What the TUI hand-off knows of the session it moves into the engine's TUI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuiSpec {
    pub session: String,
    pub cwd: PathBuf,
    pub extra_dirs: Vec<PathBuf>,
    /// The session's approval mode and model as its engine last reported them.
    pub approval_mode: Option<jucode_protocol::ApprovalMode>,
    pub model: Option<String>,
    /// The session's saved gateway flag: its TUI runs through the gateway as its engine did.
    pub gateway: bool,
}

/// A program to run on a pty for the TUI hand-off: started in the session's directory with the
/// daemon's environment plus `env`, less every name in `env_remove`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuiCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub env_remove: Vec<String>,
}

/// A conversation an engine keeps on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedConversation {
    /// The engine's conversation id: the id to `session_open` it under.
    pub session: String,
    /// A name the engine gave it, else the first thing the user said.
    pub title: String,
    /// When it last changed, in ms since the epoch.
    pub updated_at: u64,
    /// How many user and assistant messages it holds.
    pub entries: usize,
}

/// The capacity of an engine's event channel: a burst of deltas fits, and a hub that falls
/// behind slows the engine down instead of growing memory.
pub const EVENT_BUFFER: usize = 1024;

/// Returns a connected pair: the handle for the hub, and the engine's own ends.
pub fn channel() -> (
    EngineHandle,
    mpsc::UnboundedReceiver<Object>,
    mpsc::Sender<EngineOutput>,
) {
    let (ops_tx, ops_rx) = mpsc::unbounded_channel();
    let (ev_tx, ev_rx) = mpsc::channel(EVENT_BUFFER);
    (
        EngineHandle {
            ops: ops_tx,
            events: ev_rx.into(),
        },
        ops_rx,
        ev_tx,
    )
}
