//! The agent trace of a Claude Code conversation: its Task subagents and Workflow runs, live
//! (from the stream: `Task`/`Agent`/`Workflow` tool calls, frames with a `parent_tool_use_id`,
//! `system/task_*`) and saved (`<projectDir>/<session>/subagents/**/agent-<id>.jsonl`), as the
//! serve-v2 `agent_runs` event, and one subagent's own conversation as `subagent_transcript`.
//!
//! A subagent's id is its Claude Code agent id: the `task_id` of its `task_started` frame, the
//! `agentId` of its Task result and the `<id>` of its file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use jucode_protocol::serve::Event;
use serde_json::{Value, json};

use crate::runs::{AgentRun, agent_runs, newest, now_ms};
use crate::{claude_tool_name, event, text_of, truncate};

/// The tools that start a subagent (older CLIs call it Task, newer Agent).
const AGENT_TOOLS: &[&str] = &["Task", "Agent"];
const WORKFLOW_TOOL: &str = "Workflow";

#[derive(Debug, Clone, Default, PartialEq)]
struct Agent {
    run: AgentRun,
    prompt: Option<String>,
    result: Option<String>,
    error: Option<String>,
    /// The workflow that runs it, if any.
    workflow: Option<String>,
    /// Seen in this process's stream (saved runs never get lifecycle events).
    live: bool,
    /// Whether `id` is Claude Code's agent id yet (it starts as the Task call's id).
    id_known: bool,
    /// The last `subagent_lifecycle` status sent for it.
    announced: Option<&'static str>,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Workflow {
    id: String,
    tool_use_id: Option<String>,
    name: String,
    description: String,
    status: String,
    started_at: Option<u64>,
    duration_ms: Option<u64>,
    tokens: u64,
    tool_calls: u64,
}

/// Every run of the conversation this process knows of.
#[derive(Debug, Default)]
pub(crate) struct Runs {
    agents: Vec<Agent>,
    workflows: Vec<Workflow>,
}

fn str_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The `usage` of a `system/task_progress` or `task_notification` frame: what it gives
/// replaces a run's counters, what it leaves out keeps them.
struct Usage {
    tokens: Option<u64>,
    tool_calls: Option<u64>,
    duration_ms: Option<u64>,
}

impl Usage {
    fn of(frame: &Value) -> Usage {
        let n = |k: &str| frame["usage"].get(k).and_then(Value::as_u64);
        Usage {
            tokens: n("total_tokens"),
            tool_calls: n("tool_uses"),
            duration_ms: n("duration_ms"),
        }
    }

    fn apply(&self, tokens: &mut u64, tool_calls: &mut u64, duration_ms: &mut Option<u64>) {
        *tokens = self.tokens.unwrap_or(*tokens);
        *tool_calls = self.tool_calls.unwrap_or(*tool_calls);
        *duration_ms = self.duration_ms.or(*duration_ms);
    }
}

impl Runs {
    /// A tool call of the main conversation; `true` when it started a run.
    pub(crate) fn tool_use(&mut self, id: &str, name: &str, input: &Value) -> bool {
        if self.by_tool_use(id).is_some()
            || self
                .workflows
                .iter()
                .any(|w| w.tool_use_id.as_deref() == Some(id))
        {
            return false;
        }
        if AGENT_TOOLS.contains(&name) {
            let label = str_of(input, "description").unwrap_or_default();
            self.agents.push(Agent {
                run: AgentRun {
                    kind: str_of(input, "subagent_type"),
                    tool_use_id: Some(id.to_string()),
                    model: str_of(input, "model"),
                    ..AgentRun::running(id, &label)
                },
                prompt: str_of(input, "prompt"),
                live: true,
                ..Agent::default()
            });
            return true;
        }
        if name == WORKFLOW_TOOL {
            self.workflows.push(Workflow {
                id: id.to_string(),
                tool_use_id: Some(id.to_string()),
                name: str_of(input, "name")
                    .or_else(|| str_of(input, "workflow"))
                    .unwrap_or_default(),
                description: str_of(input, "description").unwrap_or_default(),
                status: "running".into(),
                started_at: Some(now_ms()),
                ..Workflow::default()
            });
            return true;
        }
        false
    }

