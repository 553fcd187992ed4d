//! A client frame as the server reads it off a connection: the envelope, then the op table.
#![no_main]

use jucode_protocol::{ClientFrame, DaemonOp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The server hands the hub text frames only.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(frame) = ClientFrame::parse(text) else {
        return;
    };
    let _ = frame.spec();
    let _ = frame.is_daemon_op();
    let _ = frame.engine_op();
    let _ = DaemonOp::from_frame(&frame);
});
