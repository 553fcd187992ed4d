//! A JSONL log whose bytes are arbitrary: open recovers (drops a torn last line) or refuses,
//! and what it recovered reads back the same on a second open.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use jucode_store::JsonlLog;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // tmpfs when there is one: open fsyncs, and a disk makes that the whole cost.
        let base = PathBuf::from("/dev/shm");
        let base = if base.is_dir() {
            base
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("jucode-fuzz-jsonl-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let path = scratch().join("log.jsonl");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let Ok((log, first)) = JsonlLog::open::<Value>(&path) else {
        return;
    };
    drop(log);
    let Ok((_, again)) = JsonlLog::open::<Value>(&path) else {
        panic!("a log open recovered fails to open again");
    };
    assert_eq!(first, again, "recovery is not stable");
});
