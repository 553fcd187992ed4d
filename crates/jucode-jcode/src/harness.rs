//! [`JcodeHarness`]: the `jucode_cotal::harness::Harness` the seat drives,
//! backed by the private instance; [`JcodeFactory`] brings it up (private
//! home, credential mirror, `mcp.json`, fork or continuation, model and effort,
//! TUI, readiness proof) and owns the recovery window when the Harness
//! connection closes.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use jucode_cotal::harness::{Harness, HarnessSignal, JournalSource, Steered, TurnFailure};
use jucode_cotal::seat::{HarnessContext, HarnessFactory};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, watch};

use crate::api::{Client, RuntimeInfo};
use crate::home::{ConnectorLog, PrivateHome};
use crate::instance::{Instance, LaunchSpec};
use crate::{Error, Result, creds, fork, home};

/// The bound the connector declares for readiness (`JCODE_READINESS_TIMEOUT_MS`).
pub const READINESS_TIMEOUT: Duration = Duration::from_secs(180);
/// The recovery window after the Harness connection closes.
pub const RECOVERY_WINDOW: Duration = Duration::from_secs(60);
/// How often a message refused with "Already processing" right after a turn is re-sent.
const BUSY_RETRIES: u32 = 50;
/// How long the one readiness repeat waits for jcode to report the cotal MCP
/// server connected (a hint from jcode's own log, not a contract).
pub const MCP_HINT_WAIT: Duration = Duration::from_secs(30);
/// The line jcode logs once the cotal MCP server's tools are registered.
pub const MCP_READY_HINT: &str = "MCP: Connected to 'cotal'";
/// The reap line keeps this many characters.
pub const REAP_LINE_CHARS: usize = 240;
/// The readiness turn.
pub const ORIENTATION_PROMPT: &str = "Call the cotal_orientation tool exactly once now. Do not perform any other work and do not write a response.";
/// The notice delivered after the seat joined.
pub const JOIN_NOTICE: &str = "You have joined the Cotal mesh. The cotal_orientation result you saw before joining predates the join; call cotal_orientation again for the live context.";

/// `COTAL_JCODE_TUI` and the terminal guess.
pub fn tui_mode(value: Option<&str>, stdout_is_terminal: bool) -> Result<bool> {
    match value {
        None | Some("") => Ok(stdout_is_terminal),
        Some("1") | Some("true") | Some("on") | Some("yes") => Ok(true),
        Some("0") | Some("false") | Some("off") | Some("no") => Ok(false),
        Some(other) => Err(Error::Config(format!(
            "COTAL_JCODE_TUI={other:?} is not one of 1, 0, true, false, on, off, yes, no"
        ))),
    }
}

/// `COTAL_JCODE_FRAME_LOG`: the owner-only Harness API frame log (off by default).
pub fn frame_log_wanted(value: Option<&str>) -> Result<bool> {
    match value {
        None | Some("") | Some("0") | Some("false") | Some("off") | Some("no") => Ok(false),
        Some("1") | Some("true") | Some("on") | Some("yes") => Ok(true),
        Some(other) => Err(Error::Config(format!(
            "COTAL_JCODE_FRAME_LOG={other:?} is not one of 1, 0, true, false, on, off, yes, no"
        ))),
    }
}

/// Whether a tool name is the orientation tool (`mcp__cotal__cotal_orientation`).
pub fn is_orientation(name: &str) -> bool {
    name == "cotal_orientation" || name.ends_with("__cotal_orientation")
}

/// What the current turn sees.
#[derive(Debug, Clone)]
enum TurnEv {
    Accepted,
    ToolStart(String),
    ToolDone(String),
    /// `turn_done`, with [`Steering::foreign_starts`] as it stood then.
    Done(u64),
    Failed(String),
    Closed,
}

/// How [`Shared::run_one`] ended.
enum RunEnd {
    /// With [`Steering::foreign_starts`] as it stood at the turn's end.
    Done(u64),
    /// `on_tool` asked to return while the turn still runs.
    Early(mpsc::UnboundedReceiver<TurnEv>),
}

/// Map a failing turn's message to a presence condition code.
fn condition_code(message: &str) -> String {
    let m = message.to_ascii_lowercase();
    if m.contains("rate limit") || m.contains("rate_limit") || m.contains("429") {
        "rate_limit".into()
    } else if m.contains("overloaded") || m.contains("529") {
        "overloaded".into()
    } else if m.contains("unauthorized") || m.contains("401") || m.contains("auth") {
        "auth".into()
    } else {
        "internal".into()
    }
}

/// The outcome a joined interrupt is told once the turn that carried it ended.
type Outcome = std::result::Result<(), TurnFailure>;

/// A soft interrupt jcode accepted, waiting for the turn that carries it.
struct Accepted {
    text: String,
    carried: tokio::sync::oneshot::Sender<Outcome>,
}

/// Soft interrupts of the running turn.
#[derive(Default)]
struct Steering {
    /// Interrupts jcode accepted, not yet tied to the turn that carried them.
    pending: Vec<Accepted>,
    /// Whether a turn is open to take more; closed, under this lock, once
    /// the turn is settled.
    open: bool,
    /// Interrupt requests sent and not yet answered: the turn stays open
    /// until they are decided, so none can miss it.
    in_flight: usize,
    /// A request was abandoned unanswered: clear jcode's queue at settlement.
    abandoned: bool,
    /// Turns the seat did not start (the TUI), counted at their first event.
    /// A settlement compares it with the count at its turn's end: a turn
    /// that began since may have taken the accepted texts from jcode's queue.
    foreign_starts: u64,
    /// A settlement holds accepted texts it took from `pending`.
    deciding: bool,
}

impl Steering {
    /// Nothing is left to decide: the turn can close at once.
    fn idle(&self) -> bool {
        self.pending.is_empty() && self.in_flight == 0 && !self.abandoned && !self.deciding
    }
}

/// Resets [`Steering::deciding`] however a settlement step ends.
struct Deciding<'a>(&'a Mutex<Steering>);

impl Drop for Deciding<'_> {
    fn drop(&mut self) {
        lock(self.0).deciding = false;
    }
}

/// Tell each joined interrupt the outcome of the turn that carried it.
fn tell(carried: Vec<tokio::sync::oneshot::Sender<Outcome>>, res: &Outcome) {
    for tx in carried {
        let _ = tx.send(res.clone());
    }
}

/// One interrupt request in flight; dropping it decides it and wakes the
/// turn's settlement.
struct InFlight<'a> {
    sh: &'a Shared,
    accepted: Option<Accepted>,
    answered: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        {
            let mut g = lock(&self.sh.steering);
            g.in_flight = g.in_flight.saturating_sub(1);
            if let Some(t) = self.accepted.take() {
                g.pending.push(t);
            }
            // Abandoned unanswered: jcode may still have queued it, and the seat
            // carries it again, so that queue is cleared when the turn settles.
            if !self.answered {
                g.abandoned = true;
            }
        }
        self.sh.steering_changed.notify_waiters();
    }
}

