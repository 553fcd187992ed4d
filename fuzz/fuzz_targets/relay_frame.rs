//! The host link's binary framing: whatever decodes must encode back to the same bytes.
#![no_main]

use jucode_relay_proto::frame::Frame;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = Frame::decode(data) {
        assert_eq!(frame.encode(), data);
    }
});
