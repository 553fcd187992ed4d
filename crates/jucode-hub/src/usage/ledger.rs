//! `usage.jsonl`: one fsynced line per finished turn, folded at start (a torn last line is
//! dropped and the file cut back to its last whole line by [`jucode_store::JsonlLog`]) into
//! an index by session, so a session's usage is read without scanning the whole ledger.

use std::collections::HashMap;

use jucode_store::{JsonlLog, StateDir, StoreError};
use serde::{Deserialize, Serialize};

/// One finished turn. Unknown keys (older and newer daemons) are ignored; a missing estimate
/// reads as unpriced. A counter the engine did not report is left out of the line (absent,
/// not zero: ACP's `usage` is optional) and sums as 0.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TurnRecord {
    pub(crate) session: String,
    pub(crate) turn_id: String,
    /// The engine that ran the turn (`jucode`, `claude`, `codex`, `acp:…`).
    #[serde(default)]
    pub(crate) channel_kind: String,
    #[serde(default)]
    pub(crate) model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cached_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cache_write_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reasoning_tokens: Option<u64>,
    #[serde(default = "one")]
    pub(crate) requests: u64,
    /// Priced when recorded; `null` for a model without a price then.
    #[serde(default)]
    pub(crate) estimated_cost_usd: Option<f64>,
    pub(crate) ended_at: u64,
}

fn one() -> u64 {
    1
}

/// The ledger and its index.
pub(crate) struct Ledger {
    log: JsonlLog,
    turns: Vec<TurnRecord>,
    by_session: HashMap<String, Vec<usize>>,
}

impl Ledger {
    pub(crate) fn open(store: &StateDir) -> Result<Ledger, StoreError> {
        let (log, turns) = store.open_log::<TurnRecord>("usage.jsonl")?;
        let mut ledger = Ledger {
            log,
            turns: Vec::with_capacity(turns.len()),
            by_session: HashMap::new(),
        };
        for turn in turns {
            ledger.index(turn);
        }
        Ok(ledger)
    }

    fn index(&mut self, turn: TurnRecord) {
        self.by_session
            .entry(turn.session.clone())
            .or_default()
            .push(self.turns.len());
        self.turns.push(turn);
    }

    /// Writes the turn (fsynced) and only then counts it.
    pub(crate) fn append(&mut self, turn: TurnRecord) -> Result<(), StoreError> {
        self.log.append(&turn)?;
        self.index(turn);
        Ok(())
    }

    /// A session's turns, oldest first.
    pub(crate) fn of_session<'a>(&'a self, session: &str) -> impl Iterator<Item = &'a TurnRecord> {
        self.by_session
            .get(session)
            .into_iter()
            .flatten()
            .filter_map(|&i| self.turns.get(i))
    }

    pub(crate) fn has_session(&self, session: &str) -> bool {
        self.by_session.contains_key(session)
    }
}
