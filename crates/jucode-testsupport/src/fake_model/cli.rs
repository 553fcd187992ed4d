//! The fake model's script for the real engine CLIs: the Anthropic Messages API as Claude Code
//! and claude-agent-acp call it (SSE or plain JSON), the OpenAI Responses API as Codex does
//! (SSE), and the side endpoints the CLIs call at start (`count_tokens`, `models`).
//!
//! The script, the same for both APIs (it looks at the last user or tool-result input):
//! - a tool result with output X → the text `tool said: X`;
//! - `RUN: <cmd>` → one shell tool call running `<cmd>` (for Codex it asks for escalation, so
//!   Codex asks for approval under `on-request`); `SANDBOXED: <cmd>` → the same without
//!   escalation;
//! - `PATCH: <patch>` (its lines joined by a literal `\n`) → a shell call of
//!   `apply_patch <<'EOF' … EOF`, which Codex turns into a file change;
//! - `AGENT: <prompt>` (Anthropic, when an Agent or Task tool is offered) → one subagent call
//!   with that prompt;
//! - `SPAWN: <prompt>` (Responses, when Codex offers `spawn_agent`, alone or in a tool
//!   namespace) → one `spawn_agent` call whose message is the prompt; the subagent's own
//!   request then sees the prompt as its user text;
//! - `CALL: <tool> <json input>` (when a tool of that name is offered, e.g. an MCP server's
//!   `mcp__<server>__<tool>`; for Responses a function tool, top level or in a namespace) →
//!   one call of it with that input (`{}` when none);
//! - `HANG: …` → the start of a text answer (`working on it`), then the stream stays open until
//!   the client goes away or the server stops, so a test can interrupt a streaming turn;
//! - Claude Code's `[SUGGESTION MODE: …]` request for the likely next prompt → [`SUGGESTION`];
//! - anything else → the text `user said: <text>`.
//!
//! Requests without a shell tool (titles, topic checks, command-prefix checks) get a short
//! harmless text and never a tool call or a hang.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame};
use hyper::{Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

/// The longest a `HANG:` stream is held open: a deadlock guard, far longer than any test waits.
const HANG_LIMIT: Duration = Duration::from_secs(300);

/// The text a `HANG:` answer starts with before it stalls.
pub const HANG_TEXT: &str = "working on it";

/// The next prompt the fake predicts when Claude Code asks for a prompt suggestion.
pub const SUGGESTION: &str = "run the tests";

/// Ids the CLIs see for messages, tool uses and responses: unique per server.
#[derive(Default)]
pub(super) struct Shared {
    ids: AtomicU64,
}

impl Shared {
    fn id(&self, prefix: &str) -> String {
        let n = self.ids.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{prefix}_{n:04}fake{:08x}", std::process::id())
    }
}

pub(super) type Body = BoxBody<Bytes, Infallible>;

pub(super) fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// An SSE response: `events` are written at once; with `hang` the stream then stays open.
fn sse_response(
    events: Vec<(String, Value)>,
    named: bool,
    hang: bool,
    mut stopped: watch::Receiver<bool>,
) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        for (name, data) in events {
            let text = if named {
                format!("event: {name}\ndata: {data}\n\n")
            } else {
                format!("data: {data}\n\n")
            };
            if tx.send(Bytes::from(text)).await.is_err() {
                return;
            }
        }
        if hang {
            // Held until the client hangs up (tx.closed), the server stops, or the guard.
            tokio::select! {
                _ = tx.closed() => {}
                _ = stopped.changed() => {}
                _ = tokio::time::sleep(HANG_LIMIT) => {}
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|bytes| (Ok::<_, Infallible>(Frame::data(bytes)), rx))
    });
    let mut response = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-cache"),
    );
    response
}

/// `POST …/messages` from a CLI: what the script answered (`tool`, `text`, `hang`) and the
/// response.
pub(super) fn messages(
    shared: &Shared,
    body: &Value,
    stopped: watch::Receiver<bool>,
) -> (&'static str, Response<Body>) {
    let plan = anthropic_plan(body);
    let message = anthropic_message(shared, body, &plan);
    let response = if body.get("stream").and_then(Value::as_bool) == Some(true) {
        sse_response(
            anthropic_events(&message, &plan),
            true,
            matches!(plan, Plan::Hang),
            stopped,
        )
    } else {
        json_response(StatusCode::OK, &message)
    };
    (plan.kind(), response)
}

