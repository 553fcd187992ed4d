//! One line of an engine's stdout, read as a serve event the way the engine process reader does.
#![no_main]

use jucode_protocol::serve::Event;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(event) = serde_json::from_str::<Event>(line) else {
        return;
    };
    let _ = event.kind();
    let _ = event.is_ready();
    let _ = event.known();
    let _ = event.with_session("s1");
});
