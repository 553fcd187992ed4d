//! The service's log file, bounded: `daemon.log` is moved to `daemon.log.1` (and older ones
//! along to `.2` … `.KEEP`) once it passes its size, and the oldest is dropped.
//!
//! Written here rather than with `file-rotate`: that crate panics from its write path when
//! the log's directory is missing ("create dir"), and a daemon must never die of its log.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The size past which the log moves aside.
pub const LOG_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// How many moved-aside logs are kept (`daemon.log.1` is the newest).
pub const LOG_KEEP: usize = 3;

/// A log file that rotates by size. Each `write` is appended whole; a rotation happens before
/// a write once the file has passed its limit, so a log line is never split across files.
#[derive(Debug)]
pub struct RotatingLog {
    path: PathBuf,
    max_bytes: u64,
    keep: usize,
    file: Option<File>,
    size: u64,
}

impl RotatingLog {
    /// Opens (appending) or creates `path` with mode 0600, its directory too.
    pub fn open(path: &Path, max_bytes: u64, keep: usize) -> io::Result<RotatingLog> {
        let mut log = RotatingLog {
            path: path.to_path_buf(),
            max_bytes: max_bytes.max(1),
            keep,
            file: None,
            size: 0,
        };
        log.reopen()?;
        Ok(log)
    }

    /// The moved-aside file number `n` (1 is the newest).
    pub fn aside(&self, n: usize) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    fn reopen(&mut self) -> io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&self.path)?;
        self.size = file.metadata().map(|m| m.len()).unwrap_or(0);
        self.file = Some(file);
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.file = None;
        if self.keep == 0 {
            std::fs::remove_file(&self.path).or_else(ignore_missing)?;
        } else {
            std::fs::remove_file(self.aside(self.keep)).or_else(ignore_missing)?;
            for n in (1..self.keep).rev() {
                std::fs::rename(self.aside(n), self.aside(n + 1)).or_else(ignore_missing)?;
            }
            std::fs::rename(&self.path, self.aside(1)).or_else(ignore_missing)?;
        }
        self.reopen()
    }
}

fn ignore_missing(e: io::Error) -> io::Result<()> {
    if e.kind() == io::ErrorKind::NotFound {
        Ok(())
    } else {
        Err(e)
    }
}

impl Write for RotatingLog {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.size >= self.max_bytes {
            // A failed rotation (a full disk, the directory gone) must not lose the line when
            // a file can still take it; the next write tries again.
            if let Err(e) = self.rotate()
                && self.file.is_none()
            {
                self.reopen().map_err(|_| e)?;
            }
        } else if self.file.is_none() || !self.path.exists() {
            // Removed under us (by hand, or another rotator): a stat per line is cheap next
            // to losing the log into an unlinked file.
            self.reopen()?;
        }
        let Some(file) = self.file.as_mut() else {
            return Err(io::Error::other("the log file is not open"));
        };
        // Appended whole: tracing's formatter hands over one event per write.
        file.write_all(buf)?;
        self.size += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.file.as_mut() {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// One log line in one write, as tracing's formatter hands an event over.
    fn line(log: &mut RotatingLog, text: &str) {
        log.write_all(format!("{text}\n").as_bytes()).unwrap();
    }

    #[test]
    fn the_log_moves_aside_past_its_size_and_keeps_only_the_newest_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs").join("daemon.log");
        let mut log = RotatingLog::open(&path, 100, 2).unwrap();
        for n in 0..40 {
            line(&mut log, &format!("line {n:02} of the daemon's log"));
        }
        let names: Vec<String> = {
            let mut v: Vec<String> = std::fs::read_dir(path.parent().unwrap())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names, ["daemon.log", "daemon.log.1", "daemon.log.2"]);
        // Each file is at most the limit plus one line; the newest lines are in daemon.log.
        for name in &names {
            let text = std::fs::read_to_string(path.parent().unwrap().join(name)).unwrap();
            assert!(text.len() <= 100 + 30, "{name}: {} bytes", text.len());
            assert!(text.ends_with('\n'), "{name} ends inside a line");
        }
        let newest = std::fs::read_to_string(&path).unwrap();
        assert!(
            newest.ends_with("line 39 of the daemon's log\n"),
            "{newest}"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_log_whose_directory_vanishes_comes_back_instead_of_failing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon").join("daemon.log");
        let mut log = RotatingLog::open(&path, 50, 1).unwrap();
        line(&mut log, "before the directory was removed, long enough");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
        line(&mut log, "after");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "after\n");
    }

    #[test]
    fn an_existing_log_is_appended_to_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.log");
        std::fs::write(&path, "x".repeat(80) + "\n").unwrap();
        let mut log = RotatingLog::open(&path, 100, 1).unwrap();
        line(&mut log, &"y".repeat(30));
        line(&mut log, "z");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "z\n");
        assert!(
            std::fs::read_to_string(log.aside(1))
                .unwrap()
                .starts_with("xxx")
        );
    }
}
