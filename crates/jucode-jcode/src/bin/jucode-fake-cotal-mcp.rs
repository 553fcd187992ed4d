//! `jucode-fake-cotal-mcp`: a test double of the connector's stdio MCP bridge
//! for the real-jcode suite (no mesh): an MCP server named `cotal` with one
//! tool, `cotal_orientation`, speaking newline-delimited JSON-RPC as jcode's
//! MCP client expects (`initialize` 2024-11-05, `tools/list`, `tools/call`).
//! `FAKE_COTAL_MCP_LOG=<file>` appends every received line. Never used by a
//! production seat.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, Write};

use serde_json::{Value, json};

fn main() {
    let log = std::env::var("FAKE_COTAL_MCP_LOG").ok();
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        if let Some(p) = &log
            && let Ok(mut f) = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(p)
        {
            let _ = writeln!(f, "{line}");
        }
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id").cloned() else {
            continue;
        };
        let result = match msg["method"].as_str().unwrap_or_default() {
            "initialize" => json!({"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
                "serverInfo": {"name": "cotal", "version": "0.0.0-fake"}}),
            "tools/list" => json!({"tools": [{"name": "cotal_orientation",
                "description": "Who you are in the Cotal mesh",
                "inputSchema": {"type": "object", "properties": {}}}]}),
            "tools/call" => {
                json!({"content": [{"type": "text", "text": "You are seated (fake orientation)."}], "isError": false})
            }
            _ => json!({}),
        };
        let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
        let _ = writeln!(out, "{reply}");
        let _ = out.flush();
    }
}
