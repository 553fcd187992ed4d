//! McpManager against the real test server `jucode-mcp-echo` (crate jucode-mcp-testserver),
//! over stdio and streamable HTTP. Run with
//! `cargo test -p jucode-mcp -p jucode-mcp-testserver`, which builds the server fresh
//! (`-p jucode-mcp` alone builds it only when it is missing).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use jucode_mcp::{McpManager, McpServerConfig, Transport, load_servers};
use serde_json::{Map, Value, json};
use tokio::io::AsyncBufReadExt;

/// Deadlock guard only.
const GUARD: Duration = Duration::from_secs(60);

/// The built test server; built with the running cargo when it is missing.
fn echo_bin() -> PathBuf {
    jucode_testsupport::build_bin("jucode-mcp-echo", "jucode-mcp-testserver").unwrap()
}

fn stdio_server(name: &str, args: &[&str]) -> McpServerConfig {
    McpServerConfig {
        name: name.to_string(),
        transport: Transport::Stdio,
        command: Some(echo_bin().to_string_lossy().into_owned()),
        args: args.iter().map(|a| a.to_string()).collect(),
        env: BTreeMap::new(),
        url: None,
        headers: BTreeMap::new(),
        enabled: true,
        timeout_seconds: Some(30),
    }
}

fn state_of(event: &Value, name: &str) -> Option<String> {
    event["servers"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
        .and_then(|s| s["state"].as_str())
        .map(str::to_string)
}

fn server_of(event: &Value, name: &str) -> Value {
    event["servers"]
        .as_array()
        .and_then(|list| list.iter().find(|s| s["name"] == name).cloned())
        .unwrap_or(Value::Null)
}

/// Waits until `name` is in `state`; returns the event.
async fn wait_state(mgr: &McpManager, name: &str, state: &str) -> Value {
    let mut rx = mgr.subscribe();
    let found = tokio::time::timeout(GUARD, async {
        loop {
            let event = mgr.servers_event();
            if state_of(&event, name).as_deref() == Some(state) {
                return event;
            }
            if rx.changed().await.is_err() {
                return event;
            }
        }
    })
    .await;
    match found {
        Ok(event) => {
            assert_eq!(state_of(&event, name).as_deref(), Some(state), "{event}");
            event
        }
        Err(_) => panic!(
            "deadlock guard: {name} never became {state}: {}",
            mgr.servers_event()
        ),
    }
}

fn op(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

fn tool_names(mgr: &McpManager) -> Vec<String> {
    let mut names: Vec<String> = mgr.tools().into_iter().map(|t| t.name).collect();
    names.sort();
    names
}

/// The engine shares the manager across tasks.
#[test]
fn the_manager_and_its_futures_are_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: &T) {}
    send_sync::<McpManager>();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mgr = rt.block_on(McpManager::start(dir.path().join("config.json"), vec![]));
    let map = Map::new();
    send(&mgr.call("x", json!({})));
    send(&mgr.apply(&map));
    send(&mgr.shutdown());
}

