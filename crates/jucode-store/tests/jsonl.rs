//! JSONL log behaviour against real files: ordering, torn tails, damage.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use jucode_store::{JsonlLog, StoreError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Rec {
    n: u64,
    text: String,
}

fn rec(n: u64) -> Rec {
    // Newlines and quotes inside strings must not split a record.
    Rec {
        n,
        text: format!("record {n} with \"quotes\" and a\nnewline"),
    }
}

fn log_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("events.jsonl")
}

fn open(path: &Path) -> (JsonlLog, Vec<Rec>) {
    JsonlLog::open::<Rec>(path).unwrap()
}

fn size(path: &Path) -> u64 {
    fs::metadata(path).unwrap().len()
}

/// Writes `count` records through the log and returns each line's end offset.
fn write_records(path: &Path, count: u64) -> Vec<u64> {
    let (mut log, existing) = open(path);
    assert!(existing.is_empty());
    let mut ends = Vec::new();
    for n in 0..count {
        log.append(&rec(n)).unwrap();
        ends.push(size(path));
    }
    ends
}

fn recs(range: std::ops::Range<u64>) -> Vec<Rec> {
    range.map(rec).collect()
}

#[test]
fn append_then_reopen_returns_records_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_path(&dir);
    {
        let (mut log, existing) = open(&path);
        assert!(existing.is_empty());
        assert_eq!(log.path(), path);
        log.append(&rec(0)).unwrap();
        log.append_all(&[rec(1), rec(2), rec(3)]).unwrap();
        log.append_all::<Rec>(&[]).unwrap();
        log.append(&rec(4)).unwrap();
    }
    let (_log, got) = open(&path);
    assert_eq!(got, recs(0..5));

    let text = fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 5);
    assert!(text.ends_with('\n'));
}

#[cfg(unix)]
#[test]
fn new_log_is_created_private_and_empty() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = log_path(&dir);
    let (_log, got) = open(&path);
    assert!(got.is_empty());
    assert_eq!(size(&path), 0);
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn torn_at_every_offset_of_the_last_two_records_keeps_the_complete_prefix() {
    const N: u64 = 6;
    let dir = tempfile::tempdir().unwrap();
    let full_path = log_path(&dir);
    let ends = write_records(&full_path, N);
    let full = fs::read(&full_path).unwrap();
    assert_eq!(full.len() as u64, ends[(N - 1) as usize]);

    let start_of_second_last = ends[(N - 3) as usize];
    let cut_path = dir.path().join("cut.jsonl");
    for cut in start_of_second_last..full.len() as u64 {
        fs::write(&cut_path, &full[..cut as usize]).unwrap();
        // Records whose '\n' lies inside the cut are complete.
        let complete = ends.iter().filter(|&&end| end <= cut).count() as u64;
        let prefix_len = if complete == 0 {
            0
        } else {
            ends[(complete - 1) as usize]
        };

        let (mut log, got) = open(&cut_path);
        assert_eq!(got, recs(0..complete), "cut at byte {cut}");
        assert_eq!(size(&cut_path), prefix_len, "cut at byte {cut}");

        log.append(&rec(100)).unwrap();
        drop(log);
        let (_log, got) = open(&cut_path);
        let mut want = recs(0..complete);
        want.push(rec(100));
        assert_eq!(got, want, "append after cut at byte {cut}");
    }
}

#[test]
fn garbage_tails_are_dropped_and_the_file_repaired() {
    let partial_json = b"{\"n\":7,\"text\":\"half a rec".to_vec();
    let zeros = vec![0u8; 4096];
    let zeros_nl = [vec![0u8; 4096], b"\n".to_vec()].concat();
    let open_object_nl = b"{\"a\":\n".to_vec();
    let combined = [partial_json.clone(), zeros.clone(), open_object_nl.clone()].concat();
    let parses_but_unterminated = br#"{"n":9,"text":"x"}"#.to_vec();
    let tails = [
        ("partial json line", partial_json),
        ("4 KiB of zeros", zeros),
        ("4 KiB of zeros then newline", zeros_nl),
        ("{\"a\": with newline", open_object_nl.clone()),
        (
            "{\"a\": then blank lines",
            [open_object_nl, b"\n\n".to_vec()].concat(),
        ),
        ("all of them", combined),
        ("valid json without newline", parses_but_unterminated),
    ];

    for (name, tail) in tails {
        let dir = tempfile::tempdir().unwrap();
        let path = log_path(&dir);
        let ends = write_records(&path, 3);
        fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&tail)
            .unwrap();

        let (mut log, got) = open(&path);
        assert_eq!(got, recs(0..3), "{name}");
        assert_eq!(size(&path), ends[2], "{name}");
        log.append(&rec(3)).unwrap();
        drop(log);
        let (_log, got) = open(&path);
        assert_eq!(got, recs(0..4), "{name}");
    }
}

