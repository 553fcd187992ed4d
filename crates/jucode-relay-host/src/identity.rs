//! The daemon's relay keys on disk: `<state>/relay-identity.json`, mode 0600, made on first
//! use (relay-protocol §2).

use std::path::Path;

use jucode_relay_proto::identity::{Identity, IdentityError, b64, key32};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

/// The identity file's name in the state directory.
pub const FILE: &str = "relay-identity.json";

/// Why the identity could not be loaded or made.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Store(#[from] jucode_store::StoreError),
    #[error(transparent)]
    Keys(#[from] IdentityError),
}

#[derive(Serialize, Deserialize)]
struct File {
    identity: String,
    #[serde(rename = "static")]
    static_key: String,
    static_pub: String,
}

impl Drop for File {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        self.identity.zeroize();
        self.static_key.zeroize();
    }
}

/// Loads `<dir>/relay-identity.json`, creating it (0600, atomically) on first use.
pub fn load_or_create(dir: &Path) -> Result<Identity, LoadError> {
    let path = dir.join(FILE);
    if let Some(file) = jucode_store::read_json::<File>(&path)? {
        let seed = key32("identity", &file.identity)?;
        let static_private = key32("static", &file.static_key)?;
        let identity = Identity::from_keys(&seed, static_private)?;
        if b64(identity.static_public()) != file.static_pub {
            return Err(IdentityError::Invalid(
                "static_pub",
                "does not match the static key".into(),
            )
            .into());
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
        static_key: b64(identity.static_private()),
        static_pub: b64(identity.static_public()),
    };
    jucode_store::write_json_atomic(&path, &file)?;
    Ok(identity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn created_once_with_mode_0600_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create(dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let b = load_or_create(dir.path()).unwrap();
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
        assert!(load_or_create(dir.path()).is_err());
    }
}
