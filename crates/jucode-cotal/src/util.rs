//! Small helpers: time, randomness, hashing, constant-time compare.

use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use subtle::ConstantTimeEq;

/// Milliseconds since the Unix epoch. The connector runs outside any hub, so it reads the
/// system clock through `jucode_clock`.
pub fn now_ms() -> u64 {
    use jucode_clock::Clock as _;
    jucode_clock::SystemClock::new().now_ms()
}

/// `n` random bytes as unpadded URL-safe base64.
pub fn random_token(n: usize) -> String {
    let mut buf = vec![0u8; n];
    // SystemRandom only fails when the OS RNG is unavailable; fall back to a
    // time-derived value rather than panicking (ids, not secrets, use this path too).
    if SystemRandom::new().fill(&mut buf).is_err() {
        let t = now_ms().to_le_bytes();
        for (i, b) in buf.iter_mut().enumerate() {
            *b = t[i % 8] ^ (i as u8);
        }
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf)
}

/// A secret token; fails instead of degrading when the OS RNG is unavailable.
pub fn secret_token() -> Result<String, crate::Error> {
    let mut buf = [0u8; 32];
    SystemRandom::new()
        .fill(&mut buf)
        .map_err(|_| crate::Error::Launch("the system random generator failed".into()))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf))
}

/// Lowercase `[a-z0-9]{26}` id (the lifecycle-uid grammar).
pub fn lifecycle_uid() -> String {
    let mut buf = [0u8; 26];
    if SystemRandom::new().fill(&mut buf).is_err() {
        let t = now_ms().to_le_bytes();
        for (i, b) in buf.iter_mut().enumerate() {
            *b = t[i % 8].wrapping_add(i as u8);
        }
    }
    const ALPHA: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    buf.iter()
        .map(|b| ALPHA[(*b as usize) % ALPHA.len()] as char)
        .collect()
}

/// SHA-256 as lowercase hex.
pub fn sha256_hex(data: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, data);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Compare two secrets in constant time (both hashed first, so lengths leak nothing).
pub fn token_eq(a: &str, b: &str) -> bool {
    let ha = ring::digest::digest(&ring::digest::SHA256, a.as_bytes());
    let hb = ring::digest::digest(&ring::digest::SHA256, b.as_bytes());
    ha.as_ref().ct_eq(hb.as_ref()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_hashes() {
        assert!(token_eq("abc", "abc"));
        assert!(!token_eq("abc", "abd"));
        assert!(!token_eq("abc", "abcd"));
        assert_eq!(random_token(16).len(), 22);
        let uid = lifecycle_uid();
        assert_eq!(uid.len(), 26);
        assert!(
            uid.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
        assert_eq!(&sha256_hex(b"")[..8], "e3b0c442");
    }
}