/// Everything fixed for one seat's launches.
struct Plan {
    spec: LaunchSpec,
    session_id: String,
    tui: bool,
    prompt: Option<String>,
}

/// One live connection and the tree behind it.
struct Live {
    client: Arc<Client>,
    instance: Option<Instance>,
    tui: Option<tokio::process::Child>,
}

struct Shared {
    plan: Plan,
    log: ConnectorLog,
    live: tokio::sync::Mutex<Option<Live>>,
    turn_lock: Arc<tokio::sync::Mutex<()>>,
    slot: Mutex<Option<mpsc::UnboundedSender<TurnEv>>>,
    foreign: AtomicBool,
    /// Whether a turn runs, as of the last event the pump handled.
    active: AtomicBool,
    /// Streaming events the pump of the current connection handled.
    pumped: std::sync::atomic::AtomicU64,
    /// Raised after every event the pump handled.
    pumped_changed: tokio::sync::Notify,
    /// Steering of the running turn (see [`Steering`]).
    steering: Mutex<Steering>,
    /// Raised whenever an interrupt request in flight is decided.
    steering_changed: tokio::sync::Notify,
    signals: Mutex<Option<broadcast::Sender<HarnessSignal>>>,
    last_turn_error: Mutex<Option<String>>,
    recovered_once: AtomicBool,
    shutting_down: AtomicBool,
    closed_tx: mpsc::UnboundedSender<u64>,
    generation: std::sync::atomic::AtomicU64,
    startup_gate: watch::Sender<bool>,
    startup_armed: AtomicBool,
    model: Option<(String, Option<String>)>,
    fatal: Arc<Mutex<Option<String>>>,
    recovery_window: Duration,
    frames: Option<crate::api::FrameLog>,
    /// Where jcode's own logs stood when this seat's instance launched.
    jcode_logs: home::JcodeLogMark,
    mcp_hint_wait: Duration,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn signal(&self, s: HarnessSignal) {
        if let Some(tx) = lock(&self.signals).as_ref() {
            let _ = tx.send(s);
        }
    }

    /// End the seat: record the line, then close the signal channel.
    fn end_seat(&self, line: String) {
        self.log.line(&line);
        *lock(&self.fatal) = Some(line);
        lock(&self.signals).take();
    }

    fn route(&self, ev: TurnEv) -> bool {
        if let Some(tx) = lock(&self.slot).as_ref() {
            return tx.send(ev).is_ok();
        }
        false
    }

    /// Route the end of our turn and let go of it at once: an event after
    /// it (a TUI turn starting in that instant) is then seen as foreign.
    fn route_end(&self, ev: TurnEv) {
        if let Some(tx) = lock(&self.slot).take() {
            let _ = tx.send(ev);
        }
    }

    /// One streaming event from the bridge.
    fn on_event(self: &Arc<Self>, frame: &Value) {
        let ev = frame["ev"].as_str().unwrap_or_default();
        let str_of = |k: &str| frame[k].as_str().unwrap_or_default().to_string();
        let ours = lock(&self.slot).is_some();
        match ev {
            "message_accepted" | "text_delta" | "reasoning_delta" | "tool_start" | "tool_exec"
            | "tool_input_delta" | "tool_done" | "token_usage" | "reasoning_done" => {
                self.active.store(true, Ordering::SeqCst);
                if !ours && !self.foreign.swap(true, Ordering::SeqCst) {
                    {
                        let mut g = lock(&self.steering);
                        g.open = true;
                        g.foreign_starts += 1;
                    }
                    self.signal(HarnessSignal::TurnStarted);
                }
                if ev != "message_accepted" {
                    self.signal(HarnessSignal::Activity);
                }
                match ev {
                    "message_accepted" => {
                        self.route(TurnEv::Accepted);
                    }
                    "tool_start" => {
                        self.route(TurnEv::ToolStart(str_of("name")));
                    }
                    "tool_done" => {
                        self.route(TurnEv::ToolDone(str_of("name")));
                    }
                    _ => {}
                }
            }
            "turn_done" => {
                self.active.store(false, Ordering::SeqCst);
                if ours {
                    let mark = lock(&self.steering).foreign_starts;
                    self.route_end(TurnEv::Done(mark));
                } else if self.foreign.swap(false, Ordering::SeqCst) {
                    *lock(&self.last_turn_error) = None;
                    let (settled, mark) = {
                        let mut g = lock(&self.steering);
                        let settled = g.idle();
                        if settled {
                            g.open = false;
                        }
                        (settled, g.foreign_starts)
                    };
                    if settled {
                        self.signal(HarnessSignal::TurnEnded { ok: true });
                    } else {
                        // Interrupts the TUI's turn carried are decided by it;
                        // those that missed (or may miss) it run before it
                        // counts as ended.
                        let me = self.clone();
                        tokio::spawn(async move {
                            let _guard = me.turn_lock.clone().lock_owned().await;
                            let mut carried = Vec::new();
                            let res = match me.client().await {
                                Some(c) => me.settle(&c, mark, &mut carried).await,
                                None => Err(TurnFailure {
                                    code: None,
                                    message: "the private jcode is reconnecting".into(),
                                }),
                            };
                            tell(carried, &res);
                            me.signal(HarnessSignal::TurnEnded { ok: res.is_ok() });
                        });
                    }
                }
            }
            "error" => {
                // A failing turn: an unsolicited error and no turn_done.
                self.active.store(false, Ordering::SeqCst);
                let message = str_of("message");
                self.log.private(&format!("harness error frame: {message}"));
                // A send refused in the gap after turn_done is re-sent, not a condition.
                if !(ours && message.contains("Already processing")) {
                    *lock(&self.last_turn_error) = Some(message.clone());
                    self.signal(HarnessSignal::Condition {
                        code: condition_code(&message),
                        message: None,
                    });
                }
                if ours {
                    self.route_end(TurnEv::Failed(message));
                } else if self.foreign.swap(false, Ordering::SeqCst) {
                    let settled = {
                        let mut g = lock(&self.steering);
                        let settled = g.idle();
                        if settled {
                            g.open = false;
                        }
                        settled
                    };
                    if settled {
                        self.signal(HarnessSignal::TurnEnded { ok: false });
                    } else {
                        // Interrupts this failed TUI turn may have carried fail with it.
                        let me = self.clone();
                        let failure = TurnFailure {
                            code: Some(condition_code(&message)),
                            message,
                        };
                        tokio::spawn(async move {
                            let _guard = me.turn_lock.clone().lock_owned().await;
                            me.fail_steering(&failure).await;
                            me.signal(HarnessSignal::TurnEnded { ok: false });
                        });
                    }
                }
            }
            _ => {}
        }
    }

