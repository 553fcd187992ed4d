//! One seat: the mesh endpoint, its inbox, presence and the loop that drives
//! the agent. [`run`] is the whole seat from launch to shutdown.
//!
//! Order of a launch: connect (no presence yet), start the tool relay, start
//! the harness (which may prove the tools work before joining), then join:
//! presence, durables, live channel subscriptions, the event plane.
//!
//! `delivery` brings mail to the inbox, `drive` runs the turns, `host_turn` a Cotal-owned one.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use async_nats::jetstream::message::Acker;
use async_trait::async_trait;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

use crate::Result;
use crate::config::LaunchConfig;
use crate::events::{self, RunHint};
use crate::harness::Harness;
use crate::inbox::{ChannelMode, Inbox};
use crate::mesh::Mesh;
use crate::presence::{self, HEARTBEAT, PresenceState, Status};
use crate::relay::{self, McpLaunch};
use crate::runturn::{Ledger, RunTurn};
use crate::subject;
use crate::util::now_ms;

mod delivery;
mod drive;
mod host_turn;

/// How long a stopping seat tries to remove its presence record.
const LEAVE_LIMIT: Duration = Duration::from_secs(3);

/// Tunables a test may shorten; the binary uses [`SeatOptions::default`].
#[derive(Debug, Clone)]
pub struct SeatOptions {
    /// First retry delay after a failed turn (doubles each failure).
    pub retry_base: Duration,
    /// Longest retry delay.
    pub retry_max: Duration,
    /// Consecutive failures after which the held batch is given up un-acked.
    pub max_failures: u32,
    /// How long a soft interrupt may take before its messages fall back to the next turn.
    pub interrupt_timeout: Duration,
    /// The command jcode runs for the MCP bridge (`<this binary> mcp-bridge`).
    pub bridge_command: Option<(PathBuf, Vec<String>)>,
    /// How often the event plane polls the journal.
    pub journal_poll: Duration,
    /// Where retry delays are measured (the system's clock outside tests).
    pub clock: jucode_clock::SharedClock,
}

impl Default for SeatOptions {
    fn default() -> Self {
        SeatOptions {
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
            max_failures: 8,
            interrupt_timeout: Duration::from_secs(10),
            bridge_command: None,
            journal_poll: Duration::from_millis(100),
            clock: jucode_clock::SystemClock::shared(),
        }
    }
}

/// What the harness factory gets: the scrubbed environment and the relay launch material.
#[derive(Debug, Clone)]
pub struct HarnessContext {
    pub space: String,
    pub name: String,
    pub role: Option<String>,
    pub model: Option<String>,
    pub variant: Option<String>,
    /// The persona file (`COTAL_AGENT_FILE`), if the seat has one.
    pub agent_file: Option<PathBuf>,
    pub workspace_root: Option<PathBuf>,
    /// `COTAL_JCODE_*` values (jcode home, binary, resume, TUI, prompt).
    pub jcode: std::collections::BTreeMap<String, String>,
    /// The environment for the agent process: no `COTAL_*` value.
    pub agent_env: Vec<(String, String)>,
    /// How jcode reaches the tools: the bridge command and its three variables.
    pub mcp: McpLaunch,
}

/// Starts the agent the seat drives (issue 5: a private jcode instance).
#[async_trait]
pub trait HarnessFactory: Send + Sync {
    async fn start(&self, ctx: HarnessContext) -> Result<Arc<dyn Harness>>;
}

/// Who runs the current turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Busy {
    Idle,
    Ours,
    Foreign,
}

pub(crate) struct State {
    pub inbox: Inbox<Acker>,
    pub presence: PresenceState,
    pub joined: BTreeSet<String>,
    busy: Busy,
    failures: u32,
    /// When the held batch is retried, on the clock's monotonic time.
    retry_at: Option<Duration>,
    /// A soft interrupt request is out and not answered yet.
    interrupt: bool,
    interrupt_failed: bool,
    reconnecting: bool,
    pub mesh_ready: bool,
    /// Workflow run turns the manager handed the seat, riding its own sends.
    pub(crate) runturns: Ledger,
    /// Sends that started a Cotal-owned turn, numbered for the ledger.
    sends: u64,
    /// Shown run turns whose automatic `done` yield is out.
    pub(crate) auto_yielding: BTreeSet<String>,
}

