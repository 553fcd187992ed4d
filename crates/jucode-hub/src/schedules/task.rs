//! A task's fields checked: a new task from `schedule_save`, or a change laid over a saved
//! one. Everything is checked before anything is written, so bad input changes nothing.

use jucode_protocol::daemon::{ScheduleDraft, ScheduleInfo};

use super::ScheduleError;
use super::cron::Cron;
use super::rule::{Repeat, Rule, parse_date, parse_time};

/// The repeat kinds, as the field names them.
pub(crate) const REPEATS: [&str; 6] = ["once", "hourly", "daily", "weekdays", "weekly", "cron"];

/// The rule a task's fields describe, or what is wrong with them.
pub(crate) fn rule_of(task: &ScheduleInfo) -> Result<Rule, ScheduleError> {
    if !REPEATS.contains(&task.repeat.as_str()) {
        return Err(ScheduleError::Repeat(task.repeat.clone()));
    }
    let is = |kind: &str| task.repeat == kind;
    if !task.days.is_empty() && !is("weekly") {
        return Err(ScheduleError::DaysNotWeekly);
    }
    if task.date.is_some() && !is("once") {
        return Err(ScheduleError::DateNotOnce);
    }
    if task.cron.is_some() && !is("cron") {
        return Err(ScheduleError::CronNotCron);
    }
    let (hour, minute) = if is("cron") {
        if !task.time.is_empty() {
            return Err(ScheduleError::TimeWithCron);
        }
        (0, 0)
    } else {
        parse_time(&task.time).ok_or_else(|| ScheduleError::Time(task.time.clone()))?
    };
    let repeat = match task.repeat.as_str() {
        "once" => {
            let date = task.date.as_deref().ok_or(ScheduleError::Missing("date"))?;
            Repeat::Once(parse_date(date).ok_or_else(|| ScheduleError::Date(date.to_string()))?)
        }
        "hourly" => Repeat::Hourly,
        "daily" => Repeat::Daily,
        "weekdays" => Repeat::Weekdays,
        "weekly" => {
            if task.days.is_empty() || task.days.iter().any(|d| *d > 6) {
                return Err(ScheduleError::Days);
            }
            Repeat::Weekly(task.days.iter().fold(0u8, |set, d| set | (1 << d)))
        }
        _ => {
            let text = task.cron.as_deref().ok_or(ScheduleError::Missing("cron"))?;
            Repeat::Cron(Box::new(Cron::parse(text).map_err(ScheduleError::Cron)?))
        }
    };
    Ok(Rule {
        repeat,
        hour,
        minute,
    })
}

/// `days` as a client sent it: whole numbers 0–6, kept sorted and once each.
fn days(sent: &[i64]) -> Result<Vec<u8>, ScheduleError> {
    let mut days = Vec::with_capacity(sent.len());
    for d in sent {
        let d = u8::try_from(*d)
            .ok()
            .filter(|d| *d <= 6)
            .ok_or(ScheduleError::Days)?;
        days.push(d);
    }
    days.sort_unstable();
    days.dedup();
    Ok(days)
}

fn text(field: &'static str, value: String) -> Result<String, ScheduleError> {
    if value.trim().is_empty() {
        return Err(ScheduleError::Empty(field));
    }
    Ok(value)
}

/// A new task from a draft without `id`: `id` and `created_at` are given.
pub(crate) fn create(
    draft: ScheduleDraft,
    id: String,
    created_at: u64,
) -> Result<ScheduleInfo, ScheduleError> {
    let ScheduleDraft {
        id: _,
        agent,
        name,
        prompt,
        enabled,
        repeat,
        time,
        days: sent_days,
        date,
        new_session,
        cron,
    } = draft;
    let repeat = repeat.ok_or(ScheduleError::Missing("repeat"))?;
    let time = match (time, repeat.as_str()) {
        (Some(time), _) => time,
        (None, "cron") => String::new(),
        (None, _) => return Err(ScheduleError::Missing("time")),
    };
    let task = ScheduleInfo {
        id,
        agent: agent.ok_or(ScheduleError::Missing("agent"))?,
        name: text("name", name.ok_or(ScheduleError::Missing("name"))?)?,
        prompt: text("prompt", prompt.ok_or(ScheduleError::Missing("prompt"))?)?,
        enabled: enabled.unwrap_or(true),
        repeat,
        time,
        days: days(sent_days.as_deref().unwrap_or_default())?,
        date,
        new_session: new_session.unwrap_or(true),
        cron,
        created_at,
        last_run_at: None,
        last_session: None,
        next_run_at: None,
    };
    rule_of(&task)?;
    Ok(task)
}

/// `old` with the fields present in `draft`. Fields the new repeat does not use (a weekly
/// task's days after a change to daily) are dropped unless the draft sets them, which is
/// then an error.
pub(crate) fn change(
    old: &ScheduleInfo,
    draft: ScheduleDraft,
) -> Result<ScheduleInfo, ScheduleError> {
    if draft.agent.as_ref().is_some_and(|a| *a != old.agent) {
        return Err(ScheduleError::AgentChange);
    }
    let mut task = old.clone();
    if let Some(name) = draft.name {
        task.name = text("name", name)?;
    }
    if let Some(prompt) = draft.prompt {
        task.prompt = text("prompt", prompt)?;
    }
    if let Some(enabled) = draft.enabled {
        task.enabled = enabled;
    }
    if let Some(new_session) = draft.new_session {
        task.new_session = new_session;
    }
    if let Some(repeat) = draft.repeat {
        task.repeat = repeat;
    }
    let uses = |kind: &str| task.repeat == kind;
    match draft.time {
        Some(time) => task.time = time,
        None if uses("cron") => task.time = String::new(),
        None if task.time.is_empty() => return Err(ScheduleError::Missing("time")),
        None => {}
    }
    match draft.days {
        Some(sent) => task.days = days(&sent)?,
        None if !uses("weekly") => task.days.clear(),
        None => {}
    }
    match draft.date {
        Some(date) => task.date = Some(date),
        None if !uses("once") => task.date = None,
        None => {}
    }
    match draft.cron {
        Some(cron) => task.cron = Some(cron),
        None if !uses("cron") => task.cron = None,
        None => {}
    }
    rule_of(&task)?;
    Ok(task)
}
