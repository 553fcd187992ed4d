//! Test support (feature `testkit`): an honest scripted [`Harness`] and a
//! launcher for a real `nats-server` on loopback. Never used by a production seat.

use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use tokio::sync::{Notify, broadcast, oneshot};

use crate::harness::{Harness, HarnessSignal, JournalSource, Steered, TurnFailure};
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
    /// Stay busy until [`Scripted::release`] is called, then fail.
    HoldFail {
        code: Option<String>,
        message: String,
    },
    /// The harness refuses the message itself: it is never accepted.
    Refuse {
        code: Option<String>,
        message: String,
    },
}

type Outcome = Result<(), TurnFailure>;

#[derive(Default)]
struct Inner {
    steps: VecDeque<Step>,
    turns: Vec<String>,
    interrupts: Vec<String>,
    refuse_interrupts: bool,
    /// Interrupt requests wait for [`Scripted::answer_interrupt`] before they are decided.
    hold_interrupts: bool,
    /// A turn runs now (an interrupt decided now joins it).
    running: bool,
    /// Interrupts that missed their turn and ran as turns of their own.
    own_turns: usize,
    /// Interrupts that joined the running turn, told its outcome when it ends.
    joiners: Vec<oneshot::Sender<Outcome>>,
    /// A TUI turn that starts in the instant the next turn ends.
    tui_at_end: Option<Step>,
    /// TUI turns run so far.
    tui_turns: usize,
    /// Interrupts decided as joining a running turn.
    joined: usize,
    /// Times the seat reported its presence bind confirmed.
    bound: usize,
    journal: Option<JournalSource>,
    line: u64,
    /// The factory's start waits for [`Scripted::release_start`].
    hold_start: bool,
}

