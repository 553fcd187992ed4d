//! `dispatches.jsonl`: every change writes the dispatch whole (`saved`), fsynced; the fold
//! keeps the last line of each id. Lines of kinds this build does not know are skipped.

use jucode_protocol::daemon::DispatchInfo;
use jucode_store::{JsonlLog, StateDir, StoreError};
use serde::{Deserialize, Serialize};

use crate::HubError;

/// A dispatch as the log keeps it: the list's fields and what only the hub needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Stored {
    #[serde(flatten)]
    pub(crate) info: DispatchInfo,
    /// The requirement its tasks' sessions are linked to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) requirement: Option<String>,
    /// Each task's text as the dispatcher wrote it, in task order (task `n` at `n - 1`):
    /// what its session is sent.
    #[serde(default)]
    pub(crate) texts: Vec<String>,
    /// The results went to the dispatcher for its summary (never sent twice).
    #[serde(default)]
    pub(crate) summarizing: bool,
}

/// One line of `dispatches.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record {
    Saved {
        dispatch: Box<Stored>,
    },
    #[serde(other)]
    Unknown,
}

pub(crate) struct Store {
    log: JsonlLog,
    /// Oldest first.
    pub(crate) list: Vec<Stored>,
}

impl Store {
    pub(crate) fn open(store: &StateDir) -> Result<Store, HubError> {
        let (log, records) = store.open_log::<Record>("dispatches.jsonl")?;
        let mut list: Vec<Stored> = Vec::new();
        for record in records {
            if let Record::Saved { dispatch } = record {
                match list.iter_mut().find(|d| d.info.id == dispatch.info.id) {
                    Some(slot) => *slot = *dispatch,
                    None => list.push(*dispatch),
                }
            }
        }
        Ok(Store { log, list })
    }

    pub(crate) fn get(&self, id: &str) -> Option<&Stored> {
        self.list.iter().find(|d| d.info.id == id)
    }

    /// Writes the dispatch (fsynced), then keeps it.
    pub(crate) fn save(&mut self, dispatch: Stored) -> Result<(), StoreError> {
        self.log.append(&Record::Saved {
            dispatch: Box::new(dispatch.clone()),
        })?;
        match self.list.iter_mut().find(|d| d.info.id == dispatch.info.id) {
            Some(slot) => *slot = dispatch,
            None => self.list.push(dispatch),
        }
        Ok(())
    }
}
