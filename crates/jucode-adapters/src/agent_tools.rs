//! The agent tools for a Claude Code or Codex session of a long-lived agent: the daemon's
//! stdio MCP server ([`AgentHost::mcp_server`]) handed to that one process through its own
//! MCP configuration, never the user's, and the agent's prompt added to its instructions.
//!
//! - Claude Code: `--mcp-config=<file>` naming the server (its environment, which carries the
//!   session's capability, stays in that 0600 file rather than on a command line), and
//!   `--append-system-prompt-file=<file>` with the prompt read at every start of the CLI.
//! - Codex: `-c mcp_servers.<name>.command/args/env_vars` overrides for that process; the
//!   variables themselves are set in the Codex process's environment and forwarded by name
//!   (`env_vars`), so the capability is never on a command line. The prompt goes in
//!   `developerInstructions` when the thread is started or resumed.
//!
//! ACP agents get nothing: an ACP agent takes MCP servers in `session/new`, but which ones
//! it honours is the agent's own business; none is offered yet (docs/DECISIONS.md).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jucode_engine::StartSpec;
use jucode_engine::agent::{AgentHost, McpLaunch};
use serde_json::{Value, json};

/// An agent session's tools: the host (for the prompt) and its MCP server.
#[derive(Clone)]
pub(crate) struct AgentTools {
    pub(crate) host: Arc<dyn AgentHost>,
    pub(crate) mcp: McpLaunch,
}

impl std::fmt::Debug for AgentTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The launch's environment holds the capability: only its name is shown.
        f.debug_struct("AgentTools")
            .field("mcp", &self.mcp.name)
            .finish_non_exhaustive()
    }
}

impl AgentTools {
    /// The tools of `spec`'s agent, when it has one and the daemon serves an MCP server.
    pub(crate) fn of(spec: &StartSpec) -> Option<AgentTools> {
        let seat = spec.agent.as_ref()?;
        let mcp = seat.host.mcp_server()?;
        Some(AgentTools {
            host: seat.host.clone(),
            mcp,
        })
    }

    /// The agent's prompt now (it may have rewritten its brief since the last start).
    pub(crate) fn prompt(&self) -> String {
        self.host.prompt()
    }
}

/// Where a session's agent files live: `<jucode home>/daemon/agent-mcp/`, private to the user.
pub(crate) fn files_dir(jucode_home: &Path) -> PathBuf {
    jucode_home.join("daemon").join("agent-mcp")
}

/// Claude Code's `--mcp-config` JSON naming the server (`alwaysLoad`: Claude Code 2.1.3xx
/// otherwise hides MCP tools until the model searches for them).
pub(crate) fn claude_mcp_config(mcp: &McpLaunch) -> Value {
    json!({
        "mcpServers": {
            mcp.name.clone(): {
                "type": "stdio",
                "command": mcp.program.display().to_string(),
                "args": mcp.args,
                "env": mcp.env,
                // The agent's own tools are always in the prompt, never deferred behind
                // Claude Code's tool search.
                "alwaysLoad": true,
            }
        }
    })
}

/// Codex's `-c` overrides naming the server (the variables are forwarded by name).
pub(crate) fn codex_overrides(mcp: &McpLaunch) -> Vec<String> {
    let key = format!("mcp_servers.{}", mcp.name);
    // A JSON string or array of strings is also a valid TOML value.
    let toml = |v: Value| v.to_string();
    let names: Vec<&String> = mcp.env.keys().collect();
    [
        format!(
            "{key}.command={}",
            toml(json!(mcp.program.display().to_string()))
        ),
        format!("{key}.args={}", toml(json!(mcp.args))),
        format!("{key}.env_vars={}", toml(json!(names))),
    ]
    .into_iter()
    .flat_map(|o| ["-c".to_string(), o])
    .collect()
}

/// Writes `contents` to `path` readable by the user only (the directory too), replacing any
/// older file atomically.
pub(crate) fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("no parent directory"))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    // tempfile makes its files 0600.
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    file.write_all(contents)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn launch() -> McpLaunch {
        McpLaunch {
            name: "jucode".into(),
            program: PathBuf::from("/opt/jucode daemon/jucode-daemon"),
            args: vec!["agent-mcp".into()],
            env: BTreeMap::from([
                ("JUCODE_AGENT_CAPABILITY".into(), "cap".into()),
                ("JUCODE_AGENT_URL".into(), "http://127.0.0.1:1".into()),
            ]),
        }
    }

    #[test]
    fn codex_overrides_name_the_server_and_forward_its_variables_by_name() {
        assert_eq!(
            codex_overrides(&launch()),
            [
                "-c",
                r#"mcp_servers.jucode.command="/opt/jucode daemon/jucode-daemon""#,
                "-c",
                r#"mcp_servers.jucode.args=["agent-mcp"]"#,
                "-c",
                r#"mcp_servers.jucode.env_vars=["JUCODE_AGENT_CAPABILITY","JUCODE_AGENT_URL"]"#,
            ]
        );
        assert!(!codex_overrides(&launch()).concat().contains("cap\""));
    }

    #[test]
    fn claude_config_names_one_stdio_server() {
        let config = claude_mcp_config(&launch());
        let server = &config["mcpServers"]["jucode"];
        assert_eq!(server["command"], "/opt/jucode daemon/jucode-daemon");
        assert_eq!(server["args"], json!(["agent-mcp"]));
        assert_eq!(server["env"]["JUCODE_AGENT_CAPABILITY"], "cap");
    }

    #[test]
    fn private_files_are_the_users_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/s.json");
        write_private(&path, b"one").unwrap();
        write_private(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }
}
