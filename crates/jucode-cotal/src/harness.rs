//! The seam towards the agent. The seat drives one [`Harness`]; the jcode side
//! (a private jcode instance over its Harness API) implements it, and tests use
//! an honest scripted double (`testkit`, feature `testkit`).

use std::path::PathBuf;

use async_trait::async_trait;
use tokio::sync::{broadcast, oneshot};

/// Why a turn did not succeed. `code` is the harness's native error code
/// (`rate_limit`, `overloaded`, …), relayed as the presence condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnFailure {
    pub code: Option<String>,
    pub message: String,
}

/// Things the harness reports on its own (turns the seat did not start, work progress).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HarnessSignal {
    /// Any work event (a token, a tool call): presence `activeAt`.
    Activity,
    /// A turn the seat did not start (someone at the TUI) began: clears the condition.
    TurnStarted,
    /// That turn ended.
    TurnEnded { ok: bool },
    /// The harness reported a failure condition (e.g. a provider rate limit).
    Condition {
        code: String,
        message: Option<String>,
    },
    /// The connection to the harness dropped and is being rebuilt.
    Reconnecting,
    /// The connection is back.
    Reconnected,
}

/// How the harness took a soft interrupt it accepted. The seat acks the
/// interrupt's messages only once the turn that carried them succeeded; in
/// both cases `result` resolves with the outcome of THAT turn (a dropped
/// sender counts as a failed turn).
#[derive(Debug)]
pub enum Steered {
    /// A turn was open when the request arrived: the text entered it (injected,
    /// or run as its follow-up) or, when a turn the seat did not start (the
    /// TUI) began as that one ended, possibly that later turn; `result` is the
    /// outcome of the turn it really entered. Its failure is that turn's own,
    /// so the seat adds no back-off for it.
    Joined {
        result: oneshot::Receiver<Result<(), TurnFailure>>,
    },
    /// No turn was open: the text runs as a turn of its own, signalled
    /// `TurnStarted`/`TurnEnded` like a TUI turn; `result` resolves when it ended.
    OwnTurn {
        result: oneshot::Receiver<Result<(), TurnFailure>>,
    },
}

/// Where the agent's append-only session journal lives (the event plane's source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalSource {
    /// `<JCODE_HOME>/sessions`.
    pub sessions_dir: PathBuf,
    /// The harness session id; also the AG-UI thread id.
    pub session_id: String,
}

impl JournalSource {
    pub fn journal_path(&self) -> PathBuf {
        self.sessions_dir
            .join(format!("{}.journal.jsonl", self.session_id))
    }
    pub fn snapshot_path(&self) -> PathBuf {
        self.sessions_dir.join(format!("{}.json", self.session_id))
    }
}

/// One agent session the seat drives.
#[async_trait]
pub trait Harness: Send + Sync + 'static {
    /// Run one turn with `text` as the user message and return when it ended.
    async fn send_turn(&self, text: &str) -> Result<(), TurnFailure>;
    /// [`Harness::send_turn`], firing `accepted` once the harness accepted the
    /// message (jcode: `message_accepted`); a send it never accepted drops
    /// `accepted` unfired. What rides the message (workflow run turns) counts
    /// as shown from that moment. The fallback knows acceptance only from a
    /// turn that ended well, which is late but never wrong.
    async fn send_turn_accepted(
        &self,
        text: &str,
        accepted: oneshot::Sender<()>,
    ) -> Result<(), TurnFailure> {
        let res = self.send_turn(text).await;
        if res.is_ok() {
            let _ = accepted.send(());
        }
        res
    }
    /// Inject `text` into the turn that is running now (jcode `soft_interrupt`),
    /// or run it as its own turn when none is open. An error means it was not
    /// accepted; the seat then queues the text for the next turn.
    async fn soft_interrupt(&self, text: &str) -> Result<Steered, TurnFailure>;
    /// Signals the harness raises on its own.
    fn signals(&self) -> broadcast::Receiver<HarnessSignal>;
    /// The journal the event plane reads, if the harness has one.
    fn journal(&self) -> Option<JournalSource>;
    /// Model label and provider for the presence card (`meta.model`, `meta.provider`).
    fn model_label(&self) -> Option<(String, Option<String>)> {
        None
    }
    /// The seat's presence bind is confirmed (its first presence write
    /// landed; never during a broker outage). Called once; a harness delivers
    /// its post-join startup turn only from here.
    fn joined(&self) {}
    /// Stop the agent; called once when the seat shuts down.
    async fn shutdown(&self);
}

/// Re-exported so implementors of [`Harness`] need no direct dependency.
pub use async_trait::async_trait as async_trait_reexport;
