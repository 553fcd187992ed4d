//! The daemon's core: sessions, clients, devices and workspaces, independent of any transport.
//!
//! A front end (`jucode-server`) authenticates a connection with [`Hub::authenticate`], registers
//! it with [`Hub::connect`] and from then on only passes text frames in ([`Hub::handle`]) and
//! writes the [`Outgoing`] frames the hub queues for it. Engines are reached only through
//! `jucode-engine`'s channels. Start reading at [`Hub::open`] and [`Hub::handle`].
//!
//! Invariants: a record is fsynced to its log before the op that caused it is acknowledged;
//! replies go only to the client that asked; session events go to every client; a client that
//! cannot keep up is disconnected rather than allowed to stall the others.

mod actions;
mod clients;
mod devices;
mod mcp;
mod sessions;
mod util;
mod workspaces;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use jucode_clock::SharedClock;
use jucode_engine::EngineFactory;
use jucode_protocol::daemon::{
    ActionsOp, BasicsOp, DaemonEvent, DevicesOp, McpOp, Reply, SessionsOp, WorkspacesOp,
};
use jucode_protocol::{ClientFrame, DaemonOp};
use jucode_store::{StateDir, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use clients::{Auth, ClientId, Connection, Outgoing};
pub use devices::{PairError, Paired, RelayLink, app_origin, push_payload};

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
    inner: Mutex<Inner>,
}

