//! A long-lived agent's session on the real Claude Code and the real Codex: the CLI gets the
//! daemon's own `jucode-daemon agent-mcp` server through its per-process MCP configuration,
//! the fake model calls the agent tool `report` through it, and the call arrives at the
//! agent endpoint with the session's capability. The agent's prompt reaches the model.
//!
//! The endpoint is `jucode_testsupport::agent_endpoint` (the daemon's wire format) offering a
//! `report` tool: on main the hub's areas have not all landed their tools, so the test does not
//! depend on which are there; `crates/jucode-server/tests/agent_endpoint.rs` shows the same
//! server reaching the real hub.

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
