//! The one scripted model server of the tests, on `127.0.0.1:0` over real HTTP with
//! server-sent events: OpenAI chat completions (`POST /v1/chat/completions`), Anthropic
//! Messages (`POST /v1/messages`) and OpenAI Responses (`POST /v1/responses`), plus the side
//! endpoints the engine CLIs call at start (`count_tokens`, `models`; anything else is answered
//! `200 {}` so a side call never hangs). Every request is kept for the test to inspect.
//!
//! Each client has its script: the jucode engine (its [`FakeModel::config`] names
//! [`FAKE_MODEL`]) gets the one below; the real Claude Code, claude-agent-acp and Codex CLIs
//! (naming any other model) get the one described in [`cli`], which also answers a tool result
//! with `tool said: <output>` and anything unscripted with `user said: <text>`; the real jcode,
//! pointed at `/jcode/v1` by [`FakeModel::jcode_config_toml`], gets its own (see
//! [`FakeModel::jcode_requests`]).
//!
//! For the jucode engine, the last message of a request picks the answer:
//! - a tool result → text `tool said: <output>`;
//! - `RUN: <cmd>` → one `bash` call with `{"command": cmd}`;
//! - `CALL <tool> <json>` → one call of that tool with those arguments;
//! - `SLEEP <ms> <text>` → waits, then answers as for `<text>`;
//! - `SYSTEM` → the request's system prompt, as text;
//! - `BENCH <n> <gap_ms>` (chat API, streamed) → `n` deltas `tok<i> `, one SSE event each,
//!   `gap_ms` apart; when each left is kept for [`FakeModel::bench_sent`];
//! - anything else → text `user said: <text>` (with ` [N images]` when the message carried
//!   N images).
//!
//! The engine's own short requests are told apart by their system prompt: a title request gets
//! `Session about <first words>`, a safety check `ALLOW` (or `ASK` when the call mentions
//! `DANGER`), a compaction request a summary. The daemon's title-model requests for
//! requirements too: a title gets `Title: "<first three words>".`, a progress rewrite a
//! fenced JSON record (see `requirement_progress`; prose when the latest request says
//! `NOT JSON`). [`FakeModel::fail_next`] makes the next requests
//! fail with a status (429, 500…) for retry tests. Every request body is kept.
//!
//! [`FakeModel::gateway`] serves the same scripts behind the JuCode gateway's paths and key
//! (see [`gateway`]).

pub mod cli;
pub mod gateway;
mod jcode;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::Frame;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use cli::{HANG_TEXT, SUGGESTION};
pub use gateway::GatewayRequest;
pub use jcode::JcodeRequest;

/// The model name [`FakeModel::config`] writes.
pub const FAKE_MODEL: &str = "fake-model";

/// One request the server received. Headers are not kept: they carry the API key.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub method: String,
    /// Path and query, as sent.
    pub path: String,
    /// The JSON body, `Null` when there was none or it was not JSON.
    pub body: Value,
    /// What a CLI request was answered with: `tool`, `text`, `hang`; `engine` for the jucode
    /// engine's requests, `jcode` for jcode's, `other` for side calls.
    pub reply: String,
}

#[derive(Default)]
struct State {
    recorded: Mutex<Vec<RecordedRequest>>,
    /// The jucode engine's model requests as (path, body).
    requests: Mutex<Vec<(String, Value)>>,
    cli: cli::Shared,
    /// The real jcode's chat requests (under `/jcode/v1`).
    jcode: Mutex<Vec<JcodeRequest>>,
    failures: Mutex<VecDeque<u16>>,
    calls: AtomicUsize,
    /// When each token of the latest `BENCH` answer was handed to the connection.
    bench_sent: Mutex<Vec<Instant>>,
    /// Set for [`FakeModel::gateway`]: every request passes it first.
    gate: Option<gateway::Gate>,
    gated: Mutex<Vec<GatewayRequest>>,
}

/// A running fake model server; stops when dropped.
pub struct FakeModel {
    pub addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
    /// Ends held (`HANG:`) streams when the server goes.
    stop: watch::Sender<bool>,
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        self.task.abort();
    }
}

