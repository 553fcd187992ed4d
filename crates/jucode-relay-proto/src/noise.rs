//! The Noise layer of a relay stream (relay-protocol §8): `Noise_IK_25519_ChaChaPoly_SHA256`
//! with the `jucode-relay-v1` prologue, and the flag-byte chunking that carries one daemon JSON
//! frame in one or more Noise transport messages.

use snow::params::NoiseParams;
use snow::{Builder, HandshakeState, TransportState};
use zeroize::Zeroizing;

/// The Noise protocol name; a v2 must change it together with [`PROLOGUE`].
pub const PATTERN: &str = "Noise_IK_25519_ChaChaPoly_SHA256";
/// The prologue both sides mix in: 15 ASCII bytes, no length, no terminator.
pub const PROLOGUE: &[u8] = b"jucode-relay-v1";
/// Plaintext bytes per chunk (+1 flag byte +16 tag bytes stays under 65535).
pub const CHUNK: usize = 65000;
/// The largest Noise message.
pub const MAX_NOISE_MESSAGE: usize = 65535;
/// The largest reassembled frame the daemon accepts.
pub const MAX_FRAME: usize = 16 * 1024 * 1024;
const TAG: usize = 16;

/// Why a Noise step failed. Any of these ends the stream.
#[derive(Debug, thiserror::Error)]
pub enum NoiseError {
    #[error("noise: {0}")]
    Snow(#[from] snow::Error),
    #[error("a Noise message of {0} bytes is over the 65535-byte limit")]
    MessageTooLarge(usize),
    #[error("an empty transport message")]
    Empty,
    #[error("chunk flag {0} is neither 0 nor 1")]
    BadFlag(u8),
    #[error("a frame over {MAX_FRAME} bytes")]
    FrameTooLarge,
    #[error("an all-zero or low-order public key")]
    WeakKey,
}

fn params() -> Result<NoiseParams, NoiseError> {
    Ok(PATTERN.parse()?)
}

/// A fresh X25519 static keypair `(private, public)`.
pub fn generate_keypair() -> Result<(Zeroizing<Vec<u8>>, Vec<u8>), NoiseError> {
    let kp = Builder::new(params()?).generate_keypair()?;
    Ok((Zeroizing::new(kp.private), kp.public))
}

/// The X25519 public key of `private`.
pub fn public_key(private: &[u8; 32]) -> [u8; 32] {
    x25519_dalek::x25519(*private, x25519_dalek::X25519_BASEPOINT_BYTES)
}

/// The host's side of a new stream: a fresh state for every stream (§12.2 rule 10).
pub fn responder(private: &[u8]) -> Result<HandshakeState, NoiseError> {
    responder_on(Builder::new(params()?), private)
}

/// A client's side: it knows the host's static key from the pairing link.
pub fn initiator(private: &[u8], host_static: &[u8]) -> Result<HandshakeState, NoiseError> {
    initiator_on(Builder::new(params()?), private, host_static)
}

/// Where a handshake's cryptography comes from, for [`responder_with`] and [`initiator_with`]:
/// the `noise_handshake` fuzz target answers the X25519 of its fixed keys from a table and
/// fixes the ephemeral keys, so an input runs the same every time. Never for a real stream:
/// only the `fuzzing` feature, which the fuzz crate alone turns on, has it.
#[cfg(feature = "fuzzing")]
pub struct Primitives<'a> {
    /// snow's DH, cipher, hash and random source.
    pub resolver: snow::resolvers::BoxedCryptoResolver,
    /// The ephemeral private key instead of a random one: every handshake with it is the same,
    /// which is what a test wants and what a real stream must never have.
    pub ephemeral: Option<&'a [u8]>,
}

#[cfg(feature = "fuzzing")]
impl<'a> Primitives<'a> {
    fn builder(self) -> Result<Builder<'a>, NoiseError> {
        let builder = Builder::with_resolver(params()?, self.resolver);
        Ok(match self.ephemeral {
            Some(key) => builder.fixed_ephemeral_key_for_testing_only(key),
            None => builder,
        })
    }
}

