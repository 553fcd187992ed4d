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
use jucode_sandbox::{CommandRule, Mode, Policy, RuleAction, Sandbox};
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

    /// The same engine with a sandbox found elsewhere (a given bwrap, or why there is none)
    /// instead of probing `bwrap` on PATH.
    pub fn with_sandbox(self, sandbox: Result<Sandbox, String>) -> JucodeEngine {
        let cell = OnceCell::new_with(Some(sandbox.map(Arc::new)));
        JucodeEngine {
            sandbox: Arc::new(cell),
            ..self
        }
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
    /// The agent's `directories`: (path, writable).
    directories: Vec<(PathBuf, bool)>,
    command_rules: Vec<CommandRule>,
    warning: Option<String>,
}

/// `directories`: absolute paths with mode `rw` or `ro`. A bad entry is left out with a
/// warning, except an unknown mode, which is taken as `ro` (never more access than asked).
fn read_directories(value: Option<&Value>, warnings: &mut Vec<String>) -> Vec<(PathBuf, bool)> {
    let mut out = Vec::new();
    for entry in value.and_then(Value::as_array).into_iter().flatten() {
        let Some(path) = entry.get("path").and_then(Value::as_str) else {
            warnings.push(format!("directory {entry} has no path; left out"));
            continue;
        };
        let path = PathBuf::from(path);
        if !path.is_absolute() {
            warnings.push(format!(
                "directory {} is not an absolute path; left out",
                path.display()
            ));
            continue;
        }
        let writable = match entry.get("mode").and_then(Value::as_str) {
            Some("rw") => true,
            Some("ro") => false,
            other => {
                warnings.push(format!(
                    "directory {} has mode {} (expected ro or rw); taken as ro",
                    path.display(),
                    other.unwrap_or("(none)")
                ));
                false
            }
        };
        out.push((path, writable));
    }
    out
}

