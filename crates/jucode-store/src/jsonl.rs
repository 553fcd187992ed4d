//! Append-only JSON-lines logs.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Result, StoreError, io_err};
use crate::fsutil::{create_mode, parent_dir, sync_dir};

/// Read buffer for folding a log; big enough that a million short lines cost
/// few syscalls.
const READ_BUF: usize = 256 * 1024;

/// An append-only JSON-lines log: one compact JSON record per line, each
/// ending in `'\n'`.
///
/// Opening folds the file and repairs a torn tail left by a crash. Appends are
/// durable when they return. A failed append leaves nothing of its records in
/// the file when it can (the file is cut back to its length before); after a
/// failed fsync, or a cut that failed, the log is poisoned and refuses further
/// appends ([`StoreError::Poisoned`]).
#[derive(Debug)]
pub struct JsonlLog {
    path: PathBuf,
    file: File,
    poisoned: bool,
    /// `File::sync_data`; a unit test puts a failing one in its place.
    sync: fn(&File) -> std::io::Result<()>,
}

/// Where folding stopped.
struct Scan {
    /// End of the last line that is kept.
    good_end: u64,
    /// Length of the file as read.
    total: u64,
}

impl JsonlLog {
    /// Opens or creates `path` (creating it fsyncs the parent directory) and
    /// reads every record.
    ///
    /// A final line that lacks its `'\n'` or does not parse is a torn write:
    /// it is dropped, the file is truncated to the last good line and fsynced,
    /// and a warning names the file and the bytes dropped. A bad line before
    /// the last one is damage: [`StoreError::Corrupt`] with its 1-based line
    /// number. Blank lines are skipped.
    pub fn open<T: DeserializeOwned>(path: &Path) -> Result<(JsonlLog, Vec<T>)> {
        let file = open_or_create(path)?;
        let mut records = Vec::new();
        let scan = fold(&file, path, &mut records)?;
        if scan.good_end < scan.total {
            let dropped = scan.total - scan.good_end;
            file.set_len(scan.good_end).map_err(io_err(path))?;
            // sync_all: the size change is metadata.
            file.sync_all().map_err(io_err(path))?;
            tracing::warn!(
                path = %path.display(),
                dropped_bytes = dropped,
                "{}: dropped {dropped} bytes of an incomplete record at the end (cut short by a crash)",
                path.display()
            );
        }
        let log = JsonlLog {
            path: path.to_path_buf(),
            file,
            poisoned: false,
            sync: File::sync_data,
        };
        Ok((log, records))
    }

    /// Appends one record as one line; returns once it is durable.
    pub fn append<T: Serialize>(&mut self, record: &T) -> Result<()> {
        self.append_all(std::slice::from_ref(record))
    }

    /// Appends several records with one write and one fsync.
    pub fn append_all<T: Serialize>(&mut self, records: &[T]) -> Result<()> {
        self.check_poisoned()?;
        let mut buf = Vec::new();
        for record in records {
            // Compact JSON escapes newlines inside strings, so one record is one line.
            serde_json::to_writer(&mut buf, record).map_err(|source| StoreError::Json {
                path: self.path.clone(),
                source,
            })?;
            buf.push(b'\n');
        }
        if buf.is_empty() {
            return Ok(());
        }
        self.write_durable(&buf)
    }

    /// The file this log appends to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check_poisoned(&self) -> Result<()> {
        if self.poisoned {
            return Err(StoreError::Poisoned {
                path: self.path.clone(),
            });
        }
        Ok(())
    }

    fn write_durable(&mut self, bytes: &[u8]) -> Result<()> {
        let io = |source| StoreError::Io {
            path: self.path.clone(),
            source,
        };
        let before = self.file.metadata().map_err(io)?.len();
        if let Err(source) = self.file.write_all(bytes) {
            // A write cut short (a full disk) may leave part of the line behind; the next
            // append must not continue it. Cut the file back to where it was: then nothing of
            // this record is on disk and the log stays usable, so writes work again once
            // there is space. Only if that fails too is the log given up.
            if self.cut_back(before).is_err() {
                self.poisoned = true;
            }
            return Err(StoreError::Io {
                path: self.path.clone(),
                source,
            });
        }
        if let Err(source) = (self.sync)(&self.file) {
            // The bytes are in the page cache and would reach the disk later, so a record
            // whose op is refused would come back after a restart: cut them off (best effort;
            // the sync of the cut may fail too). Poisoned even so: after a failed fsync the
            // page cache may claim data the disk lacks, and a retry could report success.
            let _ = self.cut_back(before);
            self.poisoned = true;
            return Err(StoreError::Io {
                path: self.path.clone(),
                source,
            });
        }
        Ok(())
    }

    /// Truncates the file to `len` and syncs the new size.
    fn cut_back(&self, len: u64) -> std::io::Result<()> {
        self.file.set_len(len)?;
        (self.sync)(&self.file)
    }
}