/// `POST …/responses` from Codex.
pub(super) fn responses(
    shared: &Shared,
    body: &Value,
    stopped: watch::Receiver<bool>,
) -> (&'static str, Response<Body>) {
    let (plan, tool) = responses_plan(body);
    let response = sse_response(
        responses_events(shared, body, &plan, tool.as_deref()),
        true,
        matches!(plan, Plan::Hang),
        stopped,
    );
    (plan.kind(), response)
}

/// `POST …/messages/count_tokens`.
pub(super) fn count_tokens() -> Response<Body> {
    json_response(StatusCode::OK, &json!({"input_tokens": 42}))
}

/// `GET …/models`, in the shape both CLIs parse.
pub(super) fn models() -> Response<Body> {
    json_response(
        StatusCode::OK,
        &json!({"data": [{"id": "fake-model", "type": "model", "display_name": "Fake",
                          "created_at": "2025-01-01T00:00:00Z"}],
                "models": [], "has_more": false, "object": "list"}),
    )
}

/// What the fake model answers.
#[derive(Debug, Clone, PartialEq)]
enum Plan {
    Tool {
        command: String,
        escalate: bool,
    },
    /// Any other tool call (Anthropic only): `AGENT: <prompt>` starts a subagent.
    Call {
        name: String,
        input: Value,
    },
    /// `CALL:` of an offered function tool (Responses only), in its namespace if any.
    Function {
        name: String,
        namespace: Option<String>,
        arguments: Value,
    },
    /// Codex's `spawn_agent` (Responses only), in the namespace Codex offered it under.
    Spawn {
        prompt: String,
        namespace: Option<String>,
    },
    Text(String),
    Hang,
}

impl Plan {
    fn kind(&self) -> &'static str {
        match self {
            Plan::Tool { .. } | Plan::Call { .. } | Plan::Function { .. } | Plan::Spawn { .. } => {
                "tool"
            }
            Plan::Text(_) => "text",
            Plan::Hang => "hang",
        }
    }
}

