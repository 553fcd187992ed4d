//! The in-process harness: a [`Hub`] on a temporary home, run on a [`ManualClock`], with
//! scripted engines and test clients, for tests of time-driven behaviour that must not wait.
//!
//! [`Harness::start`] opens the hub. [`Harness::connect`] registers a [`TestClient`] that reads
//! the frames the hub queues for it; [`Harness::advance`] moves the clock. Sessions run on
//! [`ScriptedEngines`]: every engine the hub starts is handed to the test as a
//! [`ScriptedSession`], which sees the serve-v2 ops the hub sends and emits the serve-v2 events
//! the test scripts. Nothing here sleeps; the only real-time limit is [`GUARD`], which fails a
//! test that would otherwise hang.
//!
//! Wire behaviour (HTTP, WebSocket, the real binary) is tested with [`crate::Daemon`] instead.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use jucode_clock::{Clock as _, ManualClock};
use jucode_engine::{EngineError, EngineFactory, EngineOutput, StartSpec};
use jucode_hub::{Auth, ClientId, Connection, Hub, HubConfig, Outgoing};
use jucode_protocol::Object;
use jucode_protocol::serve::{Event, TranscriptItem};
use serde_json::Value;
use tokio::sync::{Notify, mpsc};

use crate::CONNECT_BATCH;

/// How long a harness wait may take in real time before the test fails: a guard against a
/// hang, never a timing assertion (everything the hub does in-process is immediate).
pub const GUARD: Duration = Duration::from_secs(10);

/// Where a [`Harness`] clock starts unless told otherwise: a fixed instant, so tests read the
/// same times on every run.
pub const START: &str = "2026-03-01T12:00:00Z";

/// A hub on a temporary home, its manual clock and its scripted engines.
pub struct Harness {
    pub hub: Arc<Hub>,
    pub clock: ManualClock,
    pub engines: ScriptedEngines,
    names: Vec<String>,
    home: PathBuf,
    _dir: tempfile::TempDir,
}

/// Options for a harness, from [`Harness::builder`].
pub struct HarnessBuilder {
    start: jiff::Timestamp,
    engines: Vec<String>,
    opens_at_startup: bool,
    durable: bool,
    agents: Vec<(String, Value)>,
}

impl HarnessBuilder {
    /// The clock's starting wall time.
    pub fn start_at(mut self, at: jiff::Timestamp) -> Self {
        self.start = at;
        self
    }

    /// The engine names the scripted factory is registered under (`jucode` by default, the
    /// engine a `session_create` without `engine` gets).
    pub fn engines(mut self, names: &[&str]) -> Self {
        self.engines = names.iter().map(|n| n.to_string()).collect();
        self
    }

    /// Declares the scripted engines as opening at their first `startup` event (as Codex
    /// does): the hub then answers `session_create` only once the test emits it.
    pub fn opens_at_startup(mut self, yes: bool) -> Self {
        self.opens_at_startup = yes;
        self
    }

    /// Declares the scripted engines' saved transcripts durable (as the jucode engine's are):
    /// what a test saves with [`ScriptedSession::save_user`] is what the hub reads back to
    /// check a delivery it never saw echoed; a session that saved nothing holds nothing.
    pub fn durable_transcripts(mut self, yes: bool) -> Self {
        self.durable = yes;
        self
    }

    /// An agent the hub finds at start: `config` is its `agent.json` (`name` and `cwd` at
    /// least), written to `<home>/agents/<id>/` before the hub opens.
    pub fn agent(mut self, id: &str, config: Value) -> Self {
        self.agents.push((id.to_string(), config));
        self
    }

    /// Opens the hub and starts its background loop (on the current tokio runtime).
    pub fn open(self) -> Result<Harness> {
        let dir = tempfile::tempdir().context("make a temporary home")?;
        let user_home = dir.path().to_path_buf();
        let home = user_home.join(".jucode");
        for (id, config) in &self.agents {
            let agent_dir = home.join("agents").join(id);
            std::fs::create_dir_all(&agent_dir).context("make an agent directory")?;
            std::fs::write(agent_dir.join("agent.json"), config.to_string())
                .context("write agent.json")?;
        }
        let clock = ManualClock::new(self.start);
        let engines = ScriptedEngines::new(self.opens_at_startup, self.durable);
        let hub = open_hub(&home, &clock, &engines, &self.engines)?;
        Ok(Harness {
            hub,
            clock,
            engines,
            names: self.engines,
            home,
            _dir: dir,
        })
    }
}

