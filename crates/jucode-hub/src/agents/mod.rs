//! Long-lived agents: one directory each under `~/.jucode/agents/<id>/` holding `agent.json`
//! (the settings below), the brief files and `memory/<topic>.md` notes.
//!
//! This module keeps the settings of every agent in memory, read once at start and rewritten
//! whole (atomically) on every change. The brief and memory files are read from disk when
//! needed, since the agent itself rewrites them.

pub(crate) mod capability;
pub(crate) mod tools;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::HubError;

/// The reserved agent of dispatches: never listed, never created by a client.
pub(crate) const DISPATCH: &str = "dispatch";

/// The brief files, in the order `agent_get` lists them.
pub(crate) const BRIEF_FILES: [&str; 4] = ["role.md", "capabilities.md", "policy.md", "state.md"];

/// One of `command_rules`: what an escalated command starting with `prefix` may do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CommandRule {
    pub(crate) prefix: String,
    /// `allow`, `ask` or `forbid`.
    pub(crate) action: String,
}

/// A directory outside `cwd` the agent may read (`ro`) or read and write (`rw`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Directory {
    pub(crate) path: String,
    /// `ro` or `rw`.
    pub(crate) mode: String,
}

fn yes() -> bool {
    true
}

fn default_approval_mode() -> String {
    "auto".into()
}

fn default_sandbox() -> String {
    "workspace-write".into()
}

/// The default rules: committing is fine, pushing asks a person.
pub(crate) fn default_command_rules() -> Vec<CommandRule> {
    [
        ("git add", "allow"),
        ("git commit", "allow"),
        ("git push", "ask"),
    ]
    .into_iter()
    .map(|(prefix, action)| CommandRule {
        prefix: prefix.into(),
        action: action.into(),
    })
    .collect()
}

/// `agent.json`. Fields this daemon does not know are kept as they were (`extra`), so a newer
/// client's settings survive an update made by this one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AgentConfig {
    pub(crate) name: String,
    pub(crate) cwd: PathBuf,
    #[serde(default = "yes")]
    pub(crate) enabled: bool,
    #[serde(default = "default_approval_mode")]
    pub(crate) approval_mode: String,
    #[serde(default = "default_sandbox")]
    pub(crate) sandbox: String,
    #[serde(default = "yes")]
    pub(crate) network: bool,
    #[serde(default)]
    pub(crate) directories: Vec<Directory>,
    #[serde(default = "default_command_rules")]
    pub(crate) command_rules: Vec<CommandRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) icon: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) color: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) avatar_seed: Option<String>,
    #[serde(default)]
    pub(crate) project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) workspace: Option<String>,
    /// The engine its sessions run on (`jucode` when absent); not in the spec's table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) engine: Option<String>,
    /// When it was created, in ms (0 for agents written by hand).
    #[serde(default)]
    pub(crate) created_at: u64,
    #[serde(flatten)]
    pub(crate) extra: serde_json::Map<String, Value>,
}

/// One agent as the hub holds it.
#[derive(Debug, Clone)]
pub(crate) struct Agent {
    pub(crate) id: String,
    /// `~/.jucode/agents/<id>`.
    pub(crate) dir: PathBuf,
    pub(crate) config: AgentConfig,
}

/// Every agent, by id.
pub(crate) struct Agents {
    /// `~/.jucode/agents`.
    pub(crate) root: PathBuf,
    pub(crate) map: BTreeMap<String, Agent>,
}

/// Whether `id` may name an agent: 1 to 40 of `a-z`, `0-9` and `-`.
pub(crate) fn is_agent_id(id: &str) -> bool {
    (1..=40).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

impl Agents {
    /// Reads every `<home>/agents/<id>/agent.json`. A directory whose name is not an agent id,
    /// or whose settings cannot be read, is skipped with a warning rather than stopping the
    /// daemon: the user may have put anything there.
    pub(crate) fn open(home: &Path) -> Result<Agents, HubError> {
        let root = home.join("agents");
        let mut map = BTreeMap::new();
        let entries = match std::fs::read_dir(&root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Agents { root, map });
            }
            Err(e) => {
                return Err(HubError::Invalid {
                    path: root,
                    message: e.to_string(),
                });
            }
        };
        for entry in entries.flatten() {
            let Some(id) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if !is_agent_id(&id) || id == DISPATCH {
                continue;
            }
            let dir = entry.path();
            match jucode_store::read_json::<AgentConfig>(&dir.join("agent.json")) {
                Ok(Some(config)) => {
                    map.insert(id.clone(), Agent { id, dir, config });
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("skipping agent {id}: {e}"),
            }
        }
        Ok(Agents { root, map })
    }

    pub(crate) fn get(&self, id: &str) -> Option<&Agent> {
        self.map.get(id)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn agent_ids_are_short_lowercase_words() {
        for good in ["ops", "a", "build-bot-2", &"a".repeat(40)] {
            assert!(is_agent_id(good), "{good}");
        }
        for bad in ["", "Ops", "a_b", "a/b", "..", "é", &"a".repeat(41)] {
            assert!(!is_agent_id(bad), "{bad}");
        }
    }

    #[test]
    fn a_minimal_agent_json_reads_with_every_default() {
        let config: AgentConfig =
            serde_json::from_str(r#"{"name":"Ops","cwd":"/w","future":1}"#).unwrap();
        assert!(config.enabled && config.network);
        assert_eq!(config.approval_mode, "auto");
        assert_eq!(config.sandbox, "workspace-write");
        assert_eq!(config.command_rules, default_command_rules());
        assert_eq!(config.project, None);
        let back = serde_json::to_value(&config).unwrap();
        assert_eq!(back["future"], 1);
        assert_eq!(back["project"], Value::Null);
    }
}
