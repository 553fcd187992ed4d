//! Codex subagents: threads of their own that the main thread spawns with its collab tools.
//!
//! A child announces itself with `thread/started` (its `parentThreadId`, `agentNickname`,
//! `agentRole`); the parent's `collabAgentToolCall` items name the call that spawned it and
//! carry the last known state of each target. The child's own turns, tool calls and token
//! usage arrive as notifications for its thread id. All of it feeds the serve-v2 `agent_runs`
//! event; none of it reaches the conversation. `thread/read` gives a child's own conversation
//! for `subagent_transcript`.

use std::time::{SystemTime, UNIX_EPOCH};

use jucode_protocol::serve::Event;
use serde_json::{Value, json};

use crate::{event, text_of, truncate};

/// How many items of a subagent's conversation `subagent_transcript` returns (the newest).
const TRANSCRIPT_ITEMS: usize = 600;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[derive(Debug, Clone)]
struct Agent {
    id: String,
    label: String,
    kind: Option<String>,
    tool_use_id: Option<String>,
    status: String,
    model: Option<String>,
    started_at: u64,
    duration_ms: Option<u64>,
    tokens: u64,
    tool_calls: u64,
}

/// The subagents of one Codex session.
#[derive(Debug, Default)]
pub(crate) struct Agents {
    agents: Vec<Agent>,
}

/// What a change to the runs means for clients: a lifecycle event to send, if any.
pub(crate) type Lifecycle = Option<Event>;

impl Agents {
    pub(crate) fn knows(&self, thread: &str) -> bool {
        self.agents.iter().any(|a| a.id == thread)
    }

    fn get(&mut self, thread: &str) -> Option<&mut Agent> {
        self.agents.iter_mut().find(|a| a.id == thread)
    }

