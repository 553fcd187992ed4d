//! Workspaces and their projects, saved whole in `workspaces.json` with a save counter.

use std::path::{Path, PathBuf};

use jucode_protocol::daemon::{DaemonEvent, Project, Workspace};
use jucode_store::StateDir;
use serde::{Deserialize, Serialize};

use crate::HubError;
use crate::util::new_id;
use jucode_clock::SharedClock;

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
    fn save(&mut self, workspaces: Vec<Workspace>) -> Result<(), String> {
        let next = File {
            rev: self.file.rev + 1,
            workspaces,
        };
        jucode_store::write_json_atomic(&self.path, &next).map_err(|e| e.to_string())?;
        self.file = next;
        Ok(())
    }

    pub(crate) fn set(&mut self, rev: u64, workspaces: Vec<Workspace>) -> Result<(), String> {
        if rev != self.file.rev {
            return Err(format!(
                "workspaces were changed by another client (rev is {}, not {rev}); reload them and try again",
                self.file.rev
            ));
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
    ) -> Result<(), String> {
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
                .ok_or_else(|| format!("unknown workspace {id}"))?,
            None => list
                .iter()
                .position(|w| w.is_default == Some(true))
                .unwrap_or(0),
        };
        let path_str = path.display().to_string();
        let target = &mut list[index];
        if target.projects.iter().any(|p| p.path == path_str) {
            return Err(format!(
                "{path_str} is already a project of {}",
                target.name
            ));
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

    pub(crate) fn remove_project(&mut self, workspace: &str, project: &str) -> Result<(), String> {
        let mut list = self.file.workspaces.clone();
        let w = list
            .iter_mut()
            .find(|w| w.id == workspace)
            .ok_or_else(|| format!("unknown workspace {workspace}"))?;
        let before = w.projects.len();
        w.projects.retain(|p| p.id != project);
        if w.projects.len() == before {
            return Err(format!(
                "unknown project {project} in workspace {workspace}"
            ));
        }
        self.save(list)
    }
}

fn validate(workspaces: &[Workspace]) -> Result<(), String> {
    let mut ids = std::collections::HashSet::new();
    for w in workspaces {
        if w.id.is_empty() || !ids.insert(w.id.as_str()) {
            return Err(format!(
                "workspace ids must be unique and not empty ({:?})",
                w.id
            ));
        }
        for p in &w.projects {
            if p.id.is_empty() || !ids.insert(p.id.as_str()) {
                return Err(format!(
                    "project ids must be unique and not empty ({:?})",
                    p.id
                ));
            }
            if !Path::new(&p.path).is_absolute() {
                return Err(format!("project {}: path must be absolute", p.id));
            }
            for dir in p.dirs.iter().flatten() {
                if !Path::new(dir).is_absolute() {
                    return Err(format!(
                        "project {}: dirs must be absolute paths ({dir})",
                        p.id
                    ));
                }
            }
        }
    }
    Ok(())
}
