//! Workspaces and their projects.

use serde::{Deserialize, Serialize};

use super::limits::{self, TooLong};
use crate::Object;

/// Ops of [`crate::daemon::ops::Area::Workspaces`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum WorkspacesOp {
    Workspaces,
    WorkspacesSet {
        rev: u64,
        workspaces: Vec<Workspace>,
    },
    ProjectAdd {
        path: String,
        #[serde(default)]
        workspace: Option<String>,
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(length(max = limits::NAME_CHARS)))]
        project_name: Option<String>,
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(length(max = limits::NAME_CHARS)))]
        workspace_name: Option<String>,
    },
    ProjectCreate {
        parent: String,
        #[cfg_attr(feature = "schema", schemars(length(max = limits::NAME_CHARS)))]
        name: String,
        #[serde(default)]
        git_init: bool,
        #[serde(default)]
        workspace: Option<String>,
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(length(max = limits::NAME_CHARS)))]
        workspace_name: Option<String>,
    },
    ProjectRemove {
        workspace: String,
        project: String,
    },
}

impl WorkspacesOp {
    /// Names are bounded; the fields kept as sent (`icon`, `color`, …) only by the message
    /// size, since clients store images there.
    pub(crate) fn check_limits(&self) -> Result<(), TooLong> {
        use limits::{NAME_CHARS, PATH_BYTES, bytes, chars};
        match self {
            WorkspacesOp::WorkspacesSet { workspaces, .. } => {
                for w in workspaces {
                    chars("workspace name", Some(&w.name), NAME_CHARS)?;
                    for p in &w.projects {
                        chars("project name", Some(&p.name), NAME_CHARS)?;
                    }
                }
                Ok(())
            }
            WorkspacesOp::ProjectAdd {
                path,
                project_name,
                workspace_name,
                ..
            } => {
                bytes("path", Some(path), PATH_BYTES)?;
                chars("project_name", project_name.as_deref(), NAME_CHARS)?;
                chars("workspace_name", workspace_name.as_deref(), NAME_CHARS)
            }
            WorkspacesOp::ProjectCreate {
                parent,
                name,
                workspace_name,
                ..
            } => {
                bytes("parent", Some(parent), PATH_BYTES)?;
                chars("name", Some(name), NAME_CHARS)?;
                chars("workspace_name", workspace_name.as_deref(), NAME_CHARS)
            }
            _ => Ok(()),
        }
    }
}

/// A workspace: a named group of projects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Workspace {
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_default: Option<bool>,
    #[serde(default)]
    pub projects: Vec<Project>,
    /// Fields kept as the client sent them (`color`, `icon`, newer ones).
    #[serde(flatten)]
    pub extra: Object,
}

/// A project: a directory (and optionally extra directories) that sessions run in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Project {
    pub id: String,
    pub name: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirs: Option<Vec<String>>,
    /// Fields kept as the client sent them (`chats`, `worktree`, `color`, `icon`, …).
    #[serde(flatten)]
    pub extra: Object,
}
