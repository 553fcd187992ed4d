//! The daemon's core: sessions, clients, devices and workspaces, independent of any transport.
//!
//! A front end (`jucode-server`) authenticates a connection with [`Hub::authenticate`], registers
//! it with [`Hub::connect`] and from then on only passes text frames in ([`Hub::handle`]) and
//! writes the [`Outgoing`] frames the hub queues for it. Engines are reached only through
//! `jucode-engine`'s channels, and what differs between engines is what their factories
//! declare (capabilities), never their names. Start reading at [`Hub::open`] and
//! [`Hub::handle`] (in `router.rs`): a frame is looked up in the protocol's op table, its gate
//! applied, and it goes to its area's module (`sessions/`, `agents/`, `actions`,
//! `workspaces`, `devices/`, `mcp`, `schedules/`, `dispatch/`), which answers through the op's context (`cx.rs`) and fails with a
//! typed error whose text is the protocol's (`error.rs`).
//!
//! Invariants: a record is fsynced to its log before the op that caused it is acknowledged;
//! replies go only to the client that asked; session events go to every client; a client that
//! cannot keep up is disconnected rather than allowed to stall the others; `router.rs` is the
//! only match over ops.

mod actions;
mod agents;
mod clients;
mod cx;
mod devices;
mod dispatch;
mod error;
mod files;
mod gateway;
#[cfg(test)]
mod items_tests;
mod mcp;
mod messages;
mod notifications;
mod paths;
mod questions;
#[cfg(test)]
mod questions_tests;
mod reports;
mod requirements;
mod restart;
mod router;
mod schedules;
mod sessions;
mod skills;
mod tasks;
mod terminals;
mod timers;
mod uploads;
mod usage;
mod util;
mod workspaces;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use jucode_clock::SharedClock;
use jucode_engine::EngineFactory;
use jucode_protocol::daemon::{DaemonEvent, Reply};
use jucode_store::{StateDir, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use agents::capability::{AgentMcp, AgentToolError};
pub use clients::{Auth, ClientId, Connection, FrameText, Frames, Kick, Outgoing, TryRecvError};
pub use devices::{
    LinkSource, PairError, Paired, RelayLink, RelayLinkError, app_origin, push_payload,
};
pub use gateway::{Gateway, GroupsFuture};
pub use notifications::Notification;
pub use requirements::titles::{TitleFuture, TitleModel, TitleModelError};
pub use skills::{CatalogFuture, InstallFuture, SkillCatalog, Skills, valid_id as valid_skill_id};
pub use uploads::UploadDesk;
pub use usage::{Billing, Charge, ChargesFuture};

/// What the hub needs from its host.
pub struct HubConfig {
    /// The jucode home (`~/.jucode`); state lives in its `daemon/` directory.
    pub home: PathBuf,
    /// The user's home directory (`~` in paths; new projects are made under it).
    pub user_home: PathBuf,
    /// The version `hello` reports.
    pub version: String,
    /// The relay URL, or `None` with `--no-relay`.
    pub relay_url: Option<String>,
    /// Engines by name (`jucode`, `claude`, …). A name missing here is refused with a clear error.
    pub engines: HashMap<String, Arc<dyn EngineFactory>>,
    /// Where the hub and everything it runs read time ([`jucode_clock::SystemClock`] in the
    /// daemon, a [`jucode_clock::ManualClock`] in time-driven tests).
    pub clock: SharedClock,
    /// How Claude Code and Codex agent sessions reach the agent tools (the daemon's own
    /// `agent-mcp` subcommand and its loopback URL); the default offers them none.
    pub agent_mcp: AgentMcp,
    /// The signed-in gateway account's charges lookup; `None` leaves gateway amounts `null`.
    pub billing: Option<Arc<dyn Billing>>,
    /// What the host reaches over the network for the hub (skill sources, the gateway's
    /// groups); none by default.
    pub online: Online,
}

/// Network services the host provides, so the hub stays free of HTTP.
#[derive(Default, Clone)]
pub struct Online {
    pub skills: Option<Arc<dyn Skills>>,
    /// The signed-in account's gateway groups; `None` when not signed in.
    pub gateway: Option<Arc<dyn Gateway>>,
    /// The small model that titles requirements and rewrites their progress; `None` keeps
    /// the words' cut as the title and progress as the sessions' agents leave it.
    pub title_model: Option<Arc<dyn TitleModel>>,
}

/// Why the hub could not start.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the system random generator failed")]
    Random,
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// Daemon settings kept in `settings.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Settings {
    #[serde(default)]
    relay: bool,
}

