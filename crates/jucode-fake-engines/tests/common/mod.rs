//! Helpers for driving an adapter against a fake engine and reading its events.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

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
        Ok(Some(EngineOutput::Exited { error })) => panic!("the engine exited: {error:?}"),
        Ok(None) => panic!("the event channel closed"),
        Err(_) => panic!("no event within the deadlock guard"),
    }
}

/// The engine's exit.
pub async fn exit(handle: &mut EngineHandle) -> Option<String> {
    loop {
        match tokio::time::timeout(GUARD, handle.events.recv()).await {
            Ok(Some(EngineOutput::Event(_))) => continue,
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
