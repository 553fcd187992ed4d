//! A long-lived agent's session on the real Claude Code and the real Codex: the CLI gets the
//! daemon's own `jucode-daemon agent-mcp` server through its per-process MCP configuration,
//! the fake model calls the agent tool `report` through it, and the call arrives with the
//! session's capability. Twice per CLI:
//! - through the adapter alone, against `jucode_testsupport::agent_endpoint` (the endpoint's
//!   wire format, recording calls), which also checks the agent's prompt reaches the model;
//! - through the real daemon binary (`session_create` with `agent`), whose hub runs `report`
//!   and lists it in `report_list`.

use std::collections::BTreeMap;
use std::sync::Arc;

use jucode_adapters::claude::ClaudeEngine;
use jucode_adapters::codex::CodexEngine;
use jucode_engine::agent::{AgentHost, AgentSeat, McpLaunch, ToolDef, ToolFuture};
use jucode_engine::{EngineFactory, EngineHandle, StartSpec};
use jucode_testsupport::agent_endpoint::{AgentEndpoint, RecordedCall};
use serde_json::{Value, json};

use crate::common::*;
use crate::real::*;

const CAPABILITY: &str = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed";
const PROMPT_MARK: &str = "AGENT-PROMPT-7f3a: you are the agent scout";
const CALL: &str = r#"CALL: mcp__jucode__report {"title":"nightly","body":"all green"}"#;

struct Host {
    mcp: McpLaunch,
}

impl AgentHost for Host {
    fn prompt(&self) -> String {
        PROMPT_MARK.to_string()
    }
    fn tools(&self) -> Vec<ToolDef> {
        Vec::new()
    }
    fn call(&self, name: &str, _args: Value) -> ToolFuture {
        let name = name.to_string();
        Box::pin(async move { Err(format!("{name} is served over MCP here")) })
    }
    fn mcp_server(&self) -> Option<McpLaunch> {
        Some(self.mcp.clone())
    }
}

async fn endpoint() -> AgentEndpoint {
    let tools = json!([{
        "name": "report",
        "description": "Posts a report to the user",
        "input_schema": {"type": "object",
                         "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
                         "required": ["title", "body"]},
    }]);
    AgentEndpoint::start(CAPABILITY, tools).await.unwrap()
}

fn seat(endpoint: &AgentEndpoint) -> AgentSeat {
    let program = jucode_testsupport::build_bin("jucode-daemon", "jucode-daemon").unwrap();
    AgentSeat {
        agent: "scout".into(),
        host: Arc::new(Host {
            mcp: McpLaunch {
                name: "jucode".into(),
                program,
                args: vec!["agent-mcp".into()],
                env: BTreeMap::from([
                    ("JUCODE_AGENT_URL".into(), endpoint.url()),
                    ("JUCODE_AGENT_CAPABILITY".into(), CAPABILITY.into()),
                ]),
            },
        }),
    }
}

fn start_agent(
    factory: &dyn EngineFactory,
    session: &str,
    world: &World,
    options: Value,
    seat: AgentSeat,
) -> EngineHandle {
    factory
        .start(StartSpec {
            session: session.into(),
            cwd: world.cwd.clone(),
            extra_dirs: Vec::new(),
            options: obj(options),
            resume: false,
            agent: Some(seat),
        })
        .expect("the engine starts")
}

/// Runs the `CALL:` turn, allowing the tool when asked; returns the turn's events.
async fn report_turn(h: &mut EngineHandle) -> Vec<Value> {
    send(h, json!({"op": "user_message", "content": CALL}));
    let mut events = Vec::new();
    loop {
        let e = next(h).await;
        if e["type"] == "approval_request" {
            send(
                h,
                json!({"op": "approve", "call_id": e["call_id"], "decision": "allow"}),
            );
        }
        let done = e["type"] == "status" && e["message"] == "ready";
        events.push(e);
        if done {
            return events;
        }
    }
}

/// The tool names the model was offered in its last turn request, for failure messages.
fn offered(world: &World) -> Vec<String> {
    let requests = world.model.model_requests();
    let Some(last) = requests.last() else {
        return Vec::new();
    };
    let tools = last.body["tools"].as_array().cloned().unwrap_or_default();
    tools
        .iter()
        .map(|t| {
            let name = t["name"].as_str().unwrap_or("");
            let inner: Vec<&str> = t["tools"]
                .as_array()
                .map(|ts| ts.iter().filter_map(|i| i["name"].as_str()).collect())
                .unwrap_or_default();
            format!("{name}{inner:?}")
        })
        .collect()
}

