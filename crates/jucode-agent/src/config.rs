//! `~/.jucode/config.json`: which model the engine talks to and how (keys in docs/CONFIG.md).

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

/// Why the config cannot be used. Shown to the user as a session `error`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "no model is configured: write {path} with at least protocol, base_url and model (see docs/CONFIG.md)"
    )]
    Missing { path: String },
    #[error("could not read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not valid: {message}")]
    Invalid { path: String, message: String },
}

/// Which wire API the model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OpenAI-compatible chat completions.
    Chat,
    /// Anthropic Messages.
    Anthropic,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Chat => "chat",
            Protocol::Anthropic => "anthropic",
        }
    }
}

/// An API key; never printed.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// A model `/model` offers.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelEntry {
    pub name: String,
    pub context_window: u64,
    pub max_output_tokens: u64,
}

/// The engine's view of config.json, validated.
#[derive(Debug, Clone)]
pub struct Config {
    pub protocol: Protocol,
    pub base_url: String,
    pub api_key: Option<Secret>,
    pub model: String,
    pub context_window: u64,
    pub max_output_tokens: u64,
    pub title_model: String,
    pub retry_attempts: u32,
    pub retry_base_delay_ms: u64,
    pub models: Vec<ModelEntry>,
    pub bash_timeout_ms: u64,
}

pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
pub const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 8_192;
pub const DEFAULT_RETRY_ATTEMPTS: u32 = 3;
pub const DEFAULT_RETRY_BASE_DELAY_MS: u64 = 1_000;
pub const DEFAULT_BASH_TIMEOUT_MS: u64 = 120_000;

#[derive(Deserialize)]
#[serde(untagged)]
enum RawModel {
    Name(String),
    Full {
        #[serde(alias = "model")]
        name: String,
        #[serde(default)]
        context_window: Option<u64>,
        #[serde(default)]
        max_output_tokens: Option<u64>,
    },
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    protocol: Option<String>,
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    api_key: Option<String>,
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    context_window: Option<u64>,
    #[serde(default)]
    max_output_tokens: Option<u64>,
    #[serde(default)]
    title_model: Option<String>,
    #[serde(default)]
    retry_attempts: Option<u32>,
    #[serde(default)]
    retry_base_delay_ms: Option<u64>,
    #[serde(default)]
    models: Vec<RawModel>,
    #[serde(default)]
    bash_timeout_ms: Option<u64>,
}

