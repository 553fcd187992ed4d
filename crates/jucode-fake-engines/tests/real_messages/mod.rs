//! Exactly once across a SIGKILL with the real Claude Code and Codex: an agent's session on the
//! real CLI is in a turn that never ends (`HANG:`), a second message waits in the adapter's
//! queue, and the daemon is killed. At the next start the daemon reads the CLI's own saved
//! conversation (Claude Code's session JSONL, Codex's rollout), finds the second message absent
//! and sends it again, once and unannounced, to the same session, which the CLI resumes on the
//! conversation it saved.

use std::path::Path;

use jucode_testsupport::{Client, Daemon};
use serde_json::{Value, json};

use crate::real::*;

fn daemon_home(world: &World) -> std::path::PathBuf {
    world.dir.path().join("jucode")
}

#[derive(Clone, Copy, PartialEq)]
enum Engine {
    Claude,
    Codex,
}

/// The daemon with the CLI on the fake model for every session, options or not (a delivery
/// starts and reopens agent sessions without any).
async fn daemon(world: &World, engine: Engine, cli: &Cli) -> Daemon {
    jucode_testsupport::build_bin("jucode-daemon", "jucode-daemon").unwrap();
    let (var, env) = match engine {
        Engine::Claude => ("CLAUDE_BIN", world.anthropic_env()),
        Engine::Codex => ("CODEX_BIN", world.codex_env(&crate::codex_config(world))),
    };
    let mut b = Daemon::builder(&daemon_home(world)).env(var, &cli.bin);
    for (name, value) in env.as_object().unwrap() {
        // HOME stays the daemon's own (the builder sets it); the CLI's config dir is named.
        if name != "HOME" {
            b = b.env(name, value.as_str().unwrap());
        }
    }
    b.start().await.unwrap()
}

async fn send(c: &mut Client, body: &str) -> String {
    let reply = c
        .request(json!({"op": "message_send", "agent": "scout", "body": body}))
        .await
        .unwrap();
    assert_eq!(reply["type"], "message_accepted", "{reply}");
    reply["message"].as_str().unwrap().to_string()
}

fn kinds_of(world: &World, id: &str) -> Vec<String> {
    std::fs::read_to_string(daemon_home(world).join("daemon/messages.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["id"] == id)
        .map(|r| r["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The user texts of the session's saved conversation, as the daemon reads them.
fn saved_users(world: &World, engine: Engine, session: &str) -> Vec<String> {
    use jucode_adapters::history;
    let items = match engine {
        Engine::Claude => history::claude_transcript_path(&world.claude_config(), session)
            .map(|p| history::claude_transcript(&p)),
        Engine::Codex => {
            // The session's thread, from the adapter's map.
            let map = daemon_home(world).join("daemon/codex-threads.json");
            let map: Value = std::fs::read_to_string(map)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default();
            let thread = map["sessions"][session].as_str().unwrap_or(session);
            history::codex_rollout_path(&world.home.join(".codex"), thread)
                .map(|p| history::codex_transcript(&p))
        }
    };
    items
        .unwrap_or_default()
        .into_iter()
        .filter_map(|item| match item {
            jucode_protocol::serve::TranscriptItem::User { content, .. } => Some(content),
            _ => None,
        })
        .collect()
}

/// SIGKILLs the process groups led by processes working in `cwd`: the CLI the killed daemon
/// left behind (it leads its own group), still in its endless turn.
fn kill_orphans(cwd: &Path) {
    let cwd = std::fs::canonicalize(cwd).unwrap();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let in_cwd = std::fs::read_link(entry.path().join("cwd")).is_ok_and(|c| c == cwd);
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // Field 5 (after the parenthesised name) is the process group.
        let leads = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2).map(str::to_string))
            .is_some_and(|pgid| pgid == pid.to_string());
        if in_cwd && leads {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Claude Code: bash scripts/install-engines.sh"]
async fn claude_a_message_queued_at_a_kill_is_sent_again_once() {
    queued_at_a_kill(Engine::Claude, claude_cli()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Codex: bash scripts/install-engines.sh"]
async fn codex_a_message_queued_at_a_kill_is_sent_again_once() {
    queued_at_a_kill(Engine::Codex, codex_cli()).await;
}

async fn queued_at_a_kill(engine: Engine, cli: Cli) {
    let world = World::new().await;
    let agent = daemon_home(&world).join("agents/scout");
    std::fs::create_dir_all(&agent).unwrap();
    let name = if engine == Engine::Claude {
        "claude"
    } else {
        "codex"
    };
    let config = json!({"name": "Scout", "cwd": world.cwd, "engine": name});
    std::fs::write(agent.join("agent.json"), config.to_string()).unwrap();

    let mut d = daemon(&world, engine, &cli).await;
    let mut c = d.client().await.unwrap();
    send(&mut c, "HANG: first").await;
    let delivered = c.recv_type("message_delivered", None).await.unwrap();
    let session = delivered["session"].as_str().unwrap().to_string();
    // The model is streaming the endless answer: the CLI took and saved the first message.
    c.recv_until(|f| f["type"] == "assistant_delta" && f["session"] == session.as_str())
        .await
        .unwrap();
    let second = send(&mut c, "second").await;
    c.recv_until(|f| f["type"] == "message_delivered" && f["id"] == second.as_str())
        .await
        .unwrap();
    assert_eq!(kinds_of(&world, &second), ["message", "delivered"]);
    d.kill9_and_wait().await.unwrap();
    drop(c);
    // The CLIs write their file a moment after the turn begins: the one left behind is let
    // finish that write (bounded) before it goes.
    for _ in 0..200 {
        if !saved_users(&world, engine, &session).is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    kill_orphans(&world.cwd);
    assert_eq!(saved_users(&world, engine, &session), ["HANG: first"]);

    let mut d = daemon(&world, engine, &cli).await;
    let mut c = d.client().await.unwrap();
    let echo = c
        .recv_until(|f| f["type"] == "user_message" || f["type"] == "message_delivered")
        .await
        .unwrap();
    assert_eq!(echo["type"], "user_message", "announced again: {echo}");
    assert_eq!(echo["content"], "second");
    assert_eq!(echo["session"], session.as_str());
    let mut said = String::new();
    loop {
        let f = c
            .recv_until(|f| f["session"] == session.as_str())
            .await
            .unwrap();
        assert_ne!(f["type"], "error", "{f}");
        if f["type"] == "assistant_delta" {
            said.push_str(f["delta"].as_str().unwrap_or_default());
        }
        if f["type"] == "status" && f["message"] == "ready" {
            break;
        }
    }
    assert!(said.contains("user said: second"), "{said}");
    assert_eq!(
        kinds_of(&world, &second),
        ["message", "delivered", "delivered", "received"]
    );
    let users = saved_users(&world, engine, &session);
    assert_eq!(
        users.iter().filter(|u| *u == "second").count(),
        1,
        "{users:?}"
    );
    d.stop().await.unwrap();
}