/// The shared seat. Tools and the driver loop both work on it; the mutex is
/// never held across an await.
pub struct Seat {
    pub(crate) cfg: LaunchConfig,
    pub(crate) mesh: Mesh,
    opts: SeatOptions,
    st: Mutex<State>,
    kick: Notify,
    presence_kick: Notify,
    harness: OnceLock<Arc<dyn Harness>>,
    live_subs: Mutex<HashMap<String, JoinHandle<()>>>,
    hints: OnceLock<mpsc::UnboundedSender<RunHint>>,
    started_ms: u64,
    /// Manager calls and the contract digests described for this launch.
    pub(crate) manager: crate::manager::Manager,
    /// Rung when the open-mode backstop durable was (re)created.
    backstop_kick: Notify,
    /// The first presence write landed and the harness was told.
    bound: std::sync::atomic::AtomicBool,
}

/// Run a seat until `shutdown` resolves (control socket, SIGTERM, SIGINT).
pub async fn run(
    cfg: LaunchConfig,
    factory: &dyn HarnessFactory,
    opts: SeatOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    let (stop_tx, mut stop_rx) = mpsc::unbounded_channel();
    let (turn_tx, turn_rx) = mpsc::unbounded_channel();
    // The manager's control socket: a shutdown, or a run turn for the seat.
    let control = match &cfg.control {
        Some(c) => Some(crate::control::serve(c, stop_tx, turn_tx)?),
        None => None,
    };
    let socket = cfg.control.as_ref().map(|c| c.socket.clone());
    let shutdown = async move {
        tokio::select! {
            _ = shutdown => {}
            Some(()) = stop_rx.recv() => tracing::info!("shutdown requested on the control socket"),
        }
    };
    let res = run_seat(cfg, factory, opts, shutdown, turn_rx).await;
    if let Some(t) = control {
        t.abort();
    }
    if let Some(s) = socket {
        let _ = std::fs::remove_file(s);
    }
    res
}

async fn run_seat(
    cfg: LaunchConfig,
    factory: &dyn HarnessFactory,
    opts: SeatOptions,
    shutdown: impl std::future::Future<Output = ()>,
    run_turns: mpsc::UnboundedReceiver<RunTurn>,
) -> Result<()> {
    let mesh = Mesh::connect(&cfg).await?;
    tracing::info!(space = %cfg.space, principal = %cfg.principal.dot(), "connected to the mesh");
    let seat = Seat::new(cfg, mesh, opts);

    let relay = relay::RelayServer::start(seat.clone()).await?;
    let mcp = relay.launch(seat.opts.bridge_command.clone(), &seat.cfg)?;
    let ctx = HarnessContext {
        space: seat.cfg.space.clone(),
        name: seat.cfg.name.clone(),
        role: seat.cfg.role.clone(),
        model: seat.cfg.model.clone(),
        variant: seat.cfg.variant.clone(),
        agent_file: seat.cfg.agent_file.clone(),
        workspace_root: seat.cfg.workspace_root.clone(),
        jcode: seat.cfg.jcode.clone(),
        agent_env: seat.cfg.agent_env.clone(),
        mcp,
    };
    let harness = factory.start(ctx).await?;
    let result = seat
        .clone()
        .serve(harness.clone(), shutdown, run_turns)
        .await;
    harness.shutdown().await;
    relay.stop();
    result
}