/// The daemon's shared state. Cheap operations run under one mutex that is never held across
/// an await; slow work (spawning `git`, engine start-up) happens outside it.
pub struct Hub {
    config: HubConfig,
    token: String,
    /// Agent sessions' capabilities: their own lock, since an engine asks for one while the
    /// hub's lock is held (during its start).
    agent_caps: agents::capability::Capabilities,
    inner: Mutex<Inner>,
    background: tasks::Background,
    restart: restart::Restart,
    /// Uploads between their first and last chunk: their own lock, never held with the hub's.
    uploads: uploads::Uploads,
}

struct Inner {
    store: StateDir,
    clients: clients::Clients,
    sessions: sessions::Sessions,
    actions: actions::Actions,
    devices: devices::Devices,
    workspaces: workspaces::Workspaces,
    agents: agents::Agents,
    timers: timers::Timers,
    questions: questions::Questions,
    reports: reports::Reports,
    requirements: requirements::Requirements,
    dispatches: dispatch::Dispatches,
    messages: messages::Messages,
    schedules: schedules::Schedules,
    usage: usage::Ledger,
    settings: Settings,
    terminals: terminals::Terminals,
    notifications: notifications::Notifications,
}

impl Hub {
    /// Opens the state directory (taking its lock), folds every log and is ready for clients.
    pub fn open(config: HubConfig) -> Result<Arc<Hub>, HubError> {
        let store = StateDir::open(&config.home)?;
        let token = store.load_or_create_token()?;
        let sessions = sessions::Sessions::open(&store)?;
        let actions = actions::Actions::open(&store, config.clock.clone())?;
        let devices = devices::Devices::open(&store, config.clock.clone())?;
        let workspaces = workspaces::Workspaces::open(&store, config.clock.clone())?;
        let settings: Settings =
            jucode_store::read_json(&store.path("settings.json"))?.unwrap_or_default();
        let agents = agents::Agents::open(&config.home)?;
        let timers = timers::Timers::open(&store, config.clock.clone())?;
        let questions = questions::Questions::open(&store, config.clock.clone())?;
        let reports = reports::Reports::open(&store, config.clock.clone())?;
        let mut requirements = requirements::Requirements::open(&store, config.clock.clone())?;
        requirements.migrate(&workspaces)?;
        let dispatches = dispatch::Dispatches::open(&store, config.clock.clone())?;
        let mut messages = messages::Messages::open(&store)?;
        messages.follow_renames(|id| {
            let now = sessions.current_id(id);
            (now != id).then(|| now.to_string())
        });
        let mut questions = questions;
        // Not fatal: a question left open is answered again and the duplicate dropped.
        match questions.roll_forward(|key| messages.has_dedupe_key(key)) {
            Ok(0) => {}
            Ok(n) => tracing::info!(n, "closed questions whose answer went out before a stop"),
            Err(e) => tracing::warn!("questions answered before a stop stay open: {e}"),
        }
        let schedules = schedules::Schedules::open(&agents, &messages);
        let notifications = notifications::Notifications::new(&requirements.event(&sessions));
        let usage = usage::open(&store)?;
        let purged = uploads::purge(
            &config.home.join("uploads"),
            config.clock.now().to_zoned(jiff::tz::TimeZone::UTC).date(),
        );
        if purged > 0 {
            tracing::info!(purged, "removed leftover and expired uploads");
        }
        let hub = Arc::new(Hub {
            config,
            token,
            agent_caps: Default::default(),
            background: tasks::Background::default(),
            restart: restart::Restart::default(),
            uploads: Default::default(),
            inner: Mutex::new(Inner {
                store,
                clients: clients::Clients::default(),
                sessions,
                actions,
                devices,
                workspaces,
                agents,
                timers,
                questions,
                reports,
                requirements,
                dispatches,
                messages,
                schedules,
                usage,
                settings,
                terminals: Default::default(),
                notifications,
            }),
        });
        // What the last run handed over and never saw reach its session.
        hub.confirm_at_start();
        Ok(hub)
    }

    /// Where the daemon token is kept (printed at start; never the token itself).
    pub fn token_path(&self) -> PathBuf {
        self.lock().store.token_path()
    }

    /// The state directory (`~/.jucode/daemon`).
    pub fn state_dir(&self) -> PathBuf {
        self.lock().store.daemon_dir().to_path_buf()
    }

