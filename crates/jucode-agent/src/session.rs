//! One session: the actor that reads ops, and the turns it runs.
//!
//! The actor ([`run`]) owns the queue and the running turn's task; it answers every op at
//! once, even mid-turn. A turn is a spawned task that streams the model, gates and runs tools
//! and ends with `usage`, `context_usage`, `status:"ready"`. State both need (approval mode,
//! waiting approvals, the conversation) sits in [`Ctx`] behind a std mutex that is never held
//! across an await. Interrupt and steer abort the turn's task: dropping it drops a running
//! command, which kills its process group.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use jucode_engine::EngineOutput;
use jucode_protocol::serve::{Event, TranscriptItem};
use jucode_protocol::{ApprovalMode, Object};
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
        Kind::Read => run(true),
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
    extra_dirs: Vec<PathBuf>,
    env: ToolEnv,
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
    pub extra_dirs: Vec<PathBuf>,
    pub env: ToolEnv,
    pub mode: ApprovalMode,
    pub model: Option<String>,
    pub resume: bool,
    pub version: String,
    /// An error to report once the startup batch is out (bad options).
    pub warning: Option<String>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
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

    fn system_prompt(&self) -> String {
        if self.chat {
            prompt::chat(&self.cwd)
        } else {
            let sandboxed = self.env.policy.mode != jucode_sandbox::Mode::FullAccess;
            prompt::coding(&self.cwd, &self.extra_dirs, sandboxed)
        }
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

    // ---- deferral ---------------------------------------------------------------------

    /// Turns a call that needs a person into a deferred action (or reuses an identical one)
    /// and returns what the model is told. `Err` carries a decision already made for an
    /// identical call: `true` runs it now.
    async fn defer(&self, call: &ToolCall, prepared: &Prepared) -> Result<String, bool> {
        let cwd = self.cwd.display().to_string();
        let digest = actions::digest(&call.name, &call.arguments, &cwd);
        let existing = {
            let state = self.state();
            if let Some(allow) = state.decided.get(&digest) {
                return Err(*allow);
            }
            state
                .open_actions
                .iter()
                .find(|a| a.digest == digest)
                .map(|a| a.id.clone())
        };
        if let Some(id) = existing {
            return Ok(actions::submitted_text(&id));
        }
        let created_at = now_ms();
        let action = DeferredAction {
            id: actions::new_id(created_at),
            session_id: self.session.clone(),
            cwd,
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            summary: prepared.summary(),
            subagent_id: None,
            digest,
            created_at,
        };
        // Saved before it is announced, so a restart can still decide it.
        self.record(Record::Deferred {
            action: action.clone(),
        })
        .await;
        self.state().open_actions.push(action.clone());
        let _ = self
            .events
            .send(EngineOutput::Event(Event(
                action.to_event().as_object().cloned().unwrap_or_default(),
            )))
            .await;
        Ok(actions::submitted_text(&action.id))
    }

    // ---- running tools ----------------------------------------------------------------

    /// Runs a prepared call and emits tool_start, tool_update…, tool_output.
    async fn run_tool(
        &self,
        call: &ToolCall,
        prepared: &Prepared,
        sandboxed: bool,
        hunks: Option<Vec<String>>,
    ) -> (String, bool) {
        self.emit("tool_start", json!({"call_id": call.id, "name": call.name}))
            .await;
        let (output, is_error) = self.execute(call, prepared, sandboxed, hunks).await;
        self.emit(
            "tool_output",
            json!({"call_id": call.id, "name": call.name, "output": output, "is_error": is_error}),
        )
        .await;
        (output, is_error)
    }

    async fn execute(
        &self,
        call: &ToolCall,
        prepared: &Prepared,
        sandboxed: bool,
        hunks: Option<Vec<String>>,
    ) -> (String, bool) {
        match prepared {
            Prepared::Bash(bash) => {
                let (tx, mut rx) = mpsc::unbounded_channel::<String>();
                let run = tools::bash::run(bash, &self.env, sandboxed, Some(tx));
                tokio::pin!(run);
                loop {
                    tokio::select! {
                        result = &mut run => return result,
                        Some(output) = rx.recv() => {
                            self.emit("tool_update", json!({"call_id": call.id, "name": call.name, "output": output})).await;
                        }
                    }
                }
            }
            Prepared::Read(read) => {
                let read = read.clone();
                blocking(move || tools::files::run_read(&read)).await
            }
            Prepared::Edit(edit) => {
                let edit = edit.clone();
                blocking(move || tools::files::run_edit(&edit, hunks.as_deref())).await
            }
            Prepared::Search(search) => {
                let search = search.clone();
                blocking(move || tools::search::run(&search)).await
            }
            Prepared::Mcp { name, arguments } => {
                match self.mcp.call(name, arguments.clone()).await {
                    Ok(result) => (tools::cap_output(&result.text), result.is_error),
                    Err(e) => (e.to_string(), true),
                }
            }
        }
    }

    /// Asks the safety model whether a call may run; any failure asks a person.
    async fn safety_check(&self, call: &ToolCall, prepared: &Prepared) -> bool {
        let Ok(config) = self.config() else {
            return false;
        };
        let Ok(client) = ModelClient::new(&config) else {
            return false;
        };
        let model = self.model_for(&config);
        let question =
            prompt::safety_request(&self.cwd, &call.name, &call.arguments, &prepared.summary());
        let messages = [Message::User {
            content: question,
            images: vec![],
        }];
        let answer = client
            .complete(Request {
                model: &model,
                system: prompt::SAFETY_SYSTEM,
                messages: &messages,
                tools: &[],
                max_tokens: 16,
                images: &NO_IMAGES,
            })
            .await;
        match answer {
            Ok(text) => prompt::safety_allows(&text),
            Err(e) => {
                tracing::warn!(session = %self.session, "safety check failed, asking: {e}");
                false
            }
        }
    }

    /// Checks a call against the built-in tools and the MCP tools connected now.
    fn prepare(&self, call: &ToolCall) -> Result<Prepared, String> {
        let mcp: HashSet<String> = self.mcp.tools().into_iter().map(|t| t.name).collect();
        tools::prepare(call, &self.env, |name| mcp.contains(name))
    }

    /// The built-in tools and the tools of the connected MCP servers.
    fn tool_specs(&self) -> Vec<ToolSpec> {
        let mut specs = tools::specs();
        specs.extend(self.mcp.tools().into_iter().map(|t| ToolSpec {
            name: t.name,
            description: t.description,
            parameters: t.input_schema,
        }));
        specs
    }

    /// Waits (bounded) for MCP servers that are still connecting, so a turn started right
    /// after the session sees their tools.
    async fn mcp_settled(&self) {
        let connecting = |mcp: &McpManager| {
            mcp.servers_event()["servers"]
                .as_array()
                .is_some_and(|list| list.iter().any(|s| s["state"] == "connecting"))
        };
        let mut changes = self.mcp.subscribe();
        let wait = async {
            while connecting(&self.mcp) {
                if changes.changed().await.is_err() {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(MCP_CONNECT_WAIT, wait).await;
    }

    /// One tool call of a turn, from gate to result; returns the tool message.
    async fn handle_call(&self, call: &ToolCall) -> Message {
        let result = |output: String, is_error: bool| Message::Tool {
            call_id: call.id.clone(),
            name: call.name.clone(),
            output,
            is_error,
        };
        let prepared = match self.prepare(call) {
            Ok(p) => p,
            Err(e) => {
                self.emit("tool_start", json!({"call_id": call.id, "name": call.name}))
                    .await;
                self.emit(
                    "tool_output",
                    json!({"call_id": call.id, "name": call.name, "output": e, "is_error": true}),
                )
                .await;
                return result(e, true);
            }
        };
        let decision = {
            let state = self.state();
            gate(
                state.mode,
                prepared.kind(),
                state.always.contains(&call.name),
            )
        };
        let decision = match decision {
            Gate::Safety if self.safety_check(call, &prepared).await => {
                Gate::Run { sandboxed: false }
            }
            Gate::Safety => Gate::Ask,
            other => other,
        };
        let (sandboxed, hunks) = match decision {
            Gate::Run { sandboxed } => (sandboxed, None),
            Gate::Ask | Gate::Safety => match self.ask(call, &prepared).await {
                Answer::Allow { hunks } => (runs_sandboxed(&prepared, self.state().mode), hunks),
                Answer::Deny => {
                    let text = format!("The user denied this {} call.", call.name);
                    self.emit(
                        "tool_output",
                        json!({"call_id": call.id, "name": call.name, "output": text, "is_error": true}),
                    )
                    .await;
                    return result(text, true);
                }
                Answer::Deferred(text) => {
                    self.emit(
                        "tool_output",
                        json!({"call_id": call.id, "name": call.name, "output": text, "is_error": false}),
                    )
                    .await;
                    return result(text, false);
                }
            },
        };
        let (output, is_error) = self.run_tool(call, &prepared, sandboxed, hunks).await;
        result(output, is_error)
    }

    /// Waits for a person, or defers when nobody watches.
    async fn ask(&self, call: &ToolCall, prepared: &Prepared) -> Answer {
        let attended = self.state().attended;
        if !attended {
            return match self.defer(call, prepared).await {
                Ok(text) => Answer::Deferred(text),
                Err(true) => Answer::Allow { hunks: None },
                Err(false) => Answer::Deny,
            };
        }
        let (tx, rx) = oneshot::channel();
        self.state().pending.push(Pending {
            call: call.clone(),
            prepared: prepared.clone(),
            tx,
        });
        self.emit("approval_request", card(call, prepared)).await;
        // A dropped sender (interrupt) ends the turn anyway; deny to be safe.
        rx.await.unwrap_or(Answer::Deny)
    }

    // ---- turns ------------------------------------------------------------------------

    /// Streams one model response, retrying before anything was shown.
    async fn stream(
        &self,
        client: &ModelClient,
        config: &Config,
        req: Request<'_>,
    ) -> Result<Completion, ModelError> {
        let mut attempt = 0u32;
        loop {
            let error = match client.open(req).await {
                Ok(mut stream) => {
                    let (mut thinking, mut answering) = (false, false);
                    let outcome = loop {
                        match stream.next().await {
                            Ok(Some(deltas)) => {
                                for delta in deltas {
                                    match delta {
                                        Delta::Reasoning(d) => {
                                            if !thinking {
                                                thinking = true;
                                                self.emit("thinking_start", json!({})).await;
                                            }
                                            self.emit("reasoning_delta", json!({"delta": d})).await;
                                        }
                                        Delta::Text(d) => {
                                            if !answering {
                                                answering = true;
                                                self.emit("assistant_start", json!({})).await;
                                            }
                                            self.emit("assistant_delta", json!({"delta": d})).await;
                                        }
                                    }
                                }
                            }
                            Ok(None) => break Ok(()),
                            Err(e) => break Err((e, thinking || answering)),
                        }
                    };
                    match outcome {
                        Ok(()) => return Ok(stream.finish()),
                        // Output already shown cannot be taken back: no retry then.
                        Err((e, true)) => return Err(e),
                        Err((e, false)) => e,
                    }
                }
                Err(e) => e,
            };
            if !error.retryable() || attempt >= config.retry_attempts {
                return Err(error);
            }
            attempt += 1;
            let delay = backoff(config.retry_base_delay_ms, attempt);
            self.emit(
                "retrying",
                json!({
                    "attempt": attempt,
                    "max_attempts": config.retry_attempts,
                    "reason": error.reason(),
                    "delay_ms": delay,
                }),
            )
            .await;
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
    }

    /// A whole turn: the model, its tool calls, until it answers without calling tools.
    async fn turn(self: Arc<Self>, input: TurnInput) {
        let latest = match &input {
            TurnInput::User(content, images) => {
                let mut event = json!({"content": content});
                if !images.is_empty() {
                    event["images"] = json!(images);
                }
                self.emit("user_message", event).await;
                {
                    let mut state = self.state();
                    state.turns += 1;
                    if state.first_request.is_none() {
                        state.first_request = Some(content.clone());
                    }
                }
                self.push_message(Message::User {
                    content: content.clone(),
                    images: images.clone(),
                })
                .await;
                Some(content.clone())
            }
            TurnInput::Continue => None,
            TurnInput::Compact => {
                self.manual_compaction().await;
                self.status("ready").await;
                return;
            }
        };
        let config = match self.config() {
            Ok(config) => config,
            Err(e) => {
                self.emit_model_status(false).await;
                self.error(e.to_string()).await;
                self.status("ready").await;
                return;
            }
        };
        self.emit_model_status(false).await;
        let client = match ModelClient::new(&config) {
            Ok(c) => c,
            Err(e) => {
                self.error(e.to_string()).await;
                self.status("ready").await;
                return;
            }
        };
        let model = self.model_for(&config);
        let (window, max_out) = Ctx::window_for(&config, &model);
        // Compact before the request when the last one came close to the window.
        let near_full = self.state().context_tokens > window.saturating_sub(max_out) * 8 / 10;
        if near_full {
            self.compact(&client, &model, max_out, 1).await;
        }
        let system = self.system_prompt();
        self.mcp_settled().await;
        let mut usage = Usage::default();
        let mut reply = String::new();
        let mut images = Images::new();
        loop {
            self.emit("connecting", json!({})).await;
            // Servers may connect or go away between requests.
            let specs = self.tool_specs();
            let messages = self.state().messages.clone();
            images = load_images(images, &messages).await;
            let completion = self
                .stream(
                    &client,
                    &config,
                    Request {
                        model: &model,
                        system: &system,
                        messages: &messages,
                        tools: &specs,
                        max_tokens: max_out,
                        images: &images,
                    },
                )
                .await;
            let completion = match completion {
                Ok(c) => c,
                Err(e) => {
                    self.error(e.to_string()).await;
                    break;
                }
            };
            usage.add(completion.usage);
            self.state().context_tokens =
                completion.usage.input_tokens + completion.usage.output_tokens;
            if !completion.text.is_empty() {
                reply = completion.text.clone();
            }
            let calls = completion.tool_calls.clone();
            self.push_message(Message::Assistant {
                content: completion.text,
                reasoning: completion.reasoning,
                signature: completion.signature,
                tool_calls: completion.tool_calls,
            })
            .await;
            if calls.is_empty() {
                break;
            }
            for call in &calls {
                let message = self.handle_call(call).await;
                self.push_message(message).await;
            }
        }
        self.emit(
            "usage",
            json!({
                "input_tokens": usage.input_tokens,
                "cached_input_tokens": usage.cached_input_tokens,
                "output_tokens": usage.output_tokens,
                "reasoning_tokens": usage.reasoning_tokens,
            }),
        )
        .await;
        let tokens = self.state().context_tokens;
        self.emit(
            "context_usage",
            json!({"tokens": tokens, "tokenizer": "api", "cost": 0.0}),
        )
        .await;
        self.status("ready").await;
        if let Some(latest) = latest {
            let turns = self.state().turns;
            if title_due(turns) {
                let ctx = self.clone();
                tokio::spawn(async move { ctx.retitle(&latest, &reply).await });
            }
        }
    }

    async fn retitle(&self, latest: &str, reply: &str) {
        let Ok(config) = self.config() else { return };
        let Ok(client) = ModelClient::new(&config) else {
            return;
        };
        let (first, current) = {
            let state = self.state();
            (
                state.first_request.clone().unwrap_or_default(),
                state.title.clone(),
            )
        };
        let project = self
            .cwd
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let messages = [Message::User {
            content: prompt::title_request(&project, current.as_deref(), &first, latest, reply),
            images: vec![],
        }];
        let answer = client
            .complete(Request {
                model: &config.title_model,
                system: prompt::TITLE_SYSTEM,
                messages: &messages,
                tools: &[],
                max_tokens: 32,
                images: &NO_IMAGES,
            })
            .await;
        let title = match answer {
            Ok(text) => prompt::clean_title(&text),
            Err(e) => {
                tracing::warn!(session = %self.session, "title request failed: {e}");
                None
            }
        };
        let Some(title) = title else { return };
        self.state().title = Some(title.clone());
        self.record(Record::Title {
            title: title.clone(),
            at: now_ms(),
        })
        .await;
        self.emit("session_title", json!({"title": title})).await;
    }

    async fn manual_compaction(&self) {
        let config = match self.config() {
            Ok(c) => c,
            Err(e) => {
                self.emit("compaction_failed", json!({"error": e.to_string()}))
                    .await;
                return;
            }
        };
        let client = match ModelClient::new(&config) {
            Ok(c) => c,
            Err(e) => {
                self.emit("compaction_failed", json!({"error": e.to_string()}))
                    .await;
                return;
            }
        };
        let model = self.model_for(&config);
        let max_out = Ctx::window_for(&config, &model).1;
        self.compact(&client, &model, max_out, 0).await;
    }

    /// Replaces the context with a model-written summary plus the last `keep` messages.
    async fn compact(&self, client: &ModelClient, model: &str, max_out: u64, keep: usize) {
        let mut messages = self.state().messages.clone();
        if messages.len() <= keep {
            self.emit(
                "compaction_failed",
                json!({"error": "there is nothing to compact yet"}),
            )
            .await;
            return;
        }
        self.emit("compaction_start", json!({})).await;
        self.status("compacting").await;
        let tail = messages.split_off(messages.len() - keep);
        messages.push(Message::User {
            content: prompt::COMPACT_REQUEST.into(),
            images: vec![],
        });
        let result: Result<(String, u64), ModelError> = async {
            let mut stream = client
                .open(Request {
                    model,
                    system: prompt::COMPACT_SYSTEM,
                    messages: &messages,
                    tools: &[],
                    max_tokens: max_out,
                    images: &NO_IMAGES,
                })
                .await?;
            let mut chars = 0usize;
            let mut reported = 0u64;
            while let Some(deltas) = stream.next().await? {
                for delta in deltas {
                    if let Delta::Text(t) = delta {
                        chars += t.len();
                    }
                }
                // About four characters a token, reported every ~100 tokens.
                let estimate = (chars / 4) as u64;
                if estimate >= reported + 100 {
                    reported = estimate;
                    self.emit("compaction_progress", json!({"output_tokens": estimate}))
                        .await;
                }
            }
            let completion = stream.finish();
            Ok((completion.text, completion.usage.output_tokens))
        }
        .await;
        match result {
            Ok((summary, output_tokens)) if !summary.trim().is_empty() => {
                self.emit(
                    "compaction_progress",
                    json!({"output_tokens": output_tokens}),
                )
                .await;
                {
                    let mut state = self.state();
                    let mut compacted = vec![Message::User {
                        content: prompt::summary_message(&summary),
                        images: vec![],
                    }];
                    compacted.extend(tail);
                    state.messages = compacted;
                    state.context_tokens = output_tokens;
                }
                self.record(Record::Compaction {
                    summary,
                    keep,
                    at: now_ms(),
                })
                .await;
                self.emit("compaction_end", json!({})).await;
            }
            Ok(_) => {
                self.emit(
                    "compaction_failed",
                    json!({"error": "the model wrote an empty summary"}),
                )
                .await
            }
            Err(e) => {
                self.emit("compaction_failed", json!({"error": e.to_string()}))
                    .await
            }
        }
    }
}

/// Whether an approved call runs in the sandbox.
fn runs_sandboxed(prepared: &Prepared, mode: ApprovalMode) -> bool {
    match prepared.kind() {
        Kind::Command => mode != ApprovalMode::FullAccess,
        Kind::Escalation | Kind::External => false,
        Kind::Read | Kind::Edit => true,
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

/// The actor's own state.
struct Actor {
    ctx: Arc<Ctx>,
    queue: VecDeque<(String, Vec<String>)>,
    turn: Option<JoinHandle<()>>,
}

enum Flow {
    Go,
    Exit,
}

/// Runs a session until `shutdown`, `/quit` or the ops channel closes.
pub(crate) async fn run(
    setup: Setup,
    events: mpsc::Sender<EngineOutput>,
    mut ops: mpsc::UnboundedReceiver<Object>,
) {
    let (internal_tx, mut internal_rx) = mpsc::unbounded_channel();
    let (log, loaded, log_error) = match SessionLog::open(&setup.home, &setup.session) {
        Ok((log, loaded)) => (Some(log), loaded, None),
        Err(e) => (None, Default::default(), Some(e.to_string())),
    };
    let loaded: crate::log::Loaded = loaded;
    let transcript = setup.resume.then(|| loaded.transcript.clone());
    let config_path = setup.home.join("config.json");
    // A broken server list is reported once the startup batch is out; the session runs on.
    let (servers, mcp_error) = match jucode_mcp::load_servers(&config_path) {
        Ok(servers) => (servers, None),
        Err(e) => (Vec::new(), Some(format!("MCP servers not started: {e}"))),
    };
    let mcp = McpManager::start(config_path.clone(), servers).await;
    let mut mcp_changes = mcp.subscribe();
    let ctx = Arc::new(Ctx {
        events,
        config_path,
        session: setup.session,
        cwd: setup.cwd,
        home: setup.home,
        chat: setup.chat,
        extra_dirs: setup.extra_dirs,
        env: setup.env,
        version: setup.version,
        state: Mutex::new(State {
            mode: setup.mode,
            attended: true,
            pending: Vec::new(),
            always: HashSet::new(),
            messages: if setup.resume {
                loaded.messages
            } else {
                Vec::new()
            },
            open_actions: loaded.open_actions,
            decided: loaded.decided,
            model_override: setup.model,
            context_tokens: 0,
            turns: if setup.resume { loaded.turns } else { 0 },
            first_request: if setup.resume {
                loaded.first_request
            } else {
                None
            },
            title: loaded.title,
            last_model_status: None,
        }),
        log: Mutex::new(log),
        internal: internal_tx,
        mcp,
    });
    ctx.startup(transcript).await;
    if let Some(e) = log_error {
        ctx.error(format!("this conversation will not be saved: {e}"))
            .await;
    } else {
        let cwd = ctx.cwd.display().to_string();
        ctx.record(Record::Start {
            session: ctx.session.clone(),
            cwd,
            at: now_ms(),
        })
        .await;
    }
    if let Some(warning) = setup.warning {
        ctx.error(warning).await;
    }
    if let Some(e) = mcp_error {
        ctx.error(e).await;
    }
    let mut actor = Actor {
        ctx,
        queue: VecDeque::new(),
        turn: None,
    };
    loop {
        tokio::select! {
            op = ops.recv() => {
                let Some(op) = op else { break };
                if let Flow::Exit = actor.handle(op).await {
                    break;
                }
            }
            Some(message) = internal_rx.recv() => actor.submit(message, Vec::new()).await,
            Ok(()) = mcp_changes.changed() => {
                let event = actor.ctx.mcp.servers_event();
                actor.ctx.emit("mcp_servers", event).await;
            }
            _ = async {
                match actor.turn.as_mut() {
                    Some(handle) => { let _ = handle.await; }
                    None => std::future::pending::<()>().await,
                }
            }, if actor.turn.is_some() => {
                actor.turn = None;
                actor.start_next().await;
            }
        }
    }
    if let Some(turn) = actor.turn.take() {
        turn.abort();
        let _ = turn.await;
    }
    actor.ctx.mcp.shutdown().await;
    let _ = actor
        .ctx
        .events
        .send(EngineOutput::Exited { error: None })
        .await;
}

impl Actor {
    fn busy(&self) -> bool {
        self.turn.is_some()
    }

    fn start(&mut self, input: TurnInput) {
        let ctx = self.ctx.clone();
        self.turn = Some(tokio::spawn(ctx.turn(input)));
    }

    async fn emit_pending(&self) {
        let messages: Vec<&String> = self.queue.iter().map(|(m, _)| m).collect();
        self.ctx
            .emit("pending_messages", json!({"messages": messages}))
            .await;
    }

    /// Starts a turn with `content`, or queues it behind the running one.
    async fn submit(&mut self, content: String, images: Vec<String>) {
        if !self.busy() {
            self.start(TurnInput::User(content, images));
            return;
        }
        self.queue.push_back((content, images));
        self.emit_pending().await;
        self.ctx
            .status(&format!("queued: {}", self.queue.len()))
            .await;
    }

    async fn start_next(&mut self) {
        if self.busy() {
            return;
        }
        if let Some((next, images)) = self.queue.pop_front() {
            self.emit_pending().await;
            self.start(TurnInput::User(next, images));
        }
    }

    /// Stops the running turn: its task is aborted (a running command's group is killed
    /// when its future drops) and waiting approvals go.
    async fn stop_turn(&mut self) -> bool {
        let Some(turn) = self.turn.take() else {
            return false;
        };
        turn.abort();
        let _ = turn.await;
        self.ctx.state().pending.clear();
        true
    }

    async fn handle(&mut self, op: Object) -> Flow {
        let name = op.get("op").and_then(Value::as_str).unwrap_or_default();
        let ctx = self.ctx.clone();
        match name {
            "user_message" => {
                let Some(content) = op.get("content").and_then(Value::as_str) else {
                    ctx.error("invalid command: user_message requires content")
                        .await;
                    return Flow::Go;
                };
                let mut attached = Vec::new();
                for image in op
                    .get("images")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let checked = match image.as_str() {
                        Some(raw) => images::check(raw, &ctx.env, &ctx.home.join("uploads"))
                            .map(|p| p.display().to_string()),
                        None => Err("an image must be a path string".to_string()),
                    };
                    match checked {
                        Ok(path) => attached.push(path),
                        Err(why) => {
                            let shown = image
                                .as_str()
                                .map_or_else(|| image.to_string(), str::to_string);
                            ctx.info(format!("image {shown} was not attached: {why}"))
                                .await;
                        }
                    }
                }
                self.submit(content.to_string(), attached).await;
            }
            "command" => {
                let input = op.get("input").and_then(Value::as_str).unwrap_or_default();
                return self.command(input.trim()).await;
            }
            "continue" => {
                if self.busy() {
                    ctx.error("a turn is running; continue works once it has ended")
                        .await;
                } else if ctx.state().messages.is_empty() {
                    ctx.info("there is nothing to continue").await;
                } else {
                    self.start(TurnInput::Continue);
                }
            }
            "steer" => {
                if self.busy() && !self.queue.is_empty() {
                    self.stop_turn().await;
                    ctx.status("steering").await;
                    self.start_next().await;
                }
            }
            "interrupt" => {
                if self.stop_turn().await {
                    ctx.info("request interrupted").await;
                    ctx.status("interrupted").await;
                    ctx.status("ready").await;
                    self.start_next().await;
                }
            }
            "approve" => self.approve(&op).await,
            "set_approval_mode" => self.set_mode(&op).await,
            "set_attended" => self.set_attended(&op).await,
            "decide_action" => self.decide(&op).await,
            "mcp_list" => ctx.emit("mcp_servers", ctx.mcp.servers_event()).await,
            // Saved to config.json and reconnected; the change's `mcp_servers` follows from
            // the manager's subscription.
            "mcp_set" | "mcp_remove" | "mcp_toggle" => {
                if let Err(e) = ctx.mcp.apply(&op).await {
                    ctx.error(e.to_string()).await;
                }
            }
            "shutdown" => return Flow::Exit,
            other => ctx.error(format!("unknown op: {other}")).await,
        }
        Flow::Go
    }

    async fn command(&mut self, input: &str) -> Flow {
        let ctx = self.ctx.clone();
        let mut words = input.split_whitespace();
        let word = words.next().unwrap_or_default();
        let rest: Vec<&str> = words.collect();
        match word {
            "/quit" | "/exit" => return Flow::Exit,
            "/model" => match rest.first() {
                None => {
                    let view = match ctx.config() {
                        Ok(config) => {
                            let active = ctx.model_for(&config);
                            let mut models: Vec<Value> = config
                                .models
                                .iter()
                                .map(|m| {
                                    json!({
                                        "model": m.name,
                                        "active": m.name == active,
                                        "context_window": m.context_window,
                                        "max_output_tokens": m.max_output_tokens,
                                        "reasoning_efforts": [],
                                    })
                                })
                                .collect();
                            if config.entry(&active).is_none() {
                                models.push(json!({
                                    "model": active,
                                    "active": true,
                                    "context_window": config.context_window,
                                    "max_output_tokens": config.max_output_tokens,
                                    "reasoning_efforts": [],
                                }));
                            }
                            json!({"models": models, "active_effort": null})
                        }
                        Err(e) => {
                            ctx.error(e.to_string()).await;
                            return Flow::Go;
                        }
                    };
                    ctx.emit("model_view", view).await;
                }
                Some(name) => {
                    let known = match ctx.config() {
                        Ok(config) => config.entry(name).is_some(),
                        Err(e) => {
                            ctx.error(e.to_string()).await;
                            return Flow::Go;
                        }
                    };
                    if !known {
                        ctx.error(format!(
                            "unknown model {name}: add it to models in config.json to use it"
                        ))
                        .await;
                        return Flow::Go;
                    }
                    ctx.state().model_override = Some((*name).to_string());
                    ctx.emit_model_status(false).await;
                    ctx.info(format!("model: {name}")).await;
                }
            },
            "/compact" => {
                if self.busy() {
                    ctx.error("a turn is running; /compact works once it has ended")
                        .await;
                } else {
                    self.start(TurnInput::Compact);
                }
            }
            "/help" => {
                let list = commands()
                    .as_array()
                    .map(|cmds| {
                        cmds.iter()
                            .map(|c| {
                                format!(
                                    "{} {} — {}",
                                    c["command"].as_str().unwrap_or_default(),
                                    c["args"].as_str().unwrap_or_default(),
                                    c["description"].as_str().unwrap_or_default()
                                )
                            })
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default();
                ctx.info(list).await;
            }
            "" => ctx.error("command requires input").await,
            other => {
                ctx.error(format!("unknown command: {other} (try /help)"))
                    .await
            }
        }
        Flow::Go
    }

    async fn approve(&mut self, op: &Object) {
        let ctx = self.ctx.clone();
        let Some(call_id) = op
            .get("call_id")
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
        else {
            return ctx.error("approve requires call_id").await;
        };
        let allow = match op.get("decision").and_then(Value::as_str) {
            Some("allow") => true,
            Some("deny") => false,
            _ => return ctx.error("approve requires decision: allow or deny").await,
        };
        let hunks = match op.get("hunks") {
            None | Some(Value::Null) => None,
            Some(Value::Array(ids)) if ids.iter().all(Value::is_string) => Some(
                ids.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect::<Vec<_>>(),
            ),
            Some(_) => return ctx.error("hunks must be an array of hunk id strings").await,
        };
        let always = op.get("always").and_then(Value::as_bool).unwrap_or(false);
        let (problem, shown) = {
            let state = ctx.state();
            match state.pending.iter().find(|p| p.call.id == call_id) {
                None => (Some(format!("no approval is waiting for {call_id}")), None),
                Some(p) => {
                    let problem = match (&hunks, p.prepared.edit()) {
                        (Some(_), _) if always => {
                            Some("hunks cannot be combined with always".to_string())
                        }
                        (Some(_), None) => Some(format!(
                            "{call_id} is not a file edit; hunks apply to edits only"
                        )),
                        (Some(ids), Some(edit)) => ids
                            .iter()
                            .find(|id| !edit.hunks.iter().any(|h| &h.id == *id))
                            .map(|id| format!("no hunk {id} in {call_id}")),
                        _ => None,
                    };
                    (problem, Some(card(&p.call, &p.prepared)))
                }
            }
        };
        if let Some(problem) = problem {
            ctx.error(problem).await;
            // Still open: shown again, since the daemon dropped it from its snapshot when
            // the answer went out.
            if let Some(shown) = shown {
                ctx.emit("approval_request", shown).await;
            }
            return;
        }
        let pending = {
            let mut state = ctx.state();
            let pos = state.pending.iter().position(|p| p.call.id == call_id);
            let pending = pos.map(|pos| state.pending.remove(pos));
            if let Some(p) = &pending
                && always
                && allow
            {
                state.always.insert(p.call.name.clone());
            }
            pending
        };
        if let Some(p) = pending {
            let answer = if allow {
                Answer::Allow { hunks }
            } else {
                Answer::Deny
            };
            let _ = p.tx.send(answer);
        }
    }

    async fn set_mode(&mut self, op: &Object) {
        let ctx = self.ctx.clone();
        let Some(name) = op.get("mode").and_then(Value::as_str) else {
            return ctx.error("set_approval_mode requires mode").await;
        };
        let mode = match ApprovalMode::parse(name) {
            Some(ApprovalMode::Plan) => {
                return ctx
                    .error("plan mode is not available in the jucode engine")
                    .await;
            }
            Some(mode) => mode,
            None => {
                return ctx
                    .error(format!(
                        "unknown approval mode `{name}` (expected manual, auto-edit, auto or full-access)"
                    ))
                    .await;
            }
        };
        // Calls waiting for a person that the new mode lets through run now.
        let released: Vec<Pending> = {
            let mut state = ctx.state();
            state.mode = mode;
            let always = state.always.clone();
            let (run, keep): (Vec<Pending>, Vec<Pending>) =
                state.pending.drain(..).partition(|p| {
                    matches!(
                        gate(mode, p.prepared.kind(), always.contains(&p.call.name)),
                        Gate::Run { .. }
                    )
                });
            state.pending = keep;
            run
        };
        ctx.status(&format!("approval mode: {}", mode.as_str()))
            .await;
        ctx.emit("approval_mode", json!({"mode": mode.as_str()}))
            .await;
        for p in released {
            let _ = p.tx.send(Answer::Allow { hunks: None });
        }
    }

    async fn set_attended(&mut self, op: &Object) {
        let ctx = self.ctx.clone();
        let Some(attended) = op.get("attended").and_then(Value::as_bool) else {
            return ctx
                .error("set_attended requires attended: true or false")
                .await;
        };
        let waiting: Vec<Pending> = {
            let mut state = ctx.state();
            state.attended = attended;
            if attended {
                Vec::new()
            } else {
                state.pending.drain(..).collect()
            }
        };
        // The deferrals come before `attended` (notes §8.3).
        for p in waiting {
            let answer = match ctx.defer(&p.call, &p.prepared).await {
                Ok(text) => Answer::Deferred(text),
                Err(true) => Answer::Allow { hunks: None },
                Err(false) => Answer::Deny,
            };
            let _ = p.tx.send(answer);
        }
        ctx.emit("attended", json!({"attended": attended})).await;
    }

    async fn decide(&mut self, op: &Object) {
        let ctx = self.ctx.clone();
        let id = op
            .get("action")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let decision = op
            .get("decision")
            .and_then(Value::as_str)
            .filter(|d| *d == "allow" || *d == "deny");
        let (Some(id), Some(decision)) = (id, decision) else {
            return ctx
                .error("decide_action requires action and decision: allow or deny")
                .await;
        };
        let allow = decision == "allow";
        let action = {
            let mut state = ctx.state();
            let pos = state.open_actions.iter().position(|a| a.id == id);
            let action = pos.map(|pos| state.open_actions.remove(pos));
            if let Some(a) = &action {
                state.decided.insert(a.digest.clone(), allow);
            }
            action
        };
        let Some(action) = action else {
            return ctx.error(format!("unknown action: {id}")).await;
        };
        ctx.record(Record::Decided {
            id: action.id.clone(),
            allow,
            at: now_ms(),
        })
        .await;
        if !allow {
            ctx.emit(
                "action_decided",
                json!({"id": action.id, "decision": "deny", "output": null, "is_error": false}),
            )
            .await;
            self.submit(actions::decision_message(&action, None), Vec::new())
                .await;
            return;
        }
        // Allowed: run in the background, then report into the session.
        tokio::spawn(async move {
            let call = ToolCall {
                id: action.call_id.clone(),
                name: action.name.clone(),
                arguments: action.arguments.clone(),
            };
            let (output, is_error) = match ctx.prepare(&call) {
                Ok(prepared) => {
                    let mode = ctx.state().mode;
                    ctx.execute(&call, &prepared, runs_sandboxed(&prepared, mode), None)
                        .await
                }
                Err(e) => (e, true),
            };
            ctx.emit(
                "action_decided",
                json!({"id": action.id, "decision": "allow", "output": output, "is_error": is_error}),
            )
            .await;
            let _ = ctx.internal.send(actions::decision_message(
                &action,
                Some((&output, is_error)),
            ));
        });
    }
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
