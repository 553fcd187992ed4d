//! Chunk reassembly on an established stream fed by a hostile but paired peer: the input is a
//! list of records `[kind][len: u16 BE][bytes]`. Kind even: `bytes` is a chunk's plaintext
//! (flag byte included, so bad flags are tried) sealed by the peer. Odd: `bytes` goes in raw.
#![no_main]

use jucode_relay_proto::noise::{self, Channel};
use libfuzzer_sys::fuzz_target;

const HOST_PRIVATE: [u8; 32] = [7; 32];
const PHONE_PRIVATE: [u8; 32] = [9; 32];
/// A small cap, so the over-cap path is in reach of short inputs.
const CAP: usize = 4096;

fn pair() -> Option<(snow::TransportState, Channel)> {
    let host_public = noise::public_key(&HOST_PRIVATE);
    let mut phone = noise::initiator(&PHONE_PRIVATE, &host_public).ok()?;
    let mut host = noise::responder(&HOST_PRIVATE).ok()?;
    let mut buf = vec![0u8; 1024];
    let mut payload = vec![0u8; 1024];
    let n = phone.write_message(b"{}", &mut buf).ok()?;
    host.read_message(&buf[..n], &mut payload).ok()?;
    let n = host.write_message(b"{}", &mut buf).ok()?;
    phone.read_message(&buf[..n], &mut payload).ok()?;
    let phone = phone.into_transport_mode().ok()?;
    let host = host.into_transport_mode().ok()?;
    Some((phone, Channel::new(host).with_cap(CAP)))
}

fuzz_target!(|data: &[u8]| {
    let Some((mut phone, mut host)) = pair() else {
        return;
    };
    let mut rest = data;
    while let [kind, hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (bytes, next) = tail.split_at(len);
        rest = next;
        let msg = if kind % 2 == 0 {
            let mut sealed = vec![0u8; bytes.len() + 16];
            match phone.write_message(bytes, &mut sealed) {
                Ok(n) => sealed[..n].to_vec(),
                Err(_) => return,
            }
        } else {
            bytes.to_vec()
        };
        match host.open(&msg) {
            Ok(Some(frame)) => assert!(frame.len() <= CAP),
            Ok(None) => {}
            // Any error ends the stream, as on the host link.
            Err(_) => return,
        }
    }
});
