//! `jucode-daemon serve`: one session of the built-in engine over stdin/stdout, for editors
//! and scripts. `hello` first, then the session's events (each with `session`); ops are read
//! one JSON object per line. Exits 0 on `shutdown`, `/quit`, or the end of stdin.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use jucode_engine::{EngineFactory as _, EngineOutput, StartSpec};
use jucode_protocol::{Object, PROTOCOL_VERSION};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};

pub struct ServeArgs {
    pub session: Option<String>,
    pub cwd: Option<PathBuf>,
    pub resume: bool,
    pub extra_dirs: Vec<PathBuf>,
    pub home: Option<PathBuf>,
}

/// One stdout line, flushed at once (the protocol's framing).
fn emit(value: &Value) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, value).context("write stdout")?;
    out.write_all(b"\n").context("write stdout")?;
    out.flush().context("flush stdout")
}

/// A new session id from the clock and the process id: unique enough for one machine.
fn new_session_id() -> String {
    use jucode_clock::Clock as _;
    // A one-shot command started outside any hub: the system clock.
    let nanos = jucode_clock::SystemClock::new()
        .now()
        .as_nanosecond()
        .max(0);
    format!("serve-{nanos:x}-{:x}", std::process::id())
}

/// Reads one op line: `Err` is the text of the `error` event to send.
fn parse_op(line: &str) -> Result<Object, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("invalid command: {e}"))?;
    let Value::Object(op) = value else {
        return Err("invalid command: an op must be a JSON object".into());
    };
    match op.get("op") {
        Some(Value::String(name)) if !name.is_empty() => Ok(op),
        _ => Err("invalid command: missing field `op`".into()),
    }
}

pub async fn run(args: ServeArgs) -> Result<()> {
    let user_home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .context("HOME is not set")?;
    let home = args.home.unwrap_or_else(|| user_home.join(".jucode"));
    let cwd = match args.cwd {
        Some(cwd) => cwd,
        None => std::env::current_dir().context("read the current directory")?,
    };
    let session = args.session.unwrap_or_else(new_session_id);
    let engine = jucode_agent::JucodeEngine::new(home, user_home);
    let mut handle = engine
        .start(StartSpec {
            session: session.clone(),
            cwd,
            extra_dirs: args.extra_dirs,
            options: Object::new(),
            resume: args.resume,
            agent: None,
        })
        .context("start the session")?;
    emit(
        &json!({"type": "hello", "protocol": PROTOCOL_VERSION, "version": env!("CARGO_PKG_VERSION")}),
    )?;

    let ops = handle.ops.clone();
    let stdin_session = session.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.trim().is_empty() {
                continue;
            }
            match parse_op(&line) {
                Ok(op) => {
                    if ops.send(op).is_err() {
                        return;
                    }
                }
                Err(message) => {
                    let event =
                        json!({"type": "error", "session": stdin_session, "message": message});
                    if emit(&event).is_err() {
                        return;
                    }
                }
            }
        }
        // End of input: ask the session to stop.
        let mut shutdown = Object::new();
        shutdown.insert("op".into(), Value::String("shutdown".into()));
        let _ = ops.send(shutdown);
    });
    drop(handle.ops);
    while let Some(output) = handle.events.recv().await {
        match output {
            EngineOutput::Event(event) => emit(&Value::Object(event.with_session(&session).0))?,
            EngineOutput::Delta(text) => emit(&Value::Object(
                jucode_engine::delta_event(text).with_session(&session).0,
            ))?,
            EngineOutput::Exited { error: None } => return Ok(()),
            EngineOutput::Exited { error: Some(e) } => bail!("the session stopped: {e}"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_get_the_protocol_error_prefixes() {
        assert!(parse_op("{nope").is_err_and(|e| e.starts_with("invalid command: ")));
        assert!(parse_op("[1]").is_err_and(|e| e.starts_with("invalid command: ")));
        assert!(parse_op(r#"{"x":1}"#).is_err_and(|e| e == "invalid command: missing field `op`"));
        assert!(parse_op(r#"{"op":"interrupt"}"#).is_ok());
    }
}
