//! The start gate with the real Claude Code and Codex CLIs against the fake model server:
//! `requirement_begin` on a session of each, confirmed to the plan and then to the work. What
//! the model server received proves the CLI itself was held read-only while the gate stood
//! (Claude Code in plan mode, Codex with a read-only sandbox), though the client asked for
//! another mode in between, and worked in the mode asked for once the gate was gone.
//!
//! Slow and needing the real CLIs, so ignored: `bash scripts/install-engines.sh`, then
//!   cargo build -p jucode-daemon --bins
//!   cargo nextest run -p jucode-daemon --run-ignored only -E 'binary(requirements_gate_real)'
//! (`cargo xtask interop` runs it too). The CLIs come from `CLAUDE_BIN` / `CODEX_BIN` or
//! `target/peers/npm/node_modules/.bin`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::real_cli::{CLAUDE_KEY, cli, write_claude_state, write_codex_config};
use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

struct World {
    env: TestHome,
    project: PathBuf,
    model: FakeModel,
}

impl World {
    async fn new() -> World {
        // Under the target dir: Codex will not set up its helpers under /tmp.
        let env = TestHome::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        let project = std::fs::canonicalize(env.project("app")).unwrap();
        let model = FakeModel::start().await.unwrap();
        World {
            env,
            project,
            model,
        }
    }

    /// The body of every model request so far, as text.
    fn bodies(&self) -> Vec<String> {
        self.model
            .model_requests()
            .iter()
            .map(|r| r.body.to_string())
            .collect()
    }
}

fn find<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{id} in {list}"))
}

/// Reads `requirements` broadcasts until `id`'s entry has `status`; returns the entry.
async fn until_status(c: &mut Client, id: &str, status: &str, world: &World) -> Value {
    let got = c
        .recv_until(|f| f["type"] == "requirements" && find(f, id)["status"] == status)
        .await;
    match got {
        Ok(frame) => find(&frame, id).clone(),
        Err(e) => panic!(
            "{e}: {id} never {status}; the model saw {:#?}",
            world.bodies()
        ),
    }
}

/// The model request made for the turn whose user text contains `marker`.
fn request_for(world: &World, marker: &str) -> String {
    world
        .bodies()
        .into_iter()
        .rev()
        .find(|b| b.contains(marker))
        .unwrap_or_else(|| panic!("no model request carried {marker:?}: {:#?}", world.bodies()))
}

/// Walks one session through the gate. `read_only` / `working` judge a model request body:
/// held read-only, and working in the mode asked for (`edits`).
async fn walk_the_gate(
    c: &mut Client,
    world: &World,
    session: &str,
    read_only: impl Fn(&str) -> bool,
    working: impl Fn(&str) -> bool,
) {
    let made = c
        .request(json!({"op":"requirement_create","text":"make search fast"}))
        .await
        .unwrap();
    let r = made["requirement"].as_str().unwrap().to_string();
    let begun = c
        .request(
            json!({"op":"requirement_begin","requirement":r,"session":session,
            "plan":true,"mode":"edits","lang":"en"}),
        )
        .await
        .unwrap();
    assert_eq!(begun["type"], "requirement_begun", "{begun}");
    until_status(c, &r, "confirm", world).await;
    let understand = request_for(world, "Before you change anything");
    assert!(
        read_only(&understand),
        "understand not read-only: {understand}"
    );

    // The client asks for full access meanwhile: the CLI stays read-only.
    c.send(json!({"op":"set_approval_mode","session":session,"mode":"full-access"}))
        .await
        .unwrap();
    let held = c
        .recv_until(|f| f["type"] == "requirements" && find(f, &r)["gate"]["mode"] == "full-access")
        .await
        .unwrap();
    assert_eq!(find(&held, &r)["status"], "confirm");
    let to_plan = c
        .request(json!({"op":"requirement_confirm","requirement":r,"lang":"en"}))
        .await
        .unwrap();
    assert_eq!(to_plan["stage"], "plan", "{to_plan}");
    until_status(c, &r, "confirm", world).await;
    let plan = request_for(world, "implementation plan");
    assert!(read_only(&plan), "plan not read-only: {plan}");

    // Back to the mode the gate works in, then go.
    c.send(json!({"op":"set_approval_mode","session":session,"mode":"auto-edit"}))
        .await
        .unwrap();
    c.recv_until(|f| f["type"] == "requirements" && find(f, &r)["gate"]["mode"] == "auto-edit")
        .await
        .unwrap();
    let go = c
        .request(json!({"op":"requirement_confirm","requirement":r,"lang":"en"}))
        .await
        .unwrap();
    assert_eq!(go["stage"], "go", "{go}");
    // The work turn: the engine switched to the mode asked for, the turn sent, answered, ended.
    let mut modes = Vec::new();
    c.recv_until(|f| {
        if f["session"] == session && f["type"] == "approval_mode" {
            modes.push(f["mode"].clone());
        }
        f["session"] == session
            && f["type"] == "user_message"
            && f["content"]
                .as_str()
                .is_some_and(|t| t.contains("Go ahead and carry it out"))
    })
    .await
    .unwrap();
    c.recv_until(|f| {
        if f["session"] == session && f["type"] == "approval_mode" {
            modes.push(f["mode"].clone());
        }
        f["session"] == session && f["type"] == "status" && f["message"] == "ready"
    })
    .await
    .unwrap();
    assert_eq!(modes.last(), Some(&json!("auto-edit")), "{modes:?}");
    let done = until_status(c, &r, "review", world).await;
    assert!(done["gate"].is_null(), "{done}");
    let work = request_for(world, "Go ahead and carry it out");
    assert!(!read_only(&work), "still read-only after the gate: {work}");
    assert!(working(&work), "not in the mode asked for: {work}");
}

