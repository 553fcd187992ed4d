//! Model clients: one conversation shape, two wire APIs (OpenAI chat completions in [`chat`],
//! Anthropic Messages in [`anthropic`]), both streamed as server-sent events.
//!
//! A request is sent once by [`ModelClient::open`]; retrying is the caller's job (the session
//! emits `retrying` events between attempts). Each wire format has a parser that turns SSE
//! events into [`Delta`]s while collecting the [`Completion`], so parsing is testable without
//! a network.

pub mod anthropic;
pub mod chat;

use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::Eventsource as _;
use futures_util::{Stream, StreamExt as _};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{Config, Protocol, Secret};

/// One message of a conversation, as saved and as sent (after [`normalized`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User {
        content: String,
        /// Absolute paths of attached images (png, jpeg, gif, webp), read when a request is
        /// built so the saved conversation stays small.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<String>,
    },
    Assistant {
        #[serde(default)]
        content: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reasoning: String,
        /// Anthropic's signature of the thinking block, needed to send it back.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        call_id: String,
        name: String,
        output: String,
        #[serde(default)]
        is_error: bool,
    },
}

/// A tool call the model made; `arguments` is the JSON text as the model wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// Token counts of one or more requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Every input token, cached ones included.
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.output_tokens += other.output_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

/// Streamed output as it arrives.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    Reasoning(String),
    Text(String),
}

/// Everything one streamed response said.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    pub text: String,
    pub reasoning: String,
    pub signature: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
}

/// What one request asks for.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub model: &'a str,
    pub system: &'a str,
    pub messages: &'a [Message],
    pub tools: &'a [ToolSpec],
    pub max_tokens: u64,
    /// The images of `messages`, read, by path; one missing here is sent as a text note.
    pub images: &'a Images,
}

/// An image read for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageData {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: &'static str,
    /// The file's bytes, base64 (standard alphabet, padded).
    pub base64: String,
}

/// Read images by path.
pub type Images = std::collections::BTreeMap<String, ImageData>;

/// For requests without images.
pub static NO_IMAGES: Images = Images::new();

/// What the model gets in place of an image that could not be read.
pub(crate) fn missing_image(path: &str) -> String {
    format!("[image {path} is no longer available]")
}

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("the model API answered {status}: {body}")]
    Status { status: u16, body: String },
    #[error("could not reach the model API: {0}")]
    Connect(String),
    #[error("the model's stream broke off: {0}")]
    Stream(String),
    #[error("the model API reported an error: {message}")]
    Api { message: String, retryable: bool },
    #[error("the model's answer could not be read: {0}")]
    Decode(String),
    #[error("could not set up the HTTP client: {0}")]
    Client(String),
}

impl ModelError {
    /// Whether trying again may help: rate limits, server errors and broken connections.
    pub fn retryable(&self) -> bool {
        match self {
            ModelError::Status { status, .. } => *status == 429 || *status >= 500,
            ModelError::Connect(_) | ModelError::Stream(_) => true,
            ModelError::Api { retryable, .. } => *retryable,
            ModelError::Decode(_) | ModelError::Client(_) => false,
        }
    }

