//! Test support (feature `testkit`): an honest scripted [`Harness`] and a
//! launcher for a real `nats-server` on loopback. Never used by a production seat.

use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use tokio::sync::{Notify, broadcast};

use crate::harness::{Harness, HarnessSignal, JournalSource, TurnFailure};
use crate::seat::{HarnessContext, HarnessFactory};
use crate::{Error, Result};

/// What the next turn does.
#[derive(Debug, Clone)]
pub enum Step {
    Succeed,
    Fail {
        code: Option<String>,
        message: String,
    },
    /// Stay busy until [`Scripted::release`] is called, then succeed.
    Hold,
}

#[derive(Default)]
struct Inner {
    steps: VecDeque<Step>,
    turns: Vec<String>,
    interrupts: Vec<String>,
    refuse_interrupts: bool,
    journal: Option<JournalSource>,
    line: u64,
}

/// The scripted agent: records what it is sent, writes a jcode-shaped journal.
#[derive(Clone)]
pub struct Scripted {
    inner: Arc<Mutex<Inner>>,
    release: Arc<Notify>,
    signals: broadcast::Sender<HarnessSignal>,
    pub context: Arc<Mutex<Option<HarnessContext>>>,
}

impl Default for Scripted {
    fn default() -> Self {
        Self::new()
    }
}

impl Scripted {
    pub fn new() -> Self {
        Scripted {
            inner: Arc::default(),
            release: Arc::new(Notify::new()),
            signals: broadcast::channel(64).0,
            context: Arc::default(),
        }
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
    pub fn push(&self, step: Step) {
        self.lock().steps.push_back(step);
    }
    pub fn refuse_interrupts(&self, refuse: bool) {
        self.lock().refuse_interrupts = refuse;
    }
    pub fn with_journal(&self, source: JournalSource) {
        self.lock().journal = Some(source);
    }
    pub fn release(&self) {
        self.release.notify_one();
    }
    pub fn turns(&self) -> Vec<String> {
        self.lock().turns.clone()
    }
    pub fn interrupts(&self) -> Vec<String> {
        self.lock().interrupts.clone()
    }
    pub fn signal(&self, s: HarnessSignal) {
        let _ = self.signals.send(s);
    }

    fn journal_line(&self, role: &str, text: &str) {
        let mut g = self.lock();
        let Some(src) = g.journal.clone() else { return };
        g.line += 1;
        let n = g.line;
        drop(g);
        let line = json!({"meta": {"status": "Active"}, "append_messages": [{
            "id": format!("message_{n}"), "role": role,
            "content": [{"type": "text", "text": text}],
            "timestamp": "2026-11-29T21:24:53.291Z"}]});
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(src.journal_path())
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

#[async_trait]
impl Harness for Scripted {
    async fn send_turn(&self, text: &str) -> Result<(), TurnFailure> {
        let step = {
            let mut g = self.lock();
            g.turns.push(text.to_string());
            g.steps.pop_front().unwrap_or(Step::Succeed)
        };
        self.journal_line("user", text);
        match step {
            Step::Succeed => {}
            Step::Hold => self.release.notified().await,
            Step::Fail { code, message } => return Err(TurnFailure { code, message }),
        }
        let n = self.lock().turns.len();
        self.journal_line("assistant", &format!("done with turn {n}"));
        Ok(())
    }

    async fn soft_interrupt(&self, text: &str) -> Result<(), TurnFailure> {
        let mut g = self.lock();
        if g.refuse_interrupts {
            return Err(TurnFailure {
                code: None,
                message: "refused".into(),
            });
        }
        g.interrupts.push(text.to_string());
        Ok(())
    }

    fn signals(&self) -> broadcast::Receiver<HarnessSignal> {
        self.signals.subscribe()
    }

    fn journal(&self) -> Option<JournalSource> {
        self.lock().journal.clone()
    }

    async fn shutdown(&self) {}
}

#[async_trait]
impl HarnessFactory for Scripted {
    async fn start(&self, ctx: HarnessContext) -> Result<Arc<dyn Harness>> {
        *self.context.lock().unwrap_or_else(|e| e.into_inner()) = Some(ctx);
        Ok(Arc::new(self.clone()))
    }
}

/// Where `scripts/install-nats.sh` puts the broker.
pub fn nats_server_bin() -> PathBuf {
    if let Ok(p) = std::env::var("NATS_SERVER_BIN") {
        return PathBuf::from(p);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/peers/nats-venv/bin/nats-server")
}

/// A real nats-server with JetStream on 127.0.0.1, a random port and a temp store.
pub struct NatsServer {
    child: tokio::process::Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl NatsServer {
    pub async fn start() -> Result<NatsServer> {
        let bin = nats_server_bin();
        if !bin.exists() {
            return Err(Error::Launch(format!(
                "{} is missing: run scripts/install-nats.sh first",
                bin.display()
            )));
        }
        let dir = tempfile::tempdir().map_err(|e| Error::Launch(e.to_string()))?;
        let child = tokio::process::Command::new(&bin)
            .args(["-js", "-a", "127.0.0.1", "-p", "-1", "-sd"])
            .arg(dir.path().join("store"))
            .arg("--ports_file_dir")
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Error::Launch(format!("cannot start {}: {e}", bin.display())))?;
        for _ in 0..200 {
            if let Ok(entries) = std::fs::read_dir(dir.path()) {
                for e in entries.flatten() {
                    if e.file_name().to_string_lossy().ends_with(".ports")
                        && let Ok(raw) = std::fs::read(e.path())
                        && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&raw)
                        && let Some(url) = v["nats"][0].as_str()
                    {
                        return Ok(NatsServer {
                            child,
                            url: url.to_string(),
                            _dir: dir,
                        });
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(Error::Launch("nats-server wrote no ports file".into()))
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}
