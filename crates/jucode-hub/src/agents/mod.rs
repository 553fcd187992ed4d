//! Long-lived agents: one directory each under `~/.jucode/agents/<id>/` holding `agent.json`
//! (the settings below), the brief files and `memory/<topic>.md` notes.
//!
//! This module keeps the settings of every agent in memory, read once at start and rewritten
//! whole (atomically) on every change. The brief and memory files are read from disk when
//! needed, since the agent itself rewrites them (`brief`). The ops are in `ops`, the checks of
//! their values in `validate`, the agent's system prompt in `prompt`.
//!
//! Invariants: `dispatch` is never created nor listed; an op with bad input changes nothing
//! (everything is checked before the first write); `agents` goes to every client after every
//! change, including a session of an agent starting or ending a turn.

pub(crate) mod brief;
pub(crate) mod capability;
mod ops;
pub(crate) mod prompt;
pub(crate) mod tools;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jucode_protocol::daemon::{AgentInfo, DaemonEvent, Reply, SessionInfo};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::IoError;
use crate::paths::PathError;
use crate::{HubError, Inner, to_value};

pub(crate) use jucode_protocol::daemon::{AgentDirectory as Directory, CommandRule};
pub(crate) use ops::handle;

/// Why an agent op (or the `brief` tool) failed; the texts are the protocol's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AgentError {
    #[error("unknown agent {0}")]
    Unknown(String),
    #[error("{0:?} is not an agent id (1 to 40 of a-z, 0-9 and -)")]
    BadId(String),
    #[error("the agent id dispatch is reserved")]
    Reserved,
    #[error("agent {0} already exists")]
    Exists(String),
    #[error("{} is in the way of the new agent", .0.display())]
    InTheWay(PathBuf),
    #[error("an agent's name cannot be empty")]
    EmptyName,
    #[error("agent_create needs cwd or project")]
    NeedsCwd,
    #[error("icon: {0}")]
    Icon(String),
    #[error("color must be #rrggbb, not {0:?}")]
    Color(String),
    #[error("avatar_seed must be 1 to 64 hex digits, not {0:?}")]
    AvatarSeed(String),
    #[error("unknown project {0}")]
    UnknownProject(String),
    #[error("approval_mode must be manual, auto-edit, auto or full-access, not {0:?}")]
    ApprovalMode(String),
    #[error("sandbox must be read-only, workspace-write or full-access, not {0:?}")]
    Sandbox(String),
    #[error("directories: {0} is not an absolute path")]
    DirectoryPath(String),
    #[error("directories: the mode of {path} must be ro or rw, not {mode:?}")]
    DirectoryMode { path: String, mode: String },
    #[error("command_rules: a prefix cannot be empty")]
    RulePrefix,
    #[error("command_rules: the action of {prefix:?} must be allow, ask or forbid, not {action:?}")]
    RuleAction { prefix: String, action: String },
    #[error("unknown engine `{0}` (expected jucode, claude or codex)")]
    Engine(String),
    #[error("an agent cannot run on the acp engine (it runs a program the client names)")]
    AcpEngine,
    #[error("agent {0} has a session in a turn; wait for it to finish or interrupt it first")]
    Running(String),
    #[error(
        "{0:?} is not a memory file: name it memory/<name>.md (or <name>.md), the name of letters, digits, - and _"
    )]
    MemoryName(String),
    #[error("agent {agent} has no memory file {file}")]
    NoMemory { agent: String, file: String },
    #[error("{file} is longer than {max} bytes")]
    TooLarge { file: String, max: usize },
    #[error("{0} would lie outside the agent's directory")]
    Outside(String),
    #[error("could not save the agent: {0}")]
    Save(#[from] jucode_store::StoreError),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Path(#[from] PathError),
    #[error(transparent)]
    Hub(#[from] HubError),
}

/// The reserved agent of dispatches: never listed, never created by a client.
pub(crate) const DISPATCH: &str = "dispatch";

/// The brief files, in the order `agent_get` lists them.
pub(crate) const BRIEF_FILES: [&str; 4] = ["role.md", "capabilities.md", "policy.md", "state.md"];

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
    /// The first non-empty line of `role.md`, kept so a list costs no file reads.
    pub(crate) summary: String,
}

impl Agent {
    pub(crate) fn new(id: String, dir: PathBuf, config: AgentConfig) -> Agent {
        let role = brief::read(&dir, &brief::AgentFile::Brief("role.md"))
            .ok()
            .flatten()
            .unwrap_or_default();
        Agent {
            summary: brief::first_line(&role),
            id,
            dir,
            config,
        }
    }