    /// Wait until the pump handled `n` events of this connection
    /// (deadlock-guarded: a connection replaced meanwhile restarts the count).
    async fn until_pumped(&self, n: u64) {
        let deadline = tokio::time::Instant::now() + crate::api::REQUEST_TIMEOUT;
        loop {
            let changed = self.pumped_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.pumped.load(Ordering::SeqCst) >= n {
                return;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return;
            }
        }
    }

    async fn client(&self) -> Option<Arc<Client>> {
        self.live.lock().await.as_ref().map(|l| l.client.clone())
    }

    /// Run one turn to its end, handing tool events to `on_tool`. Returns
    /// early (leaving the rest of the turn to a drain task that keeps the turn
    /// lock) when `on_tool` says so. Soft interrupts jcode accepted but did not
    /// inject before the turn ended run as a follow-up turn under the same lock.
    async fn turn(
        self: &Arc<Self>,
        text: &str,
        mut on_tool: impl FnMut(&TurnEv) -> bool + Send,
    ) -> std::result::Result<bool, TurnFailure> {
        let guard = self.turn_lock.clone().lock_owned().await;
        let Some(client) = self.client().await else {
            return Err(TurnFailure {
                code: None,
                message: "the private jcode is reconnecting".into(),
            });
        };
        let mut carried = Vec::new();
        let res = match self.run_one(&client, text, &mut on_tool).await {
            Ok(RunEnd::Early(mut rx)) => {
                let me = self.clone();
                tokio::spawn(async move {
                    let _guard = guard;
                    while let Some(ev) = rx.recv().await {
                        if matches!(ev, TurnEv::Done(_) | TurnEv::Failed(_) | TurnEv::Closed) {
                            break;
                        }
                    }
                    lock(&me.slot).take();
                    let mut g = lock(&me.steering);
                    if g.pending.is_empty() && g.in_flight == 0 {
                        g.open = false;
                    }
                });
                return Ok(true);
            }
            Ok(RunEnd::Done(mark)) => self
                .settle(&client, mark, &mut carried)
                .await
                .map(|()| false),
            Err(f) => {
                self.fail_steering(&f).await;
                Err(f)
            }
        };
        // Interrupts this turn (or its follow-up) carried end with it.
        tell(carried, &res.clone().map(drop));
        drop(guard);
        match &res {
            Ok(_) => *lock(&self.last_turn_error) = None,
            Err(f) => *lock(&self.last_turn_error) = Some(f.message.clone()),
        }
        res
    }

