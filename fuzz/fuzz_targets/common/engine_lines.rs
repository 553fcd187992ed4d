//! Shared by the engine line targets: the input is an engine's stdout, one line per `\n`,
//! handed to a fresh adapter session with no process behind it (`jucode_adapters::replay`).
//!
//! What one input leaves behind never reaches the next: the session is new for each, the
//! runtime kept between them is handed back only with no task left on it
//! (`Replay::into_runtime`), and the folder is emptied whenever an input left files in it.

use std::cell::RefCell;
use std::path::Path;

use jucode_adapters::replay::{Engine, Replay, ReplayRuntime};
use jucode_engine::EngineOutput;

#[path = "scratch.rs"]
mod scratch;

thread_local! {
    /// The runtime of the input before, when it left nothing on it.
    static RUNTIME: RefCell<Option<ReplayRuntime>> = const { RefCell::new(None) };
}

/// Whether `dir` is there and holds nothing.
fn is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
}

pub fn run(engine: Engine, data: &[u8]) {
    // The session's directory; only ACP's `fs/write_text_file` and Codex's thread map write
    // in it, so most inputs leave it empty and the next needs no new one.
    let dir = scratch::scratch("lines");
    if !is_empty(dir) {
        let _ = std::fs::remove_dir_all(dir);
        if std::fs::create_dir_all(dir).is_err() {
            return;
        }
    }
    let runtime = match RUNTIME.take() {
        Some(runtime) => runtime,
        None => match ReplayRuntime::new() {
            Ok(runtime) => runtime,
            Err(e) => panic!("no runtime for a replay: {e}"),
        },
    };
    let mut replay = match Replay::on(runtime, engine, dir) {
        Ok(replay) => replay,
        Err(e) => panic!("a replay session did not open: {e}"),
    };
    for line in data.split(|b| *b == b'\n') {
        // The CLI reader stops at a line that is not UTF-8, as `lines()` does.
        let Ok(line) = std::str::from_utf8(line) else {
            break;
        };
        let ended = replay.ended();
        let out = replay.line(line);
        if ended {
            assert!(out.is_empty(), "an ended session still sent {out:?}");
        }
        for o in &out {
            if let EngineOutput::Event(e) = o {
                assert!(!e.kind().is_empty(), "an event with no type: {e:?}");
            }
        }
        // Every frame the adapter writes back is one JSON value on its own line.
        let _ = replay.written();
    }
    RUNTIME.set(replay.into_runtime());
}
