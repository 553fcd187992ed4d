//! The JuCode gateway with the real Claude Code and Codex CLIs: a session created with
//! `jucode_gateway` answers a `user_message` from the fake gateway's script
//! (`FakeModel::gateway`, which refuses any model request without the gateway key), its model
//! requests went to the gateway's paths with the login's key, the user's own provider (a plain
//! `FakeModel`, named by the user's environment or config) saw nothing and never had its key
//! sent to the gateway, and no user config file holds the gateway key. Then `set_gateway`
//! false: the restarted CLI continues the conversation and its next turn goes, with the
//! history, to the user's own provider and not the gateway; once the gateway process is gone
//! no file of the user's home holds the key. For Codex also the other way: a session started
//! on the user's provider and switched onto the gateway.
//!
//! Found with these (DECISIONS.md, "JuCode gateway"): Claude Code sends the user's own key
//! (`ANTHROPIC_API_KEY`, an `apiKeyHelper`) as `x-api-key` next to the gateway's bearer token
//! unless the session's settings blank them; Codex will not `thread/resume` a thread on another
//! provider than its own (so a switch forks it); while a gateway Codex runs, its shell snapshot
//! under `~/.codex/shell_snapshots/` holds the key (removed when the process exits).
//!
//! `JUCODE_RECORD=1` also rewrites `fixtures/engines/codex-0.171.0-app-server-fork.jsonl` (the
//! app-server forking the thread after the switch), which `tests/gateway.rs` replays.
//!
//! Slow and needing the real CLIs, so ignored: `bash scripts/install-engines.sh`, then
//!   cargo build -p jucode-daemon --bins
//!   cargo nextest run -p jucode-daemon --run-ignored only -E 'binary(gateway_real)'
//! The CLIs come from `CLAUDE_BIN` / `CODEX_BIN` or `target/peers/npm/node_modules/.bin`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use jucode_testsupport::fake_model::{FakeModel, GatewayRequest};
use jucode_testsupport::real_cli::{CLAUDE_KEY, cli, write_claude_state, write_codex_config};
use jucode_testsupport::{Client, Daemon, DaemonBuilder, TestHome, http_with};
use serde_json::json;

/// The JuCode login's token: the daemon hands it to the engines as the gateway key.
const TOKEN: &str = "gateway-real-token-9d2e";

/// The key of the user's own provider (the plain fake).
const USER_KEY: &str = CLAUDE_KEY;

/// What the user's `apiKeyHelper` prints (Claude Code).
const HELPER_KEY: &str = "sk-ant-helper-key-of-the-user";

/// A signed-in user's home (under the target dir: Codex will not set up its helpers under
/// /tmp), the fake gateway behind the login, and the user's own provider.
struct World {
    env: TestHome,
    project: PathBuf,
    gateway: FakeModel,
    plain: FakeModel,
}

impl World {
    async fn new() -> World {
        let env = TestHome::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        let project = std::fs::canonicalize(env.project("app")).unwrap();
        let gateway = FakeModel::gateway(TOKEN, json!([])).await.unwrap();
        let plain = FakeModel::start().await.unwrap();
        std::fs::create_dir_all(env.home()).unwrap();
        std::fs::write(
            env.home().join("auth.json"),
            json!({"gateway": {"url": gateway.base_url(), "token": TOKEN}}).to_string(),
        )
        .unwrap();
        World {
            env,
            project,
            gateway,
            plain,
        }
    }

    fn daemon(&self) -> DaemonBuilder {
        Daemon::builder(&self.env.home()).env("NO_PROXY", "127.0.0.1,localhost")
    }

    /// Every file of the user's home holding the gateway key, but the login and those under
    /// `allowed`.
    fn files_with_token(&self, allowed: &[PathBuf]) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut stack = vec![self.env.root().to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                // Not followed: Codex links its own binary into its home.
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    stack.push(path);
                } else if kind.is_file()
                    && path != self.env.home().join("auth.json")
                    && !allowed.iter().any(|a| path.starts_with(a))
                    && std::fs::read(&path)
                        .is_ok_and(|b| String::from_utf8_lossy(&b).contains(TOKEN))
                {
                    found.push(path);
                }
            }
        }
        found
    }

    /// The gateway's log, for failure messages.
    fn gateway_log(&self) -> String {
        format!("{:#?}", self.gateway.gateway_requests())
    }

    /// What reached the gateway: every request under `prefix`, admitted with the key, none
    /// carrying the user's own key; and at least one of them a model request of the script.
    fn assert_through_gateway(&self, prefix: &str) {
        let seen = self.gateway.gateway_requests();
        assert!(!seen.is_empty(), "nothing reached the gateway");
        for r in &seen {
            assert!(r.path.starts_with(prefix), "{r:?} outside {prefix}");
            assert!(r.admitted, "refused: {r:?}");
            assert!(
                !carries(r, USER_KEY) && !carries(r, HELPER_KEY),
                "the user's own key went to the gateway: {r:?}"
            );
        }
        let model = self.gateway.model_requests();
        assert!(
            !model.is_empty(),
            "no model request: {}",
            self.gateway_log()
        );
        assert!(
            model.iter().all(|r| r.path.starts_with(prefix)),
            "{model:?}"
        );
    }
}

