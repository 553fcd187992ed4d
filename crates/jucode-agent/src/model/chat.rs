//! OpenAI-compatible chat completions: request bodies and the streamed-chunk parser.

use std::collections::BTreeMap;

use serde_json::{Value, json};

#[cfg(test)]
use super::NO_IMAGES;
use super::{Completion, Delta, Message, ModelError, Request, ToolCall, Usage, normalized, num};

/// The request body; `stream` asks for SSE with usage in the last chunk.
pub fn body(req: Request<'_>, stream: bool) -> Value {
    let mut messages = vec![json!({"role": "system", "content": req.system})];
    for message in normalized(req.messages) {
        messages.push(match message {
            Message::User { content, images } if images.is_empty() => {
                json!({"role": "user", "content": content})
            }
            // Text first, then each image as a data URL.
            Message::User { content, images } => {
                let mut parts = vec![json!({"type": "text", "text": content})];
                for path in &images {
                    parts.push(match req.images.get(path) {
                        Some(image) => json!({
                            "type": "image_url",
                            "image_url": {"url": format!("data:{};base64,{}", image.media_type, image.base64)},
                        }),
                        None => json!({"type": "text", "text": super::missing_image(path)}),
                    });
                }
                json!({"role": "user", "content": parts})
            }
            Message::Assistant {
                content,
                tool_calls,
                ..
            } => {
                let mut m = json!({"role": "assistant", "content": content});
                if !tool_calls.is_empty() {
                    m["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments},
                            })
                        })
                        .collect();
                    if content.is_empty() {
                        m["content"] = Value::Null;
                    }
                }
                m
            }
            Message::Tool {
                call_id, output, ..
            } => json!({"role": "tool", "tool_call_id": call_id, "content": output}),
        });
    }
    let mut body = json!({
        "model": req.model,
        "messages": messages,
        "max_tokens": req.max_tokens,
        "stream": stream,
    });
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                })
            })
            .collect();
    }
    body
}

/// The text of a non-streamed answer.
pub fn completion_text(value: &Value) -> Result<String, ModelError> {
    if let Some(message) = api_error(value) {
        return Err(ModelError::Api {
            message,
            retryable: false,
        });
    }
    value
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| ModelError::Decode("no choices[0].message.content in the answer".into()))
}

fn api_error(value: &Value) -> Option<String> {
    let error = value.get("error")?;
    if error.is_null() {
        return None;
    }
    Some(
        error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| error.to_string()),
    )
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Folds `chat.completion.chunk` events into deltas and a [`Completion`].
#[derive(Default)]
pub struct ChatParser {
    text: String,
    reasoning: String,
    /// By the `index` the API gives each call.
    calls: BTreeMap<u64, PartialCall>,
    usage: Usage,
    done: bool,
}