impl Config {
    /// Reads and checks `path`. `env` looks up `api_key_env` (the process environment in the
    /// engine, a map in tests).
    pub fn load(path: &Path, env: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ConfigError::Missing { path: shown });
            }
            Err(source) => {
                return Err(ConfigError::Read {
                    path: shown,
                    source,
                });
            }
        };
        Config::parse(&text, &shown, env)
    }

    pub fn parse(
        text: &str,
        shown: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: shown.to_string(),
            message,
        };
        let value: Value = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if !value.is_object() {
            return Err(invalid("the file must hold a JSON object".into()));
        }
        let raw: Raw = serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
        let protocol = match raw.protocol.as_deref().unwrap_or("chat") {
            "chat" => Protocol::Chat,
            "anthropic" => Protocol::Anthropic,
            other => {
                return Err(invalid(format!(
                    "protocol `{other}` is unknown (expected \"chat\" or \"anthropic\")"
                )));
            }
        };
        let base_url = raw
            .base_url
            .filter(|u| !u.trim().is_empty())
            .ok_or_else(|| invalid("base_url is missing".into()))?;
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(invalid(format!(
                "base_url `{base_url}` must start with http:// or https://"
            )));
        }
        let model = raw
            .model
            .filter(|m| !m.trim().is_empty())
            .ok_or_else(|| invalid("model is missing".into()))?;
        let api_key = match (raw.api_key, raw.api_key_env) {
            (Some(key), _) if !key.is_empty() => Some(Secret(key)),
            (_, Some(var)) => match env(&var) {
                Some(key) if !key.is_empty() => Some(Secret(key)),
                _ => {
                    return Err(invalid(format!(
                        "api_key_env names {var}, which is not set in the daemon's environment"
                    )));
                }
            },
            _ => None,
        };
        let context_window = raw.context_window.unwrap_or(DEFAULT_CONTEXT_WINDOW);
        if context_window < 1_000 {
            return Err(invalid(format!(
                "context_window {context_window} is too small (at least 1000 tokens)"
            )));
        }
        let max_output_tokens = raw.max_output_tokens.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS);
        let mut models: Vec<ModelEntry> = raw
            .models
            .into_iter()
            .map(|m| match m {
                RawModel::Name(name) => ModelEntry {
                    name,
                    context_window,
                    max_output_tokens,
                },
                RawModel::Full {
                    name,
                    context_window: cw,
                    max_output_tokens: mo,
                } => ModelEntry {
                    name,
                    context_window: cw.unwrap_or(context_window),
                    max_output_tokens: mo.unwrap_or(max_output_tokens),
                },
            })
            .filter(|m| !m.name.trim().is_empty())
            .collect();
        if !models.iter().any(|m| m.name == model) {
            models.insert(
                0,
                ModelEntry {
                    name: model.clone(),
                    context_window,
                    max_output_tokens,
                },
            );
        }
        Ok(Config {
            protocol,
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
            title_model: raw
                .title_model
                .filter(|m| !m.trim().is_empty())
                .unwrap_or_else(|| model.clone()),
            model,
            context_window,
            max_output_tokens,
            retry_attempts: raw.retry_attempts.unwrap_or(DEFAULT_RETRY_ATTEMPTS),
            retry_base_delay_ms: raw
                .retry_base_delay_ms
                .unwrap_or(DEFAULT_RETRY_BASE_DELAY_MS),
            models,
            bash_timeout_ms: raw.bash_timeout_ms.unwrap_or(DEFAULT_BASH_TIMEOUT_MS),
        })
    }

    /// The entry for `name` in `models`.
    pub fn entry(&self, name: &str) -> Option<&ModelEntry> {
        self.models.iter().find(|m| m.name == name)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_minimal_config_gets_defaults() {
        let c = Config::parse(
            r#"{"base_url":"http://x/v1/","model":"m","mcp_servers":[]}"#,
            "c",
            no_env,
        )
        .unwrap();
        assert_eq!(c.protocol, Protocol::Chat);
        assert_eq!(c.base_url, "http://x/v1");
        assert_eq!(c.title_model, "m");
        assert_eq!(c.retry_attempts, DEFAULT_RETRY_ATTEMPTS);
        assert_eq!(c.models.len(), 1);
        assert!(c.api_key.is_none());
    }

    #[test]
    fn the_key_comes_from_the_named_variable_and_is_never_printed() {
        let c = Config::parse(
            r#"{"protocol":"anthropic","base_url":"https://a","model":"m","api_key_env":"K","models":["m2",{"name":"m3","context_window":5000}]}"#,
            "c",
            |v| (v == "K").then(|| "sekrit".to_string()),
        )
        .unwrap();
        assert_eq!(c.api_key, Some(Secret("sekrit".into())));
        assert!(!format!("{c:?}").contains("sekrit"));
        assert_eq!(c.entry("m3").unwrap().context_window, 5000);
        assert_eq!(c.models[0].name, "m");
    }

    #[test]
    fn bad_configs_say_what_is_wrong() {
        let cases = [
            ("[]", "JSON object"),
            ("{", "EOF"),
            (r#"{"model":"m"}"#, "base_url is missing"),
            (
                r#"{"base_url":"ftp://x","model":"m"}"#,
                "must start with http",
            ),
            (r#"{"base_url":"http://x"}"#, "model is missing"),
            (
                r#"{"protocol":"x","base_url":"http://x","model":"m"}"#,
                "protocol `x`",
            ),
            (
                r#"{"base_url":"http://x","model":"m","api_key_env":"NOPE"}"#,
                "NOPE",
            ),
            (
                r#"{"base_url":"http://x","model":"m","retry_attempts":"a"}"#,
                "invalid type",
            ),
        ];
        for (text, needle) in cases {
            let err = Config::parse(text, "cfg", no_env).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
        let dir = tempfile::tempdir().unwrap();
        let err = Config::load(&dir.path().join("config.json"), no_env).unwrap_err();
        assert!(matches!(err, ConfigError::Missing { .. }));
    }
}
