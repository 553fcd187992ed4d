//! `cargo xtask conformance`: replays `fixtures/conformance/*.jsonl` against the built daemon.
//! The fixture format is documented in `fixtures/README.md`. Every frame sent and received is
//! checked against `docs/schema/` ([`checked`]). A fixture's steps run in [`runner`]; what they
//! expect of the daemon's answers is checked in [`expect`].

mod checked;
mod client;
mod expect;
mod pattern;
mod runner;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::daemon::{self, Bins, Daemon, Homes};
use crate::schema::Validators;
use client::{Client, TokenVia};
use pattern::Vars;

/// How many fixtures run at once (each has its own daemon; the machine has 2 cores).
const PARALLEL: usize = 2;
const FIXTURE_TIMEOUT: Duration = Duration::from_secs(45);
const EXPECT_TIMEOUT_MS: u64 = 5000;

pub struct Options {
    pub build: bool,
    pub filter: Option<String>,
}

/// Runs the fixtures; `Ok(false)` when any failed.
pub fn run(options: Options) -> Result<bool> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(run_all(options))
}

fn fixture_files(filter: Option<&str>) -> Result<Vec<PathBuf>> {
    let dir = daemon::workspace_root()?
        .join("fixtures")
        .join("conformance");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "jsonl")
            && filter.is_none_or(|f| fixture_name(&path).contains(f))
        {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn fixture_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

async fn run_all(options: Options) -> Result<bool> {
    if options.build {
        daemon::build(false).await?;
    }
    let bins = Bins::of_profile("debug")?;
    let schemas = Arc::new(Validators::load(&daemon::workspace_root()?)?);
    let files = fixture_files(options.filter.as_deref())?;
    if files.is_empty() {
        bail!(
            "no fixture matches {:?}",
            options.filter.unwrap_or_default()
        );
    }
    let gate = Arc::new(tokio::sync::Semaphore::new(PARALLEL));
    let mut tasks = tokio::task::JoinSet::new();
    for path in files {
        let gate = gate.clone();
        let bins = bins.clone();
        let schemas = schemas.clone();
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await;
            let name = fixture_name(&path);
            let result =
                match tokio::time::timeout(FIXTURE_TIMEOUT, run_fixture(&bins, schemas, &path))
                    .await
                {
                    Ok(result) => result,
                    Err(_) => Err(format!("timed out after {FIXTURE_TIMEOUT:?}")),
                };
            (name, result)
        });
    }
    let (mut passed, mut failed) = (0, 0);
    while let Some(joined) = tasks.join_next().await {
        let (name, result) = joined.context("a fixture task panicked")?;
        match result {
            Ok(()) => {
                passed += 1;
                println!("ok {name}");
            }
            Err(why) => {
                failed += 1;
                println!("FAIL {name}: {why}");
            }
        }
    }
    println!("conformance: {passed} passed, {failed} failed");
    Ok(failed == 0)
}

/// One line of a fixture.
struct Step {
    line: usize,
    value: serde_json::Map<String, Value>,
}

/// The action keys and the keys each allows besides `note`.
const ACTIONS: &[(&str, &[&str])] = &[
    (
        "connect",
        &["token", "via", "expect_status", "expect_text", "batch"],
    ),
    ("close", &[]),
    ("send", &["client", "off_schema"]),
    ("send_text", &["client", "off_schema"]),
    ("send_binary", &["client"]),
    ("send_oversized", &["client"]),
    ("expect", &["client", "skip", "timeout"]),
    ("expect_set", &["client", "skip", "timeout"]),
    ("expect_silence", &["client", "skip"]),
    ("expect_close", &["client", "skip", "timeout", "reason"]),
    (
        "http",
        &[
            "expect_status",
            "expect_body",
            "expect_text",
            "expect_headers",
        ],
    ),
    ("restart", &["batch"]),
    ("kill9", &["batch"]),
    ("sleep", &[]),
    ("ignore", &[]),
    ("mkdir", &[]),
    ("write", &["lines", "tail", "json"]),
    ("let", &[]),
];

fn parse_fixture(text: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("//") {
            continue;
        }
        let n = steps.len() + 1;
        let value: Value = serde_json::from_str(line)
            .map_err(|e| format!("step {n} (line {}): not JSON: {e}", i + 1))?;
        let Value::Object(value) = value else {
            return Err(format!(
                "step {n} (line {}): a step is a JSON object",
                i + 1
            ));
        };
        let action = ACTIONS
            .iter()
            .find(|(key, _)| value.contains_key(*key))
            .ok_or_else(|| format!("step {n} (line {}): no known action in {line}", i + 1))?;
        for key in value.keys() {
            if key != action.0 && key != "note" && !action.1.contains(&key.as_str()) {
                return Err(format!(
                    "step {n} (line {}): {:?} does not go with {:?}",
                    i + 1,
                    key,
                    action.0
                ));
            }
        }
        steps.push(Step { line: i + 1, value });
    }
    Ok(steps)
}

async fn run_fixture(bins: &Bins, schemas: Arc<Validators>, path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let steps = parse_fixture(&text)?;
    let mut runner = Runner::start(bins, schemas)
        .await
        .map_err(|e| format!("setup: {e:#}"))?;
    for (i, step) in steps.iter().enumerate() {
        if let Err(why) = runner.step(step).await {
            let log = runner.log_tail();
            return Err(format!("step {} (line {}): {why}{log}", i + 1, step.line));
        }
    }
    runner
        .finish()
        .await
        .map_err(|why| format!("after the last step: {why}"))
}

/// A named client of a fixture, with what it needs to reconnect after a restart.
struct Conn {
    client: Option<Client>,
    token: Option<String>,
    via: TokenVia,
}

/// Which frames an expectation passes over.
enum Skip {
    Types(Vec<String>),
    /// Everything that does not match.
    All,
}

struct Runner {
    bins: Bins,
    homes: Homes,
    _tmp: tempfile::TempDir,
    daemon: Daemon,
    clients: BTreeMap<String, Conn>,
    vars: Vars,
    ignore: Vec<String>,
    schemas: Arc<Validators>,
}

type StepResult = Result<(), String>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_checked_for_unknown_keys() {
        let ok = parse_fixture("# c\n\n{\"connect\":\"a\"}\n{\"expect\":{},\"skip\":[\"x\"]}\n");
        assert!(matches!(ok, Ok(ref s) if s.len() == 2 && s[1].line == 4));
        assert!(parse_fixture("{\"expect\":{},\"skp\":[]}").is_err());
        assert!(parse_fixture("{\"what\":1}").is_err());
        assert!(parse_fixture("[1]").is_err());
    }

    #[test]
    fn only_sends_take_the_off_schema_mark() {
        assert!(parse_fixture("{\"send\":{\"id\":1},\"off_schema\":true}").is_ok());
        assert!(parse_fixture("{\"send_text\":\"x\",\"off_schema\":true}").is_ok());
        assert!(parse_fixture("{\"expect\":{},\"off_schema\":true}").is_err());
        assert!(parse_fixture("{\"send_binary\":\"x\",\"off_schema\":true}").is_err());
    }
}