/// The scripted agent: records what it is sent, writes a jcode-shaped journal.
/// Like the jcode harness, one turn runs at a time, and a soft interrupt decided
/// while no turn runs becomes a turn of its own (taking the next [`Step`]).
#[derive(Clone)]
pub struct Scripted {
    inner: Arc<Mutex<Inner>>,
    release: Arc<Notify>,
    answer: Arc<Notify>,
    start_gate: Arc<Notify>,
    turn_lock: Arc<tokio::sync::Mutex<()>>,
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
            answer: Arc::new(Notify::new()),
            start_gate: Arc::new(Notify::new()),
            turn_lock: Arc::default(),
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
    /// The harness start (after the mesh connected, before the seat joins)
    /// waits until [`Scripted::release_start`].
    pub fn hold_start(&self) {
        self.lock().hold_start = true;
    }
    pub fn release_start(&self) {
        self.lock().hold_start = false;
        self.start_gate.notify_waiters();
    }
    pub fn release(&self) {
        self.release.notify_one();
    }
    /// Hold every later interrupt request unanswered until [`Scripted::answer_interrupt`].
    pub fn hold_interrupts(&self, hold: bool) {
        self.lock().hold_interrupts = hold;
    }
    /// Decide one held interrupt request (against whether a turn runs at that moment).
    pub fn answer_interrupt(&self) {
        self.answer.notify_one();
    }
    /// Whether a turn runs now.
    pub fn running(&self) -> bool {
        self.lock().running
    }
    /// When the next turn ends, a turn the seat did not start (someone at the
    /// TUI) begins in that same instant, running `step`: an interrupt decided
    /// now joins it, not the turn that ended.
    pub fn tui_turn_at_end(&self, step: Step) {
        self.lock().tui_at_end = Some(step);
    }
    /// How many interrupts joined a running turn.
    pub fn joined(&self) -> usize {
        self.lock().joined
    }
    /// How many TUI turns ran.
    pub fn tui_turns(&self) -> usize {
        self.lock().tui_turns
    }
    /// How many interrupts ran as turns of their own.
    pub fn own_turns(&self) -> usize {
        self.lock().own_turns
    }
    /// How often the seat said its presence bind is confirmed (once per seat).
    pub fn bound(&self) -> usize {
        self.lock().bound
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

impl Scripted {
    async fn play(&self, step: Step) -> Outcome {
        match step {
            Step::Succeed => Ok(()),
            Step::Hold => {
                self.release.notified().await;
                Ok(())
            }
            Step::HoldFail { code, message } => {
                self.release.notified().await;
                Err(TurnFailure { code, message })
            }
            Step::Fail { code, message } | Step::Refuse { code, message } => {
                Err(TurnFailure { code, message })
            }
        }
    }

    /// The running turn ended with `res`: tell the interrupts that joined it.
    /// Returns the TUI turn that starts now, if one is armed (the turn then
    /// stays running).
    fn end_turn(&self, res: &Outcome) -> Option<Step> {
        let (joiners, tui) = {
            let mut g = self.lock();
            let tui = g.tui_at_end.take();
            if tui.is_none() {
                g.running = false;
            }
            (std::mem::take(&mut g.joiners), tui)
        };
        for j in joiners {
            let _ = j.send(res.clone());
        }
        tui
    }
}

impl Scripted {
    /// One turn the seat started; `accepted` fires unless the step refuses the message.
    async fn run_turn(&self, text: &str, accepted: Option<oneshot::Sender<()>>) -> Outcome {
        let turn = self.turn_lock.clone().lock_owned().await;
        let step = {
            let mut g = self.lock();
            g.turns.push(text.to_string());
            g.steps.pop_front().unwrap_or(Step::Succeed)
        };
        if let Step::Refuse { .. } = step {
            return self.play(step).await;
        }
        self.lock().running = true;
        if let Some(a) = accepted {
            let _ = a.send(());
        }
        self.journal_line("user", text);
        let res = self.play(step).await;
        if res.is_ok() {
            let n = self.lock().turns.len();
            self.journal_line("assistant", &format!("done with turn {n}"));
        }
        let tui = self.end_turn(&res);
        if let Some(step) = tui {
            // Still running: the TUI turn holds the turn lock from this instant.
            let me = self.clone();
            tokio::spawn(async move {
                let _turn = turn;
                me.lock().tui_turns += 1;
                me.signal(HarnessSignal::TurnStarted);
                me.journal_line("user", "typed at the TUI");
                let res = me.play(step).await;
                me.end_turn(&res);
                me.signal(HarnessSignal::TurnEnded { ok: res.is_ok() });
            });
        }
        res
    }
}

#[async_trait]
impl Harness for Scripted {
    async fn send_turn(&self, text: &str) -> Result<(), TurnFailure> {
        self.run_turn(text, None).await
    }

    async fn send_turn_accepted(
        &self,
        text: &str,
        accepted: oneshot::Sender<()>,
    ) -> Result<(), TurnFailure> {
        self.run_turn(text, Some(accepted)).await
    }

    async fn soft_interrupt(&self, text: &str) -> Result<Steered, TurnFailure> {
        let hold = {
            let mut g = self.lock();
            if g.refuse_interrupts {
                return Err(TurnFailure {
                    code: None,
                    message: "refused".into(),
                });
            }
            g.interrupts.push(text.to_string());
            g.hold_interrupts
        };
        if hold {
            self.answer.notified().await;
        }
        {
            let mut g = self.lock();
            if g.running {
                let (tx, rx) = oneshot::channel();
                g.joiners.push(tx);
                g.joined += 1;
                return Ok(Steered::Joined { result: rx });
            }
        }
        // The turn it was meant for is over: run it as a turn of its own,
        // signalled like a turn the seat did not start (as the jcode harness does).
        self.lock().own_turns += 1;
        let (tx, rx) = oneshot::channel();
        let me = self.clone();
        let text = text.to_string();
        tokio::spawn(async move {
            me.signal(HarnessSignal::TurnStarted);
            let res = me.send_turn(&text).await;
            me.signal(HarnessSignal::TurnEnded { ok: res.is_ok() });
            let _ = tx.send(res);
        });
        Ok(Steered::OwnTurn { result: rx })
    }

    fn signals(&self) -> broadcast::Receiver<HarnessSignal> {
        self.signals.subscribe()
    }

    fn journal(&self) -> Option<JournalSource> {
        self.lock().journal.clone()
    }

    fn joined(&self) {
        self.lock().bound += 1;
    }

    async fn shutdown(&self) {}
}

#[async_trait]
impl HarnessFactory for Scripted {
    async fn start(&self, ctx: HarnessContext) -> Result<Arc<dyn Harness>> {
        *self.context.lock().unwrap_or_else(|e| e.into_inner()) = Some(ctx);
        loop {
            let gate = self.start_gate.notified();
            tokio::pin!(gate);
            gate.as_mut().enable();
            if !self.lock().hold_start {
                break;
            }
            gate.await;
        }
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

/// A real nats-server with JetStream on 127.0.0.1, a random port and a temp
/// store; it can be killed and restarted on the same port with the same store.
pub struct NatsServer {
    child: Option<tokio::process::Child>,
    pub url: String,
    port: Option<u16>,
    extra: Vec<String>,
    dir: tempfile::TempDir,
}

impl NatsServer {
    pub async fn start() -> Result<NatsServer> {
        Self::start_with(&[]).await
    }

    /// Start with extra command-line arguments (e.g. `--auth <token>`).
    pub async fn start_with(extra: &[&str]) -> Result<NatsServer> {
        let dir = tempfile::tempdir().map_err(|e| Error::Launch(e.to_string()))?;
        let mut s = NatsServer {
            child: None,
            url: String::new(),
            port: None,
            extra: extra.iter().map(|a| a.to_string()).collect(),
            dir,
        };
        s.spawn().await?;
        Ok(s)
    }

    async fn spawn(&mut self) -> Result<()> {
        let bin = nats_server_bin();
        if !bin.exists() {
            return Err(Error::Launch(format!(
                "{} is missing: run scripts/install-nats.sh first",
                bin.display()
            )));
        }
        let ports = self.dir.path().join("ports");
        let _ = std::fs::remove_dir_all(&ports);
        std::fs::create_dir_all(&ports).map_err(|e| Error::Launch(e.to_string()))?;
        let port = self.port.map(|p| p.to_string()).unwrap_or("-1".into());
        let child = tokio::process::Command::new(&bin)
            .args(["-js", "-a", "127.0.0.1", "-p", &port, "-sd"])
            .arg(self.dir.path().join("store"))
            .arg("--ports_file_dir")
            .arg(&ports)
            .args(&self.extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Error::Launch(format!("cannot start {}: {e}", bin.display())))?;
        self.child = Some(child);
        for _ in 0..400 {
            if let Ok(entries) = std::fs::read_dir(&ports) {
                for e in entries.flatten() {
                    if e.file_name().to_string_lossy().ends_with(".ports")
                        && let Ok(raw) = std::fs::read(e.path())
                        && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&raw)
                        && let Some(url) = v["nats"][0].as_str()
                    {
                        self.url = url.to_string();
                        self.port = url.rsplit(':').next().and_then(|p| p.parse().ok());
                        return Ok(());
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(Error::Launch("nats-server wrote no ports file".into()))
    }

    /// Kill the broker (SIGKILL); the store stays for [`NatsServer::restart`].
    pub async fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
        }
    }

    /// Start again on the same port with the same store, optionally with new extra arguments.
    pub async fn restart(&mut self, extra: Option<&[&str]>) -> Result<()> {
        self.kill().await;
        if let Some(x) = extra {
            self.extra = x.iter().map(|a| a.to_string()).collect();
        }
        self.spawn().await
    }

    pub async fn stop(mut self) {
        self.kill().await;
    }
}

/// A strict fake of Cotal's manager endpoint (SPEC §13.2–13.3, §13.7): it
/// publishes its cluster document into the contract store, answers `describe`
/// with that cluster, and refuses every other request whose `op` does not pin
/// the described input/output digests (`contract-mismatch`) or whose `bind`
/// names another incarnation (`failed-precondition`).
pub struct FakeManager {
    state: Arc<Mutex<ManagerState>>,
    client: async_nats::Client,
    space: String,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct ManagerState {
    revision: u64,
    cluster_digest: String,
    digests: std::collections::BTreeMap<String, (String, String)>,
    describes: usize,
    refused: Vec<String>,
    served: Vec<String>,
}

/// The commands the fake manager serves (the ones the `cotal_*` tools call).
pub const MANAGER_COMMANDS: &[&str] = &[
    "spawn",
    "despawn",
    "define-persona",
    "personas",
    "turn-yield",
    "run",
    "feedback",
];

/// Instance id and epoch the fake answers from.
pub const MANAGER_INSTANCE: &str = "mgr1";
pub const MANAGER_EPOCH: u64 = 3;

fn store_err(e: impl std::fmt::Display) -> Error {
    Error::Mesh(e.to_string())
}

impl FakeManager {
    /// Create the contract store, publish revision 0 and start answering.
    pub async fn start(client: async_nats::Client, space: &str) -> Result<FakeManager> {
        let js = async_nats::jetstream::new(client.clone());
        js.get_or_create_stream(async_nats::jetstream::stream::Config {
            name: crate::manager::store_stream(space),
            subjects: vec![format!("cotal.{space}.epc.>")],
            allow_direct: true,
            ..Default::default()
        })
        .await
        .map_err(store_err)?;
        let state = Arc::new(Mutex::new(ManagerState::default()));
        let fake = FakeManager {
            state: state.clone(),
            client: client.clone(),
            space: space.to_string(),
            task: tokio::spawn(async {}),
        };
        fake.publish_revision(0).await?;
        let mut sub = client
            .subscribe(format!("cotal.{space}.ep.one.manager.>"))
            .await
            .map_err(store_err)?;
        let space2 = space.to_string();
        let task = tokio::spawn(async move {
            use futures_util::StreamExt;
            while let Some(m) = sub.next().await {
                let (reply_subject, body) = answer(&state, &space2, m.subject.as_str(), &m.payload);
                if let Some(s) = reply_subject {
                    let _ = client.publish(s, body.to_string().into()).await;
                    let _ = client.flush().await;
                }
            }
        });
        Ok(FakeManager { task, ..fake })
    }

    /// Change the manager's contract (a new revision of every command schema).
    pub async fn publish_revision(&self, revision: u64) -> Result<()> {
        let js = async_nats::jetstream::new(self.client.clone());
        let put = |value: serde_json::Value| {
            let js = js.clone();
            let space = self.space.clone();
            async move {
                let bytes = crate::manager::canonical_json(&value).map_err(Error::Wire)?;
                let hex = crate::util::sha256_hex(bytes.as_bytes());
                js.publish(crate::manager::artifact_subject(&space, &hex), bytes.into())
                    .await
                    .map_err(store_err)?
                    .await
                    .map_err(store_err)?;
                Ok::<String, Error>(format!("sha256:{hex}"))
            }
        };
        // A closure digest is the digest of the manifest naming the root artifact.
        let closure = |root: String| json!({"v": 1, "root": root, "members": []});
        let mut digests = std::collections::BTreeMap::new();
        let mut commands = Vec::new();
        for c in MANAGER_COMMANDS {
            let mut schema = input_schema(c);
            schema["$comment"] = json!(format!("{c} input r{revision}"));
            let input = put(closure(put(schema).await?)).await?;
            let output = put(closure(
                put(json!({"$comment": format!("{c} output r{revision}")})).await?,
            ))
            .await?;
            commands.push(json!({"name": c, "class": "ephemeral", "targeted": false,
                "capability": "manager", "inputDigest": input, "outputDigest": output}));
            digests.insert(c.to_string(), (input, output));
        }
        let doc = put(json!({"urn": "ai.cotal.lifecycle", "revision": revision,
            "attributes": [], "commands": commands, "events": []}))
        .await?;
        let cluster = put(closure(doc)).await?;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.revision = revision;
        st.cluster_digest = cluster;
        st.digests = digests;
        Ok(())
    }

    /// How many `describe` requests were answered.
    pub fn describes(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .describes
    }
    /// Commands refused for their pins, as `command: code`.
    pub fn refused(&self) -> Vec<String> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .refused
            .clone()
    }
    /// Commands served.
    pub fn served(&self) -> Vec<String> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .served
            .clone()
    }

    pub fn stop(self) {
        self.task.abort();
    }
}

/// The fake's closed input schema for `command`: the calling tool's own schema,
/// except that this manager's `spawn` takes no `variant` and only string-valued
/// `launchOptions` (a manager's contract is narrower than the tool surface).
fn input_schema(command: &str) -> serde_json::Value {
    let tool = match command {
        "define-persona" => "cotal_persona".to_string(),
        "turn-yield" => "cotal_yield".to_string(),
        other => format!("cotal_{other}"),
    };
    let mut s = serde_json::Value::Object(
        crate::tools::spec(&tool)
            .map(|t| t.schema(false))
            .unwrap_or_default(),
    );
    s["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    if command == "spawn" {
        if let Some(p) = s["properties"].as_object_mut() {
            p.remove("variant");
        }
        s["properties"]["launchOptions"] =
            json!({"type": "object", "additionalProperties": {"type": "string"}});
    }
    s
}

fn answer(
    state: &Mutex<ManagerState>,
    space: &str,
    subject: &str,
    payload: &[u8],
) -> (Option<String>, serde_json::Value) {
    // cotal.<space>.ep.one.manager.<command>.<owner>.<actor>.<uid>.<nonce>
    let t: Vec<&str> = subject.split('.').collect();
    if t.len() != 10 {
        return (None, json!(null));
    }
    let reply = format!(
        "cotal.{space}.ep.reply.manager.{MANAGER_INSTANCE}.{MANAGER_EPOCH}.{}.{}.{}.{}",
        t[6], t[7], t[8], t[9]
    );
    let command = t[5];
    let Ok(req) = serde_json::from_slice::<serde_json::Value>(payload) else {
        return (
            Some(reply),
            json!({"v": 1, "id": "?", "ok": false,
            "error": {"code": "bad-request", "message": "not JSON"}}),
        );
    };
    let id = req["id"].clone();
    let refuse = |code: &str, message: String| json!({"v": 1, "id": id, "ok": false, "error": {"code": code, "message": message}});
    let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
    if req["op"]["command"] != json!(command) || req["op"]["endpoint"] != json!("manager") {
        return (
            Some(reply),
            refuse("op-mismatch", "op does not match the subject".into()),
        );
    }
    if command == "describe" {
        if req["op"].get("inputDigest").is_some() || req["op"].get("outputDigest").is_some() {
            return (
                Some(reply),
                refuse("contract-mismatch", "describe pins no contract".into()),
            );
        }
        st.describes += 1;
        let body = json!({"v": 1, "id": id, "ok": true, "data": {"public": false,
            "descriptor": {"endpoint": "manager", "owner": "local",
                "clusters": [{"digest": st.cluster_digest, "commands": MANAGER_COMMANDS}]}}});
        return (Some(reply), body);
    }
    let Some((input, output)) = st.digests.get(command).cloned() else {
        return (
            Some(reply),
            refuse("not-found", format!("no command {command}")),
        );
    };
    if req["op"]["inputDigest"] != json!(input) || req["op"]["outputDigest"] != json!(output) {
        st.refused.push(format!("{command}: contract-mismatch"));
        let msg = match req["op"].get("inputDigest") {
            None => "op.inputDigest is required on every command except describe".to_string(),
            Some(_) => format!("the pinned digests are not revision {}", st.revision),
        };
        return (Some(reply), refuse("contract-mismatch", msg));
    }
    if req["bind"] != json!({"instanceId": MANAGER_INSTANCE, "epoch": MANAGER_EPOCH}) {
        st.refused.push(format!("{command}: failed-precondition"));
        return (
            Some(reply),
            refuse("failed-precondition", "bound to another incarnation".into()),
        );
    }
    st.served.push(command.to_string());
    if command == "despawn" && req["args"]["name"] == json!("ghost") {
        return (Some(reply), refuse("not-found", "no such seat".into()));
    }
    let body =
        json!({"v": 1, "id": id, "ok": true, "data": {"command": command, "args": req["args"]}});
    (Some(reply), body)
}

/// The lifecycle uid the seat tests launch with.
pub const TEST_UID: &str = "abcdefghijklmnopqrstuvwxyz";

/// The `COTAL_*` environment of a test seat `dev/alice` (role reviewer) on `url`, plus `extra`.
pub fn seat_env(url: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    [
        ("COTAL_SPACE", "dev"),
        ("COTAL_NAME", "alice"),
        ("COTAL_ROLE", "reviewer"),
        ("COTAL_SERVERS", url),
        ("COTAL_LIFECYCLE_UID", TEST_UID),
        ("PATH", "/usr/bin:/bin"),
    ]
    .iter()
    .chain(extra)
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Seat options with short retries and polls, so tests do not wait on production bounds.
pub fn fast_seat_options() -> crate::seat::SeatOptions {
    crate::seat::SeatOptions {
        retry_base: Duration::from_millis(200),
        interrupt_timeout: Duration::from_secs(2),
        journal_poll: Duration::from_millis(20),
        ..crate::seat::SeatOptions::default()
    }
}

/// A seat on a runtime of its own, so that [`SeatProc::kill`] is a kill: its runtime is
/// dropped and no cleanup of the seat runs, as when the process dies.
pub struct SeatProc {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    kill: Option<std::sync::mpsc::Sender<()>>,
    done: Option<std::thread::JoinHandle<Result<()>>>,
}

impl SeatProc {
    pub fn start(
        cfg: crate::config::LaunchConfig,
        harness: Scripted,
        opts: crate::seat::SeatOptions,
    ) -> SeatProc {
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (kill_tx, kill_rx) = std::sync::mpsc::channel::<()>();
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| Error::Harness(format!("test runtime: {e}")))?;
            let (res_tx, res_rx) = std::sync::mpsc::channel();
            rt.spawn(async move {
                let r = crate::seat::run(cfg, &harness, opts, async {
                    let _ = stop_rx.await;
                })
                .await;
                let _ = res_tx.send(r);
            });
            loop {
                if let Ok(r) = res_rx.try_recv() {
                    rt.shutdown_background();
                    return r;
                }
                if kill_rx.try_recv().is_ok() {
                    rt.shutdown_background();
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        SeatProc {
            stop: Some(stop_tx),
            kill: Some(kill_tx),
            done: Some(done),
        }
    }

    /// Asks the seat to stop as a shutdown request would, and returns how it ended.
    pub fn shutdown(mut self) -> Result<()> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.join()
    }

    /// Drops the seat's runtime mid-flight.
    pub fn kill(mut self) {
        if let Some(k) = self.kill.take() {
            let _ = k.send(());
        }
        let _ = self.join();
    }

    fn join(&mut self) -> Result<()> {
        match self.done.take().map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(Error::Harness("the seat thread panicked".into())),
            None => Ok(()),
        }
    }
}

/// Polls `f` every 50 ms until it holds; panics naming `what` after `guard` (a deadlock guard,
/// not a timing assertion).
#[allow(clippy::panic)]
pub async fn until<F, Fut>(what: &str, guard: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    use jucode_clock::Clock as _;
    let clock = jucode_clock::SystemClock::new();
    while !f().await {
        if clock.elapsed() >= guard {
            panic!("deadlock guard: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
