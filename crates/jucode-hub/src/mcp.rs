//! `mcp_set` / `mcp_remove` / `mcp_toggle` without a session: the daemon edits the
//! `mcp_servers` key of `<jucode home>/config.json` itself, then hands the op to every open
//! jucode session, whose MCP client reconnects and answers with `mcp_servers`.
//!
//! Done here with serde_json and jucode-store instead of the engine's MCP crate so the hub
//! stays free of an MCP client and its HTTP stack. The checks mirror what the engine's loader
//! (`jucode_mcp::load_servers`) accepts: an entry the hub saves must never make the whole list
//! unreadable for the engine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jucode_protocol::daemon::{DaemonEvent, McpOp};
use jucode_store::StoreError;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::cx::OpCx;
use crate::error::{IoError, OpError};

const SET_USAGE: &str = "mcp_set requires a server object";

/// Why an MCP change was refused; the texts are the serve protocol's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum McpError {
    #[error("mcp_set requires a server object")]
    SetUsage,
    #[error("{SET_USAGE}: {0}")]
    BadServer(serde_json::Error),
    #[error("invalid MCP server {name}: {why}")]
    Invalid { name: String, why: &'static str },
    #[error("mcp_remove requires name")]
    RemoveUsage,
    #[error("mcp_toggle requires name and enabled")]
    ToggleUsage,
    #[error("unknown MCP server: {0}")]
    UnknownServer(String),
    #[error("{}: the config is not a JSON object", .0.display())]
    NotAnObject(PathBuf),
    #[error("{}: {KEY} is not an array", .0.display())]
    NotAList(PathBuf),
    #[error("{}: the entry of {name} is not an object", .path.display())]
    BadEntry { path: PathBuf, name: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("{0}")]
    Encode(serde_json::Error),
}

const KEY: &str = "mcp_servers";

/// One server entry, as the engine reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Server {
    name: String,
    transport: Transport,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout_seconds: Option<u64>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Transport {
    Stdio,
    Http,
}

impl Server {
    fn check(&self) -> Result<(), McpError> {
        let invalid = |why: &'static str| {
            Err(McpError::Invalid {
                name: self.name.clone(),
                why,
            })
        };
        if self.name.trim().is_empty() {
            return invalid("the name is empty");
        }
        if self.name.chars().any(char::is_control) {
            return invalid("the name contains control characters");
        }
        match self.transport {
            Transport::Stdio if self.command.as_deref().is_none_or(|c| c.trim().is_empty()) => {
                return invalid("a stdio server needs a command");
            }
            Transport::Http => {
                let url = self.url.as_deref().unwrap_or("");
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return invalid("an http server needs an http:// or https:// url");
                }
            }
            Transport::Stdio => {}
        }
        if self.timeout_seconds == Some(0) {
            return invalid("timeout_seconds must be at least 1");
        }
        Ok(())
    }
}

/// The change an op asks for, checked before the file is touched.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Change {
    Set(Value),
    Remove(String),
    Toggle(String, bool),
}

impl Change {
    pub(crate) fn set(server: Option<Value>) -> Result<Change, McpError> {
        let Some(value @ Value::Object(_)) = server else {
            return Err(McpError::SetUsage);
        };
        let server: Server = serde_json::from_value(value).map_err(McpError::BadServer)?;
        server.check()?;
        serde_json::to_value(&server)
            .map(Change::Set)
            .map_err(McpError::Encode)
    }

    pub(crate) fn remove(name: Option<Value>) -> Result<Change, McpError> {
        match name {
            Some(Value::String(n)) if !n.is_empty() => Ok(Change::Remove(n)),
            _ => Err(McpError::RemoveUsage),
        }
    }

    pub(crate) fn toggle(name: Option<Value>, enabled: Option<Value>) -> Result<Change, McpError> {
        match (name, enabled) {
            (Some(Value::String(n)), Some(Value::Bool(e))) if !n.is_empty() => {
                Ok(Change::Toggle(n, e))
            }
            _ => Err(McpError::ToggleUsage),
        }
    }

    pub(crate) fn from_op(op: McpOp) -> Result<Change, McpError> {
        match op {
            McpOp::McpSet { server } => Change::set(server),
            McpOp::McpRemove { name } => Change::remove(name),
            McpOp::McpToggle { name, enabled } => Change::toggle(name, enabled),
        }
    }

    /// The op as it goes to an engine.
    pub(crate) fn engine_op(&self) -> Map<String, Value> {
        let mut op = Map::new();
        match self {
            Change::Set(server) => {
                op.insert("op".into(), "mcp_set".into());
                op.insert("server".into(), server.clone());
            }
            Change::Remove(name) => {
                op.insert("op".into(), "mcp_remove".into());
                op.insert("name".into(), name.clone().into());
            }
            Change::Toggle(name, enabled) => {
                op.insert("op".into(), "mcp_toggle".into());
                op.insert("name".into(), name.clone().into());
                op.insert("enabled".into(), (*enabled).into());
            }
        }
        op
    }
}

