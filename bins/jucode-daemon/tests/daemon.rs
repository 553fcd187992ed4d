//! End-to-end tests: the real daemon binary on 127.0.0.1:0 with a temporary home, driven over
//! WebSocket and plain HTTP, with the scripted serve-v2 engine as its jucode engine.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use jucode_testsupport::{Client, Daemon, connect_status, http};
use serde_json::{Value, json};

/// The test's temporary home.
type Env = jucode_testsupport::TestHome;

fn s(p: &Path) -> String {
    p.display().to_string()
}

async fn create_session(client: &mut Client, cwd: &Path) -> Result<String> {
    let reply = client
        .request(json!({"op":"session_create","cwd":s(cwd)}))
        .await?;
    if reply["type"] != "session_created" {
        bail!("session_create answered {reply}");
    }
    Ok(reply["session"]
        .as_str()
        .context("no session id")?
        .to_string())
}

/// Sends a user message and waits for the end of the turn, returning every event of it.
async fn turn(client: &mut Client, session: &str, content: &str) -> Result<Vec<Value>> {
    client
        .send(json!({"op":"user_message","session":session,"content":content}))
        .await?;
    let mut events = Vec::new();
    loop {
        let frame = client.recv().await?;
        // Events of this turn start with its user_message (startup events may still be queued).
        if frame["session"] != session || (events.is_empty() && frame["type"] != "user_message") {
            continue;
        }
        let ready = frame["type"] == "status" && frame["message"] == "ready";
        events.push(frame);
        if ready {
            return Ok(events);
        }
    }
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["type"].as_str()).collect()
}