impl FakeModel {
    /// Binds `127.0.0.1:0` and serves until dropped.
    pub async fn start() -> Result<FakeModel> {
        FakeModel::serve(State::default()).await
    }

    /// A fake JuCode API gateway: the catalog `groups` at `GET /v1/gateway/groups`, the
    /// scripts under `/v1/gateway/anthropic/` and `/v1/gateway/openai/`, each only with `key`
    /// (the login token the daemon hands the engines). [`FakeModel::base_url`] is the API's
    /// URL for `auth.json`.
    pub async fn gateway(key: &str, groups: Value) -> Result<FakeModel> {
        let gate = gateway::Gate {
            key: key.to_string(),
            groups,
        };
        FakeModel::serve(State {
            gate: Some(gate),
            ..State::default()
        })
        .await
    }

    async fn serve(state: State) -> Result<FakeModel> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("bind the fake model server")?;
        let addr = listener.local_addr().context("fake model address")?;
        let state = Arc::new(state);
        let shared = state.clone();
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                let stopped = stopped.clone();
                tokio::spawn(async move {
                    let service =
                        service_fn(move |req| handle(req, state.clone(), stopped.clone()));
                    // A client dropping the connection mid-stream is normal (an interrupt).
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(FakeModel {
            addr,
            state,
            task,
            stop,
        })
    }

    /// `http://127.0.0.1:<port>`, the value for `ANTHROPIC_BASE_URL`; Codex wants it + `/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The base URL of jcode's provider: `http://127.0.0.1:<port>/jcode/v1`.
    pub fn jcode_base_url(&self) -> String {
        format!("http://{}{}/v1", self.addr, jcode::PREFIX)
    }

    /// A jcode `config.toml` making this server its default provider (model `fake-model`).
    /// jcode's script: `USE_TOOL` → a `bash` call running `echo fake-tool-output`; `DM from
    /// bob` → an answer through the offered `…cotal_dm` tool; `cotal_orientation` → a call of
    /// that tool; anything else → `Hello from the fake model.`.
    pub fn jcode_config_toml(&self) -> String {
        jcode::config_toml(&self.jcode_base_url())
    }

    /// jcode's chat requests so far, in arrival order.
    pub fn jcode_requests(&self) -> Vec<JcodeRequest> {
        lock(&self.state.jcode).clone()
    }

    /// Every request a [`FakeModel::gateway`] received, refused ones included, in arrival
    /// order, with the credentials each carried.
    pub fn gateway_requests(&self) -> Vec<GatewayRequest> {
        lock(&self.state.gated).clone()
    }

    /// Every request so far, side calls included, in arrival order.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        lock(&self.state.recorded).clone()
    }

    /// The CLIs' model requests (those their script answered with a tool call, a text or a
    /// hang), in arrival order.
    pub fn model_requests(&self) -> Vec<RecordedRequest> {
        self.recorded()
            .into_iter()
            .filter(|r| matches!(r.reply.as_str(), "tool" | "text" | "hang"))
            .collect()
    }

    /// A config.json for `protocol` ("chat" or "anthropic") pointing at this server, with no
    /// retries unless asked and short retry delays.
    pub fn config(&self, protocol: &str) -> Value {
        let base_url = match protocol {
            "anthropic" => format!("http://{}", self.addr),
            _ => format!("http://{}/v1", self.addr),
        };
        json!({
            "protocol": protocol,
            "base_url": base_url,
            "api_key": "test-key",
            "model": FAKE_MODEL,
            "context_window": 200000,
            "retry_attempts": 0,
            "retry_base_delay_ms": 10,
            "models": [FAKE_MODEL, "fake-model-2"],
        })
    }

    /// The next `n` requests are answered with `status` and an error body.
    pub fn fail_next(&self, n: usize, status: u16) {
        let mut failures = lock(&self.state.failures);
        failures.extend(std::iter::repeat_n(status, n));
    }

    /// How many requests arrived (failed ones included).
    pub fn request_count(&self) -> usize {
        self.state.calls.load(Ordering::SeqCst)
    }

    /// When each token `tok<i>` of the latest `BENCH` answer left the server (index `i`).
    pub fn bench_sent(&self) -> Vec<Instant> {
        lock(&self.state.bench_sent).clone()
    }

