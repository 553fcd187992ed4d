//! The built-in jucode engine: a coding agent that runs in the daemon's process and speaks the
//! serve protocol v2 through the [`jucode_engine::EngineFactory`] interface.
//!
//! Start reading at [`JucodeEngine`]; a session's life is in `session.rs` (the op actor and
//! its turns). The model clients are in [`model`] (chat completions and Anthropic Messages,
//! streamed), the tools in [`tools`], edits as hunks in [`hunks`], deferred actions in
//! [`actions`], the saved conversation in [`log`], and `~/.jucode/config.json` in [`config`].
//! MCP servers come from the `jucode-mcp` crate (one manager per session, in `session.rs`);
//! images attached to a message are checked and read in [`images`].

pub mod actions;
pub mod config;
pub mod hunks;
pub mod images;
pub mod log;
pub mod model;
pub mod prompt;
mod session;
pub mod tools;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jucode_clock::{SharedClock, SystemClock};
use jucode_engine::{EngineError, EngineFactory, EngineHandle, EngineOutput, StartSpec};
use jucode_protocol::{ApprovalMode, Object};
use jucode_sandbox::{Mode, Policy, Sandbox};
use serde_json::Value;
use tokio::sync::OnceCell;

pub use session::{Gate, backoff, gate, title_due};

/// Starts jucode sessions in this process.
pub struct JucodeEngine {
    home: PathBuf,
    user_home: PathBuf,
    version: String,
    /// bubblewrap, probed once on first use (the probe runs a process).
    sandbox: Arc<OnceCell<Result<Arc<Sandbox>, String>>>,
    /// Where the engine's tools read time (command timeouts).
    clock: SharedClock,
}

impl JucodeEngine {
    /// `home` is the jucode home (`~/.jucode`: config.json, sessions/); `user_home` is the
    /// user's home directory (credentials under it stay hidden from tools).
    pub fn new(home: PathBuf, user_home: PathBuf) -> JucodeEngine {
        JucodeEngine {
            home,
            user_home,
            version: env!("CARGO_PKG_VERSION").to_string(),
            sandbox: Arc::new(OnceCell::new()),
            clock: SystemClock::shared(),
        }
    }

    /// The same engine reading time from `clock` (the hub's, or a manual clock in tests)
    /// instead of the system's.
    pub fn with_clock(mut self, clock: SharedClock) -> JucodeEngine {
        self.clock = clock;
        self
    }

    /// The jucode home this engine reads its config from.
    pub fn home(&self) -> &Path {
        &self.home
    }
}

/// What the client's `options` ask for.
struct Options {
    mode: ApprovalMode,
    model: Option<String>,
    chat: bool,
    sandbox: Mode,
    network: bool,
    warning: Option<String>,
}

fn read_options(options: &Object) -> Options {
    let mut warnings = Vec::new();
    let mode = match options.get("approval_mode").and_then(Value::as_str) {
        None => ApprovalMode::Manual,
        Some(name) => match ApprovalMode::parse(name) {
            Some(ApprovalMode::Plan) | None => {
                warnings.push(format!(
                    "approval mode `{name}` is not available in the jucode engine; using manual"
                ));
                ApprovalMode::Manual
            }
            Some(mode) => mode,
        },
    };
    let sandbox = match options.get("sandbox").and_then(Value::as_str) {
        None => Mode::WorkspaceWrite,
        Some(name) => Mode::parse(name).unwrap_or_else(|| {
            warnings.push(format!(
                "sandbox `{name}` is unknown (expected read-only, workspace-write or full-access); using workspace-write"
            ));
            Mode::WorkspaceWrite
        }),
    };
    Options {
        mode,
        model: options
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.trim().is_empty())
            .map(str::to_string),
        chat: options
            .get("chat")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        sandbox,
        network: options
            .get("network")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        warning: (!warnings.is_empty()).then(|| warnings.join("; ")),
    }
}

