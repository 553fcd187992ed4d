//! Ops on scheduled tasks: saved (never due within the run), deleted, run by hand, saved to
//! come due once by the clock, and saved to repeat every minute.

use anyhow::Result;
use serde_json::json;

use super::Round;
use crate::crashloop::model::Repeating;
use crate::crashloop::verify::lock;

/// The most tasks due by the clock waiting for their time at once: each run is a model turn.
const DUE_AT_ONCE: usize = 3;
/// Tasks repeating every minute, over the whole run: each minute's run is a model turn.
const REPEATING: usize = 2;

pub async fn op(r: &mut Round, kind: &'static str, tag: String) -> Result<()> {
    let c = &mut r.c;
    match kind {
        "schedule_save" => {
            // Once a year: saved and listed, never due within the run.
            let reply = c
                .request(
                    json!({"op":"schedule_save","schedule":{"agent":"b","name":tag,
                    "prompt":format!("tick-{tag}"),"repeat":"cron","cron":"0 0 1 1 *","new_session":false}}),
                )
                .await?;
            if reply["type"] == "schedule_saved"
                && let Some(id) = reply["schedule"]["id"].as_str()
            {
                let mut m = lock(&r.model);
                m.schedules.insert(format!("{id} {tag}"));
                m.ack(kind);
            }
        }
        "schedule_delete" => {
            let all: Vec<String> = lock(&r.model).schedules.iter().cloned().collect();
            let Some(entry) = r.pick(all) else {
                return Ok(());
            };
            let (id, _) = entry.split_once(' ').unwrap_or((&entry, ""));
            // Until the reply, the task may be deleted or not: checked neither way.
            lock(&r.model).schedules.remove(&entry);
            let reply =
                r.c.request(json!({"op":"schedule_delete","schedule":id}))
                    .await?;
            if reply["type"] == "schedule_deleted" {
                let mut m = lock(&r.model);
                m.deleted_schedules.insert(entry);
                m.ack(kind);
            }
        }
        "schedule_run" => {
            // Each task runs at most once, so any second delivery of its prompt is a
            // duplicate, whether or not its run was acknowledged.
            let all: Vec<String> = {
                let m = lock(&r.model);
                m.schedules
                    .iter()
                    .filter(|e| !m.runs_tried.contains(*e))
                    .cloned()
                    .collect()
            };
            let Some(entry) = r.pick(all) else {
                return Ok(());
            };
            lock(&r.model).runs_tried.insert(entry.clone());
            let (id, name) = entry.split_once(' ').unwrap_or((&entry, ""));
            let reply =
                r.c.request(json!({"op":"schedule_run","schedule":id}))
                    .await?;
            if reply["type"] == "schedule_started" {
                let mut m = lock(&r.model);
                m.runs.insert(format!("tick-{name}"));
                m.ack(kind);
            }
        }
        "schedule_due" => {
            // A `once` task at the first whole minute at least 5 s away (the daemon runs on
            // UTC): it comes due in real time, across kills, and must run exactly once,
            // also when the daemon was down at its time.
            let now = super::super::wall_ms() / 1000;
            if lock(&r.model).due.values().filter(|at| **at > now).count() >= DUE_AT_ONCE {
                return Ok(());
            }
            let at = (now + 5).div_ceil(60) * 60;
            let stamp = jiff::Timestamp::from_second(i64::try_from(at)?)?;
            let prompt = format!("due-{tag}");
            let reply = c
                .request(
                    json!({"op":"schedule_save","schedule":{"agent":"b","name":prompt,
                    "prompt":prompt,"repeat":"once","date":stamp.strftime("%Y-%m-%d").to_string(),
                    "time":stamp.strftime("%H:%M").to_string(),"new_session":false}}),
                )
                .await?;
            if reply["type"] == "schedule_saved" {
                let mut m = lock(&r.model);
                m.due.insert(prompt, at);
                m.ack(kind);
            }
        }
        "schedule_repeat" => {
            // Every minute, for the rest of the run: each minute's run is delivered once,
            // minutes missed while no daemon ran as one run at the next start (`repeats.rs`).
            if lock(&r.model).repeating.len() >= REPEATING {
                return Ok(());
            }
            let name = format!("every-{tag}");
            let reply = c
                .request(
                    json!({"op":"schedule_save","schedule":{"agent":"b","name":name,
                    "prompt":name,"repeat":"cron","cron":"* * * * *","new_session":false}}),
                )
                .await?;
            if reply["type"] == "schedule_saved"
                && let (Some(id), Some(first)) = (
                    reply["schedule"]["id"].as_str(),
                    reply["schedule"]["next_run_at"].as_u64(),
                )
            {
                let mut m = lock(&r.model);
                m.repeating
                    .insert(id.to_string(), Repeating { name, first });
                m.ack(kind);
            }
        }
        _ => {}
    }
    Ok(())
}
