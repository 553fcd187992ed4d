//! The JuCode gateway on the real daemon binary, against a fake JuCode API on loopback:
//! `gateway_catalog` signed in, not signed in and with the gateway down; Claude Code and Codex
//! sessions (their fakes, behind a wrapper that records what each process was given) with
//! `jucode_gateway`, proving the endpoint and key reach the process and no user config file
//! holds them; `set_gateway` restarting the process (Codex: a new app-server forking the
//! thread, after a running turn or at once); the `session_list` flag; refusals for
//! other engines; `engine: "default"`.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport -p jucode-fake-engines`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use jucode_testsupport::fake_skills::FakeSkills;
use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

const TOKEN: &str = "gateway-test-token-5f1c";

fn fixture(name: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/engines");
    root.join(name).display().to_string()
}

/// A wrapper around a fake engine CLI: each start appends its arguments, the gateway key
/// variable and the `--settings` file's content (as they were at start) to `record`, then
/// runs the fake.
fn recording_bin(env: &TestHome, fake: &str, record: &Path) -> PathBuf {
    recording_bin_then(env, fake, record, None)
}

/// [`recording_bin`] whose later starts replay `later` (a restarted Codex forks its thread).
fn recording_bin_then(env: &TestHome, fake: &str, record: &Path, later: Option<&str>) -> PathBuf {
    let real = jucode_testsupport::build_bin(fake, "jucode-fake-engines").unwrap();
    let later = later
        .map(|l| {
            format!(
                "if [ -s '{}' ]; then export FAKE_ENGINE_SCRIPT='{l}'; fi\n",
                record.display()
            )
        })
        .unwrap_or_default();
    let script = format!(
        "#!/bin/sh\n{later}\
         {{ echo '--- start'; for a in \"$@\"; do echo \"arg $a\"; done\n\
           echo \"key ${{JUCODE_GATEWAY_KEY:-none}}\"\n\
           for a in \"$@\"; do case \"$a\" in --settings=*) echo \"settings $(cat \"${{a#--settings=}}\")\";; esac; done\n\
           echo '--- end'\n\
         }} >> '{}'\n\
         exec '{}' \"$@\"\n",
        record.display(),
        real.display()
    );
    let path = env.root().join(format!("{fake}-recorded"));
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

async fn signed_in(env: &TestHome, api: &FakeSkills, config: Value) -> Daemon {
    std::fs::create_dir_all(env.home()).unwrap();
    std::fs::write(
        env.home().join("auth.json"),
        json!({"gateway": {"url": api.url(), "token": TOKEN}}).to_string(),
    )
    .unwrap();
    Daemon::builder(&env.home())
        .config(&config)
        .start()
        .await
        .unwrap()
}

/// The first `n` starts the wrapper recorded, once it has recorded them (a process starts after
/// the event that announces its session).
async fn starts(record: &Path, n: usize) -> Vec<String> {
    for _ in 0..400 {
        let text = std::fs::read_to_string(record).unwrap_or_default();
        if text.matches("--- end\n").count() >= n {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .split("--- start\n")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

async fn row(c: &mut Client, session: &str) -> Value {
    let list = c.request(json!({"op": "session_list"})).await.unwrap();
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session"] == session)
        .cloned()
        .unwrap_or_else(|| panic!("{session} not in {list}"))
}

/// Every file under `dir` that holds the token, but the login itself and `allowed`.
fn files_with_token(dir: &Path, allowed: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if !p.ends_with(".jucode/auth.json")
                && !allowed.contains(&p)
                && std::fs::read(&p)
                    .map(|b| String::from_utf8_lossy(&b).contains(TOKEN))
                    .unwrap_or(false)
            {
                found.push(p);
            }
        }
    }
    found
}

#[tokio::test]
async fn the_catalog_lists_the_users_models_and_the_gateways_groups() {
    let env = TestHome::new();
    let api = FakeSkills::start().await.unwrap();
    let groups = json!([{"id": "std", "name": "Standard", "multiplier": 1.0,
                         "models": ["claude-sonnet-4-5", "gpt-5"]},
                        {"id": "pro", "name": "Pro", "multiplier": 2.5, "models": ["claude-opus-4-1"]}]);
    api.serve("/v1/gateway/groups", json!({"groups": groups}).to_string());
    let d = signed_in(
        &env,
        &api,
        json!({"jucode_models": ["claude-sonnet-4-5", {"name": "gpt-5"}]}),
    )
    .await;
    let mut c = d.client().await.unwrap();
    let r = c.request(json!({"op": "gateway_catalog"})).await.unwrap();
    assert_eq!(
        r,
        json!({"type": "gateway_catalog", "id": r["id"],
               "models": ["claude-sonnet-4-5", {"name": "gpt-5"}], "groups": groups})
    );
    assert_eq!(
        api.requests(),
        vec![(
            "/v1/gateway/groups".to_string(),
            Some(format!("Bearer {TOKEN}"))
        )]
    );
    // A paired device may read it too.
    let mut phone = d.paired_device(&mut c).await.unwrap();
    let r = phone
        .request(json!({"op": "gateway_catalog"}))
        .await
        .unwrap();
    assert_eq!(r["groups"], groups);
    assert!(
        d.logs().iter().all(|l| !l.contains(TOKEN)),
        "the token is never logged"
    );
}

#[tokio::test]
async fn the_catalog_is_empty_when_not_signed_in_and_has_no_groups_when_the_gateway_is_down() {
    let env = TestHome::new();
    let d = Daemon::builder(&env.home())
        .config(&json!({"jucode_models": ["m"]}))
        .start()
        .await
        .unwrap();
    let mut c = d.client().await.unwrap();
    let r = c.request(json!({"op": "gateway_catalog"})).await.unwrap();
    assert_eq!(
        (&r["models"], &r["groups"]),
        (&json!([]), &json!([])),
        "{r}"
    );
    drop(c);
    drop(d);

    let env = TestHome::new();
    let api = FakeSkills::start().await.unwrap();
    api.fail("/v1/gateway/groups", 503);
    let d = signed_in(&env, &api, json!({"jucode_models": ["m"]})).await;
    let mut c = d.client().await.unwrap();
    let r = c.request(json!({"op": "gateway_catalog"})).await.unwrap();
    assert_eq!(
        (&r["models"], &r["groups"]),
        (&json!(["m"]), &json!([])),
        "{r}"
    );
}

#[tokio::test]
async fn a_claude_gateway_session_gets_its_own_settings_file_and_set_gateway_restarts_it() {
    let env = TestHome::new();
    let api = FakeSkills::start().await.unwrap();
    let d = signed_in(&env, &api, json!({})).await;
    let mut c = d.client().await.unwrap();
    let record = env.root().join("claude-starts.txt");
    let cwd = env.project("app");
    let options = json!({
        "bin": recording_bin(&env, "fake-claude", &record).display().to_string(),
        "env": {
            "FAKE_ENGINE_SCRIPT": fixture("claude-code-2.1.332-print-3turns.jsonl"),
            "CLAUDE_CONFIG_DIR": env.root().join(".claude").display().to_string(),
        },
        "jucode_gateway": true,
    });
    let created = c
        .request(
            json!({"op": "session_create", "cwd": cwd, "engine": "claude", "options": options}),
        )
        .await
        .unwrap();
    let session = created["session"]
        .as_str()
        .expect("session_created")
        .to_string();
    c.recv_type("startup", Some(&session)).await.unwrap();
    let settings = env
        .home()
        .join(format!("daemon/claude-gateway-{session}.json"));
    let first = &starts(&record, 1).await[0];
    assert!(
        first.contains(&format!("arg --settings={}\n", settings.display())),
        "{first}"
    );
    let expected = json!({"env": {"ANTHROPIC_BASE_URL": format!("{}/v1/gateway/anthropic", api.url()),
                                  "ANTHROPIC_AUTH_TOKEN": TOKEN, "ANTHROPIC_API_KEY": ""},
                          "apiKeyHelper": ""});
    assert!(first.contains(&format!("settings {expected}")), "{first}");
    assert_eq!(
        std::fs::metadata(&settings).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(row(&mut c, &session).await["gateway"], true);
    assert_eq!(
        files_with_token(env.root(), &[settings.clone(), record.clone()]),
        Vec::<PathBuf>::new(),
        "no user config holds the key"
    );

    // Off the gateway: the process restarts on the same conversation without the file.
    let r = c
        .request(json!({"op": "set_gateway", "session": session, "gateway": false}))
        .await
        .unwrap();
    assert_eq!(
        r,
        json!({"type": "gateway_set", "session": session, "gateway": false, "id": r["id"]})
    );
    c.recv_until(|f| f["type"] == "approval_mode" && f["session"] == session.as_str())
        .await
        .unwrap();
    let all = starts(&record, 2).await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(!all[1].contains("--settings"), "{}", all[1]);
    assert!(
        all[1].contains(&format!("arg --session-id={session}"))
            || all[1].contains(&format!("arg --resume={session}")),
        "{}",
        all[1]
    );
    assert!(
        !settings.exists(),
        "the settings file goes with the gateway"
    );
    assert!(row(&mut c, &session).await.get("gateway").is_none());

    // Back on, then closed: the file is removed with the process.
    c.request(json!({"op": "set_gateway", "session": session, "gateway": true}))
        .await
        .unwrap();
    let all = starts(&record, 3).await;
    assert!(all[2].contains("arg --settings="), "{all:?}");
    assert!(settings.exists());
    c.send(json!({"op": "session_close", "session": session}))
        .await
        .unwrap();
    c.recv_type("session_closed", Some(&session)).await.unwrap();
    for _ in 0..200 {
        if !settings.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(
        !settings.exists(),
        "the settings file is removed with the process"
    );
    assert!(
        d.logs().iter().all(|l| !l.contains(TOKEN)),
        "the token is never logged"
    );
}

#[tokio::test]
async fn a_codex_gateway_session_gets_overrides_and_the_key_in_its_environment() {
    let env = TestHome::new();
    let api = FakeSkills::start().await.unwrap();
    let d = signed_in(&env, &api, json!({})).await;
    let mut c = d.client().await.unwrap();
    let record = env.root().join("codex-starts.txt");
    let cwd = env.project("app");
    let options = json!({
        "bin": recording_bin(&env, "fake-codex", &record).display().to_string(),
        "env": {"FAKE_ENGINE_SCRIPT": fixture("codex-0.171.0-app-server-approve.jsonl"),
                "CODEX_HOME": env.root().join(".codex").display().to_string()},
        "jucode_gateway": true,
    });
    let created = c
        .request(json!({"op": "session_create", "cwd": cwd, "engine": "codex", "options": options}))
        .await
        .unwrap();
    let session = created["session"]
        .as_str()
        .expect("session_created")
        .to_string();
    let first = &starts(&record, 1).await[0];
    for arg in [
        format!(
            "arg model_providers.jucode.base_url=\"{}/v1/gateway/openai/v1\"",
            api.url()
        ),
        "arg model_providers.jucode.env_key=\"JUCODE_GATEWAY_KEY\"".to_string(),
        "arg model_provider=\"jucode\"".to_string(),
        format!("key {TOKEN}"),
    ] {
        assert!(first.contains(&format!("{arg}\n")), "{arg} not in {first}");
    }
    assert!(
        !first.contains(&format!("arg {TOKEN}")),
        "the key is not an argument"
    );
    assert_eq!(row(&mut c, &session).await["gateway"], true);
    assert_eq!(
        files_with_token(env.root(), std::slice::from_ref(&record)),
        Vec::<PathBuf>::new(),
        "no user config holds the key"
    );
}

/// Frames of `session` until the assistant's text (its deltas joined) holds `text`.
async fn until_reply(c: &mut Client, session: &str, text: &str) -> String {
    let mut reply = String::new();
    c.recv_until(|f| {
        if f["session"] == session && f["type"] == "assistant_delta" {
            reply.push_str(f["delta"].as_str().unwrap_or(""));
        }
        reply.contains(text)
    })
    .await
    .unwrap();
    reply
}

#[tokio::test]
async fn codex_set_gateway_restarts_the_app_server_on_a_fork_of_the_thread_after_the_turn_and_when_idle()
 {
    let env = TestHome::new();
    let api = FakeSkills::start().await.unwrap();
    let d = signed_in(&env, &api, json!({})).await;
    let mut c = d.client().await.unwrap();
    let record = env.root().join("codex-starts.txt");
    // A restarted app-server forks the thread (Codex will not resume it on another provider).
    let fork = fixture("codex-0.171.0-app-server-fork.jsonl");
    let bin = recording_bin_then(&env, "fake-codex", &record, Some(&fork));
    let options = json!({
        "bin": bin.display().to_string(),
        "env": {"FAKE_ENGINE_SCRIPT": fixture("codex-0.171.0-app-server-approve.jsonl"),
                "CODEX_HOME": env.root().join(".codex").display().to_string()},
        "jucode_gateway": true,
    });
    let created = c
        .request(json!({"op": "session_create", "cwd": env.project("app"), "engine": "codex", "options": options}))
        .await
        .unwrap();
    let session = created["session"]
        .as_str()
        .expect("session_created")
        .to_string();
    c.recv_type("startup", Some(&session)).await.unwrap();

    // Busy: the switch waits for the turn, and a message sent meanwhile waits with it.
    c.send(json!({"op": "user_message", "session": session, "content": "RUN: echo hi"}))
        .await
        .unwrap();
    let card = c
        .recv_type("approval_request", Some(&session))
        .await
        .unwrap();
    let r = c
        .request(json!({"op": "set_gateway", "session": session, "gateway": false}))
        .await
        .unwrap();
    assert_eq!(r["type"], "gateway_set", "{r}");
    c.send(json!({"op": "user_message", "session": session, "content": "what did I say?"}))
        .await
        .unwrap();
    c.send(json!({"op": "approve", "session": session, "call_id": card["call_id"], "decision": "allow"}))
        .await
        .unwrap();
    // The old process finished its turn (its answer came), then the new one answered the
    // queued message on the forked thread.
    until_reply(&mut c, &session, "tool said: hi").await;
    until_reply(&mut c, &session, "user said: what did I say?").await;
    let all = starts(&record, 2).await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(
        all[0].contains("arg model_provider=\"jucode\"\n"),
        "{}",
        all[0]
    );
    assert!(all[0].contains(&format!("key {TOKEN}\n")), "{}", all[0]);
    assert!(!all[1].contains("model_provider"), "{}", all[1]);
    assert!(all[1].contains("key none\n"), "{}", all[1]);
    assert!(row(&mut c, &session).await.get("gateway").is_none());

    // Idle: at once; the conversation is forked again by a process on the gateway.
    c.request(json!({"op": "set_gateway", "session": session, "gateway": true}))
        .await
        .unwrap();
    let all = starts(&record, 3).await;
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(
        all[2].contains("arg model_provider=\"jucode\"\n"),
        "{}",
        all[2]
    );
    assert!(all[2].contains(&format!("key {TOKEN}\n")), "{}", all[2]);
    c.send(json!({"op": "user_message", "session": session, "content": "what did I say?"}))
        .await
        .unwrap();
    until_reply(&mut c, &session, "user said: what did I say?").await;
    assert_eq!(row(&mut c, &session).await["gateway"], true);
    // The session still runs (a replaced process's exit did not end it) on its thread.
    assert_eq!(row(&mut c, &session).await["open"], true);
    assert!(
        d.logs().iter().all(|l| !l.contains(TOKEN)),
        "the token is never logged"
    );
}

#[tokio::test]
async fn other_engines_are_refused_and_the_default_engine_is_jucode() {
    let env = TestHome::new();
    let api = FakeSkills::start().await.unwrap();
    let d = signed_in(&env, &api, json!({})).await;
    let mut c = d.client().await.unwrap();
    let cwd = env.project("app");
    let r = c
        .request(json!({"op": "session_create", "cwd": cwd, "options": {"jucode_gateway": true}}))
        .await
        .unwrap();
    assert_eq!(
        r["message"],
        "the jucode engine cannot run through the JuCode gateway (Claude Code and Codex can)"
    );
    let r = c
        .request(json!({"op": "session_create", "cwd": cwd, "engine": "default"}))
        .await
        .unwrap();
    let session = r["session"].as_str().expect("session_created").to_string();
    assert_eq!(row(&mut c, &session).await["engine"], "jucode");
    let r = c
        .request(json!({"op": "set_gateway", "session": session, "gateway": true}))
        .await
        .unwrap();
    assert_eq!(
        r["message"],
        "the jucode engine cannot run through the JuCode gateway (Claude Code and Codex can)"
    );
    let r = c
        .request(json!({"op": "set_gateway", "session": "nope", "gateway": true}))
        .await
        .unwrap();
    assert_eq!(r["type"], "error", "{r}");
}

#[tokio::test]
async fn set_gateway_without_a_login_is_refused_and_the_flag_stays_off() {
    let env = TestHome::new();
    let d = Daemon::start(&env.home()).await.unwrap();
    let mut c = d.client().await.unwrap();
    let record = env.root().join("claude-starts.txt");
    let options = json!({
        "bin": recording_bin(&env, "fake-claude", &record).display().to_string(),
        "env": {
            "FAKE_ENGINE_SCRIPT": fixture("claude-code-2.1.332-print-3turns.jsonl"),
            "CLAUDE_CONFIG_DIR": env.root().join(".claude").display().to_string(),
        },
    });
    let created = c
        .request(json!({"op": "session_create", "cwd": env.project("app"), "engine": "claude", "options": options}))
        .await
        .unwrap();
    let session = created["session"]
        .as_str()
        .expect("session_created")
        .to_string();
    let r = c
        .request(json!({"op": "set_gateway", "session": session, "gateway": true}))
        .await
        .unwrap();
    assert_eq!(
        r["message"],
        "set_gateway: not signed in to JuCode (no gateway login in ~/.jucode/auth.json)"
    );
    assert!(row(&mut c, &session).await.get("gateway").is_none());
    let r = c
        .request(json!({"op": "session_create", "cwd": env.project("app"), "engine": "claude",
                        "options": {"jucode_gateway": true,
                                    "bin": recording_bin(&env, "fake-claude", &record).display().to_string()}}))
        .await
        .unwrap();
    assert_eq!(
        r["message"],
        "jucode_gateway: not signed in to JuCode (no gateway login in ~/.jucode/auth.json)"
    );
}
