//! A file system that fills up, for the storage-fault tests: a small tmpfs mounted in a mount
//! namespace of the test's own. `unshare -rm` makes the test root of a new user namespace,
//! which may mount a tmpfs without privileges wherever user namespaces are on (bubblewrap
//! needs the same). The test runs itself again in there ([`in_own_mount_namespace`]), with
//! whatever it starts (the daemon) as its children.

// Test support: a test that cannot set up its file system should fail at once, naming why.
#![allow(clippy::expect_used, clippy::panic)]

use std::io::{ErrorKind, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set in the copy of the test that runs inside the namespace.
const INNER: &str = "JUCODE_FULL_DISK_INNER";

/// Runs test `name` of the running test binary again in a new user and mount namespace and
/// asserts that it passed. Returns true in that run (go on with the test), false in the outer
/// one (the test is done).
pub fn in_own_mount_namespace(name: &str) -> bool {
    if std::env::var_os(INNER).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new("unshare")
        .args(["-r", "-m"])
        .arg(exe)
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

/// Mounts a tmpfs of `size` (`256k`, `4m`) on `dir`, creating it. Only inside the namespace.
pub fn mount_tmpfs(dir: &Path, size: &str) {
    std::fs::create_dir_all(dir).expect("the mount point");
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .status()
        .expect("running mount");
    assert!(
        status.success(),
        "mount -t tmpfs on {}: {status}",
        dir.display()
    );
}

/// Fills the file system holding `dir` with one file, `dir/filler`, until a write fails for
/// lack of space; returns its path (remove it to give the space back).
pub fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).expect("the filler file");
    let chunk = vec![0u8; 4096];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::StorageFull || e.raw_os_error() == Some(28) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    path
}
