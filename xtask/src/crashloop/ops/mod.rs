//! One round's client: a seeded random mix of ops, each recorded in the model once its
//! acknowledgement arrives, until the connection dies with the daemon. One module per family:
//! records (sessions, workspace, requirements, devices, uploads), scheduled tasks, the
//! agents' work (messages, questions, reports, deferred actions, dispatch, proposals), and the
//! client's closing, reopening and deciding of what the agents left (`items.rs`).

mod agents;
mod items;
mod records;
mod schedules;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Result, bail};
use jucode_testsupport::Client;

use super::Rng;
use super::model::{KINDS, Model};

/// What one round's ops work with.
pub struct Round {
    pub c: Client,
    pub addr: SocketAddr,
    pub rng: Rng,
    pub model: Arc<Mutex<Model>>,
    /// Project directories made before the run.
    pub projects: Vec<String>,
    /// Where an allowed deferred command writes its line.
    pub runs_file: PathBuf,
    pub round: usize,
}

impl Round {
    /// One of `all`, picked by the round's generator; `None` when there is none. Sorted
    /// first: the model's maps iterate in a different order in every process, and a replay
    /// (`--seed`) should pick the same.
    fn pick<T: Ord>(&mut self, mut all: Vec<T>) -> Option<T> {
        if all.is_empty() {
            return None;
        }
        all.sort();
        let at = self.rng.below(all.len() as u64) as usize;
        Some(all.swap_remove(at))
    }
}

/// Random ops until the connection dies with the daemon.
pub async fn drive(mut r: Round) -> Result<()> {
    for i in 0.. {
        let tag = format!("r{}-{i}", r.round);
        let kind = KINDS[r.rng.below(KINDS.len() as u64) as usize];
        match kind {
            "session_create" | "session_rename" | "session_close" | "workspace" | "requirement"
            | "device_pair" | "device_revoke" | "upload" => {
                records::op(&mut r, kind, tag).await?;
            }
            "schedule_save" | "schedule_delete" | "schedule_run" | "schedule_due"
            | "schedule_repeat" => {
                schedules::op(&mut r, kind, tag).await?;
            }
            "agent_message" | "agent_timer" | "agent_question" | "agent_report"
            | "question_answer" | "report_read" | "action_ask" | "action_listed"
            | "action_decide" | "dispatch_send" | "dispatch_confirm" | "agent_requirement" => {
                agents::op(&mut r, kind, tag).await?
            }
            "item_close" | "item_reopen" | "proposal_decide" => items::op(&mut r, kind).await?,
            other => bail!("no driver for {other}"),
        }
    }
    Ok(())
}