#[tokio::test]
async fn tokens_are_checked_at_the_handshake() {
    let env = Env::new();
    let daemon = env.daemon().await;
    let token = daemon.token().unwrap();
    let base = format!("ws://{}/", daemon.addr);
    assert_eq!(connect_status(&base, None).await.unwrap(), Err(401));
    assert_eq!(
        connect_status(&format!("{base}?token=wrong"), None)
            .await
            .unwrap(),
        Err(401)
    );
    assert_eq!(
        connect_status(&base, Some("wrong")).await.unwrap(),
        Err(401)
    );
    assert_eq!(connect_status(&base, Some(&token)).await.unwrap(), Ok(()));
    assert_eq!(
        connect_status(&daemon.url(&token), None).await.unwrap(),
        Ok(())
    );
    // The token file is the owner's alone, and the token never reaches the logs.
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(env.home().join("daemon/token"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    assert!(daemon.logs().iter().all(|l| !l.contains(&token)));
}

#[tokio::test]
async fn the_connect_batch_comes_in_order() {
    let env = Env::new();
    let daemon = env.daemon().await;
    let client = daemon.client().await.unwrap();
    let kinds: Vec<&str> = client
        .connect_batch
        .iter()
        .filter_map(|f| f["type"].as_str())
        .collect();
    assert_eq!(kinds, jucode_testsupport::CONNECT_BATCH);
    assert_eq!(client.connect_batch[0]["protocol"], 2);
    assert_eq!(
        client.connect_batch[2],
        json!({"type":"workspaces","rev":0,"workspaces":[]})
    );
}

#[tokio::test]
async fn a_turn_reaches_every_client_and_titles_the_session() {
    let env = Env::new();
    let project = env.project("app");
    let daemon = env.daemon().await;
    let mut a = daemon.client().await.unwrap();
    let mut b = daemon.client().await.unwrap();
    let session = create_session(&mut a, &project).await.unwrap();
    // The other client sees the startup events of the new session.
    let startup = b.recv_type("startup", Some(&session)).await.unwrap();
    assert_eq!(startup["cwd"], s(&project));

    let events = turn(&mut a, &session, "fix the bug\nand more")
        .await
        .unwrap();
    assert_eq!(
        types(&events),
        [
            "user_message",
            "connecting",
            "assistant_start",
            "assistant_delta",
            "usage",
            "context_usage",
            "status"
        ]
    );
    assert_eq!(events[3]["delta"], "echo: fix the bug\nand more");
    // b got the same events, stamped with the session.
    let delta = b
        .recv_type("assistant_delta", Some(&session))
        .await
        .unwrap();
    assert_eq!(delta["delta"], "echo: fix the bug\nand more");
    b.recv_until(|f| f["type"] == "status" && f["session"] == session.as_str())
        .await
        .unwrap();

    let list = a.request(json!({"op":"session_list"})).await.unwrap();
    let entry = &list["sessions"][0];
    assert_eq!(entry["session"], session.as_str());
    assert_eq!(entry["title"], "fix the bug");
    assert_eq!(entry["open"], true);
    assert_eq!(entry["engine"], "jucode");

    // A title a client sets wins; an empty one goes back to the auto title.
    a.send(json!({"op":"session_meta","session":session,"title":"mine","archived":true}))
        .await
        .unwrap();
    let list = b
        .recv_until(|f| f["type"] == "sessions" && f["sessions"][0]["title"] == "mine")
        .await
        .unwrap();
    assert_eq!(list["sessions"][0]["archived"], true);
    turn(&mut a, &session, "second").await.unwrap();
    let list = a.request(json!({"op":"session_list"})).await.unwrap();
    assert_eq!(list["sessions"][0]["title"], "mine");
    a.send(json!({"op":"session_meta","session":session,"title":""}))
        .await
        .unwrap();
    a.recv_until(|f| f["type"] == "sessions" && f["sessions"][0]["title"] == "fix the bug")
        .await
        .unwrap();

    // Closing reaches everyone once the engine has stopped.
    a.send(json!({"op":"session_close","session":session}))
        .await
        .unwrap();
    b.recv_type("session_closed", None).await.unwrap();
    let list = a.request(json!({"op":"session_list"})).await.unwrap();
    assert_eq!(list["sessions"][0]["open"], false);
}

#[tokio::test]
async fn watching_sends_a_snapshot_to_that_client_only_and_sets_attended() {
    let env = Env::new();
    let project = env.project("app");
    let daemon = env.daemon().await;
    let mut a = daemon.client().await.unwrap();
    let mut b = daemon.client().await.unwrap();
    let session = create_session(&mut a, &project).await.unwrap();
    turn(&mut a, &session, "hello").await.unwrap();

    let reply = a
        .request(json!({"op":"watch","session":session}))
        .await
        .unwrap();
    assert_eq!(reply["type"], "watching");
    assert_eq!(reply["watching"], true);
    let mut snapshot = Vec::new();
    loop {
        let f = a.recv().await.unwrap();
        if f["type"] == "sessions" {
            continue;
        }
        let done = f["type"] == "attended";
        snapshot.push(f);
        if done {
            break;
        }
    }
    assert_eq!(
        types(&snapshot),
        [
            "startup",
            "model_status",
            "command_list",
            "approval_mode",
            "mcp_servers",
            "transcript",
            "attended"
        ]
    );
    assert_eq!(
        snapshot[5]["items"],
        json!([{"role":"user","content":"hello"},{"role":"assistant","content":"echo: hello"}])
    );
    assert_eq!(snapshot[6]["attended"], true);
    // The engine hears that someone is watching; every client sees that (after the
    // `attended: false` it reported at start, when nobody watched).
    b.recv_until(|f| {
        f["type"] == "attended" && f["attended"] == true && f["session"] == session.as_str()
    })
    .await
    .unwrap();
    // b never got the snapshot's transcript.
    let list = b.request(json!({"op":"session_list"})).await.unwrap();
    assert_eq!(list["sessions"][0]["watchers"], 1);

    // An approval waits while watched; when the watcher leaves it becomes a deferred action,
    // announced before the session turns unattended.
    a.send(json!({"op":"user_message","session":session,"content":"approve make deploy"}))
        .await
        .unwrap();
    let request = b
        .recv_type("approval_request", Some(&session))
        .await
        .unwrap();
    assert_eq!(request["summary"], "make deploy");
    a.request(json!({"op":"unwatch","session":session}))
        .await
        .unwrap();
    let first = b
        .recv_until(|f| f["type"] == "action_deferred" || f["type"] == "attended")
        .await
        .unwrap();
    assert_eq!(first["type"], "action_deferred");
    assert_eq!(first["summary"], "make deploy");
    let attended = b.recv_type("attended", Some(&session)).await.unwrap();
    assert_eq!(attended["attended"], false);
}

#[tokio::test]
async fn an_approval_is_answered_by_whichever_client_answers() {
    let env = Env::new();
    let project = env.project("app");
    let daemon = env.daemon().await;
    let mut a = daemon.client().await.unwrap();
    let mut b = daemon.client().await.unwrap();
    let session = create_session(&mut a, &project).await.unwrap();
    a.request(json!({"op":"watch","session":session}))
        .await
        .unwrap();
    a.send(json!({"op":"user_message","session":session,"content":"approve rm -rf build"}))
        .await
        .unwrap();
    let request = b
        .recv_type("approval_request", Some(&session))
        .await
        .unwrap();
    // A third client watching now sees the open approval in its snapshot.
    let mut c = daemon.client().await.unwrap();
    c.request(json!({"op":"watch","session":session}))
        .await
        .unwrap();
    let open = c
        .recv_type("approval_request", Some(&session))
        .await
        .unwrap();
    assert_eq!(open["call_id"], request["call_id"]);
    b.send(
        json!({"op":"approve","session":session,"call_id":request["call_id"],"decision":"deny"}),
    )
    .await
    .unwrap();
    let output = a.recv_type("tool_output", Some(&session)).await.unwrap();
    assert_eq!(output["is_error"], true);
}

#[tokio::test]
async fn sessions_keep_running_without_clients_and_reopen_after_a_restart() {
    let env = Env::new();
    let project = env.project("app");
    let mut daemon = env.daemon().await;
    let mut a = daemon.client().await.unwrap();
    let session = create_session(&mut a, &project).await.unwrap();
    turn(&mut a, &session, "first").await.unwrap();
    a.send(json!({"op":"user_message","session":session,"content":"sleep 300"}))
        .await
        .unwrap();
    a.recv_type("connecting", Some(&session)).await.unwrap();
    a.close().await;

    // Nobody is connected while the turn ends; it still ends, and its reply is kept.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let mut b = daemon.client().await.unwrap();
    b.request(json!({"op":"watch","session":session}))
        .await
        .unwrap();
    let transcript = b.recv_type("transcript", Some(&session)).await.unwrap();
    assert_eq!(
        transcript["items"][3],
        json!({"role":"assistant","content":"slept 300"})
    );
    b.close().await;

    let status = daemon.stop().await.unwrap();
    assert!(status.success(), "daemon exited with {status}");
    let daemon = env.daemon().await;
    let mut c = daemon.client().await.unwrap();
    let listed = &c.connect_batch[1]["sessions"][0];
    assert_eq!(listed["session"], session.as_str());
    assert_eq!(listed["open"], false);
    assert_eq!(listed["title"], "first");
    // Ops on a session that is not open say so.
    let err = c
        .request(json!({"op":"user_message","session":session,"content":"x"}))
        .await;
    // user_message has no reply of its own: the error is the reply.
    let err = err.unwrap();
    assert_eq!(err["type"], "error");
    assert!(
        err["message"].as_str().unwrap().contains("session_open"),
        "{err}"
    );

    let reply = c
        .request(json!({"op":"session_open","session":session}))
        .await
        .unwrap();
    assert_eq!(reply["type"], "session_opened");
    c.request(json!({"op":"watch","session":session}))
        .await
        .unwrap();
    // The watch may come before the engine has replayed the conversation: the snapshot's
    // transcript is then empty and the engine's own transcript event follows.
    let transcript = c
        .recv_until(|f| {
            f["type"] == "transcript"
                && f["session"] == session.as_str()
                && f["items"].as_array().is_some_and(|i| !i.is_empty())
        })
        .await
        .unwrap();
    assert_eq!(
        transcript["items"][0],
        json!({"role":"user","content":"first"})
    );
    assert_eq!(
        transcript["items"][3],
        json!({"role":"assistant","content":"slept 300"})
    );
    let events = turn(&mut c, &session, "after restart").await.unwrap();
    assert_eq!(events[3]["delta"], "echo: after restart");

    let history = c
        .request(json!({"op":"session_history","cwd":s(&project)}))
        .await
        .unwrap();
    assert_eq!(history["sessions"][0]["session"], session.as_str());
}

#[tokio::test]
async fn a_crashed_engine_is_reported_and_the_session_reopens() {
    let env = Env::new();
    let project = env.project("app");
    let daemon = env.daemon().await;
    let mut a = daemon.client().await.unwrap();
    let session = create_session(&mut a, &project).await.unwrap();
    turn(&mut a, &session, "before").await.unwrap();
    a.send(json!({"op":"user_message","session":session,"content":"crash"}))
        .await
        .unwrap();
    let err = a
        .recv_until(|f| f["type"] == "error" && f["session"] == session.as_str())
        .await
        .unwrap();
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("the engine stopped"),
        "{err}"
    );
    a.recv_type("session_closed", None).await.unwrap();
    a.request(json!({"op":"session_open","session":session}))
        .await
        .unwrap();
    let events = turn(&mut a, &session, "again").await.unwrap();
    assert_eq!(events[3]["delta"], "echo: again");
}

#[tokio::test]
async fn bad_input_gets_clear_errors_and_the_daemon_stays_up() {
    let env = Env::new();
    let daemon = env.daemon().await;
    let mut a = daemon.client().await.unwrap();
    a.send_text("{not json").await.unwrap();
    let err = a.recv().await.unwrap();
    assert_eq!(err["type"], "error");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid frame: "),
        "{err}"
    );
    assert!(err.get("id").is_none());

    a.send_text(r#"{"id":4}"#).await.unwrap();
    assert_eq!(
        a.recv().await.unwrap(),
        json!({"type":"error","message":"invalid frame: a frame needs an op string","id":4})
    );
    let reply = a
        .request(json!({"op":"user_message","content":"x"}))
        .await
        .unwrap();
    assert_eq!(reply["message"], "user_message requires session");
    let reply = a
        .request(json!({"op":"interrupt","session":"nope"}))
        .await
        .unwrap();
    assert_eq!(reply["message"], "unknown session nope");
    let reply = a
        .request(json!({"op":"watch","session":"nope"}))
        .await
        .unwrap();
    assert_eq!(reply["message"], "unknown session nope");
    let reply = a
        .request(json!({"op":"session_close","session":"nope"}))
        .await
        .unwrap();
    assert_eq!(reply["message"], "unknown session nope");
    let reply = a.request(json!({"op":"device_revoke"})).await.unwrap();
    assert_eq!(reply["message"], "device_revoke: missing field `device`");
    let reply = a
        .request(json!({"op":"session_create","cwd":"/does/not/exist"}))
        .await
        .unwrap();
    assert_eq!(reply["type"], "error");
    let reply = a
        .request(json!({"op":"session_create","cwd":"/tmp","engine":"emacs"}))
        .await
        .unwrap();
    assert_eq!(
        reply["message"],
        "unknown engine `emacs` (expected jucode, claude, codex or acp)"
    );
    let reply = a
        .request(json!({"op":"agent_create","agent":"ops"}))
        .await
        .unwrap();
    assert_eq!(reply["message"], "agent_create: missing field `name`");
    let reply = a.request(json!({"op":"ping","id":"s-1"})).await.unwrap();
    assert_eq!(reply["type"], "pong");

    // A frame over the limit closes that connection with 1009; others are unaffected.
    let big = format!(r#"{{"op":"ping","pad":"{}"}}"#, "x".repeat(9 * 1024 * 1024));
    a.send_text(&big).await.unwrap();
    let closed = a.recv().await.unwrap_err().to_string();
    assert!(closed.contains("1009"), "{closed}");
    let mut b = daemon.client().await.unwrap();
    let reply = b.request(json!({"op":"ping"})).await.unwrap();
    assert_eq!(reply["type"], "pong");
}

#[tokio::test]
async fn session_ops_the_daemon_owns_are_refused() {
    let env = Env::new();
    let project = env.project("app");
    let daemon = env.daemon().await;
    let mut a = daemon.client().await.unwrap();
    let session = create_session(&mut a, &project).await.unwrap();
    let reply = a
        .request(json!({"op":"set_attended","session":session,"attended":false}))
        .await
        .unwrap();
    assert_eq!(
        reply["message"],
        "the daemon sets attended from watch/unwatch"
    );
    let reply = a
        .request(json!({"op":"command","session":session,"input":"/new"}))
        .await
        .unwrap();
    assert!(
        reply["message"]
            .as_str()
            .unwrap()
            .contains("session_create"),
        "{reply}"
    );
    // /quit closes the session.
    a.send(json!({"op":"command","session":session,"input":"/quit"}))
        .await
        .unwrap();
    a.recv_type("session_closed", None).await.unwrap();
}

#[tokio::test]
async fn a_client_that_does_not_read_is_dropped_and_others_go_on() {
    let env = Env::new();
    let project = env.project("app");
    let daemon = env.daemon().await;
    let mut slow = daemon.client().await.unwrap();
    let mut a = daemon.client().await.unwrap();
    let session = create_session(&mut a, &project).await.unwrap();
    // 32 MiB of deltas do not fit in the slow client's queue plus the socket buffers. Large
    // frames, so the client that reads keeps up however fast the engine floods.
    let events = turn(&mut a, &session, "flood 512 65536").await.unwrap();
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "assistant_delta")
            .count(),
        512
    );
    // The slow client finds its connection closed with 1008 after what was buffered.
    let mut outcome = String::new();
    for _ in 0..1_000 {
        match slow.recv().await {
            Ok(_) => continue,
            Err(e) => {
                outcome = e.to_string();
                break;
            }
        }
    }
    assert!(
        outcome.contains("1008") || outcome.contains("too slow"),
        "{outcome}"
    );
    let reply = a.request(json!({"op":"ping"})).await.unwrap();
    assert_eq!(reply["type"], "pong");
}

