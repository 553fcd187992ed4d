//! `cargo xtask conformance`: replays `fixtures/conformance/*.jsonl` against the built daemon.
//! The fixture format is documented in `fixtures/README.md`. Every frame sent and received is
//! checked against `docs/schema/` ([`checked`]).

mod checked;
mod client;
mod pattern;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::daemon::{self, Bins, Daemon, Homes};
use crate::schema::Validators;
use client::{Client, Connected, Incoming, TokenVia};
use pattern::Vars;

/// How many fixtures run at once (each has its own daemon; the machine has 2 cores).
const PARALLEL: usize = 2;
const FIXTURE_TIMEOUT: Duration = Duration::from_secs(45);
const EXPECT_TIMEOUT_MS: u64 = 5000;

// What the daemon sends on connect, in order: the one list, kept in test support.
use jucode_testsupport::CONNECT_BATCH;

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

impl Runner {
    async fn start(bins: &Bins, schemas: Arc<Validators>) -> Result<Runner> {
        let tmp = tempfile::Builder::new().prefix("jucode-conf-").tempdir()?;
        // Canonical, since the daemon canonicalizes the paths it reports.
        let root = std::fs::canonicalize(tmp.path())?;
        let home = root.join("home");
        std::fs::create_dir_all(&home)?;
        let homes = Homes {
            jucode_home: home.join(".jucode"),
            home,
            log: root.join("daemon.log"),
        };
        let daemon = Daemon::start(bins, &homes).await?;
        let mut runner = Runner {
            bins: bins.clone(),
            homes,
            _tmp: tmp,
            daemon,
            clients: BTreeMap::new(),
            vars: Vars::new(),
            ignore: Vec::new(),
            schemas,
        };
        let h = &runner.homes;
        let builtins = [
            ("home", json!(h.home.display().to_string())),
            ("jucode_home", json!(h.jucode_home.display().to_string())),
            (
                "state_dir",
                json!(h.jucode_home.join("daemon").display().to_string()),
            ),
        ];
        for (k, v) in builtins {
            runner.vars.insert(k.into(), v);
        }
        runner.set_daemon_vars();
        Ok(runner)
    }

    fn set_daemon_vars(&mut self) {
        let addr = self.daemon.addr;
        self.vars.insert("token".into(), json!(self.daemon.token));
        self.vars.insert("addr".into(), json!(addr.to_string()));
        self.vars.insert("port".into(), json!(addr.port()));
    }

    /// Closes every client and stops the daemon; frames still queued are checked first.
    async fn finish(mut self) -> StepResult {
        let mut outcome = Ok(());
        for (name, conn) in std::mem::take(&mut self.clients) {
            if let Some(mut client) = conn.client {
                while let Ok(item) = client.rx.try_recv() {
                    if outcome.is_ok() {
                        outcome = checked::received(&self.schemas, &name, &item);
                    }
                }
                client.close().await;
            }
        }
        let _ = self.daemon.stop().await;
        outcome
    }

    /// The end of the daemon's log, for failure messages.
    fn log_tail(&self) -> String {
        let Ok(text) = std::fs::read_to_string(&self.homes.log) else {
            return String::new();
        };
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        if lines.is_empty() {
            return String::new();
        }
        let tail = &lines[lines.len().saturating_sub(5)..];
        format!("\n    daemon log tail:\n      {}", tail.join("\n      "))
    }

    fn field(&self, step: &Step, key: &str, escape: bool) -> Result<Option<Value>, String> {
        step.value
            .get(key)
            .map(|v| pattern::substitute(v, &self.vars, escape))
            .transpose()
    }

