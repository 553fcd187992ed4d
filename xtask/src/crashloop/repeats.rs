//! The checks of the tasks that repeat every minute, read from the daemon's own message log.
//!
//! A run's delivered text does not say which minute it was for, but its record in
//! `messages.jsonl` does: its dedupe key is `schedule:<task>:<due>` and `at` is when the run
//! was recorded. A run covers the minutes from its due time to its recording (the minutes
//! missed while no daemon ran collapse into the first start's one run), so every minute since
//! the task was saved is covered by exactly one run: two runs covering one minute ran it
//! twice, a minute no run covers was lost.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use super::model::Repeating;

/// One run of a repeating task as the message log recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The message's id, named in its delivery's header.
    pub message: String,
    /// The minute it ran for, unix seconds.
    pub due: u64,
    /// When it was recorded, unix milliseconds.
    pub at_ms: u64,
}

/// The runs of each task in `tasks` that `log` (the text of `messages.jsonl`) holds, by task
/// id, earliest due first. A torn or unreadable line is skipped.
pub fn runs(log: &str, tasks: &HashMap<String, Repeating>) -> HashMap<String, Vec<Run>> {
    let mut out: HashMap<String, Vec<Run>> = HashMap::new();
    for line in log.lines() {
        let Ok(record) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if record["kind"] != "message" {
            continue;
        }
        // `schedule:<id>:<due>`; a run by hand is `schedule:<id>:run:<seconds>`, whose id
        // part (`<id>:run`) names no task.
        let Some((task, due)) = record["dedupe_key"]
            .as_str()
            .and_then(|k| k.strip_prefix("schedule:"))
            .and_then(|k| k.rsplit_once(':'))
        else {
            continue;
        };
        let (Some(due), Some(message), Some(at_ms)) = (
            due.parse::<u64>().ok(),
            record["id"].as_str(),
            record["at"].as_u64(),
        ) else {
            continue;
        };
        if tasks.contains_key(task) {
            out.entry(task.to_string()).or_default().push(Run {
                message: message.to_string(),
                due,
                at_ms,
            });
        }
    }
    for list in out.values_mut() {
        list.sort_by_key(|r| (r.due, r.at_ms));
    }
    out
}

/// Reads `messages.jsonl` under `home` (none yet is no runs).
pub fn read(home: &Path, tasks: &HashMap<String, Repeating>) -> HashMap<String, Vec<Run>> {
    let log = std::fs::read_to_string(home.join("daemon/messages.jsonl")).unwrap_or_default();
    runs(&log, tasks)
}

/// Runs that ran a minute twice, or before its time, or not on a minute of the task.
pub fn twice(tasks: &HashMap<String, Repeating>, runs: &HashMap<String, Vec<Run>>) -> Vec<String> {
    let mut problems = Vec::new();
    for (id, task) in tasks {
        let list = runs.get(id).map(Vec::as_slice).unwrap_or(&[]);
        for r in list {
            if r.due % 60 != 0 || r.due < task.first {
                problems.push(format!(
                    "{}: a run for {}, not one of its minutes",
                    task.name, r.due
                ));
            }
            if r.due * 1000 > r.at_ms {
                problems.push(format!("{}: the run for {} came early", task.name, r.due));
            }
        }
        for pair in list.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if a.due == b.due {
                problems.push(format!(
                    "{}: the minute {} recorded twice",
                    task.name, a.due
                ));
            } else if b.due * 1000 + 1000 <= a.at_ms {
                // A second of slack: `at` is read just after the tick that computed the next
                // minute.
                problems.push(format!(
                    "{}: the minute {} ran again, the run for {} covered it",
                    task.name, b.due, a.due
                ));
            }
        }
    }
    problems
}

