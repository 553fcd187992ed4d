//! A long-lived agent's Claude Code and Codex sessions get the agent tools' MCP server and the
//! agent's prompt for their own process only: the exact flags, configuration and frames the
//! fake CLIs were started with and read (`FAKE_ENGINE_LOG`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use jucode_adapters::codex::CodexEngine;
use jucode_engine::agent::{AgentHost, AgentSeat, McpLaunch, ToolDef, ToolFuture};
use jucode_engine::{EngineFactory, EngineHandle, StartSpec};
use serde_json::{Value, json};

const SESSION: &str = "0e6f4b1a-2c3d-4e5f-8a9b-0c1d2e3f4a5b";
const CAPABILITY: &str = "c0ffee0123456789c0ffee0123456789c0ffee0123456789c0ffee0123456789";
const PROMPT: &str = "You are the agent scout.\nYour brief: watch the build.";

/// The hub's side as an adapter sees it: a prompt and an MCP server launch.
struct Host {
    mcp: Option<McpLaunch>,
}

impl AgentHost for Host {
    fn prompt(&self) -> String {
        PROMPT.to_string()
    }
    fn tools(&self) -> Vec<ToolDef> {
        Vec::new()
    }
    fn call(&self, name: &str, _args: Value) -> ToolFuture {
        let name = name.to_string();
        Box::pin(async move { Err(format!("not in process: {name}")) })
    }
    fn mcp_server(&self) -> Option<McpLaunch> {
        self.mcp.clone()
    }
}

fn launch() -> McpLaunch {
    McpLaunch {
        name: "jucode".into(),
        program: PathBuf::from("/opt/jucode/jucode-daemon"),
        args: vec!["agent-mcp".into()],
        env: BTreeMap::from([
            ("JUCODE_AGENT_URL".into(), "http://127.0.0.1:7788".into()),
            ("JUCODE_AGENT_CAPABILITY".into(), CAPABILITY.into()),
        ]),
    }
}

fn start_agent(
    factory: &dyn EngineFactory,
    cwd: &Path,
    options: Value,
    mcp: Option<McpLaunch>,
) -> EngineHandle {
    factory
        .start(StartSpec {
            session: SESSION.into(),
            cwd: cwd.to_path_buf(),
            extra_dirs: Vec::new(),
            options: obj(options),
            resume: false,
            agent: Some(AgentSeat {
                agent: "scout".into(),
                host: Arc::new(Host { mcp }),
            }),
        })
        .expect("the engine starts")
}

