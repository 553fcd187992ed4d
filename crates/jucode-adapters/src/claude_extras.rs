//! Claude Code's answers to the control requests behind the Claude-only ops, reshaped into
//! serve-v2 events: `task_output`, `permission_rules`, `context_breakdown`, `side_answer`, and
//! the settings the `/effort`, `/fast` and `/thinking` commands change.
//!
//! Response shapes are those of Claude Code 2.1.332 (its Agent SDK's `sdk.d.ts`, checked
//! against the real CLI); unknown fields are ignored and missing ones read as absent.

use serde_json::{Value, json};

use crate::{event, text_of};
use jucode_protocol::serve::Event;

/// Effort levels `/effort` takes (Claude Code's `EffortLevel`).
pub(crate) const EFFORT_LEVELS: &[&str] = &["low", "medium", "high", "xhigh", "max"];

/// `task_output` from a `get_task_output` answer.
pub(crate) fn task_output(task_id: &str, body: &Value) -> Event {
    event(
        "task_output",
        json!({
            "task_id": task_id,
            "output": str_or(body, "output", ""),
            "truncated": body.get("truncated").and_then(Value::as_bool).unwrap_or(false),
        }),
    )
}

/// `permission_rules` from a `list_permission_rules` answer (`{state: {rules,
/// workspaceDirectories, …}}`).
pub(crate) fn permission_rules(body: &Value) -> Event {
    let state = body.get("state").unwrap_or(body);
    let rules: Vec<Value> = list(state, "rules")
        .iter()
        .map(|r| {
            json!({
                "behavior": str_or(r, "behavior", ""),
                "source": str_or(r, "source", ""),
                "rule": str_or(r, "rule", ""),
                "editability": str_or(r, "editability", "readonly"),
            })
        })
        .collect();
    let directories: Vec<Value> = list(state, "workspaceDirectories")
        .iter()
        .map(|d| {
            json!({
                "path": str_or(d, "path", ""),
                "source": str_or(d, "source", ""),
            })
        })
        .collect();
    event(
        "permission_rules",
        json!({ "rules": rules, "directories": directories }),
    )
}

/// `context_breakdown` from a `get_context_usage` answer: the window's rows as /context shows
/// them, without the CLI's terminal grid and colours (docs/DECISIONS.md, "Claude Code adapter").
pub(crate) fn context_breakdown(body: &Value) -> Event {
    let categories: Vec<Value> = list(body, "categories")
        .iter()
        .map(|c| {
            json!({
                "id": c.get("id").and_then(Value::as_str),
                "name": str_or(c, "name", ""),
                "tokens": count(c, "tokens"),
                "kind": str_or(c, "kind", "used"),
            })
        })
        .collect();
    let named_tokens = |key: &str, name_key: &str| -> Vec<Value> {
        list(body, key)
            .iter()
            .map(|m| {
                json!({
                    "name": str_or(m, name_key, ""),
                    "tokens": count(m, "tokens"),
                })
            })
            .collect()
    };
    let mcp_tools: Vec<Value> = list(body, "mcpTools")
        .iter()
        .map(|m| {
            json!({
                "name": str_or(m, "name", ""),
                "server": str_or(m, "serverName", ""),
                "tokens": count(m, "tokens"),
            })
        })
        .collect();
    event(
        "context_breakdown",
        json!({
            "model": body.get("model").and_then(Value::as_str),
            "total_tokens": count(body, "totalTokens"),
            "max_tokens": count(body, "maxTokens"),
            "percentage": body.get("percentage").and_then(Value::as_f64).unwrap_or(0.0),
            "auto_compact_threshold": body.get("autoCompactThreshold").and_then(Value::as_u64),
            "auto_compact": body.get("isAutoCompactEnabled").and_then(Value::as_bool).unwrap_or(false),
            "categories": categories,
            "memory_files": named_tokens("memoryFiles", "path"),
            "mcp_tools": mcp_tools,
            "agents": named_tokens("agents", "agentType"),
        }),
    )
}

/// `side_answer` from a `side_question` answer (`{response: string | null, …}`).
pub(crate) fn side_answer(question: &str, body: &Value) -> Event {
    match body.get("response") {
        Some(Value::String(answer)) => event(
            "side_answer",
            json!({ "question": question, "answer": answer }),
        ),
        Some(other) if !other.is_null() => event(
            "side_answer",
            json!({ "question": question, "answer": text_of(other) }),
        ),
        _ => side_error(question, "Claude Code gave no answer"),
    }
}

pub(crate) fn side_error(question: &str, message: &str) -> Event {
    event(
        "side_answer",
        json!({ "question": question, "error": message }),
    )
}

/// `on`, `off` or nothing (toggle `current`) as the new value of a switch.
pub(crate) fn switch(word: Option<&str>, current: bool) -> Result<bool, String> {
    match word {
        None => Ok(!current),
        Some("on" | "true") => Ok(true),
        Some("off" | "false") => Ok(false),
        Some(other) => Err(format!("expected on or off, not `{other}`")),
    }
}

/// What `get_settings` says about the session (`{effective, applied: {…}}`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Applied {
    pub effort: Option<String>,
    pub ultracode: Option<bool>,
    pub ultracode_available: Option<bool>,
    pub fast: Option<bool>,
    pub thinking_summaries: Option<bool>,
}

pub(crate) fn applied(body: &Value) -> Applied {
    let applied = &body["applied"];
    let effective = &body["effective"];
    Applied {
        effort: applied
            .get("effort")
            .and_then(Value::as_str)
            .map(str::to_string),
        ultracode: applied.get("ultracode").and_then(Value::as_bool),
        ultracode_available: applied.get("ultracodeAvailable").and_then(Value::as_bool),
        fast: effective.get("fastMode").and_then(Value::as_bool),
        thinking_summaries: effective
            .get("showThinkingSummaries")
            .and_then(Value::as_bool),
    }
}

/// A string field, or `default` when it is missing or not a string.
fn str_or<'a>(v: &'a Value, key: &str, default: &'a str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or(default)
}

/// A count field, 0 when it is missing.
fn count(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_toggle_or_take_on_and_off() {
        assert_eq!(switch(None, true), Ok(false));
        assert_eq!(switch(Some("on"), true), Ok(true));
        assert_eq!(switch(Some("off"), false), Ok(false));
        assert!(switch(Some("maybe"), false).is_err());
    }

    #[test]
    fn settings_are_read_from_applied_and_effective() {
        let body = json!({"effective":{"fastMode":true,"showThinkingSummaries":false},
            "applied":{"effort":"high","ultracode":true,"ultracodeAvailable":true}});
        let a = applied(&body);
        assert_eq!(a.effort.as_deref(), Some("high"));
        assert_eq!(a.ultracode, Some(true));
        assert_eq!(a.fast, Some(true));
        assert_eq!(a.thinking_summaries, Some(false));
        assert_eq!(applied(&json!({})), Applied::default());
    }

    #[test]
    fn a_side_question_without_an_answer_is_an_error() {
        let e = side_answer("q", &json!({"response": null}));
        assert_eq!(e.0["error"], "Claude Code gave no answer");
        let e = side_answer("q", &json!({"response": "4"}));
        assert_eq!(e.0["answer"], "4");
    }
}