fn open_hub(
    home: &Path,
    clock: &ManualClock,
    engines: &ScriptedEngines,
    names: &[String],
) -> Result<Arc<Hub>> {
    let factory: Arc<dyn EngineFactory> = Arc::new(engines.clone());
    let config = HubConfig {
        home: home.to_path_buf(),
        user_home: home.parent().unwrap_or(home).to_path_buf(),
        version: "harness".into(),
        relay_url: None,
        engines: names
            .iter()
            .map(|name| (name.clone(), factory.clone()))
            .collect::<HashMap<_, _>>(),
        clock: clock.shared(),
        agent_mcp: Default::default(),
        billing: None,
        online: Default::default(),
    };
    let hub = Hub::open(config).context("open the hub")?;
    hub.start_background();
    Ok(hub)
}

impl Harness {
    /// A hub with the scripted engine as `jucode`, its clock at [`START`].
    pub fn start() -> Result<Harness> {
        Harness::builder().open()
    }

    /// Options before opening.
    pub fn builder() -> HarnessBuilder {
        HarnessBuilder {
            // A constant that parses; the fallback is never taken.
            start: START.parse().unwrap_or(jiff::Timestamp::UNIX_EPOCH),
            engines: vec!["jucode".into()],
            opens_at_startup: false,
            durable: false,
            agents: Vec::new(),
        }
    }

    /// A daemon restart on the same home and clock: the hub is dropped (the test drops its
    /// clients and scripted sessions first, so nothing else holds it) and opened again.
    /// Engines the new hub starts arrive on the same [`ScriptedEngines`].
    pub async fn restart(self) -> Result<Harness> {
        self.restart_with(|_| Ok(())).await
    }

    /// A restart that runs `before_open` on the jucode home once the old hub is gone and
    /// before the new one opens: a test puts back the state files as they were at an
    /// earlier instant, which is what a SIGKILL at that instant leaves.
    pub async fn restart_with(
        self,
        before_open: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<Harness> {
        let Harness {
            hub,
            clock,
            engines,
            names,
            home,
            _dir,
        } = self;
        // The old hub stops as the daemon does (nothing new starts), and lets go as its
        // engines' tasks see their sessions end. An engine it starts meanwhile (a message
        // found undelivered when an engine went) is dropped at once: it is the old hub's.
        let stopping = hub.clone();
        let gone = Arc::downgrade(&hub);
        drop(hub);
        let drain = || {
            while let Some(session) = engines.take() {
                drop(session);
            }
        };
        tokio::time::timeout(GUARD, async {
            {
                let stop = stopping.shutdown();
                tokio::pin!(stop);
                loop {
                    drain();
                    tokio::select! {
                        _ = &mut stop => break,
                        _ = tokio::task::yield_now() => {}
                    }
                }
            }
            drop(stopping);
            while gone.strong_count() > 0 {
                drain();
                tokio::task::yield_now().await;
            }
        })
        .await
        .map_err(|_| anyhow!("the old hub was still held after the {GUARD:?} guard"))?;
        before_open(&home)?;
        let hub = open_hub(&home, &clock, &engines, &names)?;
        Ok(Harness {
            hub,
            clock,
            engines,
            names,
            home,
            _dir,
        })
    }

    /// Waits until the background loop has ticked `n` more times than `since` (a count read
    /// from [`Hub::ticks`] before moving the clock).
    pub async fn ticked(&self, since: u64, n: u64) -> Result<u64> {
        let mut ticks = self.hub.ticks();
        let want = since + n;
        let reached = tokio::time::timeout(GUARD, ticks.wait_for(|t| *t >= want))
            .await
            .map_err(|_| anyhow!("the hub did not tick within the {GUARD:?} guard"))?
            .map(|t| *t)
            .map_err(|_| anyhow!("the hub's loop is gone"))?;
        Ok(reached)
    }

    /// Moves the clock on by one tick and waits for the loop to have run it.
    pub async fn tick(&self) -> Result<()> {
        let since = *self.hub.ticks().borrow();
        self.advance(Duration::from_secs(1));
        self.ticked(since, 1).await.map(|_| ())
    }

    /// The jucode home (`<tmp>/.jucode`); the user's home is its parent.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The user's home, a temporary directory that is a fine `cwd` for sessions.
    pub fn user_home(&self) -> &Path {
        self.home.parent().unwrap_or(&self.home)
    }

    /// Moves the clock forward by `by` (wall and monotonic time).
    pub fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }

    /// The clock's wall time in ms since the epoch.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Connects a local client (the daemon token's holder) and reads its connect batch.
    pub async fn connect(&self) -> Result<TestClient> {
        self.connect_as(Auth::Local).await
    }

    /// Connects as `auth` and reads the connect batch.
    pub async fn connect_as(&self, auth: Auth) -> Result<TestClient> {
        let conn = self.hub.connect(auth);
        let mut client = TestClient {
            hub: self.hub.clone(),
            id: conn.id,
            conn,
            next_id: 1,
            backlog: VecDeque::new(),
            connect_batch: Vec::new(),
        };
        for expected in CONNECT_BATCH {
            let frame = client.next().await?;
            if frame_type(&frame) != *expected {
                bail!("connect batch: expected {expected:?}, got {frame}");
            }
            client.connect_batch.push(frame);
        }
        Ok(client)
    }
}

