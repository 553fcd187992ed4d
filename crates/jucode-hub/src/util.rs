//! Small shared pieces: ids, random tokens.

use std::sync::atomic::{AtomicU64, Ordering};

use ring::rand::{SecureRandom, SystemRandom};

static COUNTER: AtomicU64 = AtomicU64::new(1);

/// A readable unique id: `<prefix>-<ms>-<counter>`, `ms` being the hub clock's time now.
pub fn new_id(prefix: &str, now_ms: u64) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{now_ms}-{n}")
}

/// `n` random bytes from the system generator.
pub fn random_bytes<const N: usize>() -> Result<[u8; N], crate::HubError> {
    let mut buf = [0u8; N];
    SystemRandom::new()
        .fill(&mut buf)
        .map_err(|_| crate::HubError::Random)?;
    Ok(buf)
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Lowercase hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, data).as_ref())
}

/// A random UUID (version 4) string: the shape engines use for conversation ids.
pub fn new_uuid() -> Result<String, crate::HubError> {
    let mut b: [u8; 16] = random_bytes()?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}