    /// Wait (deadlock-guarded) until no interrupt request is on the wire.
    /// Returns with the steering lock's view at that moment via `decide`.
    async fn when_answered<T>(&self, mut decide: impl FnMut(&mut Steering) -> T) -> T {
        loop {
            let changed = self.steering_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut g = lock(&self.steering);
                if g.in_flight == 0 {
                    return decide(&mut g);
                }
            }
            // Each request is bounded by REQUEST_TIMEOUT; this is a deadlock guard.
            let _ = tokio::time::timeout(crate::api::REQUEST_TIMEOUT, changed).await;
        }
    }

    /// The turn that would carry the accepted interrupts failed: they fail
    /// with it, and jcode's queue, which may still hold them, is cleared
    /// because the seat carries them again.
    async fn fail_steering(&self, failure: &TurnFailure) {
        let (left, clear) = self
            .when_answered(|g| {
                g.open = false;
                let clear = g.abandoned || !g.pending.is_empty();
                g.abandoned = false;
                (std::mem::take(&mut g.pending), clear)
            })
            .await;
        if clear && let Some(c) = self.client().await {
            // Best effort: the connection may be what failed.
            let _ = c.cancel_soft_interrupts(&self.plan.session_id).await;
        }
        tell(
            left.into_iter().map(|a| a.carried).collect(),
            &Err(failure.clone()),
        );
    }

    /// Decide the interrupts accepted while the turn that ended (with
    /// `mark`, see [`TurnEv::Done`]) was open. Those in the transcript were
    /// injected into it; those absent are still queued in jcode (≤ 0.79.1
    /// injects only inside a running turn): that queue is cancelled and they
    /// run as a follow-up turn. Either way they go to `carried`, to be told
    /// the turn's outcome. When a turn the seat did not start (the TUI) began
    /// since, it may have taken them from jcode's queue, so they are left for
    /// that turn's end to decide.
    async fn settle(
        self: &Arc<Self>,
        client: &Client,
        mut mark: u64,
        carried: &mut Vec<tokio::sync::oneshot::Sender<Outcome>>,
    ) -> std::result::Result<(), TurnFailure> {
        let sid = &self.plan.session_id;
        let fail = |e: Error| TurnFailure {
            code: None,
            message: e.to_string(),
        };
        enum Next {
            Done,
            Clear,
            Decide(Vec<Accepted>),
        }
        loop {
            // An interrupt still on the wire joins this turn: wait for its answer.
            let next = self
                .when_answered(|g| {
                    if g.abandoned {
                        g.abandoned = false;
                        Next::Clear
                    } else if g.pending.is_empty() {
                        g.open = false;
                        Next::Done
                    } else if g.foreign_starts != mark {
                        // Left pending (and the turn open) for the TUI turn's end.
                        Next::Done
                    } else {
                        g.deciding = true;
                        Next::Decide(std::mem::take(&mut g.pending))
                    }
                })
                .await;
            let taken = match next {
                Next::Done => return Ok(()),
                Next::Clear => {
                    client.cancel_soft_interrupts(sid).await.map_err(fail)?;
                    continue;
                }
                Next::Decide(taken) => taken,
            };
            let _deciding = Deciding(&self.steering);
            let history = client.history(sid).await.map_err(fail)?;
            {
                // A TUI turn that began while the transcript was read may
                // have taken them: its end decides instead.
                let mut g = lock(&self.steering);
                if g.foreign_starts != mark {
                    let later = std::mem::take(&mut g.pending);
                    g.pending = taken;
                    g.pending.extend(later);
                    return Ok(());
                }
            }
            let (present, missing): (Vec<Accepted>, Vec<Accepted>) =
                taken.into_iter().partition(|a| {
                    history
                        .iter()
                        .any(|(r, c)| r == "user" && c.contains(a.text.as_str()))
                });
            carried.extend(present.into_iter().map(|a| a.carried));
            if missing.is_empty() {
                continue;
            }
            client.cancel_soft_interrupts(sid).await.map_err(fail)?;
            self.log.line(&format!(
                "{} soft interrupt(s) arrived as the turn ended; running them as a follow-up turn",
                missing.len()
            ));
            let text = missing
                .iter()
                .map(|a| a.text.as_str())
                .collect::<Vec<_>>()
                .join("\n\n");
            carried.extend(missing.into_iter().map(|a| a.carried));
            match self.run_one(client, &text, &mut |_| false).await {
                Ok(RunEnd::Done(m)) => mark = m,
                Ok(RunEnd::Early(_)) => return Ok(()),
                Err(f) => {
                    drop(_deciding);
                    self.fail_steering(&f).await;
                    return Err(f);
                }
            }
        }
    }

    /// Send one message and follow its events to the end of the turn.
    async fn run_one(
        self: &Arc<Self>,
        client: &Client,
        text: &str,
        on_tool: &mut (dyn FnMut(&TurnEv) -> bool + Send),
    ) -> std::result::Result<RunEnd, TurnFailure> {
        lock(&self.steering).open = true;
        self.foreign.store(false, Ordering::SeqCst);
        let mut busy_retries = 0u32;
        let res = 'send: loop {
            // The pump lets go of the slot at the turn's end (or refusal).
            let (tx, mut rx) = mpsc::unbounded_channel();
            *lock(&self.slot) = Some(tx);
            let refusal = client
                .send_message(&self.plan.session_id, text)
                .await
                .map_err(|e| TurnFailure {
                    code: None,
                    message: e.to_string(),
                });
            let mut refusal = match refusal {
                Ok(r) => r,
                Err(f) => break Err(f),
            };
            let mut refusal_open = true;
            let mut progressed = false;
            break loop {
                tokio::select! {
                    ev = rx.recv() => match ev {
                        Some(TurnEv::Done(mark)) => break Ok(RunEnd::Done(mark)),
                        Some(TurnEv::Failed(m)) => {
                            // jcode reports turn_done a moment before its processing
                            // task lets go; a message sent in that gap is acked
                            // (message_accepted), then refused without being run, and
                            // can simply be sent again. Once the turn streamed tools
                            // it is running, and an error is a real failure.
                            if !progressed && m.contains("Already processing") && busy_retries < BUSY_RETRIES {
                                busy_retries += 1;
                                tokio::time::sleep(Duration::from_millis(100)).await;
                                continue 'send;
                            }
                            break Err(TurnFailure { code: Some(condition_code(&m)), message: m });
                        }
                        Some(TurnEv::Closed) | None => break Err(TurnFailure { code: None, message: "the Harness connection closed during the turn".into() }),
                        Some(TurnEv::Accepted) => {}
                        Some(ev) => {
                            progressed = true;
                            if on_tool(&ev) {
                                return Ok(RunEnd::Early(rx));
                            }
                        }
                    },
                    r = &mut refusal, if refusal_open => match r {
                        Ok(reply) => {
                            refusal_open = false;
                            if let Err(e) = crate::api::check_reply("send_message", reply.frame) {
                                break Err(TurnFailure { code: None, message: e.to_string() });
                            }
                        }
                        // The reply channel closes with the connection; the event side reports it.
                        Err(_) => refusal_open = false,
                    },
                }
            };
        };
        lock(&self.slot).take();
        res
    }

    /// The pump of one connection: events in order; the close is reported once.
    fn spawn_pump(self: &Arc<Self>, mut rx: mpsc::UnboundedReceiver<Value>, generation: u64) {
        let me = self.clone();
        self.active.store(false, Ordering::SeqCst);
        self.pumped.store(0, Ordering::SeqCst);
        tokio::spawn(async move {
            while let Some(frame) = rx.recv().await {
                me.on_event(&frame);
                me.pumped.fetch_add(1, Ordering::SeqCst);
                me.pumped_changed.notify_waiters();
            }
            if me.route(TurnEv::Closed) {
                *lock(&me.last_turn_error) =
                    Some("the Harness connection closed during the turn".into());
            }
            let _ = me.closed_tx.send(generation);
        });
    }

    /// Launch, connect and attach the planned session.
    async fn bring_up(self: &Arc<Self>) -> Result<(Instance, Arc<Client>)> {
        let inst = Instance::launch(&self.plan.spec).await?;
        let res = async {
            let label = self.generation.load(Ordering::SeqCst) + 1;
            let (client, rx) = Client::connect_logged(
                &self.plan.spec.home.api_socket(),
                "jucode-cotal-jcode/0.1",
                self.frames.as_ref().map(|f| f.for_conn(label.to_string())),
            )
            .await?;
            client.attach_session(&self.plan.session_id).await?;
            Ok::<_, Error>((client, rx))
        }
        .await;
        match res {
            Ok((client, rx)) => {
                let g = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
                self.spawn_pump(rx, g);
                Ok((inst, Arc::new(client)))
            }
            Err(e) => {
                inst.stop().await?;
                Err(e)
            }
        }
    }

    /// The supervisor: a closed connection opens one bounded recovery window.
    async fn supervise(self: Arc<Self>, mut closed: mpsc::UnboundedReceiver<u64>) {
        while let Some(generation) = closed.recv().await {
            if self.shutting_down.load(Ordering::SeqCst)
                || generation != self.generation.load(Ordering::SeqCst)
            {
                continue;
            }
            let started = tokio::time::Instant::now();
            let deadline = started + self.recovery_window;
            self.log
                .line("the private Harness connection closed; opening the recovery window");
            if self.recovered_once.swap(true, Ordering::SeqCst) {
                let mut line =
                    self.ending_line("a second disconnect after a successful replacement");
                if let Err(e) = self.stop_live().await {
                    line =
                        self.ending_line(&format!("second disconnect; unprovable teardown: {e}"));
                }
                self.end_seat(line);
                return;
            }
            self.signal(HarnessSignal::Reconnecting);
            let mut recovery_error;
            // Stopping the broken tree counts against the window.
            if let Err(e) = self.stop_live().await {
                let line = self.ending_line(&format!("unprovable teardown: {e}"));
                self.end_seat(line);
                return;
            }
            let mut attempt = 0u32;
            loop {
                attempt += 1;
                let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
                if remaining.is_zero() {
                    recovery_error = "the recovery window expired".to_string();
                    break;
                }
                match tokio::time::timeout(remaining, self.bring_up()).await {
                    Ok(Ok((inst, client))) => {
                        if self.shutting_down.load(Ordering::SeqCst) {
                            let _ = inst.stop().await;
                            return;
                        }
                        *self.live.lock().await = Some(Live {
                            client,
                            instance: Some(inst),
                            tui: None,
                        });
                        self.log.line(&format!(
                            "private Harness connection replaced (attempt {attempt}); session {} reattached",
                            self.plan.session_id
                        ));
                        self.signal(HarnessSignal::Reconnected);
                        recovery_error = String::new();
                        break;
                    }
                    Ok(Err(e)) => {
                        recovery_error = format!("{} ({})", e.code(), e);
                        self.log
                            .private(&format!("replacement attempt {attempt} failed: {e}"));
                        if e.is_permanent() {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    Err(_) => {
                        recovery_error = "the recovery window expired".to_string();
                        break;
                    }
                }
            }
            if !recovery_error.is_empty() {
                let line = self.ending_line(&recovery_error);
                self.end_seat(line);
                return;
            }
        }
    }

    /// The ending line: `last turn error:` first, then `recovery error:`, within 240 chars.
    fn ending_line(&self, recovery: &str) -> String {
        let mut line = String::from("private jcode lost");
        if let Some(e) = lock(&self.last_turn_error).as_ref() {
            let e: String = e.chars().take(120).collect();
            line.push_str(&format!("; last turn error: {e}"));
        }
        line.push_str(&format!("; recovery error: {recovery}"));
        line.chars().take(REAP_LINE_CHARS).collect()
    }

    async fn stop_live(&self) -> Result<()> {
        let live = self.live.lock().await.take();
        let Some(mut live) = live else { return Ok(()) };
        if let Some(mut tui) = live.tui.take() {
            if let Some(pid) = tui.id() {
                let _ = crate::instance::stop_pids(&[pid]).await;
            }
            let _ = tui.wait().await;
        }
        drop(live.client);
        match live.instance.take() {
            Some(inst) => inst.stop().await,
            None => Ok(()),
        }
    }

    /// After the seat joined: the notice, and the spawn `--prompt` if any.
    async fn startup_turns(self: Arc<Self>) {
        let sid = self.plan.session_id.clone();
        let prompt = self.plan.prompt.clone();
        let first = match &prompt {
            Some(p) => {
                if let Some(c) = self.client().await
                    && let Err(e) = c.send_no_reply(&sid, JOIN_NOTICE).await
                {
                    self.log
                        .line(&format!("post-join notice refused: {}", e.code()));
                    self.log.private(&format!("post-join notice: {e}"));
                }
                self.log.line("submitting the spawn --prompt");
                p.clone()
            }
            None => JOIN_NOTICE.to_string(),
        };
        // Driven as a turn the seat sees as busy; consumed once, never retried.
        self.signal(HarnessSignal::TurnStarted);
        let res = self.turn(&first, |_| false).await;
        // send_replace: `send` drops the value while no receiver exists, and a
        // turn that comes later would then wait on the gate forever.
        self.startup_gate.send_replace(true);
        if let Err(f) = &res {
            self.log.line("the startup turn failed; it is not retried");
            self.log.private(&format!("startup turn: {}", f.message));
        }
        self.signal(HarnessSignal::TurnEnded { ok: res.is_ok() });
    }

    /// Wait (bounded) until jcode's log shows the cotal MCP server connected.
    async fn wait_for_mcp_hint(&self) -> bool {
        let deadline = tokio::time::Instant::now() + self.mcp_hint_wait;
        loop {
            if self.jcode_logs.appended_contains(MCP_READY_HINT) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The readiness proof: call cotal_orientation; once more if jcode's first
    /// turn used its pre-MCP tool snapshot; the bound covers both.
    async fn readiness(self: &Arc<Self>, bound: Duration) -> Result<()> {
        self.log.line(&format!(
            "pre-join readiness: orientation proof in flight (bound {}s)",
            bound.as_secs()
        ));
        let observed = Arc::new(AtomicBool::new(false));
        let proof = async {
            for attempt in 1..=2 {
                let obs = observed.clone();
                let res = self
                    .turn(ORIENTATION_PROMPT, |ev| match ev {
                        TurnEv::ToolStart(n) if is_orientation(n) => {
                            obs.store(true, Ordering::SeqCst);
                            false
                        }
                        TurnEv::ToolDone(n) => is_orientation(n),
                        _ => false,
                    })
                    .await;
                match res {
                    Ok(true) => return Ok(()),
                    Ok(false) => {
                        self.log.private(&format!(
                            "orientation attempt {attempt}: the turn ended without cotal_orientation (tool snapshot predates MCP?)"
                        ));
                        if attempt == 1 {
                            // On a loaded host the MCP server can come up after the
                            // second turn too: pace the one repeat on jcode saying so.
                            let seen = self.wait_for_mcp_hint().await;
                            self.log.private(&format!(
                                "repeating the proof; jcode {} the cotal MCP server connected",
                                if seen {
                                    "reported"
                                } else {
                                    "did not report (within the wait)"
                                }
                            ));
                        }
                    }
                    Err(f) => {
                        self.log
                            .private(&format!("readiness turn failed: {}", f.message));
                        return Err(Error::ProviderRefused(
                            f.code.unwrap_or_else(|| "internal".into()),
                        ));
                    }
                }
            }
            Err(Error::Readiness(
                "cotal_orientation was absent from two readiness turns; the cotal MCP bridge never came up"
                    .into(),
            ))
        };
        let res = match tokio::time::timeout(bound, proof).await {
            Ok(r) => r,
            Err(_) => Err(Error::ReadinessTimeout {
                observed: observed.load(Ordering::SeqCst),
            }),
        };
        match &res {
            Ok(()) => self.log.line(if self.plan.prompt.is_some() {
                "readiness: orientation proved; joining, then submitting the spawn --prompt"
            } else {
                "readiness: orientation proved; joining with no spawn --prompt"
            }),
            Err(Error::ProviderRefused(code)) => self
                .log
                .line(&format!("readiness: provider refusal ({code})")),
            Err(Error::ReadinessTimeout { observed }) => self.log.line(&format!(
                "readiness: timeout after {}s (orientation call observed: {observed})",
                bound.as_secs()
            )),
            Err(e) => self.log.line(&format!("readiness: failed ({})", e.code())),
        }
        res
    }
}

/// The harness the seat drives.
pub struct JcodeHarness {
    shared: Arc<Shared>,
}

#[async_trait]
impl Harness for JcodeHarness {
    async fn send_turn(&self, text: &str) -> std::result::Result<(), TurnFailure> {
        let mut gate = self.shared.startup_gate.subscribe();
        let _ = gate.wait_for(|done| *done).await;
        self.shared.turn(text, |_| false).await.map(drop)
    }

    async fn soft_interrupt(&self, text: &str) -> std::result::Result<Steered, TurnFailure> {
        let fail = |m: String| TurnFailure {
            code: None,
            message: m,
        };
        let sh = &self.shared;
        let client = sh
            .client()
            .await
            .ok_or_else(|| fail("the private jcode is reconnecting".into()))?;
        // Joined to the open turn, which now stays open until this is decided.
        let joined = {
            let mut g = lock(&sh.steering);
            if g.open {
                g.in_flight += 1;
            }
            g.open
        };
        if !joined {
            // No turn is open (it ended as the seat sent this): jcode ≤ 0.79.1
            // would only queue it, so it starts its own turn, as jcode's later
            // `turn_start` injection point does. Never sent to jcode's queue.
            sh.log.line(
                "a steering message arrived after the turn ended; running it as its own turn",
            );
            let me = sh.clone();
            let text = text.to_string();
            // The seat acks the text's messages only on this turn's result.
            let (tx, rx) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                me.signal(HarnessSignal::TurnStarted);
                let res = me.turn(&text, |_| false).await;
                if let Err(f) = &res {
                    me.log.private(&format!("steering turn: {}", f.message));
                }
                me.signal(HarnessSignal::TurnEnded { ok: res.is_ok() });
                let _ = tx.send(res.map(drop));
            });
            return Ok(Steered::OwnTurn { result: rx });
        }
        // Decided when dropped, also if the seat gives up on this call mid-request.
        let mut guard = InFlight {
            sh,
            accepted: None,
            answered: false,
        };
        let res = client
            .soft_interrupt(&sh.plan.session_id, text, false)
            .await
            .map_err(|e| fail(e.to_string()));
        guard.answered = true;
        let reply = res?;
        // Decide only once the pump has seen every event that came before
        // the answer: a TUI turn that began meanwhile must be counted first.
        sh.until_pumped(reply.events_before).await;
        // Settled when the turn that carried it ends: injected, run as a
        // follow-up, or taken by a TUI turn that began as that one ended.
        let (tx, rx) = tokio::sync::oneshot::channel();
        guard.accepted = Some(Accepted {
            text: text.to_string(),
            carried: tx,
        });
        drop(guard);
        Ok(Steered::Joined { result: rx })
    }

    fn signals(&self) -> broadcast::Receiver<HarnessSignal> {
        let rx = match lock(&self.shared.signals).as_ref() {
            Some(tx) => tx.subscribe(),
            None => broadcast::channel(1).1,
        };
        // The seat subscribes once it joined: the startup turn runs now.
        if !self.shared.startup_armed.swap(true, Ordering::SeqCst) {
            tokio::spawn(self.shared.clone().startup_turns());
        }
        rx
    }

    fn journal(&self) -> Option<JournalSource> {
        Some(JournalSource {
            sessions_dir: self.shared.plan.spec.home.sessions_dir(),
            session_id: self.shared.plan.session_id.clone(),
        })
    }

    fn model_label(&self) -> Option<(String, Option<String>)> {
        self.shared.model.clone()
    }

    async fn shutdown(&self) {
        self.shared.shutting_down.store(true, Ordering::SeqCst);
        if let Some(c) = self.shared.client().await {
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                c.detach(&self.shared.plan.session_id),
            )
            .await;
        }
        match self.shared.stop_live().await {
            Ok(()) => {
                self.shared.log.line("private jcode tree stopped");
                self.shared.plan.spec.home.drop_alias();
            }
            Err(e) => {
                let line = format!("private jcode teardown failed: {e}");
                self.shared.log.line(&line);
                *lock(&self.shared.fatal) = Some(line);
            }
        }
    }
}