#[tokio::test]
#[ignore = "slow: real Claude Code CLI through the start gate"]
async fn claude_code_is_held_in_plan_mode_by_the_gate_and_then_edits() {
    let world = World::new().await;
    let config_dir = world.env.root().join(".claude");
    write_claude_state(&config_dir, &world.project);
    let daemon = Daemon::builder(&world.env.home())
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("CLAUDE_BIN", cli("claude", "CLAUDE_BIN"))
        .env("CLAUDE_CONFIG_DIR", &config_dir)
        .env("ANTHROPIC_BASE_URL", world.model.base_url())
        .env("ANTHROPIC_API_KEY", CLAUDE_KEY)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .start()
        .await
        .unwrap();
    let mut c = daemon.client().await.unwrap();
    let created = c
        .request(json!({"op":"session_create","cwd":world.project,"engine":"claude"}))
        .await
        .unwrap();
    let session = created["session"].as_str().unwrap().to_string();
    // Claude Code tells the model when plan mode starts and when it ends; the latest of the
    // two in a request is the mode that turn ran in.
    let plan_mode =
        |body: &str| body.rfind("Plan mode is active") > body.rfind("You have exited plan mode");
    walk_the_gate(&mut c, &world, &session, plan_mode, |b| {
        b.contains("You have exited plan mode")
    })
    .await;
}

#[tokio::test]
#[ignore = "slow: real Codex CLI through the start gate"]
async fn codex_is_held_read_only_by_the_gate_and_then_writes_the_workspace() {
    let world = World::new().await;
    let codex_home = world.env.root().join(".codex");
    write_codex_config(&codex_home, &world.model.base_url(), &world.project);
    let daemon = Daemon::builder(&world.env.home())
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("CODEX_BIN", cli("codex", "CODEX_BIN"))
        .env("CODEX_HOME", &codex_home)
        .env("FAKE_API_KEY", CLAUDE_KEY)
        .env("RUST_LOG", "warn")
        .start()
        .await
        .unwrap();
    let mut c = daemon.client().await.unwrap();
    let created = c
        .request(json!({"op":"session_create","cwd":world.project,"engine":"codex"}))
        .await
        .unwrap();
    let session = created["session"].as_str().unwrap().to_string();
    // Codex states its sandbox to the model in each turn's environment context.
    let read_only = |body: &str| body.contains("read-only") && !body.contains("workspace-write");
    walk_the_gate(&mut c, &world, &session, read_only, |b| {
        b.contains("workspace-write")
    })
    .await;
}
