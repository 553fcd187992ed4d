//! The daemon's relay keys, `<state>/relay-identity.json` (mode 0600): an Ed25519 identity
//! that signs relay auth and push requests, and an independent X25519 Noise static key.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{Ed25519KeyPair, KeyPair};
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

/// The identity file's name in the state directory.
pub const FILE: &str = "relay-identity.json";

/// Why the identity could not be loaded or made.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error(transparent)]
    Store(#[from] jucode_store::StoreError),
    #[error("{0}: {1}")]
    Invalid(&'static str, String),
    #[error("the system random generator failed")]
    Random,
}

#[derive(Serialize, Deserialize)]
struct File {
    identity: String,
    #[serde(rename = "static")]
    static_key: String,
    static_pub: String,
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

fn key32(field: &'static str, text: &str) -> Result<Zeroizing<[u8; 32]>, IdentityError> {
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
    /// Loads `<dir>/relay-identity.json`, creating it (0600, atomically) on first use.
    pub fn load_or_create(dir: &Path) -> Result<Identity, IdentityError> {
        let path = dir.join(FILE);
        if let Some(file) = jucode_store::read_json::<File>(&path)? {
            let seed = key32("identity", &file.identity)?;
            let static_private = key32("static", &file.static_key)?;
            let identity = Identity::from_keys(&seed, static_private)?;
            if b64(&identity.static_public) != file.static_pub {
                return Err(IdentityError::Invalid(
                    "static_pub",
                    "does not match the static key".into(),
                ));
            }
            return Ok(identity);
        }
        let rng = SystemRandom::new();
        let mut seed = Zeroizing::new([0u8; 32]);
        let mut static_private = Zeroizing::new([0u8; 32]);
        rng.fill(&mut seed[..])
            .and_then(|()| rng.fill(&mut static_private[..]))
            .map_err(|_| IdentityError::Random)?;
        let identity = Identity::from_keys(&seed, static_private)?;
        // File wipes its private fields when dropped.
        let file = File {
            identity: b64(&seed[..]),
            static_key: b64(&identity.static_private[..]),
            static_pub: b64(&identity.static_public),
        };
        jucode_store::write_json_atomic(&path, &file)?;
        Ok(identity)
    }

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

    fn from_keys(
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

    pub(crate) fn static_private(&self) -> &[u8; 32] {
        &self.static_private
    }

    /// An Ed25519 signature over `message`.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        self.signing.sign(message).as_ref().to_vec()
    }
}

impl Drop for File {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        self.identity.zeroize();
        self.static_key.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn created_once_with_mode_0600_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let a = Identity::load_or_create(dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let b = Identity::load_or_create(dir.path()).unwrap();
        assert_eq!(a.public(), b.public());
        assert_eq!(a.static_public(), b.static_public());
        assert_eq!(a.host_id().len(), 22);
        assert_eq!(b64(a.static_public()).len(), 43);
        let sig = a.sign(b"x");
        ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, b.public())
            .verify(b"x", &sig)
            .unwrap();
    }

    #[test]
    fn a_damaged_file_is_an_error_not_a_new_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(FILE),
            r#"{"identity":"AAAA","static":"AAAA","static_pub":"AAAA"}"#,
        )
        .unwrap();
        assert!(Identity::load_or_create(dir.path()).is_err());
    }
}
