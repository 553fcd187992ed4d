//! Subagents Codex saved before this process, read from its rollouts
//! (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<thread>.jsonl`, or `.jsonl.zst`).
//!
//! A subagent's rollout opens with a `session_meta` naming its parent thread
//! (`parent_thread_id`, or `source.subagent.thread_spawn.parent_thread_id`). The children of a
//! session are the threads whose parent chain reaches its thread; nothing else is listed, so an
//! id is proven to belong to the session before anything of it is shown. The rest of the file
//! gives the run: `task_started` / `task_complete` / `turn_aborted` / `error` events its status,
//! `token_count` its tokens, tool calls among its `response_item`s; the parent's own
//! `spawn_agent` call (its output names the new agent) gives the `tool_use_id`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde_json::Value;

use crate::history::{lines, rollouts};
use crate::runs::AgentRun;

/// The creation time (ms) a UUIDv7 thread id carries in its first 48 bits.
fn uuid7_ms(id: &str) -> Option<u64> {
    let bytes = id.as_bytes();
    if id.len() != 36 || bytes.get(14) != Some(&b'7') {
        return None;
    }
    let hex: String = id.chars().filter(|c| *c != '-').take(12).collect();
    u64::from_str_radix(&hex, 16).ok()
}

/// The thread id at the end of a rollout's file name.
fn file_thread(path: &Path) -> Option<&str> {
    let name = crate::history::rollout_stem(path.file_name()?.to_str()?)?;
    name.get(name.len().checked_sub(36)?..)
}

