//! Helpers for driving an adapter against a fake engine and reading its events.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use jucode_adapters::AdapterConfig;
use jucode_adapters::claude::ClaudeEngine;
use jucode_engine::{EngineFactory, EngineHandle, EngineOutput, StartSpec};
use jucode_protocol::Object;
use serde_json::{Value, json};

/// A deadlock guard only: every wait ends long before this on a working adapter.
const GUARD: Duration = Duration::from_secs(30);

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/engines")
        .join(name)
}

/// A temp dir for one adapter: the session's work dir (made), the jucode home and the user's
/// home inside it.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    pub cwd: PathBuf,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("work");
        std::fs::create_dir_all(&cwd).unwrap();
        Sandbox { dir, cwd }
    }

    pub fn config(&self) -> AdapterConfig {
        AdapterConfig {
            jucode_home: self.dir.path().join("jucode"),
            user_home: self.dir.path().join("home"),
            gateway: None,
        }
    }
}

/// A sandbox with the Claude Code adapter over it and Claude Code's config dir in it.
pub struct ClaudeSandbox {
    pub dir: tempfile::TempDir,
    pub cwd: PathBuf,
    pub config_dir: PathBuf,
    pub engine: ClaudeEngine,
}

impl ClaudeSandbox {
    pub fn new() -> ClaudeSandbox {
        let Sandbox { dir, cwd } = Sandbox::new();
        let engine = ClaudeEngine::new(AdapterConfig {
            jucode_home: dir.path().join("jucode"),
            user_home: dir.path().join("home"),
            gateway: None,
        });
        ClaudeSandbox {
            config_dir: dir.path().join("claude-config"),
            dir,
            cwd,
            engine,
        }
    }

    /// Options starting `fake-claude` on `script` with this sandbox's config dir.
    pub fn fake_claude(&self, script: &str) -> Value {
        let mut env = script_env(script);
        env["CLAUDE_CONFIG_DIR"] = json!(self.config_dir.display().to_string());
        json!({"bin": env!("CARGO_BIN_EXE_fake-claude"), "env": env})
    }
}

/// `options` with the keys of the object `extra` set on top.
pub fn merged(mut options: Value, extra: Value) -> Value {
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            options[k] = v;
        }
    }
    options
}

/// The variables that make a fake engine replay the fixture `script`.
pub fn script_env(script: &str) -> Value {
    json!({"FAKE_ENGINE_SCRIPT": fixture(script).display().to_string()})
}

/// Options starting `fake-codex` on `script`.
pub fn fake_codex(script: &str) -> Value {
    json!({"bin": env!("CARGO_BIN_EXE_fake-codex"), "env": script_env(script)})
}

/// Options starting `fake-acp` on `script`.
pub fn fake_acp(script: &str) -> Value {
    json!({"command": env!("CARGO_BIN_EXE_fake-acp"), "env": script_env(script)})
}

pub fn obj(v: Value) -> Object {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

pub fn start(
    factory: &dyn EngineFactory,
    session: &str,
    cwd: &Path,
    options: Value,
    resume: bool,
) -> EngineHandle {
    factory
        .start(StartSpec {
            session: session.to_string(),
            cwd: cwd.to_path_buf(),
            extra_dirs: Vec::new(),
            options: obj(options),
            resume,
            agent: None,
        })
        .expect("the engine starts")
}

pub fn send(handle: &EngineHandle, op: Value) {
    handle.ops.send(obj(op)).expect("the engine takes ops");
}

/// The next event; panics when the engine exits.
pub async fn next(handle: &mut EngineHandle) -> Value {
    match tokio::time::timeout(GUARD, handle.events.recv()).await {
        Ok(Some(EngineOutput::Event(e))) => Value::Object(e.0),
        Ok(Some(EngineOutput::Delta(text))) => Value::Object(jucode_engine::delta_event(text).0),
        Ok(Some(EngineOutput::Exited { error })) => panic!("the engine exited: {error:?}"),
        Ok(None) => panic!("the event channel closed"),
        Err(_) => panic!("no event within the deadlock guard"),
    }
}

/// The engine's exit.
pub async fn exit(handle: &mut EngineHandle) -> Option<String> {
    loop {
        match tokio::time::timeout(GUARD, handle.events.recv()).await {
            Ok(Some(EngineOutput::Event(_) | EngineOutput::Delta(_))) => continue,
            Ok(Some(EngineOutput::Exited { error })) => return error,
            Ok(None) => panic!("the event channel closed without Exited"),
            Err(_) => panic!("no exit within the deadlock guard"),
        }
    }
}

/// Events up to and including the first of type `kind`.
pub async fn until(handle: &mut EngineHandle, kind: &str) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let e = next(handle).await;
        let done = e["type"] == kind;
        out.push(e);
        if done {
            return out;
        }
    }
}

/// Events up to and including `status:"ready"`.
pub async fn turn(handle: &mut EngineHandle) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let e = next(handle).await;
        let done = e["type"] == "status" && e["message"] == "ready";
        out.push(e);
        if done {
            return out;
        }
    }
}

/// State events carry engine details the turn tests do not pin; they are checked on their own.
pub const STATE: &[&str] = &[
    "startup",
    "model_status",
    "command_list",
    "mcp_servers",
    "rate_limit",
];

/// A turn's events without state events.
pub fn flow(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| !STATE.contains(&e["type"].as_str().unwrap_or("")))
        .cloned()
        .collect()
}

/// The echo of a user message.
pub fn user(text: &str) -> Value {
    json!({"type":"user_message","content":text})
}

/// An assistant message streamed as `parts`.
pub fn reply(parts: &[&str]) -> Vec<Value> {
    let mut out = vec![json!({"type":"assistant_start"})];
    out.extend(
        parts
            .iter()
            .map(|p| json!({"type":"assistant_delta","delta":p})),
    );
    out
}

pub fn usage(input: u64, output: u64) -> Value {
    json!({"type":"usage","input_tokens":input,"cached_input_tokens":0,"output_tokens":output,"reasoning_tokens":0})
}

/// A Codex or ACP turn's `usage`: those wire formats carry cache writes too.
pub fn usage5(input: u64, output: u64) -> Value {
    json!({"type":"usage","input_tokens":input,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":output,"reasoning_tokens":0})
}

pub fn ready() -> Value {
    json!({"type":"status","message":"ready"})
}

/// Drops the ops sender (the hub letting go) and returns the engine's exit.
pub async fn close(h: EngineHandle) -> Option<String> {
    let EngineHandle { ops, events } = h;
    drop(ops);
    let mut h = EngineHandle {
        ops: tokio::sync::mpsc::unbounded_channel().0,
        events,
    };
    exit(&mut h).await
}