    /// The jucode engine's requests as (path, JSON body), in arrival order.
    pub fn requests(&self) -> Vec<(String, Value)> {
        lock(&self.state.requests).clone()
    }

    /// The jucode engine's requests received since the last call, handed over and forgotten,
    /// and the record of every request so far forgotten too ([`FakeModel::recorded`] starts
    /// empty again). Each request carries its whole conversation, so a long run that keeps
    /// them grows without bound (a 1,000-kill crash loop held 2.9 GB by kill 700).
    pub fn take_requests(&self) -> Vec<(String, Value)> {
        lock(&self.state.recorded).clear();
        std::mem::take(&mut *lock(&self.state.requests))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

type Reply = Response<BoxBody<Bytes, Infallible>>;

fn respond(status: StatusCode, content_type: &str, body: String) -> Reply {
    with_body(status, content_type, Full::new(Bytes::from(body)).boxed())
}

fn with_body(status: StatusCode, content_type: &str, body: BoxBody<Bytes, Infallible>) -> Reply {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    if let Ok(value) = content_type.parse() {
        resp.headers_mut().insert("content-type", value);
    }
    resp
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<State>,
    stopped: watch::Receiver<bool>,
) -> Result<Reply, Infallible> {
    let method = req.method().clone();
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(|| "/".to_string(), |p| p.as_str().to_string());
    let mut route = req.uri().path().to_string();
    if let Some(gate) = &state.gate {
        let mut seen = GatewayRequest {
            method: method.to_string(),
            path: path.clone(),
            api_key: None,
            authorization: None,
            admitted: false,
        };
        let admit = gate.admit(&method, &route, req.headers(), &mut seen);
        lock(&state.gated).push(seen);
        match admit {
            gateway::Admit::Answered(reply) => return Ok(reply),
            gateway::Admit::Model(inner) => route = inner,
        }
    }
    let raw = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return Ok(respond(
                StatusCode::BAD_REQUEST,
                "text/plain",
                format!("body: {e}"),
            ));
        }
    };
    let parsed = serde_json::from_slice::<Value>(&raw);
    let mut record = RecordedRequest {
        method: method.to_string(),
        path: path.clone(),
        body: parsed.as_ref().map_or(Value::Null, Clone::clone),
        reply: "other".into(),
    };
    let ours = record.body["model"]
        .as_str()
        .is_some_and(|m| m.starts_with(FAKE_MODEL));
    let is_post = method == Method::POST;
    if let Some(rest) = route.strip_prefix(jcode::PREFIX) {
        let reply = if method == Method::GET && rest.trim_end_matches('/').ends_with("/models") {
            cli::json_response(StatusCode::OK, &jcode::models())
        } else if is_post && rest.ends_with("/chat/completions") {
            let request = jcode::summarize(rest, &record.body);
            let text = jcode::answer(&request, &record.body);
            lock(&state.jcode).push(request);
            record.reply = "jcode".into();
            respond(StatusCode::OK, "text/event-stream", text)
        } else {
            let error = json!({"error": {"message": "not found"}});
            cli::json_response(StatusCode::NOT_FOUND, &error)
        };
        lock(&state.recorded).push(record);
        return Ok(reply);
    }
    let reply = if is_post && route == "/v1/chat/completions"
        || is_post && route.ends_with("/messages") && ours
    {
        record.reply = "engine".into();
        lock(&state.recorded).push(record);
        return Ok(engine(&route, parsed, state).await);
    } else if is_post && route.ends_with("/messages/count_tokens") {
        cli::count_tokens()
    } else if is_post && route.ends_with("/messages") {
        let (kind, reply) = cli::messages(&state.cli, &record.body, stopped);
        record.reply = kind.into();
        reply
    } else if is_post && route.ends_with("/responses") {
        let (kind, reply) = cli::responses(&state.cli, &record.body, stopped);
        record.reply = kind.into();
        reply
    } else if method == Method::GET && route.ends_with("/models") {
        cli::models()
    } else {
        cli::json_response(StatusCode::OK, &json!({}))
    };
    lock(&state.recorded).push(record);
    Ok(reply)
}

