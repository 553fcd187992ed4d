//! `message_send` → `message_delivered`, against a `user_message` → its echo in the same
//! session of the same daemon run. A message is recorded (fsynced), routed and its delivery
//! recorded (fsynced) before `message_delivered` goes out; the echo goes through the engine
//! and back. Samples alternate, each starting with the session idle.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::daemon::{Bins, Daemon, Homes};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

const WAIT: Duration = Duration::from_secs(20);

/// p50 and p99 of both paths.
pub struct Report {
    pub samples: usize,
    pub message: (Duration, Duration),
    pub echo: (Duration, Duration),
}

pub async fn run(bins: &Bins, samples: usize) -> Result<Report> {
    let tmp = tempfile::Builder::new().prefix("jucode-bench-").tempdir()?;
    let root = std::fs::canonicalize(tmp.path())?;
    let homes = Homes::under(&root);
    let project = homes.home.join("proj");
    std::fs::create_dir_all(&project)?;
    let agent_dir = homes.jucode_home.join("agents").join("bench");
    std::fs::create_dir_all(&agent_dir)?;
    std::fs::write(
        agent_dir.join("agent.json"),
        json!({"name": "Bench", "cwd": project}).to_string(),
    )?;
    let mut daemon = Daemon::start(bins, &homes).await?;
    let url = format!("ws://{}/?token={}", daemon.addr, daemon.token);
    let outcome = measure(&url, samples).await;
    let _ = daemon.stop().await;
    outcome
}

async fn measure(url: &str, samples: usize) -> Result<Report> {
    let (mut ws, _) = tokio_tungstenite::connect_async(url)
        .await
        .context("WebSocket handshake")?;
    // The first message starts the agent's session; its turn ends before timing starts.
    send(
        &mut ws,
        json!({"op": "message_send", "agent": "bench", "body": "warm up", "id": "w"}),
    )
    .await?;
    let delivered = until(&mut ws, |f| f["type"] == "message_delivered").await?;
    let session = delivered["session"]
        .as_str()
        .context("no session")?
        .to_string();
    idle(&mut ws, &session).await?;
    let mut message = Vec::with_capacity(samples);
    let mut echo = Vec::with_capacity(samples);
    for i in 0..samples {
        let content = format!("echo {i}");
        let op = json!({"op": "user_message", "session": session, "content": content});
        let start = now();
        send(&mut ws, op).await?;
        until(&mut ws, |f| {
            f["type"] == "user_message" && f["content"] == content.as_str()
        })
        .await?;
        echo.push(now() - start);
        idle(&mut ws, &session).await?;

        let op = json!({"op": "message_send", "agent": "bench", "body": format!("message {i}"),
                        "session": session, "id": i});
        let start = now();
        send(&mut ws, op).await?;
        let reply = until(&mut ws, |f| f["id"] == i).await?;
        let id = reply["message"]
            .as_str()
            .context("no message id")?
            .to_string();
        until(&mut ws, |f| {
            f["type"] == "message_delivered" && f["id"] == id.as_str()
        })
        .await?;
        message.push(now() - start);
        idle(&mut ws, &session).await?;
    }
    Ok(Report {
        samples,
        message: percentiles(message),
        echo: percentiles(echo),
    })
}

#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
fn now() -> Instant {
    Instant::now()
}

fn percentiles(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    let at = |p: f64| {
        v.get(((v.len().saturating_sub(1)) as f64 * p).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    (at(0.5), at(0.99))
}

async fn send(ws: &mut Ws, op: Value) -> Result<()> {
    ws.send(Message::text(op.to_string())).await?;
    Ok(())
}

/// Reads until the session's turn has ended.
async fn idle(ws: &mut Ws, session: &str) -> Result<()> {
    until(ws, |f| {
        f["type"] == "status" && f["message"] == "ready" && f["session"] == session
    })
    .await
    .map(|_| ())
}

async fn until(ws: &mut Ws, mut pred: impl FnMut(&Value) -> bool) -> Result<Value> {
    let read = async {
        while let Some(msg) = ws.next().await {
            if let Message::Text(text) = msg? {
                let frame: Value = serde_json::from_str(text.as_str())?;
                if frame["type"] == "error" {
                    bail!("the daemon answered {frame}");
                }
                if pred(&frame) {
                    return Ok(frame);
                }
            }
        }
        bail!("the daemon closed the connection")
    };
    tokio::time::timeout(WAIT, read)
        .await
        .context("no answer from the daemon in time")?
}
