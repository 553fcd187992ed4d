//! `jucode-daemon tui`: a terminal interface of the built-in jucode engine, so a jucode
//! conversation can move between the daemon's clients and a terminal like a Claude Code or
//! Codex one (the daemon's `session_tui` runs it on a pty).
//!
//! The engine runs in this process, as in the daemon: the TUI is one more client of its serve
//! v2 channels, and the engine's own log saves every turn, so the daemon reloads them when it
//! opens the session again. [`app`] is the state and the keys, [`view`] draws it, [`drive`]
//! is the loop between them, and [`run`] puts it on the real terminal.

pub mod app;
pub mod view;

use std::path::PathBuf;

use crossterm::event::{Event as TermEvent, EventStream};
use futures_util::{Stream, StreamExt as _};
use jucode_engine::{EngineError, EngineFactory as _, EngineHandle, EngineOutput, StartSpec};
use jucode_protocol::Object;
use ratatui::Terminal;
use ratatui::backend::Backend;
use serde_json::Value;

pub use app::{Action, App};

#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    #[error("could not start the session: {0}")]
    Start(#[from] EngineError),
    #[error("the terminal failed: {0}")]
    Terminal(String),
    #[error("the session stopped: {0}")]
    Stopped(String),
}

/// What `jucode-daemon tui` was asked for.
#[derive(Debug, Clone)]
pub struct TuiArgs {
    /// The conversation id.
    pub session: String,
    /// Continue what is saved under `session` (nothing saved yet: it starts empty).
    pub resume: bool,
    pub cwd: PathBuf,
    pub extra_dirs: Vec<PathBuf>,
    /// The jucode home (config.json, sessions/) and the user's home.
    pub home: PathBuf,
    pub user_home: PathBuf,
    /// The session's `approval_mode` and `model`, as a client's options.
    pub options: Object,
}

/// Starts the session's engine in this process.
pub fn start(args: &TuiArgs) -> Result<EngineHandle, TuiError> {
    let engine = jucode_agent::JucodeEngine::new(args.home.clone(), args.user_home.clone());
    Ok(engine.start(StartSpec {
        session: args.session.clone(),
        cwd: args.cwd.clone(),
        extra_dirs: args.extra_dirs.clone(),
        options: args.options.clone(),
        resume: args.resume,
        agent: None,
    })?)
}

fn term_error(e: impl std::fmt::Display) -> TuiError {
    TuiError::Terminal(e.to_string())
}

/// Runs the TUI on `terminal` until the user leaves and the engine has stopped (its turns
/// saved). `input` is the terminal's events; `on_frame` sees every drawn frame (tests read the
/// screen there). Returns an error when the engine stops on its own with one.
pub async fn drive<B, S>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    mut input: S,
    mut engine: EngineHandle,
    mut on_frame: impl FnMut(&Terminal<B>),
) -> Result<(), TuiError>
where
    B: Backend,
    S: Stream<Item = std::io::Result<TermEvent>> + Unpin,
{
    let ops = engine.ops.clone();
    let send = |op: &Value| match op {
        Value::Object(op) => ops.send(op.clone()).is_ok(),
        _ => true,
    };
    let mut input_open = true;
    loop {
        terminal
            .draw(|frame| view::draw(frame, app))
            .map_err(term_error)?;
        on_frame(terminal);
        tokio::select! {
            event = input.next(), if input_open => {
                let action = match event {
                    Some(Ok(TermEvent::Key(key))) => app.on_key(key),
                    Some(Ok(TermEvent::Paste(text))) => {
                        app.on_paste(&text);
                        None
                    }
                    Some(Ok(_)) => None,
                    Some(Err(e)) => return Err(term_error(e)),
                    // The terminal went away (a closed pty): leave as if asked.
                    None => {
                        input_open = false;
                        app.quitting = true;
                        Some(Action::Quit)
                    }
                };
                match action {
                    Some(Action::Send(op)) if !send(&op) => {
                        return Err(TuiError::Stopped("the engine is gone".into()));
                    }
                    Some(Action::Send(_)) => {}
                    Some(Action::Quit) => {
                        // The engine saves as it goes; `shutdown` lets it finish cleanly.
                        let _ = send(&serde_json::json!({"op": "shutdown"}));
                    }
                    None => {}
                }
            }
            output = engine.events.recv() => {
                let mut output = output;
                // Take what else is waiting before drawing again (a burst of deltas).
                loop {
                    match output {
                        Some(EngineOutput::Event(event)) => app.on_event(&event),
                        Some(EngineOutput::Delta(text)) => {
                            app.on_event(&jucode_engine::delta_event(text));
                        }
                        Some(EngineOutput::Exited { error: Some(e) }) if !app.quitting => {
                            return Err(TuiError::Stopped(e));
                        }
                        Some(EngineOutput::Exited { .. }) | None => {
                            terminal
                                .draw(|frame| view::draw(frame, app))
                                .map_err(term_error)?;
                            on_frame(terminal);
                            return Ok(());
                        }
                    }
                    match engine.events.try_recv() {
                        Ok(next) => output = Some(next),
                        Err(_) => break,
                    }
                }
            }
        }
    }
}

/// Runs the TUI on this process's terminal (raw mode, the alternate screen, bracketed
/// paste), restored on the way out, a panic included.
pub async fn run(args: TuiArgs) -> Result<(), TuiError> {
    let engine = start(&args)?;
    let mut terminal = ratatui::try_init().map_err(term_error)?;
    let _ = crossterm::execute!(std::io::stdout(), crossterm::event::EnableBracketedPaste);
    let mut app = App::new(&args.session);
    let result = drive(&mut terminal, &mut app, EventStream::new(), engine, |_| {}).await;
    let _ = crossterm::execute!(std::io::stdout(), crossterm::event::DisableBracketedPaste);
    ratatui::restore();
    result
}