fn carries(r: &GatewayRequest, key: &str) -> bool {
    [&r.api_key, &r.authorization]
        .into_iter()
        .flatten()
        .any(|v| v.contains(key))
}

/// Sends `text` and waits for the script's answer to it and the turn's end.
async fn turn(c: &mut Client, session: &str, text: &str, world: &World) {
    c.send(json!({"op": "user_message", "session": session, "content": text}))
        .await
        .unwrap();
    let answer = format!("user said: {text}");
    let mut reply = String::new();
    let mut errors = Vec::new();
    let got = c
        .recv_until(|f| {
            if f["session"] == session {
                match f["type"].as_str() {
                    Some("assistant_delta") => reply.push_str(f["delta"].as_str().unwrap_or("")),
                    Some("error") => errors.push(f.clone()),
                    _ => {}
                }
            }
            reply.contains(&answer)
        })
        .await;
    if let Err(e) = got {
        panic!(
            "{e}: no {answer:?} (so far {reply:?}, errors {errors:?}); gateway saw {}; the plain \
             model saw {:#?}",
            world.gateway_log(),
            world.plain.recorded()
        );
    }
    c.recv_until(|f| f["session"] == session && f["type"] == "status" && f["message"] == "ready")
        .await
        .unwrap();
}

async fn create(c: &mut Client, world: &World, engine: &str) -> String {
    let created = c
        .request(
            json!({"op": "session_create", "cwd": world.project, "engine": engine,
                        "options": {"jucode_gateway": true}}),
        )
        .await
        .unwrap();
    assert_eq!(created["type"], "session_created", "{created}");
    created["session"].as_str().unwrap().to_string()
}

/// `set_gateway` false, answered, and the restarted process announced.
async fn off_the_gateway(c: &mut Client, session: &str) {
    let r = c
        .request(json!({"op": "set_gateway", "session": session, "gateway": false}))
        .await
        .unwrap();
    assert_eq!(r["type"], "gateway_set", "{r}");
}

#[tokio::test]
#[ignore = "slow: real Claude Code CLI through the fake JuCode gateway"]
async fn a_claude_code_gateway_session_answers_through_the_gateway_then_off_it_through_the_users_provider()
 {
    let world = World::new().await;
    let config_dir = world.env.root().join(".claude");
    write_claude_state(&config_dir, &world.project);
    // The user's own provider, as a user sets it: in the environment the daemon inherits, and
    // a key helper in their settings.
    let helper = world.env.root().join("key-helper.sh");
    std::fs::write(&helper, format!("#!/bin/sh\necho {HELPER_KEY}\n")).unwrap();
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        config_dir.join("settings.json"),
        json!({"apiKeyHelper": helper}).to_string(),
    )
    .unwrap();
    let daemon = world
        .daemon()
        .env("CLAUDE_BIN", cli("claude", "CLAUDE_BIN"))
        .env("CLAUDE_CONFIG_DIR", &config_dir)
        .env("ANTHROPIC_BASE_URL", world.plain.base_url())
        .env("ANTHROPIC_API_KEY", USER_KEY)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .start()
        .await
        .unwrap();
    let mut c = daemon.client().await.unwrap();
    let session = create(&mut c, &world, "claude").await;
    turn(&mut c, &session, "hello through the gateway", &world).await;
    world.assert_through_gateway("/v1/gateway/anthropic/");
    assert_eq!(
        world.plain.recorded(),
        Vec::new(),
        "the user's provider saw nothing"
    );
    let settings = world
        .env
        .home()
        .join(format!("daemon/claude-gateway-{session}.json"));
    assert_eq!(
        world.files_with_token(std::slice::from_ref(&settings)),
        Vec::<PathBuf>::new(),
        "no user config holds the key"
    );

    // Off the gateway: the restarted Claude Code resumes the conversation on the user's own
    // provider, and the gateway sees nothing more.
    let before = world.gateway.gateway_requests().len();
    off_the_gateway(&mut c, &session).await;
    turn(&mut c, &session, "now on my own provider", &world).await;
    history_carried(&world.plain, "hello through the gateway");
    assert_eq!(
        world.gateway.gateway_requests().len(),
        before,
        "{}",
        world.gateway_log()
    );
    assert!(
        !settings.exists(),
        "the settings file went with the gateway"
    );
    assert_eq!(world.files_with_token(&[]), Vec::<PathBuf>::new());
    assert!(daemon.logs().iter().all(|l| !l.contains(TOKEN)));
}

