//! A stand-in for the daemon's agent tools endpoint (`POST /api/agent/tools`,
//! `POST /api/agent/call`, bearer capability; the wire format of `jucode-server`'s `agent`
//! module), for driving the real `jucode-daemon agent-mcp` server from a real Claude Code or
//! Codex without a hub: it offers the tools it is given and records every call.
//!
//! Each call is answered `{"ok": true, "result": {"recorded": <n>}}`; a wrong capability gets
//! 401 as from the daemon.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// One recorded tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedCall {
    pub name: String,
    pub arguments: Value,
}

struct State {
    capability: String,
    tools: Value,
    calls: Mutex<Vec<RecordedCall>>,
}

/// The endpoint on `127.0.0.1:<port>`, serving until dropped.
pub struct AgentEndpoint {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for AgentEndpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl AgentEndpoint {
    /// Serves `tools` (a JSON array of `{name, description, input_schema}`) to `capability`.
    pub async fn start(capability: &str, tools: Value) -> Result<AgentEndpoint> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("bind the agent endpoint")?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            capability: capability.to_string(),
            tools,
            calls: Mutex::new(Vec::new()),
        });
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(req, state.clone()));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(AgentEndpoint { addr, state, task })
    }

    /// The value of `JUCODE_AGENT_URL`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every call so far, in arrival order.
    pub fn calls(&self) -> Vec<RecordedCall> {
        self.state
            .calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

fn answer(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<State>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let expected = format!("Bearer {}", state.capability);
    let authorized = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        == Some(expected.as_str());
    if !authorized {
        return Ok(answer(
            StatusCode::UNAUTHORIZED,
            json!({"error": "unknown or revoked agent capability"}),
        ));
    }
    let path = req.uri().path().to_string();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Ok(answer(StatusCode::BAD_REQUEST, json!({"error": "no body"}))),
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Ok(match path.as_str() {
        "/api/agent/tools" => answer(StatusCode::OK, json!({"tools": state.tools})),
        "/api/agent/call" => {
            let mut calls = state.calls.lock().unwrap_or_else(|e| e.into_inner());
            calls.push(RecordedCall {
                name: body["name"].as_str().unwrap_or("").to_string(),
                arguments: body["arguments"].clone(),
            });
            answer(
                StatusCode::OK,
                json!({"ok": true, "result": {"recorded": calls.len()}}),
            )
        }
        _ => answer(
            StatusCode::NOT_FOUND,
            json!({"error": "no such agent endpoint"}),
        ),
    })
}
