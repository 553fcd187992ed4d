//! One session: the actor that reads ops, and the turns it runs.
//!
//! The actor ([`run`]) owns the queue and the running turn's task; it answers every op at
//! once, even mid-turn. A turn is a spawned task that streams the model, gates and runs tools
//! and ends with `usage`, `context_usage`, `status:"ready"`. State both need (approval mode,
//! waiting approvals, the conversation) sits in [`Ctx`] behind a std mutex that is never held
//! across an await. Interrupt and steer abort the turn's task: dropping it drops a running
//! command, which kills its process group.
//!
//! This file holds [`Ctx`] and the gate; `actor` is the op loop, `turns` a turn's model loop and
//! `calls` how one tool call is gated and run.

mod actor;
mod calls;
mod turns;

pub(crate) use actor::run;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use jucode_clock::{Clock, SystemClock};
use jucode_engine::EngineOutput;
use jucode_engine::agent::AgentSeat;
use jucode_protocol::serve::{Event, TranscriptItem};
use jucode_protocol::{ApprovalMode, Object};
use jucode_sandbox::{CommandRule, RuleAction};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::actions::{self, DeferredAction};
use crate::config::{Config, ConfigError};
use crate::images;
use crate::log::{Record, SessionLog};
use crate::model::{
    Completion, Delta, Images, Message, ModelClient, ModelError, NO_IMAGES, Request, ToolCall,
    ToolSpec, Usage,
};
use crate::prompt;
use crate::tools::{self, Kind, Prepared, ToolEnv};
use jucode_mcp::McpManager;

/// How long a turn waits for MCP servers still connecting before its first request.
const MCP_CONNECT_WAIT: Duration = Duration::from_secs(10);

/// How the turn that follows a call's gate goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Run now; `sandboxed` says whether a command goes through bubblewrap.
    Run { sandboxed: bool },
    /// A person decides (or, unattended, the call is deferred).
    Ask,
    /// `auto`: the safety model decides between running and asking.
    Safety,
}

/// Whether a call of `kind` needs a person under `mode`.
pub fn gate(mode: ApprovalMode, kind: Kind, allowlisted: bool) -> Gate {
    use ApprovalMode as M;
    let run = |sandboxed| Gate::Run { sandboxed };
    match kind {
        Kind::Read | Kind::Agent => run(true),
        _ if allowlisted => run(kind == Kind::Command && mode != M::FullAccess),
        Kind::Edit => match mode {
            M::Manual | M::Plan => Gate::Ask,
            _ => run(true),
        },
        Kind::Command => match mode {
            M::Manual | M::Plan => Gate::Ask,
            M::FullAccess => run(false),
            M::AutoEdit | M::Auto => run(true),
        },
        Kind::Escalation | Kind::External => match mode {
            M::FullAccess => run(false),
            M::Auto => Gate::Safety,
            _ => Gate::Ask,
        },
    }
}

/// How a person answered (or the session stood in for them).
#[derive(Debug)]
enum Answer {
    Allow {
        hunks: Option<Vec<String>>,
    },
    Deny,
    /// Unattended: the call became a deferred action; the model gets this text.
    Deferred(String),
}

struct Pending {
    call: ToolCall,
    prepared: Prepared,
    /// Asked because a command rule says `ask`: a person answers, whatever the mode becomes.
    by_rule: bool,
    tx: oneshot::Sender<Answer>,
}

/// The `approval_request` fields of a call waiting for a person.
fn card(call: &ToolCall, prepared: &Prepared) -> Value {
    json!({
        "call_id": call.id,
        "name": call.name,
        "summary": prepared.summary(),
        "subagent_id": null,
        "hunks": prepared.hunks(),
    })
}

/// What actor and turns share.
struct State {
    mode: ApprovalMode,
    attended: bool,
    pending: Vec<Pending>,
    always: HashSet<String>,
    messages: Vec<Message>,
    open_actions: Vec<DeferredAction>,
    decided: HashMap<String, bool>,
    /// Every decided action's id: a decision sent again (after a restart) is not an error.
    decided_ids: HashSet<String>,
    model_override: Option<String>,
    /// Tokens of the last request (input + output): the context in use.
    context_tokens: u64,
    turns: u64,
    first_request: Option<String>,
    title: Option<String>,
    last_model_status: Option<Value>,
}

pub(crate) struct Ctx {
    events: mpsc::Sender<EngineOutput>,
    session: String,
    cwd: PathBuf,
    home: PathBuf,
    config_path: PathBuf,
    chat: bool,
    env: ToolEnv,
    /// The long-lived agent this session runs as: its prompt and tools.
    seat: Option<AgentSeat>,
    /// The agent's `command_rules`, for escalations (and `forbid` for every command).
    command_rules: Vec<CommandRule>,
    version: String,
    state: Mutex<State>,
    log: Mutex<Option<SessionLog>>,
    /// Messages decided actions send back into the session.
    internal: mpsc::UnboundedSender<String>,
    /// This session's MCP servers (from config.json `mcp_servers`).
    mcp: McpManager,
}