/// Starts [`JcodeHarness`]es; remembers the line that ended the seat.
#[derive(Default, Clone)]
pub struct JcodeFactory {
    pub fatal: Arc<Mutex<Option<String>>>,
    /// Test override of the recovery window.
    pub recovery_window: Option<Duration>,
    /// Test override of the seat's working directory (default: the process cwd).
    pub working_dir: Option<PathBuf>,
    /// Test override of [`MCP_HINT_WAIT`].
    pub mcp_hint_wait: Option<Duration>,
}

impl JcodeFactory {
    /// The line that ended the seat (startup failure, lost recovery, failed teardown).
    pub fn fatal_line(&self) -> Option<String> {
        lock(&self.fatal).clone()
    }
}

fn env_get(env: &[(String, String)], k: &str) -> Option<String> {
    env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
}

#[async_trait]
impl HarnessFactory for JcodeFactory {
    async fn start(&self, ctx: HarnessContext) -> jucode_cotal::Result<Arc<dyn Harness>> {
        match start(self, ctx).await {
            Ok(h) => Ok(h),
            Err((e, log)) => {
                log.private(&format!("startup failed: {e}"));
                let public = format!(
                    "Jcode host startup failed ({}); inspect the private Jcode logs.",
                    e.code()
                );
                *lock(&self.fatal) = Some(public.clone());
                Err(jucode_cotal::Error::Harness(public))
            }
        }
    }
}

