//! One line of an engine's stdout, read as the engine process reader does
//! (`jucode_engine::process::parse_line`): its short road for plain deltas must give exactly
//! the event the general parse gives, and fail exactly when that fails.
#![no_main]

use jucode_engine::EngineOutput;
use jucode_engine::process::parse_line;
use jucode_protocol::serve::Event;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let general = serde_json::from_str::<Event>(line).ok();
    let read = parse_line(line).ok();
    if let Some(EngineOutput::Delta(_)) = &read {
        assert_eq!(read.clone().and_then(EngineOutput::into_event), general, "{line}");
    } else {
        assert_eq!(read, general.clone().map(EngineOutput::Event), "{line}");
    }
    let Some(event) = general else {
        return;
    };
    let _ = event.kind();
    let _ = event.is_ready();
    let _ = event.known();
    let _ = event.with_session("s1");
});
