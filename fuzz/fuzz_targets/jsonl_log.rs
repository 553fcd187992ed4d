//! A JSONL log whose bytes are arbitrary: open recovers (drops a torn last line) or refuses,
//! and what it recovered reads back the same on a second open.
#![no_main]

use jucode_store::JsonlLog;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

#[path = "common/scratch.rs"]
mod scratch;

fuzz_target!(|data: &[u8]| {
    let path = scratch::scratch("jsonl").join("log.jsonl");
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