impl Seat {
    pub(crate) fn new(cfg: LaunchConfig, mesh: Mesh, opts: SeatOptions) -> Arc<Seat> {
        let now = now_ms();
        let mut inbox = Inbox::default();
        let mut presence = PresenceState::new(now);
        for ch in &cfg.quiet {
            let ch = subject::sanitize_channel(ch);
            inbox.modes.insert(ch.clone(), ChannelMode::Quiet);
            presence.channel_modes.insert(ch, ChannelMode::Quiet);
        }
        for ch in &cfg.muted {
            let ch = subject::sanitize_channel(ch);
            inbox.modes.insert(ch.clone(), ChannelMode::Muted);
            presence.channel_modes.insert(ch, ChannelMode::Muted);
        }
        Arc::new(Seat {
            cfg,
            mesh,
            opts,
            st: Mutex::new(State {
                inbox,
                presence,
                joined: BTreeSet::new(),
                busy: Busy::Idle,
                failures: 0,
                retry_at: None,
                interrupt: false,
                interrupt_failed: false,
                reconnecting: false,
                mesh_ready: false,
                runturns: Ledger::default(),
                sends: 0,
                auto_yielding: BTreeSet::new(),
            }),
            kick: Notify::new(),
            presence_kick: Notify::new(),
            harness: OnceLock::new(),
            live_subs: Mutex::new(HashMap::new()),
            hints: OnceLock::new(),
            started_ms: now,
            manager: crate::manager::Manager::default(),
            backstop_kick: Notify::new(),
            bound: std::sync::atomic::AtomicBool::new(false),
        })
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        // A poisoned lock means a panic elsewhere; the state itself is still usable.
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn touch_presence(&self) {
        self.presence_kick.notify_one();
    }

    pub(crate) fn kick(&self) {
        self.kick.notify_one();
    }

    pub(crate) fn uptime_ms(&self) -> u64 {
        now_ms().saturating_sub(self.started_ms)
    }

    /// Join the mesh and drive the agent until `shutdown`.
    async fn serve(
        self: Arc<Self>,
        harness: Arc<dyn Harness>,
        shutdown: impl std::future::Future<Output = ()>,
        run_turns: mpsc::UnboundedReceiver<RunTurn>,
    ) -> Result<()> {
        let _ = self.harness.set(harness.clone());
        // Subscribed before presence can bind: the startup turn's signals follow the bind.
        let signals = harness.signals();
        if let Some(model) = harness.model_label() {
            self.state().presence.model = Some(model);
        }
        let journal = harness.journal();
        if let Some(j) = &journal {
            self.state().presence.session_id = Some(j.session_id.clone());
        }
        tokio::pin!(shutdown);
        let mut tasks: Vec<JoinHandle<()>> = Vec::new();
        tasks.push(tokio::spawn(self.clone().heartbeat()));
        // A broker outage at join is waited out (no presence, so no bind and
        // no post-join notice); a refusal from a live broker still ends the seat.
        let durables = loop {
            let attempt = tokio::select! {
                _ = &mut shutdown => {
                    for t in tasks {
                        t.abort();
                    }
                    return Ok(());
                }
                r = self.clone().start_durables() => r,
            };
            match attempt {
                Ok(d) => break d,
                Err(e) if !self.mesh.is_connected() => {
                    tracing::warn!(error = %e, "mesh unreachable at join; waiting for the broker");
                    tokio::select! {
                        _ = &mut shutdown => {
                            for t in tasks {
                                t.abort();
                            }
                            return Ok(());
                        }
                        _ = self.until_connected() => {}
                    }
                }
                Err(e) => return Err(e),
            }
        };
        tasks.extend(durables);
        for ch in self.cfg.subscribe.clone() {
            if let Err(e) = self.join(&ch).await {
                tracing::warn!(channel = %ch, error = %e, "cannot join channel");
            }
        }
        if let Err(e) = self.sync_backstop().await {
            tracing::warn!(error = %e, "no durable channel backstop");
        }
        self.state().mesh_ready = true;
        self.touch_presence();

        let mut emitter = None;
        if self.cfg.events {
            match journal {
                Some(source) => {
                    let (tx, rx) = mpsc::unbounded_channel();
                    let _ = self.hints.set(tx);
                    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
                    let em = events::Emitter::open(
                        &self.cfg,
                        self.mesh.clone(),
                        source,
                        self.opts.journal_poll,
                    )?
                    .with_stop(stop_rx);
                    emitter = Some((tokio::spawn(em.run(rx)), stop_tx));
                }
                None => tracing::warn!("COTAL_EVENTS is set but the harness has no journal"),
            }
        }

        let result = self
            .clone()
            .drive(harness.clone(), signals, shutdown, emitter, run_turns)
            .await;
        for t in tasks {
            t.abort();
        }
        for (_, t) in self
            .live_subs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
        {
            t.abort();
        }
        // Leave presence: the record goes away rather than waiting out its TTL.
        // Bounded: during a broker outage there is nobody to tell.
        let leave = async {
            if let Err(e) = self.mesh.presence.delete(self.cfg.principal.dot()).await {
                tracing::debug!(error = %e, "presence delete failed");
            }
            let _ = self.mesh.client.flush().await;
        };
        if tokio::time::timeout(LEAVE_LIMIT, leave).await.is_err() {
            tracing::info!("mesh unreachable at stop; presence expires by its TTL");
        }
        result
    }

    /// Heartbeat every 2 s and on every change.
    async fn heartbeat(self: Arc<Self>) {
        let key = self.cfg.principal.dot();
        loop {
            let rec = {
                let st = self.state();
                if st.mesh_ready {
                    Some(self.presence_record(&st))
                } else {
                    None
                }
            };
            if let Some(rec) = rec {
                let bytes = serde_json::to_vec(&rec).unwrap_or_default();
                match self.mesh.presence.put(&key, bytes.into()).await {
                    Err(e) => tracing::debug!(error = %e, "presence write failed"),
                    Ok(_) if !self.bound.swap(true, std::sync::atomic::Ordering::SeqCst) => {
                        tracing::info!("presence bound");
                        if let Some(h) = self.harness.get() {
                            h.joined();
                        }
                    }
                    Ok(_) => {}
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(HEARTBEAT) => {}
                _ = self.presence_kick.notified() => {}
            }
        }
    }

    /// Resolves once the mesh connection is live again.
    async fn until_connected(&self) {
        while !self.mesh.is_connected() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn presence_record(&self, st: &State) -> serde_json::Value {
        let now = now_ms();
        let mut p = st.presence.clone();
        let (auto, _, flight) = st.inbox.counts();
        // A broker outage is a reconnect too: the seat is up but cannot be reached.
        let status = if st.reconnecting || st.retry_at.is_some() || !self.mesh.is_connected() {
            Status::Waiting
        } else if st.busy != Busy::Idle {
            Status::Working
        } else {
            p.status
        };
        p.set_status(status, now);
        if p.activity.is_none() && auto + flight > 0 {
            let age = st
                .inbox
                .oldest_automatic_ts()
                .map(|ts| (now as f64 - ts).max(0.0) / 1000.0)
                .unwrap_or(0.0);
            p.activity = Some(format!(
                "{} message(s) uncommitted; oldest queued {:.0}s",
                auto + flight,
                age
            ));
            p.activity_since = Some(now);
        }
        p.attention = st.inbox.attention;
        presence::record(&self.cfg, &p, now)
    }

    /// The inbox counts and timing for `cotal_connection_status`.
    pub(crate) fn connection_summary(&self) -> serde_json::Value {
        let st = self.state();
        let (auto, pull, flight) = st.inbox.counts();
        let connected = self.mesh.is_connected();
        let state = if !connected {
            "disconnected"
        } else if !st.mesh_ready {
            "connecting"
        } else if st.retry_at.is_some() || st.reconnecting {
            "degraded"
        } else if auto > 0
            && st.busy == Busy::Idle
            && st
                .inbox
                .oldest_automatic_ts()
                .is_some_and(|ts| (now_ms() as f64 - ts) > 60_000.0)
        {
            "stalled"
        } else {
            "ready"
        };
        serde_json::json!({
            "state": state,
            "automatic": auto,
            "pullOnly": pull,
            "inTurn": flight,
            "lastDrainedAt": st.inbox.last_drained_ms,
            "uptimeMs": self.uptime_ms(),
            "status": self.presence_record(&st)["status"],
        })
    }

    pub(crate) fn harness(&self) -> Option<&Arc<dyn Harness>> {
        self.harness.get()
    }
}
