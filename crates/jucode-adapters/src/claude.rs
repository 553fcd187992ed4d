//! Claude Code behind the Engine interface: `claude --print --input-format stream-json
//! --output-format stream-json …` with the control protocol on the same stdio.
//!
//! Ops become user frames and control requests (`initialize`, `interrupt`,
//! `set_permission_mode`, `set_model`, `mcp_status`, …); stream-json frames become serve-v2
//! events. Claude Code honours full access only as a start flag, so switching into or out of it
//! restarts the CLI on the same conversation (`--resume`) once the running turn has ended.
//!
//! The Claude-only ops live beside it: `claude_extras` (control-request answers as events),
//! `claude_runs` (the agent trace, subagent lifecycles and transcripts), `claude_hunks` (edit
//! diffs on approval cards), `claude_elicit` (MCP servers' questions as approval cards).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use jucode_engine::{EngineError, EngineFactory, EngineHandle, StartSpec};
use jucode_protocol::serve::Event;
use jucode_protocol::{ApprovalMode, Object};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::child::{ChildProc, Input, Spawn};
use crate::claude_elicit::Elicitation;
use crate::claude_extras as extras;
use crate::claude_runs::{self, Runs};
use crate::turns::{
    Answer, Approvals, Image, Message, Queue, Sink, Taken, hunk_choice, load_image, mode_of,
};
use crate::{
    AdapterConfig, EngineOptions, claude_tool_name, error, event, info, status, text_of, truncate,
};

/// How long a stopping or restarting CLI gets to exit before we stop waiting for it.
const EXIT_WAIT: Duration = Duration::from_secs(8);

/// Slash commands that belong to jucode sessions only.
const JUCODE_ONLY: &[&str] = &["/rewind", "/tree", "/checkpoint", "/branch", "/trust"];

/// Starts Claude Code sessions.
#[derive(Debug, Clone)]
pub struct ClaudeEngine {
    config: AdapterConfig,
}

impl ClaudeEngine {
    pub fn new(config: AdapterConfig) -> ClaudeEngine {
        ClaudeEngine { config }
    }
}

impl EngineFactory for ClaudeEngine {
    fn saved_conversations(&self, cwd: &std::path::Path) -> Vec<jucode_engine::SavedConversation> {
        crate::history::saved_conversations("claude", cwd, &self.config.user_home)
    }

    fn start(&self, spec: StartSpec) -> Result<EngineHandle, EngineError> {
        let options = EngineOptions::parse(&spec.options)?;
        let flags = Flags::from_options(&spec.options)?;
        let program =
            crate::discover::find_binary("claude", "CLAUDE_BIN", &options, &self.config.user_home)?;
        let config_dir = options
            .env_var("CLAUDE_CONFIG_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.config.user_home.join(".claude"));
        // `--resume` needs a saved conversation; a session reopened before its first turn has
        // none yet, so it starts fresh under the same id.
        let saved = spec.resume && transcript_exists(&config_dir, &spec.session);
        if !saved && !is_uuid(&spec.session) {
            return Err(EngineError::BadOptions(format!(
                "{} is not a Claude Code conversation id (a UUID) and no conversation of that id is saved",
                spec.session
            )));
        }
        let (handle, ops, events) = jucode_engine::channel();
        let (input_tx, input_rx) = mpsc::unbounded_channel();
        let mut roots = vec![spec.cwd.clone()];
        roots.extend(spec.extra_dirs.iter().cloned());
        roots.push(self.config.upload_dir());
        let mut claude = Claude {
            program,
            session: spec.session.clone(),
            cwd: spec.cwd.clone(),
            extra_dirs: spec.extra_dirs.clone(),
            image_roots: roots,
            config_dir,
            mode: options.mode(),
            model: options.model.clone(),
            options,
            conversation_saved: saved,
            input_tx,
            child: None,
            generation: 0,
            sink: Sink::new(events),
            busy: false,
            pending_mode: None,
            queue: Queue::default(),
            approvals: Approvals::default(),
            elicitations: Approvals::default(),
            requests: HashMap::new(),
            next_request: 0,
            tools: HashMap::new(),
            started_tools: HashSet::new(),
            streamed: HashSet::new(),
            models: Vec::new(),
            context_window: None,
            max_output_tokens: None,
            version: None,
            fast_state: None,
            fast_disabled_reason: None,
            flags,
            ultracode_available: None,
            tasks: Vec::new(),
            runs: Runs::default(),
        };
        claude.spawn()?;
        tokio::spawn(claude.run(ops, input_rx));
        Ok(handle)
    }
}

/// A control request we sent and what to do with its answer.
#[derive(Debug, Clone)]
enum Request {
    Initialize,
    McpStatus,
    SetModel(Option<String>),
    SetMode(ApprovalMode),
    /// Anything whose success needs no event; a failure is reported with this name.
    Plain(&'static str),
    /// An MCP change: list the servers again once it is done.
    McpChange(&'static str),
    TaskOutput(String),
    PermissionRules,
    ContextUsage,
    SideQuestion(String),
    /// `apply_flag_settings` with these settings; the session's settings are read back after.
    Flags(Value),
    GetSettings,
}

/// The session's own Claude Code settings (start options, `/effort ultracode`, `/fast`,
/// `/thinking`), applied after every (re)start so a restart keeps them.
#[derive(Debug, Clone, Default, PartialEq)]
struct Flags {
    ultracode: Option<bool>,
    fast: Option<bool>,
    thinking: Option<bool>,
}

impl Flags {
    fn from_options(options: &Object) -> Result<Flags, EngineError> {
        let flag = |name: &str| match options.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(EngineError::BadOptions(format!(
                "options.{name} must be true or false"
            ))),
        };
        Ok(Flags {
            ultracode: flag("ultracode")?,
            fast: flag("fast")?,
            thinking: flag("thinking")?,
        })
    }

    /// The `apply_flag_settings` body for the flags set, if any.
    fn settings(&self) -> Option<Value> {
        let mut settings = serde_json::Map::new();
        if let Some(on) = self.ultracode {
            settings.insert("ultracode".into(), json!(on));
        }
        if let Some(on) = self.fast {
            settings.insert("fastMode".into(), json!(on));
        }
        if let Some(on) = self.thinking {
            settings.insert("showThinkingSummaries".into(), json!(on));
        }
        (!settings.is_empty()).then_some(Value::Object(settings))
    }
}

/// A `can_use_tool` waiting for a client.
#[derive(Debug, Clone)]
struct Permission {
    request_id: String,
    tool_name: String,
    input: Value,
    suggestions: Vec<Value>,
    /// A file edit's hunks, to apply only some of them.
    edit: Option<crate::claude_hunks::EditCard>,
    /// The card as shown, to show again when an answer is refused.
    shown: Value,
}

struct Claude {
    program: PathBuf,
    session: String,
    cwd: PathBuf,
    extra_dirs: Vec<PathBuf>,
    image_roots: Vec<PathBuf>,
    config_dir: PathBuf,
    options: EngineOptions,
    mode: ApprovalMode,
    model: Option<String>,
    /// Whether a conversation of this id is saved, so a (re)start must `--resume` it.
    conversation_saved: bool,
    input_tx: mpsc::UnboundedSender<Input>,
    child: Option<ChildProc>,
    generation: u64,
    sink: Sink,
    busy: bool,
    /// A switch into or out of full access waiting for the running turn to end.
    pending_mode: Option<ApprovalMode>,
    queue: Queue,
    approvals: Approvals<Permission>,
    /// MCP servers' questions, by card id.
    elicitations: Approvals<Elicitation>,
    requests: HashMap<String, Request>,
    next_request: u64,
    /// Tool names by tool_use id, for tool_output.
    tools: HashMap<String, String>,
    started_tools: HashSet<String>,
    /// Assistant message ids whose text came as stream deltas (the full frame repeats it).
    streamed: HashSet<String>,
    models: Vec<Value>,
    context_window: Option<u64>,
    max_output_tokens: Option<u64>,
    version: Option<String>,
    fast_state: Option<String>,
    /// Why Claude Code cannot serve fast mode, when it said.
    fast_disabled_reason: Option<String>,
    flags: Flags,
    ultracode_available: Option<bool>,
    /// Background tasks: [{id, kind, description}].
    tasks: Vec<Value>,
    /// The conversation's subagents and workflows.
    runs: Runs,
}

impl Claude {
    fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "--print",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
            "--permission-prompt-tool",
            "stdio",
            "--permission-mode",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(permission_mode(self.mode).to_string());
        if self.mode == ApprovalMode::FullAccess {
            args.push("--dangerously-skip-permissions".into());
        }
        // The `=` form keeps an id that starts with `-` from being read as a flag.
        if self.conversation_saved {
            args.push(format!("--resume={}", self.session));
            if let Some(at) = &self.options.resume_at {
                args.push(format!("--resume-session-at={at}"));
            }
        } else {
            args.push(format!("--session-id={}", self.session));
        }
        if let Some(model) = &self.model {
            args.push("--model".into());
            args.push(model.clone());
        }
        if let Some(effort) = &self.options.effort {
            args.push("--effort".into());
            args.push(effort.clone());
        }
        for dir in &self.extra_dirs {
            args.push("--add-dir".into());
            args.push(dir.display().to_string());
        }
        args
    }