    /// `thread/started` for a thread that is not the session's own.
    pub(crate) fn started(&mut self, thread: &Value) -> Lifecycle {
        let id = thread.get("id").and_then(Value::as_str)?.to_string();
        let label = ["agentNickname", "agentRole"]
            .iter()
            .find_map(|k| thread.get(*k).and_then(Value::as_str))
            .unwrap_or("subagent")
            .to_string();
        let kind = thread
            .get("agentRole")
            .and_then(Value::as_str)
            .map(str::to_string);
        let model = thread
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string);
        match self.get(&id) {
            Some(agent) => {
                agent.label = label.clone();
                agent.kind = kind.or(agent.kind.take());
                agent.model = model.or(agent.model.take());
            }
            None => self.agents.push(Agent {
                id: id.clone(),
                label: label.clone(),
                kind,
                tool_use_id: None,
                status: "running".into(),
                model,
                started_at: now_ms(),
                duration_ms: None,
                tokens: 0,
                tool_calls: 0,
            }),
        }
        Some(event(
            "subagent_lifecycle",
            json!({"path": id, "status": "started", "label": label,
                   "message": thread.get("preview").map(text_of).filter(|p| !p.is_empty())}),
        ))
    }

    /// A `collabAgentToolCall` item of the session's own thread: which call spawned which
    /// thread, and the targets' last known states.
    pub(crate) fn collab_call(&mut self, item: &Value) -> bool {
        let call = item.get("id").and_then(Value::as_str).unwrap_or("");
        let spawn = item.get("tool").and_then(Value::as_str) == Some("spawnAgent");
        let mut changed = false;
        let receivers = item
            .get("receiverThreadIds")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for thread in receivers.iter().filter_map(Value::as_str) {
            if !self.knows(thread) && spawn {
                self.agents.push(Agent {
                    id: thread.to_string(),
                    label: "subagent".into(),
                    kind: None,
                    tool_use_id: None,
                    status: "running".into(),
                    model: None,
                    started_at: now_ms(),
                    duration_ms: None,
                    tokens: 0,
                    tool_calls: 0,
                });
            }
            if spawn && let Some(agent) = self.get(thread) {
                agent.tool_use_id = Some(call.to_string());
                if let Some(model) = item.get("model").and_then(Value::as_str) {
                    agent.model = Some(model.to_string());
                }
                changed = true;
            }
        }
        if let Some(states) = item.get("agentsStates").and_then(Value::as_object) {
            for (thread, state) in states {
                let Some(status) = state.get("status").and_then(Value::as_str) else {
                    continue;
                };
                if let Some(agent) = self.get(thread) {
                    let next = match status {
                        "pendingInit" | "running" => "running",
                        "completed" | "shutdown" => "completed",
                        "interrupted" => "interrupted",
                        _ => "failed",
                    };
                    if agent.status != next {
                        agent.status = next.to_string();
                        if next != "running" {
                            agent.duration_ms = Some(now_ms().saturating_sub(agent.started_at));
                        }
                        changed = true;
                    }
                }
            }
        }
        changed
    }

    /// A notification for a child thread.
    pub(crate) fn child_event(&mut self, method: &str, params: &Value) -> (bool, Lifecycle) {
        let Some(thread) = params.get("threadId").and_then(Value::as_str) else {
            return (false, None);
        };
        let Some(agent) = self.get(thread) else {
            return (false, None);
        };
        match method {
            "turn/started" => {
                let changed = agent.status != "running";
                agent.status = "running".into();
                agent.duration_ms = None;
                (changed, None)
            }
            "item/completed" => {
                let tool = matches!(
                    params.pointer("/item/type").and_then(Value::as_str),
                    Some("commandExecution" | "fileChange" | "mcpToolCall" | "webSearch")
                );
                if tool {
                    agent.tool_calls += 1;
                }
                (tool, None)
            }
            "thread/tokenUsage/updated" => {
                let total = params
                    .pointer("/tokenUsage/total/totalTokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(agent.tokens);
                let changed = total != agent.tokens;
                agent.tokens = total;
                (changed, None)
            }
            "turn/completed" => {
                let status = match params.pointer("/turn/status").and_then(Value::as_str) {
                    Some("interrupted") => "interrupted",
                    Some("failed") => "failed",
                    _ => "completed",
                };
                agent.status = status.to_string();
                agent.duration_ms = Some(now_ms().saturating_sub(agent.started_at));
                let message = params
                    .pointer("/turn/error/message")
                    .map(text_of)
                    .filter(|m| !m.is_empty());
                let lifecycle = event(
                    "subagent_lifecycle",
                    json!({"path": thread, "status": status, "label": agent.label, "message": message}),
                );
                (true, Some(lifecycle))
            }
            _ => (false, None),
        }
    }

    /// The serve-v2 `agent_runs` event: Codex has no workflows, only agents.
    pub(crate) fn event(&self) -> Event {
        let agents: Vec<Value> = self
            .agents
            .iter()
            .map(|a| {
                json!({
                    "id": a.id, "label": a.label, "type": a.kind,
                    "tool_use_id": a.tool_use_id, "status": a.status, "model": a.model,
                    "started_at": a.started_at, "duration_ms": a.duration_ms,
                    "tokens": a.tokens, "tool_calls": a.tool_calls,
                })
            })
            .collect();
        event("agent_runs", json!({"workflows": [], "agents": agents}))
    }
}

