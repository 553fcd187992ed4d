//! The ACP adapter as the client of an agent's `terminal/*` requests, and a refused permission,
//! against `fake-acp` replaying the hand-written `acp-terminals.jsonl` (fake-acp checks every
//! answer the recording holds: terminal ids, output, exit status, errors).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use jucode_adapters::acp::AcpEngine;
use serde_json::json;

const SESSION: &str = "0b1c2d3e-4f50-4162-8a73-9b8cad0e1f31";

/// Waits (bounded by a deadlock guard) until `done` holds.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    let wait = async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .unwrap_or_else(|_| panic!("deadlock guard: {what}"));
}

/// Whether the process in `pid_file` is gone (a zombie counts as gone: it runs nothing).
fn gone(pid_file: &Path) -> bool {
    let pid = std::fs::read_to_string(pid_file).unwrap();
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminals_run_inside_the_session_and_die_with_it() {
    let env = Sandbox::new();
    let cwd = env.cwd.clone();
    let engine = AcpEngine::new(env.config());
    let options = fake_acp("acp-terminals.jsonl");
    let mut h = start(&engine, SESSION, &cwd, options, false);
    until(&mut h, "approval_mode").await;

    // A refused permission shows as a declined call, as in Codex sessions.
    send(&h, json!({"op":"user_message","content":"remove x"}));
    let card = until(&mut h, "approval_request").await;
    assert_eq!(card.last().unwrap()["call_id"], "call_2");
    send(
        &h,
        json!({"op":"approve","call_id":"call_2","decision":"deny"}),
    );
    let after = turn(&mut h).await;
    assert_eq!(
        flow(&after)[0],
        json!({"type":"tool_output","call_id":"call_2","name":"bash","output":"declined by the user","is_error":true})
    );

    // The terminals: output cut to the limit on a char boundary, paths outside refused,
    // kill and release, each checked by fake-acp against the recording.
    send(&h, json!({"op":"user_message","content":"use terminals"}));
    let events = turn(&mut h).await;
    assert_eq!(
        flow(&events),
        vec![
            json!({"type":"user_message","content":"use terminals"}),
            json!({"type":"connecting"}),
            json!({"type":"tool_start","call_id":"call_1","name":"bash"}),
            json!({"type":"tool_output","call_id":"call_1","name":"bash","output":"llo wörld","is_error":false}),
            // The recorded result has no `usage`: the counters are absent, not zero.
            json!({"type":"usage"}),
            ready(),
        ]
    );
    // A released terminal's whole process group is gone, the background job included.
    let bg = cwd.join("bg.pid");
    assert!(
        bg.exists(),
        "the second terminal ran in the session's directory"
    );
    eventually("the released terminal's background job dies", || gone(&bg)).await;

    // The fourth terminal still runs when the session ends: it dies with the session.
    let end = cwd.join("end.pid");
    eventually("the last terminal starts", || {
        std::fs::read_to_string(&end).is_ok_and(|s| s.ends_with('\n'))
    })
    .await;
    assert!(!gone(&end), "still running while the session is open");
    assert_eq!(close(h).await, None);
    eventually("the session's terminals die with it", || gone(&end)).await;
}