/// `command_rules`: `{prefix, action}` each; a bad one is left out with a warning.
fn read_rules(value: Option<&Value>, warnings: &mut Vec<String>) -> Vec<CommandRule> {
    let mut out = Vec::new();
    for entry in value.and_then(Value::as_array).into_iter().flatten() {
        let prefix = entry.get("prefix").and_then(Value::as_str).unwrap_or("");
        let action = entry.get("action").and_then(Value::as_str).unwrap_or("");
        match (RuleAction::parse(action), CommandRule::new(prefix, RuleAction::Ask)) {
            (Some(action), Some(_)) => out.extend(CommandRule::new(prefix, action)),
            (None, _) => warnings.push(format!(
                "command rule {entry} has action `{action}` (expected allow, ask or forbid); left out"
            )),
            (_, None) => warnings.push(format!(
                "command rule {entry} has an empty prefix; left out"
            )),
        }
    }
    out
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
    let directories = read_directories(options.get("directories"), &mut warnings);
    let command_rules = read_rules(options.get("command_rules"), &mut warnings);
    Options {
        mode,
        directories,
        command_rules,
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

    fn transcript_is_durable(&self) -> bool {
        // A turn records its user message before it echoes it (session/turns.rs).
        true
    }

    fn saved_transcript(
        &self,
        session: &str,
    ) -> Option<Vec<jucode_protocol::serve::TranscriptItem>> {
        log::saved_transcript(&self.home.join("sessions"), session)
    }

    /// `jucode-daemon tui --resume <id>`: this engine in the daemon binary's own TUI (or
    /// `JUCODE_BIN`'s), saving to the same log, so the daemon reloads its turns.
    fn tui_command(
        &self,
        spec: &jucode_engine::TuiSpec,
    ) -> Option<Result<jucode_engine::TuiCommand, EngineError>> {
        let program = match std::env::var_os("JUCODE_BIN").filter(|b| !b.is_empty()) {
            Some(bin) => PathBuf::from(bin),
            None => match std::env::current_exe() {
                Ok(exe) => exe,
                Err(e) => {
                    return Some(Err(EngineError::Unavailable(format!(
                        "cannot find the daemon binary for its TUI: {e}"
                    ))));
                }
            },
        };
        Some(Ok(tui_args(&self.home, spec, program)))
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
            // An agent's sandbox is its setting: a session that needs bwrap and has none does
            // not start, rather than run looser than configured.
            if spec.agent.is_some()
                && options.sandbox != Mode::FullAccess
                && let Err(why) = &sandbox
            {
                let error = format!(
                    "this agent's sandbox ({}) is not available: {why}",
                    options.sandbox.as_str()
                );
                let _ = events
                    .send(EngineOutput::Exited { error: Some(error) })
                    .await;
                return;
            }
            let mut writable = extra;
            let mut readable = Vec::new();
            for (dir, rw) in &options.directories {
                if *rw {
                    // A rw directory must exist to be bound writable.
                    if let Ok(dir) = tokio::fs::canonicalize(dir).await
                        && dir.is_dir()
                        && !writable.contains(&dir)
                    {
                        writable.push(dir);
                    }
                } else {
                    // A ro one is kept even when missing, so creating it later still finds
                    // it read-only.
                    let dir = jucode_sandbox::resolve_path(Path::new("/"), dir)
                        .unwrap_or_else(|_| dir.clone());
                    if !readable.contains(&dir) {
                        readable.push(dir);
                    }
                }
            }
            let mut roots = vec![cwd.clone()];
            for dir in writable.iter().chain(&readable) {
                if !roots.contains(dir) {
                    roots.push(dir.clone());
                }
            }
            let bash_timeout_ms =
                config::Config::load(&home.join("config.json"), |v| std::env::var(v).ok())
                    .map_or(config::DEFAULT_BASH_TIMEOUT_MS, |c| c.bash_timeout_ms);
            let env = tools::ToolEnv {
                policy: Policy {
                    mode: options.sandbox,
                    cwd: cwd.clone(),
                    writable,
                    readable,
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
                    env,
                    mode: options.mode,
                    model: options.model,
                    resume: spec.resume,
                    seat: spec.agent,
                    command_rules: options.command_rules,
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

/// The TUI's command line: the conversation, its directories, mode and model, and this home.
fn tui_args(
    home: &Path,
    spec: &jucode_engine::TuiSpec,
    program: PathBuf,
) -> jucode_engine::TuiCommand {
    let mut args = vec![
        "tui".to_string(),
        "--resume".to_string(),
        spec.session.clone(),
        "--cwd".to_string(),
        spec.cwd.display().to_string(),
    ];
    for dir in &spec.extra_dirs {
        args.push("--add-dir".into());
        args.push(dir.display().to_string());
    }
    // Plan is not a jucode mode (read_options warns and uses manual): the TUI does the same.
    if let Some(mode) = spec.approval_mode.filter(|m| *m != ApprovalMode::Plan) {
        args.push("--approval-mode".into());
        args.push(mode.as_str().to_string());
    }
    if let Some(model) = &spec.model {
        args.push("--model".into());
        args.push(model.clone());
    }
    jucode_engine::TuiCommand {
        program,
        args,
        env: vec![("JUCODE_HOME".into(), home.display().to_string())],
        env_remove: Vec::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_tui_resumes_the_conversation_with_its_mode_model_and_home() {
        let spec = jucode_engine::TuiSpec {
            session: "s-1".into(),
            cwd: PathBuf::from("/p"),
            extra_dirs: vec![PathBuf::from("/q")],
            approval_mode: Some(ApprovalMode::AutoEdit),
            model: Some("m".into()),
            gateway: false,
        };
        let cmd = tui_args(Path::new("/h/.jucode"), &spec, PathBuf::from("/bin/jd"));
        assert_eq!(
            cmd.args,
            [
                "tui",
                "--resume",
                "s-1",
                "--cwd",
                "/p",
                "--add-dir",
                "/q",
                "--approval-mode",
                "auto-edit",
                "--model",
                "m"
            ]
        );
        assert_eq!(
            cmd.env,
            [("JUCODE_HOME".to_string(), "/h/.jucode".to_string())]
        );
        let plan = jucode_engine::TuiSpec {
            approval_mode: Some(ApprovalMode::Plan),
            model: None,
            gateway: false,
            extra_dirs: Vec::new(),
            ..spec
        };
        let cmd = tui_args(Path::new("/h"), &plan, PathBuf::from("/bin/jd"));
        assert_eq!(cmd.args, ["tui", "--resume", "s-1", "--cwd", "/p"]);
    }

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

    #[test]
    fn directories_and_command_rules_are_read_and_bad_entries_warned_about() {
        let obj = |v: Value| v.as_object().cloned().unwrap();
        let o = read_options(&obj(json!({
            "directories": [
                {"path": "/data", "mode": "rw"},
                {"path": "/docs", "mode": "ro"},
                {"path": "/odd", "mode": "RW"},
                {"path": "relative", "mode": "rw"},
                {"mode": "rw"},
            ],
            "command_rules": [
                {"prefix": "git push", "action": "ask"},
                {"prefix": "npm  publish", "action": "forbid"},
                {"prefix": "rm", "action": "deny"},
                {"prefix": "  ", "action": "allow"},
            ],
        })));
        assert_eq!(
            o.directories,
            vec![
                (PathBuf::from("/data"), true),
                (PathBuf::from("/docs"), false),
                (PathBuf::from("/odd"), false),
            ]
        );
        let rules: Vec<(String, RuleAction)> = o
            .command_rules
            .iter()
            .map(|r| (r.prefix(), r.action()))
            .collect();
        assert_eq!(
            rules,
            vec![
                ("git push".to_string(), RuleAction::Ask),
                ("npm publish".to_string(), RuleAction::Forbid),
            ]
        );
        let warning = o.warning.unwrap();
        for part in [
            "taken as ro",
            "relative",
            "no path",
            "`deny`",
            "empty prefix",
        ] {
            assert!(warning.contains(part), "{part}: {warning}");
        }
        let o = read_options(&obj(json!({})));
        assert!(o.directories.is_empty() && o.command_rules.is_empty());
        assert!(o.warning.is_none());
    }
}
