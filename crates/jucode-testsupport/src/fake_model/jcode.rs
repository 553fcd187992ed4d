//! The fake model's script for the real jcode (an OpenAI-compatible provider), served under
//! `/jcode/v1` so its requests never meet the jucode engine's script (both name `fake-model`).
//!
//! `GET /jcode/v1/models` lists `fake-model` and `fake-model-2`. `POST
//! /jcode/v1/chat/completions` streams SSE; when the last message is the user's:
//! - `USE_TOOL` (with `bash` offered) → one `bash` call `call_fake_1` running
//!   `echo fake-tool-output`;
//! - `DM from bob` (with a `…cotal_dm` tool offered) → a reply to `local.bob` through it;
//! - `cotal_orientation` (with that tool offered) → one call of it;
//!
//! anything else streams `Hello from the fake model.`.

use serde_json::{Value, json};

/// One chat request jcode made, as the real-jcode suites inspect it.
#[derive(Debug, Clone, PartialEq)]
pub struct JcodeRequest {
    pub path: String,
    /// The names of the functions offered.
    pub tools: Vec<String>,
    /// The role of the last message.
    pub last_role: Option<String>,
    /// The last message's `content` as JSON text.
    pub last_text: String,
}

/// The path prefix jcode's provider base URL carries.
pub(super) const PREFIX: &str = "/jcode";

/// The `config.toml` that makes this server jcode's default provider.
pub(super) fn config_toml(base_url: &str) -> String {
    format!(
        "[provider]\ndefault_provider = \"fake\"\ndefault_model = \"fake-model\"\n\n\
         [providers.fake]\ntype = \"openai-compatible\"\nbase_url = \"{base_url}\"\n\
         auth = \"none\"\nrequires_api_key = false\ndefault_model = \"fake-model\"\n\
         model_catalog = true\n\n[[providers.fake.models]]\nid = \"fake-model\"\n\
         context_window = 128000\n"
    )
}

/// The model list jcode reads at start.
pub(super) fn models() -> Value {
    json!({"object": "list", "data": [
        {"id": "fake-model", "object": "model", "owned_by": "fake", "context_length": 128000},
        {"id": "fake-model-2", "object": "model", "owned_by": "fake", "context_length": 64000}]})
}

/// What jcode's request looked like, for the log.
pub(super) fn summarize(path: &str, body: &Value) -> JcodeRequest {
    let tools = body["tools"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    JcodeRequest {
        path: path.to_string(),
        tools,
        last_role: last["role"].as_str().map(str::to_string),
        last_text: last["content"].to_string(),
    }
}

/// The SSE body answering one chat request (each event a `data:` line, then `[DONE]`).
pub(super) fn answer(request: &JcodeRequest, body: &Value) -> String {
    let model = body["model"].as_str().unwrap_or("fake-model").to_string();
    let chunk = |choices: Value| {
        json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
               "model": model, "choices": choices})
    };
    let mut events = Vec::new();
    match tool_call(request) {
        Some((id, name, arguments)) => {
            events.push(chunk(
                json!([{"index": 0, "delta": {"role": "assistant", "tool_calls": [
                {"index": 0, "id": id, "type": "function",
                 "function": {"name": name, "arguments": ""}}]}, "finish_reason": null}]),
            ));
            // The arguments arrive in pieces, as a real provider streams them.
            for piece in arguments.as_bytes().chunks(10) {
                let piece = String::from_utf8_lossy(piece);
                events.push(chunk(json!([{"index": 0, "delta": {"tool_calls": [
                    {"index": 0, "function": {"arguments": piece}}]}, "finish_reason": null}])));
            }
            events.push(chunk(
                json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
            ));
        }
        None => {
            for word in ["Hello ", "from ", "the ", "fake ", "model."] {
                events.push(chunk(json!([{"index": 0, "delta": {"role": "assistant",
                    "content": word}, "finish_reason": null}])));
            }
            events.push(chunk(
                json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
            ));
        }
    }
    let mut usage = chunk(json!([]));
    usage["usage"] = json!({"prompt_tokens": 123, "completion_tokens": 7, "total_tokens": 130});
    events.push(usage);
    let mut out: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    out.push_str("data: [DONE]\n\n");
    out
}

/// (call id, tool, arguments) when the script calls a tool.
fn tool_call(request: &JcodeRequest) -> Option<(String, String, String)> {
    if request.last_role.as_deref() != Some("user") {
        return None;
    }
    let offered = |suffix: &str| request.tools.iter().find(|t| t.ends_with(suffix)).cloned();
    let text = &request.last_text;
    if text.contains("USE_TOOL") && request.tools.iter().any(|t| t == "bash") {
        let arguments = json!({"command": "echo fake-tool-output", "description": "echo"});
        return Some(("call_fake_1".into(), "bash".into(), arguments.to_string()));
    }
    if text.contains("DM from bob")
        && let Some(dm) = offered("cotal_dm")
    {
        let arguments = json!({"to": "local.bob", "text": "pong from jcode"});
        return Some(("call_fake_dm".into(), dm, arguments.to_string()));
    }
    if text.contains("cotal_orientation")
        && let Some(orientation) = offered("cotal_orientation")
    {
        return Some(("call_fake_orient".into(), orientation, "{}".into()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(role: &str, text: &str, tools: &[&str]) -> JcodeRequest {
        JcodeRequest {
            path: "/v1/chat/completions".into(),
            tools: tools.iter().map(|t| t.to_string()).collect(),
            last_role: Some(role.into()),
            last_text: json!(text).to_string(),
        }
    }

    #[test]
    fn tools_are_called_only_when_offered_and_asked_by_the_user() {
        let call = tool_call(&request("user", "USE_TOOL now", &["bash"]));
        assert_eq!(call.map(|c| c.1), Some("bash".to_string()));
        assert!(tool_call(&request("user", "USE_TOOL now", &[])).is_none());
        assert!(tool_call(&request("tool", "USE_TOOL", &["bash"])).is_none());
        let dm = tool_call(&request("user", "a DM from bob", &["mcp__cotal__cotal_dm"]));
        assert_eq!(dm.map(|c| c.1), Some("mcp__cotal__cotal_dm".to_string()));
    }

    #[test]
    fn a_plain_answer_streams_the_greeting_and_ends() {
        let body = answer(&request("user", "hi", &[]), &json!({"model": "fake-model"}));
        let text: String = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter_map(|v| {
                v["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_string)
            })
            .collect();
        assert_eq!(text, "Hello from the fake model.");
        assert!(body.ends_with("data: [DONE]\n\n"));
    }
}
