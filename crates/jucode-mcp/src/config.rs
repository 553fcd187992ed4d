//! The `mcp_servers` key of `~/.jucode/config.json`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::McpError;

/// The config key holding the server list.
const KEY: &str = "mcp_servers";

/// Serialises read-modify-write cycles of config files within this process (every session
/// of the daemon rewrites the same file when an op is forwarded to all of them).
static CONFIG_LOCK: Mutex<()> = Mutex::new(());

/// How a server is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
}

impl Transport {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
        }
    }
}

/// One configured MCP server, as stored in config.json and sent in `mcp_set`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerConfig {
    pub name: String,
    pub transport: Transport,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

fn enabled_by_default() -> bool {
    true
}

impl McpServerConfig {
    /// Checks what serde cannot: a usable name, the transport's own fields.
    pub fn validate(&self) -> Result<(), McpError> {
        let invalid = |message: &str| McpError::InvalidServer {
            name: self.name.clone(),
            message: message.to_string(),
        };
        if self.name.trim().is_empty() {
            return Err(invalid("the name is empty"));
        }
        if self.name.chars().any(char::is_control) {
            return Err(invalid("the name contains control characters"));
        }
        match self.transport {
            Transport::Stdio => {
                if self.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
                    return Err(invalid("a stdio server needs a command"));
                }
            }
            Transport::Http => {
                let url = self.url.as_deref().unwrap_or("");
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(invalid("an http server needs an http:// or https:// url"));
                }
            }
        }
        if self.timeout_seconds == Some(0) {
            return Err(invalid("timeout_seconds must be at least 1"));
        }
        Ok(())
    }
}

/// Reads the `mcp_servers` array of `config_path`; a missing file or key is an empty list.
pub fn load_servers(config_path: &Path) -> Result<Vec<McpServerConfig>, McpError> {
    let root = read_object(config_path)?;
    servers_from(config_path, &root)
}

/// Rewrites only the `mcp_servers` key of `config_path`, keeping every other key, atomically.
pub fn save_servers(config_path: &Path, servers: &[McpServerConfig]) -> Result<(), McpError> {
    update_servers(config_path, |list| {
        *list = servers.to_vec();
        Ok(())
    })
}

/// Read-modify-write of the server list under the process-wide lock.
pub(crate) fn update_servers(
    config_path: &Path,
    change: impl FnOnce(&mut Vec<McpServerConfig>) -> Result<(), McpError>,
) -> Result<(), McpError> {
    let _guard = CONFIG_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut root = read_object(config_path)?;
    let mut servers = servers_from(config_path, &root)?;
    change(&mut servers)?;
    let value = serde_json::to_value(&servers).map_err(|e| McpError::Config {
        path: config_path.to_path_buf(),
        message: e.to_string(),
    })?;
    root.insert(KEY.to_string(), value);
    if let Some(dir) = config_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| McpError::Config {
            path: dir.to_path_buf(),
            message: e.to_string(),
        })?;
    }
    jucode_store::write_json_atomic(config_path, &Value::Object(root))?;
    Ok(())
}

fn read_object(config_path: &Path) -> Result<Map<String, Value>, McpError> {
    match jucode_store::read_json::<Value>(config_path)? {
        None => Ok(Map::new()),
        Some(Value::Object(map)) => Ok(map),
        Some(_) => Err(McpError::Config {
            path: config_path.to_path_buf(),
            message: "the config is not a JSON object".to_string(),
        }),
    }
}

fn servers_from(
    config_path: &Path,
    root: &Map<String, Value>,
) -> Result<Vec<McpServerConfig>, McpError> {
    let bad = |message: String| McpError::Config {
        path: config_path.to_path_buf(),
        message,
    };
    let list = match root.get(KEY) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(bad(format!("{KEY} is not an array"))),
    };
    let mut servers: Vec<McpServerConfig> = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let server: McpServerConfig =
            serde_json::from_value(entry.clone()).map_err(|e| bad(format!("{KEY}[{i}]: {e}")))?;
        server
            .validate()
            .map_err(|e| bad(format!("{KEY}[{i}]: {e}")))?;
        if servers.iter().any(|s| s.name == server.name) {
            return Err(bad(format!(
                "{KEY}[{i}]: a second server named {}",
                server.name
            )));
        }
        servers.push(server);
    }
    Ok(servers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stdio(name: &str) -> McpServerConfig {
        McpServerConfig {
            name: name.to_string(),
            transport: Transport::Stdio,
            command: Some("server".to_string()),
            args: vec![],
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            enabled: true,
            timeout_seconds: None,
        }
    }

    #[test]
    fn missing_file_and_key_are_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        assert!(load_servers(&path).unwrap().is_empty());
        std::fs::write(&path, r#"{"model":"m"}"#).unwrap();
        assert!(load_servers(&path).unwrap().is_empty());
    }

    #[test]
    fn save_keeps_other_keys_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, r#"{"model":"m","mcp_servers":[],"title_model":"t"}"#).unwrap();
        save_servers(&path, &[stdio("a")]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["model", "mcp_servers", "title_model"]);
        assert_eq!(load_servers(&path).unwrap(), vec![stdio("a")]);
    }

    #[test]
    fn defaults_and_bad_entries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(
            &path,
            json!({"mcp_servers":[{"name":"w","transport":"http","url":"https://x/mcp"}]})
                .to_string(),
        )
        .unwrap();
        let servers = load_servers(&path).unwrap();
        assert!(servers[0].enabled);
        assert!(servers[0].headers.is_empty());

        for bad in [
            json!({"mcp_servers": {}}),
            json!({"mcp_servers":[{"name":"x","transport":"ftp"}]}),
            json!({"mcp_servers":[{"name":"x","transport":"stdio"}]}),
            json!({"mcp_servers":[{"name":"x","transport":"http","url":"file:///etc"}]}),
            json!({"mcp_servers":[{"name":"","transport":"stdio","command":"c"}]}),
            json!({"mcp_servers":[
                {"name":"x","transport":"stdio","command":"c"},
                {"name":"x","transport":"stdio","command":"d"}]}),
            json!([1, 2]),
        ] {
            std::fs::write(&path, bad.to_string()).unwrap();
            let err = load_servers(&path).unwrap_err();
            assert!(err.to_string().contains("config.json"), "{err}");
        }
        std::fs::write(&path, "{not json").unwrap();
        assert!(load_servers(&path).is_err());
    }
}