/// A registered connection and the frames the hub queued for it.
pub struct TestClient {
    hub: Arc<Hub>,
    id: ClientId,
    conn: Connection,
    next_id: u64,
    backlog: VecDeque<Value>,
    /// The frames read on connect, `hello` first (see [`CONNECT_BATCH`]).
    pub connect_batch: Vec<Value>,
}

impl TestClient {
    /// This connection's id.
    pub fn id(&self) -> ClientId {
        self.id
    }

    /// Hands one frame to the hub, as the front end would.
    pub async fn send(&mut self, frame: Value) {
        self.send_text(&frame.to_string()).await;
    }

    /// Hands raw text to the hub (e.g. something that is not JSON).
    pub async fn send_text(&mut self, text: &str) {
        self.hub.handle(self.id, text).await;
    }

    /// Sends `op` with a fresh numeric `id` and returns the frame echoing it; frames before it
    /// stay queued for [`TestClient::next`].
    pub async fn request(&mut self, mut op: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        op.as_object_mut()
            .context("request op must be a JSON object")?
            .insert("id".into(), Value::from(id));
        self.send(op).await;
        let mut skipped = Vec::new();
        let reply = loop {
            let frame = self.read().await?;
            if frame.get("id").and_then(Value::as_u64) == Some(id) {
                break frame;
            }
            skipped.push(frame);
        };
        // Put the others back in front of anything already kept, in their order.
        for frame in skipped.into_iter().rev() {
            self.backlog.push_front(frame);
        }
        Ok(reply)
    }

    /// The next frame the hub queued for this client.
    pub async fn next(&mut self) -> Result<Value> {
        match self.backlog.pop_front() {
            Some(frame) => Ok(frame),
            None => self.read().await,
        }
    }

    /// Reads until a frame matches `pred` and returns it; the frames before it are dropped.
    pub async fn next_matching(&mut self, mut pred: impl FnMut(&Value) -> bool) -> Result<Value> {
        let mut skipped: VecDeque<String> = VecDeque::new();
        loop {
            let frame = self
                .next()
                .await
                .with_context(|| format!("no matching frame; last skipped: {skipped:?}"))?;
            if pred(&frame) {
                return Ok(frame);
            }
            if skipped.len() == 10 {
                skipped.pop_front();
            }
            skipped.push_back(frame_type(&frame).to_string());
        }
    }

    /// Reads until a frame of type `kind`.
    pub async fn next_type(&mut self, kind: &str) -> Result<Value> {
        self.next_matching(|f| frame_type(f) == kind)
            .await
            .with_context(|| format!("waiting for a {kind:?} frame"))
    }

    /// The frames queued right now, without waiting.
    pub fn queued(&mut self) -> Vec<Value> {
        let mut out: Vec<Value> = self.backlog.drain(..).collect();
        while let Ok(Outgoing::Frame(text)) = self.conn.frames.try_recv() {
            out.extend(serde_json::from_str::<Value>(&text).ok());
        }
        out
    }

    /// Whether the hub ended this connection (too slow, revoked), with the close code.
    pub fn kicked(&self) -> Option<u16> {
        self.conn.kicked.borrow().as_ref().map(|k| k.code)
    }

    async fn read(&mut self) -> Result<Value> {
        let received = tokio::time::timeout(GUARD, self.conn.frames.recv())
            .await
            .map_err(|_| anyhow!("no frame from the hub within the {GUARD:?} guard"))?;
        let Outgoing::Frame(text) = received.context("the hub dropped this client")?;
        serde_json::from_str(&text).with_context(|| format!("the hub queued non-JSON: {text}"))
    }
}

impl Drop for TestClient {
    fn drop(&mut self) {
        self.hub.disconnect(self.id);
    }
}

/// An [`EngineFactory`] whose sessions the test drives. Clones share their sessions.
#[derive(Clone)]
pub struct ScriptedEngines {
    inner: Arc<Scripted>,
}

struct Scripted {
    opens_at_startup: bool,
    durable: bool,
    started: Mutex<VecDeque<ScriptedSession>>,
    /// What each session saved (its user messages), by session id; kept across restarts.
    saved: Mutex<HashMap<String, Vec<TranscriptItem>>>,
    notify: Notify,
}

impl ScriptedEngines {
    fn new(opens_at_startup: bool, durable: bool) -> ScriptedEngines {
        ScriptedEngines {
            inner: Arc::new(Scripted {
                opens_at_startup,
                durable,
                started: Mutex::new(VecDeque::new()),
                saved: Mutex::new(HashMap::new()),
                notify: Notify::new(),
            }),
        }
    }