    /// Starts the CLI (again) and sends `initialize`.
    fn spawn(&mut self) -> Result<(), EngineError> {
        self.generation += 1;
        let child = ChildProc::spawn(
            Spawn {
                program: &self.program,
                args: self.args(),
                cwd: &self.cwd,
                env: &self.options.env,
                // Claude Code refuses to start inside another Claude Code session.
                env_remove: &["CLAUDECODE"],
                generation: self.generation,
                label: "claude".into(),
            },
            self.input_tx.clone(),
        )?;
        self.child = Some(child);
        Ok(())
    }

    async fn run(
        mut self,
        mut ops: mpsc::UnboundedReceiver<Object>,
        mut input: mpsc::UnboundedReceiver<Input>,
    ) {
        let started = self.emit_start().await && {
            self.control(Request::Initialize, initialize_request())
                .await;
            true
        };
        if !started {
            self.shutdown(&mut input).await;
            return;
        }
        loop {
            tokio::select! {
                op = ops.recv() => {
                    let Some(op) = op else { break };
                    if !self.on_op(op, &mut input).await {
                        break;
                    }
                }
                got = input.recv() => match got {
                    Some(Input::Frame(generation, frame)) if generation == self.generation => {
                        if !self.on_frame(frame, &mut input).await {
                            break;
                        }
                    }
                    Some(Input::Exited(generation, how)) if generation == self.generation => {
                        self.child = None;
                        self.sink.exited(Some(how)).await;
                        return;
                    }
                    Some(_) => {}
                    None => break,
                },
            }
        }
        self.shutdown(&mut input).await;
    }

    /// Stops the CLI, waits for it, and reports a requested stop.
    async fn shutdown(&mut self, input: &mut mpsc::UnboundedReceiver<Input>) {
        if let Some(child) = self.child.take() {
            let generation = child.generation;
            child.stop();
            wait_exit(input, generation).await;
        }
        self.sink.exited(None).await;
    }

    async fn emit_start(&mut self) -> bool {
        let startup = self.startup_event();
        let mode = event("approval_mode", json!({ "mode": self.mode.as_str() }));
        let model = self.model_status();
        if !(self.sink.state(startup).await
            && self.sink.state(model).await
            && self.sink.state(mode).await)
        {
            return false;
        }
        // A reopened session starts from the conversation Claude Code saved.
        match crate::history::claude_transcript_path(&self.config_dir, &self.session) {
            Some(path) if self.conversation_saved => {
                let items = crate::history::claude_transcript(&path);
                if !self
                    .emit(event("transcript", json!({ "items": items })))
                    .await
                {
                    return false;
                }
                if self.runs.load_saved(&self.config_dir, &self.session) {
                    return self.runs_changed().await;
                }
                true
            }
            _ => true,
        }
    }

    fn startup_event(&self) -> Event {
        event(
            "startup",
            json!({
                "version": self.version,
                "session_id": self.session,
                "profile_dir": self.config_dir.display().to_string(),
                "config_path": self.config_dir.join("settings.json").display().to_string(),
                "cwd": self.cwd.display().to_string(),
                "model": self.model,
                "context_window": self.context_window,
            }),
        )
    }

    /// The initialize answer's entry for the session's model.
    fn model_entry(&self) -> Option<&Value> {
        self.models.iter().find(|m| {
            let value = m.get("value").and_then(Value::as_str);
            let resolved = m.get("resolvedModel").and_then(Value::as_str);
            match &self.model {
                Some(model) => value == Some(model) || resolved == Some(model),
                None => value == Some("default"),
            }
        })
    }

