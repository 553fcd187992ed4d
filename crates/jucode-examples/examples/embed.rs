//! The hub in-process with an engine of its own.
//!
//! ```text
//! cargo run -p jucode-examples --example embed [-- "a message"]
//! ```
//!
//! `Reverser` is a complete engine in a few lines: it speaks serve-v2 events over the channels
//! of `jucode_engine::channel()` and answers every user message with the message reversed. The
//! program opens a `Hub` on a temporary home, connects a client with `Hub::connect`, creates a
//! session on that engine, watches it, sends a message, prints every frame it gets back and
//! exits 0 once the reversed text came back (1 otherwise). No socket is involved: frames go in
//! through `Hub::handle` and come out of the connection's queue, as JSON text.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use jucode_engine::{EngineError, EngineFactory, EngineHandle, EngineOutput, StartSpec};
use jucode_hub::{Auth, Connection, Hub, HubConfig, Outgoing};
use jucode_protocol::Object;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Starts one [`run_reverser`] task per session.
struct Reverser;

impl EngineFactory for Reverser {
    fn start(&self, spec: StartSpec) -> Result<EngineHandle, EngineError> {
        let (handle, ops, events) = jucode_engine::channel();
        tokio::spawn(run_reverser(spec, ops, events));
        Ok(handle)
    }
}

/// One session of the engine: the startup batch, then one turn per `user_message`.
async fn run_reverser(
    spec: StartSpec,
    mut ops: mpsc::UnboundedReceiver<Object>,
    events: mpsc::Sender<EngineOutput>,
) {
    let emit = |event: Value| {
        let events = events.clone();
        async move {
            // An event is a JSON object; the hub adds `session` before clients see it.
            let Ok(event) = serde_json::from_value(event) else {
                return false;
            };
            events.send(EngineOutput::Event(event)).await.is_ok()
        }
    };
    let startup = [
        json!({"type": "startup", "session_id": spec.session, "cwd": spec.cwd.display().to_string(),
               "model": "reverser", "version": env!("CARGO_PKG_VERSION")}),
        json!({"type": "approval_mode", "mode": "manual"}),
    ];
    for event in startup {
        if !emit(event).await {
            return;
        }
    }
    while let Some(op) = ops.recv().await {
        let name = op.get("op").and_then(Value::as_str).unwrap_or_default();
        let turn = match name {
            "user_message" => {
                let content = op
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let reply: String = content.chars().rev().collect();
                vec![
                    json!({"type": "user_message", "content": content}),
                    json!({"type": "connecting"}),
                    json!({"type": "assistant_start"}),
                    json!({"type": "assistant_delta", "delta": reply}),
                    json!({"type": "status", "message": "ready"}),
                ]
            }
            // The hub says whether anyone watches; this engine never asks for approvals, so it
            // only reports the state back.
            "set_attended" => {
                vec![
                    json!({"type": "attended", "attended": op.get("attended") == Some(&json!(true))}),
                ]
            }
            "shutdown" => break,
            other => vec![json!({"type": "error", "message": format!("unknown op {other}")})],
        };
        for event in turn {
            if !emit(event).await {
                return;
            }
        }
    }
    let _ = events.send(EngineOutput::Exited { error: None }).await;
}

#[tokio::main]
async fn main() {
    let message = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "hello from an embedded hub".to_string());
    if let Err(e) = run(&message).await {
        eprintln!("embed: {e:#}");
        std::process::exit(1);
    }
}

async fn run(message: &str) -> Result<()> {
    let dir = tempfile::tempdir().context("a temporary home")?;
    let project = dir.path().join("project");
    std::fs::create_dir(&project).context("the project directory")?;
    // The hub checks engine names against the protocol's list, so the engine of our own is
    // registered under the name of the default one.
    let mut engines: HashMap<String, Arc<dyn EngineFactory>> = HashMap::new();
    engines.insert("jucode".into(), Arc::new(Reverser));
    let hub = Hub::open(HubConfig {
        home: dir.path().join(".jucode"),
        user_home: dir.path().to_path_buf(),
        version: env!("CARGO_PKG_VERSION").into(),
        relay_url: None,
        engines,
        clock: jucode_clock::SystemClock::shared(),
        agent_mcp: Default::default(),
        billing: None,
        online: Default::default(),
    })
    .context("opening the hub")?;

    let mut conn = hub.connect(Auth::Local);
    let client = conn.id;
    // The connect batch ends with the requirements list.
    read_until(&mut conn, |f| f["type"] == "requirements").await?;

    let cwd = project.display().to_string();
    let create = json!({"op": "session_create", "cwd": cwd, "engine": "jucode", "id": 1});
    hub.handle(client, &create.to_string()).await;
    let created = read_until(&mut conn, |f| f["id"] == 1).await?;
    let session = created["session"]
        .as_str()
        .with_context(|| format!("session_create failed: {created}"))?
        .to_string();

    let watch = json!({"op": "watch", "session": session, "id": 2});
    hub.handle(client, &watch.to_string()).await;
    read_until(&mut conn, |f| f["id"] == 2).await?;

    let say = json!({"op": "user_message", "session": session, "content": message});
    hub.handle(client, &say.to_string()).await;
    let expected: String = message.chars().rev().collect();
    let answer = read_until(&mut conn, |f| {
        f["type"] == "assistant_delta" && f["session"] == session.as_str()
    })
    .await?;
    read_until(&mut conn, |f| {
        f["type"] == "status" && f["message"] == "ready" && f["session"] == session.as_str()
    })
    .await?;

    let close = json!({"op": "session_close", "session": session});
    hub.handle(client, &close.to_string()).await;
    read_until(&mut conn, |f| f["type"] == "session_closed").await?;
    hub.disconnect(client);
    hub.shutdown().await;

    if answer["delta"] != expected.as_str() {
        bail!("expected {expected:?}, got {answer}");
    }
    eprintln!("embed: the engine answered {expected:?}");
    Ok(())
}

/// Prints the connection's frames until one matches `done`, which it returns. A frame that
/// does not come within 10 s fails the run (the hub answers every step above at once).
async fn read_until(conn: &mut Connection, done: impl Fn(&Value) -> bool) -> Result<Value> {
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), conn.frames.recv()).await;
        let text = match next {
            Err(_) => bail!("no frame from the hub for 10 s"),
            Ok(None) => bail!("the hub dropped the connection"),
            Ok(Some(Outgoing::Frame(text))) => text,
            #[allow(unreachable_patterns)]
            Ok(Some(_)) => continue,
        };
        println!("{text}");
        let frame: Value =
            serde_json::from_str(&text).context("the hub sent a frame that is not JSON")?;
        if frame["type"] == "error" {
            bail!("error from the hub: {frame}");
        }
        if done(&frame) {
            return Ok(frame);
        }
    }
}
