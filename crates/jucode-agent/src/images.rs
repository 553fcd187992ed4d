//! Images attached to a `user_message`: which paths a session may attach and reading them
//! for a request.
//!
//! A path must be absolute and lie in the session's directories (cwd and extra directories,
//! under the sandbox's read rules) or in `~/.jucode/uploads`, where the daemon's `upload` op
//! puts files. Only png, jpeg, gif and webp up to 16 MiB are sent.

use std::path::{Path, PathBuf};

use base64::Engine as _;

use crate::model::{ImageData, Images};
use crate::tools::ToolEnv;

/// The largest image sent to the model.
pub const MAX_IMAGE_BYTES: u64 = 16 * 1024 * 1024;

/// Checks an attached path; the error says why it was not attached.
pub fn check(raw: &str, env: &ToolEnv, uploads: &Path) -> Result<PathBuf, String> {
    let path = Path::new(raw);
    if !path.is_absolute() {
        return Err("an image must be given as an absolute path".into());
    }
    let resolved = std::fs::canonicalize(path).map_err(|e| e.to_string())?;
    let uploads = std::fs::canonicalize(uploads).ok();
    let in_uploads = uploads.is_some_and(|u| resolved.starts_with(u));
    let resolved = if in_uploads {
        resolved
    } else if env.roots.iter().any(|root| resolved.starts_with(root)) {
        env.read_path(raw)?
    } else {
        return Err("it is outside this session's directories and ~/.jucode/uploads".to_string());
    };
    let meta = std::fs::metadata(&resolved).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("it is not a file".into());
    }
    if meta.len() > MAX_IMAGE_BYTES {
        return Err(format!(
            "it is larger than {} MiB",
            MAX_IMAGE_BYTES / 1024 / 1024
        ));
    }
    Ok(resolved)
}

/// The media type from the file's first bytes. Four fixed signatures, checked by hand: a
/// type-sniffing crate would bring hundreds of formats that are refused anyway.
pub fn media_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// Reads one image (already checked) for a request.
pub fn read(path: &Path) -> Result<ImageData, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.len() > MAX_IMAGE_BYTES {
        return Err("it is larger than 16 MiB".into());
    }
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let media_type =
        media_type(&bytes).ok_or("it is not a png, jpeg, gif or webp image".to_string())?;
    Ok(ImageData {
        media_type,
        base64: base64::engine::general_purpose::STANDARD.encode(&bytes),
    })
}

/// Reads every image `paths` names that `images` does not hold yet; unreadable ones are left
/// out (the request then carries a note in their place).
pub fn load_missing<'a>(images: &mut Images, paths: impl IntoIterator<Item = &'a String>) {
    for path in paths {
        if images.contains_key(path) {
            continue;
        }
        match read(Path::new(path)) {
            Ok(image) => {
                images.insert(path.clone(), image);
            }
            Err(e) => tracing::warn!("image {path} could not be read: {e}"),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::model::{Message, NO_IMAGES, Request, anthropic, chat};
    use crate::tools::tests::env_in;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn only_the_four_types_are_recognised() {
        assert_eq!(media_type(PNG), Some("image/png"));
        assert_eq!(media_type(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(media_type(b"GIF89a...."), Some("image/gif"));
        assert_eq!(media_type(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(media_type(b"RIFF\0\0\0\0WAVEfmt "), None);
        assert_eq!(media_type(b"%PDF-1.7"), None);
        assert_eq!(media_type(b""), None);
    }

    #[test]
    fn paths_outside_the_session_and_uploads_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let uploads = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let env = env_in(dir.path(), &[]);
        let inside = env.cwd.join("shot.png");
        std::fs::write(&inside, PNG).unwrap();
        let uploaded = uploads.path().join("u-1-shot.png");
        std::fs::write(&uploaded, PNG).unwrap();
        let elsewhere = outside.path().join("x.png");
        std::fs::write(&elsewhere, PNG).unwrap();
        std::os::unix::fs::symlink(&elsewhere, env.cwd.join("link.png")).unwrap();

        assert_eq!(
            check(inside.to_str().unwrap(), &env, uploads.path()).unwrap(),
            inside
        );
        assert!(check(uploaded.to_str().unwrap(), &env, uploads.path()).is_ok());
        for bad in [
            elsewhere.to_str().unwrap().to_string(),
            env.cwd.join("link.png").display().to_string(),
            "shot.png".to_string(),
            env.cwd.join("missing.png").display().to_string(),
            env.cwd.display().to_string(),
        ] {
            assert!(check(&bad, &env, uploads.path()).is_err(), "{bad}");
        }
        let big = env.cwd.join("big.png");
        let file = std::fs::File::create(&big).unwrap();
        file.set_len(MAX_IMAGE_BYTES + 1).unwrap();
        assert!(
            check(big.to_str().unwrap(), &env, uploads.path())
                .unwrap_err()
                .contains("16 MiB")
        );
        let text = env.cwd.join("notes.png");
        std::fs::write(&text, "hello").unwrap();
        assert!(read(&text).unwrap_err().contains("not a png"));
    }

    fn request_bodies(images: &Images) -> (serde_json::Value, serde_json::Value) {
        let messages = vec![Message::User {
            content: "what is this?".into(),
            images: vec!["/a/shot.png".into(), "/a/gone.jpg".into()],
        }];
        let req = Request {
            model: "m",
            system: "s",
            messages: &messages,
            tools: &[],
            max_tokens: 10,
            images,
        };
        (chat::body(req, true), anthropic::body(req, true))
    }

    #[test]
    fn images_travel_as_data_urls_and_image_blocks() {
        let mut images = Images::new();
        images.insert(
            "/a/shot.png".into(),
            ImageData {
                media_type: "image/png",
                base64: "iVBORw==".into(),
            },
        );
        let (chat, anthropic) = request_bodies(&images);

        let parts = chat["messages"][1]["content"].as_array().unwrap();
        assert_eq!(
            parts[0],
            serde_json::json!({"type":"text","text":"what is this?"})
        );
        assert_eq!(parts[1]["type"], "image_url");
        assert_eq!(
            parts[1]["image_url"]["url"],
            "data:image/png;base64,iVBORw=="
        );
        assert_eq!(parts[2]["type"], "text");
        assert!(parts[2]["text"].as_str().unwrap().contains("/a/gone.jpg"));

        let blocks = anthropic["messages"][0]["content"].as_array().unwrap();
        assert_eq!(
            blocks[0],
            serde_json::json!({"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}})
        );
        assert!(blocks[1]["text"].as_str().unwrap().contains("/a/gone.jpg"));
        assert_eq!(blocks[2]["text"], "what is this?");

        // Without images a user message stays plain text.
        let messages = vec![Message::User {
            content: "hi".into(),
            images: vec![],
        }];
        let req = Request {
            model: "m",
            system: "s",
            messages: &messages,
            tools: &[],
            max_tokens: 10,
            images: &NO_IMAGES,
        };
        assert_eq!(chat::body(req, true)["messages"][1]["content"], "hi");
    }

    #[test]
    fn a_read_image_is_base64() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.gif");
        std::fs::write(&path, b"GIF89a\x01\x00").unwrap();
        let image = read(&path).unwrap();
        assert_eq!(image.media_type, "image/gif");
        assert_eq!(image.base64, "R0lGODlhAQA=");
        let mut images = Images::new();
        let paths = vec![path.display().to_string(), "/nope.png".to_string()];
        load_missing(&mut images, &paths);
        assert_eq!(images.len(), 1);
    }
}