/// [`responder`] over the caller's [`Primitives`]; the pattern, key and prologue are the same.
#[cfg(feature = "fuzzing")]
pub fn responder_with<'a>(
    private: &'a [u8],
    primitives: Primitives<'a>,
) -> Result<HandshakeState, NoiseError> {
    responder_on(primitives.builder()?, private)
}

/// [`initiator`] over the caller's [`Primitives`]; the pattern, keys and prologue are the same.
#[cfg(feature = "fuzzing")]
pub fn initiator_with<'a>(
    private: &'a [u8],
    host_static: &'a [u8],
    primitives: Primitives<'a>,
) -> Result<HandshakeState, NoiseError> {
    initiator_on(primitives.builder()?, private, host_static)
}

fn responder_on<'a>(builder: Builder<'a>, private: &'a [u8]) -> Result<HandshakeState, NoiseError> {
    Ok(builder
        .local_private_key(private)?
        .prologue(PROLOGUE)?
        .build_responder()?)
}

fn initiator_on<'a>(
    builder: Builder<'a>,
    private: &'a [u8],
    host_static: &'a [u8],
) -> Result<HandshakeState, NoiseError> {
    Ok(builder
        .local_private_key(private)?
        .remote_public_key(host_static)?
        .prologue(PROLOGUE)?
        .build_initiator()?)
}

/// Whether `key` is all zeros or of low order: a DH with it gives all zeros whatever our
/// scalar is (X25519 scalars are clamped to multiples of 8), so it authenticates nothing.
pub fn is_weak_key(key: &[u8]) -> bool {
    let Ok(point) = <[u8; 32]>::try_from(key) else {
        return true;
    };
    // Any fixed scalar works: clamping clears the low three bits, killing the small subgroup.
    let shared = x25519_dalek::x25519([0x5a; 32], point);
    bool::from(subtle::ConstantTimeEq::ct_eq(&shared[..], &[0u8; 32][..]))
}

/// An established stream: encrypts frames into chunks and puts chunks back into frames.
pub struct Channel {
    transport: TransportState,
    partial: Vec<u8>,
    cap: usize,
}

impl Channel {
    pub fn new(transport: TransportState) -> Channel {
        Channel {
            transport,
            partial: Vec::new(),
            cap: MAX_FRAME,
        }
    }

    /// Lowers the reassembly cap (tests, or a client that expects less).
    pub fn with_cap(mut self, cap: usize) -> Channel {
        self.cap = cap;
        self
    }

    /// The Noise messages carrying `frame`: one per chunk of at most [`CHUNK`] bytes, each with
    /// the flag byte in front (1 = more follow). An empty frame is one chunk.
    pub fn seal(&mut self, frame: &[u8]) -> Result<Vec<Vec<u8>>, NoiseError> {
        self.seal_framed(frame, &[])
    }

    /// [`Channel::seal`] with `prefix` in front of every message, written in place: a host
    /// puts its data-frame header there and sends the buffer as it is, with no copy.
    pub fn seal_framed(&mut self, frame: &[u8], prefix: &[u8]) -> Result<Vec<Vec<u8>>, NoiseError> {
        let count = frame.len().div_ceil(CHUNK).max(1);
        let mut out = Vec::with_capacity(count);
        let mut plain = Vec::with_capacity(CHUNK.min(frame.len()) + 1);
        for i in 0..count {
            let chunk = &frame[(i * CHUNK).min(frame.len())..((i + 1) * CHUNK).min(frame.len())];
            plain.clear();
            plain.push(u8::from(i + 1 < count));
            plain.extend_from_slice(chunk);
            let mut msg = vec![0u8; prefix.len() + plain.len() + TAG];
            msg[..prefix.len()].copy_from_slice(prefix);
            let n = self
                .transport
                .write_message(&plain, &mut msg[prefix.len()..])?;
            msg.truncate(prefix.len() + n);
            out.push(msg);
        }
        Ok(out)
    }