    /// A short reason for a `retrying` event.
    pub fn reason(&self) -> String {
        match self {
            ModelError::Status { status, .. } => format!("HTTP {status}"),
            ModelError::Connect(_) => "connection failed".into(),
            ModelError::Stream(_) => "stream interrupted".into(),
            ModelError::Api { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }
}

/// Drops tool results no call asked for and gives every call without a result one saying it
/// was interrupted: both APIs refuse a conversation where the two do not pair up.
pub fn normalized(messages: &[Message]) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut open: Vec<ToolCall> = Vec::new();
    let close_open = |out: &mut Vec<Message>, open: &mut Vec<ToolCall>| {
        for call in open.drain(..) {
            out.push(Message::Tool {
                call_id: call.id,
                name: call.name,
                output: "(no result: the call was interrupted)".into(),
                is_error: true,
            });
        }
    };
    for message in messages {
        match message {
            Message::Tool { call_id, .. } => {
                if let Some(pos) = open.iter().position(|c| &c.id == call_id) {
                    open.remove(pos);
                    out.push(message.clone());
                }
            }
            Message::Assistant { tool_calls, .. } => {
                close_open(&mut out, &mut open);
                open = tool_calls.clone();
                out.push(message.clone());
            }
            Message::User { .. } => {
                close_open(&mut out, &mut open);
                out.push(message.clone());
            }
        }
    }
    close_open(&mut out, &mut open);
    out
}

/// Parses one wire format's SSE events.
enum Parser {
    Chat(chat::ChatParser),
    Anthropic(anthropic::AnthropicParser),
}

type Events = Pin<
    Box<
        dyn Stream<
                Item = Result<
                    eventsource_stream::Event,
                    eventsource_stream::EventStreamError<reqwest::Error>,
                >,
            > + Send,
    >,
>;

/// A response being streamed.
pub struct ModelStream {
    events: Events,
    parser: Parser,
}

impl ModelStream {
    /// The next deltas; `None` once the response is complete.
    pub async fn next(&mut self) -> Result<Option<Vec<Delta>>, ModelError> {
        loop {
            if self.done() {
                return Ok(None);
            }
            let Some(event) = self.events.next().await else {
                // Chat servers may close without [DONE]; Anthropic must send message_stop.
                return match &self.parser {
                    Parser::Chat(_) => Ok(None),
                    Parser::Anthropic(_) => Err(ModelError::Stream(
                        "the stream ended before message_stop".into(),
                    )),
                };
            };
            let event = event.map_err(|e| ModelError::Stream(e.to_string()))?;
            let deltas = match &mut self.parser {
                Parser::Chat(p) => p.feed(&event.data)?,
                Parser::Anthropic(p) => p.feed(&event.event, &event.data)?,
            };
            if !deltas.is_empty() {
                return Ok(Some(deltas));
            }
        }
    }

    fn done(&self) -> bool {
        match &self.parser {
            Parser::Chat(p) => p.done(),
            Parser::Anthropic(p) => p.done(),
        }
    }

    /// What the response said, once [`ModelStream::next`] returned `None`.
    pub fn finish(self) -> Completion {
        match self.parser {
            Parser::Chat(p) => p.finish(),
            Parser::Anthropic(p) => p.finish(),
        }
    }
}

/// Talks to the configured model API.
#[derive(Clone)]
pub struct ModelClient {
    http: reqwest::Client,
    protocol: Protocol,
    base_url: String,
    api_key: Option<Secret>,
}

/// How long connecting may take; a stalled stream is caught by the read timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const READ_TIMEOUT: Duration = Duration::from_secs(300);

impl ModelClient {
    pub fn new(config: &Config) -> Result<ModelClient, ModelError> {
        // reqwest is built without a default crypto provider; ring is ours. Installing twice
        // is refused harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .build()
            .map_err(|e| ModelError::Client(e.to_string()))?;
        Ok(ModelClient {
            http,
            protocol: config.protocol,
            base_url: config.base_url.clone(),
            api_key: config.api_key.clone(),
        })
    }

    fn url(&self) -> String {
        match self.protocol {
            Protocol::Chat => format!("{}/chat/completions", self.base_url),
            Protocol::Anthropic if self.base_url.ends_with("/v1") => {
                format!("{}/messages", self.base_url)
            }
            Protocol::Anthropic => format!("{}/v1/messages", self.base_url),
        }
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut req = self.http.post(self.url()).json(body);
        match (self.protocol, &self.api_key) {
            (Protocol::Chat, Some(key)) => req = req.bearer_auth(&key.0),
            (Protocol::Anthropic, key) => {
                req = req.header("anthropic-version", anthropic::API_VERSION);
                if let Some(key) = key {
                    req = req.header("x-api-key", &key.0);
                }
            }
            (Protocol::Chat, None) => {}
        }
        req
    }

