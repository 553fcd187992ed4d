//! Workspaces and their projects, saved whole in `workspaces.json` with a save counter.

use std::path::{Path, PathBuf};

use jucode_clock::SharedClock;
use jucode_protocol::daemon::{DaemonEvent, Project, Workspace, WorkspacesOp};
use jucode_store::{StateDir, StoreError};
use serde::{Deserialize, Serialize};

use crate::HubError;
use crate::cx::OpCx;
use crate::error::{IoError, OpError};
use crate::paths::{self, PathError};
use crate::util::new_id;

/// Why a workspace op failed; the texts are the protocol's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkspaceError {
    #[error(transparent)]
    Save(#[from] StoreError),
    #[error(
        "workspaces were changed by another client (rev is {current}, not {sent}); reload them and try again"
    )]
    Stale { current: u64, sent: u64 },
    #[error("unknown workspace {0}")]
    UnknownWorkspace(String),
    #[error("unknown project {project} in workspace {workspace}")]
    UnknownProject { workspace: String, project: String },
    #[error("{path} is already a project of {workspace}")]
    AlreadyAProject { path: String, workspace: String },
    #[error("workspace ids must be unique and not empty ({0:?})")]
    WorkspaceId(String),
    #[error("project ids must be unique and not empty ({0:?})")]
    ProjectId(String),
    #[error("project {0}: path must be absolute")]
    RelativePath(String),
    #[error("project {project}: dirs must be absolute paths ({dir})")]
    RelativeDir { project: String, dir: String },
    #[error("{0:?} is not a folder name")]
    FolderName(String),
    #[error("new projects are made under {}", .0.display())]
    OutsideHome(PathBuf),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("git init: {0}")]
    GitInit(std::io::Error),
    #[error("git init failed ({0})")]
    GitInitFailed(std::process::ExitStatus),
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct File {
    rev: u64,
    workspaces: Vec<Workspace>,
}

pub(crate) struct Workspaces {
    clock: SharedClock,
    path: PathBuf,
    file: File,
}

impl Workspaces {
    pub(crate) fn open(store: &StateDir, clock: SharedClock) -> Result<Workspaces, HubError> {
        let path = store.path("workspaces.json");
        let file = jucode_store::read_json(&path)?.unwrap_or_default();
        Ok(Workspaces { clock, path, file })
    }

    pub(crate) fn event(&self) -> DaemonEvent {
        DaemonEvent::Workspaces {
            rev: self.file.rev,
            workspaces: self.file.workspaces.clone(),
        }
    }

    /// The project with id `id`, in whichever workspace.
    pub(crate) fn project(&self, id: &str) -> Option<&Project> {
        self.file
            .workspaces
            .iter()
            .flat_map(|w| &w.projects)
            .find(|p| p.id == id)
    }

    /// The id of the project whose main directory is `dir`.
    pub(crate) fn project_at(&self, dir: &Path) -> Option<String> {
        self.file
            .workspaces
            .iter()
            .flat_map(|w| &w.projects)
            .find(|p| Path::new(&p.path) == dir)
            .map(|p| p.id.clone())
    }

    /// Every project, workspace by workspace.
    pub(crate) fn projects(&self) -> Vec<&Project> {
        self.file
            .workspaces
            .iter()
            .flat_map(|w| &w.projects)
            .collect()
    }

    /// Whether any workspace has a project.
    pub(crate) fn has_projects(&self) -> bool {
        self.file.workspaces.iter().any(|w| !w.projects.is_empty())
    }

    /// Every project's directory and its extra directories, as saved.
    pub(crate) fn project_dirs(&self) -> Vec<PathBuf> {
        self.file
            .workspaces
            .iter()
            .flat_map(|w| &w.projects)
            .flat_map(|p| std::iter::once(&p.path).chain(p.dirs.iter().flatten()))
            .map(PathBuf::from)
            .collect()
    }

    /// The extra directories of the project whose main directory is `cwd`.
    pub(crate) fn dirs_for(&self, cwd: &Path) -> Vec<PathBuf> {
        self.file
            .workspaces
            .iter()
            .flat_map(|w| &w.projects)
            .filter(|p| Path::new(&p.path) == cwd)
            .flat_map(|p| p.dirs.iter().flatten())
            .map(PathBuf::from)
            .filter(|d| d.is_dir())
            .collect()
    }

    /// Saves `next` as the new list (fsynced) and bumps `rev`.
    fn save(&mut self, workspaces: Vec<Workspace>) -> Result<(), WorkspaceError> {
        let next = File {
            rev: self.file.rev + 1,
            workspaces,
        };
        jucode_store::write_json_atomic(&self.path, &next)?;
        self.file = next;
        Ok(())
    }

    pub(crate) fn set(
        &mut self,
        rev: u64,
        workspaces: Vec<Workspace>,
    ) -> Result<(), WorkspaceError> {
        if rev != self.file.rev {
            return Err(WorkspaceError::Stale {
                current: self.file.rev,
                sent: rev,
            });
        }
        validate(&workspaces)?;
        self.save(workspaces)
    }