fn mtime_ms(path: &Path) -> Option<u64> {
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
    let since = modified.duration_since(UNIX_EPOCH).ok()?;
    Some(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// A rollout's `session_meta` payload, when its first line is one.
fn meta(path: &Path) -> Option<Value> {
    let first = lines(path).next()?;
    (str_at(&first, "/type") == Some("session_meta")).then(|| first["payload"].clone())
}

fn parent_of(meta: &Value) -> Option<&str> {
    str_at(meta, "/parent_thread_id")
        .or_else(|| str_at(meta, "/source/subagent/thread_spawn/parent_thread_id"))
}

/// Every saved descendant of `parent` (children, their children, …), oldest first.
pub(crate) fn saved_children(codex_home: &Path, parent: &str) -> Vec<AgentRun> {
    // UUIDv7 ids sort by creation time: a thread made before the session's cannot be a child.
    let floor = uuid7_ms(parent).map(|_| parent.to_ascii_lowercase());
    let mut metas: Vec<(String, String, Value, PathBuf)> = Vec::new();
    let mut parent_file = None;
    for path in rollouts(codex_home) {
        let Some(thread) = file_thread(&path) else {
            continue;
        };
        if thread == parent {
            parent_file = Some(path);
            continue;
        }
        if let Some(floor) = &floor
            && uuid7_ms(thread).is_some()
            && thread.to_ascii_lowercase() < *floor
        {
            continue;
        }
        let Some(meta) = meta(&path) else { continue };
        let (Some(id), Some(up)) = (str_at(&meta, "/id"), parent_of(&meta)) else {
            continue;
        };
        metas.push((id.to_string(), up.to_string(), meta.clone(), path));
    }
    // Walk down from the session's thread: only proven descendants.
    let mut tree: Vec<String> = vec![parent.to_string()];
    let mut found: Vec<(Value, PathBuf)> = Vec::new();
    let mut i = 0;
    while i < tree.len() {
        let here = tree[i].clone();
        for (id, up, meta, path) in &metas {
            if *up == here && !tree.contains(id) {
                tree.push(id.clone());
                found.push((meta.clone(), path.clone()));
            }
        }
        i += 1;
    }
    let mut spawns = HashMap::new();
    for path in parent_file
        .iter()
        .chain(found.iter().map(|(_, p)| p))
        .cloned()
        .collect::<Vec<_>>()
    {
        spawn_calls(&path, &mut spawns);
    }
    let mut agents: Vec<AgentRun> = found
        .iter()
        .map(|(meta, path)| {
            let mut agent = read_child(meta, path);
            agent.tool_use_id = spawns.get(&agent.id).cloned();
            agent
        })
        .collect();
    agents.sort_by_key(|a| a.started_at);
    agents
}

/// The nickname and role Codex saved for a thread it spawned (both `None` when it saved none).
pub(crate) fn saved_names(codex_home: &Path, thread: &str) -> (Option<String>, Option<String>) {
    crate::history::codex_rollout_path(codex_home, thread)
        .and_then(|p| meta(&p))
        .map(|m| names_of(&m))
        .unwrap_or((None, None))
}

/// A `session_meta`'s agent nickname and role (top level, or in its spawn source).
fn names_of(meta: &Value) -> (Option<String>, Option<String>) {
    let spawn = meta.pointer("/source/subagent/thread_spawn");
    let field = |key: &str| {
        str_at(meta, &format!("/{key}"))
            .or_else(|| spawn.and_then(|s| s.get(key)).and_then(Value::as_str))
            .map(str::to_string)
    };
    (field("agent_nickname"), field("agent_role"))
}

/// `spawn_agent` calls in a rollout: the spawned agent's id → the call's id.
fn spawn_calls(path: &Path, out: &mut HashMap<String, String>) {
    let mut calls = Vec::new();
    for line in lines(path) {
        if str_at(&line, "/type") != Some("response_item") {
            continue;
        }
        let payload = &line["payload"];
        match str_at(payload, "/type") {
            Some("function_call") if str_at(payload, "/name") == Some("spawn_agent") => {
                if let Some(call) = str_at(payload, "/call_id") {
                    calls.push(call.to_string());
                }
            }
            Some("function_call_output") => {
                let Some(call) =
                    str_at(payload, "/call_id").filter(|c| calls.iter().any(|k| k == c))
                else {
                    continue;
                };
                // The output is the tool's JSON answer, as a string or already parsed.
                let output = match &payload["output"] {
                    Value::String(s) => serde_json::from_str(s).unwrap_or(Value::Null),
                    other => other.clone(),
                };
                if let Some(agent) = str_at(&output, "/agent_id") {
                    out.insert(agent.to_string(), call.to_string());
                }
            }
            _ => {}
        }
    }
}

/// One child's run as its rollout tells it.
fn read_child(meta: &Value, path: &Path) -> AgentRun {
    let id = str_at(meta, "/id").unwrap_or("").to_string();
    let (nickname, role) = names_of(meta);
    let mut model = None;
    let mut tokens = 0;
    let mut tool_calls = 0;
    // No end event after the last start: the process running it is gone.
    let mut status = "interrupted";
    let mut failed = false;
    for line in lines(path).skip(1) {
        let payload = &line["payload"];
        match (str_at(&line, "/type"), str_at(payload, "/type")) {
            (Some("turn_context"), _) => {
                if let Some(m) = str_at(payload, "/model") {
                    model = Some(m.to_string());
                }
            }
            (
                Some("response_item"),
                Some("function_call" | "custom_tool_call" | "local_shell_call" | "web_search_call"),
            ) => tool_calls += 1,
            (Some("event_msg"), Some("task_started")) => {
                status = "interrupted";
                failed = false;
            }
            (Some("event_msg"), Some("error")) => failed = true,
            (Some("event_msg"), Some("task_complete")) => {
                status = if failed { "failed" } else { "completed" };
            }
            (Some("event_msg"), Some("turn_aborted")) => status = "interrupted",
            (Some("event_msg"), Some("token_count")) => {
                if let Some(total) = payload
                    .pointer("/info/total_token_usage/total_tokens")
                    .and_then(Value::as_u64)
                {
                    tokens = total;
                }
            }
            _ => {}
        }
    }
    let modified = mtime_ms(path);
    let started_at = uuid7_ms(&id).or(modified).unwrap_or(0);
    AgentRun {
        label: nickname
            .clone()
            .or(role.clone())
            .unwrap_or_else(|| "subagent".into()),
        id,
        kind: role,
        tool_use_id: None,
        status: status.to_string(),
        model,
        started_at: Some(started_at),
        // The file's last write is when the run last did anything.
        duration_ms: modified.map(|m| m.saturating_sub(started_at)),
        tokens,
        tool_calls,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    const PARENT: &str = "019ad0c2-1f00-7000-8000-000000000001";
    const CHILD: &str = "019ad0c2-2000-7000-8000-000000000002";
    const GRANDCHILD: &str = "019ad0c2-2100-7000-8000-000000000003";
    const STRANGER: &str = "019ad0c2-2200-7000-8000-000000000004";
    const OLDER: &str = "019ad0c1-0000-7000-8000-000000000005";

    fn rollout(home: &Path, id: &str, lines: &[Value]) {
        let dir = home.join("sessions/2026/11/29");
        std::fs::create_dir_all(&dir).unwrap();
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        std::fs::write(
            dir.join(format!("rollout-2026-11-29T10-00-00-{id}.jsonl")),
            text.join("\n"),
        )
        .unwrap();
    }

    fn child_meta(id: &str, parent: &str, nickname: &str) -> Value {
        json!({"type":"session_meta","payload":{"id":id,"parent_thread_id":parent,
            "source":{"subagent":{"thread_spawn":{"parent_thread_id":parent,"depth":1,
            "agent_nickname":nickname,"agent_role":"explorer"}}},"agent_nickname":nickname}})
    }

    #[test]
    fn only_descendants_are_listed_with_their_runs() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        rollout(
            home,
            PARENT,
            &[
                json!({"type":"session_meta","payload":{"id":PARENT,"source":"vscode"}}),
                json!({"type":"response_item","payload":{"type":"function_call","name":"spawn_agent","call_id":"call_7","arguments":"{}"}}),
                json!({"type":"response_item","payload":{"type":"function_call_output","call_id":"call_7","output":format!("{{\"agent_id\":\"{CHILD}\",\"nickname\":\"Ada\"}}")}}),
            ],
        );
        rollout(
            home,
            CHILD,
            &[
                child_meta(CHILD, PARENT, "Ada"),
                json!({"type":"turn_context","payload":{"model":"m1"}}),
                json!({"type":"event_msg","payload":{"type":"task_started"}}),
                json!({"type":"response_item","payload":{"type":"function_call","name":"exec_command","call_id":"c1"}}),
                json!({"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"total_tokens":42}}}}),
                json!({"type":"event_msg","payload":{"type":"task_complete"}}),
            ],
        );
        // A child of the child (through the nested source only), still running when it stopped.
        let mut nested = child_meta(GRANDCHILD, CHILD, "Bo");
        nested["payload"]
            .as_object_mut()
            .unwrap()
            .remove("parent_thread_id");
        rollout(
            home,
            GRANDCHILD,
            &[
                nested,
                json!({"type":"event_msg","payload":{"type":"task_started"}}),
            ],
        );
        rollout(home, STRANGER, &[child_meta(STRANGER, OLDER, "Cy")]);
        rollout(home, OLDER, &[child_meta(OLDER, PARENT, "Old")]);

        let agents = saved_children(home, PARENT);
        let ids: Vec<&str> = agents.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, vec![CHILD, GRANDCHILD]);
        let a = &agents[0];
        assert_eq!(
            (
                a.label.as_str(),
                a.kind.as_deref(),
                a.status.as_str(),
                a.model.as_deref()
            ),
            ("Ada", Some("explorer"), "completed", Some("m1"))
        );
        assert_eq!((a.tokens, a.tool_calls), (42, 1));
        assert_eq!(a.tool_use_id.as_deref(), Some("call_7"));
        assert_eq!(a.started_at, Some(0x019a_d0c2_2000));
        assert_eq!(agents[1].status, "interrupted");
        assert_eq!(agents[1].label, "Bo");
        assert!(saved_children(home, STRANGER).is_empty());
    }

    #[test]
    fn uuid7_times_and_file_ids_are_read() {
        assert_eq!(uuid7_ms(CHILD), Some(0x019a_d0c2_2000));
        assert_eq!(uuid7_ms("6b1d2e3f-4051-4263-9a74-8b9cad0e1f22"), None);
        let path =
            Path::new("/x/rollout-2026-11-29T10-00-00-019ad0c2-2000-7000-8000-000000000002.jsonl");
        assert_eq!(file_thread(path), Some(CHILD));
        let zst = Path::new(
            "/x/rollout-2026-11-29T10-00-00-019ad0c2-2000-7000-8000-000000000002.jsonl.zst",
        );
        assert_eq!(file_thread(zst), Some(CHILD));
    }

    #[test]
    fn compressed_rollouts_are_read_like_plain_ones() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        rollout(
            home,
            PARENT,
            &[json!({"type":"session_meta","payload":{"id":PARENT,"source":"cli"}})],
        );
        let lines = [
            child_meta(CHILD, PARENT, "Ada"),
            json!({"type":"event_msg","payload":{"type":"task_started"}}),
            json!({"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"total_tokens":7}}}}),
            json!({"type":"event_msg","payload":{"type":"task_complete"}}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(
            home.join(format!(
                "sessions/2026/11/29/rollout-2026-11-29T10-00-01-{CHILD}.jsonl.zst"
            )),
            crate::history::tests::zstd_frames(&text),
        )
        .unwrap();
        let agents = saved_children(home, PARENT);
        assert_eq!(agents.len(), 1);
        assert_eq!(
            (agents[0].id.as_str(), agents[0].label.as_str()),
            (CHILD, "Ada")
        );
        assert_eq!(
            (agents[0].status.as_str(), agents[0].tokens),
            ("completed", 7)
        );
        assert_eq!(
            saved_names(home, CHILD),
            (Some("Ada".to_string()), Some("explorer".to_string()))
        );
    }
}
