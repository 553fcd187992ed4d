//! The serve-v2 run-trace shapes Claude Code and Codex subagents share: a subagent's entry in
//! `agent_runs.agents`, its `subagent_lifecycle` event and the size of `subagent_transcript`.

use jucode_protocol::serve::Event;
use serde_json::{Value, json};

use crate::event;

/// How many items of a subagent's conversation `subagent_transcript` returns (the newest).
const TRANSCRIPT_ITEMS: usize = 600;

/// Wall time for run traces. Adapters are started without the hub's clock, so the system's.
pub(crate) fn now_ms() -> u64 {
    use jucode_clock::Clock as _;
    jucode_clock::SystemClock::new().now_ms()
}

/// The newest `TRANSCRIPT_ITEMS` of a subagent's conversation.
pub(crate) fn newest(mut items: Vec<Value>) -> Vec<Value> {
    let skip = items.len().saturating_sub(TRANSCRIPT_ITEMS);
    items.split_off(skip)
}

/// What every engine knows of one subagent: the fields of its `agent_runs.agents` entry.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct AgentRun {
    pub id: String,
    pub label: String,
    pub kind: Option<String>,
    pub tool_use_id: Option<String>,
    pub status: String,
    pub model: Option<String>,
    pub started_at: Option<u64>,
    pub duration_ms: Option<u64>,
    pub tokens: u64,
    pub tool_calls: u64,
}

impl AgentRun {
    /// A run that starts now under `id`.
    pub(crate) fn running(id: &str, label: &str) -> AgentRun {
        AgentRun {
            id: id.to_string(),
            label: label.to_string(),
            status: "running".into(),
            started_at: Some(now_ms()),
            ..AgentRun::default()
        }
    }

    /// Time since it started, for a run that just ended.
    pub(crate) fn elapsed(&self) -> Option<u64> {
        self.started_at.map(|s| now_ms().saturating_sub(s))
    }

    /// Its entry in `agent_runs.agents`.
    pub(crate) fn entry(&self) -> Value {
        json!({
            "id": self.id, "label": self.label, "type": self.kind,
            "tool_use_id": self.tool_use_id, "status": self.status, "model": self.model,
            "started_at": self.started_at, "duration_ms": self.duration_ms,
            "tokens": self.tokens, "tool_calls": self.tool_calls,
        })
    }

    /// Its `subagent_lifecycle` event (`path` is its id) with `status` and `message`.
    pub(crate) fn lifecycle_fields(&self, status: &str, message: Option<String>) -> Value {
        json!({"path": self.id, "status": status, "label": self.label, "message": message})
    }

    pub(crate) fn lifecycle(&self, status: &str, message: Option<String>) -> Event {
        event("subagent_lifecycle", self.lifecycle_fields(status, message))
    }
}

/// The `agent_runs` event of subagents and workflows.
pub(crate) fn agent_runs<'a>(
    workflows: Vec<Value>,
    agents: impl Iterator<Item = &'a AgentRun>,
) -> Event {
    let agents: Vec<Value> = agents.map(AgentRun::entry).collect();
    event(
        "agent_runs",
        json!({ "workflows": workflows, "agents": agents }),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_and_a_lifecycle_carry_the_runs_fields() {
        let mut run = AgentRun::running("a1", "Explore");
        run.kind = Some("general-purpose".into());
        run.tokens = 12;
        let entry = run.entry();
        assert_eq!(entry["type"], "general-purpose");
        assert_eq!(entry["status"], "running");
        assert_eq!(entry["tokens"], 12);
        assert!(entry["started_at"].as_u64().unwrap() > 0);
        assert_eq!(
            run.lifecycle_fields("completed", Some("done".into())),
            json!({"path":"a1","status":"completed","label":"Explore","message":"done"})
        );
    }

    #[test]
    fn a_transcript_keeps_its_newest_items() {
        let items: Vec<Value> = (0..TRANSCRIPT_ITEMS + 5).map(|i| json!(i)).collect();
        let kept = newest(items);
        assert_eq!(kept.len(), TRANSCRIPT_ITEMS);
        assert_eq!(kept[0], json!(5));
    }
}