    fn by_tool_use(&mut self, tool_use_id: &str) -> Option<&mut Agent> {
        self.agents
            .iter_mut()
            .find(|a| a.run.tool_use_id.as_deref() == Some(tool_use_id))
    }

    fn agent(&mut self, id: &str) -> Option<&mut Agent> {
        self.agents.iter_mut().find(|a| a.run.id == id)
    }

    fn workflow(&mut self, id: &str) -> Option<&mut Workflow> {
        self.workflows.iter_mut().find(|w| w.id == id)
    }

    /// A tool call a subagent made (a frame whose `parent_tool_use_id` is its Task call).
    pub(crate) fn subagent_tool_call(&mut self, parent_tool_use_id: &str) -> bool {
        match self.by_tool_use(parent_tool_use_id) {
            Some(agent) => {
                agent.run.tool_calls += 1;
                true
            }
            None => false,
        }
    }

    /// The id of the subagent a Task call started, once Claude Code named it.
    pub(crate) fn agent_of_call(&self, tool_use_id: &str) -> Option<&str> {
        self.agents
            .iter()
            .find(|a| a.run.tool_use_id.as_deref() == Some(tool_use_id) && a.id_known)
            .map(|a| a.run.id.as_str())
    }

    /// `subagent_lifecycle` events for the live subagents whose state moved on since the last
    /// call: `started` once Claude Code gave the agent its id, then `completed`, `failed` or
    /// `stopped`. A run that ends before it was announced gets both.
    pub(crate) fn lifecycle(&mut self) -> Vec<Event> {
        let mut out = Vec::new();
        for agent in self.agents.iter_mut().filter(|a| a.live) {
            let phase = match agent.run.status.as_str() {
                "completed" => "completed",
                "failed" => "failed",
                "stopped" | "killed" => "stopped",
                _ if agent.id_known => "started",
                _ => continue,
            };
            if agent.announced == Some(phase) {
                continue;
            }
            if agent.announced.is_none() && phase != "started" {
                out.push(lifecycle_event(agent, "started"));
            }
            out.push(lifecycle_event(agent, phase));
            agent.announced = Some(phase);
        }
        out
    }

    /// `system/task_started`: a subagent or workflow got its id.
    pub(crate) fn task_started(&mut self, frame: &Value) -> bool {
        let Some(task) = str_of(frame, "task_id") else {
            return false;
        };
        let kind = str_of(frame, "task_type").unwrap_or_default();
        let tool_use = str_of(frame, "tool_use_id");
        let description = str_of(frame, "description");
        if kind == "local_workflow" {
            let found = tool_use.as_deref().and_then(|t| {
                self.workflows
                    .iter()
                    .position(|w| w.tool_use_id.as_deref() == Some(t))
            });
            let workflow = match found {
                Some(i) => &mut self.workflows[i],
                None => {
                    self.workflows.push(Workflow {
                        tool_use_id: tool_use.clone(),
                        status: "running".into(),
                        started_at: Some(now_ms()),
                        ..Workflow::default()
                    });
                    let last = self.workflows.len() - 1;
                    &mut self.workflows[last]
                }
            };
            workflow.id = task;
            if let Some(name) = str_of(frame, "workflow_name") {
                workflow.name = name;
            }
            if let Some(d) = description {
                workflow.description = d;
            }
            return true;
        }
        if kind != "local_agent" && frame.get("subagent_type").is_none() {
            return false;
        }
        let parent =
            str_of(frame, "parent_task_id").filter(|p| self.workflows.iter().any(|w| &w.id == p));
        let found = tool_use
            .as_deref()
            .and_then(|t| {
                self.agents
                    .iter()
                    .position(|a| a.run.tool_use_id.as_deref() == Some(t))
            })
            .or_else(|| self.agents.iter().position(|a| a.run.id == task));
        let agent = match found {
            Some(i) => &mut self.agents[i],
            None => {
                self.agents.push(Agent {
                    run: AgentRun {
                        tool_use_id: tool_use.clone(),
                        ..AgentRun::running("", "")
                    },
                    live: true,
                    ..Agent::default()
                });
                let last = self.agents.len() - 1;
                &mut self.agents[last]
            }
        };
        agent.run.id = task;
        agent.id_known = true;
        if let Some(d) = description {
            agent.run.label = d;
        }
        if let Some(kind) = str_of(frame, "subagent_type") {
            agent.run.kind = Some(kind);
        }
        if let Some(prompt) = str_of(frame, "prompt") {
            agent.prompt = Some(prompt);
        }
        if parent.is_some() {
            agent.workflow = parent;
        }
        true
    }