    fn client_name(step: &Step) -> Result<String, String> {
        match step.value.get("client") {
            None => Ok("a".into()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(format!("client must be a name, not {other}")),
        }
    }

    fn live(&mut self, name: &str) -> Result<&mut Client, String> {
        self.clients
            .get_mut(name)
            .and_then(|c| c.client.as_mut())
            .ok_or_else(|| format!("client {name:?} is not connected"))
    }

    fn skip_of(&self, step: &Step) -> Result<Skip, String> {
        let mut types = self.ignore.clone();
        match step.value.get("skip") {
            None => {}
            Some(Value::String(s)) if s == "all" => return Ok(Skip::All),
            Some(Value::Array(list)) => {
                for t in list {
                    types.push(t.as_str().ok_or("skip lists frame types")?.to_string());
                }
            }
            Some(other) => return Err(format!("skip is a list of types or \"all\", not {other}")),
        }
        Ok(Skip::Types(types))
    }

    fn off_schema(step: &Step) -> Result<bool, String> {
        match step.value.get("off_schema") {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(format!("off_schema is true or false, not {other}")),
        }
    }

    fn timeout_of(step: &Step) -> Duration {
        let ms = step
            .value
            .get("timeout")
            .and_then(Value::as_u64)
            .unwrap_or(EXPECT_TIMEOUT_MS);
        Duration::from_millis(ms)
    }

    async fn step(&mut self, step: &Step) -> StepResult {
        let v = &step.value;
        if v.contains_key("connect") {
            self.connect(step).await
        } else if let Some(name) = v.get("close") {
            let name = name.as_str().ok_or("close names a client")?;
            let conn = self
                .clients
                .get_mut(name)
                .ok_or_else(|| format!("no client {name:?}"))?;
            if let Some(client) = conn.client.take() {
                client.close().await;
            }
            Ok(())
        } else if v.contains_key("send") {
            let frame = self.field(step, "send", false)?.unwrap_or_default();
            let name = Self::client_name(step)?;
            let text = frame.to_string();
            checked::sent(&self.schemas, &text, Self::off_schema(step)?)?;
            self.live(&name)?
                .send_text(text)
                .await
                .map_err(|e| format!("{e:#}"))
        } else if v.contains_key("send_text") {
            let text = self.field(step, "send_text", false)?.unwrap_or_default();
            let text = text.as_str().ok_or("send_text takes a string")?.to_string();
            let name = Self::client_name(step)?;
            checked::sent(&self.schemas, &text, Self::off_schema(step)?)?;
            self.live(&name)?
                .send_text(text)
                .await
                .map_err(|e| format!("{e:#}"))
        } else if v.contains_key("send_binary") {
            let text = self.field(step, "send_binary", false)?.unwrap_or_default();
            let text = text
                .as_str()
                .ok_or("send_binary takes a string")?
                .to_string();
            let name = Self::client_name(step)?;
            self.live(&name)?
                .send_binary(text.into_bytes())
                .await
                .map_err(|e| format!("{e:#}"))
        } else if let Some(size) = v.get("send_oversized") {
            let size = size
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or("send_oversized takes a byte count")?;
            // A valid JSON frame of exactly `size` bytes: only its size is wrong.
            let pad = size.saturating_sub(r#"{"op":"ping","pad":""}"#.len());
            let frame = format!(r#"{{"op":"ping","pad":"{}"}}"#, "x".repeat(pad));
            let name = Self::client_name(step)?;
            self.live(&name)?
                .send_detached(frame)
                .map_err(|e| format!("{e:#}"))
        } else if v.contains_key("expect") {
            self.expect(step).await
        } else if v.contains_key("expect_set") {
            self.expect_set(step).await
        } else if v.contains_key("expect_silence") {
            self.expect_silence(step).await
        } else if v.contains_key("expect_close") {
            self.expect_close(step).await
        } else if v.contains_key("http") {
            self.http(step).await
        } else if v.contains_key("restart") {
            self.restart(step, false).await
        } else if v.contains_key("kill9") {
            self.restart(step, true).await
        } else if let Some(ms) = v.get("sleep") {
            let ms = ms.as_u64().ok_or("sleep takes milliseconds")?;
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(())
        } else if let Some(list) = v.get("ignore") {
            let list = list
                .as_array()
                .ok_or("ignore takes a list of frame types")?;
            self.ignore = list
                .iter()
                .map(|t| {
                    t.as_str()
                        .map(str::to_string)
                        .ok_or("ignore lists frame types")
                })
                .collect::<Result<_, _>>()?;
            Ok(())
        } else if v.contains_key("mkdir") {
            let dir = self.field(step, "mkdir", false)?.unwrap_or_default();
            let dir = dir.as_str().ok_or("mkdir takes a path")?;
            std::fs::create_dir_all(dir).map_err(|e| format!("mkdir {dir}: {e}"))
        } else if v.contains_key("write") {
            self.write(step)
        } else if v.contains_key("let") {
            let Some(Value::Object(map)) = self.field(step, "let", false)? else {
                return Err("let takes an object of variables".into());
            };
            self.vars.extend(map);
            Ok(())
        } else {
            Err("no action".into())
        }
    }

    /// Writes a file (a log to seed before a `restart`): each of `lines` as one JSON line,
    /// then `tail` as it is (e.g. a torn last line).
    fn write(&self, step: &Step) -> StepResult {
        let path = self.field(step, "write", false)?.unwrap_or_default();
        let path = path.as_str().ok_or("write takes a path")?;
        let mut text = String::new();
        // `json`: one JSON document (an agent's agent.json); `lines` and `tail`: a log.
        if let Some(json) = self.field(step, "json", false)? {
            text.push_str(&json.to_string());
        }
        if let Some(lines) = self.field(step, "lines", false)? {
            for line in lines.as_array().ok_or("lines is a list of JSON values")? {
                text.push_str(&line.to_string());
                text.push('\n');
            }
        }
        if let Some(tail) = self.field(step, "tail", false)? {
            text.push_str(tail.as_str().ok_or("tail is a string")?);
        }
        if let Some(dir) = Path::new(path).parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        }
        std::fs::write(path, text).map_err(|e| format!("write {path}: {e}"))
    }

    async fn connect(&mut self, step: &Step) -> StepResult {
        let name = step.value["connect"]
            .as_str()
            .ok_or("connect names a client")?
            .to_string();
        let token = match self.field(step, "token", false)? {
            None => Some(self.daemon.token.clone()),
            Some(Value::Null) => None,
            Some(Value::String(t)) => Some(t),
            Some(other) => return Err(format!("token must be a string or null, not {other}")),
        };
        let via = match step.value.get("via").and_then(Value::as_str) {
            None | Some("query") => TokenVia::Query,
            Some("header") => TokenVia::Header,
            Some(other) => return Err(format!("via is query or header, not {other}")),
        };
        let expect_status = step.value.get("expect_status").and_then(Value::as_u64);
        let batch = step
            .value
            .get("batch")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let outcome = client::connect(self.daemon.addr, token.as_deref(), via)
            .await
            .map_err(|e| format!("connecting {name}: {e:#}"))?;
        match (outcome, expect_status) {
            (Connected::Refused { status, body }, Some(want)) => {
                if u64::from(status) != want {
                    return Err(format!("expected HTTP {want}, got {status} {body:?}"));
                }
                if let Some(p) = self.field(step, "expect_text", true)? {
                    self.commit(&p, &Value::String(body))
                        .map_err(|e| format!("handshake answer body: {e}"))?;
                }
                Ok(())
            }
            (Connected::Refused { status, body }, None) => Err(format!(
                "connecting {name}: refused with HTTP {status} {body:?}"
            )),
            (Connected::Open(_), Some(want)) => Err(format!(
                "expected the handshake to fail with HTTP {want}, but it succeeded"
            )),
            (Connected::Open(client), None) => {
                self.clients.insert(
                    name.clone(),
                    Conn {
                        client: Some(client),
                        token,
                        via,
                    },
                );
                if batch {
                    self.read_batch(&name).await?;
                }
                Ok(())
            }
        }
    }

    /// Reads the connect batch and checks its order.
    #[allow(
        clippy::disallowed_methods,
        reason = "deadlines for a real daemon run in real time"
    )]
    async fn read_batch(&mut self, name: &str) -> StepResult {
        let deadline = Instant::now() + Duration::from_millis(EXPECT_TIMEOUT_MS);
        for want in CONNECT_BATCH {
            let item = self.recv(name, deadline).await?;
            let Some(item) = item else {
                return Err(format!(
                    "{name}: connect batch: no {want} frame within {EXPECT_TIMEOUT_MS} ms"
                ));
            };
            let got = match &item {
                Incoming::Text(t) => serde_json::from_str::<Value>(t)
                    .ok()
                    .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_string)),
                _ => None,
            };
            if got.as_deref() != Some(want) {
                return Err(format!(
                    "{name}: connect batch: expected a {want} frame, got {}",
                    item.describe()
                ));
            }
        }
        Ok(())
    }

    async fn recv(&mut self, name: &str, deadline: Instant) -> Result<Option<Incoming>, String> {
        let conn = self
            .clients
            .get_mut(name)
            .ok_or_else(|| format!("no client {name:?}"))?;
        let client = conn
            .client
            .as_mut()
            .ok_or_else(|| format!("client {name:?} is not connected"))?;
        let item = recv_until(&mut client.rx, deadline).await;
        if let Some(item) = &item {
            checked::received(&self.schemas, name, item)?;
        }
        Ok(item)
    }

    /// Matches and, on success, keeps the captures.
    fn commit(&mut self, pattern: &Value, actual: &Value) -> Result<(), String> {
        let mut caps = Vec::new();
        pattern::matches(pattern, actual, &mut caps)?;
        self.vars.extend(caps);
        Ok(())
    }

    /// The next frame of `name` that `skip` does not pass over, or `None` at the deadline.
    /// Passed-over frames are described in `skipped`.
    async fn next_relevant(
        &mut self,
        name: &str,
        skip: &[String],
        want_type: Option<&str>,
        deadline: Instant,
        skipped: &mut Vec<String>,
    ) -> Result<Option<(Incoming, Value)>, String> {
        loop {
            let Some(item) = self.recv(name, deadline).await? else {
                return Ok(None);
            };
            let value = match &item {
                Incoming::Text(t) => {
                    serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.clone()))
                }
                _ => Value::Null,
            };
            let kind = value.get("type").and_then(Value::as_str);
            // A type the expectation asks for is never skipped.
            if let Some(kind) = kind
                && Some(kind) != want_type
                && skip.iter().any(|s| s == kind)
            {
                skipped.push(item.describe());
                continue;
            }
            return Ok(Some((item, value)));
        }
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "deadlines for a real daemon run in real time"
    )]
    async fn expect(&mut self, step: &Step) -> StepResult {
        let name = Self::client_name(step)?;
        let pattern = self.field(step, "expect", true)?.unwrap_or_default();
        let want_type = pattern
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_string);
        let skip = self.skip_of(step)?;
        let deadline = Instant::now() + Self::timeout_of(step);
        let mut skipped = Vec::new();
        let types = match &skip {
            Skip::Types(t) => t.clone(),
            Skip::All => Vec::new(),
        };
        loop {
            let next = self
                .next_relevant(&name, &types, want_type.as_deref(), deadline, &mut skipped)
                .await?;
            let Some((item, value)) = next else {
                return Err(format!(
                    "{name}: expected {} within {} ms, got nothing{}",
                    compact(&pattern),
                    Self::timeout_of(step).as_millis(),
                    describe_skipped(&skipped)
                ));
            };
            if !matches!(item, Incoming::Text(_)) {
                return Err(format!(
                    "{name}: expected {}, got {}{}",
                    compact(&pattern),
                    item.describe(),
                    describe_skipped(&skipped)
                ));
            }
            match self.commit(&pattern, &value) {
                Ok(()) => return Ok(()),
                Err(_) if matches!(skip, Skip::All) => skipped.push(item.describe()),
                Err(why) => {
                    return Err(format!(
                        "{name}: expected {}\n    got {}\n    {why}{}",
                        compact(&pattern),
                        item.describe(),
                        describe_skipped(&skipped)
                    ));
                }
            }
        }
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "deadlines for a real daemon run in real time"
    )]
    async fn expect_set(&mut self, step: &Step) -> StepResult {
        let name = Self::client_name(step)?;
        let Some(Value::Array(mut pending)) = self.field(step, "expect_set", true)? else {
            return Err("expect_set takes a list of patterns".into());
        };
        let Skip::Types(types) = self.skip_of(step)? else {
            return Err("expect_set takes a list of types to skip, not \"all\"".into());
        };
        let deadline = Instant::now() + Self::timeout_of(step);
        let mut skipped = Vec::new();
        while !pending.is_empty() {
            let next = self
                .next_relevant(&name, &types, None, deadline, &mut skipped)
                .await?;
            let Some((item, value)) = next else {
                let left: Vec<String> = pending.iter().map(compact).collect();
                return Err(format!(
                    "{name}: still expecting {} after {} ms{}",
                    left.join(", "),
                    Self::timeout_of(step).as_millis(),
                    describe_skipped(&skipped)
                ));
            };
            let hit = pending.iter().position(|p| {
                let mut caps = Vec::new();
                pattern::matches(p, &value, &mut caps).is_ok()
            });
            match hit {
                Some(i) => {
                    let p = pending.remove(i);
                    self.commit(&p, &value)?;
                }
                None => {
                    let left: Vec<String> = pending.iter().map(compact).collect();
                    return Err(format!(
                        "{name}: got {}, which matches none of {}",
                        item.describe(),
                        left.join(", ")
                    ));
                }
            }
        }
        Ok(())
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "deadlines for a real daemon run in real time"
    )]
    async fn expect_silence(&mut self, step: &Step) -> StepResult {
        let name = Self::client_name(step)?;
        let ms = step.value["expect_silence"]
            .as_u64()
            .ok_or("expect_silence takes milliseconds")?;
        let Skip::Types(types) = self.skip_of(step)? else {
            return Err("expect_silence cannot skip \"all\"".into());
        };
        let deadline = Instant::now() + Duration::from_millis(ms);
        let mut skipped = Vec::new();
        match self
            .next_relevant(&name, &types, None, deadline, &mut skipped)
            .await?
        {
            None => Ok(()),
            Some((item, _)) => Err(format!(
                "{name}: expected nothing for {ms} ms, got {}",
                item.describe()
            )),
        }
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "deadlines for a real daemon run in real time"
    )]
    async fn expect_close(&mut self, step: &Step) -> StepResult {
        let name = Self::client_name(step)?;
        let want = &step.value["expect_close"];
        let Skip::Types(types) = self.skip_of(step)? else {
            return Err("expect_close cannot skip \"all\"".into());
        };
        let deadline = Instant::now() + Self::timeout_of(step);
        let mut skipped = Vec::new();
        let next = self
            .next_relevant(&name, &types, None, deadline, &mut skipped)
            .await?;
        let outcome = match next {
            None => Err(format!(
                "{name}: expected a close within {} ms, got nothing{}",
                Self::timeout_of(step).as_millis(),
                describe_skipped(&skipped)
            )),
            Some((Incoming::Close(code, reason), _)) => {
                let code_ok = match want {
                    Value::Bool(true) => true,
                    Value::Number(n) => code.map(u64::from) == n.as_u64(),
                    other => return Err(format!("expect_close takes a code or true, not {other}")),
                };
                if !code_ok {
                    Err(format!(
                        "{name}: expected close {want}, got close {code:?} {reason:?}"
                    ))
                } else if let Some(p) = self.field(step, "reason", true)? {
                    self.commit(&p, &Value::String(reason))
                        .map_err(|e| format!("{name}: close reason: {e}"))
                } else {
                    Ok(())
                }
            }
            Some((Incoming::Gone(why), _)) if *want == Value::Bool(true) => {
                let _ = why;
                Ok(())
            }
            Some((item, _)) => Err(format!(
                "{name}: expected close {want}, got {}{}",
                item.describe(),
                describe_skipped(&skipped)
            )),
        };
        if let Some(conn) = self.clients.get_mut(&name) {
            conn.client = None;
        }
        outcome
    }

    async fn http(&mut self, step: &Step) -> StepResult {
        let Some(Value::Object(req)) = self.field(step, "http", false)? else {
            return Err("http takes an object".into());
        };
        let method = req.get("method").and_then(Value::as_str).unwrap_or("GET");
        let path = req.get("path").and_then(Value::as_str).unwrap_or("/");
        let mut headers: Vec<(String, String)> = Vec::new();
        if let Some(Value::Object(h)) = req.get("headers") {
            for (k, v) in h {
                headers.push((
                    k.clone(),
                    v.as_str().map_or_else(|| v.to_string(), str::to_string),
                ));
            }
        }
        let body = match (req.get("body"), req.get("raw_body")) {
            (Some(json), _) => {
                headers.push(("Content-Type".into(), "application/json".into()));
                Some(json.to_string().into_bytes())
            }
            (None, Some(raw)) => Some(
                raw.as_str()
                    .ok_or("raw_body is a string")?
                    .as_bytes()
                    .to_vec(),
            ),
            (None, None) => None,
        };
        let response = client::http(self.daemon.addr, method, path, &headers, body.as_deref())
            .await
            .map_err(|e| format!("{method} {path}: {e:#}"))?;
        let shown = || {
            format!(
                "HTTP {} {:?}",
                response.status,
                client::shorten(&response.body, 300)
            )
        };
        if let Some(want) = step.value.get("expect_status").and_then(Value::as_u64)
            && u64::from(response.status) != want
        {
            return Err(format!(
                "{method} {path}: expected status {want}, got {}",
                shown()
            ));
        }
        if let Some(Value::Object(want)) = self.field(step, "expect_headers", true)? {
            for (name, p) in want {
                let got = response
                    .headers
                    .iter()
                    .find(|(n, _)| *n == name.to_ascii_lowercase())
                    .map(|(_, v)| Value::String(v.clone()))
                    .unwrap_or(Value::Null);
                self.commit(&p, &got)
                    .map_err(|e| format!("{method} {path}: header {name}: {e}"))?;
            }
        }
        if let Some(p) = self.field(step, "expect_body", true)? {
            let body: Value = serde_json::from_str(&response.body)
                .map_err(|_| format!("{method} {path}: expected a JSON body, got {}", shown()))?;
            self.commit(&p, &body)
                .map_err(|e| format!("{method} {path}: body {}: {e}", compact(&body)))?;
        }
        if let Some(p) = self.field(step, "expect_text", true)? {
            self.commit(&p, &Value::String(response.body.clone()))
                .map_err(|e| format!("{method} {path}: body: {e}"))?;
        }
        Ok(())
    }

    /// Stops the daemon (SIGTERM or SIGKILL), starts it again on the same home, and reconnects
    /// every connected client by name.
    async fn restart(&mut self, step: &Step, kill: bool) -> StepResult {
        let batch = step
            .value
            .get("batch")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let mut reconnect = Vec::new();
        for (name, conn) in &mut self.clients {
            if conn.client.take().is_some() {
                reconnect.push(name.clone());
            }
        }
        if kill {
            self.daemon.kill9().await.map_err(|e| format!("{e:#}"))?;
        } else {
            let status = self.daemon.stop().await.map_err(|e| format!("{e:#}"))?;
            if !status.success() {
                return Err(format!("the daemon exited with {status} after SIGTERM"));
            }
        }
        self.daemon = Daemon::start(&self.bins, &self.homes)
            .await
            .map_err(|e| format!("starting again: {e:#}"))?;
        self.set_daemon_vars();
        for name in reconnect {
            let Some(conn) = self.clients.get(&name) else {
                continue;
            };
            let (token, via) = (conn.token.clone(), conn.via);
            match client::connect(self.daemon.addr, token.as_deref(), via).await {
                Ok(Connected::Open(client)) => {
                    if let Some(conn) = self.clients.get_mut(&name) {
                        conn.client = Some(client);
                    }
                }
                Ok(Connected::Refused { status, body }) => {
                    return Err(format!("reconnecting {name}: HTTP {status} {body:?}"));
                }
                Err(e) => return Err(format!("reconnecting {name}: {e:#}")),
            }
            if batch {
                self.read_batch(&name).await?;
            }
        }
        Ok(())
    }
}

async fn recv_until(
    rx: &mut mpsc::UnboundedReceiver<Incoming>,
    deadline: Instant,
) -> Option<Incoming> {
    match tokio::time::timeout_at(deadline, rx.recv()).await {
        Ok(Some(item)) => Some(item),
        // The reader ended without a final item: report it as the connection ending.
        Ok(None) => Some(Incoming::Gone("the client's reader stopped".into())),
        Err(_) => None,
    }
}

fn compact(v: &Value) -> String {
    client::shorten(&v.to_string(), 400)
}

fn describe_skipped(skipped: &[String]) -> String {
    if skipped.is_empty() {
        return String::new();
    }
    let shown: Vec<&String> = skipped.iter().rev().take(6).rev().collect();
    let more = skipped.len() - shown.len();
    let mut out = format!("\n    passed over {} frame(s):", skipped.len());
    if more > 0 {
        out.push_str(&format!(" ({more} earlier not shown)"));
    }
    for s in shown {
        out.push_str("\n      ");
        out.push_str(s);
    }
    out
}

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
