//! One seat: the mesh endpoint, its inbox, presence and the loop that drives
//! the agent. [`run`] is the whole seat from launch to shutdown.
//!
//! Order of a launch: connect (no presence yet), start the tool relay, start
//! the harness (which may prove the tools work before joining), then join:
//! presence, durables, live channel subscriptions, the event plane.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use async_nats::jetstream::AckKind;
use async_nats::jetstream::consumer::{self, AckPolicy, DeliverPolicy};
use async_nats::jetstream::message::Acker;
use async_trait::async_trait;
use futures_util::StreamExt;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

use crate::config::LaunchConfig;
use crate::envelope::{self, CotalMessage};
use crate::events::{self, RunHint};
use crate::harness::{Harness, HarnessSignal, Steered, TurnFailure};
use crate::inbox::{self, ChannelMode, Inbox, Item, Kind, Offer};
use crate::mesh::{ACK_WAIT, Mesh};
use crate::presence::{self, Condition, HEARTBEAT, PresenceState, Status};
use crate::relay::{self, McpLaunch};
use crate::runturn::{Ledger, RunTurn};
use crate::subject::{self, Delivery};
use crate::util::now_ms;
use crate::{Error, Result};

mod host_turn;

/// How long a stopping seat tries to remove its presence record.
const LEAVE_LIMIT: Duration = Duration::from_secs(3);
/// How long a stopping seat waits for the AG-UI emitter to wind down.
const EMITTER_STOP_LIMIT: Duration = Duration::from_secs(10);

/// How long one pull request of the open-mode backstop stays at the broker.
const BACKSTOP_PULL: Duration = Duration::from_secs(5);

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

/// The running AG-UI emitter and its stop signal.
type Emitting = (JoinHandle<Result<()>>, tokio::sync::watch::Sender<bool>);