    /// `system/task_progress`: usage so far.
    pub(crate) fn task_progress(&mut self, frame: &Value) -> bool {
        let Some(task) = str_of(frame, "task_id") else {
            return false;
        };
        let usage = Usage::of(frame);
        if let Some(agent) = self.agent(&task) {
            let run = &mut agent.run;
            usage.apply(&mut run.tokens, &mut run.tool_calls, &mut run.duration_ms);
            return true;
        }
        if let Some(w) = self.workflow(&task) {
            usage.apply(&mut w.tokens, &mut w.tool_calls, &mut w.duration_ms);
            return true;
        }
        false
    }

    /// `system/task_updated`: a status change.
    pub(crate) fn task_updated(&mut self, frame: &Value) -> bool {
        let Some(task) = str_of(frame, "task_id") else {
            return false;
        };
        let patch = &frame["patch"];
        let status = str_of(patch, "status");
        let error = str_of(patch, "error");
        if let Some(agent) = self.agent(&task) {
            if let Some(status) = status {
                agent.run.status = status;
            }
            if error.is_some() {
                agent.error = error;
            }
            return true;
        }
        if let Some(workflow) = self.workflow(&task) {
            if let Some(status) = status {
                workflow.status = status;
            }
            return true;
        }
        false
    }

    /// `system/task_notification`: a run ended.
    pub(crate) fn task_notification(&mut self, frame: &Value) -> bool {
        let Some(task) = str_of(frame, "task_id") else {
            return false;
        };
        let status = str_of(frame, "status").unwrap_or_else(|| "completed".into());
        let summary = str_of(frame, "summary");
        let usage = Usage::of(frame);
        if let Some(agent) = self.agent(&task) {
            let run = &mut agent.run;
            usage.apply(&mut run.tokens, &mut run.tool_calls, &mut run.duration_ms);
            if status == "failed" {
                agent.error = summary;
            } else {
                agent.result = summary;
            }
            agent.run.status = status;
            return true;
        }
        if let Some(w) = self.workflow(&task) {
            usage.apply(&mut w.tokens, &mut w.tool_calls, &mut w.duration_ms);
            w.status = status;
            return true;
        }
        false
    }

    /// The result of a run's tool call (a foreground run ends with it; a background one only
    /// says it started). `result` is the frame's `tool_use_result`.
    pub(crate) fn tool_result(
        &mut self,
        tool_use_id: &str,
        is_error: bool,
        output: &str,
        result: &Value,
    ) -> bool {
        if let Some(agent) = self.by_tool_use(tool_use_id) {
            apply_task_result(agent, is_error, output, result);
            return true;
        }
        if let Some(workflow) = self
            .workflows
            .iter_mut()
            .find(|w| w.tool_use_id.as_deref() == Some(tool_use_id))
        {
            if is_error {
                workflow.status = "failed".into();
            } else if workflow.status == "running"
                && str_of(result, "status").as_deref() != Some("async_launched")
            {
                workflow.status = "completed".into();
            }
            if workflow.duration_ms.is_none() {
                workflow.duration_ms = workflow.started_at.map(|s| now_ms().saturating_sub(s));
            }
            return true;
        }
        false
    }