async fn start(
    factory: &JcodeFactory,
    ctx: HarnessContext,
) -> std::result::Result<Arc<dyn Harness>, (Error, ConnectorLog)> {
    let early = |e: Error| (e, ConnectorLog::stderr_only());
    let j = |k: &str| ctx.jcode.get(k).cloned().filter(|v| !v.is_empty());
    let working_dir = match &factory.working_dir {
        Some(w) => w.clone(),
        None => std::env::current_dir().map_err(|e| early(Error::io(".", e)))?,
    };
    use std::io::IsTerminal;
    let tui = tui_mode(
        j("COTAL_JCODE_TUI").as_deref(),
        std::io::stdout().is_terminal(),
    )
    .map_err(early)?;
    home::refuse_project_mcp(&working_dir).map_err(early)?;
    let workspace = j("COTAL_JCODE_HOME")
        .map(PathBuf::from)
        .or_else(|| ctx.workspace_root.clone())
        .unwrap_or_else(|| working_dir.clone());
    if workspace != working_dir {
        home::refuse_project_mcp(&workspace).map_err(early)?;
    }
    let home = PrivateHome::prepare(&workspace, &ctx.space, &ctx.name).map_err(early)?;
    let log = ConnectorLog::open(&home);
    macro_rules! tryl {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => return Err((e, log)),
            }
        };
    }
    let bound = match j("COTAL_JCODE_READINESS_TIMEOUT_MS") {
        Some(ms) => Duration::from_millis(tryl!(ms.parse::<u64>().map_err(|_| Error::Config(
            "COTAL_JCODE_READINESS_TIMEOUT_MS is not a number".into()
        )))),
        None => READINESS_TIMEOUT,
    };
    let frames = if tryl!(frame_log_wanted(j("COTAL_JCODE_FRAME_LOG").as_deref())) {
        let ts = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
        let path = home
            .root
            .join("logs")
            .join(format!("harness-frames-{ts}-{}.jsonl", std::process::id()));
        let f = tryl!(crate::api::FrameLog::open(&path));
        log.private(&format!("Harness API frames: {}", path.display()));
        Some(f)
    } else {
        None
    };

    // Credentials: the operator's current logins, refreshed every launch.
    let op_home = fork::operator_home(&ctx.agent_env, None);
    let user_home = env_get(&ctx.agent_env, "HOME").map(PathBuf::from);
    if let Some(op) = &op_home {
        if op == &home.root {
            return Err((
                Error::PrivateState("the operator's jcode home is the private home".into()),
                log,
            ));
        }
        let app_config = env_get(&ctx.agent_env, "XDG_CONFIG_HOME")
            .map(|x| PathBuf::from(x).join("jcode"))
            .or_else(|| user_home.as_ref().map(|h| h.join(".config").join("jcode")));
        let src = creds::Sources {
            jcode_home: op.clone(),
            app_config,
            user_home: user_home.clone(),
        };
        let report = tryl!(creds::mirror(
            &home.root,
            &creds::inventory(&src, &home.root)
        ));
        log.private(&format!(
            "credential mirror: {} copied, {} removed",
            report.copied.len(),
            report.removed.len()
        ));
    }
    // Only the connector's own cotal entry.
    let mcp = tryl!(
        serde_json::to_vec_pretty(&ctx.mcp.mcp_json())
            .map_err(|e| Error::PrivateState(e.to_string()))
    );
    tryl!(home.write_private("mcp.json", &mcp));
    tryl!(home.check_sessions_writable());

    let mut fork_session = None;
    if let Some(src) = j("COTAL_JCODE_RESUME") {
        let src_home = fork::operator_home(&ctx.agent_env, j("COTAL_JCODE_RESUME_HOME").as_deref())
            .ok_or_else(|| Error::Resume("no operator jcode home to fork from".into()));
        let src_home = tryl!(src_home);
        let (rec, fresh) =
            tryl!(fork::fork_or_continue(&home, &src_home, &src, &working_dir).await);
        log.line(&format!(
            "{} {} from {} (title {:?}, sha256 {})",
            if fresh { "forked" } else { "continuing fork" },
            rec.fork_session_id,
            rec.source_session_id,
            rec.title.as_deref().unwrap_or(""),
            rec.sha256
        ));
        fork_session = Some(rec.fork_session_id);
    } else if let Some(rec) = tryl!(fork::recorded_fork(&home))
        && home
            .sessions_dir()
            .join(format!("{}.json", rec.fork_session_id))
            .exists()
    {
        fork_session = Some(rec.fork_session_id);
    }

    let binary = j("COTAL_JCODE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("jcode"));
    let mut env = ctx.agent_env.clone();
    env.retain(|(k, _)| !k.starts_with("COTAL_") && !k.starts_with("JCODE_"));
    let spec = LaunchSpec {
        binary,
        home: home.clone(),
        working_dir: working_dir.clone(),
        env,
    };
    let jcode_logs = home::JcodeLogMark::take(&home);
    let inst = tryl!(Instance::launch(&spec).await);
    macro_rules! tryi {
        ($inst:expr, $e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => {
                    match $inst.stop().await {
                        Ok(()) => home.drop_alias(),
                        Err(t) => log.line(&format!("teardown after a failed start: {t}")),
                    }
                    return Err((e, log));
                }
            }
        };
    }
    let conn = Client::connect_logged(
        &home.api_socket(),
        "jucode-cotal-jcode/0.1",
        frames.as_ref().map(|f| f.for_conn("1")),
    )
    .await;
    let (client, rx) = tryi!(inst, conn);
    log.private(&format!(
        "Harness API: {} {:?}",
        client.server, client.capabilities
    ));

    // Which session: the fork, else the largest non-archived one of this cwd, else a new one.
    let wd = working_dir.display().to_string();
    let session = match fork_session {
        Some(id) => tryi!(inst, client.attach_session(&id).await),
        None => {
            let listed = client.list_sessions(false).await.map_err(|e| match e {
                Error::Closed => Error::SessionsEnumeration("the harness closed".into()),
                other => other,
            });
            let listed = tryi!(inst, listed);
            let best = listed
                .into_iter()
                .filter(|s| s.archived != Some(true) && s.working_dir.as_deref() == Some(&wd))
                .max_by_key(|s| s.transcript_bytes.unwrap_or(0));
            match best {
                Some(s) => {
                    log.line(&format!(
                        "continuing session {} of this working directory",
                        s.session_id
                    ));
                    tryi!(inst, client.attach_session(&s.session_id).await)
                }
                None => tryi!(inst, client.create_session(&working_dir).await),
            }
        }
    };
    let sid = session.session_id.clone();
    let model = tryi!(
        inst,
        select_model(
            &client,
            &sid,
            ctx.model.as_deref(),
            ctx.variant.as_deref(),
            &log
        )
        .await
    );

    let (sig_tx, _) = broadcast::channel(256);
    let (closed_tx, closed_rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared {
        plan: Plan {
            spec,
            session_id: sid.clone(),
            tui,
            prompt: j("COTAL_JCODE_PROMPT"),
        },
        log,
        live: tokio::sync::Mutex::new(None),
        turn_lock: Arc::new(tokio::sync::Mutex::new(())),
        slot: Mutex::new(None),
        foreign: AtomicBool::new(false),
        active: AtomicBool::new(false),
        pumped: std::sync::atomic::AtomicU64::new(0),
        pumped_changed: tokio::sync::Notify::new(),
        steering: Mutex::new(Steering::default()),
        steering_changed: tokio::sync::Notify::new(),
        signals: Mutex::new(Some(sig_tx)),
        last_turn_error: Mutex::new(None),
        recovered_once: AtomicBool::new(false),
        shutting_down: AtomicBool::new(false),
        closed_tx,
        generation: std::sync::atomic::AtomicU64::new(1),
        startup_gate: watch::channel(false).0,
        startup_armed: AtomicBool::new(false),
        model,
        fatal: factory.fatal.clone(),
        recovery_window: factory.recovery_window.unwrap_or(RECOVERY_WINDOW),
        frames,
        jcode_logs,
        mcp_hint_wait: factory.mcp_hint_wait.unwrap_or(MCP_HINT_WAIT),
    });
    shared.spawn_pump(rx, 1);
    // The TUI opens on the managed session before the readiness turn.
    let tui_child = if shared.plan.tui {
        match spawn_tui(&shared.plan.spec, &sid) {
            Ok(c) => {
                if let Some(pid) = c.id() {
                    let _ = inst.record_tui(pid);
                }
                Some(c)
            }
            Err(e) => {
                shared.log.line(&format!("cannot open the jcode TUI: {e}"));
                None
            }
        }
    } else {
        None
    };
    *shared.live.lock().await = Some(Live {
        client: Arc::new(client),
        instance: Some(inst),
        tui: tui_child,
    });
    if let Err(e) = shared.readiness(bound).await {
        shared.shutting_down.store(true, Ordering::SeqCst);
        match shared.stop_live().await {
            Ok(()) => home.drop_alias(),
            Err(t) => shared
                .log
                .line(&format!("teardown after a failed start: {t}")),
        }
        return Err((e, shared.log.clone()));
    }
    tokio::spawn(shared.clone().supervise(closed_rx));
    Ok(Arc::new(JcodeHarness { shared }))
}

