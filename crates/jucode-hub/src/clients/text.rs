//! [`FrameText`]: a frame's JSON text as every client's queue holds it.

use bytes::Bytes;

/// A frame's JSON text, serialized once and shared by every client it goes to: a clone counts
/// a reference, and the front end hands the bytes to its socket without copying them. Only
/// ever made from a `str` or from JSON text `serde_json` wrote, so it is always UTF-8.
#[derive(Clone, PartialEq, Eq)]
pub struct FrameText(Bytes);

impl FrameText {
    /// The text. Checking it is a fast scan of bytes known to be UTF-8; it never fails.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// The text's bytes, unchecked.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The shared bytes themselves (another reference, not a copy).
    pub fn to_bytes(&self) -> Bytes {
        self.0.clone()
    }

    /// The shared bytes themselves, this reference handed over.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// Text `serde_json` wrote into a buffer (JSON text is UTF-8), taken without a copy and
    /// without scanning it again: this runs once per event the hub broadcasts.
    pub(crate) fn from_json(bytes: Vec<u8>) -> FrameText {
        FrameText(Bytes::from(bytes))
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it is empty (no frame is).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<String> for FrameText {
    /// Takes the string's buffer as it is, without a copy.
    fn from(text: String) -> FrameText {
        FrameText(Bytes::from(text))
    }
}

impl From<&str> for FrameText {
    fn from(text: &str) -> FrameText {
        FrameText(Bytes::copy_from_slice(text.as_bytes()))
    }
}

impl std::ops::Deref for FrameText {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for FrameText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for FrameText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
