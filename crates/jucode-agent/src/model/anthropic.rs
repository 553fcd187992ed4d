//! Anthropic Messages: request bodies and the streamed-event parser.

use std::collections::BTreeMap;

use serde_json::{Value, json};

#[cfg(test)]
use super::NO_IMAGES;
use super::{Completion, Delta, Message, ModelError, Request, ToolCall, Usage, normalized, num};

/// The `anthropic-version` header value.
pub const API_VERSION: &str = "2023-06-01";

/// The request body. Consecutive messages of one role are merged: the API wants turns to
/// alternate, and tool results travel as blocks of a user turn.
pub fn body(req: Request<'_>, stream: bool) -> Value {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in normalized(req.messages) {
        let (role, blocks) = match message {
            Message::User { content, images } => {
                // Images before the text, as the API's guide recommends.
                let mut blocks: Vec<Value> = images
                    .iter()
                    .map(|path| match req.images.get(path) {
                        Some(image) => json!({
                            "type": "image",
                            "source": {"type": "base64", "media_type": image.media_type, "data": image.base64},
                        }),
                        None => json!({"type": "text", "text": super::missing_image(path)}),
                    })
                    .collect();
                blocks.push(json!({"type": "text", "text": content}));
                ("user", blocks)
            }
            Message::Tool {
                call_id,
                output,
                is_error,
                ..
            } => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": output,
                    "is_error": is_error,
                })],
            ),
            Message::Assistant {
                content,
                reasoning,
                signature,
                tool_calls,
            } => {
                let mut blocks = Vec::new();
                // A thinking block goes back only with its signature; the API refuses it bare.
                if let Some(signature) = signature
                    && !reasoning.is_empty()
                {
                    blocks.push(
                        json!({"type": "thinking", "thinking": reasoning, "signature": signature}),
                    );
                }
                if !content.is_empty() {
                    blocks.push(json!({"type": "text", "text": content}));
                }
                for call in tool_calls {
                    let input: Value = serde_json::from_str(&call.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    blocks.push(
                        json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}),
                    );
                }
                ("assistant", blocks)
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut body = json!({
        "model": req.model,
        "max_tokens": req.max_tokens,
        "system": req.system,
        "messages": messages,
        "stream": stream,
    });
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    body
}

/// The text of a non-streamed answer.
pub fn completion_text(value: &Value) -> Result<String, ModelError> {
    if value.get("type").and_then(Value::as_str) == Some("error") {
        return Err(ModelError::Api {
            message: error_message(value),
            retryable: false,
        });
    }
    let blocks = value
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| ModelError::Decode("no content in the answer".into()))?;
    Ok(blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect())
}