    fn lock(&self) -> HubGuard<'_> {
        // A panic while holding the lock leaves consistent-enough state for the other clients:
        // every mutation is applied after its record is written.
        let guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        HOLDS_HUB_LOCK.set(true);
        HubGuard(guard)
    }

    /// Whether this thread holds the hub's lock now: an engine's start runs under it, and
    /// what it calls back (an agent's prompt) must not take the lock again.
    pub(crate) fn lock_held_here() -> bool {
        HOLDS_HUB_LOCK.get()
    }

    /// Who holds `token`: the daemon token (a local client) or a paired device's token.
    pub fn authenticate(&self, token: &str) -> Option<Auth> {
        use subtle::ConstantTimeEq;
        if !token.is_empty() && bool::from(token.as_bytes().ct_eq(self.token.as_bytes())) {
            return Some(Auth::Local);
        }
        self.lock()
            .devices
            .device_for_token(token)
            .map(Auth::Device)
    }

    /// Registers a connection and queues its connect batch (`hello` first).
    pub fn connect(&self, auth: Auth) -> Connection {
        let mut inner = self.lock();
        let conn = inner.clients.add(auth);
        let batch = self.connect_batch(&inner);
        inner.clients.send_batch(conn.id, &batch);
        conn
    }

    fn connect_batch(&self, inner: &Inner) -> Vec<Value> {
        let events = [
            DaemonEvent::Hello {
                protocol: jucode_protocol::PROTOCOL_VERSION,
                version: self.config.version.clone(),
            },
            inner.sessions.list_event(),
            inner.workspaces.event(),
            inner.agents_event(),
            inner.schedules.event(),
            inner.questions.event(),
            inner.actions.event(),
            inner.dispatches.event(),
            inner.requirements.event(&inner.sessions),
        ];
        events
            .into_iter()
            .map(|e| to_value(&Reply::to(None, e)))
            .collect()
    }

    /// Forgets every connection (the daemon is stopping): each front end writes out what is
    /// queued for it and closes.
    pub fn disconnect_all(&self) {
        let mut inner = self.lock();
        for id in inner.clients.ids() {
            inner.client_gone(id);
        }
    }

    /// Forgets a connection: its watches end (which may leave sessions unattended).
    pub fn disconnect(&self, client: ClientId) {
        self.lock().client_gone(client);
    }

    fn relay_enabled(&self) -> bool {
        self.config.relay_url.is_some() && self.lock().settings.relay
    }

    /// Whether `/api/pair` refuses every attempt for now (too many wrong codes lately).
    pub fn pairing_blocked(&self) -> bool {
        self.lock().devices.pairing_blocked()
    }

    /// Trades a pairing code for a device (`POST /api/pair`).
    pub fn pair(&self, code: &str, name: &str) -> Result<Paired, PairError> {
        self.lock().devices.pair(code, name)
    }

    /// Asks every engine to stop and waits (bounded) for them to exit.
    pub async fn shutdown(&self) {
        let pending = self.lock().sessions.stop_all();
        // One bound for all of them together.
        let all_stopped = async {
            for mut done in pending {
                let _ = done.changed().await;
            }
        };
        let _ = tokio::time::timeout(std::time::Duration::from_secs(8), all_stopped).await;
    }

    /// Sends `client` an error frame (the front end's own refusals, such as binary frames).
    pub fn send_error(&self, client: ClientId, message: &str) {
        self.reply_error(client, None, message.to_string());
    }
}

thread_local! {
    static HOLDS_HUB_LOCK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The hub's lock, held. It marks its thread while held ([`Hub::lock_held_here`]); the lock is
/// never held across an await, so the mark cannot move to another task.
pub(crate) struct HubGuard<'a>(MutexGuard<'a, Inner>);

impl Drop for HubGuard<'_> {
    fn drop(&mut self) {
        HOLDS_HUB_LOCK.set(false);
    }
}

impl std::ops::Deref for HubGuard<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl std::ops::DerefMut for HubGuard<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.0
    }
}

impl Inner {
    /// Queues a frame for every client, ending the watches of clients dropped as too slow.
    pub(crate) fn broadcast(&mut self, frame: &Value) {
        for dropped in self.clients.broadcast(frame) {
            self.client_gone(dropped);
        }
    }

    /// [`Inner::broadcast`] of a frame already serialized (the engine events' hot path).
    pub(crate) fn broadcast_text(&mut self, text: FrameText) {
        for dropped in self.clients.broadcast_text_except(text, None) {
            self.client_gone(dropped);
        }
    }

    /// A client left (or was dropped): its watches end, and every other client learns the
    /// new watcher counts. Terminates: each round removes a client.
    pub(crate) fn client_gone(&mut self, client: ClientId) {
        self.clients.remove(client);
        self.terminals.client_gone(client);
        if self.sessions.unwatch_all(client) {
            self.broadcast_sessions();
        }
    }

    pub(crate) fn broadcast_sessions(&mut self) {
        let frame = to_value(&Reply::to(None, self.sessions.list_event()));
        self.broadcast(&frame);
    }
}

fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}
