//! An agent's own files, the brief (`role.md`, `capabilities.md`, `policy.md`, `state.md`)
//! and `memory/<name>.md`, and the `brief` tool over them.
//!
//! A file is named only by a brief name or a memory name of letters, digits, `-` and `_`, and
//! its path is checked again after symlinks are resolved, so nothing outside the agent's
//! directory is ever read or written through them.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jucode_engine::agent::ToolDef;
use jucode_protocol::daemon::limits::{BRIEF_BYTES, MEMORY_BYTES};
use serde::Deserialize;
use serde_json::{Value, json};

use super::tools::{Caller, ToolError};
use super::{AgentError, BRIEF_FILES, validate};
use crate::Hub;
use crate::error::IoError;

/// A file of an agent, by what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AgentFile {
    Brief(&'static str),
    /// The `<name>` of `memory/<name>.md`.
    Memory(String),
}

impl AgentFile {
    /// A brief file's name, else a memory file (`deploy.md` or `memory/deploy.md`).
    pub(crate) fn parse(file: &str) -> Result<AgentFile, AgentError> {
        if let Some(brief) = BRIEF_FILES.iter().find(|b| **b == file) {
            return Ok(AgentFile::Brief(brief));
        }
        validate::memory_name(file).map(AgentFile::Memory)
    }

    /// The name clients and the agent see: `role.md`, `memory/deploy.md`.
    pub(crate) fn name(&self) -> String {
        match self {
            AgentFile::Brief(name) => (*name).to_string(),
            AgentFile::Memory(name) => format!("memory/{name}.md"),
        }
    }

    pub(crate) fn limit(&self) -> usize {
        match self {
            AgentFile::Brief(_) => BRIEF_BYTES,
            AgentFile::Memory(_) => MEMORY_BYTES,
        }
    }

    fn path(&self, dir: &Path) -> PathBuf {
        dir.join(self.name())
    }

    /// The directory the file must stay inside once symlinks are resolved.
    fn base(&self, dir: &Path) -> PathBuf {
        match self {
            AgentFile::Brief(_) => dir.to_path_buf(),
            AgentFile::Memory(_) => dir.join("memory"),
        }
    }
}

/// The file's text (at most its limit, cut at a character), or `None` when it does not exist
/// or resolves to somewhere outside the agent's directory.
pub(crate) fn read(dir: &Path, file: &AgentFile) -> Result<Option<String>, AgentError> {
    let Some(real) = inside(dir, &file.base(dir), &file.path(dir)) else {
        return Ok(None);
    };
    if !real.is_file() {
        return Ok(None);
    }
    read_bounded(&real, file.limit()).map(Some)
}

/// Reads at most `max` bytes of `path` as text.
pub(crate) fn read_bounded(path: &Path, max: usize) -> Result<String, AgentError> {
    let f = std::fs::File::open(path).map_err(IoError::at(path))?;
    let mut bytes = Vec::new();
    f.take(max as u64)
        .read_to_end(&mut bytes)
        .map_err(IoError::at(path))?;
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        // Cut inside a character (or not UTF-8 at all): keep what reads.
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// `path` with symlinks resolved, when it exists and lies inside `base`, itself inside `dir`.
fn inside(dir: &Path, base: &Path, path: &Path) -> Option<PathBuf> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let base = std::fs::canonicalize(base).ok()?;
    let real = std::fs::canonicalize(path).ok()?;
    (base.starts_with(&dir) && real.starts_with(&base)).then_some(real)
}

/// Replaces the file's text atomically (a symlink in its place is replaced, not followed).
pub(crate) fn write(dir: &Path, file: &AgentFile, content: &str) -> Result<(), AgentError> {
    if content.len() > file.limit() {
        return Err(AgentError::TooLarge {
            file: file.name(),
            max: file.limit(),
        });
    }
    let base = file.base(dir);
    std::fs::create_dir_all(&base).map_err(IoError::at(&base))?;
    let real_dir = std::fs::canonicalize(dir).map_err(IoError::at(dir))?;
    let real_base = std::fs::canonicalize(&base).map_err(IoError::at(&base))?;
    if !real_base.starts_with(&real_dir) {
        return Err(AgentError::Outside(file.name()));
    }
    let path = real_base.join(
        file.path(dir)
            .file_name()
            .ok_or_else(|| AgentError::Outside(file.name()))?,
    );
    jucode_store::write_atomic(&path, content.as_bytes(), 0o644)?;
    Ok(())
}

/// The agent's memory files as `memory/<name>.md`, sorted; names that could not be read
/// back (wrong characters) and anything but regular files are left out.
pub(crate) fn memory_files(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir.join("memory")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|name| validate::memory_name(name).is_ok())
        .map(|name| format!("memory/{name}"))
        .collect();
    names.sort();
    names
}

