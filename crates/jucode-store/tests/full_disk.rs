//! A log on a file system that fills up: a small tmpfs. An append that does not fit fails with
//! the I/O error and leaves nothing of its line behind; once space returns the log takes
//! appends again, and reopening it finds every acknowledged record whole, none of the failed
//! ones, and no torn line. An atomic file write that does not fit keeps the old file.
//!
//! It mounts the tmpfs in a mount namespace of its own (`unshare -rm`, as root of a user
//! namespace, which needs no privileges where user namespaces are on, as bubblewrap needs
//! too): the test runs itself again in there. Ignored, for the slow suites:
//!   cargo nextest run -p jucode-store --run-ignored only -E 'binary(full_disk)'

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{ErrorKind, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;

use jucode_store::{JsonlLog, StoreError, write_json_atomic};
use serde_json::{Value, json};

/// A mounted tmpfs of `size`, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("running mount");
        assert!(
            status.success(),
            "mount -t tmpfs failed ({status}): run as root"
        );
        Tmpfs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Fills the file system with one file until a write fails for lack of space.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 4096];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(28) || e.kind() == ErrorKind::StorageFull => break,
            Err(e) => panic!("filling: {e}"),
        }
    }
    path
}

fn record(i: usize, pad: usize) -> Value {
    json!({"kind": "saved", "n": i, "pad": "x".repeat(pad)})
}

/// Set in the copy of this test that runs inside the namespace.
const INNER: &str = "JUCODE_FULL_DISK_INNER";

/// Runs test `name` of this binary again in a new user and mount namespace; true when it is
/// that run.
fn in_own_mount_namespace(name: &str) -> bool {
    if std::env::var_os(INNER).is_some() {
        return true;
    }
    let out = Command::new("unshare")
        .args(["-r", "-m"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(INNER, "1")
        .output()
        .expect("running unshare");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("1 passed"),
        "the run in its own mount namespace ({}):\n{text}",
        out.status
    );
    false
}

#[test]
#[ignore = "slow suite: mounts a small tmpfs in a namespace of its own"]
fn a_log_on_a_full_disk_refuses_appends_then_takes_them_again_with_nothing_torn() {
    if !in_own_mount_namespace(
        "a_log_on_a_full_disk_refuses_appends_then_takes_them_again_with_nothing_torn",
    ) {
        return;
    }
    let fs = Tmpfs::mount("256k");
    let path = fs.path().join("log.jsonl");
    let (mut log, _) = JsonlLog::open::<Value>(&path).unwrap();
    for i in 0..3 {
        log.append(&record(i, 100)).unwrap();
    }
    let filler = fill(fs.path());
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
    let settings = fs.path().join("settings.json");
    std::fs::remove_file(&filler).unwrap();
    write_json_atomic(&settings, &json!({"v": 1})).unwrap();
    let filler = fill(fs.path());
    assert!(write_json_atomic(&settings, &json!({"v": 2, "pad": "y".repeat(50_000)})).is_err());
    let kept: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    assert_eq!(kept, json!({"v": 1}));
    assert_eq!(
        std::fs::read_dir(fs.path()).unwrap().count(),
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