    /// Adds the runs Claude Code saved for `session` that this process has not seen.
    pub(crate) fn load_saved(&mut self, config_dir: &Path, session: &str) -> bool {
        let files = subagent_files(config_dir, session);
        if files.is_empty() {
            return false;
        }
        let tasks = crate::history::claude_transcript_path(config_dir, session)
            .map(|p| saved_tasks(&p))
            .unwrap_or_default();
        let mut changed = false;
        for (id, path) in files {
            if self.agents.iter().any(|a| a.run.id == id) {
                continue;
            }
            let mut agent = saved_agent(&id, &path);
            if let Some((tool_use_id, input, result)) = tasks.get(&id) {
                agent.run.tool_use_id = Some(tool_use_id.clone());
                if let Some(label) = str_of(input, "description") {
                    agent.run.label = label;
                }
                agent.run.kind = str_of(input, "subagent_type").or(agent.run.kind);
                apply_task_result(&mut agent, false, "", result);
            }
            self.agents.push(agent);
            changed = true;
        }
        changed
    }

    pub(crate) fn event(&self) -> Event {
        let workflows: Vec<Value> = self
            .workflows
            .iter()
            .map(|w| {
                let agents: Vec<Value> = self
                    .agents
                    .iter()
                    .filter(|a| a.workflow.as_deref() == Some(w.id.as_str()))
                    .map(|a| {
                        json!({
                            "id": a.run.id, "label": a.run.label, "phase": null, "model": a.run.model,
                            "state": a.run.status, "started_at": a.run.started_at,
                            "duration_ms": a.run.duration_ms, "tokens": a.run.tokens,
                            "tool_calls": a.run.tool_calls, "prompt": a.prompt,
                            "result": a.result, "error": a.error,
                        })
                    })
                    .collect();
                json!({
                    "id": w.id, "tool_use_id": w.tool_use_id, "name": w.name,
                    "description": w.description, "status": w.status,
                    "started_at": w.started_at, "duration_ms": w.duration_ms,
                    "tokens": w.tokens, "tool_calls": w.tool_calls, "phases": [],
                    "agents": agents,
                })
            })
            .collect();
        let agents = self.agents.iter().filter(|a| a.workflow.is_none());
        agent_runs(workflows, agents.map(|a| &a.run))
    }
}

/// One `subagent_lifecycle` event: `message` is the prompt when it starts and the result or
/// error when it ends; Claude Code's also name the model and the Task call.
fn lifecycle_event(agent: &Agent, status: &str) -> Event {
    let message = match status {
        "started" => agent.prompt.as_deref().map(|p| truncate(p, 400)),
        "failed" => agent.error.clone(),
        _ => agent.result.clone(),
    };
    let mut fields = agent.run.lifecycle_fields(status, message);
    fields["model"] = json!(agent.run.model);
    fields["tool_use_id"] = json!(agent.run.tool_use_id);
    event("subagent_lifecycle", fields)
}

/// What a Task call's result (`tool_use_result` live, `toolUseResult` saved) says of its run.
fn apply_task_result(agent: &mut Agent, is_error: bool, output: &str, result: &Value) {
    if let Some(id) = str_of(result, "agentId") {
        agent.run.id = id;
        agent.id_known = true;
    }
    if let Some(model) = str_of(result, "resolvedModel") {
        agent.run.model = Some(model);
    }
    if let Some(n) = result.get("totalTokens").and_then(Value::as_u64) {
        agent.run.tokens = n;
    }
    if let Some(n) = result.get("totalToolUseCount").and_then(Value::as_u64) {
        agent.run.tool_calls = n;
    }
    if let Some(n) = result.get("totalDurationMs").and_then(Value::as_u64) {
        agent.run.duration_ms = Some(n);
    }
    let launched = str_of(result, "status").as_deref() == Some("async_launched");
    if is_error {
        agent.run.status = "failed".into();
        agent.error = Some(truncate(output, 2000));
    } else if !launched {
        agent.run.status = "completed".into();
        if !output.is_empty() {
            agent.result = Some(truncate(output, 2000));
        }
    }
    if agent.run.duration_ms.is_none() && !launched {
        agent.run.duration_ms = agent.run.elapsed();
    }
}