/// Claude Code puts `<system-reminder>` blocks into user text; they are not the user's words.
fn strip_reminders(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("<system-reminder>") {
        out.push_str(&rest[..start]);
        match rest[start..].find("</system-reminder>") {
            Some(end) => rest = &rest[start + end + "</system-reminder>".len()..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out.trim().to_string()
}

/// The command after `marker` (up to the end of its line), if the marker is there.
fn command_after(text: &str, marker: &str) -> Option<String> {
    let at = text.find(marker)?;
    let command = text[at + marker.len()..].trim_start();
    let line = command.lines().next().unwrap_or("").trim();
    (!line.is_empty()).then(|| line.to_string())
}

/// The script: see the module doc.
fn decide(user_text: &str, tool_output: Option<&str>, has_shell: bool) -> Plan {
    if let Some(output) = tool_output {
        return Plan::Text(format!("tool said: {}", output.trim()));
    }
    let text = strip_reminders(user_text);
    if has_shell {
        if let Some(command) = command_after(&text, "SANDBOXED:") {
            return Plan::Tool {
                command,
                escalate: false,
            };
        }
        // `PATCH: <patch>` (lines joined by the two characters `\n`) → Codex's apply_patch
        // through the shell, which Codex turns into a file change of its own.
        if let Some(patch) = command_after(&text, "PATCH:") {
            return Plan::Tool {
                command: format!("apply_patch <<'EOF'\n{}\nEOF", patch.replace("\\n", "\n")),
                escalate: false,
            };
        }
        if let Some(command) = command_after(&text, "RUN:") {
            return Plan::Tool {
                command,
                escalate: true,
            };
        }
        if text.contains("HANG:") {
            return Plan::Hang;
        }
    }
    Plan::Text(format!("user said: {text}"))
}

// ---- Anthropic Messages API

fn blocks(content: &Value) -> &[Value] {
    content.as_array().map(Vec::as_slice).unwrap_or(&[])
}

fn anthropic_text(content: &Value) -> String {
    if let Some(text) = content.as_str() {
        return text.to_string();
    }
    blocks(content)
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .map(strip_reminders)
        // Claude Code marks an interrupted turn with its own text block in the next message.
        .filter(|t| !t.is_empty() && !t.starts_with("[Request interrupted"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn tool_result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn anthropic_plan(body: &Value) -> Plan {
    let tools: Vec<&str> = blocks(&body["tools"])
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    // Claude Code 2.1.3xx appends role "system" messages after the user turn: skip them.
    let last = blocks(&body["messages"])
        .iter()
        .rev()
        .find(|m| m["role"] == "user" || m["role"] == "assistant")
        .cloned()
        .unwrap_or(Value::Null);
    let tool_output = blocks(&last["content"])
        .iter()
        .rev()
        .find(|b| b["type"] == "tool_result")
        .map(|b| tool_result_text(&b["content"]));
    let user_text = anthropic_text(&last["content"]);
    if user_text.trim_start().starts_with("[SUGGESTION MODE") {
        return Plan::Text(SUGGESTION.to_string());
    }
    // `CALL: <tool> <json>` → one call of an offered tool.
    if tool_output.is_none()
        && let Some(call) = command_after(&strip_reminders(&user_text), "CALL:")
    {
        let (name, input) = call.split_once(' ').unwrap_or((call.as_str(), "{}"));
        if tools.contains(&name)
            && let Ok(input) = serde_json::from_str::<Value>(input.trim())
        {
            return Plan::Call {
                name: name.to_string(),
                input,
            };
        }
    }
    // `AGENT: <prompt>` → one subagent call (Claude Code's tool is Agent, or Task before).
    if tool_output.is_none()
        && let Some(name) = tools.iter().find(|t| **t == "Agent" || **t == "Task")
        && let Some(prompt) = command_after(&strip_reminders(&user_text), "AGENT:")
    {
        return Plan::Call {
            name: name.to_string(),
            input: json!({"description": "Fake subagent", "prompt": prompt,
                          "subagent_type": "general-purpose"}),
        };
    }
    let has_bash = tools.contains(&"Bash");
    let plan = decide(&user_text, tool_output.as_deref(), has_bash);
    if has_bash {
        return plan;
    }
    // A side request: answer in the shape the CLI parses, never with a tool or a hang.
    let system = match &body["system"] {
        Value::String(s) => s.clone(),
        other => blocks(other)
            .iter()
            .filter_map(|s| s["text"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
    };
    if system.contains("policy_spec") || system.to_lowercase().contains("command prefix") {
        let first = user_text
            .find("Command:")
            .and_then(|at| user_text[at + "Command:".len()..].split_whitespace().next())
            .unwrap_or("none");
        return Plan::Text(first.to_string());
    }
    if system.contains("new conversation topic") || system.contains("isNewTopic") {
        return Plan::Text(json!({"isNewTopic": false, "title": null}).to_string());
    }
    match plan {
        Plan::Text(text) => Plan::Text(text),
        _ => Plan::Text(format!("user said: {}", strip_reminders(&user_text))),
    }
}

fn anthropic_message(shared: &Shared, body: &Value, plan: &Plan) -> Value {
    let (block, stop) = match plan {
        Plan::Tool { command, .. } => (
            json!({"type": "tool_use", "id": shared.id("toolu"), "name": "Bash",
                   "input": {"command": command, "description": format!("Run {command}")}}),
            "tool_use",
        ),
        Plan::Call { name, input }
        | Plan::Function {
            name,
            arguments: input,
            ..
        } => (
            json!({"type": "tool_use", "id": shared.id("toolu"), "name": name, "input": input}),
            "tool_use",
        ),
        Plan::Text(text) => (json!({"type": "text", "text": text}), "end_turn"),
        // Only the Responses script spawns Codex subagents.
        Plan::Spawn { prompt, .. } => (
            json!({"type": "text", "text": format!("user said: SPAWN: {prompt}")}),
            "end_turn",
        ),
        Plan::Hang => (json!({"type": "text", "text": HANG_TEXT}), "end_turn"),
    };
    json!({"id": shared.id("msg"), "type": "message", "role": "assistant",
           "model": body["model"].as_str().unwrap_or("fake-model"),
           "content": [block], "stop_reason": stop, "stop_sequence": null,
           "usage": {"input_tokens": 10, "output_tokens": 5,
                     "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
}

/// Splits `s` in two at a character boundary near the middle (two deltas, as models stream).
fn halves(s: &str) -> Vec<String> {
    let mid = s
        .char_indices()
        .map(|(i, _)| i)
        .find(|&i| i >= s.len() / 2)
        .unwrap_or(s.len());
    [&s[..mid], &s[mid..]]
        .into_iter()
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

fn anthropic_events(message: &Value, plan: &Plan) -> Vec<(String, Value)> {
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    let mut events = vec![(
        "message_start".to_string(),
        json!({"type": "message_start", "message": start}),
    )];
    let mut push = |name: &str, data: Value| events.push((name.to_string(), data));
    let block = &message["content"][0];
    if block["type"] == "text" {
        push(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
        );
        push("ping", json!({"type": "ping"}));
        for part in halves(block["text"].as_str().unwrap_or("")) {
            push(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": part}}),
            );
        }
        if *plan == Plan::Hang {
            return events;
        }
    } else {
        push(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "tool_use", "id": block["id"],
                                     "name": block["name"], "input": {}}}),
        );
        for part in halves(&block["input"].to_string()) {
            push(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "input_json_delta", "partial_json": part}}),
            );
        }
    }
    push(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    push(
        "message_delta",
        json!({"type": "message_delta",
               "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
               "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
    );
    push("message_stop", json!({"type": "message_stop"}));
    events
}

// ---- OpenAI Responses API

/// Shell tools in the order a Codex build offers them; 0.171.0 offers `exec_command`.
const SHELL_TOOLS: &[&str] = &["shell_command", "exec_command", "shell", "local_shell"];

/// Codex injects its own user messages (environment, AGENTS.md): not what the user typed.
fn injected(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("<environment_context>")
        || t.starts_with("# AGENTS.md")
        || t.starts_with("<user_instructions>")
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        other => blocks(other)
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

fn responses_plan(body: &Value) -> (Plan, Option<String>) {
    let items: Vec<Value> = match &body["input"] {
        Value::String(s) => vec![json!({"type": "message", "role": "user", "content": s})],
        other => blocks(other).to_vec(),
    };
    let tool_output = items.last().and_then(|last| {
        let kind = last["type"].as_str().unwrap_or("");
        if !kind.ends_with("call_output") {
            return None;
        }
        let output = match &last["output"] {
            Value::String(s) => s.clone(),
            Value::Object(o) => o
                .get("content")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| Value::Object(o.clone()).to_string()),
            other => content_text(other),
        };
        // Codex wraps command output: "Chunk ID: …\n…\nOutput:\nhi\n".
        Some(match output.find("Output:\n") {
            Some(at) => output[at + "Output:\n".len()..].to_string(),
            None => output,
        })
    });
    let user_text = items
        .iter()
        .rev()
        .filter(|i| i["type"].as_str().unwrap_or("message") == "message" && i["role"] == "user")
        .map(|i| content_text(&i["content"]))
        .find(|t| !injected(t))
        .unwrap_or_default();
    let names: Vec<String> = blocks(&body["tools"])
        .iter()
        .filter_map(|t| {
            if t["type"] == "function" {
                t["name"]
                    .as_str()
                    .or_else(|| t["function"]["name"].as_str())
                    .map(str::to_string)
            } else {
                t["type"].as_str().map(str::to_string)
            }
        })
        .collect();
    let tool = SHELL_TOOLS
        .iter()
        .find(|t| names.iter().any(|n| n == *t))
        .map(|t| t.to_string());
    if tool_output.is_none()
        && let Some(prompt) = command_after(&user_text, "SPAWN:")
        && let Some(namespace) = spawn_tool(&body["tools"])
    {
        return (Plan::Spawn { prompt, namespace }, tool);
    }
    if tool_output.is_none()
        && let Some(call) = command_after(&user_text, "CALL:")
    {
        let (name, input) = call.split_once(' ').unwrap_or((call.as_str(), "{}"));
        if let Some((name, namespace)) = function_tool(&body["tools"], name)
            && let Ok(arguments) = serde_json::from_str::<Value>(input.trim())
        {
            let plan = Plan::Function {
                name,
                namespace,
                arguments,
            };
            return (plan, tool);
        }
    }
    (
        decide(&user_text, tool_output.as_deref(), tool.is_some()),
        tool,
    )
}

/// The function tool `wanted` as offered: its own name and namespace. A namespaced tool is
/// also found by its namespace and name joined (`mcp__jucode__` + `report`).
fn function_tool(tools: &Value, wanted: &str) -> Option<(String, Option<String>)> {
    let name_of = |t: &Value| {
        t["name"]
            .as_str()
            .or_else(|| t["function"]["name"].as_str())
            .map(str::to_string)
    };
    blocks(tools).iter().find_map(|t| {
        if t["type"] == "function" {
            return name_of(t).filter(|n| n == wanted).map(|n| (n, None));
        }
        let ns = t["name"].as_str().filter(|_| t["type"] == "namespace")?;
        blocks(&t["tools"]).iter().find_map(|inner| {
            let n = name_of(inner)?;
            (n == wanted || format!("{ns}{n}") == wanted || format!("{ns}__{n}") == wanted)
                .then(|| (n, Some(ns.to_string())))
        })
    })
}

/// Where Codex offers `spawn_agent`: `Some(None)` at the top level, `Some(Some(ns))` inside
/// the tool namespace `ns` (0.171.0 offers it in `multi_agent_v1`), `None` when it does not.
fn spawn_tool(tools: &Value) -> Option<Option<String>> {
    let is_spawn = |t: &Value| t["type"] == "function" && t["name"] == "spawn_agent";
    blocks(tools).iter().find_map(|t| {
        if is_spawn(t) {
            Some(None)
        } else if t["type"] == "namespace" && blocks(&t["tools"]).iter().any(is_spawn) {
            t["name"].as_str().map(|n| Some(n.to_string()))
        } else {
            None
        }
    })
}

fn responses_tool_call(shared: &Shared, tool: &str, command: &str, escalate: bool) -> Value {
    let call_id = shared.id("call");
    if tool == "local_shell" {
        return json!({"type": "local_shell_call", "call_id": call_id, "status": "completed",
                      "action": {"type": "exec", "command": ["bash", "-lc", command]}});
    }
    let mut args = match tool {
        "shell_command" => json!({"command": command}),
        "exec_command" => json!({"cmd": command}),
        _ => json!({"command": ["bash", "-lc", command]}),
    };
    if escalate {
        // What a real model sends to run outside the sandbox; under `on-request` Codex then
        // asks the client for approval.
        args["sandbox_permissions"] = json!("require_escalated");
        args["justification"] = json!("fake model asks for approval");
    }
    json!({"type": "function_call", "id": shared.id("fc"), "call_id": call_id, "name": tool,
           "arguments": args.to_string(), "status": "completed"})
}

fn responses_events(
    shared: &Shared,
    body: &Value,
    plan: &Plan,
    tool: Option<&str>,
) -> Vec<(String, Value)> {
    let base = json!({"id": shared.id("resp"), "object": "response", "created_at": 0,
                      "model": body["model"].as_str().unwrap_or("fake-model"),
                      "status": "in_progress", "output": []});
    let mut events = Vec::new();
    let mut push = |mut data: Value| {
        data["sequence_number"] = json!(events.len());
        let name = data["type"].as_str().unwrap_or("").to_string();
        events.push((name, data));
    };
    push(json!({"type": "response.created", "response": base}));
    push(json!({"type": "response.in_progress", "response": base}));
    let item = match (plan, tool) {
        (Plan::Tool { .. }, Some(_)) | (Plan::Spawn { .. } | Plan::Function { .. }, _) => {
            let item = match (plan, tool) {
                (
                    Plan::Function {
                        name,
                        namespace,
                        arguments,
                    },
                    _,
                ) => {
                    let mut item = json!({"type": "function_call", "id": shared.id("fc"),
                        "call_id": shared.id("call"), "name": name,
                        "arguments": arguments.to_string(), "status": "completed"});
                    if let Some(namespace) = namespace {
                        item["namespace"] = json!(namespace);
                    }
                    item
                }
                (Plan::Spawn { prompt, namespace }, _) => {
                    let mut item = json!({"type": "function_call", "id": shared.id("fc"),
                        "call_id": shared.id("call"), "name": "spawn_agent",
                        "arguments": json!({"message": prompt}).to_string(),
                        "status": "completed"});
                    if let Some(namespace) = namespace {
                        item["namespace"] = json!(namespace);
                    }
                    item
                }
                (Plan::Tool { command, escalate }, Some(tool)) => {
                    responses_tool_call(shared, tool, command, *escalate)
                }
                _ => Value::Null,
            };
            if item["type"] == "function_call" {
                let mut added = item.clone();
                added["arguments"] = json!("");
                added["status"] = json!("in_progress");
                push(
                    json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
                );
                push(
                    json!({"type": "response.function_call_arguments.delta", "output_index": 0,
                            "item_id": item["id"], "delta": item["arguments"]}),
                );
                push(
                    json!({"type": "response.function_call_arguments.done", "output_index": 0,
                            "item_id": item["id"], "arguments": item["arguments"]}),
                );
            } else {
                push(
                    json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
                );
            }
            item
        }
        _ => {
            let text = match plan {
                Plan::Text(text) => text.clone(),
                _ => HANG_TEXT.to_string(),
            };
            let id = shared.id("msg");
            push(
                json!({"type": "response.output_item.added", "output_index": 0,
                        "item": {"type": "message", "id": id, "role": "assistant",
                                 "status": "in_progress", "content": []}}),
            );
            push(
                json!({"type": "response.content_part.added", "output_index": 0, "item_id": id,
                        "content_index": 0,
                        "part": {"type": "output_text", "text": "", "annotations": []}}),
            );
            for part in halves(&text) {
                push(
                    json!({"type": "response.output_text.delta", "output_index": 0,
                            "item_id": id, "content_index": 0, "delta": part}),
                );
            }
            if *plan == Plan::Hang {
                return events;
            }
            push(
                json!({"type": "response.output_text.done", "output_index": 0, "item_id": id,
                        "content_index": 0, "text": text}),
            );
            let part = json!({"type": "output_text", "text": text, "annotations": []});
            push(
                json!({"type": "response.content_part.done", "output_index": 0, "item_id": id,
                        "content_index": 0, "part": part}),
            );
            json!({"type": "message", "id": id, "role": "assistant", "status": "completed",
                   "content": [part]})
        }
    };
    push(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    let mut done = base.clone();
    done["status"] = json!("completed");
    done["output"] = json!([item]);
    done["usage"] = json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                           "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                           "total_tokens": 15});
    push(json!({"type": "response.completed", "response": done}));
    events
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_script_picks_tool_text_or_hang() {
        assert_eq!(
            decide("RUN: echo hi\nmore", None, true),
            Plan::Tool {
                command: "echo hi".into(),
                escalate: true
            }
        );
        assert_eq!(
            decide("SANDBOXED: ls", None, true),
            Plan::Tool {
                command: "ls".into(),
                escalate: false
            }
        );
        assert_eq!(decide("HANG: x", None, true), Plan::Hang);
        assert_eq!(
            decide("RUN: echo hi", None, false),
            Plan::Text("user said: RUN: echo hi".into())
        );
        assert_eq!(
            decide("x", Some(" hi\n"), true),
            Plan::Text("tool said: hi".into())
        );
        assert_eq!(
            decide("<system-reminder>r</system-reminder>hello", None, true),
            Plan::Text("user said: hello".into())
        );
    }

    #[test]
    fn anthropic_calls_an_offered_tool_and_predicts_a_prompt() {
        let call = |text: &str| {
            anthropic_plan(
                &json!({"tools": [{"name": "Bash"}, {"name": "mcp__echo__ask"}],
                                   "messages": [{"role": "user", "content": text}]}),
            )
        };
        assert_eq!(
            call(r#"CALL: mcp__echo__ask {"question": "why?"}"#),
            Plan::Call {
                name: "mcp__echo__ask".into(),
                input: json!({"question": "why?"})
            }
        );
        // A tool that is not offered, or bad input, is never called.
        assert!(matches!(call("CALL: mcp__echo__nope {}"), Plan::Text(_)));
        assert!(matches!(call("CALL: mcp__echo__ask {"), Plan::Text(_)));
        assert_eq!(
            call("[SUGGESTION MODE: Suggest what the user might type]"),
            Plan::Text(SUGGESTION.into())
        );
    }

    #[test]
    fn anthropic_looks_past_system_messages_at_the_last_turn() {
        let body = json!({"tools": [{"name": "Bash"}], "messages": [
            {"role": "user", "content": [{"type": "text", "text": "RUN: touch a"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": [{"type": "text", "text": "done"}]}]},
            {"role": "system", "content": "environment"}]});
        assert_eq!(anthropic_plan(&body), Plan::Text("tool said: done".into()));
        let side = json!({"messages": [{"role": "user", "content": "HANG: x"}]});
        assert_eq!(
            anthropic_plan(&side),
            Plan::Text("user said: HANG: x".into())
        );
    }

    #[test]
    fn responses_reads_codex_output_and_skips_injected_messages() {
        let body = json!({"tools": [{"type": "function", "name": "exec_command"}], "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "RUN: echo hi"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>x"}]}]});
        let (plan, tool) = responses_plan(&body);
        assert_eq!(tool.as_deref(), Some("exec_command"));
        assert_eq!(
            plan,
            Plan::Tool {
                command: "echo hi".into(),
                escalate: true
            }
        );
        let body = json!({"tools": [{"type": "function", "name": "exec_command"}], "input": [
            {"type": "function_call_output", "call_id": "c",
             "output": "Chunk ID: 1\nProcess exited with code 0\nOutput:\nhi\n"}]});
        assert_eq!(responses_plan(&body).0, Plan::Text("tool said: hi".into()));
    }

    #[test]
    fn responses_spawn_a_codex_subagent_only_when_offered() {
        let tools = json!([{"type": "function", "name": "exec_command"},
            {"type": "namespace", "name": "multi_agent_v1",
             "tools": [{"type": "function", "name": "spawn_agent"}]}]);
        let body = json!({"tools": tools, "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "SPAWN: count files"}]}]});
        let (plan, tool) = responses_plan(&body);
        assert_eq!(
            plan,
            Plan::Spawn {
                prompt: "count files".into(),
                namespace: Some("multi_agent_v1".into())
            }
        );
        let shared = Shared::default();
        let events = responses_events(&shared, &body, &plan, tool.as_deref());
        let call = &events.last().unwrap().1["response"]["output"][0];
        assert_eq!(
            (&call["name"], &call["namespace"]),
            (&json!("spawn_agent"), &json!("multi_agent_v1"))
        );
        let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"message": "count files"}));
        // Without the tool, or once the call answered, it is plain text.
        let bare = json!({"tools": [{"type": "function", "name": "exec_command"}],
            "input": [{"type": "message", "role": "user", "content": "SPAWN: x"}]});
        assert_eq!(
            responses_plan(&bare).0,
            Plan::Text("user said: SPAWN: x".into())
        );
        let answered = json!({"tools": tools, "input": [
            {"type": "message", "role": "user", "content": "SPAWN: x"},
            {"type": "function_call_output", "call_id": "c", "output": "{\"agent_id\":\"a\"}"}]});
        assert_eq!(
            responses_plan(&answered).0,
            Plan::Text("tool said: {\"agent_id\":\"a\"}".into())
        );
    }

    #[test]
    fn a_tool_call_streams_its_arguments_and_escalates() {
        let shared = Shared::default();
        let plan = Plan::Tool {
            command: "echo hi".into(),
            escalate: true,
        };
        let events = responses_events(&shared, &json!({}), &plan, Some("exec_command"));
        let done = &events.last().unwrap().1;
        let args: Value =
            serde_json::from_str(done["response"]["output"][0]["arguments"].as_str().unwrap())
                .unwrap();
        assert_eq!(args["cmd"], "echo hi");
        assert_eq!(args["sandbox_permissions"], "require_escalated");
        let hang = responses_events(&shared, &json!({}), &Plan::Hang, Some("exec_command"));
        assert!(hang.iter().all(|(name, _)| name != "response.completed"));
        assert_eq!(halves("hello"), vec!["he", "llo"]);
    }

    #[test]
    fn a_responses_call_finds_a_function_at_the_top_or_in_a_namespace() {
        let body = |tools: Value| {
            json!({"input": [{"type": "message", "role": "user",
                              "content": r#"CALL: mcp__jucode__report {"title":"t"}"#}],
                   "tools": tools})
        };
        let top = json!([{"type": "function", "name": "mcp__jucode__report"}]);
        let (plan, _) = responses_plan(&body(top));
        assert!(
            matches!(&plan, Plan::Function { name, namespace: None, arguments }
                if name == "mcp__jucode__report" && arguments["title"] == "t"),
            "{plan:?}"
        );
        let nested = json!([{"type": "namespace", "name": "mcp__jucode__",
                             "tools": [{"type": "function", "name": "report"}]}]);
        let (plan, _) = responses_plan(&body(nested));
        assert!(
            matches!(&plan, Plan::Function { name, namespace: Some(ns), .. }
                if name == "report" && ns == "mcp__jucode__"),
            "{plan:?}"
        );
        let (plan, _) = responses_plan(&body(json!([])));
        assert!(matches!(plan, Plan::Text(_)), "{plan:?}");
    }
}
