//! A fixture's run: the daemon started on a fresh home, each step's action (connect, send,
//! write, restart, …), and the schema check on every frame received. What a step expects of the
//! daemon's answers is checked in [`super::expect`].

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::client::{self, Client, Connected, Incoming, TokenVia};
use super::pattern::{self, Vars};
use super::{Conn, EXPECT_TIMEOUT_MS, Runner, Skip, Step, StepResult, checked};
use crate::daemon::{Bins, Daemon, Homes};
use crate::schema::Validators;

// What the daemon sends on connect, in order: the one list, kept in test support.
use jucode_testsupport::CONNECT_BATCH;

impl Runner {
    pub(super) async fn start(bins: &Bins, schemas: Arc<Validators>) -> Result<Runner> {
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
    pub(super) async fn finish(mut self) -> StepResult {
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
    pub(super) fn log_tail(&self) -> String {
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

    pub(super) fn field(
        &self,
        step: &Step,
        key: &str,
        escape: bool,
    ) -> Result<Option<Value>, String> {
        step.value
            .get(key)
            .map(|v| pattern::substitute(v, &self.vars, escape))
            .transpose()
    }

    pub(super) fn client_name(step: &Step) -> Result<String, String> {
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

    pub(super) fn skip_of(&self, step: &Step) -> Result<Skip, String> {
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

    pub(super) fn timeout_of(step: &Step) -> Duration {
        let ms = step
            .value
            .get("timeout")
            .and_then(Value::as_u64)
            .unwrap_or(EXPECT_TIMEOUT_MS);
        Duration::from_millis(ms)
    }

    pub(super) async fn step(&mut self, step: &Step) -> StepResult {
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

    pub(super) async fn recv(
        &mut self,
        name: &str,
        deadline: Instant,
    ) -> Result<Option<Incoming>, String> {
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
    pub(super) fn commit(&mut self, pattern: &Value, actual: &Value) -> Result<(), String> {
        let mut caps = Vec::new();
        pattern::matches(pattern, actual, &mut caps)?;
        self.vars.extend(caps);
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
