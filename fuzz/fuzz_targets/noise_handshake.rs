//! Hostile handshake messages. Byte 0 even: the input is msg1 to the host's responder, checked
//! as the host link checks it. Odd: the input is msg2 to a phone's initiator that sent msg1.
#![no_main]

use std::sync::LazyLock;

use jucode_relay_proto::noise;
use libfuzzer_sys::fuzz_target;

const HOST_PRIVATE: [u8; 32] = [7; 32];
const PHONE_PRIVATE: [u8; 32] = [9; 32];
/// Derived once: an X25519 base-point multiplication the inputs need not repeat.
static HOST_PUBLIC: LazyLock<[u8; 32]> = LazyLock::new(|| noise::public_key(&HOST_PRIVATE));

fuzz_target!(|data: &[u8]| {
    let Some((&mode, msg)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        // The host refuses oversized messages and weak ephemeral keys before reading.
        if msg.len() > noise::MAX_NOISE_MESSAGE || msg.get(..32).is_none_or(noise::is_weak_key) {
            return;
        }
        let Ok(mut hs) = noise::responder(&HOST_PRIVATE) else {
            return;
        };
        let mut payload = vec![0u8; msg.len()];
        if let Ok(n) = hs.read_message(msg, &mut payload) {
            let _ = serde_json::from_slice::<serde_json::Value>(&payload[..n]);
            let mut msg2 = vec![0u8; 256];
            let _ = hs.write_message(b"{\"ok\":false}", &mut msg2);
        }
    } else {
        let Ok(mut hs) = noise::initiator(&PHONE_PRIVATE, &*HOST_PUBLIC) else {
            return;
        };
        let mut msg1 = vec![0u8; 256];
        if hs
            .write_message(b"{\"name\":\"phone\"}", &mut msg1)
            .is_err()
        {
            return;
        }
        let mut payload = vec![0u8; msg.len()];
        if hs.read_message(msg, &mut payload).is_ok() {
            let _ = hs.into_transport_mode();
        }
    }
});
