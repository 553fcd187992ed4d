//! A fake gateway billing server on `127.0.0.1:0`: `POST /v1/oauth/agent-usage/charges` with
//! `{"turn_ids":[…]}` answers `{"charges":[…]}` for the turns it was told about (settled or
//! pending), after checking the bearer token (`401` otherwise). [`Mode::Fail`] answers `500`
//! and [`Mode::Hang`] never answers. The turn ids of every request are kept.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// The token [`FakeBilling::auth_json`] writes and the server wants.
pub const TOKEN: &str = "fake-gateway-token";

/// How the server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Answer,
    Fail,
    Hang,
}

#[derive(Default)]
struct State {
    mode: Option<Mode>,
    charges: HashMap<String, Value>,
    requests: Vec<Vec<String>>,
}

/// The server; it stops when dropped.
pub struct FakeBilling {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeBilling {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeBilling {
    pub async fn start(mode: Mode) -> Result<FakeBilling> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("bind the fake billing server")?;
        let addr = listener.local_addr().context("fake billing address")?;
        let state = Arc::new(Mutex::new(State {
            mode: Some(mode),
            ..State::default()
        }));
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
        Ok(FakeBilling { addr, state, task })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The `auth.json` that signs the daemon in to this server.
    pub fn auth_json(&self) -> Value {
        json!({"gateway": {"url": self.url(), "token": TOKEN}})
    }

    /// Answers `turn_id` as settled at `points` over `requests`.
    pub fn settle(&self, turn_id: &str, points: f64, requests: u64) {
        self.set(
            turn_id,
            json!({"turn_id": turn_id, "status": "settled", "points": points, "requests": requests}),
        );
    }

    /// Answers `turn_id` as pending over `requests`.
    pub fn pending(&self, turn_id: &str, requests: u64) {
        self.set(
            turn_id,
            json!({"turn_id": turn_id, "status": "pending", "requests": requests}),
        );
    }

    fn set(&self, turn_id: &str, charge: Value) {
        if let Ok(mut s) = self.state.lock() {
            s.charges.insert(turn_id.to_string(), charge);
        }
    }

    /// The turn ids of each request received, in order.
    pub fn requests(&self) -> Vec<Vec<String>> {
        self.state
            .lock()
            .map(|s| s.requests.clone())
            .unwrap_or_default()
    }
}

fn reply(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<Mutex<State>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() != Method::POST || req.uri().path() != "/v1/oauth/agent-usage/charges" {
        return Ok(reply(StatusCode::NOT_FOUND, json!({"error": "not found"})));
    }
    let authorized = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        == Some(format!("Bearer {TOKEN}").as_str());
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Ok(reply(StatusCode::BAD_REQUEST, json!({}))),
    };
    if !authorized {
        return Ok(reply(
            StatusCode::UNAUTHORIZED,
            json!({"error": "bad token"}),
        ));
    }
    let turn_ids: Vec<String> = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| serde_json::from_value(v["turn_ids"].clone()).ok())
        .unwrap_or_default();
    let (mode, charges) = match state.lock() {
        Ok(mut s) => {
            s.requests.push(turn_ids.clone());
            let charges: Vec<Value> = turn_ids
                .iter()
                .filter_map(|t| s.charges.get(t).cloned())
                .collect();
            (s.mode, charges)
        }
        Err(_) => (Some(Mode::Fail), Vec::new()),
    };
    match mode {
        Some(Mode::Fail) | None => Ok(reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": "billing is down"}),
        )),
        Some(Mode::Hang) => std::future::pending().await,
        Some(Mode::Answer) => Ok(reply(StatusCode::OK, json!({"charges": charges}))),
    }
}
