//! `fs_read`: the first MiB of a file as text, or `binary`.
//!
//! A file is binary when its first 8 KiB hold a NUL byte or its bytes are not UTF-8 (apart
//! from a character cut in two by the 1 MiB limit); its text is then left out.

use std::io::Read as _;

use jucode_protocol::daemon::DaemonEvent;
use jucode_protocol::daemon::files::FS_READ_MAX_BYTES;

use super::{FilesError, Rule, Scope};

/// How far a NUL byte marks a file as binary.
const NUL_WINDOW: usize = 8192;

pub(super) fn fs_read(rule: &Rule, path: String) -> Result<DaemonEvent, FilesError> {
    let op = "fs_read";
    let real = rule.check(op, &path, Scope::Known)?;
    let file = rule.open(op, &path, &real, Scope::Known)?;
    let io = |e: std::io::Error| FilesError::Io {
        op,
        path: path.clone(),
        message: e.to_string(),
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(FilesError::NotAFile { op, path });
    }
    let mut bytes = Vec::new();
    file.take(FS_READ_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    // The file may have grown since the stat: what was read decides.
    let truncated = bytes.len() as u64 > FS_READ_MAX_BYTES;
    bytes.truncate(usize::try_from(FS_READ_MAX_BYTES).unwrap_or(usize::MAX));
    let (binary, text) = decode(bytes, truncated);
    Ok(DaemonEvent::FsRead {
        path,
        size: meta.len(),
        binary,
        text,
        truncated,
    })
}

/// The text of `bytes`, or `(true, "")` when they are binary. `cut`: the bytes stop at the
/// limit, so a last character may be incomplete.
pub(super) fn decode(mut bytes: Vec<u8>, cut: bool) -> (bool, String) {
    if bytes[..bytes.len().min(NUL_WINDOW)].contains(&0) {
        return (true, String::new());
    }
    match std::str::from_utf8(&bytes) {
        Ok(_) => {}
        Err(e) if cut && e.error_len().is_none() => bytes.truncate(e.valid_up_to()),
        Err(_) => return (true, String::new()),
    }
    match String::from_utf8(bytes) {
        Ok(text) => (false, text),
        Err(_) => (true, String::new()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn text_binary_and_a_cut_character() {
        assert_eq!(decode(b"hi\n".to_vec(), false), (false, "hi\n".into()));
        assert_eq!(decode(b"a\0b".to_vec(), false), (true, String::new()));
        assert_eq!(decode(vec![0xff, 0xfe, b'a'], false), (true, String::new()));
        // "é" is two bytes; the limit fell between them.
        assert_eq!(decode(vec![b'a', 0xc3], true), (false, "a".into()));
        assert_eq!(decode(vec![b'a', 0xc3], false), (true, String::new()));
        assert_eq!(decode(Vec::new(), false), (false, String::new()));
    }
}
