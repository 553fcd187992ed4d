//! `sessions.jsonl`: one record per change to a session, folded at start into the session
//! map.

use std::collections::HashMap;
use std::path::PathBuf;

use jucode_protocol::daemon::sessions::DEFAULT_ENGINE;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Session;

/// One line of `sessions.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(super) enum Record {
    /// The session was created or reopened.
    Open {
        session: String,
        cwd: String,
        #[serde(default = "default_engine")]
        engine: String,
        #[serde(default)]
        agent: Option<String>,
        #[serde(default)]
        chat: bool,
        at: u64,
    },
    /// The session's engine stopped.
    Close { session: String, at: u64 },
    /// A client changed what the session is called or where it shows.
    Meta {
        session: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        archived: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hidden: Option<bool>,
        /// `Some(null)` clears the group: kept apart from an absent field when read back.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "present"
        )]
        group: Option<Value>,
        at: u64,
    },
    /// The engine named the new session `to` (its conversation id) at its start-up.
    Renamed {
        session: String,
        to: String,
        at: u64,
    },
    /// The title the daemon gave the session from its first message.
    Title {
        session: String,
        title: String,
        at: u64,
    },
    /// The session's `jucode_gateway` flag changed (`session_create`/`session_open` options,
    /// `set_gateway`).
    Gateway {
        session: String,
        gateway: bool,
        at: u64,
    },
    #[serde(other)]
    Unknown,
}

/// Reads a field that is present (even as `null`) as `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

pub(crate) fn default_engine() -> String {
    DEFAULT_ENGINE.into()
}

/// Every rename in the log: the first id → the engine's.
pub(super) fn renames(records: &[Record]) -> HashMap<String, String> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Renamed { session, to, .. } => Some((session.clone(), to.clone())),
            _ => None,
        })
        .collect()
}

/// Folds the log into the sessions it describes.
pub(super) fn fold(records: Vec<Record>) -> HashMap<String, Session> {
    let mut map: HashMap<String, Session> = HashMap::new();
    for record in records {
        match record {
            Record::Open {
                session,
                cwd,
                engine,
                agent,
                chat,
                at,
            } => {
                let s = map.entry(session.clone()).or_insert_with(|| {
                    Session::new(
                        session,
                        PathBuf::from(&cwd),
                        engine.clone(),
                        chat,
                        agent.clone(),
                        at,
                    )
                });
                s.cwd = PathBuf::from(cwd);
                s.engine = engine;
                s.updated_at = at;
            }
            Record::Close { session, at } => {
                if let Some(s) = map.get_mut(&session) {
                    s.updated_at = s.updated_at.max(at);
                }
            }
            Record::Meta {
                session,
                title,
                archived,
                hidden,
                group,
                at,
            } => {
                if let Some(s) = map.get_mut(&session) {
                    s.apply_meta(title, archived, hidden, group);
                    s.updated_at = s.updated_at.max(at);
                }
            }
            Record::Renamed { session, to, at } => {
                if let Some(mut s) = map.remove(&session) {
                    s.id = to.clone();
                    s.updated_at = s.updated_at.max(at);
                    map.insert(to, s);
                }
            }
            Record::Title { session, title, at } => {
                if let Some(s) = map.get_mut(&session) {
                    s.auto_title = Some(title);
                    s.updated_at = s.updated_at.max(at);
                }
            }
            Record::Gateway {
                session,
                gateway,
                at,
            } => {
                if let Some(s) = map.get_mut(&session) {
                    s.gateway = gateway;
                    s.updated_at = s.updated_at.max(at);
                }
            }
            Record::Unknown => {}
        }
    }
    map
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renames_map_the_first_id_to_the_engines() {
        let records: Vec<Record> = [
            json!({"kind":"open","session":"tmp","cwd":"/p","engine":"codex","at":1}),
            json!({"kind":"renamed","session":"tmp","to":"thread-1","at":2}),
        ]
        .into_iter()
        .map(|v| serde_json::from_value(v).unwrap())
        .collect();
        let renames = renames(&records);
        assert_eq!(renames.len(), 1);
        assert_eq!(renames["tmp"], "thread-1");
    }

    #[test]
    fn a_session_an_engine_named_is_read_back_under_its_name() {
        let records: Vec<Record> = [
            json!({"kind":"open","session":"tmp","cwd":"/p","engine":"codex","at":1}),
            json!({"kind":"renamed","session":"tmp","to":"thread-1","at":2}),
            json!({"kind":"meta","session":"thread-1","title":"Mine","at":3}),
        ]
        .into_iter()
        .map(|r| serde_json::from_value(r).unwrap())
        .collect();
        let map = fold(records);
        assert_eq!(map.len(), 1);
        let s = &map["thread-1"];
        assert_eq!(s.id, "thread-1");
        assert_eq!(s.title(), "Mine");
        assert_eq!(s.updated_at, 3);
    }
}
