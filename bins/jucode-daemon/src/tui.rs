//! `jucode-daemon tui [--resume <id>]`: the built-in engine's terminal interface
//! ([`jucode_tui`]) on this terminal, in the current directory or `--cwd`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use jucode_protocol::Object;
use serde_json::Value;

pub struct TuiCmd {
    pub resume: Option<String>,
    pub cwd: Option<PathBuf>,
    pub extra_dirs: Vec<PathBuf>,
    pub approval_mode: Option<String>,
    pub model: Option<String>,
    pub home: Option<PathBuf>,
}

/// A new conversation id from the clock and the process id: unique enough for one machine.
fn new_session_id() -> String {
    use jucode_clock::Clock as _;
    // A one-shot command started outside any hub: the system clock.
    let nanos = jucode_clock::SystemClock::new()
        .now()
        .as_nanosecond()
        .max(0);
    format!("tui-{nanos:x}-{:x}", std::process::id())
}

pub async fn run(cmd: TuiCmd) -> Result<()> {
    let user_home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .context("HOME is not set")?;
    let home = cmd.home.unwrap_or_else(|| user_home.join(".jucode"));
    let cwd = match cmd.cwd {
        Some(cwd) => cwd,
        None => std::env::current_dir().context("read the current directory")?,
    };
    let mut options = Object::new();
    if let Some(mode) = cmd.approval_mode {
        options.insert("approval_mode".into(), Value::String(mode));
    }
    if let Some(model) = cmd.model {
        options.insert("model".into(), Value::String(model));
    }
    let resume = cmd.resume.is_some();
    let session = cmd.resume.unwrap_or_else(new_session_id);
    jucode_tui::run(jucode_tui::TuiArgs {
        session: session.clone(),
        resume,
        cwd,
        extra_dirs: cmd.extra_dirs,
        home,
        user_home,
        options,
    })
    .await?;
    // Back on the normal screen: say how to come back.
    println!("jucode-daemon tui --resume {session}");
    Ok(())
}