impl EngineFactory for JucodeEngine {
    fn saved_conversations(&self, cwd: &Path) -> Vec<jucode_engine::SavedConversation> {
        log::saved_in(&self.home.join("sessions"), cwd)
    }

    fn reads_mcp_config(&self) -> bool {
        true
    }

    fn saved_transcript(
        &self,
        session: &str,
    ) -> Option<Vec<jucode_protocol::serve::TranscriptItem>> {
        log::saved_transcript(&self.home.join("sessions"), session)
    }

    fn start(&self, spec: StartSpec) -> Result<EngineHandle, EngineError> {
        let (handle, ops, events) = jucode_engine::channel();
        let options = read_options(&spec.options);
        let home = self.home.clone();
        let user_home = self.user_home.clone();
        let version = self.version.clone();
        let sandbox_cell = self.sandbox.clone();
        let clock = self.clock.clone();
        tokio::spawn(async move {
            let cwd = match tokio::fs::canonicalize(&spec.cwd).await {
                Ok(cwd) if cwd.is_dir() => cwd,
                Ok(cwd) => {
                    let error = format!("{} is not a directory", cwd.display());
                    let _ = events
                        .send(EngineOutput::Exited { error: Some(error) })
                        .await;
                    return;
                }
                Err(e) => {
                    let error = format!("{}: {e}", spec.cwd.display());
                    let _ = events
                        .send(EngineOutput::Exited { error: Some(error) })
                        .await;
                    return;
                }
            };
            let sandbox = sandbox_cell
                .get_or_init(|| async {
                    tokio::task::spawn_blocking(|| {
                        Sandbox::detect().map(Arc::new).map_err(|e| e.to_string())
                    })
                    .await
                    .unwrap_or_else(|e| Err(format!("the sandbox probe failed: {e}")))
                })
                .await
                .clone();
            let mut extra = Vec::new();
            for dir in &spec.extra_dirs {
                if let Ok(dir) = tokio::fs::canonicalize(dir).await
                    && dir.is_dir()
                    && !extra.contains(&dir)
                {
                    extra.push(dir);
                }
            }
            let mut roots = vec![cwd.clone()];
            roots.extend(extra.iter().cloned());
            let bash_timeout_ms =
                config::Config::load(&home.join("config.json"), |v| std::env::var(v).ok())
                    .map_or(config::DEFAULT_BASH_TIMEOUT_MS, |c| c.bash_timeout_ms);
            let env = tools::ToolEnv {
                policy: Policy {
                    mode: options.sandbox,
                    cwd: cwd.clone(),
                    writable: extra.clone(),
                    readable: Vec::new(),
                    network: options.network,
                    user_home,
                    jucode_home: home.clone(),
                },
                cwd: cwd.clone(),
                roots,
                sandbox,
                bash_timeout_ms,
                clock,
            };
            session::run(
                session::Setup {
                    session: spec.session,
                    cwd,
                    home,
                    chat: options.chat,
                    extra_dirs: extra,
                    env,
                    mode: options.mode,
                    model: options.model,
                    resume: spec.resume,
                    version,
                    warning: options.warning,
                },
                events,
                ops,
            )
            .await;
        });
        Ok(handle)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_take_aliases_and_warn_about_the_rest() {
        let obj = |v: Value| v.as_object().cloned().unwrap();
        let o = read_options(&obj(
            json!({"approval_mode":"full-auto","chat":true,"model":"m"}),
        ));
        assert_eq!(o.mode, ApprovalMode::FullAccess);
        assert!(o.chat);
        assert_eq!(o.model.as_deref(), Some("m"));
        assert!(o.warning.is_none());
        let o = read_options(&obj(json!({"approval_mode":"yolo","sandbox":"open"})));
        assert_eq!(o.mode, ApprovalMode::Manual);
        assert_eq!(o.sandbox, Mode::WorkspaceWrite);
        let warning = o.warning.unwrap();
        assert!(
            warning.contains("yolo") && warning.contains("open"),
            "{warning}"
        );
    }
}
