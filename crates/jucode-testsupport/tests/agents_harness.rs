//! An agent's session in the in-process harness: the seat its engine gets (the prompt built
//! from the brief, the other agents and the project; the `brief` tool; the agent's settings
//! in the options) and the `agents` list following its turns. No test here sleeps.

use anyhow::{Context, Result, ensure};
use jucode_testsupport::harness::{Harness, TestClient};
use serde_json::{Value, json};

async fn create(client: &mut TestClient, op: Value) -> Result<()> {
    let reply = client.request(op).await?;
    ensure!(
        reply["type"] == "agent_created",
        "agent_create answered {reply}"
    );
    Ok(())
}

/// The next `agents` broadcast.
async fn agents(client: &mut TestClient) -> Result<Value> {
    client
        .next_matching(|f| f["type"] == "agents" && f.get("id").is_none())
        .await
}

fn summary_of(list: &Value, id: &str) -> Value {
    list["agents"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["id"] == id))
        .map(|e| e["summary"].clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn an_agent_session_gets_its_prompt_its_settings_and_the_brief_tool() -> Result<()> {
    let h = Harness::start()?;
    let mut desk = h.connect().await?;
    let app = h.user_home().join("app");
    std::fs::create_dir_all(&app)?;
    let ws = desk
        .request(json!({"op": "project_add", "path": app.display().to_string()}))
        .await?;
    let project = ws["workspaces"][0]["projects"][0]["id"]
        .as_str()
        .context("no project id")?
        .to_string();
    create(
        &mut desk,
        json!({"op": "agent_create", "agent": "ops", "name": "Ops", "project": project,
               "role": "# Keep the build green"}),
    )
    .await?;
    create(
        &mut desk,
        json!({"op": "agent_create", "agent": "web", "name": "Web",
               "cwd": app.display().to_string(), "role": "Runs the site"}),
    )
    .await?;
    let reply = desk
        .request(
            json!({"op": "agent_update", "agent": "ops", "sandbox": "read-only",
                        "network": false, "directories": [{"path": "/opt/x", "mode": "ro"}]}),
        )
        .await?;
    ensure!(reply["type"] == "agent_updated", "{reply}");

    let reply = desk
        .request(json!({"op": "session_create", "agent": "ops"}))
        .await?;
    ensure!(reply["type"] == "session_created", "{reply}");
    let engine = h.engines.next_session().await?;
    let app = std::fs::canonicalize(&app)?;
    assert_eq!(engine.spec.cwd, app);
    assert_eq!(engine.spec.options["sandbox"], "read-only");
    assert_eq!(engine.spec.options["network"], false);
    assert_eq!(
        engine.spec.options["directories"],
        json!([{"path": "/opt/x", "mode": "ro"}])
    );
    let seat = engine.spec.agent.clone().context("no agent seat")?;
    assert_eq!(seat.agent, "ops");

    let prompt = seat.host.prompt();
    assert!(prompt.contains("You are Ops (agent id `ops`)"), "{prompt}");
    assert!(
        prompt.contains("### role.md\n# Keep the build green\n"),
        "{prompt}"
    );
    assert!(
        prompt.contains("- `web` (Web): Runs the site\n"),
        "{prompt}"
    );
    assert!(
        prompt.contains(&format!("(project id `{project}`), in {}", app.display())),
        "{prompt}"
    );
    assert!(seat.host.tools().iter().any(|t| t.name == "brief"));

    // The agent rewrites its role and a memory note; the next prompt and the list show them.
    let wrote = seat
        .host
        .call(
            "brief",
            json!({"action": "write", "file": "role.md", "content": "Ship it"}),
        )
        .await
        .map_err(anyhow::Error::msg)?;
    assert_eq!(wrote, json!({"file": "role.md", "written": 7}));
    desk.next_matching(|f| f["type"] == "agents" && summary_of(f, "ops") == "Ship it")
        .await?;
    seat.host
        .call(
            "brief",
            json!({"action": "write", "file": "memory/deploy.md", "content": "Deploys\nvia ci"}),
        )
        .await
        .map_err(anyhow::Error::msg)?;
    let prompt = seat.host.prompt();
    assert!(prompt.contains("### role.md\nShip it\n"), "{prompt}");
    assert!(prompt.contains("- memory/deploy.md: Deploys\n"), "{prompt}");
    let listed = seat
        .host
        .call("brief", json!({"action": "list"}))
        .await
        .map_err(anyhow::Error::msg)?;
    assert_eq!(
        listed["memory"],
        json!([{"file": "memory/deploy.md", "first_line": "Deploys"}])
    );
    let read = seat
        .host
        .call("brief", json!({"action": "read", "file": "deploy.md"}))
        .await
        .map_err(anyhow::Error::msg)?;
    assert_eq!(read["content"], "Deploys\nvia ci");

    // Nothing outside the agent's directory, nothing over the size limit.
    for args in [
        json!({"action": "read", "file": "../web/role.md"}),
        json!({"action": "write", "file": "memory/../../x.md", "content": "x"}),
        json!({"action": "write", "file": "agent.json", "content": "{}"}),
        json!({"action": "write", "file": "state.md", "content": "x".repeat(64 * 1024 + 1)}),
        json!({"action": "read", "file": "memory/none.md"}),
        json!({"action": "delete", "file": "role.md"}),
    ] {
        let err = seat.host.call("brief", args.clone()).await;
        assert!(err.is_err(), "{args} should fail, got {err:?}");
    }
    let err = seat.host.call("nope", json!({})).await.unwrap_err();
    assert_eq!(err, "unknown tool nope");
    let state = std::fs::read_to_string(h.home().join("agents/ops/state.md"))?;
    assert_eq!(state, "");
    assert!(!h.home().join("x.md").exists());
    Ok(())
}

#[tokio::test]
async fn the_agents_list_follows_an_agent_sessions_turns() -> Result<()> {
    let h = Harness::start()?;
    let mut desk = h.connect().await?;
    let dir = h.user_home().join("w");
    std::fs::create_dir_all(&dir)?;
    create(
        &mut desk,
        json!({"op": "agent_create", "agent": "ops", "name": "Ops",
               "cwd": dir.display().to_string(), "role": ""}),
    )
    .await?;
    let reply = desk
        .request(json!({"op": "session_create", "agent": "ops"}))
        .await?;
    let session = reply["session"].as_str().context("no session")?.to_string();
    let engine = h.engines.next_session().await?;
    engine.startup().await?;

    engine
        .emit("user_message", json!({"content": "go"}))
        .await?;
    let list = desk
        .next_matching(|f| f["type"] == "agents" && f["agents"][0]["busy"] == true)
        .await?;
    assert_eq!(list["agents"][0]["running"], json!([session]));
    assert_eq!(list["agents"][0]["sessions"], 1);
    engine.ready().await?;
    let list = desk
        .next_matching(|f| f["type"] == "agents" && f["agents"][0]["busy"] == false)
        .await?;
    assert_eq!(list["agents"][0]["running"], json!([]));

    // The engine going away is news too: the session is no longer open.
    engine.exit(None).await?;
    desk.next_matching(|f| f["type"] == "session_closed")
        .await?;
    let list = agents(&mut desk).await?;
    assert_eq!(list["agents"][0]["sessions"], 1);
    Ok(())
}
