//! A log on a file system that fills up: a small tmpfs. An append that does not fit fails with
//! the I/O error and leaves nothing of its line behind; once space returns the log takes
//! appends again, and reopening it finds every acknowledged record whole, none of the failed
//! ones, and no torn line. An atomic file write that does not fit keeps the old file.
//!
//! A test of jucode-store kept here, next to the namespace and tmpfs helpers it shares with the
//! daemon's `storage_faults.rs` (`jucode_testsupport::full_disk`). Ignored, for the slow
//! suites:
//!   cargo nextest run -p jucode-testsupport --run-ignored only -E 'binary(full_disk)'

#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_store::{JsonlLog, StoreError, write_json_atomic};
use jucode_testsupport::full_disk::{fill, in_own_mount_namespace, mount_tmpfs};
use serde_json::{Value, json};

fn record(i: usize, pad: usize) -> Value {
    json!({"kind": "saved", "n": i, "pad": "x".repeat(pad)})
}

#[test]
#[ignore = "slow suite: mounts a small tmpfs in a namespace of its own"]
fn a_log_on_a_full_disk_refuses_appends_then_takes_them_again_with_nothing_torn() {
    if !in_own_mount_namespace(
        "a_log_on_a_full_disk_refuses_appends_then_takes_them_again_with_nothing_torn",
    ) {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let fs = root.path().join("fs");
    mount_tmpfs(&fs, "256k");
    let path = fs.join("log.jsonl");
    let (mut log, _) = JsonlLog::open::<Value>(&path).unwrap();
    for i in 0..3 {
        log.append(&record(i, 100)).unwrap();
    }
    let filler = fill(&fs);
    // What no longer fits is refused with the I/O error, each time, and leaves no bytes.
    let len = std::fs::metadata(&path).unwrap().len();
    for i in 100..105 {
        match log.append(&record(i, 20_000)) {
            Err(StoreError::Io { source, .. }) => {
                assert_eq!(source.raw_os_error(), Some(28), "{source}")
            }
            other => panic!("append on a full disk: {other:?}"),
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    }
    // An atomic write that does not fit keeps the old file.
    let settings = fs.join("settings.json");
    std::fs::remove_file(&filler).unwrap();
    write_json_atomic(&settings, &json!({"v": 1})).unwrap();
    let filler = fill(&fs);
    assert!(write_json_atomic(&settings, &json!({"v": 2, "pad": "y".repeat(50_000)})).is_err());
    let kept: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    assert_eq!(kept, json!({"v": 1}));
    assert_eq!(
        std::fs::read_dir(&fs).unwrap().count(),
        3,
        "a temporary file was left behind"
    );

    // Space again: the same log takes appends, and a reopen reads exactly what was
    // acknowledged.
    std::fs::remove_file(&filler).unwrap();
    log.append(&record(3, 20_000)).unwrap();
    log.append(&record(4, 10)).unwrap();
    drop(log);
    let (_, records) = JsonlLog::open::<Value>(&path).unwrap();
    let numbers: Vec<u64> = records.iter().map(|r| r["n"].as_u64().unwrap()).collect();
    assert_eq!(numbers, vec![0, 1, 2, 3, 4]);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 5, "a torn or merged line");
}