    async fn send(&self, body: &Value) -> Result<reqwest::Response, ModelError> {
        let resp = self
            .post(body)
            .send()
            .await
            .map_err(|e| ModelError::Connect(error_chain(&e)))?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            return Err(ModelError::Status {
                status: status.as_u16(),
                body: clip(&body, 500),
            });
        }
        Ok(resp)
    }

    /// Sends a streamed request; the answer is read through the returned stream.
    pub async fn open(&self, req: Request<'_>) -> Result<ModelStream, ModelError> {
        let body = match self.protocol {
            Protocol::Chat => chat::body(req, true),
            Protocol::Anthropic => anthropic::body(req, true),
        };
        let resp = self.send(&body).await?;
        let events: Events = Box::pin(resp.bytes_stream().eventsource());
        let parser = match self.protocol {
            Protocol::Chat => Parser::Chat(chat::ChatParser::default()),
            Protocol::Anthropic => Parser::Anthropic(anthropic::AnthropicParser::default()),
        };
        Ok(ModelStream { events, parser })
    }

    /// A short request answered in one piece (titles, safety checks): the answer's text.
    pub async fn complete(&self, req: Request<'_>) -> Result<String, ModelError> {
        let body = match self.protocol {
            Protocol::Chat => chat::body(req, false),
            Protocol::Anthropic => anthropic::body(req, false),
        };
        let resp = self.send(&body).await?;
        let value: Value = resp
            .json()
            .await
            .map_err(|e| ModelError::Decode(e.to_string()))?;
        match self.protocol {
            Protocol::Chat => chat::completion_text(&value),
            Protocol::Anthropic => anthropic::completion_text(&value),
        }
    }
}

/// reqwest's top-level message hides the cause ("error sending request"); the chain says it.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Asks the config's title model one short question: `user` as the only message, no tools,
/// no images, at most `max_tokens` back. Session titles use it, and the daemon's requirement
/// titles and progress records.
pub async fn ask_title_model(
    config: &Config,
    system: &str,
    user: &str,
    max_tokens: u64,
) -> Result<String, ModelError> {
    let client = ModelClient::new(config)?;
    let messages = [Message::User {
        content: user.to_string(),
        images: vec![],
    }];
    client
        .complete(Request {
            model: &config.title_model,
            system,
            messages: &messages,
            tools: &[],
            max_tokens,
            images: &NO_IMAGES,
        })
        .await
}

/// At most `max` characters of `text`, marked when cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

/// A u64 field of a JSON object, 0 when absent.
pub(crate) fn num(value: &Value, field: &str) -> u64 {
    value.get(field).and_then(Value::as_u64).unwrap_or(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "bash".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn unanswered_calls_get_a_result_and_orphan_results_go() {
        let messages = vec![
            Message::Tool {
                call_id: "orphan".into(),
                name: "bash".into(),
                output: "x".into(),
                is_error: false,
            },
            Message::User {
                content: "hi".into(),
                images: vec![],
            },
            Message::Assistant {
                content: String::new(),
                reasoning: String::new(),
                signature: None,
                tool_calls: vec![call("a"), call("b")],
            },
            Message::Tool {
                call_id: "a".into(),
                name: "bash".into(),
                output: "ok".into(),
                is_error: false,
            },
            Message::User {
                content: "next".into(),
                images: vec![],
            },
        ];
        let out = normalized(&messages);
        assert_eq!(out.len(), 5);
        assert!(matches!(&out[0], Message::User { .. }));
        assert!(matches!(&out[3], Message::Tool { call_id, is_error: true, .. } if call_id == "b"));
        assert!(matches!(&out[4], Message::User { content, .. } if content == "next"));
    }

    #[test]
    fn retryable_errors_are_rate_limits_server_errors_and_broken_connections() {
        let status = |status| ModelError::Status {
            status,
            body: String::new(),
        };
        assert!(status(429).retryable());
        assert!(status(503).retryable());
        assert!(!status(400).retryable());
        assert!(!status(401).retryable());
        assert!(ModelError::Connect("x".into()).retryable());
        assert!(!ModelError::Decode("x".into()).retryable());
        assert_eq!(status(429).reason(), "HTTP 429");
    }
}