/// A daemon running the real Codex with the user's own provider as a user sets it: their
/// config.toml and its key variable. With `JUCODE_RECORD=1` each app-server runs behind
/// `engine-recorder`, its frames written to `<home>/recorded/start-<n>.jsonl`.
async fn codex_daemon(world: &World) -> Daemon {
    let codex_home = world.env.root().join(".codex");
    write_codex_config(&codex_home, &world.plain.base_url(), &world.project);
    let real = cli("codex", "CODEX_BIN");
    let mut bin = real.clone();
    let mut daemon = world.daemon();
    if std::env::var("JUCODE_RECORD").is_ok_and(|v| v == "1") {
        let recorder =
            jucode_testsupport::build_bin("engine-recorder", "jucode-fake-engines").unwrap();
        let dir = world.env.root().join("recorded");
        std::fs::create_dir_all(&dir).unwrap();
        bin = world.env.root().join("codex-recorded");
        let script = format!(
            "#!/bin/sh\nn=$(ls '{dir}' | wc -l)\nRECORD_OUT='{dir}/start-'$n.jsonl exec '{}' \"$@\"\n",
            recorder.display(),
            dir = dir.display()
        );
        std::fs::write(&bin, script).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        daemon = daemon.env("RECORD_TARGET", &real);
    }
    daemon
        .env("CODEX_BIN", bin)
        .env("CODEX_HOME", &codex_home)
        .env("FAKE_API_KEY", USER_KEY)
        .env("RUST_LOG", "warn")
        .start()
        .await
        .unwrap()
}

/// With `JUCODE_RECORD=1`: the frames of the `n`th app-server start become `fixture`.
fn keep_recording(world: &World, n: usize, fixture: &str) {
    if std::env::var("JUCODE_RECORD").is_ok_and(|v| v == "1") {
        let from = world.env.root().join(format!("recorded/start-{n}.jsonl"));
        let to = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/engines")
            .join(fixture);
        std::fs::copy(&from, &to).unwrap();
    }
}

/// The last model request `model` got carried the earlier turn `text` (the conversation went
/// along to the new process).
fn history_carried(model: &FakeModel, text: &str) {
    let last = model.model_requests().pop();
    assert!(
        last.as_ref()
            .is_some_and(|r| r.body.to_string().contains(text)),
        "{text:?} not in the last request: {last:#?}"
    );
}

#[tokio::test]
#[ignore = "slow: real Codex CLI through the fake JuCode gateway"]
async fn a_codex_gateway_session_answers_through_the_gateway_then_off_it_through_the_users_provider()
 {
    let world = World::new().await;
    let daemon = codex_daemon(&world).await;
    let mut c = daemon.client().await.unwrap();
    let session = create(&mut c, &world, "codex").await;
    turn(&mut c, &session, "hello through the gateway", &world).await;
    world.assert_through_gateway("/v1/gateway/openai/v1/");
    assert_eq!(
        world.plain.recorded(),
        Vec::new(),
        "the user's provider saw nothing"
    );
    // Codex snapshots its shell's environment, the key with it, while it runs (see the top).
    let snapshots = world.env.root().join(".codex/shell_snapshots");
    assert_eq!(
        world.files_with_token(std::slice::from_ref(&snapshots)),
        Vec::<PathBuf>::new(),
        "no user config holds the key"
    );

    // Off the gateway: a new app-server forks the thread without the gateway's overrides; its
    // next turn goes to the user's own provider with the conversation so far.
    let before = world.gateway.gateway_requests().len();
    off_the_gateway(&mut c, &session).await;
    turn(&mut c, &session, "what did I say?", &world).await;
    history_carried(&world.plain, "hello through the gateway");
    assert_eq!(
        world.gateway.gateway_requests().len(),
        before,
        "{}",
        world.gateway_log()
    );
    // The gateway's app-server is gone, and its snapshot with it.
    assert_eq!(world.files_with_token(&[]), Vec::<PathBuf>::new());
    assert!(daemon.logs().iter().all(|l| !l.contains(TOKEN)));
    keep_recording(&world, 1, "codex-0.171.0-app-server-fork.jsonl");
}

