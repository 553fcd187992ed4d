//! A host's relay keys (relay-protocol §2): an Ed25519 identity that signs relay auth and push
//! requests, and an independent X25519 Noise static key; the host id derived from the first;
//! the protocol's base64. Where the keys are kept is the host's business (`jucode-relay-host`).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{Ed25519KeyPair, KeyPair};
use zeroize::Zeroizing;

/// Why keys could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("{0}: {1}")]
    Invalid(&'static str, String),
    #[error("the system random generator failed")]
    Random,
}

/// The loaded keys. Private halves are wiped when dropped.
pub struct Identity {
    signing: Ed25519KeyPair,
    static_private: Zeroizing<[u8; 32]>,
    static_public: [u8; 32],
}

/// base64url without padding, the protocol's only base64.
pub fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Reads base64url without padding.
pub fn unb64(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text).ok()
}

/// A 32-byte key from its base64url text; `field` names it in the error.
pub fn key32(field: &'static str, text: &str) -> Result<Zeroizing<[u8; 32]>, IdentityError> {
    let bytes = Zeroizing::new(
        unb64(text).ok_or_else(|| IdentityError::Invalid(field, "not base64url".into()))?,
    );
    let mut out = Zeroizing::new([0u8; 32]);
    if bytes.len() != 32 {
        return Err(IdentityError::Invalid(field, "not 32 bytes".into()));
    }
    out.copy_from_slice(&bytes);
    Ok(out)
}

/// The host id of an Ed25519 public key: base64url of the first 16 bytes of its SHA-256.
pub fn host_id(public: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, public);
    b64(&digest.as_ref()[..16])
}

impl Identity {
    /// Fresh keys kept in memory only (benchmarks, throwaway hosts).
    pub fn generate() -> Result<Identity, IdentityError> {
        let rng = SystemRandom::new();
        let mut seed = Zeroizing::new([0u8; 32]);
        let mut static_private = Zeroizing::new([0u8; 32]);
        rng.fill(&mut seed[..])
            .and_then(|()| rng.fill(&mut static_private[..]))
            .map_err(|_| IdentityError::Random)?;
        Identity::from_keys(&seed, static_private)
    }

    /// The identity of an Ed25519 seed and an X25519 private key.
    pub fn from_keys(
        seed: &[u8; 32],
        static_private: Zeroizing<[u8; 32]>,
    ) -> Result<Identity, IdentityError> {
        let signing = Ed25519KeyPair::from_seed_unchecked(seed)
            .map_err(|e| IdentityError::Invalid("identity", e.to_string()))?;
        let static_public = crate::noise::public_key(&static_private);
        Ok(Identity {
            signing,
            static_private,
            static_public,
        })
    }

    /// The Ed25519 public key.
    pub fn public(&self) -> &[u8] {
        self.signing.public_key().as_ref()
    }

    /// The host id the relay knows this daemon by (22 characters).
    pub fn host_id(&self) -> String {
        host_id(self.public())
    }

    /// The Noise static public key (43 base64url characters in pairing links).
    pub fn static_public(&self) -> &[u8; 32] {
        &self.static_public
    }

    /// The Noise static private key (the responder's `s`).
    pub fn static_private(&self) -> &[u8; 32] {
        &self.static_private
    }

    /// An Ed25519 signature over `message`.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        self.signing.sign(message).as_ref().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_give_a_22_char_host_id_and_a_working_signature() {
        let a = Identity::generate().unwrap();
        let b = Identity::from_keys(&[1u8; 32], Zeroizing::new([2u8; 32])).unwrap();
        assert_eq!(a.host_id().len(), 22);
        assert_eq!(b64(a.static_public()).len(), 43);
        assert_eq!(b.static_public(), &crate::noise::public_key(&[2u8; 32]));
        let sig = b.sign(b"x");
        ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, b.public())
            .verify(b"x", &sig)
            .unwrap();
        assert!(key32("k", "AAAA").is_err());
    }
}