    /// The transport state back, a half-reassembled frame dropped. Lets a caller replay many
    /// streams over one established pair (the `noise_chunks` fuzz target resets the receiving
    /// nonce and wraps it again) instead of paying a handshake for each.
    pub fn into_transport(self) -> TransportState {
        self.transport
    }

    /// Decrypts one Noise message. `Some(frame)` when it completed a frame. Any error means
    /// the stream must close (a dropped, repeated, reordered or altered message all fail here).
    pub fn open(&mut self, msg: &[u8]) -> Result<Option<Vec<u8>>, NoiseError> {
        if msg.len() > MAX_NOISE_MESSAGE {
            return Err(NoiseError::MessageTooLarge(msg.len()));
        }
        let mut plain = vec![0u8; msg.len()];
        let n = self.transport.read_message(msg, &mut plain)?;
        let Some((&flag, chunk)) = plain[..n].split_first() else {
            return Err(NoiseError::Empty);
        };
        if flag > 1 {
            return Err(NoiseError::BadFlag(flag));
        }
        // The common case, a frame in one chunk: hand back the decrypted buffer itself.
        if flag == 0 && self.partial.is_empty() {
            if chunk.len() > self.cap {
                return Err(NoiseError::FrameTooLarge);
            }
            plain.truncate(n);
            plain.remove(0);
            return Ok(Some(plain));
        }
        if self.partial.len() + chunk.len() > self.cap {
            self.partial = Vec::new();
            return Err(NoiseError::FrameTooLarge);
        }
        self.partial.extend_from_slice(chunk);
        if flag == 1 {
            return Ok(None);
        }
        Ok(Some(std::mem::take(&mut self.partial)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The cacophony vector for this pattern (prologue "John Galt", fixed keys).
    #[test]
    fn cacophony_vector() {
        let prologue = unhex("4a6f686e2047616c74");
        let init_static = unhex("e61ef9919cde45dd5f82166404bd08e38bceb5dfdfded0a34c8df7ed542214d1");
        let init_eph = unhex("893e28b9dc6ca8d611ab664754b8ceb7bac5117349a4439a6b0569da977c464a");
        let resp_static = unhex("4a3acbfdb163dec651dfa3194dece676d437029c62a408b4c5ea9114246e4893");
        let resp_static_pub =
            unhex("31e0303fd6418d2f8c0e78b91f22e8caed0fbe48656dcf4767e4834f701b8f62");
        let resp_eph = unhex("bbdb4cdbd309f1a1f2e1456967fe288cadd6f712d65dc7b7793d5e63da6b375b");
        let hash = unhex("0b0f68fb0c27e03ce9b97565995ed4838cc0581b762ef72b062f6a546419fad7");
        let messages = [
            (
                "4c756477696720766f6e204d69736573",
                "ca35def5ae56cec33dc2036731ab14896bc4c75dbb07a61f879f8e3afa4c7944718da798efbcd91528520204f904b9bd6c7413dccdc214d951e15253e39987f18146e8cd0873654207148333479d4d16c289f0294b29960a72f48e0b7bba2e89083169825e59642148d492020664ccf7",
            ),
            (
                "4d757272617920526f746862617264",
                "95ebc60d2b1fa672c1f46a8aa265ef51bfe38e7ccb39ec5be34069f1448088435361e70b2ed446e6c9ec387d1d6b3b840f194e373979d241b203c4acafccf5",
            ),
            (
                "462e20412e20486179656b",
                "050e9f3c8fac16b68dbce8f8c4bfbf6617c897f9ada4aa29aa19c8",
            ),
            (
                "4361726c204d656e676572",
                "344233a6cabb7141d80f3da2fedc311d9646bbb0f505afe403a667",
            ),
            (
                "4a65616e2d426170746973746520536179",
                "62cdeeb172ad7ade7aa7d9e069da5790f12331bfa00177787a1d0810c67dc3b2b4",
            ),
        ];
        assert_eq!(
            public_key(&resp_static.clone().try_into().unwrap()).to_vec(),
            resp_static_pub
        );
        let mut init = Builder::new(params().unwrap())
            .local_private_key(&init_static)
            .unwrap()
            .remote_public_key(&resp_static_pub)
            .unwrap()
            .prologue(&prologue)
            .unwrap()
            .fixed_ephemeral_key_for_testing_only(&init_eph)
            .build_initiator()
            .unwrap();
        let mut resp = Builder::new(params().unwrap())
            .local_private_key(&resp_static)
            .unwrap()
            .prologue(&prologue)
            .unwrap()
            .fixed_ephemeral_key_for_testing_only(&resp_eph)
            .build_responder()
            .unwrap();
        let mut buf = vec![0u8; 1024];
        let mut out = vec![0u8; 1024];
        // msg1 initiator → responder, msg2 back.
        let n = init.write_message(&unhex(messages[0].0), &mut buf).unwrap();
        assert_eq!(buf[..n], unhex(messages[0].1)[..]);
        let m = resp.read_message(&buf[..n], &mut out).unwrap();
        assert_eq!(out[..m], unhex(messages[0].0)[..]);
        assert_eq!(
            resp.get_remote_static().unwrap(),
            &public_key(&init_static.clone().try_into().unwrap())
        );
        let n = resp.write_message(&unhex(messages[1].0), &mut buf).unwrap();
        assert_eq!(buf[..n], unhex(messages[1].1)[..]);
        init.read_message(&buf[..n], &mut out).unwrap();
        assert_eq!(init.get_handshake_hash(), &hash[..]);
        assert_eq!(resp.get_handshake_hash(), &hash[..]);
        let mut init = init.into_transport_mode().unwrap();
        let mut resp = resp.into_transport_mode().unwrap();
        // Transport messages alternate, initiator first.
        for (i, (payload, cipher)) in messages[2..].iter().enumerate() {
            let (w, r) = if i % 2 == 0 {
                (&mut init, &mut resp)
            } else {
                (&mut resp, &mut init)
            };
            let n = w.write_message(&unhex(payload), &mut buf).unwrap();
            assert_eq!(buf[..n], unhex(cipher)[..], "transport message {i}");
            let m = r.read_message(&buf[..n], &mut out).unwrap();
            assert_eq!(out[..m], unhex(payload)[..]);
        }
    }

    fn pair() -> (Channel, Channel) {
        let (ip, _) = generate_keypair().unwrap();
        let (rp, rpub) = generate_keypair().unwrap();
        let mut i = initiator(&ip, &rpub).unwrap();
        let mut r = responder(&rp).unwrap();
        let mut buf = vec![0u8; 200];
        let mut out = vec![0u8; 200];
        let n = i.write_message(b"", &mut buf).unwrap();
        r.read_message(&buf[..n], &mut out).unwrap();
        let n = r.write_message(b"", &mut buf).unwrap();
        i.read_message(&buf[..n], &mut out).unwrap();
        (
            Channel::new(i.into_transport_mode().unwrap()),
            Channel::new(r.into_transport_mode().unwrap()),
        )
    }

    /// The seam the fuzz target uses: with snow's own primitives and fixed ephemeral keys it
    /// is the same handshake (a default side on the other end completes it) and the same
    /// messages every time. `cargo test -p jucode-relay-proto --features fuzzing`.
    #[cfg(feature = "fuzzing")]
    #[test]
    fn handshakes_over_given_primitives_are_the_same_handshake() {
        let primitives = |key: &'static [u8]| Primitives {
            resolver: Box::new(snow::resolvers::DefaultResolver),
            ephemeral: Some(key),
        };
        let host = [7u8; 32];
        let phone = [9u8; 32];
        let host_public = public_key(&host);
        let run = |fixed_phone: bool, fixed_host: bool| {
            let mut i = if fixed_phone {
                initiator_with(&phone, &host_public, primitives(&[0x22; 32])).unwrap()
            } else {
                initiator(&phone, &host_public).unwrap()
            };
            let mut r = if fixed_host {
                responder_with(&host, primitives(&[0x11; 32])).unwrap()
            } else {
                responder(&host).unwrap()
            };
            let mut buf = vec![0u8; 1024];
            let mut payload = vec![0u8; 1024];
            let n = i.write_message(b"{}", &mut buf).unwrap();
            let msg1 = buf[..n].to_vec();
            r.read_message(&msg1, &mut payload).unwrap();
            let n = r.write_message(b"{}", &mut buf).unwrap();
            let msg2 = buf[..n].to_vec();
            i.read_message(&msg2, &mut payload).unwrap();
            let (mut a, mut b) = (
                Channel::new(i.into_transport_mode().unwrap()),
                Channel::new(r.into_transport_mode().unwrap()),
            );
            let sealed = a.seal(b"ping").unwrap();
            assert_eq!(b.open(&sealed[0]).unwrap().unwrap(), b"ping");
            (msg1, msg2)
        };
        let fixed = run(true, true);
        assert_eq!(run(true, true), fixed);
        assert_eq!(run(true, false).0, fixed.0);
        assert_ne!(run(false, true).0, fixed.0);
        assert_ne!(run(false, false).1, fixed.1);
    }

    #[test]
    fn chunk_counts_and_round_trips() {
        let (mut a, mut b) = pair();
        for (len, chunks) in [
            (0, 1),
            (1, 1),
            (CHUNK - 1, 1),
            (CHUNK, 1),
            (CHUNK + 1, 2),
            (2 * CHUNK + 17, 3),
        ] {
            let frame: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let msgs = a.seal(&frame).unwrap();
            assert_eq!(msgs.len(), chunks, "{len} bytes");
            assert!(msgs.iter().all(|m| m.len() <= MAX_NOISE_MESSAGE));
            let mut got = None;
            for (i, m) in msgs.iter().enumerate() {
                let r = b.open(m).unwrap();
                assert_eq!(r.is_some(), i + 1 == msgs.len());
                got = r;
            }
            assert_eq!(got.unwrap(), frame);
        }
    }

    #[test]
    fn framed_seals_are_the_plain_seals_behind_the_prefix() {
        let (mut a, mut b) = pair();
        for len in [0, 5, CHUNK + 9] {
            let frame: Vec<u8> = (0..len).map(|i| (i % 13) as u8).collect();
            let msgs = a.seal_framed(&frame, b"head").unwrap();
            assert_eq!(msgs.len(), len.div_ceil(CHUNK).max(1));
            let mut got = None;
            for m in &msgs {
                assert_eq!(&m[..4], b"head");
                assert!(m.len() - 4 <= MAX_NOISE_MESSAGE);
                got = b.open(&m[4..]).unwrap();
            }
            assert_eq!(got.unwrap(), frame);
        }
    }

    #[test]
    fn tampered_replayed_and_reordered_messages_fail() {
        let (mut a, mut b) = pair();
        let m1 = a.seal(b"one").unwrap().remove(0);
        let m2 = a.seal(b"two").unwrap().remove(0);
        let mut flipped = m1.clone();
        flipped[3] ^= 1;
        assert!(b.open(&flipped).is_err());
        // snow ≥ 0.9.5 does not advance the nonce on failure: the genuine one still reads.
        assert_eq!(b.open(&m1).unwrap().unwrap(), b"one");
        assert!(b.open(&m1).is_err(), "replay");
        let (mut a, mut b) = pair();
        let _m1 = a.seal(b"one").unwrap().remove(0);
        let m2b = a.seal(b"two").unwrap().remove(0);
        assert!(b.open(&m2b).is_err(), "reordered");
        let _ = m2;
    }

    #[test]
    fn a_transport_taken_back_reads_again_from_a_reset_nonce() {
        let (mut a, mut b) = pair();
        let half = a.seal(&vec![1u8; CHUNK + 1]).unwrap().remove(0);
        let whole = a.seal(b"one").unwrap().remove(0);
        assert_eq!(b.open(&half).unwrap(), None);
        let mut transport = b.into_transport();
        transport.set_receiving_nonce(0);
        let mut b = Channel::new(transport);
        // Nonce 0 reads again, and the half frame before is gone rather than prepended.
        assert_eq!(b.open(&half).unwrap(), None);
        // The frame's second chunk was nonce 1; `whole` is nonce 2.
        let mut transport = b.into_transport();
        transport.set_receiving_nonce(2);
        let mut b = Channel::new(transport);
        assert_eq!(b.open(&whole).unwrap().unwrap(), b"one");
    }

    #[test]
    fn oversized_inputs_are_refused() {
        let (mut a, mut b) = pair();
        let big = vec![0u8; MAX_NOISE_MESSAGE + 1];
        assert!(matches!(b.open(&big), Err(NoiseError::MessageTooLarge(_))));
        let mut b = b.with_cap(CHUNK + 10);
        let msgs = a.seal(&vec![1u8; 2 * CHUNK]).unwrap();
        assert!(b.open(&msgs[0]).unwrap().is_none());
        assert!(matches!(b.open(&msgs[1]), Err(NoiseError::FrameTooLarge)));
    }

    /// A one-chunk frame (handed back without reassembly) still honours the cap, and one
    /// after a chunked frame comes back whole.
    #[test]
    fn one_chunk_frames_keep_the_cap_and_follow_chunked_ones() {
        let (mut a, b) = pair();
        let mut b = b.with_cap(100);
        let big = a.seal(&[3u8; 101]).unwrap();
        assert!(matches!(b.open(&big[0]), Err(NoiseError::FrameTooLarge)));
        let (mut a, mut b) = pair();
        let chunked = a.seal(&vec![5u8; CHUNK + 3]).unwrap();
        assert!(b.open(&chunked[0]).unwrap().is_none());
        assert_eq!(b.open(&chunked[1]).unwrap().unwrap(), vec![5u8; CHUNK + 3]);
        let one = a.seal(b"after").unwrap();
        assert_eq!(b.open(&one[0]).unwrap().unwrap(), b"after");
        let empty = a.seal(b"").unwrap();
        assert_eq!(b.open(&empty[0]).unwrap().unwrap(), b"");
    }

    #[test]
    fn garbage_never_panics_and_always_fails() {
        use ring::rand::SecureRandom;
        let rng = ring::rand::SystemRandom::new();
        let (_, mut b) = pair();
        for len in [0usize, 1, 15, 16, 17, 100, 65535] {
            let mut junk = vec![0u8; len];
            rng.fill(&mut junk).unwrap();
            assert!(b.open(&junk).is_err(), "{len} random bytes decrypted");
        }
        // A responder fed random first messages refuses them.
        let (rp, _) = generate_keypair().unwrap();
        for len in [0usize, 31, 32, 96, 200] {
            let mut junk = vec![0u8; len];
            rng.fill(&mut junk).unwrap();
            let mut r = responder(&rp).unwrap();
            let mut out = vec![0u8; 256];
            assert!(r.read_message(&junk, &mut out).is_err());
        }
    }

    #[test]
    fn weak_keys() {
        assert!(is_weak_key(&[0u8; 32]));
        // The point of order 1 (u = 1) and one of order 8.
        let mut one = [0u8; 32];
        one[0] = 1;
        assert!(is_weak_key(&one));
        let order8 = unhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800");
        assert!(is_weak_key(&order8));
        assert!(is_weak_key(&[1u8; 5]));
        let (_, good) = generate_keypair().unwrap();
        assert!(!is_weak_key(&good));
    }
}
