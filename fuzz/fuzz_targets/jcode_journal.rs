//! jcode's session snapshot and journal as a fork reads them. Byte 0 picks the shape: even
//! fuzzes the journal after a valid snapshot, odd splits the rest at the first NUL into
//! snapshot and journal.
#![no_main]

use jucode_jcode::fork;
use libfuzzer_sys::fuzz_target;

const SNAPSHOT: &[u8] = br#"{"id":"ses_1","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","messages":[]}"#;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (snapshot, journal) = if mode % 2 == 0 {
        (SNAPSHOT, rest)
    } else {
        match rest.iter().position(|b| *b == 0) {
            Some(at) => (&rest[..at], &rest[at + 1..]),
            None => (rest, &[][..]),
        }
    };
    let _ = fork::carry("ses_1", snapshot, journal);
});
