//! The `tool <name> <json>` script: one call of an agent tool through the MCP server the
//! daemon names in `JUCODE_AGENT_MCP` (its own `agent-mcp`), as Claude Code and Codex call
//! it: the server is started, initialized, asked `tools/call`, and stopped.

use std::process::Stdio;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

/// What the call gave: the tool's text, and whether it is an error.
pub struct Called {
    pub text: String,
    pub is_error: bool,
}

/// Calls agent tool `name` with `args` through the session's MCP server.
pub async fn call(name: &str, args: Value) -> Result<Called> {
    let launch: Value = serde_json::from_str(
        &std::env::var("JUCODE_AGENT_MCP")
            .context("no agent tools: JUCODE_AGENT_MCP is not set (not an agent session)")?,
    )
    .context("JUCODE_AGENT_MCP is not JSON")?;
    let program = launch["command"]
        .as_str()
        .context("JUCODE_AGENT_MCP has no command")?;
    let argv: Vec<&str> = launch["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut child = Command::new(program)
        .args(&argv)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {program}"))?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    let mut lines = BufReader::new(child.stdout.take().context("no stdout")?).lines();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "jucode-fake-serve", "version": "0.1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": name, "arguments": args}}),
    ];
    let mut answer = Value::Null;
    for request in requests {
        stdin.write_all(format!("{request}\n").as_bytes()).await?;
        stdin.flush().await?;
        let Some(id) = request.get("id") else {
            continue;
        };
        answer = loop {
            let line = lines
                .next_line()
                .await?
                .context("the MCP server closed its output")?;
            let Ok(frame) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if frame.get("id") == Some(id) {
                break frame;
            }
        };
        if let Some(error) = answer.get("error") {
            bail!("MCP {}: {error}", request["method"]);
        }
    }
    drop(stdin);
    let _ = child.kill().await;
    let result = &answer["result"];
    let text = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n");
    Ok(Called {
        text,
        is_error: result.get("isError").and_then(Value::as_bool) == Some(true),
    })
}