#[tokio::test]
async fn workspaces_change_with_a_rev_check_and_reach_other_clients() {
    let env = Env::new();
    let project = env.project("app");
    let lib = env.project("lib");
    let daemon = env.daemon().await;
    let mut a = daemon.client().await.unwrap();
    let mut b = daemon.client().await.unwrap();
    let reply = a
        .request(json!({"op":"project_add","path":s(&project),"workspace_name":"Home"}))
        .await
        .unwrap();
    assert_eq!(reply["type"], "workspaces");
    assert_eq!(reply["rev"], 1);
    let ws = &reply["workspaces"][0];
    assert_eq!(ws["name"], "Home");
    assert_eq!(ws["projects"][0]["path"], s(&project));
    assert_eq!(ws["projects"][0]["name"], "app");
    let seen = b.recv_type("workspaces", None).await.unwrap();
    assert_eq!(seen["rev"], 1);
    assert!(seen.get("id").is_none());

    // A stale rev is refused; the current one replaces the list, dirs kept.
    let mut list = reply["workspaces"].clone();
    list[0]["projects"][0]["dirs"] = json!([s(&lib)]);
    list[0]["color"] = json!("#112233");
    let err = a
        .request(json!({"op":"workspaces_set","rev":0,"workspaces":list}))
        .await
        .unwrap();
    assert_eq!(err["type"], "error");
    assert!(
        err["message"].as_str().unwrap().contains("another client"),
        "{err}"
    );
    let ok = a
        .request(json!({"op":"workspaces_set","rev":1,"workspaces":list}))
        .await
        .unwrap();
    assert_eq!(ok["rev"], 2);
    assert_eq!(ok["workspaces"][0]["color"], "#112233");
    let bad = a
        .request(json!({"op":"workspaces_set","rev":2,"workspaces":[{"id":"w","name":"x","projects":[{"id":"p","name":"p","path":"/x","dirs":["rel"]}]}]}))
        .await
        .unwrap();
    assert!(
        bad["message"].as_str().unwrap().contains("absolute"),
        "{bad}"
    );

    // project_create makes the folder (with git) under home; project_remove leaves files.
    let made = a
        .request(json!({"op":"project_create","parent":"~","name":"fresh","git_init":true}))
        .await
        .unwrap();
    assert_eq!(made["type"], "workspaces", "{made}");
    assert!(env.root().join("fresh/.git").is_dir());
    let outside = a
        .request(json!({"op":"project_create","parent":"/tmp","name":"nope"}))
        .await
        .unwrap();
    assert_eq!(outside["type"], "error");
    let ws_id = made["workspaces"][0]["id"].as_str().unwrap().to_string();
    let p_id = made["workspaces"][0]["projects"][1]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let removed = a
        .request(json!({"op":"project_remove","workspace":ws_id,"project":p_id}))
        .await
        .unwrap();
    assert_eq!(
        removed["workspaces"][0]["projects"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert!(env.root().join("fresh").is_dir());

    // The list survives a restart.
    let mut daemon = daemon;
    daemon.stop().await.unwrap();
    let daemon = env.daemon().await;
    let c = daemon.client().await.unwrap();
    assert_eq!(c.connect_batch[2]["rev"], 4);
}

#[tokio::test]
async fn a_device_pairs_with_a_code_and_is_dropped_on_revoke() {
    let env = Env::new();
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let pairing = desk.request(json!({"op":"pair_start"})).await.unwrap();
    let code = pairing["code"].as_str().unwrap().to_string();
    assert_eq!(code.len(), 8);
    assert!(
        code.chars()
            .all(|c| "ABCDEFGHJKLMNPQRSTUVWXYZ23456789".contains(c))
    );

    let body = json!({"code": code.to_lowercase(), "name": "  phone  "}).to_string();
    let paired = http(daemon.addr, "POST", "/api/pair", Some(body.as_bytes()))
        .await
        .unwrap();
    assert_eq!(paired.status, 200);
    let paired = paired.json().unwrap();
    assert_eq!(paired["name"], "phone");
    let token = paired["token"].as_str().unwrap().to_string();
    let device = paired["device"].as_str().unwrap().to_string();
    // Single use.
    let again = http(daemon.addr, "POST", "/api/pair", Some(body.as_bytes()))
        .await
        .unwrap();
    assert_eq!(again.status, 403);
    // Only a hash of the token is stored.
    let log = std::fs::read_to_string(env.home().join("daemon/devices.jsonl")).unwrap();
    assert!(!log.contains(&token));

    let mut phone = Client::connect_and_greet(&daemon.url(&token))
        .await
        .unwrap();
    assert_eq!(phone.connect_batch[0]["type"], "hello");
    for op in ["pair_start", "device_list", "relay_status", "pair_link"] {
        let reply = phone.request(json!({"op":op})).await.unwrap();
        assert_eq!(
            reply["message"], "only the desktop can manage devices",
            "{op}"
        );
    }
    let reply = phone
        .request(json!({"op":"device_revoke","device":device}))
        .await
        .unwrap();
    assert_eq!(reply["message"], "only the desktop can manage devices");
    let reply = phone
        .request(json!({"op":"session_create","cwd":"/tmp","engine":"acp"}))
        .await
        .unwrap();
    assert_eq!(
        reply["message"],
        "only the desktop can choose what an engine runs"
    );
    // MCP servers name programs to run: refused with or without a session.
    for frame in [
        json!({"op":"mcp_set","server":{"name":"x","transport":"stdio","command":"/bin/sh"}}),
        json!({"op":"mcp_set","session":"s","server":{"name":"x","transport":"stdio","command":"/bin/sh"}}),
        json!({"op":"mcp_toggle","session":"s","name":"x","enabled":true}),
    ] {
        let reply = phone.request(frame).await.unwrap();
        assert_eq!(reply["message"], "only the desktop can change MCP servers");
    }
    assert_eq!(
        phone.request(json!({"op":"ping"})).await.unwrap()["type"],
        "pong"
    );

    let list = desk.request(json!({"op":"device_list"})).await.unwrap();
    assert_eq!(list["devices"][0]["id"], device.as_str());
    assert_eq!(list["devices"][0]["name"], "phone");
    let revoked = desk
        .request(json!({"op":"device_revoke","device":device}))
        .await
        .unwrap();
    assert_eq!(revoked["type"], "device_revoked");
    let closed = phone.recv().await.unwrap_err().to_string();
    assert!(closed.contains("1008"), "{closed}");
    assert_eq!(
        connect_status(&daemon.url(&token), None).await.unwrap(),
        Err(401)
    );
    let list = desk.request(json!({"op":"device_list"})).await.unwrap();
    assert_eq!(list["devices"], json!([]));
}

#[tokio::test]
async fn wrong_pairing_codes_are_rate_limited() {
    let env = Env::new();
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let code = desk.request(json!({"op":"pair_start"})).await.unwrap()["code"]
        .as_str()
        .unwrap()
        .to_string();
    for _ in 0..5 {
        let r = http(
            daemon.addr,
            "POST",
            "/api/pair",
            Some(br#"{"code":"AAAAAAAA"}"#),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 403);
    }
    let body = json!({"code": code}).to_string();
    let r = http(daemon.addr, "POST", "/api/pair", Some(body.as_bytes()))
        .await
        .unwrap();
    assert_eq!(r.status, 429);
    let r = http(daemon.addr, "POST", "/api/pair", Some(b"not json"))
        .await
        .unwrap();
    assert_eq!(r.status, 429);
}

#[tokio::test]
async fn plain_http_serves_the_remote_page_inside_its_directory() {
    let env = Env::new();
    let web = env.project("web");
    std::fs::write(web.join("index.html"), "<html>remote</html>").unwrap();
    std::fs::create_dir_all(web.join("_app/immutable")).unwrap();
    std::fs::write(web.join("_app/immutable/a.js"), "let a;").unwrap();
    std::fs::write(env.root().join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(env.root().join("secret.txt"), web.join("leak.txt")).unwrap();
    let daemon = Daemon::start_with(&env.home(), &["--web", &s(&web)])
        .await
        .unwrap();

    let r = http(daemon.addr, "GET", "/", None).await.unwrap();
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("/remote"));
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(r.header("referrer-policy"), Some("no-referrer"));
    let r = http(daemon.addr, "GET", "/remote", None).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"<html>remote</html>");
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    let r = http(daemon.addr, "GET", "/_app/immutable/a.js", None)
        .await
        .unwrap();
    assert_eq!(r.body, b"let a;");
    assert!(r.header("cache-control").unwrap().contains("immutable"));
    for bad in ["/%2e%2e/secret.txt", "/../secret.txt", "/a%2"] {
        let r = http(daemon.addr, "GET", bad, None).await.unwrap();
        assert_ne!(r.body, b"secret", "{bad}");
        assert_eq!(r.status, 400, "{bad}");
    }
    let r = http(daemon.addr, "GET", "/leak.txt", None).await.unwrap();
    assert_ne!(r.body, b"secret");
    let r = http(daemon.addr, "DELETE", "/x", None).await.unwrap();
    assert_eq!(r.status, 405);

    // --web replaces the embedded page entirely (tests/remote_page.rs covers that page).
    let r = http(daemon.addr, "GET", "/remote/app.js", None)
        .await
        .unwrap();
    assert_eq!(r.body, b"<html>remote</html>");
    assert!(r.header("content-security-policy").is_none());
}

#[tokio::test]
async fn two_daemons_cannot_share_a_state_directory() {
    let env = Env::new();
    let _first = env.daemon().await;
    let second = Daemon::start(&env.home()).await;
    let err = second.err().expect("a second daemon started").to_string();
    assert!(err.contains("another jucode daemon"), "{err}");
}

#[tokio::test]
async fn relay_settings_survive_a_restart() {
    let env = Env::new();
    let daemon = env.daemon().await;
    let mut a = daemon.client().await.unwrap();
    // --no-relay (as the test daemon runs): url null, never enabled.
    let status = a
        .request(json!({"op":"relay_set","enabled":true}))
        .await
        .unwrap();
    assert_eq!(
        status,
        json!({"type":"relay_status","enabled":false,"connected":false,"host":null,"url":null,"id":1})
    );
    let settings = std::fs::read_to_string(env.home().join("daemon/settings.json")).unwrap();
    assert!(settings.contains("\"relay\": true"), "{settings}");
    let err = a.request(json!({"op":"pair_link"})).await.unwrap();
    assert_eq!(err["type"], "error");
}

/// Every record the daemon acknowledged before a SIGKILL is there after the restart: sessions
/// created, titles set (acknowledged by the reply to a later op on the same connection, since
/// ops of one connection are handled in order) and devices paired.
#[tokio::test]
async fn acknowledged_records_survive_sigkill() {
    let env = Env::new();
    let project = env.project("app");
    for round in 0..3u64 {
        let mut daemon = env.daemon().await;
        let token = daemon.token().unwrap();
        let addr = daemon.addr;
        let url = daemon.url(&token);
        let (acked_tx, mut acked_rx) = tokio::sync::mpsc::unbounded_channel::<(String, String)>();
        let (paired_tx, mut paired_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let cwd = project.clone();
        let writer = tokio::spawn(async move {
            let mut client = Client::connect_and_greet(&url).await?;
            for i in 0.. {
                let session = create_session(&mut client, &cwd).await?;
                let title = format!("r{round}-{i}");
                client
                    .send(json!({"op":"session_meta","session":session,"title":title}))
                    .await?;
                client.request(json!({"op":"ping"})).await?;
                let _ = acked_tx.send((session, title));
            }
            anyhow::Ok(())
        });
        let pairer = tokio::spawn(async move {
            let mut desk =
                Client::connect_and_greet(&format!("ws://{addr}/?token={token}")).await?;
            loop {
                let code = desk.request(json!({"op":"pair_start"})).await?;
                let body = json!({"code": code["code"], "name": "p"}).to_string();
                let r = http(addr, "POST", "/api/pair", Some(body.as_bytes())).await?;
                if r.status == 200 {
                    let _ = paired_tx.send(r.json()?["token"].as_str().unwrap_or("").to_string());
                }
            }
            #[allow(unreachable_code)]
            anyhow::Ok(())
        });
        tokio::time::sleep(Duration::from_millis(400 + 150 * round)).await;
        daemon.kill9_and_wait().await.unwrap();
        let _ = writer.await;
        let _ = pairer.await;
        drop(daemon);

        let mut acked = Vec::new();
        while let Ok(item) = acked_rx.try_recv() {
            acked.push(item);
        }
        let mut tokens = Vec::new();
        while let Ok(t) = paired_rx.try_recv() {
            tokens.push(t);
        }
        assert!(
            !acked.is_empty() && !tokens.is_empty(),
            "round {round}: nothing was acknowledged"
        );

        let daemon = env.daemon().await;
        let client = daemon.client().await.unwrap();
        let listed = client.connect_batch[1]["sessions"]
            .as_array()
            .unwrap()
            .clone();
        for (session, title) in &acked {
            let entry = listed
                .iter()
                .find(|e| e["session"] == session.as_str())
                .unwrap_or_else(|| panic!("round {round}: acknowledged session {session} is lost"));
            assert_eq!(entry["title"], title.as_str(), "round {round}");
        }
        for token in &tokens {
            assert_eq!(
                connect_status(&daemon.url(token), None).await.unwrap(),
                Ok(()),
                "round {round}: a paired device was forgotten"
            );
        }
    }
}

#[tokio::test]
async fn a_torn_last_line_is_repaired_and_damage_elsewhere_stops_the_start() {
    let env = Env::new();
    let project = env.project("app");
    let mut daemon = env.daemon().await;
    let mut a = daemon.client().await.unwrap();
    let session = create_session(&mut a, &project).await.unwrap();
    a.close().await;
    daemon.stop().await.unwrap();
    drop(daemon);

    let log = env.home().join("daemon/sessions.jsonl");
    let good = std::fs::read(&log).unwrap();
    let mut torn = good.clone();
    torn.extend_from_slice(br#"{"kind":"meta","sess"#);
    std::fs::write(&log, &torn).unwrap();
    let mut daemon = env.daemon().await;
    let client = daemon.client().await.unwrap();
    assert_eq!(
        client.connect_batch[1]["sessions"][0]["session"],
        session.as_str()
    );
    assert_eq!(
        std::fs::read(&log).unwrap(),
        good,
        "the torn tail was not cut off"
    );
    daemon.stop().await.unwrap();
    drop(daemon);

    // A damaged line before the last one is not guessed at: the daemon refuses to start and
    // names the file and the line.
    let mut damaged = b"{\"kind\":\"open\",\"session\":\"x\" garbage\n".to_vec();
    damaged.extend_from_slice(&good);
    std::fs::write(&log, &damaged).unwrap();
    let err = Daemon::start(&env.home())
        .await
        .err()
        .expect("started on a damaged log");
    let err = format!("{err:#}");
    assert!(err.contains("sessions.jsonl line 1"), "{err}");
}

/// An unwatched session defers a call that needs a person; the action is listed, survives a
/// restart, and deciding it reopens the session, which runs it and hears the outcome.
#[tokio::test]
async fn an_unattended_call_is_deferred_and_decided_after_a_restart() {
    let env = Env::new();
    let project = env.project("app");
    let mut daemon = env.daemon().await;
    let mut a = daemon.client().await.unwrap();
    let session = create_session(&mut a, &project).await.unwrap();
    let events = turn(&mut a, &session, "approve make deploy").await.unwrap();
    let deferred = events
        .iter()
        .find(|e| e["type"] == "action_deferred")
        .unwrap_or_else(|| panic!("nothing deferred: {events:?}"))
        .clone();
    let action = deferred["id"].as_str().unwrap().to_string();
    assert_eq!(deferred["summary"], "make deploy");
    let list = a.request(json!({"op":"actions_list"})).await.unwrap();
    assert_eq!(list["actions"][0]["id"], action.as_str());
    assert_eq!(list["actions"][0]["session_id"], session.as_str());
    a.close().await;
    daemon.stop().await.unwrap();
    drop(daemon);

    let daemon = env.daemon().await;
    let mut b = daemon.client().await.unwrap();
    assert_eq!(b.connect_batch[6]["actions"][0]["id"], action.as_str());
    b.send(json!({"op":"decide_action","session":session,"action":action,"decision":"allow"}))
        .await
        .unwrap();
    let decided = b.recv_type("action_decided", Some(&session)).await.unwrap();
    assert_eq!(decided["decision"], "allow");
    assert_eq!(decided["output"], "ran make deploy\n");
    let told = b.recv_type("user_message", Some(&session)).await.unwrap();
    assert!(
        told["content"]
            .as_str()
            .unwrap()
            .starts_with(&format!("[deferred action {action} approved and executed]")),
        "{told}"
    );
    let list = b.request(json!({"op":"actions_list"})).await.unwrap();
    assert_eq!(list["actions"], json!([]));
    assert_eq!(list["closed"][0]["id"], action.as_str());
    let again = b
        .request(json!({"op":"decide_action","session":session,"action":action,"decision":"deny"}))
        .await
        .unwrap();
    assert_eq!(
        again["message"],
        format!("action {action} was already decided")
    );
    let bad = b
        .request(json!({"op":"decide_action","session":session,"action":action,"decision":"maybe"}))
        .await
        .unwrap();
    assert_eq!(
        bad["message"],
        "decide_action requires action and decision: allow or deny"
    );
}

#[tokio::test]
async fn a_deferred_action_can_be_closed_and_reopened() {
    let env = Env::new();
    let project = env.project("app");
    let daemon = env.daemon().await;
    let mut a = daemon.client().await.unwrap();
    let session = create_session(&mut a, &project).await.unwrap();
    let events = turn(&mut a, &session, "approve rm -rf /").await.unwrap();
    let action = events
        .iter()
        .find(|e| e["type"] == "action_deferred")
        .and_then(|e| e["id"].as_str())
        .unwrap()
        .to_string();
    let closed = a
        .request(json!({"op":"item_close","kind":"action","item":action,"reason":"not now"}))
        .await
        .unwrap();
    assert_eq!(closed["type"], "item_closed");
    assert_eq!(closed["item"], action.as_str());
    let list = a.recv_type("actions", None).await.unwrap();
    assert_eq!(list["actions"], json!([]));
    assert_eq!(list["closed"][0]["closed_reason"], "not now");
    let err = a
        .request(json!({"op":"decide_action","session":session,"action":action,"decision":"allow"}))
        .await
        .unwrap();
    assert!(err["message"].as_str().unwrap().contains("closed"), "{err}");
    let reopened = a
        .request(json!({"op":"item_reopen","kind":"action","item":action}))
        .await
        .unwrap();
    assert_eq!(reopened["type"], "item_reopened");
    let list = a.request(json!({"op":"actions_list"})).await.unwrap();
    assert_eq!(list["actions"][0]["id"], action.as_str());
}

#[tokio::test]
async fn a_watcher_that_disconnects_leaves_the_session_unattended_for_everyone_to_see() {
    let env = Env::new();
    let project = env.project("app");
    let daemon = env.daemon().await;
    let mut a = daemon.client().await.unwrap();
    let mut b = daemon.client().await.unwrap();
    let session = create_session(&mut a, &project).await.unwrap();
    a.request(json!({"op":"watch","session":session}))
        .await
        .unwrap();
    b.recv_until(|f| f["type"] == "sessions" && f["sessions"][0]["watchers"] == 1)
        .await
        .unwrap();
    a.close().await;
    b.recv_until(|f| f["type"] == "sessions" && f["sessions"][0]["watchers"] == 0)
        .await
        .unwrap();
    let attended = b
        .recv_until(|f| {
            // The engine's `attended: true` for the watch may still be on its way.
            f["type"] == "attended" && f["attended"] == false && f["session"] == session.as_str()
        })
        .await
        .unwrap();
    assert_eq!(attended["attended"], false);
}