impl ChatParser {
    /// One SSE `data:` payload.
    pub fn feed(&mut self, data: &str) -> Result<Vec<Delta>, ModelError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| ModelError::Decode(format!("{e} in chunk {}", super::clip(data, 200))))?;
        if let Some(message) = api_error(&chunk) {
            return Err(ModelError::Api {
                message,
                retryable: true,
            });
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Usage {
                input_tokens: num(usage, "prompt_tokens"),
                cached_input_tokens: usage
                    .pointer("/prompt_tokens_details/cached_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                output_tokens: num(usage, "completion_tokens"),
                reasoning_tokens: usage
                    .pointer("/completion_tokens_details/reasoning_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
            };
        }
        let mut deltas = Vec::new();
        let Some(delta) = chunk.pointer("/choices/0/delta") else {
            return Ok(deltas);
        };
        // DeepSeek and others say reasoning_content; OpenRouter says reasoning.
        for field in ["reasoning_content", "reasoning"] {
            if let Some(r) = delta.get(field).and_then(Value::as_str)
                && !r.is_empty()
            {
                self.reasoning.push_str(r);
                deltas.push(Delta::Reasoning(r.to_string()));
            }
        }
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            self.text.push_str(text);
            deltas.push(Delta::Text(text.to_string()));
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (pos, call) in calls.iter().enumerate() {
                let index = call
                    .get("index")
                    .and_then(Value::as_u64)
                    .unwrap_or(pos as u64);
                let entry = self.calls.entry(index).or_default();
                if let Some(id) = call.get("id").and_then(Value::as_str) {
                    entry.id.push_str(id);
                }
                if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                    entry.name.push_str(name);
                }
                if let Some(args) = call.pointer("/function/arguments").and_then(Value::as_str) {
                    entry.arguments.push_str(args);
                }
            }
        }
        Ok(deltas)
    }

    pub fn done(&self) -> bool {
        self.done
    }

    pub fn finish(self) -> Completion {
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, c)| ToolCall {
                id: if c.id.is_empty() {
                    format!("call_{index}")
                } else {
                    c.id
                },
                name: c.name,
                arguments: if c.arguments.trim().is_empty() {
                    "{}".into()
                } else {
                    c.arguments
                },
            })
            .collect();
        Completion {
            text: self.text,
            reasoning: self.reasoning,
            signature: None,
            tool_calls,
            usage: self.usage,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::model::ToolSpec;

    /// Frames shaped as OpenAI's stream sends them: role first, content pieces, a tool call
    /// whose arguments arrive in pieces, the finish chunk, then usage with empty choices.
    #[test]
    fn a_streamed_answer_with_text_reasoning_and_a_tool_call() {
        let frames = [
            r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"reasoning_content":"think"},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"Run"},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"ning ls"},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"bash","arguments":""}}]},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\""}}]},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":\"ls\"}"}}]},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"id":"c1","choices":[],"usage":{"prompt_tokens":812,"completion_tokens":41,"prompt_tokens_details":{"cached_tokens":100},"completion_tokens_details":{"reasoning_tokens":7}}}"#,
            "[DONE]",
        ];
        let mut parser = ChatParser::default();
        let mut deltas = Vec::new();
        for frame in frames {
            deltas.extend(parser.feed(frame).unwrap());
        }
        assert!(parser.done());
        assert_eq!(
            deltas,
            vec![
                Delta::Reasoning("think".into()),
                Delta::Text("Run".into()),
                Delta::Text("ning ls".into())
            ]
        );
        let c = parser.finish();
        assert_eq!(c.text, "Running ls");
        assert_eq!(
            c.tool_calls,
            vec![ToolCall {
                id: "call_9".into(),
                name: "bash".into(),
                arguments: r#"{"command":"ls"}"#.into()
            }]
        );
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 812,
                cached_input_tokens: 100,
                output_tokens: 41,
                reasoning_tokens: 7
            }
        );
    }

    #[test]
    fn an_error_chunk_and_garbage_are_errors() {
        let mut parser = ChatParser::default();
        let err = parser
            .feed(r#"{"error":{"message":"overloaded","type":"server_error"}}"#)
            .unwrap_err();
        assert!(err.to_string().contains("overloaded"));
        assert!(parser.feed("{not json").is_err());
    }

    #[test]
    fn the_body_pairs_calls_with_results_and_asks_for_usage() {
        let messages = vec![
            Message::User {
                content: "hi".into(),
                images: vec![],
            },
            Message::Assistant {
                content: String::new(),
                reasoning: "r".into(),
                signature: None,
                tool_calls: vec![ToolCall {
                    id: "c".into(),
                    name: "bash".into(),
                    arguments: "{}".into(),
                }],
            },
            Message::Tool {
                call_id: "c".into(),
                name: "bash".into(),
                output: "out".into(),
                is_error: false,
            },
        ];
        let tools = vec![ToolSpec {
            name: "bash".into(),
            description: "d".into(),
            parameters: json!({"type":"object"}),
        }];
        let body = body(
            Request {
                model: "m",
                system: "sys",
                messages: &messages,
                tools: &tools,
                max_tokens: 100,
                images: &NO_IMAGES,
            },
            true,
        );
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["name"],
            "bash"
        );
        assert_eq!(body["messages"][3]["tool_call_id"], "c");
        assert_eq!(body["tools"][0]["function"]["name"], "bash");
    }
}