/// Opens for read + append (O_APPEND keeps each line write whole at the end),
/// creating the file with mode 0600 if missing.
fn open_or_create(path: &Path) -> Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true).append(true);
    match opts.open(path) {
        Ok(f) => return Ok(f),
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(path)(e)),
    }
    let mut create = OpenOptions::new();
    create.read(true).append(true).create_new(true);
    match create_mode(&mut create, 0o600).open(path) {
        Ok(f) => {
            sync_dir(parent_dir(path))?;
            Ok(f)
        }
        // Lost a race with another creator: use theirs.
        Err(e) if e.kind() == ErrorKind::AlreadyExists => opts.open(path).map_err(io_err(path)),
        Err(e) => Err(io_err(path)(e)),
    }
}

/// Parses every line into `records`; decides how much of the file to keep.
fn fold<T: DeserializeOwned>(file: &File, path: &Path, records: &mut Vec<T>) -> Result<Scan> {
    let mut reader = BufReader::with_capacity(READ_BUF, file);
    let mut line = Vec::with_capacity(1024);
    let mut offset: u64 = 0;
    let mut good_end: u64 = 0;
    let mut line_no: usize = 0;
    // A line that failed to parse; torn if nothing but blank lines follow it.
    let mut failed: Option<(usize, String)> = None;

    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        offset += n as u64;

        let (body, complete) = match line.strip_suffix(b"\n") {
            Some(body) => (body, true),
            None => (line.as_slice(), false),
        };
        let blank = body.iter().all(u8::is_ascii_whitespace);
        if blank {
            if complete && failed.is_none() {
                good_end = offset;
            }
            continue;
        }
        if let Some((bad_line, reason)) = failed.take() {
            return Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                line: bad_line,
                reason,
            });
        }
        if !complete {
            // Unterminated final line: the write never finished, drop it even if it parses.
            break;
        }
        match serde_json::from_slice::<T>(body) {
            Ok(record) => {
                records.push(record);
                good_end = offset;
            }
            Err(e) => failed = Some((line_no, e.to_string())),
        }
    }
    Ok(Scan {
        good_end,
        total: offset,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// /dev/full fails every write with ENOSPC: a real failed write, no mocks.
    #[cfg(target_os = "linux")]
    #[test]
    fn failed_write_poisons_the_log_for_good() {
        let Ok(full) = OpenOptions::new().append(true).open("/dev/full") else {
            eprintln!("skipped: /dev/full is not available");
            return;
        };
        let mut log = JsonlLog {
            path: PathBuf::from("/dev/full"),
            file: full,
            poisoned: false,
            sync: File::sync_data,
        };
        let err = log.append(&1u32).unwrap_err();
        assert!(matches!(err, StoreError::Io { .. }), "{err:?}");

        // Point the log at a healthy file: it must still refuse, and write nothing.
        let dir = tempfile::tempdir().unwrap();
        let healthy = dir.path().join("log.jsonl");
        log.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&healthy)
            .unwrap();
        for _ in 0..2 {
            let err = log.append(&2u32).unwrap_err();
            assert!(matches!(err, StoreError::Poisoned { .. }), "{err:?}");
            let err = log.append_all(&[3u32, 4]).unwrap_err();
            assert!(matches!(err, StoreError::Poisoned { .. }), "{err:?}");
        }
        assert!(err.to_string().contains("/dev/full"));
        assert_eq!(std::fs::metadata(&healthy).unwrap().len(), 0);
    }

    fn failing_sync(_: &File) -> std::io::Result<()> {
        Err(std::io::Error::from_raw_os_error(5))
    }

    /// A failed fsync: the op's record must not stay in the file (the page cache would write
    /// it out later and it would come back after a restart), and the log refuses appends.
    #[test]
    fn a_failed_fsync_cuts_the_record_off_and_poisons_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let (mut log, _) = JsonlLog::open::<u32>(&path).unwrap();
        log.append_all(&[1u32, 2]).unwrap();
        let acknowledged = std::fs::read(&path).unwrap();

        log.sync = failing_sync;
        let err = log.append(&3u32).unwrap_err();
        assert!(
            matches!(&err, StoreError::Io { source, .. } if source.raw_os_error() == Some(5)),
            "{err:?}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), acknowledged);

        // Even with fsync working again: poisoned until reopened, and nothing written.
        log.sync = File::sync_data;
        let err = log.append(&4u32).unwrap_err();
        assert!(matches!(err, StoreError::Poisoned { .. }), "{err:?}");
        assert_eq!(std::fs::read(&path).unwrap(), acknowledged);

        drop(log);
        let (mut log, records) = JsonlLog::open::<u32>(&path).unwrap();
        assert_eq!(records, [1, 2]);
        log.append(&5u32).unwrap();
        let (_, records) = JsonlLog::open::<u32>(&path).unwrap();
        assert_eq!(records, [1, 2, 5]);
    }
}