#[tokio::test]
async fn stdio_server_lists_and_calls_tools() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    let mgr = McpManager::start(config, vec![stdio_server("echo srv", &[])]).await;
    let event = wait_state(&mgr, "echo srv", "connected").await;
    let server = server_of(&event, "echo srv");
    assert_eq!(server["transport"], "stdio");
    assert!(server.get("error").is_none(), "{server}");
    let listed: Vec<&str> = server["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        listed.contains(&"echo") && listed.contains(&"add"),
        "{server}"
    );

    assert_eq!(
        tool_names(&mgr),
        [
            "mcp__echo_srv__add",
            "mcp__echo_srv__echo",
            "mcp__echo_srv__fail"
        ]
    );
    let echo = mgr
        .tools()
        .into_iter()
        .find(|t| t.name == "mcp__echo_srv__echo")
        .unwrap();
    assert_eq!(echo.description, "Returns the text it is given");
    assert_eq!(echo.input_schema["properties"]["text"]["type"], "string");

    let out = mgr
        .call("mcp__echo_srv__echo", json!({"text": "hello there"}))
        .await
        .unwrap();
    assert_eq!(out.text, "hello there");
    assert!(!out.is_error);
    let out = mgr
        .call("mcp__echo_srv__add", json!({"a": 2, "b": 3.5}))
        .await
        .unwrap();
    assert_eq!(out.text, "5.5");
    let out = mgr.call("mcp__echo_srv__fail", json!({})).await.unwrap();
    assert!(out.is_error);
    assert!(out.text.contains("always fails"), "{}", out.text);

    let err = mgr
        .call("mcp__echo_srv__nope", json!({}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown MCP tool"), "{err}");
    let err = mgr
        .call("mcp__echo_srv__echo", json!([1]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("JSON object"), "{err}");
    // Bad arguments are the server's to refuse; the session goes on.
    let refused = mgr.call("mcp__echo_srv__add", json!({"a": "x"})).await;
    assert!(refused.is_err() || refused.as_ref().is_ok_and(|r| r.is_error));
    mgr.shutdown().await;
}

#[tokio::test]
async fn http_server_lists_and_calls_tools() {
    let mut child = tokio::process::Command::new(echo_bin())
        .args(["--http", "127.0.0.1:0"])
        .args(["--require-header", "authorization=Bearer s3cret"])
        .args(["--require-header", "x-test=1"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(GUARD, lines.next_line())
        .await
        .expect("deadlock guard")
        .unwrap()
        .unwrap();
    let url = line.trim().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");

    let dir = tempfile::tempdir().unwrap();
    let server = McpServerConfig {
        name: "web".to_string(),
        transport: Transport::Http,
        command: None,
        args: vec![],
        env: BTreeMap::new(),
        url: Some(url),
        headers: BTreeMap::from([
            ("Authorization".to_string(), "Bearer s3cret".to_string()),
            ("X-Test".to_string(), "1".to_string()),
        ]),
        enabled: true,
        timeout_seconds: Some(30),
    };
    // The same server without the headers is refused: they really are sent.
    let bare = McpServerConfig {
        name: "bare".to_string(),
        headers: BTreeMap::new(),
        ..server.clone()
    };
    let mgr = McpManager::start(dir.path().join("config.json"), vec![server, bare]).await;
    let event = wait_state(&mgr, "bare", "failed").await;
    let error = server_of(&event, "bare")["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!error.contains("s3cret"), "{error}");
    let event = wait_state(&mgr, "web", "connected").await;
    assert_eq!(server_of(&event, "web")["transport"], "http");
    assert_eq!(
        tool_names(&mgr),
        ["mcp__web__add", "mcp__web__echo", "mcp__web__fail"]
    );
    let out = mgr
        .call("mcp__web__add", json!({"a": 40, "b": 2}))
        .await
        .unwrap();
    assert_eq!(out.text, "42");
    let out = mgr
        .call("mcp__web__echo", json!({"text": "über http"}))
        .await
        .unwrap();
    assert_eq!(out.text, "über http");
    mgr.shutdown().await;
    child.kill().await.unwrap();
}

#[tokio::test]
async fn a_failing_server_is_reported_with_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut missing = stdio_server("missing", &[]);
    missing.command = Some("/nonexistent/jucode-no-such-server".to_string());
    let refusing = stdio_server("refusing", &["--exit-at-start"]);
    let unreachable = McpServerConfig {
        name: "unreachable".to_string(),
        transport: Transport::Http,
        command: None,
        url: Some("http://127.0.0.1:9/mcp".to_string()),
        ..stdio_server("x", &[])
    };
    let mgr = McpManager::start(
        dir.path().join("config.json"),
        vec![missing, refusing, unreachable, stdio_server("good", &[])],
    )
    .await;
    let event = wait_state(&mgr, "missing", "failed").await;
    let error = server_of(&event, "missing")["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(error.contains("cannot start"), "{error}");
    let event = wait_state(&mgr, "refusing", "failed").await;
    let error = server_of(&event, "refusing")["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        error.contains("refusing to start"),
        "stderr is quoted: {error}"
    );
    let event = wait_state(&mgr, "unreachable", "failed").await;
    assert!(
        server_of(&event, "unreachable")["error"].is_string(),
        "{event}"
    );
    wait_state(&mgr, "good", "connected").await;
    // Only the good server's tools are offered.
    assert!(
        tool_names(&mgr)
            .iter()
            .all(|n| n.starts_with("mcp__good__"))
    );
    mgr.shutdown().await;
}

#[tokio::test]
async fn toggle_off_disables_and_hides_tools_then_back_on() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    std::fs::write(&config, r#"{"model":"m"}"#).unwrap();
    let mgr = McpManager::start(config.clone(), vec![stdio_server("echo", &[])]).await;
    wait_state(&mgr, "echo", "connected").await;
    assert_eq!(mgr.tools().len(), 3);

    let mut rx = mgr.subscribe();
    let before = *rx.borrow_and_update();
    mgr.apply(&op(
        json!({"op": "mcp_toggle", "name": "echo", "enabled": false}),
    ))
    .await
    .unwrap();
    assert!(*rx.borrow() > before, "subscribers are told");
    let event = mgr.servers_event();
    let server = server_of(&event, "echo");
    assert_eq!(server["state"], "disabled");
    assert_eq!(server["tools"], json!([]));
    assert!(mgr.tools().is_empty());
    let err = mgr
        .call("mcp__echo__echo", json!({"text": "x"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown MCP tool"), "{err}");
    // Persisted (the entry is written even though the file lacked it), other keys kept.
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(saved["model"], "m");
    let mut expected = stdio_server("echo", &[]);
    expected.enabled = false;
    assert_eq!(load_servers(&config).unwrap(), vec![expected]);

    mgr.apply(&op(
        json!({"op": "mcp_toggle", "name": "echo", "enabled": true}),
    ))
    .await
    .unwrap();
    wait_state(&mgr, "echo", "connected").await;
    assert_eq!(mgr.tools().len(), 3);

    let err = mgr
        .apply(&op(json!({"op": "mcp_toggle", "name": "echo"})))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "mcp_toggle requires name and enabled");
    let err = mgr
        .apply(&op(
            json!({"op": "mcp_toggle", "name": "ghost", "enabled": true}),
        ))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ghost"), "{err}");
    mgr.shutdown().await;
}

#[tokio::test]
async fn mcp_set_and_remove_persist_keeping_other_keys() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    std::fs::write(
        &config,
        r#"{"model":"gpt","mcp_servers":[],"title_model":"small","extra":{"a":1}}"#,
    )
    .unwrap();
    let mgr = McpManager::start(config.clone(), load_servers(&config).unwrap()).await;
    assert_eq!(mgr.servers_event(), json!({"servers": []}));

    let server = serde_json::to_value(stdio_server("added", &[])).unwrap();
    mgr.apply(&op(json!({"op": "mcp_set", "server": server})))
        .await
        .unwrap();
    wait_state(&mgr, "added", "connected").await;
    assert!(tool_names(&mgr).contains(&"mcp__added__echo".to_string()));

    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let keys: Vec<&String> = saved.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["model", "mcp_servers", "title_model", "extra"]);
    assert_eq!(saved["extra"], json!({"a": 1}));
    assert_eq!(
        load_servers(&config).unwrap(),
        vec![stdio_server("added", &[])]
    );

    // Updating by name replaces the entry (here: disabled from the start).
    let mut changed = stdio_server("added", &[]);
    changed.enabled = false;
    let changed_json = serde_json::to_value(&changed).unwrap();
    mgr.apply(&op(json!({"op": "mcp_set", "server": changed_json})))
        .await
        .unwrap();
    assert_eq!(
        state_of(&mgr.servers_event(), "added").as_deref(),
        Some("disabled")
    );
    assert_eq!(load_servers(&config).unwrap(), vec![changed]);

    for (bad, message) in [
        (json!({"op": "mcp_set"}), "mcp_set requires a server object"),
        (
            json!({"op": "mcp_set", "server": "x"}),
            "mcp_set requires a server object",
        ),
        (json!({"op": "mcp_remove"}), "mcp_remove requires name"),
        (
            json!({"op": "mcp_remove", "name": 3}),
            "mcp_remove requires name",
        ),
    ] {
        let err = mgr.apply(&op(bad)).await.unwrap_err();
        assert_eq!(err.to_string(), message);
    }
    let err = mgr
        .apply(&op(
            json!({"op": "mcp_set", "server": {"name": "x", "transport": "stdio"}}),
        ))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("needs a command"), "{err}");

    mgr.apply(&op(json!({"op": "mcp_remove", "name": "added"})))
        .await
        .unwrap();
    assert_eq!(mgr.servers_event(), json!({"servers": []}));
    assert!(load_servers(&config).unwrap().is_empty());
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(saved["title_model"], "small");
    mgr.shutdown().await;
}

/// Whether a live process has `marker` among its arguments.
fn process_with_arg(marker: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        cmdline
            .split(|b| *b == 0)
            .any(|arg| arg == marker.as_bytes())
    })
}

#[tokio::test]
async fn shutdown_stops_stdio_servers() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("--tag=jucode-mcp-shutdown-{}", std::process::id());
    let mgr = McpManager::start(
        dir.path().join("config.json"),
        vec![stdio_server("echo", &[&marker])],
    )
    .await;
    wait_state(&mgr, "echo", "connected").await;
    assert!(process_with_arg(&marker));
    mgr.shutdown().await;
    let gone = tokio::time::timeout(GUARD, async {
        while process_with_arg(&marker) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "the stdio server outlived shutdown");
}

#[tokio::test]
async fn a_server_that_dies_is_reported_failed() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("--tag=jucode-mcp-dies-{}", std::process::id());
    let mgr = McpManager::start(
        dir.path().join("config.json"),
        vec![stdio_server("echo", &[&marker])],
    )
    .await;
    wait_state(&mgr, "echo", "connected").await;
    let pid = find_pid_with_arg(&marker).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let event = wait_state(&mgr, "echo", "failed").await;
    let error = server_of(&event, "echo")["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(error.contains("closed"), "{error}");
    assert!(mgr.tools().is_empty());
    mgr.shutdown().await;
}

fn find_pid_with_arg(marker: &str) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == marker.as_bytes())
                .then_some(pid)
        })
}
