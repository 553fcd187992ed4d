//! Shared by the engine line targets: the input is an engine's stdout, one line per `\n`,
//! handed to a fresh adapter session with no process behind it (`jucode_adapters::replay`).

use std::path::PathBuf;
use std::sync::OnceLock;

use jucode_adapters::replay::{Engine, Replay};
use jucode_engine::EngineOutput;

/// The session's directory: tmpfs when there is one (ACP `fs/write_text_file` writes there).
fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = PathBuf::from("/dev/shm");
        let base = if base.is_dir() {
            base
        } else {
            std::env::temp_dir()
        };
        base.join(format!("jucode-fuzz-lines-{}", std::process::id()))
    })
}

pub fn run(engine: Engine, data: &[u8]) {
    let dir = scratch();
    // A clean directory per input, so one input's files never change the next one's run.
    let _ = std::fs::remove_dir_all(dir);
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let Ok(mut replay) = Replay::new(engine, dir) else {
        panic!("a replay session did not open");
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
}
