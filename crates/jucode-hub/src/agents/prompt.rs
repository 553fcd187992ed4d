//! The agent's part of the system prompt, built again for every turn: who it is, its brief,
//! the index of its memory, the other agents and its project.
//!
//! Bounded: each brief file is held to its size limit, the memory index and the agent list to
//! a number of lines, each line to a number of characters.

use std::path::PathBuf;

use super::brief::{self, AgentFile};
use super::{Agent, BRIEF_FILES};
use crate::Inner;

/// At most this many memory files and other agents are listed.
const MAX_LINES: usize = 200;
/// A memory file's first line or an agent's summary is cut to this many characters.
const LINE_CHARS: usize = 160;

/// Everything the prompt says, gathered under the hub's lock (files are read after it).
pub(crate) struct PromptFacts {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    /// Other agents: id, name, summary.
    pub(crate) others: Vec<(String, String, String)>,
    pub(crate) project: Option<ProjectFacts>,
}

pub(crate) struct ProjectFacts {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) path: String,
    pub(crate) dirs: Vec<String>,
}

impl PromptFacts {
    /// The facts for `agent`, or `None` when it is gone.
    pub(crate) fn gather(inner: &Inner, agent: &str) -> Option<PromptFacts> {
        let me: &Agent = inner.agents.get(agent)?;
        let others = inner
            .agents
            .map
            .values()
            .filter(|a| a.id != me.id)
            .map(|a| (a.id.clone(), a.config.name.clone(), a.summary.clone()))
            .collect();
        let project = me.config.project.as_deref().map(|id| {
            match inner.workspaces.project(id) {
                Some(p) => ProjectFacts {
                    id: id.to_string(),
                    name: p.name.clone(),
                    path: p.path.clone(),
                    dirs: p.dirs.clone().unwrap_or_default(),
                },
                // Removed from workspaces since: still name it.
                None => ProjectFacts {
                    id: id.to_string(),
                    name: id.to_string(),
                    path: me.config.cwd.display().to_string(),
                    dirs: Vec::new(),
                },
            }
        });
        Some(PromptFacts {
            id: me.id.clone(),
            name: me.config.name.clone(),
            dir: me.dir.clone(),
            others,
            project,
        })
    }

    /// Reads the brief and the memory index and writes the prompt.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "You are {name} (agent id `{id}`), a long-lived agent of this machine's jucode \
             daemon. You are woken by messages, timers and answers to your questions, often \
             while nobody watches. What you remember between sessions is in your brief and \
             memory files; read and update them with the `brief` tool.\n",
            name = self.name,
            id = self.id,
        ));
        out.push_str("\n## Your brief\n");
        for file in BRIEF_FILES {
            let text = brief::read(&self.dir, &AgentFile::Brief(file))
                .ok()
                .flatten()
                .unwrap_or_default();
            let text = text.trim();
            out.push_str(&format!("\n### {file}\n"));
            if text.is_empty() {
                out.push_str("(empty)\n");
            } else {
                out.push_str(text);
                out.push('\n');
            }
        }
        out.push_str("\n## Your memory files\n");
        let memory = brief::memory_files(&self.dir);
        if memory.is_empty() {
            out.push_str("None yet.\n");
        }
        for file in memory.iter().take(MAX_LINES) {
            let first = AgentFile::parse(file)
                .ok()
                .and_then(|f| brief::read(&self.dir, &f).ok().flatten())
                .map(|t| brief::first_line(&t))
                .unwrap_or_default();
            out.push_str(&format!("- {file}: {}\n", cut(&first)));
        }
        if memory.len() > MAX_LINES {
            out.push_str(&format!("- … and {} more\n", memory.len() - MAX_LINES));
        }
        out.push_str("\n## Other agents (reach them with `message_agent`)\n");
        if self.others.is_empty() {
            out.push_str("None.\n");
        }
        for (id, name, summary) in self.others.iter().take(MAX_LINES) {
            out.push_str(&format!("- `{id}` ({name}): {}\n", cut(summary)));
        }
        if self.others.len() > MAX_LINES {
            out.push_str(&format!("- … and {} more\n", self.others.len() - MAX_LINES));
        }
        if let Some(p) = &self.project {
            out.push_str(&format!(
                "\n## Your project\n{} (project id `{}`), in {}\n",
                p.name, p.id, p.path
            ));
            if !p.dirs.is_empty() {
                out.push_str("Its other directories:\n");
                for dir in p.dirs.iter().take(MAX_LINES) {
                    out.push_str(&format!("- {dir}\n"));
                }
            }
        }
        out
    }
}

fn cut(line: &str) -> String {
    if line.chars().count() <= LINE_CHARS {
        return line.to_string();
    }
    let mut s: String = line.chars().take(LINE_CHARS).collect();
    s.push('…');
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use jucode_protocol::daemon::limits::BRIEF_BYTES;

    fn facts(dir: PathBuf) -> PromptFacts {
        PromptFacts {
            id: "ops".into(),
            name: "Ops".into(),
            dir,
            others: vec![("web".into(), "Web".into(), "Keeps the site up".into())],
            project: Some(ProjectFacts {
                id: "p1".into(),
                name: "app".into(),
                path: "/code/app".into(),
                dirs: vec!["/code/shared".into()],
            }),
        }
    }

    #[test]
    fn the_prompt_holds_brief_memory_agents_and_project() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        std::fs::write(dir.join("role.md"), "# Keep CI green\nDetails.").unwrap();
        std::fs::write(dir.join("state.md"), "Waiting on review.").unwrap();
        std::fs::create_dir(dir.join("memory")).unwrap();
        std::fs::write(dir.join("memory/deploy.md"), "\nHow to deploy\nstep 1").unwrap();
        let prompt = facts(dir).render();
        assert!(
            prompt.starts_with("You are Ops (agent id `ops`)"),
            "{prompt}"
        );
        assert!(prompt.contains("### role.md\n# Keep CI green\nDetails.\n"));
        assert!(prompt.contains("### capabilities.md\n(empty)\n"));
        assert!(prompt.contains("### state.md\nWaiting on review.\n"));
        assert!(prompt.contains("- memory/deploy.md: How to deploy\n"));
        assert!(!prompt.contains("step 1"), "only first lines of memory");
        assert!(prompt.contains("- `web` (Web): Keeps the site up\n"));
        assert!(prompt.contains("app (project id `p1`), in /code/app\n"));
        assert!(prompt.contains("- /code/shared\n"));
    }

    #[test]
    fn the_prompt_stays_bounded_when_files_are_huge() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        for file in BRIEF_FILES {
            std::fs::write(dir.join(file), "y".repeat(10 * BRIEF_BYTES)).unwrap();
        }
        std::fs::create_dir(dir.join("memory")).unwrap();
        for i in 0..(MAX_LINES + 5) {
            std::fs::write(dir.join(format!("memory/n{i}.md")), "z".repeat(1000)).unwrap();
        }
        let mut f = facts(dir);
        f.project = None;
        let prompt = f.render();
        let bound = 4 * BRIEF_BYTES + 2 * MAX_LINES * (LINE_CHARS * 4 + 64) + 4096;
        assert!(prompt.len() < bound, "{}", prompt.len());
        assert!(prompt.contains("- … and 5 more\n"));
        assert!(!prompt.contains("## Your project"));
    }
}