/// Everything a session starts from.
pub(crate) struct Setup {
    pub session: String,
    pub cwd: PathBuf,
    pub home: PathBuf,
    pub chat: bool,
    pub env: ToolEnv,
    pub mode: ApprovalMode,
    pub model: Option<String>,
    pub resume: bool,
    pub seat: Option<AgentSeat>,
    pub command_rules: Vec<CommandRule>,
    pub version: String,
    /// An error to report once the startup batch is out (bad options).
    pub warning: Option<String>,
}

fn now_ms() -> u64 {
    SystemClock::new().now_ms()
}

impl Ctx {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave State half-updated in a way that
        // matters more than stopping the session would.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn emit(&self, kind: &str, fields: Value) {
        let _ = self
            .events
            .send(EngineOutput::Event(Event::new(kind, fields)))
            .await;
    }

    async fn error(&self, message: impl Into<String>) {
        self.emit("error", json!({"message": message.into()})).await;
    }

    async fn info(&self, message: impl Into<String>) {
        self.emit("info", json!({"message": message.into()})).await;
    }

    async fn status(&self, message: &str) {
        self.emit("status", json!({"message": message})).await;
    }

    /// Appends to the conversation log; a failed write is reported, not fatal.
    async fn record(&self, record: Record) {
        let result = {
            let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
            match log.as_mut() {
                Some(log) => log.append(&record).map_err(|e| e.to_string()),
                None => Ok(()),
            }
        };
        if let Err(e) = result {
            self.error(format!("the conversation could not be saved: {e}"))
                .await;
        }
    }

    async fn push_message(&self, message: Message) {
        self.state().messages.push(message.clone());
        self.record(Record::Message {
            message,
            at: now_ms(),
        })
        .await;
    }

    fn config(&self) -> Result<Config, ConfigError> {
        Config::load(&self.config_path, |var| std::env::var(var).ok())
    }

    fn model_for(&self, config: &Config) -> String {
        self.state()
            .model_override
            .clone()
            .unwrap_or_else(|| config.model.clone())
    }

    fn window_for(config: &Config, model: &str) -> (u64, u64) {
        config
            .entry(model)
            .map_or((config.context_window, config.max_output_tokens), |e| {
                (e.context_window, e.max_output_tokens)
            })
    }

    /// The turn's system prompt; an agent's part is read again every turn (it rewrites its
    /// brief), off the async threads since the host reads files.
    async fn system_prompt(&self) -> String {
        let mut prompt = if self.chat {
            prompt::chat(&self.cwd)
        } else {
            prompt::coding(&self.cwd, &self.env.policy)
        };
        if let Some(seat) = &self.seat {
            let host = seat.host.clone();
            let agent = tokio::task::spawn_blocking(move || host.prompt())
                .await
                .unwrap_or_default();
            if !agent.trim().is_empty() {
                prompt.push('\n');
                prompt.push_str(agent.trim_end());
                prompt.push('\n');
            }
        }
        prompt
    }

    /// Whether a call cleared to run goes through the sandbox. An agent's plain commands
    /// always do: its `sandbox` setting says where they run (full-access being no sandbox),
    /// whatever the approval mode; otherwise the gate's or the mode's choice stands.
    fn sandboxed(&self, prepared: &Prepared, chosen: bool) -> bool {
        (self.seat.is_some() && prepared.kind() == Kind::Command) || chosen
    }

    fn model_status(&self) -> Value {
        match self.config() {
            Ok(config) => {
                let model = self.model_for(&config);
                let (window, max_out) = Ctx::window_for(&config, &model);
                json!({
                    "provider": config.protocol.as_str(),
                    "model": model,
                    "reasoning_effort": null,
                    "context_window": window,
                    "context_limit": window.saturating_sub(max_out),
                    "max_output_tokens": max_out,
                    "reasoning_efforts": [],
                    "state": "ready",
                })
            }
            Err(_) => json!({
                "provider": null,
                "model": self.state().model_override.clone().unwrap_or_default(),
                "reasoning_effort": null,
                "context_window": 0,
                "context_limit": 0,
                "max_output_tokens": 0,
                "reasoning_efforts": [],
                "state": "unconfigured",
            }),
        }
    }

    /// Emits `model_status` when it changed since the last one.
    async fn emit_model_status(&self, force: bool) {
        let status = self.model_status();
        {
            let mut state = self.state();
            if !force && state.last_model_status.as_ref() == Some(&status) {
                return;
            }
            state.last_model_status = Some(status.clone());
        }
        self.emit("model_status", status).await;
    }

    async fn startup(&self, transcript: Option<Vec<TranscriptItem>>) {
        let (model, window) = match self.config() {
            Ok(config) => {
                let model = self.model_for(&config);
                let window = Ctx::window_for(&config, &model).0;
                (model, window)
            }
            Err(_) => (String::new(), 0),
        };
        self.emit(
            "startup",
            json!({
                "version": self.version,
                "session_id": self.session,
                "profile_dir": self.home.display().to_string(),
                "config_path": self.config_path.display().to_string(),
                "cwd": self.cwd.display().to_string(),
                "model": model,
                "context_window": window,
            }),
        )
        .await;
        self.emit_model_status(true).await;
        self.emit("command_list", json!({"commands": commands()}))
            .await;
        let mode = self.state().mode;
        self.emit("approval_mode", json!({"mode": mode.as_str()}))
            .await;
        self.emit("mcp_servers", self.mcp.servers_event()).await;
        if let Some(items) = transcript {
            self.emit("transcript", json!({"items": items})).await;
        }
    }
}