/// What is still to come: the minutes before `until` (unix seconds) no run covers yet, and the
/// runs not delivered (`held` is every delivered text, with its header).
pub fn waiting(
    tasks: &HashMap<String, Repeating>,
    runs: &HashMap<String, Vec<Run>>,
    held: &HashMap<String, usize>,
    until: u64,
) -> Vec<String> {
    let mut out = Vec::new();
    for (id, task) in tasks {
        let list = runs.get(id).map(Vec::as_slice).unwrap_or(&[]);
        let mut minute = task.first;
        while minute < until {
            if !list
                .iter()
                .any(|r| r.due <= minute && minute * 1000 <= r.at_ms + 1000)
            {
                out.push(format!("{}'s run for the minute {minute}", task.name));
            }
            minute += 60;
        }
        for r in list {
            let header = format!("· {}]", r.message);
            if !held
                .keys()
                .any(|t| t.lines().next().is_some_and(|h| h.ends_with(&header)))
            {
                out.push(format!("the delivery of {}'s run for {}", task.name, r.due));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tasks() -> HashMap<String, Repeating> {
        HashMap::from([(
            "t1".to_string(),
            Repeating {
                name: "every-x".into(),
                first: 600,
            },
        )])
    }

    /// Runs of task `t1`.
    fn of_t1(runs: Vec<Run>) -> HashMap<String, Vec<Run>> {
        HashMap::from([("t1".to_string(), runs)])
    }

    fn line(id: &str, key: &str, at_ms: u64) -> String {
        json!({"kind":"message","id":id,"to":"b","from":"schedule:t1","body":"x",
            "dedupe_key":key,"at":at_ms})
        .to_string()
    }

    #[test]
    fn runs_are_read_by_task_and_minute() {
        let log = [
            line("m-2", "schedule:t1:660", 660_400),
            line("m-1", "schedule:t1:600", 600_300),
            line("m-3", "schedule:t1:run:700", 700_000),
            line("m-4", "schedule:t2:600", 600_000),
            json!({"kind":"delivered","id":"m-1","session":"s","at":1}).to_string(),
            "{\"kind\":\"message\",\"id\":\"m-5\",\"ded".to_string(),
        ]
        .join("\n");
        let runs = runs(&log, &tasks());
        let ids: Vec<&str> = runs["t1"].iter().map(|r| r.message.as_str()).collect();
        assert_eq!(ids, ["m-1", "m-2"]);
        assert_eq!(runs.len(), 1);
    }

    #[test]
    fn a_minute_run_twice_or_never_is_found() {
        let held = |ids: &[&str]| -> HashMap<String, usize> {
            ids.iter()
                .map(|id| (format!("[schedule · {id}]\nevery-x"), 1))
                .collect()
        };
        let run = |message: &str, due: u64, at_ms: u64| Run {
            message: message.into(),
            due,
            at_ms,
        };
        // 600 on time; 660 and 720 missed while down, one run at 750; 780 on time.
        let good = of_t1(vec![
            run("m-1", 600, 600_200),
            run("m-2", 660, 750_000),
            run("m-3", 780, 780_500),
        ]);
        assert!(twice(&tasks(), &good).is_empty());
        assert!(waiting(&tasks(), &good, &held(&["m-1", "m-2", "m-3"]), 800).is_empty());
        // Not delivered yet; 840 not run yet.
        assert_eq!(
            waiting(&tasks(), &good, &held(&["m-1", "m-3"]), 850),
            [
                "every-x's run for the minute 840",
                "the delivery of every-x's run for 660"
            ]
        );
        // 720 run again though the run for 660 covered it; 660 recorded twice.
        let again = of_t1(vec![
            run("m-1", 600, 600_200),
            run("m-2", 660, 750_000),
            run("m-4", 720, 751_000),
        ]);
        assert_eq!(twice(&tasks(), &again).len(), 1);
        let same = of_t1(vec![run("m-1", 660, 660_200), run("m-2", 660, 661_000)]);
        assert_eq!(twice(&tasks(), &same).len(), 1);
        // 660 lost: the run for 600 was recorded before it, the next run is for 720.
        let lost = of_t1(vec![run("m-1", 600, 600_200), run("m-3", 720, 720_100)]);
        assert_eq!(
            waiting(&tasks(), &lost, &held(&["m-1", "m-3"]), 730),
            ["every-x's run for the minute 660"]
        );
        // Early, and off the minute.
        let odd = of_t1(vec![run("m-1", 600, 599_000), run("m-2", 630, 631_000)]);
        assert_eq!(twice(&tasks(), &odd).len(), 2);
    }
}