    /// The user messages `session` saved, in order.
    pub fn saved(&self, session: &str) -> Vec<String> {
        self.inner
            .saved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(session)
            .into_iter()
            .flatten()
            .filter_map(|item| match item {
                TranscriptItem::User { content, .. } => Some(content.clone()),
                _ => None,
            })
            .collect()
    }

    /// The next engine the hub started, in start order.
    pub async fn next_session(&self) -> Result<ScriptedSession> {
        let wait = async {
            loop {
                // Registered before the check, so a start in between is not missed.
                let notified = self.inner.notify.notified();
                if let Some(session) = self.take() {
                    return session;
                }
                notified.await;
            }
        };
        tokio::time::timeout(GUARD, wait)
            .await
            .map_err(|_| anyhow!("the hub started no engine within the {GUARD:?} guard"))
    }

    /// An engine the hub started that no test took yet, without waiting.
    pub fn try_next_session(&self) -> Option<ScriptedSession> {
        self.take()
    }

    fn take(&self) -> Option<ScriptedSession> {
        self.inner
            .started
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
    }
}

impl EngineFactory for ScriptedEngines {
    fn start(&self, spec: StartSpec) -> Result<jucode_engine::EngineHandle, EngineError> {
        let (handle, ops, events) = jucode_engine::channel();
        let session = ScriptedSession {
            spec,
            ops,
            events,
            engines: self.inner.clone(),
        };
        self.inner
            .started
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(session);
        self.inner.notify.notify_waiters();
        Ok(handle)
    }

    fn opens_at_startup(&self) -> bool {
        self.inner.opens_at_startup
    }

    fn transcript_is_durable(&self) -> bool {
        self.inner.durable
    }

    fn saved_transcript(&self, session: &str) -> Option<Vec<TranscriptItem>> {
        let saved = self.inner.saved.lock().unwrap_or_else(|e| e.into_inner());
        saved.get(session).cloned()
    }
}

/// One engine the hub started: its start spec, the ops the hub sends it, and the way to emit
/// its events. Dropping it is the engine going away without a word.
pub struct ScriptedSession {
    pub spec: StartSpec,
    ops: mpsc::UnboundedReceiver<Object>,
    events: mpsc::Sender<EngineOutput>,
    engines: Arc<Scripted>,
}

impl ScriptedSession {
    /// The next serve-v2 op the hub sent (`{"op": ..., ...}`).
    pub async fn next_op(&mut self) -> Result<Object> {
        let op = tokio::time::timeout(GUARD, self.ops.recv())
            .await
            .map_err(|_| anyhow!("the hub sent no op within the {GUARD:?} guard"))?;
        op.context("the hub dropped this engine's ops")
    }

    /// An op the hub has sent and the test not read yet, without waiting.
    pub fn try_op(&mut self) -> Option<Object> {
        self.ops.try_recv().ok()
    }

    /// Reads ops until one named `name` and returns it.
    pub async fn op(&mut self, name: &str) -> Result<Object> {
        loop {
            let op = self.next_op().await?;
            if op.get("op").and_then(Value::as_str) == Some(name) {
                return Ok(op);
            }
        }
    }

    /// Emits a serve-v2 event of `kind` with `fields` (an object), as the engine would.
    pub async fn emit(&self, kind: &str, fields: Value) -> Result<()> {
        self.output(EngineOutput::Event(Event::new(kind, fields)))
            .await
    }

    /// Saves a user message to this session's transcript, as an engine does before it
    /// echoes it (read back through `saved_transcript`).
    pub fn save_user(&self, content: &str) {
        let mut saved = self.engines.saved.lock().unwrap_or_else(|e| e.into_inner());
        saved
            .entry(self.spec.session.clone())
            .or_default()
            .push(TranscriptItem::User {
                content: content.to_string(),
                images: vec![],
            });
    }

    /// Emits the `startup` event a serve-v2 engine begins with.
    pub async fn startup(&self) -> Result<()> {
        let fields = serde_json::json!({
            "session_id": self.spec.session,
            "cwd": self.spec.cwd.display().to_string(),
            "model": "scripted",
        });
        self.emit("startup", fields).await
    }

    /// Emits `status: ready`, the end of a turn.
    pub async fn ready(&self) -> Result<()> {
        self.emit("status", serde_json::json!({"message": "ready"}))
            .await
    }

    /// Stops the engine, with `error` when it was not asked to.
    pub async fn exit(self, error: Option<&str>) -> Result<()> {
        let error = error.map(str::to_string);
        self.output(EngineOutput::Exited { error }).await
    }

    async fn output(&self, output: EngineOutput) -> Result<()> {
        self.events
            .send(output)
            .await
            .map_err(|_| anyhow!("the hub stopped reading this engine"))
    }
}

fn frame_type(frame: &Value) -> &str {
    frame
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
}
