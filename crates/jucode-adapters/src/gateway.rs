//! Running a Claude Code or Codex process through the JuCode gateway (`options.jucode_gateway`).
//! The endpoint and key come from the daemon's host ([`GatewayEndpoint`], the JuCode login) and
//! go to that one process only: Claude Code reads them from a per-session `--settings` file in
//! the daemon's state directory (mode 0600, removed with the process), Codex from `-c`
//! overrides naming a model provider whose key is in an environment variable. Nothing is
//! written to `~/.claude`, `~/.codex` or any other user config.

use std::path::{Path, PathBuf};

use jucode_engine::EngineError;
use jucode_protocol::Object;
use serde_json::{Value, json};

/// The variable Codex reads the gateway key from (named by the provider's `env_key`).
pub const CODEX_KEY_VAR: &str = "JUCODE_GATEWAY_KEY";

/// The JuCode gateway as the signed-in account reaches it.
#[derive(Clone)]
pub struct GatewayEndpoint {
    /// The JuCode API base URL.
    pub api_url: String,
    /// The login's token, sent as the engine's API key.
    pub key: String,
}

impl std::fmt::Debug for GatewayEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayEndpoint")
            .field("api_url", &self.api_url)
            .finish_non_exhaustive()
    }
}

impl GatewayEndpoint {
    /// Where Claude Code sends Messages API requests (`ANTHROPIC_BASE_URL`).
    pub fn anthropic_url(&self) -> String {
        format!(
            "{}/v1/gateway/anthropic",
            self.api_url.trim_end_matches('/')
        )
    }

    /// Where Codex sends Responses API requests (the provider's `base_url`).
    pub fn openai_url(&self) -> String {
        format!(
            "{}/v1/gateway/openai/v1",
            self.api_url.trim_end_matches('/')
        )
    }
}

/// Whether the options ask for the gateway.
pub(crate) fn requested(options: &Object) -> Result<bool, EngineError> {
    match options.get("jucode_gateway") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(on)) => Ok(*on),
        Some(_) => Err(EngineError::BadOptions(
            "options.jucode_gateway must be true or false".into(),
        )),
    }
}

/// The endpoint, or why a gateway session cannot start.
pub(crate) fn endpoint(config: &crate::AdapterConfig) -> Result<&GatewayEndpoint, EngineError> {
    config.gateway.as_ref().ok_or_else(|| {
        EngineError::Unavailable(
            "jucode_gateway: not signed in to JuCode (no gateway login in ~/.jucode/auth.json)"
                .into(),
        )
    })
}

/// `<jucode home>/daemon/claude-gateway-<session>.json`.
pub(crate) fn claude_settings_path(jucode_home: &Path, session: &str) -> PathBuf {
    jucode_home
        .join("daemon")
        .join(format!("claude-gateway-{session}.json"))
}

/// Writes the session's settings file (0600) and returns its `--settings` flag.
///
/// The user's own Anthropic key is blanked: Claude Code sends a key from `ANTHROPIC_API_KEY`
/// (the environment or a settings file) or an `apiKeyHelper` as `x-api-key` next to the
/// gateway's bearer token, which would hand it to the gateway. A flag settings file outranks
/// the user's, and an empty value counts as unset.
pub(crate) fn claude_settings(
    endpoint: &GatewayEndpoint,
    path: &Path,
) -> Result<String, EngineError> {
    let settings = json!({
        "env": {
            "ANTHROPIC_BASE_URL": endpoint.anthropic_url(),
            "ANTHROPIC_AUTH_TOKEN": endpoint.key,
            "ANTHROPIC_API_KEY": "",
        },
        "apiKeyHelper": "",
    });
    crate::agent_tools::write_private(path, settings.to_string().as_bytes()).map_err(|e| {
        EngineError::Unavailable(format!("could not write {}: {e}", path.display()))
    })?;
    Ok(format!("--settings={}", path.display()))
}