/// Whether an approved call runs in the sandbox.
fn runs_sandboxed(prepared: &Prepared, mode: ApprovalMode) -> bool {
    match prepared.kind() {
        Kind::Command => mode != ApprovalMode::FullAccess,
        Kind::Escalation | Kind::External => false,
        Kind::Read | Kind::Edit | Kind::Agent => true,
    }
}

/// After the 1st and 3rd turns, then every 5th.
pub fn title_due(turns: u64) -> bool {
    turns == 1 || turns == 3 || (turns > 0 && turns.is_multiple_of(5))
}

/// Exponential backoff with jitter: base·2^(attempt-1), capped at 30 s, then scaled by a
/// random factor in [0.5, 1].
pub fn backoff(base_ms: u64, attempt: u32) -> u64 {
    let exp = base_ms.saturating_mul(1u64 << attempt.saturating_sub(1).min(16));
    let capped = exp.min(30_000);
    let [r] = actions::random_bytes::<1>();
    capped / 2 + capped / 2 * u64::from(r) / 255
}

/// Reads the images `messages` refer to that `images` lacks, off the async threads.
async fn load_images(images: Images, messages: &[Message]) -> Images {
    let paths: Vec<String> = messages
        .iter()
        .filter_map(|m| match m {
            Message::User { images, .. } => Some(images.iter()),
            _ => None,
        })
        .flatten()
        .filter(|p| !images.contains_key(*p))
        .cloned()
        .collect();
    if paths.is_empty() {
        return images;
    }
    tokio::task::spawn_blocking(move || {
        let mut images = images;
        crate::images::load_missing(&mut images, &paths);
        images
    })
    .await
    .unwrap_or_default()
}

async fn blocking(f: impl FnOnce() -> (String, bool) + Send + 'static) -> (String, bool) {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| (format!("the tool failed: {e}"), true))
}

fn commands() -> Value {
    json!([
        {"command": "/model", "marker": "", "args": "[name]", "description": "list models, or switch to one"},
        {"command": "/compact", "marker": "", "args": "", "description": "summarise the conversation to free context"},
        {"command": "/help", "marker": "", "args": "", "description": "list commands"},
        {"command": "/quit", "marker": "", "args": "", "description": "end the session"},
    ])
}

enum TurnInput {
    /// A message and the paths of its (checked) images.
    User(String, Vec<String>),
    Continue,
    Compact,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn gates_follow_the_approval_modes() {
        use ApprovalMode as M;
        let run = Gate::Run { sandboxed: true };
        assert_eq!(gate(M::Manual, Kind::Read, false), run);
        assert_eq!(gate(M::Manual, Kind::Agent, false), run);
        assert_eq!(gate(M::Manual, Kind::Edit, false), Gate::Ask);
        assert_eq!(gate(M::Manual, Kind::Command, false), Gate::Ask);
        assert_eq!(gate(M::Manual, Kind::Command, true), run);
        assert_eq!(gate(M::AutoEdit, Kind::Edit, false), run);
        assert_eq!(gate(M::AutoEdit, Kind::Command, false), run);
        assert_eq!(gate(M::AutoEdit, Kind::Escalation, false), Gate::Ask);
        assert_eq!(gate(M::Auto, Kind::Escalation, false), Gate::Safety);
        assert_eq!(gate(M::Auto, Kind::External, false), Gate::Safety);
        assert_eq!(
            gate(M::FullAccess, Kind::Command, false),
            Gate::Run { sandboxed: false }
        );
        assert_eq!(
            gate(M::FullAccess, Kind::Escalation, false),
            Gate::Run { sandboxed: false }
        );
    }

    #[test]
    fn titles_come_after_turns_1_3_5_10() {
        let due: Vec<u64> = (0..=16).filter(|t| title_due(*t)).collect();
        assert_eq!(due, vec![1, 3, 5, 10, 15]);
    }

    #[test]
    fn backoff_doubles_with_jitter_and_a_cap() {
        for attempt in 1..=4u32 {
            let full = 100u64 << (attempt - 1);
            let d = backoff(100, attempt);
            assert!(d >= full / 2 && d <= full, "{attempt}: {d}");
        }
        assert!(backoff(1_000, 30) <= 30_000);
    }
}
