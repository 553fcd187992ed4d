//! A fake OpenAI-compatible provider on loopback for the real-jcode suite
//! (facts from the recorded `fake_openai.py`): `GET /v1/models` lists two
//! models; `POST /v1/chat/completions` streams SSE. A last user message with
//! `USE_TOOL` (and `bash` offered) yields one `bash` call `call_fake_1`; one
//! asking for `cotal_orientation` (and that MCP tool offered) yields a call to
//! it; a seat turn carrying a DM from bob (and `cotal_dm` offered) answers
//! bob through `cotal_dm`; anything else streams "Hello from the fake model.". HTTP is handled by
//! hand because one request per connection with `Connection: close` is all
//! jcode needs here and a server framework would dwarf the double.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// One logged provider request.
#[derive(Debug, Clone)]
pub struct Logged {
    pub path: String,
    pub tools: Vec<String>,
    pub last_role: Option<String>,
    pub last_text: String,
}

pub struct FakeOpenAi {
    pub base_url: String,
    pub log: Arc<Mutex<Vec<Logged>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeOpenAi {
    pub async fn start() -> FakeOpenAi {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let log: Arc<Mutex<Vec<Logged>>> = Arc::default();
        let lg = log.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((s, _)) = l.accept().await else { return };
                let lg = lg.clone();
                tokio::spawn(async move {
                    let _ = handle(s, lg).await;
                });
            }
        });
        FakeOpenAi {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            log,
            task,
        }
    }

    pub fn requests(&self) -> Vec<Logged> {
        self.log.lock().unwrap().clone()
    }

    /// The `config.toml` that points jcode at this provider.
    pub fn config_toml(&self) -> String {
        format!(
            "[provider]\ndefault_provider = \"fake\"\ndefault_model = \"fake-model\"\n\n[providers.fake]\ntype = \"openai-compatible\"\nbase_url = \"{}\"\nauth = \"none\"\nrequires_api_key = false\ndefault_model = \"fake-model\"\nmodel_catalog = true\n\n[[providers.fake.models]]\nid = \"fake-model\"\ncontext_window = 128000\n",
            self.base_url
        )
    }
}

async fn handle(s: tokio::net::TcpStream, log: Arc<Mutex<Vec<Logged>>>) -> std::io::Result<()> {
    let mut r = BufReader::new(s);
    let mut first = String::new();
    r.read_line(&mut first).await?;
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).await? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await?;
    let mut s = r.into_inner();
    if method == "GET" {
        let (code, v) = if path.trim_end_matches('/').ends_with("/models") {
            (
                "200 OK",
                json!({"object": "list", "data": [
                {"id": "fake-model", "object": "model", "owned_by": "fake", "context_length": 128000},
                {"id": "fake-model-2", "object": "model", "owned_by": "fake", "context_length": 64000}]}),
            )
        } else {
            ("404 Not Found", json!({"error": {"message": "not found"}}))
        };
        let b = v.to_string();
        let head = format!(
            "HTTP/1.1 {code}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            b.len()
        );
        s.write_all(head.as_bytes()).await?;
        s.write_all(b.as_bytes()).await?;
        return s.shutdown().await;
    }
    let req: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
    let tools: Vec<String> = req["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let msgs = req["messages"].as_array().cloned().unwrap_or_default();
    let last = msgs.last().cloned().unwrap_or(json!({}));
    let last_role = last["role"].as_str().map(str::to_string);
    let last_text = last["content"].to_string();
    log.lock().unwrap().push(Logged {
        path: path.clone(),
        tools: tools.clone(),
        last_role: last_role.clone(),
        last_text: last_text.clone(),
    });
    s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n").await?;
    let model = req["model"].as_str().unwrap_or("fake-model").to_string();
    let chunk = |choices: Value| json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": choices});
    let user = last_role.as_deref() == Some("user");
    let orientation = tools
        .iter()
        .find(|t| t.ends_with("cotal_orientation"))
        .cloned();
    let dm_tool = tools.iter().find(|t| t.ends_with("cotal_dm")).cloned();
    let call = if user && last_text.contains("USE_TOOL") && tools.iter().any(|t| t == "bash") {
        Some((
            "call_fake_1".to_string(),
            "bash".to_string(),
            json!({"command": "echo fake-tool-output", "description": "echo"}).to_string(),
        ))
    } else if user && last_text.contains("DM from bob") && dm_tool.is_some() {
        // Answer the peer through the mesh tool.
        Some((
            "call_fake_dm".to_string(),
            dm_tool.unwrap_or_default(),
            json!({"to": "local.bob", "text": "pong from jcode"}).to_string(),
        ))
    } else if user && last_text.contains("cotal_orientation") && orientation.is_some() {
        Some((
            "call_fake_orient".to_string(),
            orientation.unwrap_or_default(),
            "{}".to_string(),
        ))
    } else {
        None
    };
    let mut events = Vec::new();
    match call {
        Some((id, name, args)) => {
            events.push(chunk(json!([{"index": 0, "delta": {"role": "assistant", "tool_calls": [
                {"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}, "finish_reason": null}])));
            for piece in args.as_bytes().chunks(10) {
                events.push(chunk(json!([{"index": 0, "delta": {"tool_calls": [
                    {"index": 0, "function": {"arguments": String::from_utf8_lossy(piece)}}]}, "finish_reason": null}])));
            }
            events.push(chunk(
                json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
            ));
        }
        None => {
            for w in ["Hello ", "from ", "the ", "fake ", "model."] {
                events.push(chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": w}, "finish_reason": null}])));
            }
            events.push(chunk(
                json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
            ));
        }
    }
    let mut usage = chunk(json!([]));
    usage["usage"] = json!({"prompt_tokens": 123, "completion_tokens": 7, "total_tokens": 130});
    events.push(usage);
    for e in events {
        s.write_all(format!("data: {e}\n\n").as_bytes()).await?;
    }
    s.write_all(b"data: [DONE]\n\n").await?;
    s.shutdown().await
}