#[tokio::test]
#[ignore = "slow: real Codex CLI through the fake JuCode gateway"]
async fn a_codex_session_switched_onto_the_gateway_answers_through_it_with_its_history() {
    let world = World::new().await;
    let daemon = codex_daemon(&world).await;
    let mut c = daemon.client().await.unwrap();
    let created = c
        .request(json!({"op": "session_create", "cwd": world.project, "engine": "codex"}))
        .await
        .unwrap();
    let session = created["session"].as_str().unwrap().to_string();
    turn(&mut c, &session, "hello on my own provider", &world).await;
    assert!(
        world.gateway.gateway_requests().is_empty(),
        "{}",
        world.gateway_log()
    );
    let before = world.plain.recorded().len();
    let r = c
        .request(json!({"op": "set_gateway", "session": session, "gateway": true}))
        .await
        .unwrap();
    assert_eq!(r["type"], "gateway_set", "{r}");
    turn(&mut c, &session, "now through the gateway", &world).await;
    world.assert_through_gateway("/v1/gateway/openai/v1/");
    history_carried(&world.gateway, "hello on my own provider");
    assert_eq!(
        world.plain.recorded().len(),
        before,
        "{:#?}",
        world.plain.recorded()
    );
    assert!(daemon.logs().iter().all(|l| !l.contains(TOKEN)));
}

/// The fake gateway itself: the catalog and the model paths refuse a request without the key.
#[tokio::test]
async fn the_fake_gateway_refuses_requests_without_its_key() {
    let groups = json!([{"id": "std", "name": "Standard", "multiplier": 1.0, "models": ["m"]}]);
    let gateway = FakeModel::gateway(TOKEN, groups.clone()).await.unwrap();
    let body = json!({"model": "claude-x", "max_tokens": 5, "stream": false,
                      "messages": [{"role": "user", "content": "hi"}]})
    .to_string();
    let bearer = format!("Bearer {TOKEN}");
    let (messages, responses) = (
        "/v1/gateway/anthropic/v1/messages",
        "/v1/gateway/openai/v1/responses",
    );
    let cases = [
        ("GET", "/v1/gateway/groups", None, 401),
        (
            "GET",
            "/v1/gateway/groups",
            Some(("authorization", &*bearer)),
            200,
        ),
        ("POST", messages, None, 401),
        ("POST", messages, Some(("x-api-key", "wrong")), 401),
        ("POST", messages, Some(("x-api-key", TOKEN)), 200),
        ("POST", responses, Some(("x-api-key", TOKEN)), 401),
        ("POST", responses, Some(("authorization", &*bearer)), 200),
        ("POST", "/v1/messages", Some(("x-api-key", TOKEN)), 404),
    ];
    for (method, path, header, status) in cases {
        let headers: Vec<(&str, &str)> = header.into_iter().collect();
        let r = http_with(gateway.addr, method, path, &headers, Some(body.as_bytes()))
            .await
            .unwrap();
        assert_eq!(r.status, status, "{method} {path} {headers:?}: {r:?}");
        if status == 401 {
            let error = r.json().unwrap();
            assert_eq!(error["error"]["type"], "authentication_error", "{error}");
        }
        if status == 200 && path.ends_with("groups") {
            assert_eq!(r.json().unwrap()["groups"], groups);
        }
    }
    let seen = gateway.gateway_requests();
    assert_eq!(seen.len(), cases.len());
    assert_eq!(
        seen.iter().map(|r| r.admitted).collect::<Vec<_>>(),
        [false, true, false, false, true, false, true, false]
    );
    assert_eq!(seen[3].api_key.as_deref(), Some("wrong"));
    // Only the two admitted model requests reached the script, at their full paths.
    let model: Vec<String> = gateway
        .model_requests()
        .into_iter()
        .map(|r| r.path)
        .collect();
    assert_eq!(model, [messages, responses]);
    assert_eq!(gateway.recorded().len(), 2, "{:?}", gateway.recorded());
}
