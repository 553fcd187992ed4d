//! The checks of a fresh start, and what they read: the engine's saved conversations, the
//! fake model's requests, the runs file of the deferred commands, the upload directory, the
//! daemon's message log (for the repeating tasks' minutes).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use jucode_protocol::daemon::reports::REPORT_LIST_MAX;
use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::json;

use super::Rng;
use super::model::{Model, ToolAcks};
use super::{checks, decided, repeats};

/// What a check reads besides the daemon: the home, the fake model and the runs file.
pub struct World {
    pub env: TestHome,
    pub fake: FakeModel,
    /// Each allowed deferred command appends its `ran-<tag>` line here.
    pub runs_file: std::path::PathBuf,
}

pub fn lock(model: &Arc<Mutex<Model>>) -> std::sync::MutexGuard<'_, Model> {
    model.lock().unwrap_or_else(|p| p.into_inner())
}

impl World {
    /// How many times each line is in the runs file.
    pub fn runs(&self) -> HashMap<String, usize> {
        let mut out = HashMap::new();
        for line in std::fs::read_to_string(&self.runs_file)
            .unwrap_or_default()
            .lines()
        {
            *out.entry(line.to_string()).or_default() += 1;
        }
        out
    }

    /// The acknowledged deliveries not made yet, and the minutes of the repeating tasks no run
    /// covers yet (up to 5 s ago); an error for one made twice, or a repeating task's minute
    /// run twice.
    pub fn waiting_deliveries(&self, model: &Arc<Mutex<Model>>) -> Result<Vec<String>> {
        let held = self.env.saved_user_messages()?;
        let tools = self.tool_acks(model);
        let m = lock(model);
        let mut waiting = checks::check_deliveries(&m, &held, &tools, &self.runs())?;
        let runs = repeats::read(&self.env.home(), &m.repeating);
        let twice = repeats::twice(&m.repeating, &runs);
        if !twice.is_empty() {
            anyhow::bail!("{}", twice.join("; "));
        }
        let until = (super::wall_ms() / 1000).saturating_sub(5);
        waiting.extend(repeats::waiting(&m.repeating, &runs, &held, until));
        Ok(waiting)
    }

    /// After a kill: the deferrals every daemon so far told the model of, all dead now, are
    /// to be listed from the next start on.
    pub fn after_kill(&self, model: &Arc<Mutex<Model>>) {
        let tools = self.tool_acks(model);
        lock(model).told_deferred = tools.deferred;
    }

    /// Every tool acknowledgement so far: the fake model's new requests are read once and
    /// dropped (each holds its whole conversation, so keeping them all grows quadratically).
    pub fn tool_acks(&self, model: &Arc<Mutex<Model>>) -> ToolAcks {
        let new = self.fake.take_requests();
        let mut m = lock(model);
        m.tools.absorb(&new);
        m.tools.clone()
    }
}

/// The checks of a fresh start: the connect batch (records, deferred actions, dispatches)
/// and the question and report lists against the model, deliveries at most once, uploads
/// whole and no part left over, a few paired devices' tokens still let them in and revoked
/// ones do not.
pub async fn verify(
    model: &Arc<Mutex<Model>>,
    world: &World,
    daemon: &Daemon,
    desk: &mut Client,
    rng: &mut Rng,
) -> Result<Vec<String>> {
    let batch = std::mem::take(&mut desk.connect_batch);
    let mut problems = checks::check_batch(&lock(model), &batch)?;
    if let Err(e) = world.waiting_deliveries(model) {
        problems.push(format!("{e:#}"));
    }
    let questions = desk.request(json!({"op":"question_list"})).await?;
    let reports = desk
        .request(json!({"op":"report_list","limit":REPORT_LIST_MAX}))
        .await?;
    let tools = world.tool_acks(model);
    let runs = world.runs();
    let held = world.env.saved_user_messages()?;
    {
        let mut m = lock(model);
        let of = |kind: &str| batch.iter().find(|f| f["type"] == kind);
        problems.extend(checks::check_items(&m, &tools, &questions, &reports));
        problems.extend(decided::check_shut_questions(&m, &questions));
        match of("requirements") {
            Some(f) => problems.extend(decided::check_proposals(&m, &tools, f)),
            None => problems.push("the connect batch has no requirements frame".into()),
        }
        match of("actions") {
            Some(f) => problems.extend(checks::check_actions(&m, f, &runs)),
            None => problems.push("the connect batch has no actions frame".into()),
        }
        match of("dispatches") {
            Some(f) => problems.extend(checks::check_dispatches(&mut m, f, &held)),
            None => problems.push("the connect batch has no dispatches frame".into()),
        }
        problems.extend(check_uploads(&m, &world.env.home().join("uploads")));
        problems.extend(checks::unapproved_runs(&m, &runs));
    }
    let (tokens, revoked) = {
        let m = lock(model);
        let pick = |all: &[String], rng: &mut Rng| -> Vec<String> {
            let n = all.len() as u64;
            (0..n.min(2))
                .map(|_| all[rng.below(n) as usize].clone())
                .collect()
        };
        let live: Vec<String> = m.devices.iter().map(|(_, t)| t.clone()).collect();
        (pick(&live, rng), pick(&m.revoked, rng))
    };
    for token in tokens {
        if let Err(e) = Client::connect_and_greet(&daemon.url(&token)).await {
            problems.push(format!("a paired device is refused: {e:#}"));
        }
    }
    for token in revoked {
        if Client::connect_and_greet(&daemon.url(&token)).await.is_ok() {
            problems.push("a revoked device is let in".into());
        }
    }
    Ok(problems)
}

/// Every acknowledged upload is there with its bytes, and the start removed every `.part`.
fn check_uploads(model: &Model, dir: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, bytes) in &model.uploads {
        match std::fs::read(path) {
            Ok(have) if &have == bytes => {}
            Ok(have) => problems.push(format!(
                "upload {path}: {} bytes, {} were sent",
                have.len(),
                bytes.len()
            )),
            Err(e) => problems.push(format!("acknowledged upload {path} lost: {e}")),
        }
    }
    for day in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(day.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if file.file_name().to_string_lossy().ends_with(".part") {
                problems.push(format!("{} left over after a start", file.path().display()));
            }
        }
    }
    problems
}
