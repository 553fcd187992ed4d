//! Hostile handshake messages. Byte 0 even: the input is msg1 to the host's responder, checked
//! as the host link checks it. Odd: the input is msg2 to a phone's initiator that sent msg1.
//!
//! Both sides' keys are fixed, ephemeral ones included (so an input runs the same every time
//! and a seed's msg2 can answer the phone's msg1), and the X25519 results of those fixed keys
//! with each other are worked out once per process: a handshake's own steps all run, but a DH
//! whose two keys are both fixed ones is a table lookup. A DH with any other key (one an
//! input brought) is computed every time, so which are looked up depends on the input alone.
#![no_main]

use std::sync::LazyLock;

use jucode_relay_proto::noise::{self, Primitives};
use libfuzzer_sys::fuzz_target;
use snow::params::{CipherChoice, DHChoice, HashChoice};
use snow::resolvers::{CryptoResolver, DefaultResolver};
use snow::types::{Cipher, Dh, Hash, Random};

const HOST_PRIVATE: [u8; 32] = [7; 32];
const PHONE_PRIVATE: [u8; 32] = [9; 32];
const HOST_EPHEMERAL: [u8; 32] = [0x11; 32];
const PHONE_EPHEMERAL: [u8; 32] = [0x22; 32];
/// What the phone knows of the host from pairing.
static HOST_PUBLIC: LazyLock<[u8; 32]> = LazyLock::new(|| noise::public_key(&HOST_PRIVATE));

/// Every fixed private key with its public key, and the DH of each with every fixed public key.
struct Table {
    publics: Vec<([u8; 32], [u8; 32])>,
    shared: Vec<(([u8; 32], [u8; 32]), [u8; 32])>,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| {
    let privates = [HOST_PRIVATE, PHONE_PRIVATE, HOST_EPHEMERAL, PHONE_EPHEMERAL];
    let publics: Vec<([u8; 32], [u8; 32])> = privates
        .iter()
        .map(|k| (*k, noise::public_key(k)))
        .collect();
    let mut shared = Vec::new();
    for (private, _) in &publics {
        for (_, public) in &publics {
            shared.push(((*private, *public), x25519(private, public)));
        }
    }
    Table { publics, shared }
});

/// X25519 as snow's own 25519 computes it (the scalar clamped).
fn x25519(private: &[u8; 32], public: &[u8; 32]) -> [u8; 32] {
    x25519_dalek::x25519(*private, *public)
}

/// snow's primitives, with X25519 answered from [`TABLE`] when both keys are fixed ones.
struct Resolver;

impl CryptoResolver for Resolver {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        DefaultResolver.resolve_rng()
    }

    fn resolve_dh(&self, choice: &DHChoice) -> Option<Box<dyn Dh>> {
        match choice {
            DHChoice::Curve25519 => Some(Box::new(TableDh::default())),
            _ => None,
        }
    }

    fn resolve_hash(&self, choice: &HashChoice) -> Option<Box<dyn Hash>> {
        DefaultResolver.resolve_hash(choice)
    }

    fn resolve_cipher(&self, choice: &CipherChoice) -> Option<Box<dyn Cipher>> {
        DefaultResolver.resolve_cipher(choice)
    }
}

#[derive(Default)]
struct TableDh {
    private: [u8; 32],
    public: [u8; 32],
}

impl TableDh {
    fn derive(&mut self) {
        let table = &TABLE.publics;
        self.public = match table.iter().find(|(k, _)| *k == self.private) {
            Some((_, public)) => *public,
            None => noise::public_key(&self.private),
        };
    }
}

impl Dh for TableDh {
    fn name(&self) -> &'static str {
        "25519"
    }

    fn pub_len(&self) -> usize {
        32
    }

    fn priv_len(&self) -> usize {
        32
    }

    fn set(&mut self, private: &[u8]) {
        self.private = [0; 32];
        let n = private.len().min(32);
        self.private[..n].copy_from_slice(&private[..n]);
        self.derive();
    }

    fn generate(&mut self, rng: &mut dyn Random) -> Result<(), snow::Error> {
        rng.try_fill_bytes(&mut self.private)?;
        self.derive();
        Ok(())
    }

    fn pubkey(&self) -> &[u8] {
        &self.public
    }

    fn privkey(&self) -> &[u8] {
        &self.private
    }

    fn dh(&self, public: &[u8], out: &mut [u8]) -> Result<(), snow::Error> {
        let Some(public) = public.get(..32).and_then(|p| <[u8; 32]>::try_from(p).ok()) else {
            return Err(snow::Error::Dh);
        };
        let key = (self.private, public);
        let shared = match TABLE.shared.iter().find(|(k, _)| *k == key) {
            Some((_, shared)) => *shared,
            None => x25519(&self.private, &public),
        };
        let n = out.len().min(32);
        out[..n].copy_from_slice(&shared[..n]);
        Ok(())
    }
}

fn primitives(ephemeral: &[u8]) -> Primitives<'_> {
    Primitives {
        resolver: Box::new(Resolver),
        ephemeral: Some(ephemeral),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, msg)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        // The host refuses oversized messages and weak ephemeral keys before reading.
        if msg.len() > noise::MAX_NOISE_MESSAGE || msg.get(..32).is_none_or(noise::is_weak_key) {
            return;
        }
        let Ok(mut hs) = noise::responder_with(&HOST_PRIVATE, primitives(&HOST_EPHEMERAL)) else {
            return;
        };
        let mut payload = vec![0u8; msg.len()];
        if let Ok(n) = hs.read_message(msg, &mut payload) {
            let _ = serde_json::from_slice::<serde_json::Value>(&payload[..n]);
            let mut msg2 = vec![0u8; 256];
            let _ = hs.write_message(b"{\"ok\":false}", &mut msg2);
        }
    } else {
        let Ok(mut hs) =
            noise::initiator_with(&PHONE_PRIVATE, &*HOST_PUBLIC, primitives(&PHONE_EPHEMERAL))
        else {
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