/// A request of the jucode engine, answered by the script in the module doc.
async fn engine(route: &str, body: serde_json::Result<Value>, state: Arc<State>) -> Reply {
    let path = route.to_string();
    let n = state.calls.fetch_add(1, Ordering::SeqCst) + 1;
    let body: Value = match body {
        Ok(v) => v,
        Err(e) => {
            return respond(
                StatusCode::BAD_REQUEST,
                "application/json",
                json!({"error": {"message": format!("not JSON: {e}")}}).to_string(),
            );
        }
    };
    lock(&state.requests).push((path.clone(), body.clone()));
    let failure = lock(&state.failures).pop_front();
    if let Some(status) = failure {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return respond(
            status,
            "application/json",
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": format!("scripted failure {status}")}}).to_string(),
        );
    }
    let anthropic = path != "/v1/chat/completions";
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let (_, _, last) = last_message(&body, anthropic);
    if let (false, true, Some(rest)) = (anthropic, stream, last.trim().strip_prefix("BENCH ")) {
        let mut words = rest.split_whitespace().map(str::parse::<u64>);
        let (Some(Ok(count)), Some(Ok(gap))) = (words.next(), words.next()) else {
            return respond(
                StatusCode::BAD_REQUEST,
                "text/plain",
                "BENCH <n> <gap_ms>".into(),
            );
        };
        return bench_stream(state, count, gap);
    }
    let answer = script(&body, anthropic, n).await;
    let text = match (anthropic, stream) {
        (false, true) => chat_sse(&answer),
        (false, false) => chat_json(&answer),
        (true, true) => anthropic_sse(&answer),
        (true, false) => anthropic_json(&answer),
    };
    let content_type = if stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    respond(StatusCode::OK, content_type, text)
}

/// Streams `count` tokens `gap_ms` apart, noting when each was handed to the connection.
#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
fn bench_stream(state: Arc<State>, count: u64, gap_ms: u64) -> Reply {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
    tokio::spawn(async move {
        lock(&state.bench_sent).clear();
        let first = json!({"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]});
        if tx.send(Bytes::from(sse(&first))).await.is_err() {
            return;
        }
        for i in 0..count {
            tokio::time::sleep(Duration::from_millis(gap_ms)).await;
            let chunk = json!({"choices":[{"index":0,"delta":{"content":format!("tok{i} ")},"finish_reason":null}]});
            let frame = Bytes::from(sse(&chunk));
            // Timed as it goes to the connection: the channel hands it to hyper at once.
            lock(&state.bench_sent).push(Instant::now());
            if tx.send(frame).await.is_err() {
                return;
            }
        }
        let mut tail = sse(&json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}));
        tail += &sse(
            &json!({"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":count,"total_tokens":100 + count}}),
        );
        tail += "data: [DONE]\n\n";
        let _ = tx.send(Bytes::from(tail)).await;
    });
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|bytes| (Ok::<_, Infallible>(Frame::data(bytes)), rx))
    });
    with_body(
        StatusCode::OK,
        "text/event-stream",
        StreamBody::new(frames).boxed(),
    )
}

enum Answer {
    Text(String),
    Call {
        id: String,
        name: String,
        arguments: String,
    },
}

