//! An Agent Client Protocol agent behind the Engine interface: `options.command` / `args`,
//! JSON-RPC 2.0 on its stdio, the daemon as the ACP client.
//!
//! ACP agents keep no conversation the daemon can resume, so every start (reopen included)
//! opens a new ACP session under the same jucode session id. The agent's `fs/*` and
//! `terminal/*` requests are answered inside the session's directory only (see
//! `acp_terminal` for the commands it asks the daemon to run).
//!
//! This file holds the session's state and its start; `ops` turns client ops into ACP requests,
//! `frames` turns what the agent writes into events and answers.

mod frames;
mod ops;
mod replay;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use jucode_engine::{EngineError, EngineFactory, EngineHandle, StartSpec};
use jucode_protocol::serve::Event;
use jucode_protocol::{ApprovalMode, Object};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::acp_terminal::Terminals;
use crate::child::{ChildProc, Input, Spawn, inside};
use crate::turns::{
    Answer, Approvals, Image, Message, Queue, Sink, Taken, load_image, mode_of, no_open_approval,
};
use crate::{AdapterConfig, EngineOptions, error, event, info, status, text_of, truncate};

/// Starts ACP agent sessions.
#[derive(Debug, Clone)]
pub struct AcpEngine {
    config: AdapterConfig,
}

impl AcpEngine {
    pub fn new(config: AdapterConfig) -> AcpEngine {
        AcpEngine { config }
    }
}

impl EngineFactory for AcpEngine {
    /// An ACP session runs `options.command`.
    fn runs_named_program(&self) -> bool {
        true
    }

    fn start(&self, spec: StartSpec) -> Result<EngineHandle, EngineError> {
        let options = EngineOptions::parse(&spec.options)?;
        let command = options.command.clone().ok_or_else(|| {
            EngineError::BadOptions("an ACP session needs options.command".into())
        })?;
        let program = if command.contains('/') {
            PathBuf::from(&command)
        } else {
            let path = options.env_var("PATH").unwrap_or_default();
            which::which_in(&command, Some(path), &spec.cwd)
                .map_err(|_| EngineError::Unavailable(format!("{command} was not found on PATH")))?
        };
        let (handle, ops, events) = jucode_engine::channel();
        let (input_tx, input_rx) = mpsc::unbounded_channel();
        let terminals = Terminals::new(vec![spec.cwd.clone()], input_tx.clone());
        let child = ChildProc::spawn(
            Spawn {
                program: &program,
                args: options.args.clone(),
                cwd: &spec.cwd,
                env: &options.env,
                env_remove: &[],
                generation: 1,
                label: command.clone(),
            },
            input_tx,
        )?;
        let acp = self.session(spec, &options, command, child, terminals, events);
        tokio::spawn(acp.run(ops, input_rx));
        Ok(handle)
    }
}

impl AcpEngine {
    /// The session's state around its running `child`.
    fn session(
        &self,
        spec: StartSpec,
        options: &EngineOptions,
        label: String,
        child: ChildProc,
        terminals: Terminals,
        events: mpsc::Sender<jucode_engine::EngineOutput>,
    ) -> Acp {
        let image_roots = vec![spec.cwd.clone(), self.config.upload_dir()];
        Acp {
            label,
            cwd: spec.cwd,
            image_roots,
            mode: options.mode(),
            child: Some(child),
            sink: Sink::new(events),
            agent_session: None,
            modes: Vec::new(),
            busy: false,
            queue: Queue::default(),
            approvals: Approvals::default(),
            requests: HashMap::new(),
            next_id: 0,
            tools: HashMap::new(),
            in_message: false,
            image_prompts: false,
            opening: true,
            terminals,
            denied: HashSet::new(),
            call_terminals: HashMap::new(),
        }
    }
}

#[derive(Debug, Clone)]
enum Request {
    Initialize,
    NewSession,
    SetMode(ApprovalMode),
    Prompt,
}

#[derive(Debug, Clone)]
struct Permission {
    id: Value,
    options: Vec<Value>,
}

pub(crate) struct Acp {
    label: String,
    cwd: PathBuf,
    image_roots: Vec<PathBuf>,
    mode: ApprovalMode,
    child: Option<ChildProc>,
    sink: Sink,
    agent_session: Option<String>,
    /// Mode ids the agent offers.
    modes: Vec<String>,
    busy: bool,
    queue: Queue,
    approvals: Approvals<Permission>,
    requests: HashMap<u64, Request>,
    next_id: u64,
    /// Tool names by tool call id.
    tools: HashMap<String, String>,
    /// Whether an assistant message is open (chunks follow `assistant_start`).
    in_message: bool,
    image_prompts: bool,
    /// Until the ACP session is open and in its starting mode.
    opening: bool,
    /// Commands the agent runs through the daemon.
    terminals: Terminals,
    /// Tool calls the user refused, until the agent reports them done.
    denied: HashSet<String>,
    /// The terminal a tool call shows, by tool call id.
    call_terminals: HashMap<String, String>,
}

