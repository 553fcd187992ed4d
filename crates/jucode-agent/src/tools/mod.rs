//! The model's tools: `bash`, `read`, `write`, `str_replace`, `ripgrep` (and MCP tools).
//!
//! A call is first [`prepare`]d (arguments checked, paths resolved, an edit diffed into hunks)
//! so the session can show it and decide whether it needs a person; then it is run. Paths
//! resolve against the session's cwd and never leave cwd and the project's extra directories;
//! the sandbox rules (credentials unreadable, protected directories unwritable) apply on top.

pub mod bash;
pub mod files;
pub mod search;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jucode_protocol::serve::Hunk;
use jucode_sandbox::{Mode, Policy, Sandbox};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::hunks::FileEdit;
use crate::model::{ToolCall, ToolSpec};

/// The largest tool output the model gets; longer output keeps its head and tail.
pub const OUTPUT_CAP: usize = 30_000;

/// Where a session's tools may work.
#[derive(Debug, Clone)]
pub struct ToolEnv {
    /// The session's directory, resolved.
    pub cwd: PathBuf,
    /// cwd and the extra directories that exist, resolved.
    pub roots: Vec<PathBuf>,
    /// The sandbox rules of this session (mode workspace-write unless configured otherwise).
    pub policy: Policy,
    /// bubblewrap, or why there is none.
    pub sandbox: Result<Arc<Sandbox>, String>,
    pub bash_timeout_ms: u64,
    /// Where command timeouts read time.
    pub clock: jucode_clock::SharedClock,
}

impl ToolEnv {
    /// Resolves a path the model gave for reading.
    pub fn read_path(&self, raw: &str) -> Result<PathBuf, String> {
        let path = self.within_roots(raw)?;
        jucode_sandbox::checked_read_path(&self.policy, &path).map_err(|e| e.to_string())
    }

    /// Resolves a path the model gave for writing.
    pub fn write_path(&self, raw: &str) -> Result<PathBuf, String> {
        let path = self.within_roots(raw)?;
        // File tools write like workspace-write unless the session is read-only: the roots
        // were checked above, and .git/.jucode/.agents, read-only directories and credentials
        // stay off limits.
        let mut policy = self.policy.clone();
        if policy.mode != Mode::ReadOnly {
            policy.mode = Mode::WorkspaceWrite;
        }
        policy.writable = self.roots.clone();
        jucode_sandbox::checked_write_path(&policy, &path).map_err(|e| e.to_string())
    }

    fn within_roots(&self, raw: &str) -> Result<PathBuf, String> {
        let resolved = resolve(&self.cwd, &self.roots, raw)?;
        Ok(resolved)
    }

    /// How a path is shown: relative to cwd when inside it.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.cwd) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
            _ => path.display().to_string(),
        }
    }
}

