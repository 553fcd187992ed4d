//! `fs_image`: an image inside a known directory as a data URL (how the remote page shows a
//! message's images). The type comes from the bytes, never the name.

use std::io::Read as _;

use base64::Engine as _;
use jucode_protocol::daemon::DaemonEvent;
use jucode_protocol::daemon::files::FS_IMAGE_MAX_BYTES;

use super::{FilesError, Rule, Scope};

/// The image's media type from its first bytes (the name says nothing a client cannot fake).
pub(crate) fn image_type(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// Answers `fs_image`.
pub(super) fn fs_image(rule: &Rule, path: String) -> Result<DaemonEvent, FilesError> {
    let real = rule.check("fs_image", &path, Scope::Known)?;
    let file = rule.open("fs_image", &path, &real, Scope::Known)?;
    let data = image_data_url(file, &path)?;
    Ok(DaemonEvent::FsImage { path, data })
}

/// Reads an opened (and checked) file as a data URL.
fn image_data_url(file: std::fs::File, path: &str) -> Result<String, FilesError> {
    let io = |e: std::io::Error| FilesError::Io {
        op: "fs_image",
        path: path.to_string(),
        message: e.to_string(),
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(FilesError::NotAFile {
            op: "fs_image",
            path: path.to_string(),
        });
    }
    if meta.len() > FS_IMAGE_MAX_BYTES {
        return Err(FilesError::TooLarge {
            path: path.to_string(),
        });
    }
    // Read at most one byte past the limit: the file may grow between the check and the read.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(FS_IMAGE_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > FS_IMAGE_MAX_BYTES {
        return Err(FilesError::TooLarge {
            path: path.to_string(),
        });
    }
    let Some(media) = image_type(&bytes) else {
        return Err(FilesError::NotAnImage {
            path: path.to_string(),
        });
    };
    let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(format!("data:{media};base64,{encoded}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn images_are_known_by_their_bytes() {
        assert_eq!(image_type(PNG), Some("image/png"));
        assert_eq!(image_type(&[0xff, 0xd8, 0xff, 0xe0]), Some("image/jpeg"));
        assert_eq!(image_type(b"GIF89a..."), Some("image/gif"));
        assert_eq!(image_type(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(image_type(b"<svg onload=x>"), None);
        assert_eq!(image_type(b"RIFF\0\0\0\0WAVE"), None);
        assert_eq!(image_type(b""), None);
    }

    #[test]
    fn an_image_becomes_a_data_url_and_anything_else_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let png = tmp.path().join("a.png");
        std::fs::write(&png, PNG).unwrap();
        let url = image_data_url(std::fs::File::open(&png).unwrap(), "a.png").unwrap();
        assert!(
            url.starts_with("data:image/png;base64,iVBORw0KGgo"),
            "{url}"
        );
        let fake = tmp.path().join("x.png");
        std::fs::write(&fake, b"<svg onload=alert(1)>").unwrap();
        let e = image_data_url(std::fs::File::open(&fake).unwrap(), "x.png").unwrap_err();
        assert_eq!(
            e.to_string(),
            "fs_image: x.png is not a png, jpeg, gif or webp image"
        );
        let e = image_data_url(std::fs::File::open(tmp.path()).unwrap(), "dir").unwrap_err();
        assert_eq!(e.to_string(), "fs_image: dir is not a file");
    }
}