struct Inner {
    store: StateDir,
    clients: clients::Clients,
    sessions: sessions::Sessions,
    actions: actions::Actions,
    devices: devices::Devices,
    workspaces: workspaces::Workspaces,
    settings: Settings,
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
        Ok(Arc::new(Hub {
            config,
            token,
            inner: Mutex::new(Inner {
                store,
                clients: clients::Clients::default(),
                sessions,
                actions,
                devices,
                workspaces,
                settings,
            }),
        }))
    }

    /// Where the daemon token is kept (printed at start; never the token itself).
    pub fn token_path(&self) -> PathBuf {
        self.lock().store.token_path()
    }

    /// The state directory (`~/.jucode/daemon`).
    pub fn state_dir(&self) -> PathBuf {
        self.lock().store.daemon_dir().to_path_buf()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent-enough state for the other clients:
        // every mutation is applied after its record is written.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
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
        for frame in batch {
            inner.clients.send(conn.id, &frame);
        }
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
            // Agents, scheduled tasks, questions, dispatches and requirements are not built
            // yet: their lists are empty (docs/DECISIONS.md).
            DaemonEvent::Agents { agents: vec![] },
            DaemonEvent::Schedules { schedules: vec![] },
            DaemonEvent::Questions {
                questions: vec![],
                closed: vec![],
            },
            inner.actions.event(),
            DaemonEvent::Dispatches { dispatches: vec![] },
            DaemonEvent::Requirements {
                requirements: vec![],
            },
        ];
        events
            .into_iter()
            .map(|e| to_value(&Reply::to(None, e)))
            .collect()
    }

    /// Forgets a connection: its watches end (which may leave sessions unattended).
    pub fn disconnect(&self, client: ClientId) {
        self.lock().client_gone(client);
    }

    /// Handles one text frame from `client`. Replies and broadcasts are queued on the clients'
    /// connections; nothing is returned.
    pub async fn handle(self: &Arc<Self>, client: ClientId, text: &str) {
        let frame = match ClientFrame::parse(text) {
            Ok(frame) => frame,
            Err(e) => {
                self.reply_error(client, e.id.clone(), e.to_string());
                return;
            }
        };
        let id = frame.id.clone();
        if let Err(message) = self.dispatch(client, frame).await {
            self.reply_error(client, id, message);
        }
    }

    async fn dispatch(
        self: &Arc<Self>,
        client: ClientId,
        frame: ClientFrame,
    ) -> Result<(), String> {
        let Some(auth) = self.lock().clients.auth(client) else {
            return Ok(());
        };
        // With or without a session: an engine's mcp_set persists to config.json and can name a
        // program to run, so a paired device may not send it either.
        if let Some(refusal) = frame
            .spec()
            .and_then(|s| s.refusal(matches!(auth, Auth::Device(_))))
        {
            return Err(refusal.into());
        }
        if !frame.is_daemon_op() {
            return self.session_op(client, frame);
        }
        let id = frame.id.clone();
        let op = match DaemonOp::from_frame(&frame) {
            None => {
                return Err(format!("{} is not available in this daemon yet", frame.op));
            }
            Some(parsed) => parsed.map_err(|e| e.to_string())?,
        };
        match op {
            DaemonOp::Basics(BasicsOp::Ping) => {
                self.reply(client, id, DaemonEvent::Pong);
                Ok(())
            }
            DaemonOp::Sessions(SessionsOp::SessionList) => {
                let event = self.lock().sessions.list_event();
                self.reply(client, id, event);
                Ok(())
            }
            DaemonOp::Sessions(SessionsOp::SessionHistory { cwd }) => {
                // Engines read their own files: outside the lock, off the async threads.
                let engines: Vec<(String, Arc<dyn EngineFactory>)> = self
                    .config
                    .engines
                    .iter()
                    .map(|(name, f)| (name.clone(), f.clone()))
                    .collect();
                let dir = PathBuf::from(&cwd);
                let saved = tokio::task::spawn_blocking(move || {
                    let mut all = Vec::new();
                    for (name, factory) in engines {
                        all.extend(
                            factory
                                .saved_conversations(&dir)
                                .into_iter()
                                .map(|c| (name.clone(), c)),
                        );
                    }
                    all
                })
                .await
                .unwrap_or_default();
                let event = self.lock().sessions.history(&cwd, saved);
                self.reply(client, id, event);
                Ok(())
            }
            DaemonOp::Sessions(SessionsOp::SessionMeta {
                session,
                title,
                archived,
                hidden,
                group,
            }) => self.session_meta(&session, title, archived, hidden, group),
            DaemonOp::Sessions(SessionsOp::SessionCreate {
                cwd,
                engine,
                options,
                agent,
                chat,
            }) => self.session_create(
                client,
                &auth,
                id,
                sessions::CreateRequest {
                    cwd,
                    engine,
                    options: options.unwrap_or_default(),
                    agent,
                    chat,
                },
            ),
            DaemonOp::Sessions(SessionsOp::SessionOpen {
                session,
                cwd,
                engine,
                options,
            }) => self.session_open(
                client,
                &auth,
                id,
                sessions::OpenRequest {
                    session,
                    cwd,
                    engine,
                    options: options.unwrap_or_default(),
                },
            ),
            DaemonOp::Sessions(SessionsOp::SessionClose { session }) => {
                self.session_close(&session)
            }
            DaemonOp::Sessions(SessionsOp::Watch { session }) => {
                self.watch(client, id, &session, true)
            }
            DaemonOp::Sessions(SessionsOp::Unwatch { session }) => {
                self.watch(client, id, &session, false)
            }
            DaemonOp::Actions(ActionsOp::ActionsList) => {
                let event = self.lock().actions.event();
                self.reply(client, id, event);
                Ok(())
            }
            DaemonOp::Actions(ActionsOp::ItemClose { kind, item, reason }) => self.item_change(
                client,
                id,
                &kind,
                &item,
                |a| a.close(&item, reason.clone()),
                true,
            ),
            DaemonOp::Actions(ActionsOp::ItemReopen { kind, item }) => self.item_change(
                client,
                id,
                &kind,
                &item,
                |a| a.reopen(&item).map(|_| ()),
                false,
            ),
            DaemonOp::Workspaces(WorkspacesOp::Workspaces) => {
                let event = self.lock().workspaces.event();
                self.reply(client, id, event);
                Ok(())
            }
            DaemonOp::Workspaces(WorkspacesOp::WorkspacesSet { rev, workspaces }) => {
                self.workspaces_change(client, id, |w| w.set(rev, workspaces))
            }
            DaemonOp::Workspaces(WorkspacesOp::ProjectAdd {
                path,
                workspace,
                project_name,
                workspace_name,
            }) => {
                let path = self.resolve_user_path(&path)?;
                self.workspaces_change(client, id, |w| {
                    w.add_project(&path, workspace, project_name, workspace_name)
                })
            }
            DaemonOp::Workspaces(WorkspacesOp::ProjectCreate {
                parent,
                name,
                git_init,
                workspace,
                workspace_name,
            }) => {
                let path = self.make_project_dir(&parent, &name, git_init).await?;
                self.workspaces_change(client, id, |w| {
                    w.add_project(&path, workspace, Some(name), workspace_name)
                })
            }
            DaemonOp::Workspaces(WorkspacesOp::ProjectRemove { workspace, project }) => {
                self.workspaces_change(client, id, |w| w.remove_project(&workspace, &project))
            }
            DaemonOp::Devices(DevicesOp::PairStart) => {
                let event = self.lock().devices.start_pairing()?;
                self.reply(client, id, event);
                Ok(())
            }
            DaemonOp::Devices(DevicesOp::PairLink) => {
                let event = self.pair_link_event()?;
                self.reply(client, id, event);
                Ok(())
            }
            DaemonOp::Devices(DevicesOp::DeviceList) => {
                let event = self.lock().devices.list_event();
                self.reply(client, id, event);
                Ok(())
            }
            DaemonOp::Devices(DevicesOp::DeviceRevoke { device }) => {
                let mut inner = self.lock();
                inner.devices.revoke(&device)?;
                for dropped in inner.clients.drop_device(&device) {
                    inner.client_gone(dropped);
                }
                inner.clients.send(
                    client,
                    &to_value(&Reply::to(id, DaemonEvent::DeviceRevoked { device })),
                );
                Ok(())
            }
            DaemonOp::Devices(DevicesOp::RelayStatus) => {
                let event = self.relay_status_event();
                self.reply(client, id, event);
                Ok(())
            }
            DaemonOp::Devices(DevicesOp::RelaySet { enabled }) => {
                let event = self.relay_set(enabled)?;
                self.reply(client, id, event);
                Ok(())
            }
            // Paired devices were refused above (local_only).
            DaemonOp::Mcp(McpOp::McpSet { server }) => {
                self.mcp_change(client, id, mcp::Change::set(server)?)
            }
            DaemonOp::Mcp(McpOp::McpRemove { name }) => {
                self.mcp_change(client, id, mcp::Change::remove(name)?)
            }
            DaemonOp::Mcp(McpOp::McpToggle { name, enabled }) => {
                self.mcp_change(client, id, mcp::Change::toggle(name, enabled)?)
            }
            DaemonOp::Push(op) => self.push_op(client, &auth, id, op).await,
        }
    }

    /// Saves an MCP change to config.json, replies `mcp_saved`, then sends the op to every
    /// open jucode session (each reconnects and answers with `mcp_servers`).
    fn mcp_change(
        &self,
        client: ClientId,
        id: Option<Value>,
        change: mcp::Change,
    ) -> Result<(), String> {
        mcp::save(&self.config.home.join("config.json"), &change)?;
        self.reply(client, id, DaemonEvent::McpSaved);
        self.lock()
            .sessions
            .send_to_engine("jucode", &change.engine_op());
        Ok(())
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
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(8);
        for mut done in pending {
            let _ = tokio::time::timeout_at(deadline, done.changed()).await;
        }
    }

    fn reply(&self, client: ClientId, id: Option<Value>, event: DaemonEvent) {
        let frame = to_value(&Reply::to(id, event));
        self.lock().clients.send(client, &frame);
    }

    /// Sends `client` an error frame (the front end's own refusals, such as binary frames).
    pub fn send_error(&self, client: ClientId, message: &str) {
        self.reply_error(client, None, message.to_string());
    }

    fn reply_error(&self, client: ClientId, id: Option<Value>, message: String) {
        let frame = to_value(&Reply::error(id, message));
        self.lock().clients.send(client, &frame);
    }

    /// `item_close` / `item_reopen`: changes an item, replies, then broadcasts its list.
    fn item_change(
        &self,
        client: ClientId,
        id: Option<Value>,
        kind: &str,
        item: &str,
        change: impl FnOnce(&mut actions::Actions) -> Result<(), String>,
        closing: bool,
    ) -> Result<(), String> {
        match kind {
            "action" => {}
            "question" => return Err("questions are not available in this daemon yet".into()),
            other => {
                return Err(format!(
                    "unknown item kind `{other}` (expected question or action)"
                ));
            }
        }
        let mut inner = self.lock();
        change(&mut inner.actions)?;
        let item = item.to_string();
        let reply = if closing {
            DaemonEvent::ItemClosed { item }
        } else {
            DaemonEvent::ItemReopened { item }
        };
        inner.clients.send(client, &to_value(&Reply::to(id, reply)));
        let list = to_value(&Reply::to(None, inner.actions.event()));
        inner.broadcast(&list);
        Ok(())
    }

    /// Applies a change to the workspaces; on success the sender gets the new list as its reply
    /// and every other client the same list as a broadcast.
    fn workspaces_change(
        &self,
        client: ClientId,
        id: Option<Value>,
        change: impl FnOnce(&mut workspaces::Workspaces) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut inner = self.lock();
        change(&mut inner.workspaces)?;
        let event = inner.workspaces.event();
        let broadcast = to_value(&Reply::to(None, event.clone()));
        for dropped in inner.clients.broadcast_except(&broadcast, Some(client)) {
            inner.client_gone(dropped);
        }
        inner.clients.send(client, &to_value(&Reply::to(id, event)));
        Ok(())
    }

    /// Makes `parent/name` for `project_create` (optionally `git init`), under the user's home.
    async fn make_project_dir(
        &self,
        parent: &str,
        name: &str,
        git_init: bool,
    ) -> Result<PathBuf, String> {
        let name = name.trim();
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']) {
            return Err(format!("{name:?} is not a folder name"));
        }
        let parent = self.resolve_user_path(parent)?;
        let home = std::fs::canonicalize(&self.config.user_home)
            .unwrap_or_else(|_| self.config.user_home.clone());
        if !parent.starts_with(&home) {
            return Err(format!("new projects are made under {}", home.display()));
        }
        let path = parent.join(name);
        std::fs::create_dir(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if git_init {
            let status = tokio::process::Command::new("git")
                .arg("init")
                .arg("--quiet")
                .arg(&path)
                .status()
                .await
                .map_err(|e| format!("git init: {e}"))?;
            if !status.success() {
                return Err(format!("git init failed ({status})"));
            }
        }
        Ok(path)
    }

    /// Expands `~` and makes `path` absolute and canonical; errors name the path.
    fn resolve_user_path(&self, path: &str) -> Result<PathBuf, String> {
        let expanded = expand_home(path, &self.config.user_home)?;
        std::fs::canonicalize(&expanded)
            .map_err(|e| format!("{}: {e}", expanded.display()))
            .and_then(|p| {
                if p.is_dir() {
                    Ok(p)
                } else {
                    Err(format!("{} is not a directory", p.display()))
                }
            })
    }
}

/// Expands a leading `~` to `home` and refuses relative paths and NUL bytes.
fn expand_home(path: &str, home: &Path) -> Result<PathBuf, String> {
    if path.contains('\0') {
        return Err("a path cannot contain a NUL byte".into());
    }
    let expanded = if path == "~" {
        home.to_path_buf()
    } else if let Some(rest) = path.strip_prefix("~/") {
        home.join(rest)
    } else {
        PathBuf::from(path)
    };
    if !expanded.is_absolute() {
        return Err(format!("{path} is not an absolute path"));
    }
    Ok(expanded)
}

fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}