/// Resolves `raw` (relative to `cwd`, symlinks followed) and checks it lies in one of `roots`.
pub fn resolve(cwd: &Path, roots: &[PathBuf], raw: &str) -> Result<PathBuf, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err("the path is empty".into());
    }
    let resolved = jucode_sandbox::resolve_path(cwd, Path::new(raw)).map_err(|e| e.to_string())?;
    if roots.iter().any(|root| resolved.starts_with(root)) {
        Ok(resolved)
    } else {
        Err(format!(
            "{raw} is outside this session's directories ({})",
            roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

/// How much a call may do, which decides whether it needs a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Reads only: never asks.
    Read,
    /// Changes files inside the workspace.
    Edit,
    /// A shell command inside the sandbox.
    Command,
    /// A shell command that leaves the sandbox (`escalate: true`).
    Escalation,
    /// An MCP server's tool: the engine cannot tell what it does.
    External,
    /// One of the agent tools the hub serves (messages, timers, brief…): never asks.
    Agent,
}

/// A checked call, ready to show and to run.
#[derive(Debug, Clone)]
pub enum Prepared {
    Bash(bash::BashCall),
    Read(files::ReadCall),
    Edit(files::EditCall),
    Search(Box<search::SearchCall>),
    Mcp {
        name: String,
        arguments: Value,
    },
    /// An agent tool, run by the session's [`jucode_engine::agent::AgentHost`].
    Agent {
        name: String,
        arguments: Value,
    },
}

impl Prepared {
    pub fn kind(&self) -> Kind {
        match self {
            Prepared::Bash(b) if b.escalate => Kind::Escalation,
            Prepared::Bash(_) => Kind::Command,
            Prepared::Read(_) | Prepared::Search(_) => Kind::Read,
            Prepared::Edit(_) => Kind::Edit,
            Prepared::Mcp { .. } => Kind::External,
            Prepared::Agent { .. } => Kind::Agent,
        }
    }

    /// One line a person reads to decide.
    pub fn summary(&self) -> String {
        match self {
            Prepared::Bash(b) => match &b.justification {
                Some(why) if b.escalate => format!("{} (outside the sandbox: {why})", b.command),
                _ => b.command.clone(),
            },
            Prepared::Read(r) => format!("read {}", r.display),
            Prepared::Edit(e) => match e.created {
                true => format!("create {}", e.display),
                false => format!("edit {}", e.display),
            },
            Prepared::Search(s) => s.summary(),
            Prepared::Mcp { name, arguments } | Prepared::Agent { name, arguments } => {
                format!("{name} {}", crate::model::clip(&arguments.to_string(), 200))
            }
        }
    }

    pub fn hunks(&self) -> Option<Vec<Hunk>> {
        match self {
            Prepared::Edit(e) => Some(e.edit.hunks.clone()),
            _ => None,
        }
    }

    pub fn edit(&self) -> Option<&FileEdit> {
        match self {
            Prepared::Edit(e) => Some(&e.edit),
            _ => None,
        }
    }
}

fn args<T: DeserializeOwned>(call: &ToolCall) -> Result<T, String> {
    let text = if call.arguments.trim().is_empty() {
        "{}"
    } else {
        call.arguments.as_str()
    };
    serde_json::from_str(text).map_err(|e| format!("invalid arguments for {}: {e}", call.name))
}

/// The built-in tools' names: they come first, so no agent or MCP tool can take one.
pub const BUILTIN: [&str; 5] = ["bash", "read", "write", "str_replace", "ripgrep"];

/// Whose tool a name is, when it is not a built-in one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Agent,
    Mcp,
}

/// Checks a call's arguments and resolves what it touches. `owner` says whose tool a name
/// that is not built in is (an agent tool's or an MCP server's), `None` when nobody's.
pub fn prepare(
    call: &ToolCall,
    env: &ToolEnv,
    owner: impl Fn(&str) -> Option<Owner>,
) -> Result<Prepared, String> {
    match call.name.as_str() {
        "bash" => bash::prepare(args(call)?, env).map(Prepared::Bash),
        "read" => files::prepare_read(args(call)?, env).map(Prepared::Read),
        "write" => files::prepare_write(args(call)?, env).map(Prepared::Edit),
        "str_replace" => files::prepare_replace(args(call)?, env).map(Prepared::Edit),
        "ripgrep" => search::prepare(args(call)?, env).map(|s| Prepared::Search(Box::new(s))),
        name => match owner(name) {
            Some(owner) => {
                let arguments: Value = args(call)?;
                if !arguments.is_object() {
                    return Err(format!("arguments for {name} must be a JSON object"));
                }
                let name = name.to_string();
                Ok(match owner {
                    Owner::Agent => Prepared::Agent { name, arguments },
                    Owner::Mcp => Prepared::Mcp { name, arguments },
                })
            }
            None => Err(format!(
                "unknown tool {name} (available: bash, read, write, str_replace, ripgrep)"
            )),
        },
    }
}

/// The built-in tools as the model sees them.
pub fn specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "bash".into(),
            description: "Run a shell command (bash -c) in the session's directory. It runs in a sandbox: the workspace is writable, the network follows the session's setting, credentials are hidden. A command that must leave the sandbox (commit to git, write elsewhere) sets escalate: true with a justification; it then needs approval.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line."},
                    "timeout_ms": {"type": "integer", "description": "Kill the command after this many milliseconds (at most 600000)."},
                    "escalate": {"type": "boolean", "description": "Run outside the sandbox (needs approval)."},
                    "justification": {"type": "string", "description": "Why the command must leave the sandbox."}
                },
                "required": ["command"]
            }),
        },
        ToolSpec {
            name: "read".into(),
            description: "Read a text file, with line numbers.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "offset": {"type": "integer", "description": "First line to show (1-based)."},
                    "limit": {"type": "integer", "description": "How many lines to show (default 2000)."}
                },
                "required": ["path"]
            }),
        },
        ToolSpec {
            name: "write".into(),
            description: "Create or overwrite a file with the given content.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"}
                },
                "required": ["path", "content"]
            }),
        },
        ToolSpec {
            name: "str_replace".into(),
            description: "Replace text in a file. old_str must occur exactly once unless replace_all is true.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "old_str": {"type": "string"},
                    "new_str": {"type": "string"},
                    "replace_all": {"type": "boolean"}
                },
                "required": ["path", "old_str", "new_str"]
            }),
        },
        ToolSpec {
            name: "ripgrep".into(),
            description: "Search file contents with a regular expression, or list files matching a glob, honouring .gitignore.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression to search for; omit to list files."},
                    "glob": {"type": "string", "description": "Only files whose path (relative to the search directory) matches, e.g. **/*.rs."},
                    "path": {"type": "string", "description": "Directory or file to search (default: the session's directory)."},
                    "case_insensitive": {"type": "boolean"},
                    "max_results": {"type": "integer", "description": "Default 200."}
                }
            }),
        },
    ]
}