/// A Claude Code session's gateway state: whether its process runs through the gateway, the
/// settings file that says so, and a switch waiting for the running turn to end.
#[derive(Debug)]
pub(crate) struct ClaudeGateway {
    pub(crate) on: bool,
    pub(crate) pending: bool,
    endpoint: Option<GatewayEndpoint>,
    file: PathBuf,
}

impl ClaudeGateway {
    pub(crate) fn new(
        options: &Object,
        config: &crate::AdapterConfig,
        session: &str,
    ) -> Result<ClaudeGateway, EngineError> {
        let on = requested(options)?;
        if on {
            endpoint(config)?;
        }
        Ok(ClaudeGateway {
            on,
            pending: false,
            endpoint: config.gateway.clone(),
            file: claude_settings_path(&config.jucode_home, session),
        })
    }

    /// Whether the gateway can be switched on (a JuCode login is known).
    pub(crate) fn available(&self) -> bool {
        self.endpoint.is_some()
    }

    /// The `--settings` flag of the next process (its file written), or none (its file
    /// removed) when the session is off the gateway.
    pub(crate) fn flag(&self) -> Result<Option<String>, EngineError> {
        match (&self.endpoint, self.on) {
            (Some(endpoint), true) => claude_settings(endpoint, &self.file).map(Some),
            _ => {
                self.remove();
                Ok(None)
            }
        }
    }

    pub(crate) fn remove(&self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

/// Codex's `-c` overrides for a gateway session and the key's variable.
pub(crate) fn codex_overrides(endpoint: &GatewayEndpoint) -> (Vec<String>, (String, String)) {
    let provider = |key: &str, value: &str| {
        // TOML basic strings: the JSON encoding of a string is one.
        format!(
            "model_providers.jucode.{key}={}",
            Value::String(value.into())
        )
    };
    let mut args = Vec::new();
    for (key, value) in [
        ("name", "JuCode gateway"),
        ("base_url", endpoint.openai_url().as_str()),
        ("env_key", CODEX_KEY_VAR),
        ("wire_api", "responses"),
    ] {
        args.push("-c".to_string());
        args.push(provider(key, value));
    }
    args.push("-c".into());
    args.push("model_provider=\"jucode\"".into());
    (args, (CODEX_KEY_VAR.to_string(), endpoint.key.clone()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn endpoint() -> GatewayEndpoint {
        GatewayEndpoint {
            api_url: "http://127.0.0.1:9/".into(),
            key: "secret".into(),
        }
    }

    #[test]
    fn the_key_is_not_in_debug_output() {
        assert!(!format!("{:?}", endpoint()).contains("secret"));
    }

    #[test]
    fn codex_gets_a_provider_and_the_key_by_variable() {
        let (args, env) = codex_overrides(&endpoint());
        assert!(args.contains(&"model_provider=\"jucode\"".to_string()));
        assert!(
            args.contains(
                &"model_providers.jucode.base_url=\"http://127.0.0.1:9/v1/gateway/openai/v1\""
                    .to_string()
            )
        );
        assert!(args.iter().all(|a| !a.contains("secret")));
        assert_eq!(env, (CODEX_KEY_VAR.to_string(), "secret".to_string()));
    }

    #[test]
    fn the_claude_settings_file_is_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = claude_settings_path(dir.path(), "s1");
        let flag = claude_settings(&endpoint(), &path).unwrap();
        assert_eq!(flag, format!("--settings={}", path.display()));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let settings: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(settings["env"]["ANTHROPIC_AUTH_TOKEN"], "secret");
        // The user's own key and key helper are blanked, so they cannot reach the gateway.
        assert_eq!(settings["env"]["ANTHROPIC_API_KEY"], "");
        assert_eq!(settings["apiKeyHelper"], "");
        assert_eq!(
            settings["env"]["ANTHROPIC_BASE_URL"],
            "http://127.0.0.1:9/v1/gateway/anthropic"
        );
    }
}
