//! Test support: a library loaded into the daemon with `LD_PRELOAD` that makes `fsync` and
//! `fdatasync` fail with `EIO` on chosen files, so the storage-fault tests can watch the daemon
//! meet a disk that loses writes (`bins/jucode-daemon/tests/fsync_faults.rs`).
//!
//! A call fails while both hold:
//! - the file named by `JUCODE_FSYNC_FAIL` exists (the test creates and removes it to switch
//!   the fault on and off while the daemon runs);
//! - the descriptor's path (`/proc/self/fd/N`) contains `JUCODE_FSYNC_FAIL_MATCH` (so one log
//!   can fail while the others work); a pattern ending in `$` must end the path instead (so a
//!   directory's own sync can fail while the files in it sync).
//!
//! Otherwise the real system call runs (`syscall(2)`, so no `dlsym` lookup of the next
//! definition is needed). With neither variable set the library changes nothing.
//!
//! Why a preloaded library: a failing file system through FUSE needs `/dev/fuse` and
//! privileges CI does not have, and dm-flakey needs root and a block device. The store only
//! calls `fsync` and `fdatasync` (std's `sync_all` and `sync_data`), so those two are all it
//! overrides. Linux only; elsewhere the library is empty.

// Exporting C symbols (`no_mangle`) and setting `errno` cannot be done in safe Rust; this
// crate is nothing but that, so the workspace's ban on unsafe code is lifted here alone.
#![allow(unsafe_code)]

#[cfg(target_os = "linux")]
mod shim {
    use std::ffi::OsStr;
    use std::os::raw::{c_int, c_long};
    use std::path::Path;

    /// The switch: the fault is on while this file exists.
    const FLAG: &str = "JUCODE_FSYNC_FAIL";
    /// Only descriptors whose path contains this fail.
    const MATCH: &str = "JUCODE_FSYNC_FAIL_MATCH";

    /// Whether a sync of `fd` should fail now.
    fn should_fail(fd: c_int) -> bool {
        let (Some(flag), Some(pattern)) = (std::env::var_os(FLAG), std::env::var_os(MATCH)) else {
            return false;
        };
        if flag.is_empty() || !Path::new(&flag).exists() {
            return false;
        }
        let Ok(target) = std::fs::read_link(format!("/proc/self/fd/{fd}")) else {
            return false;
        };
        contains(target.as_os_str(), &pattern)
    }

    /// Byte-wise substring test, or suffix test for a pattern ending in `$`; an empty
    /// pattern matches every path.
    fn contains(haystack: &OsStr, needle: &OsStr) -> bool {
        let (h, n) = (haystack.as_encoded_bytes(), needle.as_encoded_bytes());
        if let Some(suffix) = n.strip_suffix(b"$") {
            return h.ends_with(suffix);
        }
        n.is_empty() || h.windows(n.len()).any(|w| w == n)
    }

    fn sync(fd: c_int, nr: c_long) -> c_int {
        if should_fail(fd) {
            // SAFETY: __errno_location returns this thread's errno, valid for the thread's life.
            unsafe { *libc::__errno_location() = libc::EIO };
            return -1;
        }
        // SAFETY: fsync and fdatasync take one int and touch no memory of ours; syscall(2) sets
        // errno itself when the call fails.
        let rc = unsafe { libc::syscall(nr, fd) };
        // Their result is 0 or -1, so it fits.
        rc as c_int
    }

    /// Overrides libc's `fsync`.
    #[unsafe(no_mangle)]
    pub extern "C" fn fsync(fd: c_int) -> c_int {
        sync(fd, libc::SYS_fsync)
    }

    /// Overrides libc's `fdatasync`.
    #[unsafe(no_mangle)]
    pub extern "C" fn fdatasync(fd: c_int) -> c_int {
        sync(fd, libc::SYS_fdatasync)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_pattern_is_a_substring_of_the_path() {
            let path = OsStr::new("/tmp/x/.jucode/daemon/requirements.jsonl");
            assert!(contains(path, OsStr::new("requirements.jsonl")));
            assert!(contains(path, OsStr::new("")));
            assert!(!contains(path, OsStr::new("sessions.jsonl")));
            assert!(!contains(OsStr::new("short"), OsStr::new("much longer")));
            assert!(contains(path, OsStr::new(".jsonl$")));
            assert!(!contains(path, OsStr::new("/daemon$")));
            assert!(contains(
                OsStr::new("/tmp/x/.jucode/daemon"),
                OsStr::new("/daemon$")
            ));
        }
    }
}