fn check_reported(events: &[Value], endpoint: &AgentEndpoint, world: &World) {
    assert_eq!(
        endpoint.calls(),
        [RecordedCall {
            name: "report".into(),
            arguments: json!({"title": "nightly", "body": "all green"}),
        }],
        "offered {:?}; {events:#?}",
        offered(world)
    );
    let output = events
        .iter()
        .find(|e| e["type"] == "tool_output")
        .unwrap_or_else(|| panic!("no tool_output: {events:#?}"));
    assert_eq!(output["is_error"], false, "{output}");
    let said: String = events
        .iter()
        .filter(|e| e["type"] == "assistant_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert!(said.contains("recorded"), "{said:?}");
    assert!(
        world
            .model
            .model_requests()
            .iter()
            .any(|r| r.body.to_string().contains(PROMPT_MARK)),
        "the agent's prompt never reached the model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Claude Code: bash scripts/install-engines.sh"]
async fn claude_an_agent_session_calls_an_agent_tool() {
    let cli = claude_cli();
    let world = World::new().await;
    let endpoint = endpoint().await;
    let options = manual(&cli.bin, world.anthropic_env());
    let engine = ClaudeEngine::new(world.config());
    let session = "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a";
    let mut h = start_agent(&engine, session, &world, options, seat(&endpoint));
    let events = report_turn(&mut h).await;
    check_reported(&events, &endpoint, &world);
    assert_eq!(close(h).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Codex: bash scripts/install-engines.sh"]
async fn codex_an_agent_session_calls_an_agent_tool() {
    let cli = codex_cli();
    let world = World::new().await;
    let endpoint = endpoint().await;
    let env = world.codex_env(&crate::codex_config(&world));
    let options = manual(&cli.bin, env);
    let engine = CodexEngine::new(world.config());
    let session = "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d";
    let mut h = start_agent(&engine, session, &world, options, seat(&endpoint));
    let events = report_turn(&mut h).await;
    check_reported(&events, &endpoint, &world);
    assert_eq!(close(h).await, None);
}

// ---- The same through the real daemon: its hub runs `report` and records it.

/// A daemon whose home has the agent `scout` on `engine` in the world's work dir, asking
/// before tools as the other real-CLI tests do.
async fn daemon_with_agent(world: &World, engine: &str) -> jucode_testsupport::Daemon {
    let home = world.dir.path().join("jucode");
    let agent = home.join("agents/scout");
    std::fs::create_dir_all(&agent).unwrap();
    let config = json!({"name": "Scout", "cwd": world.cwd, "engine": engine,
                        "approval_mode": "manual"});
    std::fs::write(agent.join("agent.json"), config.to_string()).unwrap();
    // `cargo xtask interop` builds this package only: the daemon is built on first use.
    jucode_testsupport::build_bin("jucode-daemon", "jucode-daemon").unwrap();
    jucode_testsupport::Daemon::start(&home).await.unwrap()
}

/// Runs the `CALL:` turn in an agent session of the daemon; returns the reports it lists.
async fn daemon_report_turn(daemon: &jucode_testsupport::Daemon, options: Value) -> Value {
    let mut client = daemon.client().await.unwrap();
    let created = client
        .request(json!({"op": "session_create", "agent": "scout", "options": options}))
        .await
        .unwrap();
    assert_eq!(created["type"], "session_created", "{created}");
    let session = created["session"].as_str().unwrap().to_string();
    client
        .send(json!({"op": "user_message", "session": session, "content": CALL}))
        .await
        .unwrap();
    loop {
        let f = client.recv().await.unwrap();
        if f["session"] != session.as_str() {
            continue;
        }
        if f["type"] == "approval_request" {
            client
                .send(json!({"op": "approve", "session": session,
                             "call_id": f["call_id"], "decision": "allow"}))
                .await
                .unwrap();
        }
        assert_ne!(f["type"], "error", "{f}");
        if f["type"] == "status" && f["message"] == "ready" {
            break;
        }
    }
    let list = client.request(json!({"op": "report_list"})).await.unwrap();
    let reports = list["reports"].clone();
    assert_eq!(reports.as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(reports[0]["agent"], "scout");
    assert_eq!(reports[0]["session"], session.as_str());
    assert_eq!(reports[0]["title"], "nightly");
    assert_eq!(reports[0]["body"], "all green");
    reports
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Claude Code: bash scripts/install-engines.sh"]
async fn claude_an_agent_session_of_the_daemon_posts_a_report() {
    let cli = claude_cli();
    let world = World::new().await;
    let daemon = daemon_with_agent(&world, "claude").await;
    let options = json!({"bin": cli.bin.display().to_string(), "env": world.anthropic_env()});
    daemon_report_turn(&daemon, options).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Codex: bash scripts/install-engines.sh"]
async fn codex_an_agent_session_of_the_daemon_posts_a_report() {
    let cli = codex_cli();
    let world = World::new().await;
    let daemon = daemon_with_agent(&world, "codex").await;
    let env = world.codex_env(&crate::codex_config(&world));
    let options = json!({"bin": cli.bin.display().to_string(), "env": env});
    daemon_report_turn(&daemon, options).await;
}