/// The first non-empty line of `text`, `#` marks and spaces trimmed.
pub(crate) fn first_line(text: &str) -> String {
    text.lines()
        .map(|l| l.trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .to_string()
}

/// The `brief` tool as the model sees it.
pub(crate) fn def() -> ToolDef {
    ToolDef {
        name: "brief".into(),
        description: "Read, rewrite or list your own brief files (role.md, capabilities.md, \
                      policy.md, state.md) and memory notes (memory/<topic>.md, topic of \
                      letters, digits, - and _). They are how you remember between sessions: \
                      keep state.md current and put lasting knowledge in memory notes. A write \
                      replaces the whole file."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["list", "read", "write"]},
                "file": {"type": "string", "description": "role.md, capabilities.md, policy.md, state.md or memory/<topic>.md"},
                "content": {"type": "string", "description": "The new text (write)."},
            },
            "required": ["action"],
        }),
    }
}

#[derive(Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
enum Args {
    List,
    Read { file: String },
    Write { file: String, content: String },
}

/// Runs the `brief` tool for the calling agent.
pub(crate) async fn call(hub: &Arc<Hub>, caller: &Caller, args: Value) -> Result<Value, ToolError> {
    let args: Args = serde_json::from_value(args).map_err(|e| {
        ToolError::Invalid(format!(
            "brief: {e} (action is list, read with file, or write with file and content)"
        ))
    })?;
    let dir = {
        let inner = hub.lock();
        inner
            .agents
            .get(&caller.agent)
            .map(|a| a.dir.clone())
            .ok_or_else(|| AgentError::Unknown(caller.agent.clone()))
            .map_err(agent_error)?
    };
    match args {
        Args::List => {
            let memory: Vec<Value> = memory_files(&dir)
                .into_iter()
                .map(|file| {
                    let text = AgentFile::parse(&file)
                        .and_then(|f| read(&dir, &f))
                        .ok()
                        .flatten()
                        .unwrap_or_default();
                    json!({"file": file, "first_line": first_line(&text)})
                })
                .collect();
            Ok(json!({"brief": BRIEF_FILES, "memory": memory}))
        }
        Args::Read { file } => {
            let file = AgentFile::parse(&file).map_err(agent_error)?;
            match (read(&dir, &file).map_err(agent_error)?, &file) {
                (Some(content), _) => Ok(json!({"file": file.name(), "content": content})),
                (None, AgentFile::Brief(_)) => Ok(json!({"file": file.name(), "content": ""})),
                (None, AgentFile::Memory(_)) => Err(agent_error(AgentError::NoMemory {
                    agent: caller.agent.clone(),
                    file: file.name(),
                })),
            }
        }
        Args::Write { file, content } => {
            let file = AgentFile::parse(&file).map_err(agent_error)?;
            write(&dir, &file, &content).map_err(agent_error)?;
            if file == AgentFile::Brief("role.md") {
                let mut inner = hub.lock();
                if let Some(agent) = inner.agents.map.get_mut(&caller.agent) {
                    agent.summary = first_line(&content);
                }
                inner.broadcast_agents();
            }
            Ok(json!({"file": file.name(), "written": content.len()}))
        }
    }
}

fn agent_error(e: AgentError) -> ToolError {
    ToolError::Op(e.into())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn files_are_read_and_written_only_inside_the_agent_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ops");
        std::fs::create_dir_all(&dir).unwrap();
        let outside = tmp.path().join("secret.md");
        std::fs::write(&outside, "secret").unwrap();

        let note = AgentFile::parse("memory/deploy.md").unwrap();
        assert_eq!(read(&dir, &note).unwrap(), None);
        write(&dir, &note, "# Deploy\nsteps").unwrap();
        assert_eq!(read(&dir, &note).unwrap().unwrap(), "# Deploy\nsteps");
        assert_eq!(memory_files(&dir), ["memory/deploy.md"]);

        // A memory file that links out reads as absent; a write replaces the link itself.
        #[cfg(unix)]
        {
            let link = AgentFile::parse("leak.md").unwrap();
            std::os::unix::fs::symlink(&outside, dir.join("memory/leak.md")).unwrap();
            assert_eq!(read(&dir, &link).unwrap(), None);
            write(&dir, &link, "mine").unwrap();
            assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret");
            assert_eq!(read(&dir, &link).unwrap().unwrap(), "mine");
        }

        let role = AgentFile::parse("role.md").unwrap();
        let big = "x".repeat(BRIEF_BYTES + 1);
        let err = write(&dir, &role, &big).unwrap_err();
        assert_eq!(err.to_string(), "role.md is longer than 65536 bytes");
        assert!(AgentFile::parse("../secret.md").is_err());
    }

    #[test]
    fn first_lines_skip_blank_lines_and_heading_marks() {
        assert_eq!(first_line("\n\n## Ops agent  \nmore"), "Ops agent");
        assert_eq!(first_line("  \n"), "");
    }
}