impl Acp {
    async fn run(
        mut self,
        mut ops: mpsc::UnboundedReceiver<Object>,
        mut input: mpsc::UnboundedReceiver<Input>,
    ) {
        self.open().await;
        crate::child::drive(&mut self, &mut ops, &mut input).await;
    }

    /// Sends `initialize`. A failed write means the process is gone: its exit arrives as input.
    async fn open(&mut self) {
        let init = json!({
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true},
            "clientInfo": {"name": "jucode", "title": "jucode daemon", "version": env!("CARGO_PKG_VERSION")},
        });
        self.request(Request::Initialize, "initialize", init).await;
    }

    async fn write(&mut self, frame: Value) -> bool {
        let mut frame = frame;
        frame["jsonrpc"] = json!("2.0");
        match self.child.as_mut() {
            Some(child) => child.send(&frame).await,
            None => false,
        }
    }

    async fn request(&mut self, kind: Request, method: &str, params: Value) -> bool {
        self.next_id += 1;
        let id = self.next_id;
        self.requests.insert(id, kind);
        self.write(json!({"id": id, "method": method, "params": params}))
            .await
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

/// The terminal a tool call's content embeds.
fn embedded_terminal(update: &Value) -> Option<String> {
    update
        .get("content")
        .and_then(Value::as_array)?
        .iter()
        .find(|b| b.get("type").and_then(Value::as_str) == Some("terminal"))
        .and_then(|b| b.get("terminalId").and_then(Value::as_str))
        .map(str::to_string)
}

/// The ACP mode id for an approval mode (the ids Claude-backed agents use; other agents'
/// modes are taken when their ids match).
fn mode_id(mode: ApprovalMode) -> &'static str {
    match mode {
        ApprovalMode::Manual => "default",
        ApprovalMode::AutoEdit => "acceptEdits",
        ApprovalMode::Auto => "auto",
        ApprovalMode::Plan => "plan",
        ApprovalMode::FullAccess => "bypassPermissions",
    }
}

/// The permission option for an answer, chosen by kind (option ids differ between agents).
fn pick_option(options: &[Value], allow: bool, always: bool) -> Option<String> {
    let kinds: &[&str] = match (allow, always) {
        (true, true) => &["allow_always", "allow_once"],
        (true, false) => &["allow_once", "allow_always"],
        (false, _) => &["reject_once", "reject_always"],
    };
    kinds.iter().find_map(|kind| {
        options
            .iter()
            .find(|o| o.get("kind").and_then(Value::as_str) == Some(kind))
            .and_then(|o| o.get("optionId").and_then(Value::as_str))
            .map(str::to_string)
    })
}

/// The serve-v2 tool name for an ACP tool call: the Claude tool name a Claude-backed agent
/// reports, else the call's kind.
fn tool_name(call: &Value) -> String {
    if let Some(name) = call
        .pointer("/_meta/claudeCode/toolName")
        .and_then(Value::as_str)
    {
        return crate::claude_tool_name(name);
    }
    match call.get("kind").and_then(Value::as_str).unwrap_or("other") {
        "execute" => "bash",
        "edit" => "str_replace",
        "read" => "read",
        "search" => "ripgrep",
        "fetch" => "web_fetch",
        other => other,
    }
    .to_string()
}

impl crate::child::Driven for Acp {
    async fn on_op(&mut self, op: Object) -> bool {
        self.handle_op(op).await
    }

    async fn on_frame(&mut self, frame: Value) -> bool {
        self.handle_frame(frame).await
    }

    fn child(&mut self) -> &mut Option<ChildProc> {
        &mut self.child
    }

    fn sink(&mut self) -> &mut Sink {
        &mut self.sink
    }

    async fn on_local(&mut self, message: Value) -> bool {
        if let Some(name) = message.get("terminal_exited").and_then(Value::as_str) {
            for (id, result) in self.terminals.exited(name) {
                if !self.write(json!({"id": id, "result": result})).await {
                    return true;
                }
            }
        }
        true
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn options_are_picked_by_kind() {
        let options = vec![
            json!({"optionId":"allow-once","kind":"allow_once"}),
            json!({"optionId":"reject","kind":"reject_once"}),
        ];
        assert_eq!(
            pick_option(&options, true, false).as_deref(),
            Some("allow-once")
        );
        assert_eq!(
            pick_option(&options, true, true).as_deref(),
            Some("allow-once")
        );
        assert_eq!(
            pick_option(&options, false, false).as_deref(),
            Some("reject")
        );
        assert_eq!(pick_option(&[], false, false), None);
    }

    #[test]
    fn tool_names_come_from_claude_names_or_kinds() {
        assert_eq!(
            tool_name(&json!({"_meta":{"claudeCode":{"toolName":"Bash"}},"kind":"execute"})),
            "bash"
        );
        assert_eq!(tool_name(&json!({"kind":"edit"})), "str_replace");
        assert_eq!(tool_name(&json!({})), "other");
    }
}