/// Task calls in the main transcript by the agent id their result names:
/// (tool_use_id, the call's input, the result).
fn saved_tasks(path: &Path) -> HashMap<String, (String, Value, Value)> {
    let mut inputs: HashMap<String, Value> = HashMap::new();
    let mut out = HashMap::new();
    for line in jsonl(path) {
        let blocks = line
            .pointer("/message/content")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for block in blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use")
                    if block
                        .get("name")
                        .and_then(Value::as_str)
                        .is_some_and(|n| AGENT_TOOLS.contains(&n)) =>
                {
                    if let Some(id) = str_of(&block, "id") {
                        inputs.insert(id, block.get("input").cloned().unwrap_or(Value::Null));
                    }
                }
                Some("tool_result") => {
                    let result = line.get("toolUseResult").cloned().unwrap_or(Value::Null);
                    if let (Some(call), Some(agent)) =
                        (str_of(&block, "tool_use_id"), str_of(&result, "agentId"))
                        && let Some(input) = inputs.get(&call)
                    {
                        out.insert(agent, (call, input.clone(), result));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// A saved subagent as its own file tells it.
fn saved_agent(id: &str, path: &Path) -> Agent {
    let mut agent = Agent {
        run: AgentRun {
            id: id.to_string(),
            status: "completed".into(),
            ..AgentRun::default()
        },
        ..Agent::default()
    };
    let mut first: Option<u64> = None;
    let mut last: Option<u64> = None;
    for line in jsonl(path) {
        if let Some(at) = line
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_timestamp)
        {
            first = first.or(Some(at));
            last = Some(at);
        }
        let message = &line["message"];
        match line.get("type").and_then(Value::as_str) {
            Some("user") if agent.prompt.is_none() => {
                let text = match message.get("content") {
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(Value::Array(blocks)) => blocks
                        .iter()
                        .find(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                        .and_then(|b| str_of(b, "text")),
                    _ => None,
                };
                agent.prompt = text;
            }
            Some("assistant") => {
                if let Some(model) = str_of(message, "model") {
                    agent.run.model = Some(model);
                }
                let usage = &message["usage"];
                let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
                let total = n("input_tokens")
                    + n("cache_creation_input_tokens")
                    + n("cache_read_input_tokens")
                    + n("output_tokens");
                if total > 0 {
                    agent.run.tokens = total;
                }
                agent.run.tool_calls += message
                    .get("content")
                    .and_then(Value::as_array)
                    .map(|b| {
                        b.iter()
                            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                            .count() as u64
                    })
                    .unwrap_or(0);
            }
            _ => {}
        }
    }
    // Claude Code keeps the agent's type and description beside its transcript.
    let meta = path.with_file_name(format!("agent-{id}.meta.json"));
    let meta: Value = std::fs::read_to_string(meta)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    agent.run.kind = str_of(&meta, "agentType");
    agent.run.label = str_of(&meta, "description")
        .or_else(|| {
            agent
                .prompt
                .as_deref()
                .map(|p| truncate(p.lines().next().unwrap_or(""), 80))
        })
        .unwrap_or_else(|| id.to_string());
    agent.run.started_at = first;
    agent.run.duration_ms = match (first, last) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    agent
}

/// Milliseconds since the epoch of an RFC 3339 UTC timestamp (`2026-11-29T10:00:00.123Z`).
fn parse_timestamp(s: &str) -> Option<u64> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.split(':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    let ms: i64 = format!("{:0<3}", &frac[..frac.len().min(3)]).parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let total = ((days * 24 + hh) * 60 + mm) * 60 + ss;
    u64::try_from(total * 1000 + ms).ok()
}

fn jsonl(path: &Path) -> impl Iterator<Item = Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect::<Vec<_>>()
        .into_iter()
}

/// The files Claude Code keeps for the subagents of `session`, by agent id: only these ids
/// can be read, so an id from a client never becomes a path of its own.
pub(crate) fn subagent_files(config_dir: &Path, session: &str) -> HashMap<String, PathBuf> {
    let mut out = HashMap::new();
    if session.is_empty() || session.contains(['/', '\\']) || session.starts_with('.') {
        return out;
    }
    let Ok(projects) = std::fs::read_dir(config_dir.join("projects")) else {
        return out;
    };
    for project in projects.flatten() {
        let dir = project.path().join(session).join("subagents");
        if !dir.is_dir() {
            continue;
        }
        for entry in walkdir::WalkDir::new(&dir)
            .follow_links(false)
            .max_depth(8)
            .into_iter()
            .flatten()
        {
            if !entry.file_type().is_file() {
                continue;
            }
            let name = entry.file_name().to_string_lossy();
            if let Some(id) = name
                .strip_prefix("agent-")
                .and_then(|n| n.strip_suffix(".jsonl"))
                .filter(|id| valid_id(id))
            {
                out.insert(id.to_string(), entry.path().to_path_buf());
            }
        }
    }
    out
}

/// Agent ids are plain tokens (Claude Code's are hex); anything else is refused outright.
pub(crate) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A subagent's own conversation from its file: user, assistant and reasoning items with
/// content, tool items with call_id, name, output, is_error and running; the newest 600.
pub(crate) fn subagent_items(path: &Path) -> Vec<Value> {
    let mut items: Vec<Value> = Vec::new();
    let mut tools: HashMap<String, usize> = HashMap::new();
    for line in jsonl(path) {
        let kind = line.get("type").and_then(Value::as_str).unwrap_or("");
        let content = line
            .pointer("/message/content")
            .cloned()
            .unwrap_or(Value::Null);
        match (kind, &content) {
            ("user", Value::String(text)) => {
                items.push(json!({"role": "user", "content": text}));
            }
            ("user", Value::Array(blocks)) => {
                for block in blocks {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => items.push(json!({
                            "role": "user",
                            "content": block.get("text").and_then(Value::as_str).unwrap_or(""),
                        })),
                        Some("tool_result") => {
                            let id = str_of(block, "tool_use_id").unwrap_or_default();
                            let output = text_of(block.get("content").unwrap_or(&Value::Null));
                            let is_error = block
                                .get("is_error")
                                .and_then(Value::as_bool)
                                .unwrap_or(false);
                            match tools.get(&id) {
                                Some(&i) => {
                                    items[i]["output"] = json!(output);
                                    items[i]["is_error"] = json!(is_error);
                                    items[i]["running"] = json!(false);
                                }
                                None => items.push(json!({
                                    "role": "tool", "call_id": id, "name": "tool",
                                    "output": output, "is_error": is_error, "running": false,
                                })),
                            }
                        }
                        _ => {}
                    }
                }
            }
            ("assistant", Value::Array(blocks)) => {
                for block in blocks {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => items.push(json!({
                            "role": "assistant",
                            "content": block.get("text").and_then(Value::as_str).unwrap_or(""),
                        })),
                        Some("thinking") => items.push(json!({
                            "role": "reasoning",
                            "content": block.get("thinking").and_then(Value::as_str).unwrap_or(""),
                        })),
                        Some("tool_use") => {
                            let id = str_of(block, "id").unwrap_or_default();
                            let name = block.get("name").and_then(Value::as_str).unwrap_or("");
                            tools.insert(id.clone(), items.len());
                            items.push(json!({
                                "role": "tool", "call_id": id, "name": claude_tool_name(name),
                                "output": "", "is_error": false, "running": true,
                            }));
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    newest(items)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn statuses(events: &[Event]) -> Vec<(String, String)> {
        events
            .iter()
            .map(|e| {
                let field = |k: &str| e.0.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                (field("path"), field("status"))
            })
            .collect()
    }

    #[test]
    fn lifecycles_follow_the_agent_id_and_end_once() {
        let mut runs = Runs::default();
        runs.tool_use(
            "toolu_1",
            "Agent",
            &json!({"description": "Look", "prompt": "look"}),
        );
        // Not named yet: nothing to announce.
        assert!(runs.lifecycle().is_empty());
        runs.task_started(&json!({"task_id": "ag1", "tool_use_id": "toolu_1",
                                  "task_type": "local_agent"}));
        assert_eq!(runs.agent_of_call("toolu_1"), Some("ag1"));
        assert_eq!(
            statuses(&runs.lifecycle()),
            [("ag1".into(), "started".into())]
        );
        assert!(runs.lifecycle().is_empty());
        runs.task_updated(&json!({"task_id": "ag1", "patch": {"status": "killed"}}));
        assert_eq!(
            statuses(&runs.lifecycle()),
            [("ag1".into(), "stopped".into())]
        );

        // A run that fails before it was named is started and failed at once.
        runs.tool_use("toolu_2", "Task", &json!({"description": "Fail"}));
        runs.tool_result("toolu_2", true, "boom", &Value::Null);
        let events = runs.lifecycle();
        assert_eq!(
            statuses(&events),
            [
                ("toolu_2".into(), "started".into()),
                ("toolu_2".into(), "failed".into())
            ]
        );
        assert_eq!(events[1].0["message"], "boom");
        assert_eq!(runs.agent_of_call("toolu_2"), None);
    }

    #[test]
    fn timestamps_parse_to_epoch_milliseconds() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:01.5Z"), Some(1500));
        assert_eq!(
            parse_timestamp("2026-11-29T10:00:00.123Z"),
            Some(1_795_946_400_123)
        );
        assert_eq!(parse_timestamp("yesterday"), None);
    }

    #[test]
    fn agent_ids_are_plain_tokens() {
        assert!(valid_id("a1b2c3d4"));
        assert!(!valid_id("../x"));
        assert!(!valid_id(""));
        assert!(!valid_id("a/b"));
    }

    #[test]
    fn a_task_call_becomes_a_run_that_its_frames_update() {
        let mut runs = Runs::default();
        assert!(runs.tool_use(
            "toolu_1",
            "Task",
            &json!({"description":"Count files","subagent_type":"Explore","prompt":"count"})
        ));
        assert!(!runs.tool_use("toolu_2", "Bash", &json!({})));
        assert!(runs.task_started(&json!({"task_id":"a77","tool_use_id":"toolu_1","task_type":"local_agent","description":"Count files"})));
        assert!(runs.subagent_tool_call("toolu_1"));
        assert!(runs.task_progress(
            &json!({"task_id":"a77","usage":{"total_tokens":900,"tool_uses":3,"duration_ms":1200}})
        ));
        assert!(runs.tool_result("toolu_1", false, "42 files", &json!({"agentId":"a77","totalTokens":1000,"totalToolUseCount":4,"totalDurationMs":1500})));
        let e = runs.event();
        let a = &e.0["agents"][0];
        assert_eq!(a["id"], "a77");
        assert_eq!(a["label"], "Count files");
        assert_eq!(a["type"], "Explore");
        assert_eq!(a["status"], "completed");
        assert_eq!(a["tokens"], 1000);
        assert_eq!(a["tool_calls"], 4);
        assert_eq!(a["duration_ms"], 1500);
    }

    #[test]
    fn a_background_agent_runs_until_its_task_ends() {
        let mut runs = Runs::default();
        runs.tool_use("toolu_1", "Agent", &json!({"description":"Look"}));
        runs.tool_result(
            "toolu_1",
            false,
            "Async agent launched",
            &json!({"status":"async_launched","agentId":"ab1","resolvedModel":"m1"}),
        );
        let a = runs.event().0["agents"][0].clone();
        assert_eq!(
            (a["id"].as_str(), a["status"].as_str(), a["model"].as_str()),
            (Some("ab1"), Some("running"), Some("m1"))
        );
        runs.task_notification(&json!({"task_id":"ab1","status":"failed","summary":"boom","usage":{"total_tokens":5,"tool_uses":0,"duration_ms":9}}));
        let a = runs.event().0["agents"][0].clone();
        assert_eq!(a["status"], "failed");
        assert_eq!(a["duration_ms"], 9);
    }
}
