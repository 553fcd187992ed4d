//! The client's `options` for a non-jucode engine, read once at start.
//!
//! The hub has already refused what a paired device may not send and malformed `env`; these
//! checks repeat the shape rules so an adapter used on its own cannot be handed a bad variable.

use std::path::PathBuf;

use jucode_engine::EngineError;
use jucode_protocol::{ApprovalMode, Object};
use serde_json::Value;

/// Options every adapter understands; engine-specific ones are read where they are used.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineOptions {
    /// The approval mode to start in (`manual` when absent).
    pub approval_mode: Option<ApprovalMode>,
    /// The model to start with.
    pub model: Option<String>,
    /// The engine binary to run instead of the one discovered.
    pub bin: Option<PathBuf>,
    /// Extra environment variables for the engine process.
    pub env: Vec<(String, String)>,
    /// ACP: the agent's program.
    pub command: Option<String>,
    /// ACP: the agent's arguments.
    pub args: Vec<String>,
    /// Claude Code: resume the conversation as it was at this assistant message uuid.
    pub resume_at: Option<String>,
    /// Claude Code: the thinking effort to start with.
    pub effort: Option<String>,
}

impl EngineOptions {
    /// Reads `options`, naming the field that is wrong.
    pub fn parse(options: &Object) -> Result<EngineOptions, EngineError> {
        let bad = |msg: String| EngineError::BadOptions(msg);
        let approval_mode = match options.get("approval_mode") {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => Some(ApprovalMode::parse(name).ok_or_else(|| {
                bad(format!(
                    "options.approval_mode: unknown approval mode `{name}` (expected manual, plan, auto, auto-edit or full-access)"
                ))
            })?),
            Some(_) => return Err(bad("options.approval_mode must be a string".into())),
        };
        let env = match options.get("env") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(map)) => {
                let mut env = Vec::new();
                for (name, value) in map {
                    let plain = !name.is_empty()
                        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                    if !plain || name.starts_with("DYLD_") || name.starts_with("LD_") {
                        return Err(bad(format!(
                            "options.env: {name} is not an allowed variable name"
                        )));
                    }
                    let Value::String(value) = value else {
                        return Err(bad(format!("options.env: {name} must be a string")));
                    };
                    env.push((name.clone(), value.clone()));
                }
                env
            }
            Some(_) => return Err(bad("options.env must be an object of strings".into())),
        };
        let args = match options.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad("options.args must be a list of strings".into()))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(bad("options.args must be a list of strings".into())),
        };
        Ok(EngineOptions {
            approval_mode,
            model: string(options, "model")?,
            bin: string(options, "bin")?.map(PathBuf::from),
            env,
            command: string(options, "command")?,
            args,
            resume_at: string(options, "resume_at")?,
            effort: string(options, "effort")?,
        })
    }

    /// The mode to start in.
    pub fn mode(&self) -> ApprovalMode {
        self.approval_mode.unwrap_or(ApprovalMode::Manual)
    }

    /// An environment variable as the engine will see it: `options.env` first, then ours.
    pub fn env_var(&self, name: &str) -> Option<String> {
        self.env
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(name).ok())
    }
}

fn string(options: &Object, field: &str) -> Result<Option<String>, EngineError> {
    match options.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(EngineError::BadOptions(format!(
            "options.{field} must be a string"
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Object {
        match v {
            Value::Object(map) => map,
            _ => Object::new(),
        }
    }

    #[test]
    fn aliases_and_fields_are_read() {
        let o = EngineOptions::parse(&obj(json!({
            "approval_mode": "full-auto", "model": "m", "bin": "/x/claude",
            "env": {"A_1": "v"}, "command": "agent", "args": ["--acp"]
        })))
        .unwrap();
        assert_eq!(o.mode(), ApprovalMode::FullAccess);
        assert_eq!(o.model.as_deref(), Some("m"));
        assert_eq!(o.bin, Some(PathBuf::from("/x/claude")));
        assert_eq!(o.env, vec![("A_1".to_string(), "v".to_string())]);
        assert_eq!(o.args, vec!["--acp".to_string()]);
        assert_eq!(
            EngineOptions::parse(&Object::new()).unwrap().mode(),
            ApprovalMode::Manual
        );
    }

    #[test]
    fn bad_options_name_the_field() {
        let cases = [
            (json!({"approval_mode": "yolo"}), "approval_mode"),
            (json!({"env": {"LD_PRELOAD": "x"}}), "LD_PRELOAD"),
            (json!({"env": {"A": 1}}), "A must be a string"),
            (json!({"model": 3}), "options.model"),
            (json!({"args": "x"}), "options.args"),
        ];
        for (options, needle) in cases {
            let err = EngineOptions::parse(&obj(options)).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }
}
