//! The folder a target's files go in, shared by the targets that write (`jsonl_log`,
//! `upload_chunks`, the engine line targets).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A folder of this process's own, `jucode-fuzz-<name>-<pid>`, on tmpfs when there is one
/// (fsyncs and file churn cost nothing there) and in the temp dir otherwise. Made on the first
/// call; a process runs one target, so the first `name` is the one kept.
pub fn scratch(name: &str) -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = PathBuf::from("/dev/shm");
        let base = if base.is_dir() {
            base
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("jucode-fuzz-{name}-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        dir
    })
}
