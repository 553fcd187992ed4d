//! `requirements.jsonl`: each change writes the requirement whole (`saved`) or its removal
//! (`deleted`); the fold keeps the last line of each id. Ids count up from the highest ever
//! written, deleted ones included, so an id is never given twice.

use std::collections::BTreeMap;

use jucode_protocol::daemon::{Progress, RequirementGate, RequirementState};
use jucode_store::{JsonlLog, StateDir, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::HubError;

/// A requirement as the log keeps it (the list adds what is derived from its sessions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Stored {
    pub(crate) id: String,
    pub(crate) text: String,
    #[serde(default)]
    pub(crate) title: String,
    #[serde(default)]
    pub(crate) title_auto: bool,
    #[serde(default)]
    pub(crate) images: Vec<String>,
    #[serde(default)]
    pub(crate) project: Option<String>,
    /// Saved before projects had ids: directories, the first of which names the project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) projects: Option<Vec<String>>,
    pub(crate) state: RequirementState,
    #[serde(default)]
    pub(crate) sessions: Vec<String>,
    #[serde(default)]
    pub(crate) progress: Progress,
    #[serde(default)]
    pub(crate) progress_at: u64,
    #[serde(default = "desktop")]
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) source_session: Option<String>,
    #[serde(default)]
    pub(crate) gate: Option<RequirementGate>,
    #[serde(default)]
    pub(crate) proposal: Option<Value>,
    #[serde(default)]
    pub(crate) created_at: u64,
    #[serde(default)]
    pub(crate) updated_at: u64,
}

fn desktop() -> String {
    "desktop".into()
}

/// One line of `requirements.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record {
    Saved {
        requirement: Box<Stored>,
    },
    Deleted {
        id: String,
        at: u64,
    },
    #[serde(other)]
    Unknown,
}

/// The number in `R-<n>`.
pub(crate) fn number(id: &str) -> Option<u64> {
    id.strip_prefix("R-")?.parse().ok()
}

pub(crate) struct Store {
    log: JsonlLog,
    /// By number, so the list comes oldest first.
    pub(crate) map: BTreeMap<u64, Stored>,
    last: u64,
}

impl Store {
    pub(crate) fn open(store: &StateDir) -> Result<Store, HubError> {
        let (log, records) = store.open_log::<Record>("requirements.jsonl")?;
        let mut map = BTreeMap::new();
        let mut last = 0;
        for record in records {
            match record {
                Record::Saved { requirement } => {
                    if let Some(n) = number(&requirement.id) {
                        last = last.max(n);
                        map.insert(n, *requirement);
                    }
                }
                Record::Deleted { id, .. } => {
                    if let Some(n) = number(&id) {
                        last = last.max(n);
                        map.remove(&n);
                    }
                }
                Record::Unknown => {}
            }
        }
        Ok(Store { log, map, last })
    }

    /// The id the next requirement gets.
    pub(crate) fn next_id(&self) -> String {
        format!("R-{}", self.last + 1)
    }

    pub(crate) fn get(&self, id: &str) -> Option<&Stored> {
        self.map.get(&number(id)?)
    }

    /// Writes the requirement (fsynced), then keeps it.
    pub(crate) fn save(&mut self, requirement: Stored) -> Result<(), StoreError> {
        let Some(n) = number(&requirement.id) else {
            return Ok(());
        };
        self.log.append(&Record::Saved {
            requirement: Box::new(requirement.clone()),
        })?;
        self.last = self.last.max(n);
        self.map.insert(n, requirement);
        Ok(())
    }

    /// Writes several requirements with one fsync.
    pub(crate) fn save_all(&mut self, list: Vec<Stored>) -> Result<(), StoreError> {
        if list.is_empty() {
            return Ok(());
        }
        let records: Vec<Record> = list
            .iter()
            .map(|r| Record::Saved {
                requirement: Box::new(r.clone()),
            })
            .collect();
        self.log.append_all(&records)?;
        for r in list {
            if let Some(n) = number(&r.id) {
                self.last = self.last.max(n);
                self.map.insert(n, r);
            }
        }
        Ok(())
    }

    pub(crate) fn delete(&mut self, id: &str, at: u64) -> Result<(), StoreError> {
        let Some(n) = number(id) else {
            return Ok(());
        };
        self.log.append(&Record::Deleted {
            id: id.to_string(),
            at,
        })?;
        self.map.remove(&n);
        Ok(())
    }
}