    pub(crate) fn add_project(
        &mut self,
        path: &Path,
        workspace: Option<String>,
        project_name: Option<String>,
        workspace_name: Option<String>,
    ) -> Result<(), WorkspaceError> {
        let mut list = self.file.workspaces.clone();
        if list.is_empty() {
            list.push(Workspace {
                id: new_id("w", self.clock.now_ms()),
                name: workspace_name
                    .filter(|n| !n.trim().is_empty())
                    .unwrap_or_else(|| "Default".into()),
                is_default: Some(true),
                projects: vec![],
                extra: Default::default(),
            });
        }
        let index = match &workspace {
            Some(id) => list
                .iter()
                .position(|w| &w.id == id)
                .ok_or_else(|| WorkspaceError::UnknownWorkspace(id.clone()))?,
            None => list
                .iter()
                .position(|w| w.is_default == Some(true))
                .unwrap_or(0),
        };
        let path_str = path.display().to_string();
        let target = &mut list[index];
        if target.projects.iter().any(|p| p.path == path_str) {
            return Err(WorkspaceError::AlreadyAProject {
                path: path_str,
                workspace: target.name.clone(),
            });
        }
        let name = project_name
            .filter(|n| !n.trim().is_empty())
            .or_else(|| path.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| path_str.clone());
        target.projects.push(Project {
            id: new_id("p", self.clock.now_ms()),
            name,
            path: path_str,
            dirs: None,
            extra: Default::default(),
        });
        self.save(list)
    }

    pub(crate) fn remove_project(
        &mut self,
        workspace: &str,
        project: &str,
    ) -> Result<(), WorkspaceError> {
        let mut list = self.file.workspaces.clone();
        let w = list
            .iter_mut()
            .find(|w| w.id == workspace)
            .ok_or_else(|| WorkspaceError::UnknownWorkspace(workspace.to_string()))?;
        let before = w.projects.len();
        w.projects.retain(|p| p.id != project);
        if w.projects.len() == before {
            return Err(WorkspaceError::UnknownProject {
                workspace: workspace.to_string(),
                project: project.to_string(),
            });
        }
        self.save(list)
    }
}

fn validate(workspaces: &[Workspace]) -> Result<(), WorkspaceError> {
    let mut ids = std::collections::HashSet::new();
    for w in workspaces {
        if w.id.is_empty() || !ids.insert(w.id.as_str()) {
            return Err(WorkspaceError::WorkspaceId(w.id.clone()));
        }
        for p in &w.projects {
            if p.id.is_empty() || !ids.insert(p.id.as_str()) {
                return Err(WorkspaceError::ProjectId(p.id.clone()));
            }
            if !Path::new(&p.path).is_absolute() {
                return Err(WorkspaceError::RelativePath(p.id.clone()));
            }
            for dir in p.dirs.iter().flatten() {
                if !Path::new(dir).is_absolute() {
                    return Err(WorkspaceError::RelativeDir {
                        project: p.id.clone(),
                        dir: dir.clone(),
                    });
                }
            }
        }
    }
    Ok(())
}

/// A change to apply under the lock, after the slow checks ran outside it.
type Change = Box<dyn FnOnce(&mut Workspaces) -> Result<(), WorkspaceError> + Send>;

/// Answers the workspace ops. A change is saved first; then the sender gets the new list as
/// its reply and every other client the same list as a broadcast.
pub(crate) async fn handle(cx: &OpCx<'_>, op: WorkspacesOp) -> Result<(), OpError> {
    let home = &cx.hub.config.user_home;
    let change: Change = match op {
        WorkspacesOp::Workspaces => {
            let event = cx.hub.lock().workspaces.event();
            cx.reply(event);
            return Ok(());
        }
        WorkspacesOp::WorkspacesSet { rev, workspaces } => {
            Box::new(move |w| w.set(rev, workspaces))
        }
        WorkspacesOp::ProjectAdd {
            path,
            workspace,
            project_name,
            workspace_name,
        } => {
            let path = paths::resolve_dir(&path, home)?;
            Box::new(move |w| w.add_project(&path, workspace, project_name, workspace_name))
        }
        WorkspacesOp::ProjectCreate {
            parent,
            name,
            git_init,
            workspace,
            workspace_name,
        } => {
            let path = make_project_dir(home, &parent, &name, git_init).await?;
            Box::new(move |w| w.add_project(&path, workspace, Some(name), workspace_name))
        }
        WorkspacesOp::ProjectRemove { workspace, project } => {
            Box::new(move |w| w.remove_project(&workspace, &project))
        }
    };
    let mut inner = cx.hub.lock();
    change(&mut inner.workspaces).map_err(OpError::from)?;
    let event = inner.workspaces.event();
    cx.broadcast_to_others(&mut inner, event.clone());
    cx.reply_locked(&mut inner, event);
    Ok(())
}

/// Makes `parent/name` for `project_create` (optionally `git init`), under the user's home.
async fn make_project_dir(
    user_home: &Path,
    parent: &str,
    name: &str,
    git_init: bool,
) -> Result<PathBuf, WorkspaceError> {
    let name = name.trim();
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']) {
        return Err(WorkspaceError::FolderName(name.to_string()));
    }
    let parent = paths::resolve_dir(parent, user_home)?;
    let home = std::fs::canonicalize(user_home).unwrap_or_else(|_| user_home.to_path_buf());
    if !parent.starts_with(&home) {
        return Err(WorkspaceError::OutsideHome(home));
    }
    let path = parent.join(name);
    std::fs::create_dir(&path).map_err(IoError::at(&path))?;
    if git_init {
        let status = tokio::process::Command::new("git")
            .arg("init")
            .arg("--quiet")
            .arg(&path)
            .status()
            .await
            .map_err(WorkspaceError::GitInit)?;
        if !status.success() {
            return Err(WorkspaceError::GitInitFailed(status));
        }
    }
    Ok(path)
}