/// Keeps the head and tail of long output, saying how much was left out.
pub fn cap_output(text: &str) -> String {
    if text.len() <= OUTPUT_CAP {
        return text.to_string();
    }
    let half = OUTPUT_CAP / 2;
    let mut head_end = half;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - half;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    format!(
        "{}\n… ({} bytes left out) …\n{}",
        &text[..head_end],
        tail_start - head_end,
        &text[tail_start..]
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn env_in(dir: &Path, extra: &[PathBuf]) -> ToolEnv {
        let cwd = std::fs::canonicalize(dir).unwrap();
        let mut roots = vec![cwd.clone()];
        roots.extend(extra.iter().map(|d| std::fs::canonicalize(d).unwrap()));
        ToolEnv {
            policy: Policy {
                mode: Mode::WorkspaceWrite,
                cwd: cwd.clone(),
                writable: roots[1..].to_vec(),
                readable: vec![],
                network: false,
                user_home: cwd.join("home"),
                jucode_home: cwd.join("home/.jucode"),
            },
            cwd,
            roots,
            sandbox: Err("no sandbox in unit tests".into()),
            bash_timeout_ms: 10_000,
            clock: jucode_clock::SystemClock::shared(),
        }
    }

    #[test]
    fn paths_stay_in_cwd_and_the_extra_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let extra = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let env = env_in(dir.path(), &[extra.path().to_path_buf()]);

        assert_eq!(env.read_path("a.txt").unwrap(), env.cwd.join("a.txt"));
        assert_eq!(
            env.read_path("./sub/../a.txt").unwrap(),
            env.cwd.join("a.txt")
        );
        let in_extra = extra.path().join("x.rs");
        assert!(env.write_path(in_extra.to_str().unwrap()).is_ok());
        for bad in [
            "../escape",
            "/etc/passwd",
            "link/secret",
            "",
            outside.path().to_str().unwrap(),
        ] {
            assert!(env.read_path(bad).is_err(), "{bad} was allowed");
        }
        assert!(env.write_path(".git/config").is_err());
        assert_eq!(env.display(&env.cwd.join("src/a.rs")), "src/a.rs");
    }

    #[test]
    fn read_only_directories_and_sessions_refuse_file_writes() {
        let dir = tempfile::tempdir().unwrap();
        let ro = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("vendor")).unwrap();
        let mut env = env_in(dir.path(), &[]);
        let ro = std::fs::canonicalize(ro.path()).unwrap();
        env.roots.push(ro.clone());
        env.policy.readable = vec![ro.clone(), env.cwd.join("vendor")];
        // Readable, never writable: outside cwd and inside it.
        assert!(env.read_path(ro.join("a").to_str().unwrap()).is_ok());
        let err = env.write_path(ro.join("a").to_str().unwrap()).unwrap_err();
        assert!(err.contains("read-only directory"), "{err}");
        assert!(env.write_path("vendor/x").is_err());
        assert!(env.write_path("src/x").is_ok());
        env.policy.mode = Mode::ReadOnly;
        let err = env.write_path("src/x").unwrap_err();
        assert!(err.contains("read-only"), "{err}");
        env.policy.mode = Mode::FullAccess;
        assert!(env.write_path("src/x").is_ok());
        assert!(env.write_path(".git/config").is_err());
    }

    #[test]
    fn unknown_tools_and_bad_arguments_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_in(dir.path(), &[]);
        let call = |name: &str, args: &str| ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: args.into(),
        };
        assert!(
            prepare(&call("nope", "{}"), &env, |_| None)
                .unwrap_err()
                .contains("unknown tool")
        );
        assert!(
            prepare(&call("bash", "{\"cmd\":1}"), &env, |_| None)
                .unwrap_err()
                .contains("invalid arguments")
        );
        let owner = |n: &str| match n {
            "srv__t" => Some(Owner::Mcp),
            "timer" | "bash" => Some(Owner::Agent),
            _ => None,
        };
        assert!(matches!(
            prepare(&call("srv__t", "{}"), &env, owner),
            Ok(Prepared::Mcp { .. })
        ));
        let timer = prepare(&call("timer", "{\"action\":\"list\"}"), &env, owner).unwrap();
        assert_eq!(timer.kind(), Kind::Agent);
        assert!(
            prepare(&call("timer", "[1]"), &env, owner)
                .unwrap_err()
                .contains("JSON object")
        );
        // A built-in name stays the built-in tool whoever else claims it.
        let bash = prepare(&call("bash", "{\"command\":\"ls\"}"), &env, owner).unwrap();
        assert_eq!(bash.kind(), Kind::Command);
    }

    #[test]
    fn long_output_keeps_head_and_tail() {
        let text = format!("{}{}", "a".repeat(OUTPUT_CAP), "é".repeat(OUTPUT_CAP));
        let capped = cap_output(&text);
        assert!(capped.len() < OUTPUT_CAP + 100);
        assert!(capped.starts_with('a') && capped.ends_with('é'));
        assert!(capped.contains("bytes left out"));
    }
}
