//! [`JcodeHarness`]: the `jucode_cotal::harness::Harness` the seat drives,
//! backed by the private instance; [`JcodeFactory`] brings it up (private
//! home, credential mirror, `mcp.json`, fork or continuation, model and effort,
//! TUI, readiness proof) and owns the recovery window when the Harness
//! connection closes.
//!
//! This file holds the shared state and the [`Harness`] impl; `launch` brings a seat up,
//! `lifecycle` keeps its connection (pump, readiness), `recovery` owns the recovery window,
//! `startup` the post-join startup turn, `turns` runs turns, `failures` reads turns that did not
//! succeed, `model` picks model and effort.

mod failures;
mod launch;
mod lifecycle;
mod model;
mod recovery;
mod startup;
mod turns;

use launch::start;
pub use model::{EFFORT_VOCABULARY, accepted_ladder, select_model};
pub use startup::{DEFERRED_NATIVE_CHANGE, STARTUP_ATTEMPTS, WAITING_ON_STEERING};

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use jucode_clock::{Clock, SystemClock};
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
/// How long a message jcode keeps refusing as busy (a TUI turn, the gap after
/// a turn) is offered again before it counts as refused
/// (`COTAL_JCODE_DEFERRAL_MAX_MS` shortens it in tests).
pub const DEFERRAL_MAX: Duration = Duration::from_secs(300);
/// The pace of those offers.
const BUSY_PACE: Duration = Duration::from_millis(100);
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
    /// The turn failed or stopped: never a success.
    Failed(failures::Stop),
    Closed,
}

/// How [`Shared::run_one`] ended.
enum RunEnd {
    /// With [`Steering::foreign_starts`] as it stood at the turn's end.
    Done(u64),
    /// `on_tool` asked to return while the turn still runs.
    Early(mpsc::UnboundedReceiver<TurnEv>),
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
    /// The requested model and effort (named by a readiness refusal).
    model: Option<String>,
    variant: Option<String>,
    /// See [`DEFERRAL_MAX`].
    deferral_max: Duration,
}

/// One live connection and the tree behind it.
struct Live {
    client: Arc<Client>,
    instance: Option<Instance>,
    tui: Option<tokio::process::Child>,
}

struct Shared {
    plan: Plan,
    /// Every time-driven rule (deferral, recovery window, startup retries) reads this clock.
    clock: jucode_clock::SharedClock,
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
    /// Messages written to jcode (a startup turn that failed before one was is still pending).
    invoked: std::sync::atomic::AtomicU64,
    /// The recovery window is open: no live connection to send on.
    reconnecting: AtomicBool,
    /// Raised when the live connection is dropped or replaced.
    live_changed: tokio::sync::Notify,
    /// Raised when the seat starts stopping.
    stopping: tokio::sync::Notify,
    /// Held while a recovery window runs; a stop waits for it.
    recovery_lock: tokio::sync::Mutex<()>,
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
                let code = str_of("code");
                let code = if code.is_empty() {
                    "internal".to_string()
                } else {
                    code
                };
                self.turn_failed(ours, failures::Stop::error(code, str_of("message")));
            }
            "turn_stopped" => {
                // Newer builds: a turn that stopped without succeeding, by reason.
                self.turn_failed(
                    ours,
                    failures::Stop::stopped(&str_of("reason"), str_of("message")),
                );
            }
            _ => {}
        }
    }

    /// Wait until the pump handled `n` events of this connection
    /// (deadlock-guarded: a connection replaced meanwhile restarts the count).
    async fn until_pumped(&self, n: u64) {
        let clock = SystemClock::new();
        loop {
            let changed = self.pumped_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.pumped.load(Ordering::SeqCst) >= n {
                return;
            }
            let left = crate::api::REQUEST_TIMEOUT.saturating_sub(clock.elapsed());
            if tokio::time::timeout(left, changed).await.is_err() {
                return;
            }
        }
    }

    async fn client(&self) -> Option<Arc<Client>> {
        self.live.lock().await.as_ref().map(|l| l.client.clone())
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

    async fn send_turn_accepted(
        &self,
        text: &str,
        accepted: tokio::sync::oneshot::Sender<()>,
    ) -> std::result::Result<(), TurnFailure> {
        let mut gate = self.shared.startup_gate.subscribe();
        let _ = gate.wait_for(|done| *done).await;
        self.shared
            .turn_accepted(text, |_| false, Some(accepted))
            .await
            .map(drop)
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
        if !joined && !*sh.startup_gate.borrow() {
            // Mail buffered before the startup turn runs in the turn after it.
            return Err(fail(
                "the startup turn has not run yet; held for the following turn".into(),
            ));
        }
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
        match lock(&self.shared.signals).as_ref() {
            Some(tx) => tx.subscribe(),
            None => broadcast::channel(1).1,
        }
    }

    fn joined(&self) {
        // The presence bind is confirmed: the startup turn may run.
        if !self.shared.startup_armed.swap(true, Ordering::SeqCst) {
            self.shared
                .log
                .line("presence bound; the post-join startup turn may run");
            tokio::spawn(self.shared.clone().startup_turns());
        }
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
        self.shared.stopping.notify_waiters();
        // A replacement launching now is cut off and proven stopped first.
        let _recovered = self.shared.recovery_lock.lock().await;
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
    /// The clock of the seat's time-driven rules (a `ManualClock` in tests).
    pub clock: Option<jucode_clock::SharedClock>,
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
