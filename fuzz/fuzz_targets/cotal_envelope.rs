//! One raw Cotal delivery: the subject up to the first newline, the payload after it.
#![no_main]

use jucode_cotal::envelope;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (subject, payload) = match data.iter().position(|b| *b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let Ok(subject) = std::str::from_utf8(subject) else {
        return;
    };
    if let Ok(checked) = envelope::check(subject, payload) {
        let _ = envelope::text_of(&checked.message);
    }
});