fn spawn_tui(spec: &LaunchSpec, sid: &str) -> Result<tokio::process::Child> {
    tokio::process::Command::new(&spec.binary)
        .arg("--socket")
        .arg(spec.home.daemon_socket())
        .arg("--resume")
        .arg(sid)
        .current_dir(&spec.working_dir)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .env("JCODE_HOME", &spec.home.root)
        .env("JCODE_RUNTIME_DIR", &spec.home.runtime_dir)
        .env("JCODE_NO_AUTO_UPDATE", "1")
        .spawn()
        .map_err(|e| Error::StartupFailed(format!("TUI: {e}")))
}

/// jcode's reasoning-effort vocabulary, lowest first (its `swarm` sentinels
/// are UI modes, not provider tiers).
pub const EFFORT_VOCABULARY: [&str; 7] =
    ["none", "minimal", "low", "medium", "high", "xhigh", "max"];

/// The accepted ladder a tier refusal names, parsed safely: the longest run
/// of vocabulary words joined only by separators (spaces, `,` `|` `/` `;`,
/// quotes, brackets, "or", "and"; a full stop or any other word ends it), at
/// least two long, without the rejected tier, in ladder order. Nothing else of the refusal text survives, so the
/// result is safe to print; a refusal naming no such run yields none.
pub fn accepted_ladder(message: &str, rejected: &str) -> Vec<String> {
    const SEPARATORS: &str = " \t\n,|/;'\"`[](){}";
    let mut best: Vec<&str> = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    let mut rest = message;
    while !rest.is_empty() {
        let word_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(rest.len());
        let (word, tail) = rest.split_at(word_end);
        let gap_end = tail
            .find(|c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            .unwrap_or(tail.len());
        let (gap, tail) = tail.split_at(gap_end);
        rest = tail;
        let lw = word.to_ascii_lowercase();
        let joins = !word.is_empty() && gap.chars().all(|c| SEPARATORS.contains(c));
        match EFFORT_VOCABULARY.iter().find(|v| **v == lw) {
            Some(v) => {
                if !run.contains(v) {
                    run.push(v);
                }
                if joins {
                    continue;
                }
            }
            None if (lw == "or" || lw == "and") && joins => continue,
            None => {}
        }
        // Any other word or punctuation ends the run.
        if run.len() > best.len() {
            best = std::mem::take(&mut run);
        }
        run.clear();
    }
    if run.len() > best.len() {
        best = run;
    }
    if best.len() < 2 {
        return Vec::new();
    }
    EFFORT_VOCABULARY
        .iter()
        .filter(|v| best.contains(v) && !v.eq_ignore_ascii_case(rejected))
        .map(|v| v.to_string())
        .collect()
}

/// `--model` then `--variant`, before the first turn; returns the presence label.
pub async fn select_model(
    client: &Client,
    sid: &str,
    model: Option<&str>,
    variant: Option<&str>,
    log: &ConnectorLog,
) -> Result<Option<(String, Option<String>)>> {
    if let Some(m) = model {
        if m.contains('/') {
            return Err(Error::ModelPrefixRejected(m.to_string()));
        }
        if let Err(e) = client.set_model(sid, m).await {
            log.private(&format!("set_model {m}: {e}"));
            return Err(match e {
                Error::Api { .. } => Error::ModelRefused(m.to_string()),
                other => other,
            });
        }
    }
    let info: RuntimeInfo = client.runtime_info(sid).await?;
    // RuntimeInfo.model may still name the previous model right after set_model.
    let pin = model.map(str::to_string).or_else(|| info.model.clone());
    let routes: Vec<_> = info
        .routes
        .iter()
        .filter(|r| r.available && Some(&r.model) == pin.as_ref())
        .collect();
    let mut providers: Vec<&str> = routes.iter().map(|r| r.provider.as_str()).collect();
    providers.sort_unstable();
    providers.dedup();
    let provider = match providers.as_slice() {
        [one] => Some(one.to_string()),
        _ => info.provider.clone(),
    };
    if let Some(v) = variant {
        if providers.len() != 1 {
            return Err(Error::ModelMismatch(pin.unwrap_or_default()));
        }
        if let Err(e) = client.set_reasoning_effort(sid, v).await {
            log.private(&format!("set_reasoning_effort {v}: {e}"));
            return Err(match e {
                Error::Api { message, .. } if message.contains("not supported") => {
                    Error::EffortUnsupported
                }
                Error::Api { message, .. } => {
                    let accepted = accepted_ladder(&message, v);
                    // Only vocabulary words survive the parse: safe for the terminal.
                    if !accepted.is_empty() {
                        log.line(&format!(
                            "reasoning effort {v:?} refused; accepted ladder: {}",
                            accepted.join(", ")
                        ));
                    }
                    Error::EffortRefused {
                        effort: v.to_string(),
                        accepted,
                    }
                }
                other => other,
            });
        }
    }
    if let Some(r) = routes.first() {
        log.line(&format!(
            "route: provider {} serves {} via {}",
            r.provider,
            r.model,
            r.api_method.as_deref().unwrap_or("?")
        ));
    }
    Ok(pin.map(|p| (p, provider)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accepted_ladder_is_parsed_from_the_refusal_and_nothing_else() {
        let m = "Unsupported reasoning effort 'ultra' for gpt-5 (request req_1); supported values: none, low, medium, high.";
        assert_eq!(
            accepted_ladder(m, "ultra"),
            ["none", "low", "medium", "high"]
        );
        // A sentence break ends a run.
        assert!(accepted_ladder("Use high. Low is gone", "max").is_empty());
        // Out of order, pipes, "or": ladder order, no duplicates.
        assert_eq!(
            accepted_ladder("expected one of high|LOW|minimal or xhigh, low", "max"),
            ["minimal", "low", "high", "xhigh"]
        );
        // The rejected tier is never offered back.
        assert_eq!(
            accepted_ladder("valid: low, medium, high", "high"),
            ["low", "medium"]
        );
    }

    #[test]
    fn a_refusal_without_a_ladder_names_none() {
        assert!(accepted_ladder("provider rejected reasoning effort", "ultra").is_empty());
        // A lone tier in prose is a mention, not a ladder.
        assert!(accepted_ladder("try high instead of ultra", "ultra").is_empty());
        assert!(
            accepted_ladder(
                "Reasoning effort is not supported by the current model/profile.",
                "high"
            )
            .is_empty()
        );
    }

    #[test]
    fn frame_log_and_tui_switches_refuse_other_spellings() {
        assert!(!frame_log_wanted(None).unwrap());
        assert!(frame_log_wanted(Some("1")).unwrap());
        assert_eq!(
            frame_log_wanted(Some("verbose")).unwrap_err().code(),
            "invalid_config"
        );
        assert_eq!(
            tui_mode(Some("2"), true).unwrap_err().code(),
            "invalid_config"
        );
    }
}