    /// The agent as lists show it, with `sessions` (its sessions, any order).
    pub(crate) fn info(&self, sessions: &[&SessionInfo]) -> AgentInfo {
        let c = &self.config;
        let running: Vec<String> = sessions
            .iter()
            .filter(|s| s.busy)
            .map(|s| s.session.clone())
            .collect();
        AgentInfo {
            id: self.id.clone(),
            name: c.name.clone(),
            cwd: c.cwd.display().to_string(),
            enabled: c.enabled,
            approval_mode: c.approval_mode.clone(),
            sandbox: c.sandbox.clone(),
            network: c.network,
            directories: c.directories.clone(),
            command_rules: c.command_rules.clone(),
            icon: c.icon.clone(),
            color: c.color.clone(),
            avatar_seed: c.avatar_seed.clone(),
            project: c.project.clone(),
            engine: c.engine.clone(),
            created_at: c.created_at,
            summary: self.summary.clone(),
            sessions: sessions.len(),
            busy: !running.is_empty(),
            running,
            extra: c.extra.clone(),
        }
    }
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
            if id.starts_with(ops::LEFTOVER) {
                // A create or delete cut short by a crash.
                let _ = std::fs::remove_dir_all(entry.path());
                continue;
            }
            if !is_agent_id(&id) || id == DISPATCH {
                continue;
            }
            let dir = entry.path();
            match jucode_store::read_json::<AgentConfig>(&dir.join("agent.json")) {
                Ok(Some(config)) => {
                    map.insert(id.clone(), Agent::new(id, dir, config));
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

    /// The agent or the protocol's error for an unknown one.
    pub(crate) fn known(&self, id: &str) -> Result<&Agent, AgentError> {
        self.map
            .get(id)
            .ok_or_else(|| AgentError::Unknown(id.to_string()))
    }

    /// The `agents` list: every agent (never `dispatch`) with its sessions, by id.
    pub(crate) fn event(&self, sessions: &[SessionInfo]) -> DaemonEvent {
        let mut by_agent: BTreeMap<&str, Vec<&SessionInfo>> = BTreeMap::new();
        for s in sessions {
            if let Some(agent) = s.agent.as_deref() {
                by_agent.entry(agent).or_default().push(s);
            }
        }
        DaemonEvent::Agents {
            agents: self
                .map
                .values()
                .filter(|a| a.id != DISPATCH)
                .map(|a| a.info(by_agent.get(a.id.as_str()).map_or(&[], Vec::as_slice)))
                .collect(),
        }
    }
}

impl Inner {
    /// The `agents` list as it is now.
    pub(crate) fn agents_event(&self) -> DaemonEvent {
        self.agents.event(&self.agent_run_sessions(None))
    }

    /// The sessions of `agent` (of every agent with `None`), each `busy` while it runs: while
    /// its engine is in a turn, and while a message handed to it has not begun its turn yet.
    pub(crate) fn agent_run_sessions(&self, agent: Option<&str>) -> Vec<SessionInfo> {
        let mut sessions = self.sessions.agent_sessions(agent);
        for s in &mut sessions {
            s.busy |= self.messages.runs.awaits(&s.session);
        }
        sessions
    }

    /// Sends every client the `agents` list: after any change to an agent, and whenever one of
    /// an agent's sessions starts or ends a turn or is created or closed.
    pub(crate) fn broadcast_agents(&mut self) {
        let frame = to_value(&Reply::to(None, self.agents_event()));
        self.broadcast(&frame);
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
    fn opening_reads_agents_and_clears_what_a_crash_left() {
        let home = tempfile::tempdir().unwrap();
        let root = home.path().join("agents");
        let ops = root.join("ops");
        std::fs::create_dir_all(&ops).unwrap();
        std::fs::write(ops.join("agent.json"), r#"{"name":"Ops","cwd":"/w"}"#).unwrap();
        std::fs::write(ops.join("role.md"), "# Ops role").unwrap();
        let leftover = root.join(".leftover-web-00ff");
        std::fs::create_dir_all(&leftover).unwrap();
        std::fs::write(leftover.join("agent.json"), r#"{"name":"Web","cwd":"/w"}"#).unwrap();
        let dispatch = root.join(DISPATCH);
        std::fs::create_dir_all(&dispatch).unwrap();
        std::fs::write(dispatch.join("agent.json"), r#"{"name":"D","cwd":"/w"}"#).unwrap();

        let agents = Agents::open(home.path()).unwrap();
        assert_eq!(agents.map.keys().collect::<Vec<_>>(), ["ops"]);
        assert_eq!(agents.known("ops").unwrap().summary, "Ops role");
        assert!(!leftover.exists());
        assert_eq!(
            agents.known("web").unwrap_err().to_string(),
            "unknown agent web"
        );
        let DaemonEvent::Agents { agents: list } = agents.event(&[]) else {
            panic!("not an agents list");
        };
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].sessions, 0);
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