fn error_message(value: &Value) -> String {
    value
        .pointer("/error/message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| value.to_string())
}

#[derive(Default)]
struct Block {
    kind: String,
    id: String,
    name: String,
    json: String,
}

/// Folds Messages stream events into deltas and a [`Completion`].
#[derive(Default)]
pub struct AnthropicParser {
    text: String,
    reasoning: String,
    signature: String,
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    done: bool,
}

impl AnthropicParser {
    /// One SSE event: its `event:` name (may be empty) and `data:` payload.
    pub fn feed(&mut self, event: &str, data: &str) -> Result<Vec<Delta>, ModelError> {
        if data.trim().is_empty() {
            return Ok(Vec::new());
        }
        let value: Value = serde_json::from_str(data)
            .map_err(|e| ModelError::Decode(format!("{e} in event {}", super::clip(data, 200))))?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event)
            .to_string();
        let mut deltas = Vec::new();
        match kind.as_str() {
            "message_start" => {
                if let Some(usage) = value.pointer("/message/usage") {
                    self.usage.cached_input_tokens = num(usage, "cache_read_input_tokens");
                    self.usage.input_tokens = num(usage, "input_tokens")
                        + self.usage.cached_input_tokens
                        + num(usage, "cache_creation_input_tokens");
                    self.usage.output_tokens = num(usage, "output_tokens");
                }
            }
            "content_block_start" => {
                let index = num(&value, "index");
                let block = value.get("content_block").cloned().unwrap_or(Value::Null);
                let str_of = |f: &str| {
                    block
                        .get(f)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                let entry = Block {
                    kind: str_of("type"),
                    id: str_of("id"),
                    name: str_of("name"),
                    json: String::new(),
                };
                // A start block may already carry text.
                let text = str_of("text");
                if entry.kind == "text" && !text.is_empty() {
                    self.text.push_str(&text);
                    deltas.push(Delta::Text(text));
                }
                self.blocks.insert(index, entry);
            }
            "content_block_delta" => {
                let index = num(&value, "index");
                let delta = value.get("delta").cloned().unwrap_or(Value::Null);
                let field = |f: &str| delta.get(f).and_then(Value::as_str).unwrap_or_default();
                match field("type") {
                    "text_delta" if !field("text").is_empty() => {
                        self.text.push_str(field("text"));
                        deltas.push(Delta::Text(field("text").to_string()));
                    }
                    "thinking_delta" if !field("thinking").is_empty() => {
                        self.reasoning.push_str(field("thinking"));
                        deltas.push(Delta::Reasoning(field("thinking").to_string()));
                    }
                    "signature_delta" => self.signature.push_str(field("signature")),
                    "input_json_delta" => {
                        if let Some(block) = self.blocks.get_mut(&index) {
                            block.json.push_str(field("partial_json"));
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(usage) = value.get("usage") {
                    // Cumulative counts; input fields appear here only on some servers.
                    if let Some(out) = usage.get("output_tokens").and_then(Value::as_u64) {
                        self.usage.output_tokens = out;
                    }
                    if let Some(input) = usage.get("input_tokens").and_then(Value::as_u64) {
                        self.usage.input_tokens = input
                            + num(usage, "cache_read_input_tokens")
                            + num(usage, "cache_creation_input_tokens");
                        self.usage.cached_input_tokens = num(usage, "cache_read_input_tokens");
                    }
                }
            }
            "message_stop" => self.done = true,
            "error" => {
                let retryable = matches!(
                    value.pointer("/error/type").and_then(Value::as_str),
                    Some("overloaded_error" | "api_error" | "rate_limit_error")
                );
                return Err(ModelError::Api {
                    message: error_message(&value),
                    retryable,
                });
            }
            // ping, content_block_stop and anything newer carry nothing we keep.
            _ => {}
        }
        Ok(deltas)
    }

    pub fn done(&self) -> bool {
        self.done
    }

    pub fn finish(self) -> Completion {
        let tool_calls = self
            .blocks
            .into_values()
            .filter(|b| b.kind == "tool_use")
            .map(|b| ToolCall {
                id: b.id,
                name: b.name,
                arguments: if b.json.trim().is_empty() {
                    "{}".into()
                } else {
                    b.json
                },
            })
            .collect();
        Completion {
            text: self.text,
            reasoning: self.reasoning,
            signature: (!self.signature.is_empty()).then_some(self.signature),
            tool_calls,
            usage: self.usage,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Events shaped as the Messages API streams them.
    #[test]
    fn a_streamed_answer_with_thinking_text_and_a_tool_use() {
        let frames = [
            (
                "message_start",
                r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":25,"cache_read_input_tokens":5,"cache_creation_input_tokens":0,"output_tokens":1}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            ("ping", r#"{"type": "ping"}"#),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello"}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"read","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\": "}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"a.txt\"}"}}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":15}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ];
        let mut parser = AnthropicParser::default();
        let mut deltas = Vec::new();
        for (event, data) in frames {
            deltas.extend(parser.feed(event, data).unwrap());
        }
        assert!(parser.done());
        assert_eq!(
            deltas,
            vec![Delta::Reasoning("hmm".into()), Delta::Text("Hello".into())]
        );
        let c = parser.finish();
        assert_eq!(c.signature.as_deref(), Some("sig"));
        assert_eq!(c.tool_calls[0].id, "toolu_1");
        assert_eq!(c.tool_calls[0].arguments, r#"{"path": "a.txt"}"#);
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 30,
                cached_input_tokens: 5,
                output_tokens: 15,
                reasoning_tokens: 0
            }
        );
    }

    #[test]
    fn an_overloaded_error_event_is_retryable() {
        let mut parser = AnthropicParser::default();
        let err = parser
            .feed(
                "error",
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            )
            .unwrap_err();
        assert!(err.retryable());
        assert!(err.to_string().contains("Overloaded"));
    }

    #[test]
    fn tool_results_join_one_user_turn() {
        let messages = vec![
            Message::User {
                content: "go".into(),
                images: vec![],
            },
            Message::Assistant {
                content: "ok".into(),
                reasoning: "r".into(),
                signature: None,
                tool_calls: vec![
                    ToolCall {
                        id: "a".into(),
                        name: "bash".into(),
                        arguments: r#"{"command":"ls"}"#.into(),
                    },
                    ToolCall {
                        id: "b".into(),
                        name: "bash".into(),
                        arguments: "not json".into(),
                    },
                ],
            },
            Message::Tool {
                call_id: "a".into(),
                name: "bash".into(),
                output: "x".into(),
                is_error: false,
            },
            Message::Tool {
                call_id: "b".into(),
                name: "bash".into(),
                output: "y".into(),
                is_error: true,
            },
        ];
        let body = body(
            Request {
                model: "m",
                system: "s",
                messages: &messages,
                tools: &[],
                max_tokens: 10,
                images: &NO_IMAGES,
            },
            false,
        );
        let turns = body["messages"].as_array().unwrap();
        assert_eq!(turns.len(), 3);
        // No signature: the thinking block stays home.
        assert_eq!(turns[1]["content"][0]["type"], "text");
        assert_eq!(turns[1]["content"][1]["input"]["command"], "ls");
        assert_eq!(turns[1]["content"][2]["input"], json!({}));
        assert_eq!(turns[2]["content"].as_array().unwrap().len(), 2);
        assert_eq!(turns[2]["content"][1]["is_error"], true);
        assert_eq!(body["system"], "s");
    }
}
