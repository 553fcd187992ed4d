//! Codex subagents: threads of their own that the main thread spawns with its collab tools.
//!
//! A child announces itself with `thread/started` (its `parentThreadId`, `agentNickname`,
//! `agentRole`); the parent's `collabAgentToolCall` items name the call that spawned it and
//! carry the last known state of each target. The child's own turns, tool calls and token
//! usage arrive as notifications for its thread id. All of it feeds the serve-v2 `agent_runs`
//! event; none of it reaches the conversation. `thread/read` gives a child's own conversation
//! for `subagent_transcript`.

use jucode_protocol::serve::Event;
use serde_json::{Value, json};

use crate::runs::{AgentRun, agent_runs, newest};
use crate::{text_of, truncate};

#[derive(Debug, Clone)]
struct Agent {
    run: AgentRun,
    /// Whether Codex told its nickname or role (else it is looked up in its rollout).
    named: bool,
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
        self.agents.iter().any(|a| a.run.id == thread)
    }

    fn get(&mut self, thread: &str) -> Option<&mut Agent> {
        self.agents.iter_mut().find(|a| a.run.id == thread)
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
        let named = ["agentNickname", "agentRole"]
            .iter()
            .any(|k| thread.get(*k).is_some_and(Value::is_string));
        if let Some(agent) = self.get(&id) {
            agent.named |= named;
            agent.run.label = label;
            agent.run.kind = kind.or(agent.run.kind.take());
            agent.run.model = model.or(agent.run.model.take());
        } else {
            let mut run = AgentRun::running(&id, &label);
            run.kind = kind;
            run.model = model;
            self.agents.push(Agent { run, named });
        }
        let preview = thread.get("preview").map(text_of).filter(|p| !p.is_empty());
        Some(self.get(&id)?.run.lifecycle("started", preview))
    }

    /// A `collabAgentToolCall` item of the session's own thread: which call spawned which
    /// thread, and the targets' last known states. Returns whether the runs changed and the
    /// threads first heard of here (Codex 0.171.0 sends no `thread/started` for them).
    pub(crate) fn collab_call(&mut self, item: &Value) -> (bool, Vec<String>) {
        let call = item.get("id").and_then(Value::as_str).unwrap_or("");
        let spawn = item.get("tool").and_then(Value::as_str) == Some("spawnAgent");
        let mut changed = false;
        let mut new = Vec::new();
        let receivers = item
            .get("receiverThreadIds")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for thread in receivers.iter().filter_map(Value::as_str) {
            if !self.knows(thread) && spawn {
                new.push(thread.to_string());
                self.agents.push(Agent {
                    run: AgentRun::running(thread, "subagent"),
                    named: false,
                });
            }
            if spawn && let Some(agent) = self.get(thread) {
                agent.run.tool_use_id = Some(call.to_string());
                if let Some(model) = item.get("model").and_then(Value::as_str) {
                    agent.run.model = Some(model.to_string());
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
                    if agent.run.status != next {
                        agent.run.status = next.to_string();
                        if next != "running" {
                            agent.run.duration_ms = agent.run.elapsed();
                        }
                        changed = true;
                    }
                }
            }
        }
        (changed, new)
    }

    /// A thread first heard of through its spawn call: its names (nickname, role) as Codex
    /// saved them, and its `started` lifecycle.
    pub(crate) fn spawned(
        &mut self,
        thread: &str,
        names: (Option<String>, Option<String>),
        prompt: Option<String>,
    ) -> Lifecycle {
        self.name(thread, names);
        let agent = self.get(thread)?;
        let prompt = prompt.filter(|p| !p.is_empty()).map(|p| truncate(&p, 400));
        Some(agent.run.lifecycle("started", prompt))
    }

    /// Whether `thread` is a subagent whose nickname and role are still unknown.
    pub(crate) fn unnamed(&self, thread: &str) -> bool {
        self.agents.iter().any(|a| a.run.id == thread && !a.named)
    }

    /// Gives a subagent the nickname / role Codex saved; whether it was renamed.
    pub(crate) fn name(&mut self, thread: &str, names: (Option<String>, Option<String>)) -> bool {
        let Some(agent) = self.get(thread) else {
            return false;
        };
        let (nickname, role) = names;
        let Some(label) = nickname.or(role.clone()) else {
            return false;
        };
        agent.named = true;
        let changed = agent.run.label != label || (role.is_some() && agent.run.kind != role);
        agent.run.label = label;
        agent.run.kind = role.or(agent.run.kind.take());
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
                let changed = agent.run.status != "running";
                agent.run.status = "running".into();
                agent.run.duration_ms = None;
                (changed, None)
            }
            "item/completed" => {
                let tool = matches!(
                    params.pointer("/item/type").and_then(Value::as_str),
                    Some("commandExecution" | "fileChange" | "mcpToolCall" | "webSearch")
                );
                if tool {
                    agent.run.tool_calls += 1;
                }
                (tool, None)
            }
            "thread/tokenUsage/updated" => {
                let total = params
                    .pointer("/tokenUsage/total/totalTokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(agent.run.tokens);
                let changed = total != agent.run.tokens;
                agent.run.tokens = total;
                (changed, None)
            }
            "turn/completed" => {
                let status = match params.pointer("/turn/status").and_then(Value::as_str) {
                    Some("interrupted") => "interrupted",
                    Some("failed") => "failed",
                    _ => "completed",
                };
                agent.run.status = status.to_string();
                agent.run.duration_ms = agent.run.elapsed();
                let message = params
                    .pointer("/turn/error/message")
                    .map(text_of)
                    .filter(|m| !m.is_empty());
                (true, Some(agent.run.lifecycle(status, message)))
            }
            _ => (false, None),
        }
    }

    /// Adds the subagents Codex saved under `codex_home` for thread `parent` that this process
    /// has not seen (`codex_saved`); whether any was added.
    pub(crate) fn load_saved(&mut self, codex_home: &std::path::Path, parent: &str) -> bool {
        let mut changed = false;
        for saved in crate::codex_saved::saved_children(codex_home, parent) {
            if self.knows(&saved.id) {
                continue;
            }
            self.agents.push(Agent {
                run: saved,
                named: true,
            });
            changed = true;
        }
        changed
    }

    /// The serve-v2 `agent_runs` event: Codex has no workflows, only agents.
    pub(crate) fn event(&self) -> Event {
        agent_runs(Vec::new(), self.agents.iter().map(|a| &a.run))
    }
}

