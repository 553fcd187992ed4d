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
//!
//! This file holds the session's state and its start; `process` runs the CLI, `ops` turns
//! client ops into what the CLI reads, `frames` turns what the CLI writes into events.

mod frames;
mod ops;
mod process;
mod replay;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use jucode_engine::{EngineError, EngineFactory, EngineHandle, StartSpec};
use jucode_protocol::serve::{Event, TranscriptItem};
use jucode_protocol::{ApprovalMode, Object};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::agent_tools::{self, AgentTools};
use crate::child::{ChildProc, Input, Spawn, wait_exit};
use crate::claude_elicit::Elicitation;
use crate::claude_extras as extras;
use crate::claude_runs::{self, Runs};
use crate::turns::{
    Answer, Approvals, Image, Message, Queue, Sink, Taken, hunk_choice, image_note, load_image,
    mode_of, no_open_approval,
};
use crate::{
    AdapterConfig, EngineOptions, claude_tool_name, error, event, info, status, text_of, truncate,
};

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
    /// A per-session `--settings` file; `set_gateway` restarts on the same conversation.
    fn takes_gateway(&self) -> bool {
        true
    }

    /// `claude --resume` lists the name a `rename` sets.
    fn keeps_titles(&self) -> bool {
        true
    }

    fn saved_conversations(&self, cwd: &std::path::Path) -> Vec<jucode_engine::SavedConversation> {
        crate::history::saved_conversations("claude", cwd, &self.config.user_home)
    }

    /// Claude Code's session JSONL, where the CLI saves each user message as its turn
    /// begins; the adapter writes a message to the CLI only after echoing it, so one never
    /// echoed was never taken.
    fn saved_transcript(&self, session: &str) -> Option<Vec<TranscriptItem>> {
        let config_dir = std::env::var_os("CLAUDE_CONFIG_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| self.config.user_home.join(".claude"));
        let path = crate::history::claude_transcript_path(&config_dir, session)?;
        Some(crate::history::claude_transcript(&path))
    }

    fn transcript_is_durable(&self) -> bool {
        true
    }

    fn tui_command(
        &self,
        spec: &jucode_engine::TuiSpec,
    ) -> Option<Result<jucode_engine::TuiCommand, EngineError>> {
        let options = EngineOptions::default();
        let found =
            crate::discover::find_binary("claude", "CLAUDE_BIN", &options, &self.config.user_home);
        let config_dir = options
            .env_var("CLAUDE_CONFIG_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.config.user_home.join(".claude"));
        let saved = transcript_exists(&config_dir, &spec.session);
        Some(found.and_then(|program| {
            let mut cmd = crate::tui::claude(program, spec, saved);
            if spec.gateway {
                // The same settings file the engine's process gets (rewritten at its restart).
                let path =
                    crate::gateway::claude_settings_path(&self.config.jucode_home, &spec.session);
                let flag = crate::gateway::claude_settings(
                    crate::gateway::endpoint(&self.config)?,
                    &path,
                )?;
                cmd.args.push(flag);
            }
            Ok(cmd)
        }))
    }

    fn start(&self, spec: StartSpec) -> Result<EngineHandle, EngineError> {
        let (handle, ops, events) = jucode_engine::channel();
        let (input_tx, input_rx) = mpsc::unbounded_channel();
        let mut claude = self.session(spec, None, events, input_tx)?;
        claude.spawn()?;
        tokio::spawn(claude.run(ops, input_rx));
        Ok(handle)
    }
}

impl ClaudeEngine {
    /// The session's state before its CLI starts. `program` given: no search for the CLI.
    fn session(
        &self,
        spec: StartSpec,
        program: Option<PathBuf>,
        events: mpsc::Sender<jucode_engine::EngineOutput>,
        input_tx: mpsc::UnboundedSender<Input>,
    ) -> Result<Claude, EngineError> {
        let options = EngineOptions::parse(&spec.options)?;
        let flags = Flags::from_options(&spec.options)?;
        let program = match program {
            Some(program) => program,
            None => crate::discover::find_binary(
                "claude",
                "CLAUDE_BIN",
                &options,
                &self.config.user_home,
            )?,
        };
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
        let mut roots = vec![spec.cwd.clone()];
        roots.extend(spec.extra_dirs.iter().cloned());
        roots.push(self.config.upload_dir());
        Ok(Claude {
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
            gateway: crate::gateway::ClaudeGateway::new(
                &spec.options,
                &self.config,
                &spec.session,
            )?,
            agent: AgentTools::of(&spec).map(|tools| ClaudeAgent {
                files: agent_tools::files_dir(&self.config.jucode_home),
                tools,
            }),
        })
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

pub(crate) struct Claude {
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
    gateway: crate::gateway::ClaudeGateway,
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
    /// A long-lived agent's tools and prompt, handed to every start of the CLI.
    agent: Option<ClaudeAgent>,
}

/// An agent session's MCP server and prompt, and where their files for the CLI are kept.
#[derive(Debug)]
struct ClaudeAgent {
    tools: AgentTools,
    files: PathBuf,
}

impl Claude {
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
}

/// `initialize`; prompt suggestions are opt-in (the SDK's `promptSuggestions`).
fn initialize_request() -> Value {
    json!({"subtype": "initialize", "hooks": null, "promptSuggestions": true})
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