    fn fast_available(&self) -> bool {
        self.model_entry()
            .and_then(|m| m.get("supportsFastMode"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    fn model_status(&self) -> Event {
        let entry = self.model_entry();
        let efforts = entry
            .and_then(|m| m.get("supportedEffortLevels"))
            .cloned()
            .unwrap_or_else(|| json!([]));
        let fast_available = self.fast_available();
        event(
            "model_status",
            json!({
                "provider": "anthropic",
                "model": self.model,
                "reasoning_effort": self.options.effort,
                "context_window": self.context_window,
                "context_limit": self.context_window,
                "max_output_tokens": self.max_output_tokens,
                "reasoning_efforts": efforts,
                "state": "ready",
                "fast": self.fast_state.as_deref() == Some("on"),
                "fast_state": self.fast_state,
                "fast_available": fast_available,
                "ultracode": self.flags.ultracode.unwrap_or(false),
                "ultracode_available": self.ultracode_available,
                "thinking_summaries": self.flags.thinking.unwrap_or(true),
            }),
        )
    }

    /// Sends a control request; its answer arrives as a `control_response`.
    async fn control(&mut self, kind: Request, request: Value) -> bool {
        self.next_request += 1;
        let id = format!("req_{}_jucode", self.next_request);
        self.requests.insert(id.clone(), kind);
        self.write(&json!({"type": "control_request", "request_id": id, "request": request}))
            .await
    }

    async fn write(&mut self, frame: &Value) -> bool {
        match self.child.as_mut() {
            Some(child) => child.send(frame).await,
            None => false,
        }
    }

    async fn emit(&mut self, event: Event) -> bool {
        self.sink.emit(event).await
    }

    async fn emit_all(&mut self, events: Vec<Event>) -> bool {
        for e in events {
            if !self.emit(e).await {
                return false;
            }
        }
        true
    }

    // ---- ops ----

    /// Handles one op; `false` stops the session.
    async fn on_op(&mut self, op: Object, input: &mut mpsc::UnboundedReceiver<Input>) -> bool {
        let name = op
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let result = match name.as_str() {
            "shutdown" => return false,
            "user_message" => match Message::from_op(&op) {
                Ok(message) => return self.user_message(message).await,
                Err(e) => Err(e),
            },
            "command" => {
                let text = op.get("input").and_then(Value::as_str).unwrap_or("").trim();
                return self.command(text.to_string()).await;
            }
            "interrupt" => return self.interrupt().await,
            "approve" => match (Answer::from_op(&op), hunk_choice(&op)) {
                (Ok(answer), Ok(hunks)) => return self.approve(answer, hunks).await,
                (Err(e), _) | (_, Err(e)) => Err(e),
            },
            "set_approval_mode" => match mode_of(&op) {
                Ok(mode) => return self.set_mode(mode, input).await,
                Err(e) => Err(e),
            },
            "mcp_list" => {
                return self
                    .control(Request::McpStatus, json!({"subtype": "mcp_status"}))
                    .await;
            }
            "mcp_toggle" => {
                let name = op.get("name").and_then(Value::as_str);
                let enabled = op.get("enabled").and_then(Value::as_bool);
                match (name, enabled) {
                    (Some(name), Some(enabled)) => {
                        let request = json!({"subtype": "mcp_toggle", "serverName": name, "enabled": enabled});
                        return self
                            .control(Request::McpChange("mcp_toggle"), request)
                            .await;
                    }
                    _ => Err("mcp_toggle requires name and enabled".to_string()),
                }
            }
            "mcp_reconnect" => match op.get("name").and_then(Value::as_str) {
                Some(name) => {
                    let request = json!({"subtype": "mcp_reconnect", "serverName": name});
                    return self
                        .control(Request::McpChange("mcp_reconnect"), request)
                        .await;
                }
                None => Err("mcp_reconnect requires name".to_string()),
            },
            "stop_task" => match op.get("task_id").and_then(Value::as_str) {
                Some(task) => {
                    let request = json!({"subtype": "stop_task", "task_id": task});
                    return self.control(Request::Plain("stop_task"), request).await;
                }
                None => Err("stop_task requires task_id".to_string()),
            },
            // The daemon's own bookkeeping: Claude sessions never defer and keep no snapshot.
            "set_attended" | "snapshot" | "tui" => Ok(()),
            "rename" => match op.get("title").and_then(Value::as_str).map(str::trim) {
                Some(title) if !title.is_empty() => {
                    let request = json!({"subtype": "rename_session", "title": title,
                                         "source": "host", "session_id": self.session});
                    return self
                        .control(Request::Plain("rename_session"), request)
                        .await;
                }
                _ => Err("rename requires a title".to_string()),
            },
            "steer" | "decide_action" | "mcp_set" | "mcp_remove" | "continue" => {
                Err(format!("{name} is not available in Claude Code sessions"))
            }
            "task_output" => match op.get("task_id").and_then(Value::as_str) {
                Some(task) => {
                    let request = json!({"subtype": "get_task_output", "task_id": task});
                    return self
                        .control(Request::TaskOutput(task.to_string()), request)
                        .await;
                }
                None => Err("task_output requires task_id".to_string()),
            },
            "permission_rules" => {
                let request = json!({"subtype": "list_permission_rules"});
                return self.control(Request::PermissionRules, request).await;
            }
            "context_usage" => {
                // `full` asks the API to count every row; the summary answers locally.
                let detail = match op.get("detail").and_then(Value::as_str) {
                    Some("full") => "full",
                    _ => "summary",
                };
                let request = json!({"subtype": "get_context_usage", "detail": detail});
                return self.control(Request::ContextUsage, request).await;
            }
            "agent_runs" => {
                self.runs.load_saved(&self.config_dir, &self.session);
                let runs = self.runs.event();
                return self.sink.answer(runs).await;
            }
            "subagent_transcript" => match op.get("agent_id").and_then(Value::as_str) {
                Some(id) => return self.subagent_transcript(id.to_string()).await,
                None => Err("subagent_transcript requires agent_id".to_string()),
            },
            _ => Err(format!("unknown op: {name}")),
        };
        match result {
            Ok(()) => true,
            Err(message) => self.emit(error(message)).await,
        }
    }

    /// One subagent's conversation, from the file Claude Code keeps for it. Only ids found in
    /// this session's subagents directory are read.
    async fn subagent_transcript(&mut self, id: String) -> bool {
        let file = claude_runs::valid_id(&id)
            .then(|| claude_runs::subagent_files(&self.config_dir, &self.session).remove(&id))
            .flatten();
        let fields = match file {
            Some(path) => json!({"agent_id": id, "items": claude_runs::subagent_items(&path)}),
            None => {
                json!({"agent_id": id, "error": format!("no saved subagent {id} in this session")})
            }
        };
        self.emit(event("subagent_transcript", fields)).await
    }

    /// Sends the subagents' lifecycle changes, then the agent trace if it changed.
    async fn runs_changed(&mut self) -> bool {
        let lifecycle = self.runs.lifecycle();
        if !self.emit_all(lifecycle).await {
            return false;
        }
        let runs = self.runs.event();
        self.sink.state(runs).await
    }

    async fn user_message(&mut self, message: Message) -> bool {
        if self.busy || self.pending_mode.is_some() {
            let events = self.queue.push(message);
            return self.emit_all(events).await;
        }
        self.start_turn(message).await
    }

    async fn start_turn(&mut self, message: Message) -> bool {
        let mut blocks = vec![json!({"type": "text", "text": message.content})];
        let mut notes = Vec::new();
        for path in &message.images {
            match load_image(path, &self.image_roots) {
                Ok(Image::Inline { media_type, data }) => blocks.push(json!({
                    "type": "image",
                    "source": {"type": "base64", "media_type": media_type, "data": data},
                })),
                Ok(Image::Path(p)) => blocks.push(json!({
                    "type": "text",
                    "text": format!("[Image too large to attach: {} — read it with the Read tool]", p.display()),
                })),
                Err(e) => notes.push(info(format!("image not attached: {e}"))),
            }
        }
        let content = if blocks.len() == 1 {
            Value::String(message.content.clone())
        } else {
            Value::Array(blocks)
        };
        if !self.emit_all(notes).await || !self.emit(message.event()).await {
            return false;
        }
        self.busy = true;
        self.write(&json!({
            "type": "user",
            "message": {"role": "user", "content": content},
            "parent_tool_use_id": null,
            "session_id": "default",
        }))
        .await;
        true
    }

    async fn command(&mut self, text: String) -> bool {
        let mut words = text.split_whitespace();
        let word = words.next().unwrap_or("");
        let rest: Vec<&str> = words.collect();
        if JUCODE_ONLY.contains(&word) {
            return self
                .emit(error(format!(
                    "{word} is only available in jucode sessions"
                )))
                .await;
        }
        match word {
            "/model" if rest.is_empty() => {
                let models: Vec<Value> = self
                    .models
                    .iter()
                    .map(|m| {
                        let value = m.get("value").and_then(Value::as_str).unwrap_or("");
                        json!({
                            "model": value,
                            "label": m.get("displayName"),
                            "active": self.model.as_deref().unwrap_or("default") == value,
                            "context_window": null,
                            "max_output_tokens": null,
                            "reasoning_efforts": m.get("supportedEffortLevels").cloned().unwrap_or(json!([])),
                        })
                    })
                    .collect();
                let view = event(
                    "model_view",
                    json!({"models": models, "active_effort": self.options.effort}),
                );
                self.emit(view).await
            }
            "/model" => {
                let model = rest.join(" ");
                let request = json!({"subtype": "set_model", "model": model});
                self.control(Request::SetModel(Some(model)), request).await
            }
            "/effort" => self.effort(&rest).await,
            "/fast" => match extras::switch(rest.first().copied(), self.fast_on()) {
                Ok(on) => self.apply_flags(json!({ "fastMode": on })).await,
                Err(e) => self.emit(error(format!("/fast: {e}"))).await,
            },
            "/thinking" => {
                let current = self.flags.thinking.unwrap_or(true);
                match extras::switch(rest.first().copied(), current) {
                    Ok(on) => {
                        self.apply_flags(json!({ "showThinkingSummaries": on }))
                            .await
                    }
                    Err(e) => self.emit(error(format!("/thinking: {e}"))).await,
                }
            }
            "/btw" => {
                let question = rest.join(" ");
                if question.is_empty() {
                    return self.emit(error("/btw requires a question")).await;
                }
                let request = json!({"subtype": "side_question", "question": question});
                self.control(Request::SideQuestion(question), request).await
            }
            // Claude Code's own slash commands go to it as a user message, as it expects.
            _ => {
                self.user_message(Message {
                    content: text,
                    images: Vec::new(),
                })
                .await
            }
        }
    }

    /// `/effort`, `/effort <level>` or `/effort ultracode [on|off]`.
    async fn effort(&mut self, rest: &[&str]) -> bool {
        match rest {
            [] => {
                let status = self.model_status();
                self.sink.answer(status).await
            }
            ["ultracode", more @ ..] if more.len() <= 1 => {
                let current = self.flags.ultracode.unwrap_or(false);
                match extras::switch(more.first().copied(), current) {
                    Ok(on) => self.apply_flags(json!({ "ultracode": on })).await,
                    Err(e) => self.emit(error(format!("/effort ultracode: {e}"))).await,
                }
            }
            [level] if extras::EFFORT_LEVELS.contains(level) => {
                let mut settings = json!({ "effortLevel": level });
                // A new level alone would turn ultracode off; keep it as it is.
                if self.flags.ultracode == Some(true) {
                    settings["ultracode"] = json!(true);
                }
                self.apply_flags(settings).await
            }
            _ => {
                self.emit(error(format!(
                    "/effort takes one of {} or ultracode [on|off]",
                    extras::EFFORT_LEVELS.join(", ")
                )))
                .await
            }
        }
    }

    fn fast_on(&self) -> bool {
        self.fast_state.as_deref() == Some("on")
    }

    async fn apply_flags(&mut self, settings: Value) -> bool {
        let request = json!({"subtype": "apply_flag_settings", "settings": settings});
        self.control(Request::Flags(settings), request).await
    }

    /// Takes the settings Claude Code accepted as the session's own.
    async fn flags_applied(&mut self, settings: &Value) -> bool {
        if let Some(level) = settings.get("effortLevel").and_then(Value::as_str) {
            self.options.effort = Some(level.to_string());
        }
        if let Some(on) = settings.get("ultracode").and_then(Value::as_bool) {
            self.flags.ultracode = Some(on);
        }
        if let Some(on) = settings
            .get("showThinkingSummaries")
            .and_then(Value::as_bool)
        {
            self.flags.thinking = Some(on);
        }
        if let Some(on) = settings.get("fastMode").and_then(Value::as_bool) {
            self.flags.fast = Some(on);
            if on && !self.fast_available() {
                self.fast_state = Some("off".into());
                // `sdk_opt_in_required` is what `fastMode: true` itself answers.
                let why = self
                    .fast_disabled_reason
                    .clone()
                    .filter(|r| r != "sdk_opt_in_required")
                    .unwrap_or_else(|| "the model does not support it".into());
                if !self
                    .emit(info(format!("fast mode is not available: {why}")))
                    .await
                {
                    return false;
                }
            } else {
                self.fast_state = Some(if on { "on" } else { "off" }.into());
            }
        }
        self.control(Request::GetSettings, json!({"subtype": "get_settings"}))
            .await
    }

    async fn interrupt(&mut self) -> bool {
        // An interrupt cancels the MCP servers' open questions.
        for (_, e) in self.elicitations.take_all() {
            if !self
                .respond(&e.request_id, json!({"action": "cancel"}))
                .await
            {
                return false;
            }
        }
        if !self.busy {
            return true;
        }
        // The CLI withdraws its own open prompts; the cards end with the turn.
        self.approvals.take_all();
        self.control(Request::Plain("interrupt"), json!({"subtype": "interrupt"}))
            .await
    }

    async fn approve(&mut self, answer: Answer, hunks: Option<Vec<String>>) -> bool {
        match self.elicitations.take(&answer.call_id) {
            Taken::Open(e) => return self.answer_elicitation(answer, e).await,
            Taken::AlreadyAnswered => return true,
            Taken::Unknown => {}
        }
        let permission = match self.approvals.take(&answer.call_id) {
            Taken::Open(p) => p,
            Taken::AlreadyAnswered => return true,
            Taken::Unknown => {
                return self
                    .emit(error(format!(
                        "no open approval request {}",
                        answer.call_id
                    )))
                    .await;
            }
        };
        let mut input = Some(permission.input.clone());
        if let (Some(ids), true) = (&hunks, answer.allow) {
            let chosen = match (&permission.edit, answer.always) {
                (_, true) => Err("hunks cannot be combined with always".to_string()),
                (None, _) => Err(format!(
                    "{} is not a file edit; hunks apply to edits only",
                    answer.call_id
                )),
                (Some(edit), _) => edit.input_for(&permission.tool_name, &permission.input, ids),
            };
            match chosen {
                Ok(chosen) => input = chosen,
                Err(message) => {
                    // The card stays open (the daemon dropped it when the answer went out).
                    let card = permission.shown.clone();
                    self.approvals.open(answer.call_id, permission);
                    return self.emit(error(message)).await
                        && self.emit(event("approval_request", card)).await;
                }
            }
        }
        let body = match input {
            Some(input) if answer.allow => {
                let mut body = json!({"behavior": "allow", "updatedInput": input});
                if answer.always {
                    let destination = match answer.always_scope.as_deref() {
                        Some("project") => "localSettings",
                        Some("user") => "userSettings",
                        _ => "session",
                    };
                    body["updatedPermissions"] = json!([always_rule(&permission, destination)]);
                }
                body
            }
            // Allowed with none of its hunks: nothing of the edit is made.
            None => {
                json!({"behavior": "deny", "message": "The user applied none of this edit's changes."})
            }
            Some(_) => json!({"behavior": "deny", "message": "The user denied this tool call."}),
        };
        self.respond(&permission.request_id, body).await;
        true
    }

    /// Accepts with the answers (checked against the form), or declines. Answers that do not
    /// fit the form leave the card open.
    async fn answer_elicitation(&mut self, answer: Answer, e: Elicitation) -> bool {
        let body = if answer.allow {
            match e.content(answer.answers.as_ref()) {
                Ok(Some(content)) => json!({"action": "accept", "content": content}),
                Ok(None) => json!({"action": "accept"}),
                Err(message) => {
                    // The daemon dropped the card from its snapshot when the answer went out.
                    let card = e.shown.clone();
                    self.elicitations.open(answer.call_id, e);
                    return self.emit(error(message)).await
                        && self.emit(event("approval_request", card)).await;
                }
            }
        } else {
            json!({"action": "decline"})
        };
        self.respond(&e.request_id, body).await;
        true
    }

    /// An MCP server's question, live or listed by `initialize` (shown once either way).
    async fn elicitation(&mut self, request_id: &str, request: &Value) -> bool {
        let call_id = format!("elicit-{}-{request_id}", self.generation);
        if self.elicitations.knows(&call_id) {
            return true;
        }
        let mut e = Elicitation::from_request(request_id, request);
        let card = e.card(&call_id, request);
        e.shown = card.clone();
        self.elicitations.open(call_id, e);
        self.emit(event("approval_request", card)).await
    }

    async fn respond(&mut self, request_id: &str, body: Value) -> bool {
        self.write(&json!({
            "type": "control_response",
            "response": {"subtype": "success", "request_id": request_id, "response": body},
        }))
        .await
    }

    async fn set_mode(
        &mut self,
        mode: ApprovalMode,
        input: &mut mpsc::UnboundedReceiver<Input>,
    ) -> bool {
        let full_now = self.mode == ApprovalMode::FullAccess;
        if (mode == ApprovalMode::FullAccess) == full_now {
            self.pending_mode = None;
            let request = json!({"subtype": "set_permission_mode", "mode": permission_mode(mode)});
            return self.control(Request::SetMode(mode), request).await;
        }
        if mode == ApprovalMode::FullAccess {
            // Full access answers what is waiting: it would not have asked.
            for (_, permission) in self.approvals.take_all() {
                let body = json!({"behavior": "allow", "updatedInput": permission.input});
                self.respond(&permission.request_id, body).await;
            }
        }
        if self.busy {
            self.pending_mode = Some(mode);
            return self
                .emit(event(
                    "approval_mode_pending",
                    json!({ "mode": mode.as_str() }),
                ))
                .await;
        }
        self.restart(mode, input).await
    }

    /// Restarts the CLI on the same conversation in `mode` (full access is a start flag).
    async fn restart(
        &mut self,
        mode: ApprovalMode,
        input: &mut mpsc::UnboundedReceiver<Input>,
    ) -> bool {
        let was_pending = self.pending_mode.take().is_some();
        if let Some(child) = self.child.take() {
            let generation = child.generation;
            child.stop();
            // Let the old process finish writing the transcript the new one resumes.
            wait_exit(input, generation).await;
        }
        self.mode = mode;
        self.conversation_saved =
            self.conversation_saved || transcript_exists(&self.config_dir, &self.session);
        self.requests.clear();
        // The old process's MCP questions went with it.
        self.elicitations.take_all();
        if let Err(e) = self.spawn() {
            self.sink
                .exited(Some(format!("could not restart Claude Code: {e}")))
                .await;
            return false;
        }
        self.control(Request::Initialize, initialize_request())
            .await;
        let mut events = vec![event("approval_mode", json!({ "mode": mode.as_str() }))];
        if was_pending {
            events.push(event("approval_mode_pending", json!({ "mode": null })));
        }
        if !self.emit_all(events).await {
            return false;
        }
        self.next_queued().await
    }

    /// Starts the next queued message, if any.
    async fn next_queued(&mut self) -> bool {
        match self.queue.pop() {
            Some((message, pending)) => self.emit(pending).await && self.start_turn(message).await,
            None => true,
        }
    }

    // ---- frames ----

    async fn on_frame(&mut self, frame: Value, input: &mut mpsc::UnboundedReceiver<Input>) -> bool {
        let kind = frame.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "control_response" => self.on_control_response(&frame["response"]).await,
            "control_request" => self.on_control_request(&frame).await,
            "control_cancel_request" => {
                if let Some(id) = frame.get("request_id").and_then(Value::as_str)
                    && let Some(call) = self.approvals.find(|p| p.request_id == id)
                {
                    let call = call.to_string();
                    self.approvals.withdraw(&call);
                }
                if let Some(id) = frame.get("request_id").and_then(Value::as_str)
                    && let Some(call) = self.elicitations.find(|e| e.request_id == id)
                {
                    let call = call.to_string();
                    self.elicitations.withdraw(&call);
                }
                true
            }
            "system" => self.on_system(&frame).await,
            "stream_event" => self.on_stream(&frame).await,
            "assistant" => self.on_assistant(&frame).await,
            "user" => self.on_user(&frame).await,
            "result" => self.on_result(&frame, input).await,
            "prompt_suggestion" => match frame.get("suggestion").and_then(Value::as_str) {
                Some(text) if !text.trim().is_empty() => {
                    self.emit(event("prompt_suggestion", json!({ "text": text })))
                        .await
                }
                _ => true,
            },
            "rate_limit_event" => {
                let fields = frame.get("rate_limit_info").cloned().unwrap_or(json!({}));
                self.sink.state(event("rate_limit", fields)).await
            }
            other => {
                tracing::debug!("claude frame not translated: {other}");
                true
            }
        }
    }

    async fn on_control_response(&mut self, response: &Value) -> bool {
        let Some(id) = response.get("request_id").and_then(Value::as_str) else {
            return true;
        };
        let Some(request) = self.requests.remove(id) else {
            return true;
        };
        if response.get("subtype").and_then(Value::as_str) == Some("error") {
            let message = response.get("error").map(text_of).unwrap_or_default();
            match &request {
                Request::TaskOutput(task) => {
                    let e = event("task_output", json!({"task_id": task, "error": message}));
                    return self.emit(e).await;
                }
                Request::SideQuestion(question) => {
                    return self.emit(extras::side_error(question, &message)).await;
                }
                Request::Flags(settings) if settings.get("fastMode").is_some() => {
                    let status = self.model_status();
                    return self
                        .emit(info(format!("Claude Code refused fast mode: {message}")))
                        .await
                        && self.sink.answer(status).await;
                }
                _ => {}
            }
            let what = match &request {
                Request::Initialize => "initialize",
                Request::McpStatus => "mcp_status",
                Request::SetModel(_) => "set_model",
                Request::SetMode(_) => "set_permission_mode",
                Request::Plain(name) | Request::McpChange(name) => name,
                Request::TaskOutput(_) => "get_task_output",
                Request::PermissionRules => "list_permission_rules",
                Request::ContextUsage => "get_context_usage",
                Request::SideQuestion(_) => "side_question",
                Request::Flags(_) => "apply_flag_settings",
                Request::GetSettings => "get_settings",
            };
            return self
                .emit(error(format!("Claude Code refused {what}: {message}")))
                .await;
        }
        let body = response.get("response").cloned().unwrap_or(Value::Null);
        match request {
            Request::Initialize => {
                // Questions an MCP server asked before we (re)attached.
                let pending = response
                    .get("pending_elicitation_requests")
                    .or(body.get("pending_elicitation_requests"))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for frame in &pending {
                    let request = &frame["request"];
                    if request.get("subtype").and_then(Value::as_str) == Some("elicitation")
                        && let Some(id) = frame.get("request_id").and_then(Value::as_str)
                        && !self.elicitation(id, request).await
                    {
                        return false;
                    }
                }
                if let Some(models) = body.get("models").and_then(Value::as_array) {
                    self.models = models.clone();
                }
                if let Some(state) = body.get("fast_mode_state").and_then(Value::as_str) {
                    self.fast_state = Some(state.to_string());
                }
                self.fast_disabled_reason = body
                    .get("fast_mode_disabled_reason")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                if let Some(version) = body.get("claude_code_version").and_then(Value::as_str) {
                    self.version = Some(version.to_string());
                }
                let commands: Vec<Value> = body
                    .get("commands")
                    .and_then(Value::as_array)
                    .map(|c| c.iter().map(command_entry).collect())
                    .unwrap_or_default();
                let list = event("command_list", json!({ "commands": commands }));
                let model = self.model_status();
                let startup = self.startup_event();
                if !(self.sink.state(startup).await
                    && self.sink.state(model).await
                    && self.sink.state(list).await)
                {
                    return false;
                }
                // The session's own settings, again after a restart.
                match self.flags.settings() {
                    Some(settings) => self.apply_flags(settings).await,
                    None => true,
                }
            }
            Request::TaskOutput(task) => self.emit(extras::task_output(&task, &body)).await,
            Request::PermissionRules => self.emit(extras::permission_rules(&body)).await,
            Request::ContextUsage => self.emit(extras::context_breakdown(&body)).await,
            Request::SideQuestion(question) => {
                self.emit(extras::side_answer(&question, &body)).await
            }
            Request::Flags(settings) => self.flags_applied(&settings).await,
            Request::GetSettings => {
                let applied = extras::applied(&body);
                if let Some(effort) = applied.effort {
                    self.options.effort = Some(effort);
                }
                if applied.ultracode.is_some() {
                    self.flags.ultracode = applied.ultracode;
                }
                if applied.ultracode_available.is_some() {
                    self.ultracode_available = applied.ultracode_available;
                }
                if let Some(on) = applied.thinking_summaries {
                    self.flags.thinking = Some(on);
                }
                let status = self.model_status();
                self.sink.answer(status).await
            }
            Request::McpStatus => {
                let servers = body.get("mcpServers").cloned().unwrap_or(json!([]));
                let servers: Vec<Value> = servers
                    .as_array()
                    .map(|s| s.iter().map(mcp_entry).collect())
                    .unwrap_or_default();
                // Asked for: always send, even when unchanged.
                let list = event("mcp_servers", json!({ "servers": servers }));
                self.sink.emit(list.clone()).await && self.sink.state(list).await
            }
            Request::SetModel(model) => {
                self.model = model;
                let status = self.model_status();
                self.sink.state(status).await
            }
            Request::SetMode(mode) => {
                self.mode = mode;
                let events = vec![
                    status(&format!("approval mode: {}", mode.as_str())),
                    event("approval_mode", json!({ "mode": mode.as_str() })),
                ];
                self.emit_all(events).await
            }
            Request::McpChange(_) => {
                self.control(Request::McpStatus, json!({"subtype": "mcp_status"}))
                    .await
            }
            Request::Plain(_) => true,
        }
    }

    async fn on_control_request(&mut self, frame: &Value) -> bool {
        let id = frame
            .get("request_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let request = &frame["request"];
        let subtype = request.get("subtype").and_then(Value::as_str).unwrap_or("");
        if subtype == "elicitation" {
            return self.elicitation(&id, request).await;
        }
        if subtype != "can_use_tool" {
            let _ = self
                .write(&json!({
                    "type": "control_response",
                    "response": {"subtype": "error", "request_id": id,
                                 "error": format!("{subtype} is not supported by this client")},
                }))
                .await;
            return true;
        }
        let tool = request
            .get("tool_name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let input = request.get("input").cloned().unwrap_or(json!({}));
        let call_id = request
            .get("tool_use_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| id.clone());
        if self.mode == ApprovalMode::FullAccess {
            let _ = self
                .respond(&id, json!({"behavior": "allow", "updatedInput": input}))
                .await;
            return true;
        }
        let name = claude_tool_name(tool);
        let summary = summarize(tool, &input, request);
        let mut roots = vec![self.cwd.clone()];
        roots.extend(self.extra_dirs.iter().cloned());
        let edit = crate::claude_hunks::for_tool(tool, &input, &self.cwd, &roots);
        let hunks = edit
            .as_ref()
            .map(|e| serde_json::to_value(&e.hunks).unwrap_or(Value::Null))
            .unwrap_or(Value::Null);
        let suggestions = request
            .get("permission_suggestions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let shown = json!({
            "call_id": call_id,
            "name": name,
            "summary": summary,
            "subagent_id": request.get("agent_id").and_then(Value::as_str),
            "hunks": hunks,
            "scopes": ["session", "project", "user"],
        });
        self.approvals.open(
            call_id.clone(),
            Permission {
                request_id: id,
                tool_name: tool.to_string(),
                input,
                suggestions,
                edit,
                shown: shown.clone(),
            },
        );
        let card = event("approval_request", shown);
        self.emit(card).await
    }

    async fn on_system(&mut self, frame: &Value) -> bool {
        match frame.get("subtype").and_then(Value::as_str).unwrap_or("") {
            "init" => {
                if let Some(model) = frame.get("model").and_then(Value::as_str) {
                    self.model = Some(model.to_string());
                }
                if let Some(version) = frame.get("claude_code_version").and_then(Value::as_str) {
                    self.version = Some(version.to_string());
                }
                if let Some(state) = frame.get("fast_mode_state").and_then(Value::as_str) {
                    self.fast_state = Some(state.to_string());
                }
                if let Some(reason) = frame
                    .get("fast_mode_disabled_reason")
                    .and_then(Value::as_str)
                {
                    self.fast_disabled_reason = Some(reason.to_string());
                }
                let tools: Vec<&str> = frame
                    .get("tools")
                    .and_then(Value::as_array)
                    .map(|t| t.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let servers: Vec<Value> = frame
                    .get("mcp_servers")
                    .and_then(Value::as_array)
                    .map(|s| {
                        s.iter()
                            .map(|server| {
                                let mut entry = mcp_entry(server);
                                let name = server.get("name").and_then(Value::as_str).unwrap_or("");
                                let prefix = format!("mcp__{name}__");
                                let own: Vec<Value> = tools
                                    .iter()
                                    .filter_map(|t| t.strip_prefix(prefix.as_str()))
                                    .map(|t| json!({"name": t, "description": ""}))
                                    .collect();
                                entry["tools"] = Value::Array(own);
                                entry
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let startup = self.startup_event();
                let model = self.model_status();
                let mcp = event("mcp_servers", json!({ "servers": servers }));
                self.sink.state(startup).await
                    && self.sink.state(model).await
                    && self.sink.state(mcp).await
            }
            "session_title_changed" => match frame.get("title").and_then(Value::as_str) {
                Some(title) if !title.trim().is_empty() => {
                    self.emit(event("session_title", json!({ "title": title })))
                        .await
                }
                _ => true,
            },
            "status" if frame.get("status").and_then(Value::as_str) == Some("requesting") => {
                self.emit(event("connecting", json!({}))).await
            }
            "model_refusal_fallback" => self.model_fallback(frame).await,
            "elicitation_complete" => {
                let id = frame.get("elicitation_id").and_then(Value::as_str);
                let open = id.and_then(|id| {
                    self.elicitations
                        .find(|e| e.elicitation_id.as_deref() == Some(id))
                        .map(str::to_string)
                });
                // The server has what it asked for: a card still open is answered for the user.
                if let Some(call) = open
                    && let Some(e) = self.elicitations.withdraw(&call)
                    && !self
                        .respond(&e.request_id, json!({"action": "accept"}))
                        .await
                {
                    return false;
                }
                let server = frame
                    .get("mcp_server_name")
                    .and_then(Value::as_str)
                    .unwrap_or("an MCP server");
                self.emit(info(format!(
                    "{server}: the request in the browser is complete"
                )))
                .await
            }
            "api_retry" => {
                let fields = json!({
                    "attempt": frame.get("attempt"),
                    "max_attempts": frame.get("max_retries").or(frame.get("max_attempts")),
                    "delay_ms": frame.get("retry_delay_ms").or(frame.get("delay_ms")),
                    "reason": frame.get("error").map(text_of),
                });
                self.emit(event("retrying", fields)).await
            }
            "task_started" => {
                if self.runs.task_started(frame) && !self.runs_changed().await {
                    return false;
                }
                let id = frame.get("task_id").and_then(Value::as_str).unwrap_or("");
                self.tasks.retain(|t| t["id"] != id);
                self.tasks.push(json!({
                    "id": id,
                    "kind": frame.get("task_type").or(frame.get("kind")).and_then(Value::as_str).unwrap_or("task"),
                    "description": frame.get("description").and_then(Value::as_str).unwrap_or(""),
                }));
                let tasks = event("background_tasks", json!({ "tasks": self.tasks }));
                self.emit(tasks).await
            }
            "task_progress" | "task_updated" => {
                let changed =
                    if frame.get("subtype").and_then(Value::as_str) == Some("task_progress") {
                        self.runs.task_progress(frame)
                    } else {
                        self.runs.task_updated(frame)
                    };
                if changed && !self.runs_changed().await {
                    return false;
                }
                let fields = json!({
                    "task_id": frame.get("task_id"),
                    "message": frame.get("description").or(frame.get("message")).or(frame.get("summary")).map(text_of),
                });
                self.emit(event("task_progress", fields)).await
            }
            "task_notification" => {
                if self.runs.task_notification(frame) && !self.runs_changed().await {
                    return false;
                }
                let id = frame
                    .get("task_id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let kind = self
                    .tasks
                    .iter()
                    .find(|t| t["id"] == id.as_str())
                    .and_then(|t| t["kind"].as_str())
                    .unwrap_or("task")
                    .to_string();
                self.tasks.retain(|t| t["id"] != id.as_str());
                let events = vec![
                    event("background_tasks", json!({ "tasks": self.tasks })),
                    event(
                        "task_done",
                        json!({
                            "task_id": id,
                            "kind": kind,
                            "status": frame.get("status"),
                            "summary": frame.get("summary").map(text_of),
                        }),
                    ),
                ];
                self.emit_all(events).await
            }
            _ => true,
        }
    }

    async fn on_stream(&mut self, frame: &Value) -> bool {
        let parent = frame.get("parent_tool_use_id").and_then(Value::as_str);
        let ev = &frame["event"];
        match ev.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => {
                if parent.is_none()
                    && let Some(id) = ev.pointer("/message/id").and_then(Value::as_str)
                {
                    self.streamed.insert(id.to_string());
                }
                true
            }
            "content_block_start" => {
                let block = &ev["content_block"];
                match block.get("type").and_then(Value::as_str).unwrap_or("") {
                    "text" if parent.is_none() => {
                        self.emit(event("assistant_start", json!({}))).await
                    }
                    "thinking" if parent.is_none() && self.thinking_shown() => {
                        self.emit(event("thinking_start", json!({}))).await
                    }
                    "tool_use" => self.tool_start(block, parent).await,
                    _ => true,
                }
            }
            "content_block_delta" if parent.is_none() => {
                let delta = &ev["delta"];
                match delta.get("type").and_then(Value::as_str).unwrap_or("") {
                    "text_delta" => {
                        let text = delta.get("text").and_then(Value::as_str).unwrap_or("");
                        self.emit(event("assistant_delta", json!({ "delta": text })))
                            .await
                    }
                    "thinking_delta" if self.thinking_shown() => {
                        let text = delta.get("thinking").and_then(Value::as_str).unwrap_or("");
                        self.emit(event("reasoning_delta", json!({ "delta": text })))
                            .await
                    }
                    _ => true,
                }
            }
            _ => true,
        }
    }

    /// `system/model_refusal_fallback`: the model refused and the turn went to another. With
    /// scope `session` (or none, older CLIs) the session's model is now the fallback.
    async fn model_fallback(&mut self, frame: &Value) -> bool {
        let field = |snake: &str, camel: &str| {
            frame
                .get(snake)
                .or(frame.get(camel))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let from = field("original_model", "originalModel");
        let to = field("fallback_model", "fallbackModel");
        let reason = field("api_refusal_category", "apiRefusalCategory")
            .or_else(|| field("trigger", "trigger"))
            .unwrap_or_else(|| "refusal".into());
        let scope = field("scope", "scope").unwrap_or_else(|| "session".into());
        let fallback = event(
            "model_fallback",
            json!({"from": from, "to": to, "reason": reason, "scope": scope,
                   "message": frame.get("content").map(text_of)}),
        );
        if !self.emit(fallback).await {
            return false;
        }
        if scope == "session"
            && let Some(to) = to
        {
            self.model = Some(to);
            let status = self.model_status();
            return self.sink.state(status).await;
        }
        true
    }

    /// Thinking summaries turned off (`/thinking off`) are not shown even if some still come.
    fn thinking_shown(&self) -> bool {
        self.flags.thinking != Some(false)
    }

    async fn tool_start(&mut self, block: &Value, parent: Option<&str>) -> bool {
        let Some(id) = block.get("id").and_then(Value::as_str) else {
            return true;
        };
        if !self.started_tools.insert(id.to_string()) {
            return true;
        }
        let tool = block.get("name").and_then(Value::as_str).unwrap_or("");
        let name = claude_tool_name(tool);
        self.tools.insert(id.to_string(), name.clone());
        let mut fields = json!({"call_id": id, "name": name});
        if let Some(parent) = parent {
            // The subagent's own id (as in subagent_lifecycle), its Task call's until named.
            let agent = self.runs.agent_of_call(parent).unwrap_or(parent);
            fields["subagent"] = json!(agent);
        }
        self.emit(event("tool_start", fields)).await
    }

    async fn on_assistant(&mut self, frame: &Value) -> bool {
        let parent = frame.get("parent_tool_use_id").and_then(Value::as_str);
        let message = &frame["message"];
        let streamed = message
            .get("id")
            .and_then(Value::as_str)
            .is_some_and(|id| self.streamed.contains(id));
        let blocks = message
            .get("content")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut runs_changed = false;
        for block in &blocks {
            if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                runs_changed |= match parent {
                    Some(parent) => self.runs.subagent_tool_call(parent),
                    None => self.runs.tool_use(
                        block.get("id").and_then(Value::as_str).unwrap_or(""),
                        block.get("name").and_then(Value::as_str).unwrap_or(""),
                        block.get("input").unwrap_or(&Value::Null),
                    ),
                };
            }
            let ok = match block.get("type").and_then(Value::as_str).unwrap_or("") {
                "tool_use" => self.tool_start(block, parent).await,
                // Without partial messages the text comes only here.
                "text" if parent.is_none() && !streamed => {
                    let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                    self.emit(event("assistant_start", json!({}))).await
                        && self
                            .emit(event("assistant_delta", json!({ "delta": text })))
                            .await
                }
                "thinking" if parent.is_none() && !streamed && self.thinking_shown() => {
                    let text = block.get("thinking").and_then(Value::as_str).unwrap_or("");
                    self.emit(event("reasoning_delta", json!({ "delta": text })))
                        .await
                }
                _ => true,
            };
            if !ok {
                return false;
            }
        }
        if runs_changed && !self.runs_changed().await {
            return false;
        }
        if let Some(kind) = frame.get("error").and_then(Value::as_str) {
            return self.emit(error(format!("Claude Code: {kind}"))).await;
        }
        true
    }

    async fn on_user(&mut self, frame: &Value) -> bool {
        let Some(blocks) = frame.pointer("/message/content").and_then(Value::as_array) else {
            return true;
        };
        for block in blocks.clone() {
            if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                continue;
            }
            let id = block
                .get("tool_use_id")
                .and_then(Value::as_str)
                .unwrap_or("");
            let name = self.tools.get(id).cloned().unwrap_or_else(|| "tool".into());
            self.approvals.withdraw(id);
            let text = text_of(block.get("content").unwrap_or(&Value::Null));
            let is_error = block
                .get("is_error")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let ended_run = self.runs.tool_result(
                id,
                is_error,
                &text,
                frame.get("tool_use_result").unwrap_or(&Value::Null),
            );
            let output = json!({
                "call_id": id,
                "name": name,
                "output": text,
                "is_error": is_error,
            });
            if !self.emit(event("tool_output", output)).await {
                return false;
            }
            if ended_run && !self.runs_changed().await {
                return false;
            }
        }
        true
    }

    async fn on_result(
        &mut self,
        frame: &Value,
        input: &mut mpsc::UnboundedReceiver<Input>,
    ) -> bool {
        self.conversation_saved = true;
        let usage = &frame["usage"];
        let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        let cached = n(usage, "cache_read_input_tokens");
        let input_tokens =
            n(usage, "input_tokens") + n(usage, "cache_creation_input_tokens") + cached;
        let mut events = vec![event(
            "usage",
            json!({
                "input_tokens": input_tokens,
                "cached_input_tokens": cached,
                "output_tokens": n(usage, "output_tokens"),
                "reasoning_tokens": usage.pointer("/output_tokens_details/thinking_tokens").and_then(Value::as_u64).unwrap_or(0),
            }),
        )];
        if let Some(state) = frame.get("fast_mode_state").and_then(Value::as_str) {
            self.fast_state = Some(state.to_string());
        }
        if let Some(models) = frame.get("modelUsage").and_then(Value::as_object)
            && let Some(first) = models.values().next()
        {
            self.context_window = first.get("contextWindow").and_then(Value::as_u64);
            self.max_output_tokens = first.get("maxOutputTokens").and_then(Value::as_u64);
        }
        let reason = frame
            .get("terminal_reason")
            .and_then(Value::as_str)
            .unwrap_or("");
        let subtype = frame.get("subtype").and_then(Value::as_str).unwrap_or("");
        if reason.starts_with("aborted") {
            events.push(info("request interrupted"));
            events.push(status("interrupted"));
        } else if subtype != "success"
            || frame.get("is_error").and_then(Value::as_bool) == Some(true)
        {
            let message = frame
                .get("errors")
                .filter(|e| e.as_array().is_some_and(|a| !a.is_empty()))
                .or(frame.get("result"))
                .map(text_of)
                .unwrap_or_else(|| subtype.to_string());
            events.push(error(format!("Claude Code: {}", truncate(&message, 2000))));
        }
        events.push(status("ready"));
        self.busy = false;
        self.approvals.take_all();
        let model = self.model_status();
        if !self.emit_all(events).await || !self.sink.state(model).await {
            return false;
        }
        if let Some(mode) = self.pending_mode {
            return self.restart(mode, input).await;
        }
        self.next_queued().await
    }
}

/// `initialize`; prompt suggestions are opt-in (the SDK's `promptSuggestions`).
fn initialize_request() -> Value {
    json!({"subtype": "initialize", "hooks": null, "promptSuggestions": true})
}

/// Waits until child `generation` has exited (its last frames are dropped).
async fn wait_exit(input: &mut mpsc::UnboundedReceiver<Input>, generation: u64) {
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

/// Claude Code's `--permission-mode` for an approval mode.
pub fn permission_mode(mode: ApprovalMode) -> &'static str {
    match mode {
        ApprovalMode::Manual => "default",
        ApprovalMode::AutoEdit => "acceptEdits",
        ApprovalMode::Auto => "auto",
        ApprovalMode::Plan => "plan",
        ApprovalMode::FullAccess => "bypassPermissions",
    }
}

/// The always-allow rule an `approve` with `always` adds, at `destination`: the CLI's own
/// suggested rule when it made one (it knows the right rule content), else the whole tool.
fn always_rule(permission: &Permission, destination: &str) -> Value {
    let suggested = permission
        .suggestions
        .iter()
        .find(|s| s.get("type").and_then(Value::as_str) == Some("addRules"))
        .and_then(|s| s.get("rules").cloned());
    let rules = suggested.unwrap_or_else(|| json!([{ "toolName": permission.tool_name }]));
    json!({"type": "addRules", "rules": rules, "behavior": "allow", "destination": destination})
}

/// A one-line description of a tool call for its approval card.
fn summarize(tool: &str, input: &Value, request: &Value) -> String {
    let field = |k: &str| input.get(k).and_then(Value::as_str);
    let text = match tool {
        "Bash" => field("command"),
        "Write" | "Edit" | "MultiEdit" | "Read" => field("file_path"),
        "NotebookEdit" => field("notebook_path"),
        "WebFetch" => field("url"),
        "WebSearch" => field("query"),
        "Grep" | "Glob" => field("pattern"),
        _ => None,
    };
    let text = text
        .map(str::to_string)
        .or_else(|| {
            request
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| input.to_string());
    truncate(&text, 400)
}

fn command_entry(command: &Value) -> Value {
    let name = command.get("name").and_then(Value::as_str).unwrap_or("");
    json!({
        "command": format!("/{name}"),
        "marker": "claude",
        "args": command.get("argumentHint").and_then(Value::as_str).unwrap_or(""),
        "description": command.get("description").and_then(Value::as_str).unwrap_or(""),
    })
}

/// A Claude Code MCP server as a serve-v2 `mcp_servers` entry.
fn mcp_entry(server: &Value) -> Value {
    let status = server.get("status").and_then(Value::as_str).unwrap_or("");
    let (state, error) = match status {
        "connected" => ("connected", None),
        "pending" => ("connecting", None),
        "disabled" => ("disabled", None),
        "needs-auth" => ("failed", Some("needs authentication".to_string())),
        _ => (
            "failed",
            Some(
                server
                    .get("error")
                    .map(text_of)
                    .unwrap_or_else(|| status.to_string()),
            ),
        ),
    };
    let tools: Vec<Value> = server
        .get("tools")
        .and_then(Value::as_array)
        .map(|t| {
            t.iter()
                .map(|tool| {
                    json!({
                        "name": tool.get("name").and_then(Value::as_str).unwrap_or(""),
                        "description": tool.get("description").and_then(Value::as_str).unwrap_or(""),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let mut entry = json!({
        "name": server.get("name").and_then(Value::as_str).unwrap_or(""),
        "transport": server.pointer("/config/type").and_then(Value::as_str).unwrap_or("stdio"),
        "state": state,
        "tools": tools,
    });
    if let Some(error) = error {
        entry["error"] = json!(error);
    }
    entry
}

/// Claude Code's project directory name for a cwd: every non-alphanumeric character becomes
/// `-`; names over 200 characters are cut (the CLI then appends a hash, so match by prefix).
pub fn munge_cwd(cwd: &Path) -> String {
    cwd.display()
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Whether Claude Code saved a conversation of this id (in any project directory).
fn transcript_exists(config_dir: &Path, session: &str) -> bool {
    if session.is_empty() || session.contains(['/', '\\']) || session.starts_with('.') {
        return false;
    }
    let file = format!("{session}.jsonl");
    std::fs::read_dir(config_dir.join("projects"))
        .map(|dirs| dirs.flatten().any(|d| d.path().join(&file).is_file()))
        .unwrap_or(false)
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cwd_munging_matches_the_cli() {
        assert_eq!(
            munge_cwd(Path::new("/srv/engrec/work/cf")),
            "-srv-engrec-work-cf"
        );
        assert_eq!(
            munge_cwd(Path::new("/Users/tom/my.app")),
            "-Users-tom-my-app"
        );
    }

    #[test]
    fn modes_map_to_permission_modes() {
        assert_eq!(permission_mode(ApprovalMode::Manual), "default");
        assert_eq!(permission_mode(ApprovalMode::AutoEdit), "acceptEdits");
        assert_eq!(
            permission_mode(ApprovalMode::FullAccess),
            "bypassPermissions"
        );
    }

    #[test]
    fn always_rules_use_the_cli_suggestion_at_the_chosen_destination() {
        let p = Permission {
            request_id: "r".into(),
            tool_name: "Bash".into(),
            input: json!({}),
            edit: None,
            shown: json!({}),
            suggestions: vec![
                json!({"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"touch x"}],"behavior":"allow","destination":"localSettings"}),
            ],
        };
        let rule = always_rule(&p, "userSettings");
        assert_eq!(rule["destination"], "userSettings");
        assert_eq!(rule["rules"][0]["ruleContent"], "touch x");
        let bare = Permission {
            suggestions: vec![],
            ..p
        };
        assert_eq!(
            always_rule(&bare, "session")["rules"],
            json!([{"toolName":"Bash"}])
        );
    }

    #[test]
    fn summaries_name_what_the_tool_touches() {
        let s = summarize("Bash", &json!({"command":"ls -la"}), &json!({}));
        assert_eq!(s, "ls -la");
        let s = summarize(
            "Task",
            &json!({"x":1}),
            &json!({"description":"Run a task"}),
        );
        assert_eq!(s, "Run a task");
    }

    #[test]
    fn uuids_are_recognised() {
        assert!(is_uuid("b8019d2f-7723-4563-9d44-bfc0e5d93754"));
        assert!(!is_uuid("th-1234"));
    }

    #[test]
    fn mcp_states_are_translated() {
        let e = mcp_entry(&json!({"name":"gh","status":"needs-auth"}));
        assert_eq!(e["state"], "failed");
        assert_eq!(e["error"], "needs authentication");
        assert_eq!(
            mcp_entry(&json!({"name":"a","status":"connected"}))["state"],
            "connected"
        );
    }
}