/// The system prompt and the last message as (is a tool result, text).
fn last_message(body: &Value, anthropic: bool) -> (String, bool, String) {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let system = if anthropic {
        body.get("system")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    } else {
        messages
            .iter()
            .find(|m| m["role"] == "system")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let Some(last) = messages.last() else {
        return (system, false, String::new());
    };
    if anthropic {
        let blocks = last["content"].as_array().cloned().unwrap_or_default();
        if let Some(result) = blocks.iter().rev().find(|b| b["type"] == "tool_result") {
            let output = result["content"].as_str().unwrap_or_default().to_string();
            return (system, true, output);
        }
        let text = match &last["content"] {
            Value::String(s) => s.clone(),
            _ => tagged(
                &blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                blocks.iter().filter(|b| b["type"] == "image").count(),
            ),
        };
        (system, false, text)
    } else {
        let text = match &last["content"] {
            Value::Array(parts) => {
                let images = parts.iter().filter(|p| p["type"] == "image_url").count();
                let text: Vec<&str> = parts
                    .iter()
                    .filter(|p| p["type"] == "text")
                    .filter_map(|p| p["text"].as_str())
                    .collect();
                tagged(&text.join("\n"), images)
            }
            other => other.as_str().unwrap_or_default().to_string(),
        };
        (system, last["role"] == "tool", text)
    }
}

/// The text of a message with its image count appended, so replies show what arrived.
fn tagged(text: &str, images: usize) -> String {
    if images == 0 {
        text.to_string()
    } else {
        format!("{text} [{images} images]")
    }
}

async fn script(body: &Value, anthropic: bool, n: usize) -> Answer {
    let (system, tool_result, text) = last_message(body, anthropic);
    if tool_result {
        return Answer::Text(format!("tool said: {text}"));
    }
    let lower = system.to_ascii_lowercase();
    if lower.contains("title for a coding session") {
        let latest = text
            .lines()
            .find_map(|l| l.strip_prefix("Latest request: "))
            .unwrap_or("the session");
        let words: Vec<&str> = latest.split_whitespace().take(3).collect();
        return Answer::Text(format!("Session about {}", words.join(" ")));
    }
    if lower.contains("you name a requirement") {
        return Answer::Text(requirement_title(&text));
    }
    if lower.contains("progress record of a requirement") {
        return Answer::Text(requirement_progress(&text));
    }
    if lower.contains("safety check") {
        let verdict = if text.contains("DANGER") {
            "ASK"
        } else {
            "ALLOW"
        };
        return Answer::Text(verdict.into());
    }
    if lower.contains("compact") {
        let count = body["messages"].as_array().map_or(0, Vec::len);
        return Answer::Text(format!("summary of {count} messages"));
    }
    let mut text = text.trim().to_string();
    if text == "SYSTEM" {
        return Answer::Text(system);
    }
    if let Some(rest) = text.strip_prefix("SLEEP ") {
        let (ms, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        if let Ok(ms) = ms.parse::<u64>() {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        text = rest.trim().to_string();
    }
    let id = if anthropic {
        format!("toolu_{n}")
    } else {
        format!("call_{n}")
    };
    if let Some(cmd) = text.strip_prefix("RUN: ") {
        return Answer::Call {
            id,
            name: "bash".into(),
            arguments: json!({"command": cmd}).to_string(),
        };
    }
    if let Some(rest) = text.strip_prefix("CALL ") {
        let (name, args) = rest.split_once(' ').unwrap_or((rest, "{}"));
        return Answer::Call {
            id,
            name: name.to_string(),
            arguments: args.trim().to_string(),
        };
    }
    Answer::Text(format!("user said: {text}"))
}

/// The daemon's requirement title request: `Title: <first three words>.`, in the untidy
/// shape a model may answer in.
fn requirement_title(text: &str) -> String {
    let words = section(text, "Requirement:");
    let words: Vec<&str> = words.split_whitespace().take(3).collect();
    format!("Title: \"{}\".", words.join(" "))
}

/// The daemon's progress request: a record with the session's latest request done, the
/// previous record's done items kept, and the first request as the goal. A latest request
/// holding `NOT JSON` is answered with prose instead.
fn requirement_progress(text: &str) -> String {
    let latest = section(text, "Latest request:");
    if latest.contains("NOT JSON") {
        return "The session made good progress.".into();
    }
    let previous: Value =
        serde_json::from_str(&section(text, "Previous record:")).unwrap_or_default();
    let mut done: Vec<Value> = previous["done"].as_array().cloned().unwrap_or_default();
    done.push(json!(latest));
    let record = json!({
        "goal": section(text, "First request of the session:"),
        "done": done,
        "next": ["check the reply"],
        "note": format!("reply ended: {}", section(text, "End of the latest reply:")),
    });
    format!("```json\n{record}\n```")
}

/// The text after the line `label` up to the next blank line.
fn section(text: &str, label: &str) -> String {
    let Some((_, rest)) = text.split_once(&format!("{label}\n")) else {
        return String::new();
    };
    rest.split("\n\n")
        .next()
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Splits text in two deltas, so clients see more than one.
fn halves(text: &str) -> Vec<String> {
    let mut mid = text.len() / 2;
    while !text.is_char_boundary(mid) {
        mid -= 1;
    }
    [&text[..mid], &text[mid..]]
        .into_iter()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn sse(data: &Value) -> String {
    format!("data: {data}\n\n")
}

fn chat_sse(answer: &Answer) -> String {
    let mut out = sse(
        &json!({"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}),
    );
    match answer {
        Answer::Text(text) => {
            for piece in halves(text) {
                out += &sse(
                    &json!({"choices":[{"index":0,"delta":{"content":piece},"finish_reason":null}]}),
                );
            }
            out += &sse(&json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}));
        }
        Answer::Call {
            id,
            name,
            arguments,
        } => {
            out += &sse(
                &json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":id,"type":"function","function":{"name":name,"arguments":""}}]},"finish_reason":null}]}),
            );
            for piece in halves(arguments) {
                out += &sse(
                    &json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":piece}}]},"finish_reason":null}]}),
                );
            }
            out += &sse(&json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}));
        }
    }
    out += &sse(
        &json!({"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}}),
    );
    out + "data: [DONE]\n\n"
}

fn chat_json(answer: &Answer) -> String {
    let text = match answer {
        Answer::Text(t) => t.clone(),
        Answer::Call { name, .. } => format!("(would call {name})"),
    };
    json!({"choices":[{"index":0,"message":{"role":"assistant","content":text},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":5}}).to_string()
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn anthropic_sse(answer: &Answer) -> String {
    let mut out = event(
        "message_start",
        &json!({"type":"message_start","message":{"id":"msg_fake","type":"message","role":"assistant","content":[],"model":FAKE_MODEL,"stop_reason":null,"usage":{"input_tokens":100,"output_tokens":1}}}),
    );
    let stop = match answer {
        Answer::Text(text) => {
            out += &event(
                "content_block_start",
                &json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            );
            for piece in halves(text) {
                out += &event(
                    "content_block_delta",
                    &json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":piece}}),
                );
            }
            "end_turn"
        }
        Answer::Call {
            id,
            name,
            arguments,
        } => {
            out += &event(
                "content_block_start",
                &json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":id,"name":name,"input":{}}}),
            );
            for piece in halves(arguments) {
                out += &event(
                    "content_block_delta",
                    &json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":piece}}),
                );
            }
            "tool_use"
        }
    };
    out += &event(
        "content_block_stop",
        &json!({"type":"content_block_stop","index":0}),
    );
    out += &event(
        "message_delta",
        &json!({"type":"message_delta","delta":{"stop_reason":stop,"stop_sequence":null},"usage":{"output_tokens":10}}),
    );
    out + &event("message_stop", &json!({"type":"message_stop"}))
}

fn anthropic_json(answer: &Answer) -> String {
    let text = match answer {
        Answer::Text(t) => t.clone(),
        Answer::Call { name, .. } => format!("(would call {name})"),
    };
    json!({"id":"msg_fake","type":"message","role":"assistant","model":FAKE_MODEL,"content":[{"type":"text","text":text}],"stop_reason":"end_turn","usage":{"input_tokens":50,"output_tokens":5}}).to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A long run hands its requests over as it goes; nothing of them may stay behind (a
    /// crash loop of 1,000 kills grew to gigabytes when the full record was kept).
    #[tokio::test]
    async fn taken_requests_are_forgotten_with_their_record() {
        let fake = FakeModel::start().await.unwrap();
        let body = json!({"model": FAKE_MODEL, "stream": true,
            "messages": [{"role": "user", "content": "hi"}]});
        let body = body.to_string();
        let reply = crate::http(
            fake.addr,
            "POST",
            "/v1/chat/completions",
            Some(body.as_bytes()),
        )
        .await
        .unwrap();
        assert_eq!(reply.status, 200);
        assert_eq!(fake.recorded().len(), 1);
        let taken = fake.take_requests();
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].1["messages"][0]["content"], "hi");
        assert!(fake.recorded().is_empty());
        assert!(fake.take_requests().is_empty());
    }
}