/// The fake's log: what it was started with, then the frames it read.
fn read_log(path: &Path) -> (Value, Vec<Value>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let start: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    let frames = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
    (start, frames)
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn args_of(start: &Value) -> Vec<String> {
    start["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn claude_code_gets_the_server_in_its_own_mcp_config_and_the_prompt_appended() {
    let env = ClaudeSandbox::new();
    let log = env.dir.path().join("claude.log");
    let mut options = env.fake_claude("claude-code-2.1.332-print-3turns.jsonl");
    options["env"]["FAKE_ENGINE_LOG"] = json!(log.display().to_string());
    let mut h = start_agent(&env.engine, &env.cwd, options, Some(launch()));
    until(&mut h, "command_list").await;

    let (start, _) = read_log(&log);
    let args = args_of(&start);
    let files = env.dir.path().join("jucode/daemon/agent-mcp");
    let config = files.join(format!("{SESSION}.mcp.json"));
    let prompt = files.join(format!("{SESSION}.prompt.md"));
    let tail: Vec<String> = args[args.len() - 3..].to_vec();
    assert_eq!(
        tail,
        [
            format!("--mcp-config={}", config.display()),
            format!("--append-system-prompt-file={}", prompt.display()),
            "--system-prompt-snapshot=off".to_string(),
        ],
        "{args:?}"
    );
    // Only that file names the server: no --strict-mcp-config (the user's own servers stay),
    // and the capability is on no command line.
    assert!(!args.iter().any(|a| a.contains("strict-mcp")), "{args:?}");
    assert!(!args.iter().any(|a| a.contains(CAPABILITY)), "{args:?}");
    assert_eq!(
        start["env"],
        json!({}),
        "nothing in Claude Code's own environment"
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(
        written,
        json!({"mcpServers": {"jucode": {
            "type": "stdio",
            "command": "/opt/jucode/jucode-daemon",
            "args": ["agent-mcp"],
            "env": {"JUCODE_AGENT_CAPABILITY": CAPABILITY,
                    "JUCODE_AGENT_URL": "http://127.0.0.1:7788"},
            "alwaysLoad": true,
        }}})
    );
    assert_eq!(std::fs::read_to_string(&prompt).unwrap(), PROMPT);
    assert_eq!(mode(&config), 0o600);
    assert_eq!(mode(&prompt), 0o600);
    assert_eq!(mode(&files), 0o700);

    close(h).await;
    assert!(
        !config.exists() && !prompt.exists(),
        "removed when the CLI is gone"
    );
}

#[tokio::test]
async fn an_agent_without_a_server_starts_claude_code_as_a_plain_session() {
    let env = ClaudeSandbox::new();
    let log = env.dir.path().join("claude.log");
    let mut options = env.fake_claude("claude-code-2.1.332-print-3turns.jsonl");
    options["env"]["FAKE_ENGINE_LOG"] = json!(log.display().to_string());
    let mut h = start_agent(&env.engine, &env.cwd, options, None);
    until(&mut h, "command_list").await;
    let args = args_of(&read_log(&log).0);
    assert!(
        !args
            .iter()
            .any(|a| a.starts_with("--mcp-config") || a.contains("system-prompt")),
        "{args:?}"
    );
    close(h).await;
}

#[tokio::test]
async fn codex_gets_the_server_in_config_overrides_and_the_prompt_as_developer_instructions() {
    let env = Sandbox::new();
    let engine = CodexEngine::new(env.config());
    let log = env.dir.path().join("codex.log");
    let mut options = fake_codex("codex-0.171.0-app-server-approve.jsonl");
    options["env"]["FAKE_ENGINE_LOG"] = json!(log.display().to_string());
    let mut h = start_agent(&engine, &env.cwd, options, Some(launch()));
    until(&mut h, "approval_mode").await;

    let (start, frames) = read_log(&log);
    assert_eq!(
        args_of(&start),
        [
            "app-server",
            "-c",
            r#"mcp_servers.jucode.command="/opt/jucode/jucode-daemon""#,
            "-c",
            r#"mcp_servers.jucode.args=["agent-mcp"]"#,
            "-c",
            r#"mcp_servers.jucode.env_vars=["JUCODE_AGENT_CAPABILITY","JUCODE_AGENT_URL"]"#,
        ]
    );
    // The variables themselves are in Codex's environment, which it forwards by name.
    assert_eq!(
        start["env"],
        json!({"JUCODE_AGENT_CAPABILITY": CAPABILITY,
               "JUCODE_AGENT_URL": "http://127.0.0.1:7788"})
    );
    let thread_start = frames
        .iter()
        .find(|f| f["method"] == "thread/start")
        .expect("thread/start");
    assert_eq!(thread_start["params"]["developerInstructions"], PROMPT);
    close(h).await;
}

#[tokio::test]
async fn a_plain_codex_session_gets_no_overrides() {
    let env = Sandbox::new();
    let engine = CodexEngine::new(env.config());
    let log = env.dir.path().join("codex.log");
    let mut options = fake_codex("codex-0.171.0-app-server-approve.jsonl");
    options["env"]["FAKE_ENGINE_LOG"] = json!(log.display().to_string());
    let mut h = start(&engine, SESSION, &env.cwd, options, false);
    until(&mut h, "approval_mode").await;
    let (start, frames) = read_log(&log);
    assert_eq!(args_of(&start), ["app-server"]);
    let thread_start = frames
        .iter()
        .find(|f| f["method"] == "thread/start")
        .unwrap();
    assert!(
        thread_start["params"]
            .get("developerInstructions")
            .is_none()
    );
    close(h).await;
}