/// What the interrupt task reports, in order, on one channel.
enum SteerEvent {
    /// The request was answered (or given up at its bound); accepted items
    /// stay held until [`SteerEvent::Carried`].
    Answered {
        ids: Vec<String>,
        accepted: std::result::Result<(), TurnFailure>,
    },
    /// The turn that really carried an accepted interrupt ended. `own`: it
    /// was the interrupt's own turn, so its failure is the seat's to retry.
    Carried {
        ids: Vec<String>,
        own: bool,
        res: std::result::Result<(), TurnFailure>,
    },
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

async fn ack_all(acks: Vec<Acker>) {
    for a in acks {
        if let Err(e) = a.ack().await {
            tracing::warn!(error = %e, "ack failed; the message will be redelivered");
        }
    }
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

    /// Bind (authed) or create (open) the directed-mail durables and pump them.
    async fn start_durables(self: Arc<Self>) -> Result<Vec<JoinHandle<()>>> {
        let me = &self.cfg.principal;
        let create = self.cfg.is_open();
        let mut tasks = Vec::new();
        let dm = self
            .mesh
            .durable(
                &self.mesh.names.dm_stream.clone(),
                consumer::pull::Config {
                    durable_name: Some(format!("dm_{}-{}", me.dash(), self.cfg.lifecycle_uid)),
                    filter_subject: format!(
                        "cotal.{}.inst.{}.{}.*.*",
                        self.cfg.space, me.owner, me.actor
                    ),
                    ack_policy: AckPolicy::Explicit,
                    ack_wait: ACK_WAIT,
                    deliver_policy: DeliverPolicy::New,
                    ..Default::default()
                },
                create,
            )
            .await?;
        tasks.push(tokio::spawn(self.clone().pump(dm)));
        if let Some(role) = &self.cfg.role {
            let role = subject::sanitize(role);
            let svc = self
                .mesh
                .durable(
                    &self.mesh.names.task_stream.clone(),
                    consumer::pull::Config {
                        durable_name: Some(format!("svc_{role}")),
                        filter_subject: format!("cotal.{}.svc.{role}.*.*", self.cfg.space),
                        ack_policy: AckPolicy::Explicit,
                        ack_wait: ACK_WAIT,
                        ..Default::default()
                    },
                    create,
                )
                .await?;
            tasks.push(tokio::spawn(self.clone().pump(svc)));
        }
        // Durable channel backstop: provisioned by the delivery daemon in authed
        // modes; in open mode the seat creates its own once it joined channels.
        if create {
            tasks.push(tokio::spawn(self.clone().pump_backstop()));
        } else {
            let name = format!("dlv_{}-{}", me.dash(), self.cfg.lifecycle_uid);
            match self.mesh.js.get_stream(&self.mesh.names.chat_stream).await {
                Ok(stream) => match stream.get_consumer(&name).await {
                    Ok(c) => tasks.push(tokio::spawn(self.clone().pump(c))),
                    Err(e) => {
                        tracing::info!(durable = %name, error = %e, "no durable channel backstop bound")
                    }
                },
                Err(e) => tracing::warn!(error = %e, "chat stream not reachable"),
            }
        }
        Ok(tasks)
    }

    /// The backstop durable's name (`dlv_<owner>-<actor>-<uid>`).
    fn backstop_name(&self) -> String {
        format!(
            "dlv_{}-{}",
            self.cfg.principal.dash(),
            self.cfg.lifecycle_uid
        )
    }

    /// Open mode: create or update our own `dlv_` durable so it covers exactly
    /// the joined channels (removed when none is joined). Authed modes never do this.
    pub(crate) async fn sync_backstop(&self) -> Result<()> {
        if !self.cfg.is_open() {
            return Ok(());
        }
        let name = self.backstop_name();
        let filters: Vec<String> = self
            .state()
            .joined
            .iter()
            .map(|ch| subject::chat_read(&self.cfg.space, ch))
            .collect();
        let stream = &self.mesh.names.chat_stream;
        if filters.is_empty() {
            if let Ok(s) = self.mesh.js.get_stream_no_info(stream).await {
                let _ = s.delete_consumer(&name).await;
            }
            return Ok(());
        }
        let config = consumer::pull::Config {
            durable_name: Some(name.clone()),
            filter_subjects: filters,
            ack_policy: AckPolicy::Explicit,
            ack_wait: ACK_WAIT,
            deliver_policy: DeliverPolicy::New,
            ..Default::default()
        };
        self.mesh
            .js
            .create_consumer_on_stream(config, stream.as_str())
            .await
            .map_err(|e| Error::Mesh(format!("cannot create durable {name}: {e}")))?;
        self.backstop_kick.notify_one();
        Ok(())
    }

    /// Pump the open-mode backstop, binding it by name each round (it is
    /// re-created as channels are joined and left).
    async fn pump_backstop(self: Arc<Self>) {
        let name = self.backstop_name();
        loop {
            let bound = match self
                .mesh
                .js
                .get_stream_no_info(&self.mesh.names.chat_stream)
                .await
            {
                Ok(s) => s.get_consumer::<consumer::pull::Config>(&name).await.ok(),
                Err(_) => None,
            };
            let Some(c) = bound else {
                // No channel joined yet (or the broker is away): wait for a join.
                tokio::select! {
                    _ = self.backstop_kick.notified() => {}
                    _ = tokio::time::sleep(BACKSTOP_PULL) => {}
                }
                continue;
            };
            // Short pull requests: one left behind by a killed seat expires soon,
            // so mail stored right after a crash is not parked until ack_wait.
            if let Ok(mut stream) = c
                .stream()
                .expires(BACKSTOP_PULL)
                .heartbeat(BACKSTOP_PULL / 2)
                .messages()
                .await
            {
                while let Some(Ok(msg)) = stream.next().await {
                    let (m, acker) = msg.split();
                    self.deliver(m.subject.as_str(), &m.payload, Some(acker), false)
                        .await;
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Pull deliveries from one durable forever (the client reconnects underneath).
    async fn pump(self: Arc<Self>, consumer: consumer::Consumer<consumer::pull::Config>) {
        loop {
            match consumer.messages().await {
                Ok(mut stream) => {
                    while let Some(next) = stream.next().await {
                        match next {
                            Ok(msg) => {
                                let (m, acker) = msg.split();
                                self.deliver(m.subject.as_str(), &m.payload, Some(acker), false)
                                    .await;
                            }
                            Err(e) => {
                                tracing::debug!(error = %e, "durable pull error");
                                break;
                            }
                        }
                    }
                }
                Err(e) => tracing::debug!(error = %e, "durable stream failed"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Check one delivery and offer it to the inbox. Malformed, sender-mismatched
    /// and unparsable deliveries are terminated, never redelivered.
    pub(crate) async fn deliver(
        &self,
        subj: &str,
        payload: &[u8],
        ack: Option<Acker>,
        historical: bool,
    ) {
        let checked = match envelope::check(subj, payload) {
            Ok(c) => c,
            Err(reject) => {
                tracing::warn!(subject = %subj, reason = %reject, "terminating a bad delivery");
                if let Some(a) = ack
                    && let Err(e) = a.ack_with(AckKind::Term).await
                {
                    tracing::debug!(error = %e, "term failed");
                }
                return;
            }
        };
        if checked.subject.space != self.cfg.space {
            if let Some(a) = ack {
                let _ = a.ack_with(AckKind::Term).await;
            }
            return;
        }
        if checked.subject.sender == self.cfg.principal {
            // Our own channel traffic coming back.
            if let Some(a) = ack {
                let _ = a.ack().await;
            }
            return;
        }
        let item = self.item_from(&checked.message, &checked.subject.delivery, historical);
        let (offer, evicted) = self.state().inbox.offer(item, ack);
        for e in evicted {
            // Dropped un-acked: directed mail redelivers after ack_wait.
            tracing::info!(id = %e.item.id, "inbox full: evicted un-acked");
        }
        match offer {
            Offer::Accepted(_) => {
                self.kick();
                self.touch_presence();
            }
            Offer::Duplicate { ack_now } | Offer::Dropped { ack_now } => {
                if let Some(a) = ack_now {
                    let _ = a.ack().await;
                }
            }
        }
    }

    fn item_from(&self, msg: &CotalMessage, delivery: &Delivery, historical: bool) -> Item {
        let me = self.cfg.name.to_lowercase();
        let (kind, channel, service) = match delivery {
            Delivery::Channel { channel } => (Kind::Channel, Some(channel.clone()), None),
            Delivery::Direct { .. } => (Kind::Dm, None, None),
            Delivery::Anycast { role } => (Kind::Anycast, None, Some(role.clone())),
        };
        let mentions_me = msg
            .mentions
            .as_ref()
            .is_some_and(|m| m.iter().any(|n| n.to_lowercase() == me));
        Item {
            id: msg.id.clone(),
            ts: msg.ts,
            from_id: msg.from.id.clone(),
            from_name: msg.from.name.clone(),
            from_role: msg.from.role.clone(),
            kind,
            channel,
            service,
            mentions_me,
            historical,
            text: envelope::text_of(msg),
        }
    }

    /// Subscribe a channel live (core subscription) and record the membership.
    pub(crate) async fn join(self: &Arc<Self>, channel: &str) -> Result<()> {
        let ch = subject::sanitize_channel(channel);
        if ch.is_empty() || ch.len() > subject::MAX_CHANNEL_LENGTH {
            return Err(Error::Wire("channel name is empty or too long".into()));
        }
        if self
            .live_subs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&ch)
        {
            return Ok(());
        }
        let mut sub = self
            .mesh
            .client
            .subscribe(subject::chat_read(&self.cfg.space, &ch))
            .await
            .map_err(Error::mesh)?;
        let seat = self.clone();
        let task = tokio::spawn(async move {
            while let Some(m) = sub.next().await {
                seat.deliver(m.subject.as_str(), &m.payload, None, false)
                    .await;
            }
        });
        self.live_subs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(ch.clone(), task);
        self.state().joined.insert(ch);
        if self.state().mesh_ready {
            self.sync_backstop().await?;
        }
        Ok(())
    }

    pub(crate) fn leave(&self, channel: &str) -> bool {
        let ch = subject::sanitize_channel(channel);
        let task = self
            .live_subs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&ch);
        if let Some(t) = &task {
            t.abort();
        }
        self.state().joined.remove(&ch);
        task.is_some()
    }

    /// The driver: start turns, soft-interrupt busy turns, ack after success, retry failures.
    async fn drive(
        self: Arc<Self>,
        harness: Arc<dyn Harness>,
        mut signals: tokio::sync::broadcast::Receiver<HarnessSignal>,
        shutdown: impl std::future::Future<Output = ()>,
        mut emitter: Option<Emitting>,
        mut run_turns: mpsc::UnboundedReceiver<RunTurn>,
    ) -> Result<()> {
        let (turn_tx, mut turn_rx) = mpsc::unbounded_channel::<Result<(), TurnFailure>>();
        let (int_tx, mut int_rx) = mpsc::unbounded_channel::<SteerEvent>();
        tokio::pin!(shutdown);
        loop {
            self.step(&harness, &turn_tx, &int_tx);
            let retry_at = self.state().retry_at;
            tokio::select! {
                _ = &mut shutdown => {
                    if let Some((task, stop)) = emitter.take() {
                        let _ = stop.send(true);
                        match tokio::time::timeout(EMITTER_STOP_LIMIT, task).await {
                            Ok(Ok(Ok(()))) => tracing::info!("AG-UI emitter stopped"),
                            Ok(Ok(Err(e))) => tracing::error!(error = %e, "AG-UI emitter failed"),
                            Ok(Err(e)) => tracing::error!(error = %e, "AG-UI emitter panicked"),
                            Err(_) => tracing::error!("AG-UI emitter did not stop in time"),
                        }
                    }
                    return Ok(());
                }
                _ = self.kick.notified() => {}
                Some(t) = run_turns.recv() => {
                    let id = t.turn.clone();
                    if self.state().runturns.offer(t) {
                        tracing::info!(turn = %id, "workflow run turn offered; it rides the next turn");
                    }
                }
                Some(res) = turn_rx.recv() => self.turn_ended(res).await,
                Some(ev) = int_rx.recv() => self.interrupt_event(ev).await,
                sig = signals.recv() => match sig {
                    Ok(s) => self.on_signal(s).await,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        return Err(Error::Harness("the harness closed its signal channel".into()));
                    }
                },
                _ = async {
                    match retry_at {
                        Some(t) => {
                            let clock = &self.opts.clock;
                            clock.sleep(t.saturating_sub(clock.elapsed())).await
                        }
                        None => std::future::pending().await,
                    }
                } => {
                    self.state().retry_at = None;
                }
                res = async {
                    match emitter.as_mut() {
                        Some((h, _)) => h.await,
                        None => std::future::pending().await,
                    }
                } => {
                    emitter = None;
                    match res {
                        Ok(Ok(())) => tracing::info!("AG-UI emitter stopped"),
                        Ok(Err(e)) => {
                            tracing::error!(error = %e, "AG-UI emitter failed");
                            if self.cfg.events_required {
                                return Err(e);
                            }
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "AG-UI emitter panicked");
                            if self.cfg.events_required {
                                return Err(Error::Events(e.to_string()));
                            }
                        }
                    }
                }
            }
        }
    }

    /// Decide what to do now; spawns the turn or interrupt it starts.
    fn step(
        self: &Arc<Self>,
        harness: &Arc<dyn Harness>,
        turn_tx: &mpsc::UnboundedSender<Result<(), TurnFailure>>,
        int_tx: &mpsc::UnboundedSender<SteerEvent>,
    ) {
        let mut st = self.state();
        if !st.mesh_ready || st.reconnecting {
            return;
        }
        match st.busy {
            Busy::Idle => {
                if st.retry_at.is_some() || !(st.inbox.wants_turn() || st.runturns.wants_send()) {
                    return;
                }
                let (items, mention) = st.inbox.begin_turn();
                // The seat's briefing is in the transcript already (the harness
                // puts it there before readiness): a turn carries only mail.
                let mut text = String::new();
                if !items.is_empty() {
                    text.push_str(&inbox::format_injection(&items));
                }
                if mention {
                    if !items.is_empty() {
                        text.push_str("\n\n");
                    }
                    text.push_str(&inbox::mention_notice(st.inbox.counts().1));
                }
                // Run turns ride this send; shown once the harness accepts it.
                st.sends += 1;
                let send = st.sends;
                if let Some(block) = st.runturns.carry(send) {
                    if !text.is_empty() {
                        text.push_str("\n\n");
                    }
                    text.push_str(&block);
                }
                st.busy = Busy::Ours;
                st.interrupt_failed = false;
                st.presence.condition = None;
                st.presence.set_status(Status::Working, now_ms());
                drop(st);
                self.hint(RunHint::TurnStarted);
                self.touch_presence();
                self.spawn_host_turn(harness.clone(), text, send, turn_tx.clone());
            }
            Busy::Ours | Busy::Foreign => {
                if st.interrupt || st.interrupt_failed || !st.inbox.has_directed() {
                    return;
                }
                let items = st.inbox.take_directed();
                let ids: Vec<String> = items.iter().map(|i| i.id.clone()).collect();
                st.interrupt = true;
                drop(st);
                let text = inbox::format_injection(&items);
                let h = harness.clone();
                let tx = int_tx.clone();
                let limit = self.opts.interrupt_timeout;
                tokio::spawn(async move {
                    let answer = match tokio::time::timeout(limit, h.soft_interrupt(&text)).await {
                        Ok(r) => r,
                        Err(_) => Err(TurnFailure {
                            code: None,
                            message: "soft interrupt timed out".into(),
                        }),
                    };
                    let (result, own) = match answer {
                        Ok(Steered::OwnTurn { result }) => (result, true),
                        Ok(Steered::Joined { result }) => (result, false),
                        Err(f) => {
                            let _ = tx.send(SteerEvent::Answered {
                                ids,
                                accepted: Err(f),
                            });
                            return;
                        }
                    };
                    let _ = tx.send(SteerEvent::Answered {
                        ids: ids.clone(),
                        accepted: Ok(()),
                    });
                    // The turn that really carried the text decides, not the
                    // one that was running when it was sent.
                    let res = result.await.unwrap_or_else(|_| {
                        Err(TurnFailure {
                            code: None,
                            message: "the harness dropped the turn carrying the interrupt".into(),
                        })
                    });
                    let _ = tx.send(SteerEvent::Carried { ids, own, res });
                });
            }
        }
    }

    async fn turn_ended(self: &Arc<Self>, res: Result<(), TurnFailure>) {
        let now = now_ms();
        let acks = {
            let mut st = self.state();
            st.busy = Busy::Idle;
            match &res {
                Ok(()) => {
                    st.failures = 0;
                    st.retry_at = None;
                    st.presence.set_status(Status::Idle, now);
                    st.inbox.finish_turn(true, now)
                }
                Err(f) => {
                    st.inbox.finish_turn(false, now);
                    self.hold_after_failure(&mut st, f, now, true);
                    Vec::new()
                }
            }
        };
        self.hint(RunHint::TurnEnded { ok: res.is_ok() });
        if res.is_ok() {
            self.auto_yield();
        }
        ack_all(acks).await;
        self.touch_presence();
    }

    /// A turn carrying a held batch failed: relay its code, back off, and
    /// after `max_failures` give the queue up un-acked. `idle`: no other turn
    /// runs, so presence shows the wait.
    fn hold_after_failure(&self, st: &mut State, f: &TurnFailure, now: u64, idle: bool) {
        if let Some(code) = &f.code {
            st.presence.condition =
                Some(Condition::from_native(code, Some(f.message.clone()), now));
        }
        st.failures += 1;
        if st.failures >= self.opts.max_failures {
            let n = st.inbox.abandon_queue();
            tracing::error!(
                failures = st.failures,
                dropped = n,
                "giving up on the held batch; it stays un-acked"
            );
            st.failures = 0;
            st.retry_at = None;
            if idle {
                st.presence.set_status(Status::Idle, now);
            }
        } else {
            let factor = 1u32 << (st.failures - 1).min(16);
            let delay = (self.opts.retry_base * factor).min(self.opts.retry_max);
            st.retry_at = Some(self.opts.clock.elapsed() + delay);
            if idle {
                st.presence.set_status(Status::Waiting, now);
            }
            tracing::warn!(error = %f.message, retry_in_ms = delay.as_millis() as u64, "turn failed; batch held un-acked");
        }
    }

    /// A soft interrupt's outcome: its messages are acked only once the turn
    /// that carried them is known to have succeeded.
    async fn interrupt_event(&self, ev: SteerEvent) {
        let now = now_ms();
        let acks = {
            let mut st = self.state();
            match ev {
                SteerEvent::Answered { ids, accepted } => {
                    st.interrupt = false;
                    match accepted {
                        // Held, outside any batch, until the carrying turn ends.
                        Ok(()) => {}
                        Err(f) => {
                            tracing::info!(reason = %f.message, "soft interrupt refused; messages wait for the next turn");
                            st.interrupt_failed = true;
                            st.inbox.return_to_queue(&ids);
                        }
                    }
                    Vec::new()
                }
                SteerEvent::Carried { ids, own, res } => {
                    let acks = st.inbox.settle_steered(&ids, res.is_ok(), now);
                    // A joined turn's failure is that turn's own (its batch or
                    // the TUI's); only an interrupt's own turn backs off here.
                    if own && let Err(f) = &res {
                        let idle = st.busy == Busy::Idle;
                        self.hold_after_failure(&mut st, f, now, idle);
                    }
                    acks
                }
            }
        };
        ack_all(acks).await;
        self.touch_presence();
    }

    async fn on_signal(&self, sig: HarnessSignal) {
        let now = now_ms();
        let mut hint = None;
        let acks = {
            let mut st = self.state();
            let mut acks = Vec::new();
            match sig {
                HarnessSignal::Activity => st.presence.active_at = Some(now),
                HarnessSignal::TurnStarted => {
                    st.presence.condition = None;
                    st.presence.active_at = Some(now);
                    if st.busy == Busy::Idle {
                        st.busy = Busy::Foreign;
                        st.interrupt_failed = false;
                        hint = Some(RunHint::TurnStarted);
                    }
                }
                HarnessSignal::TurnEnded { ok } => {
                    if st.busy == Busy::Foreign {
                        st.busy = Busy::Idle;
                        acks = st.inbox.finish_turn(ok, now);
                        hint = Some(RunHint::TurnEnded { ok });
                    }
                }
                HarnessSignal::Condition { code, message } => {
                    st.presence.condition = Some(Condition::from_native(&code, message, now));
                }
                HarnessSignal::Reconnecting => st.reconnecting = true,
                HarnessSignal::Reconnected => st.reconnecting = false,
            }
            acks
        };
        if let Some(h) = hint {
            self.hint(h);
        }
        ack_all(acks).await;
        self.touch_presence();
        self.kick();
    }

    fn hint(&self, h: RunHint) {
        if let Some(tx) = self.hints.get() {
            let _ = tx.send(h);
        }
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