#[test]
fn damage_before_the_last_line_is_corrupt_with_its_line_number() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_path(&dir);
    let ends = write_records(&path, 5);
    let mut bytes = fs::read(&path).unwrap();
    // Line 2 starts where line 1 ends; turn its '{' into 'x'.
    let line2 = ends[0] as usize;
    assert_eq!(bytes[line2], b'{');
    bytes[line2] = b'x';
    fs::write(&path, &bytes).unwrap();

    let err = JsonlLog::open::<Rec>(&path).unwrap_err();
    match &err {
        StoreError::Corrupt { path: p, line, .. } => {
            assert_eq!(p, &path);
            assert_eq!(*line, 2);
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("line 2"), "{msg}");
    // Damage is reported, never repaired by truncation.
    assert_eq!(fs::read(&path).unwrap(), bytes);
}

#[test]
fn bad_line_followed_by_a_torn_fragment_is_still_damage() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_path(&dir);
    write_records(&path, 2);
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(b"not json\n{\"n\":").unwrap();
    drop(f);
    let err = JsonlLog::open::<Rec>(&path).unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { line: 3, .. }),
        "{err:?}"
    );
}

#[test]
fn blank_lines_are_skipped_anywhere() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_path(&dir);
    let line = |n| format!("{}\n", serde_json::to_string(&rec(n)).unwrap());
    let text = format!("\n{}\n\n{}{}\n", line(0), line(1), line(2));
    fs::write(&path, &text).unwrap();
    let (_log, got) = open(&path);
    assert_eq!(got, recs(0..3));
    // Nothing was torn, so nothing was cut.
    assert_eq!(size(&path), text.len() as u64);
}

#[test]
fn repair_warns_with_the_file_and_dropped_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_path(&dir);
    write_records(&path, 2);
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(b"{\"n\":12345").unwrap(); // 10 bytes
    drop(f);

    let events = Arc::new(Mutex::new(Vec::new()));
    let subscriber = capture::Capture {
        events: events.clone(),
    };
    tracing::subscriber::with_default(subscriber, || {
        open(&path);
    });
    let events = events.lock().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert!(event.contains("WARN"), "{event}");
    assert!(event.contains(&path.display().to_string()), "{event}");
    assert!(event.contains("dropped_bytes=10"), "{event}");
}

/// Folding a big log must stay fast; run with
/// `cargo test --release -p jucode-store -- --ignored --nocapture`.
#[test]
#[ignore = "slow; a timing check, run in release"]
#[allow(
    clippy::disallowed_methods,
    reason = "prints how long the fold took in real time"
)]
fn folds_a_million_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_path(&dir);
    let mut text = Vec::new();
    for n in 0..1_000_000u64 {
        serde_json::to_writer(&mut text, &rec(n)).unwrap();
        text.push(b'\n');
    }
    fs::write(&path, &text).unwrap();
    let start = std::time::Instant::now();
    let (_log, got) = open(&path);
    let took = start.elapsed();
    eprintln!("folded {} records in {took:?}", got.len());
    assert_eq!(got.len(), 1_000_000);
    assert_eq!(got[999_999], rec(999_999));
}

/// A minimal tracing subscriber that records each event as one text line.
mod capture {
    use std::fmt::Write as _;
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    pub struct Capture {
        pub events: Arc<Mutex<Vec<String>>>,
    }

    struct Line(String);

    impl Visit for Line {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            let _ = write!(self.0, " {}={:?}", field.name(), value);
        }
        fn record_u64(&mut self, field: &Field, value: u64) {
            let _ = write!(self.0, " {}={}", field.name(), value);
        }
    }

    impl Subscriber for Capture {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut line = Line(event.metadata().level().to_string());
            event.record(&mut line);
            self.events.lock().unwrap().push(line.0);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }
}