/// Applies `change` to `config_path`, keeping every other key and entry as it was.
pub(crate) fn save(config_path: &Path, change: &Change) -> Result<(), McpError> {
    let mut root = match jucode_store::read_json::<Value>(config_path)? {
        None => Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(McpError::NotAnObject(config_path.to_path_buf())),
    };
    let mut list = match root.get(KEY) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list.clone(),
        Some(_) => return Err(McpError::NotAList(config_path.to_path_buf())),
    };
    let named = |entry: &Value, name: &str| entry.get("name").and_then(Value::as_str) == Some(name);
    match change {
        Change::Set(server) => {
            let name = server.get("name").and_then(Value::as_str).unwrap_or("");
            match list.iter_mut().find(|e| named(e, name)) {
                Some(entry) => *entry = server.clone(),
                None => list.push(server.clone()),
            }
        }
        Change::Remove(name) => list.retain(|e| !named(e, name)),
        Change::Toggle(name, enabled) => {
            let Some(entry) = list.iter_mut().find(|e| named(e, name)) else {
                return Err(McpError::UnknownServer(name.clone()));
            };
            match entry.as_object_mut() {
                Some(obj) => {
                    obj.insert("enabled".into(), Value::Bool(*enabled));
                }
                None => {
                    return Err(McpError::BadEntry {
                        path: config_path.to_path_buf(),
                        name: name.clone(),
                    });
                }
            }
        }
    }
    // `preserve_order` keeps the keys where they were; a new key goes last.
    root.insert(KEY.into(), Value::Array(list));
    if let Some(dir) = config_path.parent() {
        std::fs::create_dir_all(dir).map_err(IoError::at(dir))?;
    }
    Ok(jucode_store::write_json_atomic(
        config_path,
        &Value::Object(root),
    )?)
}

/// Without a session: saves the change to config.json, replies `mcp_saved`, then sends the op
/// to every open session whose engine reads that file (each reconnects and answers with
/// `mcp_servers`). Paired devices were refused by the router.
pub(crate) fn handle(cx: &OpCx<'_>, op: McpOp) -> Result<(), OpError> {
    let change = Change::from_op(op)?;
    let hub = cx.hub;
    save(&hub.config.home.join("config.json"), &change)?;
    cx.reply(DaemonEvent::McpSaved);
    let reads_config = |engine: &str| {
        hub.config
            .engines
            .get(engine)
            .is_some_and(|f| f.reads_mcp_config())
    };
    hub.lock()
        .sessions
        .send_where(reads_config, &change.engine_op());
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ops_are_checked_with_the_serve_protocol_texts() {
        assert_eq!(
            Change::set(None).unwrap_err().to_string(),
            "mcp_set requires a server object"
        );
        assert_eq!(
            Change::set(Some(json!("x"))).unwrap_err().to_string(),
            "mcp_set requires a server object"
        );
        assert!(
            Change::set(Some(json!({"name":"a","transport":"ftp"})))
                .unwrap_err()
                .to_string()
                .starts_with("mcp_set requires a server object: ")
        );
        assert_eq!(
            Change::set(Some(json!({"name":"a","transport":"stdio"})))
                .unwrap_err()
                .to_string(),
            "invalid MCP server a: a stdio server needs a command"
        );
        assert!(
            Change::set(Some(
                json!({"name":"a","transport":"http","url":"file:///x"})
            ))
            .is_err()
        );
        assert!(
            Change::set(Some(
                json!({"name":"a","transport":"stdio","command":"c","timeout_seconds":0})
            ))
            .is_err()
        );
        assert_eq!(
            Change::remove(Some(json!(""))).unwrap_err().to_string(),
            "mcp_remove requires name"
        );
        assert_eq!(
            Change::toggle(Some(json!("a")), Some(json!("yes")))
                .unwrap_err()
                .to_string(),
            "mcp_toggle requires name and enabled"
        );
    }

    #[test]
    fn the_list_changes_and_everything_else_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(
            &path,
            json!({"model":"m","mcp_servers":[{"name":"old","transport":"stdio","command":"x","extra":1}],"base_url":"u"})
                .to_string(),
        )
        .unwrap();
        let set = Change::set(Some(
            json!({"name":"new","transport":"http","url":"http://127.0.0.1:1/mcp"}),
        ))
        .unwrap();
        save(&path, &set).unwrap();
        save(
            &path,
            &Change::toggle(Some(json!("old")), Some(json!(false))).unwrap(),
        )
        .unwrap();
        let value: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["model", "mcp_servers", "base_url"]);
        let list = value["mcp_servers"].as_array().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0]["enabled"], false);
        assert_eq!(list[0]["extra"], 1);
        assert_eq!(list[1]["url"], "http://127.0.0.1:1/mcp");
        assert_eq!(list[1]["enabled"], true);

        save(&path, &Change::remove(Some(json!("old"))).unwrap()).unwrap();
        let value: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(value["mcp_servers"].as_array().unwrap().len(), 1);
        assert_eq!(
            save(&path, &Change::Toggle("gone".into(), true))
                .unwrap_err()
                .to_string(),
            "unknown MCP server: gone"
        );
        std::fs::write(&path, "[1]").unwrap();
        assert!(
            save(&path, &set)
                .unwrap_err()
                .to_string()
                .contains("not a JSON object")
        );
    }

    #[test]
    fn a_missing_file_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("home/config.json");
        let set = Change::set(Some(json!({"name":"a","transport":"stdio","command":"c"}))).unwrap();
        save(&path, &set).unwrap();
        let value: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(value["mcp_servers"][0]["command"], "c");
        assert_eq!(set.engine_op()["op"], "mcp_set");
    }
}
