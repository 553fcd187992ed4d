//! Long-lived agents: their ops, the `agents` list and the replies about one agent.
//!
//! The ops only shape and bound what a client sends; what the values must be (an icon's
//! kind and size, a colour, an existing project or directory) the hub checks, so its error
//! texts name the field and the rule.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::limits::{self, TooLong};
use crate::Object;

/// Ops of [`crate::daemon::ops::Area::Agents`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AgentsOp {
    AgentList,
    AgentCreate {
        /// The new agent's id: 1 to 40 of `a-z`, `0-9`, `-`; never `dispatch`.
        agent: String,
        #[cfg_attr(feature = "schema", schemars(length(max = limits::NAME_CHARS)))]
        name: String,
        /// Its working directory; may be left out when `project` is given.
        #[serde(default)]
        cwd: Option<String>,
        /// The text of `role.md`.
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(length(max = limits::BRIEF_BYTES)))]
        role: String,
        #[serde(default)]
        icon: Option<Value>,
        #[serde(default)]
        color: Option<String>,
        #[serde(default)]
        avatar_seed: Option<String>,
        #[serde(default)]
        project: Option<String>,
        /// The engine its sessions run on (`jucode` when absent). Beyond the spec.
        #[serde(default)]
        engine: Option<String>,
    },
    AgentGet {
        agent: String,
    },
    AgentUpdate {
        agent: String,
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(length(max = limits::NAME_CHARS)))]
        name: Option<String>,
        /// Rewrites `role.md`.
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(length(max = limits::BRIEF_BYTES)))]
        role: Option<String>,
        #[serde(default)]
        enabled: Option<bool>,
        #[serde(default)]
        approval_mode: Option<String>,
        #[serde(default)]
        sandbox: Option<String>,
        #[serde(default)]
        network: Option<bool>,
        #[serde(default)]
        directories: Option<Vec<AgentDirectory>>,
        #[serde(default)]
        command_rules: Option<Vec<CommandRule>>,
        /// `null` removes the icon; leaving it out keeps it.
        #[serde(default, deserialize_with = "nullable")]
        icon: Option<Option<Value>>,
        /// `null` removes the colour; leaving it out keeps it.
        #[serde(default, deserialize_with = "nullable")]
        color: Option<Option<String>>,
        #[serde(default)]
        avatar_seed: Option<String>,
        /// `null` takes the agent out of its project (its `cwd` stays); leaving it out keeps it.
        #[serde(default, deserialize_with = "nullable")]
        project: Option<Option<String>>,
        /// `null` goes back to the default engine; leaving it out keeps it. Beyond the spec.
        #[serde(default, deserialize_with = "nullable")]
        engine: Option<Option<String>>,
    },
    AgentDelete {
        agent: String,
    },
    AgentMemoryRead {
        agent: String,
        /// `deploy.md` or `memory/deploy.md`.
        file: String,
    },
}

/// Reads a field that may be absent (`None`), `null` (`Some(None)`) or a value.
fn nullable<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

impl AgentsOp {
    pub(crate) fn check_limits(&self) -> Result<(), TooLong> {
        use limits::{BRIEF_BYTES, ICON_BYTES, NAME_CHARS, PATH_BYTES, bytes, chars, json};
        match self {
            AgentsOp::AgentCreate {
                name,
                cwd,
                role,
                icon,
                ..
            } => {
                chars("name", Some(name), NAME_CHARS)?;
                bytes("cwd", cwd.as_deref(), PATH_BYTES)?;
                bytes("role", Some(role), BRIEF_BYTES)?;
                json("icon", icon.as_ref(), ICON_BYTES)
            }
            AgentsOp::AgentUpdate {
                name,
                role,
                icon,
                directories,
                ..
            } => {
                chars("name", name.as_deref(), NAME_CHARS)?;
                bytes("role", role.as_deref(), BRIEF_BYTES)?;
                json("icon", icon.as_ref().and_then(Option::as_ref), ICON_BYTES)?;
                for d in directories.iter().flatten() {
                    bytes("directories.path", Some(&d.path), PATH_BYTES)?;
                }
                Ok(())
            }
            AgentsOp::AgentMemoryRead { file, .. } => bytes("file", Some(file), PATH_BYTES),
            _ => Ok(()),
        }
    }
}

/// A directory outside `cwd` an agent may read (`ro`) or read and write (`rw`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentDirectory {
    /// An absolute path.
    pub path: String,
    /// `ro` or `rw`.
    pub mode: String,
}

/// What an escalated command starting with `prefix` may do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CommandRule {
    pub prefix: String,
    /// `allow`, `ask` or `forbid`.
    pub action: String,
}

/// One agent as the `agents` list (and `agent_get`) shows it: its `agent.json` settings with
/// its id, and what the daemon knows of its sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentInfo {
    pub id: String,
    pub name: String,
    pub cwd: String,
    pub enabled: bool,
    pub approval_mode: String,
    pub sandbox: String,
    pub network: bool,
    pub directories: Vec<AgentDirectory>,
    pub command_rules: Vec<CommandRule>,
    /// `{kind: builtin, id}`, `{kind: slug, value}` or `{kind: svg, markup}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<Value>,
    /// `#rrggbb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avatar_seed: Option<String>,
    /// A project id from `workspaces`, or null.
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    pub created_at: u64,
    /// The first non-empty line of `role.md`, without leading `#`.
    pub summary: String,
    /// How many sessions it has (open or not).
    pub sessions: usize,
    /// Whether one of its sessions is in a turn.
    pub busy: bool,
    /// The sessions in a turn.
    pub running: Vec<String>,
    /// Settings this daemon does not know, kept as they were in `agent.json`.
    #[serde(flatten)]
    pub extra: Object,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn update(fields: Value) -> AgentsOp {
        let mut fields = fields;
        fields["op"] = json!("agent_update");
        fields["agent"] = json!("ops");
        serde_json::from_value(fields).unwrap()
    }

    #[test]
    fn an_update_tells_a_null_from_a_field_left_out() {
        let AgentsOp::AgentUpdate {
            icon,
            color,
            project,
            engine,
            ..
        } = update(json!({"color": null, "project": "p1"}))
        else {
            panic!("not an update");
        };
        assert_eq!(icon, None);
        assert_eq!(color, Some(None));
        assert_eq!(project, Some(Some("p1".into())));
        assert_eq!(engine, None);
    }

    #[test]
    fn a_role_over_the_brief_limit_is_refused_by_name() {
        let op = update(json!({"role": "x".repeat(limits::BRIEF_BYTES + 1)}));
        let err = op.check_limits().unwrap_err();
        assert_eq!(err.to_string(), "role is longer than 65536 bytes");
    }
}
