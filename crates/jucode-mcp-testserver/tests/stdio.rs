//! The test server answers the MCP handshake and tool calls over stdio. (Also makes
//! `cargo test -p jucode-mcp-testserver` build the binary that jucode-mcp's tests use.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Stdio};

#[test]
fn answers_initialize_list_and_call_over_stdio() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_jucode-mcp-echo"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}"#,
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    // EOF ends the server once it has answered.
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let replies: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_id = |id: u64| {
        replies
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no reply {id}: {replies:?}"))
    };
    assert!(by_id(1)["result"]["capabilities"]["tools"].is_object());
    let names: Vec<&str> = by_id(2)["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["add", "echo", "fail"]);
    assert_eq!(by_id(3)["result"]["content"][0]["text"], "3");
}

#[test]
fn exit_at_start_says_why() {
    let out = Command::new(env!("CARGO_BIN_EXE_jucode-mcp-echo"))
        .arg("--exit-at-start")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing to start"));
}