/// A child thread's conversation (`thread/read` with its turns) as `subagent_transcript` items.
pub(crate) fn transcript_items(thread: &Value) -> Vec<Value> {
    let mut items = Vec::new();
    let turns = thread.get("turns").and_then(Value::as_array);
    for item in turns
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("items").and_then(Value::as_array))
        .flatten()
    {
        let id = item.get("id").map(text_of).unwrap_or_default();
        let status = item.get("status").and_then(Value::as_str).unwrap_or("");
        let tool = |name: String, output: String, is_error: bool| {
            json!({"role": "tool", "call_id": id, "name": name, "output": truncate(&output, 20_000),
                   "is_error": is_error, "running": status == "inProgress"})
        };
        let entry = match item.get("type").and_then(Value::as_str).unwrap_or("") {
            "userMessage" => {
                let text: Vec<String> = item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.get("text").and_then(Value::as_str).map(str::to_string))
                    .collect();
                json!({"role": "user", "content": text.join("\n")})
            }
            "agentMessage" => {
                json!({"role": "assistant", "content": item.get("text").map(text_of).unwrap_or_default()})
            }
            "reasoning" => {
                let summary = item.get("summary").map(text_of).unwrap_or_default();
                if summary.is_empty() {
                    continue;
                }
                json!({"role": "reasoning", "content": summary})
            }
            "commandExecution" => {
                let code = item.get("exitCode").and_then(Value::as_i64);
                tool(
                    "bash".into(),
                    item.get("aggregatedOutput")
                        .map(text_of)
                        .unwrap_or_default(),
                    status == "failed" || status == "declined" || code.is_some_and(|c| c != 0),
                )
            }
            "fileChange" => {
                let files: Vec<String> = item
                    .get("changes")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.get("path").and_then(Value::as_str).map(str::to_string))
                    .collect();
                tool(
                    "str_replace".into(),
                    files.join(", "),
                    status == "failed" || status == "declined",
                )
            }
            "mcpToolCall" => tool(
                item.get("tool")
                    .map(text_of)
                    .unwrap_or_else(|| "mcp".into()),
                item.pointer("/result/content")
                    .map(text_of)
                    .unwrap_or_default(),
                item.get("error").is_some_and(|e| !e.is_null()),
            ),
            "webSearch" => tool(
                "web_search".into(),
                item.get("query").map(text_of).unwrap_or_default(),
                false,
            ),
            _ => continue,
        };
        items.push(entry);
    }
    let skip = items.len().saturating_sub(TRANSCRIPT_ITEMS);
    items.split_off(skip)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_spawned_thread_is_tracked_until_its_turn_ends() {
        let mut agents = Agents::default();
        let started = agents
            .started(
                &json!({"id":"child","agentNickname":"Scout","agentRole":"explorer","model":"m"}),
            )
            .unwrap();
        assert_eq!(started.str("status"), Some("started"));
        assert!(agents.collab_call(
            &json!({"id":"call_9","tool":"spawnAgent","receiverThreadIds":["child"],
            "agentsStates":{"child":{"status":"running"}}})
        ));
        let (changed, _) = agents.child_event(
            "item/completed",
            &json!({"threadId":"child","item":{"type":"commandExecution"}}),
        );
        assert!(changed);
        let (_, ended) = agents.child_event(
            "turn/completed",
            &json!({"threadId":"child","turn":{"status":"completed"}}),
        );
        assert_eq!(ended.unwrap().str("status"), Some("completed"));
        let runs = agents.event();
        let a = &runs.0["agents"][0];
        assert_eq!(
            (&a["label"], &a["type"], &a["tool_use_id"], &a["tool_calls"]),
            (
                &json!("Scout"),
                &json!("explorer"),
                &json!("call_9"),
                &json!(1)
            )
        );
        assert_eq!(a["status"], "completed");
    }

    #[test]
    fn transcripts_keep_the_conversation_and_tools() {
        let thread = json!({"turns":[{"items":[
            {"type":"userMessage","id":"u","content":[{"type":"text","text":"look"}]},
            {"type":"commandExecution","id":"c","status":"completed","exitCode":0,"aggregatedOutput":"a.txt\n"},
            {"type":"agentMessage","id":"m","text":"found a.txt"},
        ]}]});
        let items = transcript_items(&thread);
        assert_eq!(items[0], json!({"role":"user","content":"look"}));
        assert_eq!(items[1]["output"], "a.txt\n");
        assert_eq!(items[1]["running"], false);
        assert_eq!(
            items[2],
            json!({"role":"assistant","content":"found a.txt"})
        );
    }
}
