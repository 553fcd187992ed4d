//! The agent tools' endpoint on the real daemon binary: a Claude Code agent session (the fake
//! CLI) is handed the daemon's own `agent-mcp` server with a capability of that session; the
//! endpoint and the MCP server answer it, and refuse anything else.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use jucode_testsupport::Daemon;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// A deadlock guard only: every answer comes long before.
const GUARD: Duration = Duration::from_secs(20);

fn fake_claude() -> PathBuf {
    jucode_testsupport::build_bin("fake-claude", "jucode-fake-engines").unwrap()
}

fn fixture(name: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/engines");
    root.join(name).display().to_string()
}

/// One request with these headers; the status and the JSON body.
async fn post(
    addr: SocketAddr,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: &[u8],
) -> (u16, Value) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = bearer
        .map(|b| format!("Authorization: Bearer {b}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // A body over the limit is refused before it is all read: the write may then fail.
    let _ = stream.write_all(body).await;
    let mut raw = Vec::new();
    tokio::time::timeout(GUARD, stream.read_to_end(&mut raw))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1;
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

struct Env {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Env {
    /// A home with the agent `scout`, whose sessions run on Claude Code.
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let cwd = root.join("work");
        std::fs::create_dir_all(&cwd).unwrap();
        let agent = root.join(".jucode/agents/scout");
        std::fs::create_dir_all(&agent).unwrap();
        let config = json!({"name": "Scout", "cwd": cwd, "engine": "claude"});
        std::fs::write(agent.join("agent.json"), config.to_string()).unwrap();
        Env { _dir: dir, root }
    }

    fn home(&self) -> PathBuf {
        self.root.join(".jucode")
    }

    fn options(&self) -> Value {
        json!({
            "bin": fake_claude().display().to_string(),
            "env": {
                "FAKE_ENGINE_SCRIPT": fixture("claude-code-2.1.332-print-3turns.jsonl"),
                "CLAUDE_CONFIG_DIR": self.root.join("claude-config").display().to_string(),
            },
        })
    }

    /// The MCP configuration the session's Claude Code was started with.
    fn mcp_config(&self, session: &str) -> PathBuf {
        self.home()
            .join("daemon/agent-mcp")
            .join(format!("{session}.mcp.json"))
    }
}

/// Starts an agent session; returns its id and the launch the daemon wrote for its CLI.
async fn agent_session(env: &Env, client: &mut jucode_testsupport::Client) -> (String, Value) {
    let created = client
        .request(json!({"op": "session_create", "agent": "scout", "options": env.options()}))
        .await
        .unwrap();
    assert_eq!(created["type"], "session_created", "{created}");
    let session = created["session"].as_str().unwrap().to_string();
    let text = std::fs::read_to_string(env.mcp_config(&session)).unwrap();
    let config: Value = serde_json::from_str(&text).unwrap();
    (session, config["mcpServers"]["jucode"].clone())
}

fn capability(launch: &Value) -> String {
    launch["env"]["JUCODE_AGENT_CAPABILITY"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn a_session_capability_reaches_the_hub_and_nothing_else_does() {
    let env = Env::new();
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut client = daemon.client().await.unwrap();
    let (session, launch) = agent_session(&env, &mut client).await;
    let cap = capability(&launch);
    assert_eq!(cap.len(), 64);
    assert_eq!(launch["args"], json!(["agent-mcp"]));
    assert_eq!(
        launch["env"]["JUCODE_AGENT_URL"],
        format!("http://127.0.0.1:{}", daemon.addr.port())
    );
    assert!(
        Path::new(launch["command"].as_str().unwrap()).ends_with("jucode-daemon"),
        "{launch}"
    );

    let addr = daemon.addr;
    let (status, tools) = post(addr, "POST", "/api/agent/tools", Some(&cap), b"{}").await;
    assert_eq!(status, 200, "{tools}");
    let report = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "report")
        .unwrap_or_else(|| panic!("no report tool: {tools}"));
    assert_eq!(report["input_schema"]["required"], json!(["title", "body"]));

    // The hub runs it for this session's agent and records it.
    let call = json!({"name": "report", "arguments": {"title": "nightly", "body": "all green"}});
    let (status, answer) = post(
        addr,
        "POST",
        "/api/agent/call",
        Some(&cap),
        call.to_string().as_bytes(),
    )
    .await;
    assert_eq!(
        (status, answer["ok"].clone()),
        (200, json!(true)),
        "{answer}"
    );
    let list = client.request(json!({"op": "report_list"})).await.unwrap();
    let reports = list["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 1, "{list}");
    assert_eq!(reports[0]["agent"], "scout");
    assert_eq!(reports[0]["session"], session.as_str());
    assert_eq!(reports[0]["title"], "nightly");
    let (_, answer) = post(
        addr,
        "POST",
        "/api/agent/call",
        Some(&cap),
        json!({"name": "report", "arguments": {"title": ""}})
            .to_string()
            .as_bytes(),
    )
    .await;
    assert_eq!(
        answer["ok"], false,
        "a tool's own refusal is the model's to read: {answer}"
    );
    // A call reaches the hub's tool table: this name is in no area's.
    let call = json!({"name": "no_such_tool", "arguments": {}}).to_string();
    let (status, answer) = post(addr, "POST", "/api/agent/call", Some(&cap), call.as_bytes()).await;
    assert_eq!(status, 200);
    assert_eq!(
        answer,
        json!({"ok": false, "error": "unknown tool no_such_tool"})
    );

    // Refusals, each with a clear JSON error.
    let refused = json!({"error": "unknown or revoked agent capability"});
    let token = daemon.token().unwrap();
    for bearer in ["nope", token.as_str(), &cap[..63]] {
        let (status, body) = post(
            addr,
            "POST",
            "/api/agent/call",
            Some(bearer),
            call.as_bytes(),
        )
        .await;
        assert_eq!((status, &body), (401, &refused), "{bearer}");
    }
    let (status, body) = post(addr, "POST", "/api/agent/tools", None, b"{}").await;
    assert_eq!(status, 401);
    assert!(body["error"].as_str().unwrap().contains("Bearer"), "{body}");
    let (status, _) = post(addr, "GET", "/api/agent/tools", Some(&cap), b"").await;
    assert_eq!(status, 405);
    let (status, _) = post(addr, "POST", "/api/agent/elsewhere", Some(&cap), b"{}").await;
    assert_eq!(status, 404);
    let (status, body) = post(addr, "POST", "/api/agent/call", Some(&cap), b"{not json").await;
    assert_eq!(status, 400);
    assert!(
        body["error"].as_str().unwrap().starts_with("expected JSON"),
        "{body}"
    );
    let huge = vec![b' '; 1024 * 1024 + 1];
    let (status, _) = post(addr, "POST", "/api/agent/call", Some(&cap), &huge).await;
    assert_eq!(status, 413);
    // Nothing logged holds the capability.
    assert!(!daemon.logs().iter().any(|l| l.contains(&cap)));

    // Its engine stops: the capability is revoked and the CLI's files are gone.
    client
        .send(json!({"op": "session_close", "session": session}))
        .await
        .unwrap();
    client.recv_type("session_closed", None).await.unwrap();
    let (status, body) = post(addr, "POST", "/api/agent/tools", Some(&cap), b"{}").await;
    assert_eq!((status, body), (401, refused));
    assert!(!env.mcp_config(&session).exists());
}

#[tokio::test]
async fn no_capability_outlives_the_daemon() {
    let env = Env::new();
    let mut daemon = Daemon::start(&env.home()).await.unwrap();
    let mut client = daemon.client().await.unwrap();
    let (_, launch) = agent_session(&env, &mut client).await;
    let cap = capability(&launch);
    daemon.kill9_and_wait().await.unwrap();
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let (status, _) = post(daemon.addr, "POST", "/api/agent/tools", Some(&cap), b"{}").await;
    assert_eq!(status, 401);
}

/// One JSON-RPC line to the MCP server and, for a request, its answer.
async fn rpc(
    stdin: &mut tokio::process::ChildStdin,
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    message: Value,
) -> Option<Value> {
    let line = format!("{message}\n");
    stdin.write_all(line.as_bytes()).await.unwrap();
    message.get("id")?;
    let answer = tokio::time::timeout(GUARD, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .expect("the MCP server answers");
    Some(serde_json::from_str(&answer).unwrap())
}

#[tokio::test]
async fn the_agent_mcp_subcommand_serves_the_sessions_tools_from_the_daemon() {
    let env = Env::new();
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut client = daemon.client().await.unwrap();
    let (_, launch) = agent_session(&env, &mut client).await;
    // Started as Claude Code would: the program, its args, only the launch's variables.
    let mut command = tokio::process::Command::new(launch["command"].as_str().unwrap());
    command
        .args(["agent-mcp"])
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    for (k, v) in launch["env"].as_object().unwrap() {
        command.env(k, v.as_str().unwrap());
    }
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let init = rpc(
        &mut stdin,
        &mut lines,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
    )
    .await
    .unwrap();
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );
    rpc(
        &mut stdin,
        &mut lines,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    let list = rpc(
        &mut stdin,
        &mut lines,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
    )
    .await
    .unwrap();
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"report"), "{list}");
    assert!(names.contains(&"requirements"), "{list}");
    let call = rpc(
        &mut stdin,
        &mut lines,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "no_such_tool", "arguments": {}}}),
    )
    .await
    .unwrap();
    assert_eq!(call["result"]["isError"], true, "{call}");
    assert_eq!(
        call["result"]["content"][0]["text"],
        "unknown tool no_such_tool"
    );
    drop(stdin);
    let _ = tokio::time::timeout(GUARD, child.wait()).await;
}

#[tokio::test]
async fn the_agent_mcp_subcommand_refuses_to_start_without_its_variables() {
    let daemon = jucode_testsupport::daemon_bin().unwrap();
    let out = tokio::process::Command::new(daemon)
        .arg("agent-mcp")
        .env_remove("JUCODE_AGENT_URL")
        .env_remove("JUCODE_AGENT_CAPABILITY")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("JUCODE_AGENT_URL is not set"), "{err}");
}
