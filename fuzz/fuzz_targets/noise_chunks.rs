//! Chunk reassembly on an established stream fed by a hostile but paired peer: the input is a
//! list of records `[kind][len: u16 BE][bytes]`. Kind even: `bytes` is a chunk's plaintext
//! (flag byte included, so bad flags are tried) sealed by the peer. Odd: `bytes` goes in raw.
//!
//! One handshake for the whole process: every input replays a fresh stream on the same pair,
//! the peer sealing with explicit nonces from 0 and the host's transport taken back from its
//! channel and its receiving nonce reset, so each input runs the same whatever ran before.
#![no_main]

use std::cell::RefCell;

use jucode_relay_proto::noise::{self, Channel};
use libfuzzer_sys::fuzz_target;
use snow::{StatelessTransportState, TransportState};

const HOST_PRIVATE: [u8; 32] = [7; 32];
const PHONE_PRIVATE: [u8; 32] = [9; 32];
/// A small cap, so the over-cap path is in reach of short inputs.
const CAP: usize = 4096;

/// The phone's side (nonces chosen per message) and the host's transport between inputs.
struct Pair {
    phone: StatelessTransportState,
    host: Option<TransportState>,
}

fn pair() -> Option<Pair> {
    let host_public = noise::public_key(&HOST_PRIVATE);
    let mut phone = noise::initiator(&PHONE_PRIVATE, &host_public).ok()?;
    let mut host = noise::responder(&HOST_PRIVATE).ok()?;
    let mut buf = vec![0u8; 1024];
    let mut payload = vec![0u8; 1024];
    let n = phone.write_message(b"{}", &mut buf).ok()?;
    host.read_message(&buf[..n], &mut payload).ok()?;
    let n = host.write_message(b"{}", &mut buf).ok()?;
    phone.read_message(&buf[..n], &mut payload).ok()?;
    Some(Pair {
        phone: phone.into_stateless_transport_mode().ok()?,
        host: Some(host.into_transport_mode().ok()?),
    })
}

thread_local! {
    static PAIR: RefCell<Option<Pair>> = RefCell::new(pair());
}

/// One stream: the records of `data` in order, until one ends it.
fn stream(phone: &StatelessTransportState, host: &mut Channel, data: &[u8]) {
    let mut nonce = 0u64;
    let mut rest = data;
    while let [kind, hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (bytes, next) = tail.split_at(len);
        rest = next;
        let msg = if kind % 2 == 0 {
            let mut sealed = vec![0u8; bytes.len() + 16];
            match phone.write_message(nonce, bytes, &mut sealed) {
                Ok(n) => {
                    nonce += 1;
                    sealed.truncate(n);
                    sealed
                }
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
}

fuzz_target!(|data: &[u8]| {
    PAIR.with_borrow_mut(|pair| {
        let Some(Pair { phone, host: slot }) = pair.as_mut() else {
            return;
        };
        let Some(mut transport) = slot.take() else {
            return;
        };
        transport.set_receiving_nonce(0);
        let mut host = Channel::new(transport).with_cap(CAP);
        stream(phone, &mut host, data);
        *slot = Some(host.into_transport());
    });
});