/// The `field` strings of the objects in the array `list` (a message's texts, a change's paths).
pub(crate) fn strings_in<'a>(list: Option<&'a Value>, field: &str) -> Vec<&'a str> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get(field).and_then(Value::as_str))
        .collect()
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
                let text = strings_in(item.get("content"), "text");
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
                let files = strings_in(item.get("changes"), "path");
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
    newest(items)
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
        let (changed, new) = agents.collab_call(
            &json!({"id":"call_9","tool":"spawnAgent","receiverThreadIds":["child"],
            "agentsStates":{"child":{"status":"running"}}}),
        );
        assert!(changed && new.is_empty());
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
    fn a_thread_known_only_from_its_spawn_call_gets_its_saved_names() {
        let mut agents = Agents::default();
        let (changed, new) = agents.collab_call(
            &json!({"id":"call_1","tool":"spawnAgent","receiverThreadIds":["kid"],"prompt":"go"}),
        );
        assert!(changed);
        assert_eq!(new, vec!["kid".to_string()]);
        let started = agents
            .spawned("kid", (Some("Tesla".into()), None), Some("go".into()))
            .unwrap();
        assert_eq!(
            (
                started.str("status"),
                started.str("label"),
                started.str("message")
            ),
            (Some("started"), Some("Tesla"), Some("go"))
        );
        assert_eq!(agents.event().0["agents"][0]["label"], "Tesla");
        assert!(agents.spawned("nobody", (None, None), None).is_none());
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
