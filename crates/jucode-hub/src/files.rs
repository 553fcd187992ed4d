//! Files a client reads through the daemon, inside known directories only: the projects of
//! the workspaces (with their extra directories), every session's directory, every agent's
//! directory and working directory, and the uploads folder. Credentials (`~/.ssh`, `~/.gnupg`,
//! `~/.aws`, the jucode home's `auth.json` and `daemon/`) are never read, even when a known
//! directory contains them. Paths are resolved (symlinks followed) before either check, so a
//! link inside a project cannot lead out of it.
//!
//! This build answers `fs_image`; `fs_list`, `fs_read` and the terminals will share
//! [`readable`].

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use jucode_protocol::daemon::files::FS_IMAGE_MAX_BYTES;
use jucode_protocol::daemon::{DaemonEvent, FilesOp, Reply};

use crate::cx::OpCx;
use crate::error::OpError;
use crate::paths::{PathError, expand_home};
use crate::{Hub, Inner, to_value};

/// Why a file cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FilesError {
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("{op}: {path} does not exist")]
    Missing { op: &'static str, path: String },
    #[error(
        "{op}: {path} is outside the directories the daemon reads (projects, session and agent directories, uploads)"
    )]
    Outside { op: &'static str, path: String },
    #[error("{op}: {path} holds credentials and is never read")]
    Credentials { op: &'static str, path: String },
    #[error("{op}: {path} is not a file")]
    NotAFile { op: &'static str, path: String },
    #[error("fs_image: {path} is larger than {} MiB", FS_IMAGE_MAX_BYTES / (1024 * 1024))]
    TooLarge { path: String },
    #[error("fs_image: {path} is not a png, jpeg, gif or webp image")]
    NotAnImage { path: String },
    #[error("{op}: cannot read {path}: {message}")]
    Io {
        op: &'static str,
        path: String,
        message: String,
    },
}

/// The directories a client may read inside, as named in the state (not yet resolved).
pub(crate) fn known_dirs(inner: &Inner, home: &Path) -> Vec<PathBuf> {
    let mut dirs = inner.workspaces.project_dirs();
    dirs.extend(inner.sessions.cwds());
    for agent in inner.agents.map.values() {
        dirs.push(agent.dir.clone());
        dirs.push(agent.config.cwd.clone());
    }
    dirs.push(home.join("uploads"));
    dirs
}

/// What is never read, under whichever known directory.
pub(crate) fn credentials(home: &Path, user_home: &Path) -> Vec<PathBuf> {
    vec![
        user_home.join(".ssh"),
        user_home.join(".gnupg"),
        user_home.join(".aws"),
        home.join("auth.json"),
        home.join("daemon"),
    ]
}

/// The rule every read follows: `path` resolved, inside one of `known`, in none of `secret`.
/// Both lists are resolved here too, so a project reached through a symlink still counts.
pub(crate) fn readable(
    op: &'static str,
    path: &str,
    user_home: &Path,
    known: &[PathBuf],
    secret: &[PathBuf],
) -> Result<PathBuf, FilesError> {
    let expanded = expand_home(path, user_home)?;
    let real = std::fs::canonicalize(&expanded).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => FilesError::Missing {
            op,
            path: path.to_string(),
        },
        _ => FilesError::Io {
            op,
            path: path.to_string(),
            message: e.to_string(),
        },
    })?;
    let resolve = |p: &PathBuf| std::fs::canonicalize(p).ok();
    if secret
        .iter()
        .filter_map(resolve)
        .any(|s| real.starts_with(s))
    {
        return Err(FilesError::Credentials {
            op,
            path: path.to_string(),
        });
    }
    if !known
        .iter()
        .filter_map(resolve)
        .any(|k| real.starts_with(k))
    {
        return Err(FilesError::Outside {
            op,
            path: path.to_string(),
        });
    }
    Ok(real)
}

/// The image's media type from its first bytes (the name says nothing a client cannot fake).
fn image_type(head: &[u8]) -> Option<&'static str> {
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

/// Reads `real` (already checked) as a data URL.
fn image_data_url(real: &Path, path: &str) -> Result<String, FilesError> {
    let io = |e: std::io::Error| FilesError::Io {
        op: "fs_image",
        path: path.to_string(),
        message: e.to_string(),
    };
    let file = std::fs::File::open(real).map_err(io)?;
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

/// Answers `fs_image` off the connection's task: the read and the encoding may take a while
/// for a large image, and nothing else on the connection should wait for them.
pub(crate) fn handle(cx: &OpCx<'_>, op: FilesOp) -> Result<(), OpError> {
    let FilesOp::FsImage { path } = op;
    let (known, secret) = {
        let inner = cx.hub.lock();
        (
            known_dirs(&inner, &cx.hub.config.home),
            credentials(&cx.hub.config.home, &cx.hub.config.user_home),
        )
    };
    let hub: Arc<Hub> = cx.hub.clone();
    let client = cx.client;
    let id = cx.id.clone();
    let user_home = cx.hub.config.user_home.clone();
    tokio::task::spawn_blocking(move || {
        let reply = readable("fs_image", &path, &user_home, &known, &secret)
            .and_then(|real| image_data_url(&real, &path))
            .map_or_else(
                |e| Reply::error(id.clone(), e.to_string()),
                |data| Reply::to(id.clone(), DaemonEvent::FsImage { path, data }),
            );
        hub.lock().clients.send(client, &to_value(&reply));
    });
    Ok(())
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
    fn reads_stay_inside_known_directories_and_away_from_credentials() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let project = root.join("p");
        let other = root.join("other");
        let ssh = root.join(".ssh");
        for d in [&project, &other, &ssh] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(project.join("a.png"), PNG).unwrap();
        std::fs::write(other.join("b.png"), PNG).unwrap();
        std::fs::write(ssh.join("id.png"), PNG).unwrap();
        std::os::unix::fs::symlink(other.join("b.png"), project.join("link.png")).unwrap();
        std::os::unix::fs::symlink(&ssh, project.join("keys")).unwrap();
        let known = vec![project.clone(), root.join("gone")];
        let secret = vec![ssh.clone()];
        let read = |p: &str| readable("fs_image", p, &root, &known, &secret);
        assert_eq!(
            read(&format!("{}/a.png", project.display())).unwrap(),
            project.join("a.png")
        );
        assert_eq!(read("~/p/a.png").unwrap(), project.join("a.png"));
        let e = read(&format!("{}/b.png", other.display())).unwrap_err();
        assert!(e.to_string().contains("outside the directories"), "{e}");
        // A link out of the project is judged by where it leads.
        assert!(matches!(
            read("~/p/link.png").unwrap_err(),
            FilesError::Outside { .. }
        ));
        assert!(matches!(
            read("~/p/../other/b.png").unwrap_err(),
            FilesError::Outside { .. }
        ));
        assert!(matches!(
            read("~/p/keys/id.png").unwrap_err(),
            FilesError::Credentials { .. }
        ));
        assert!(matches!(
            read("~/p/none.png").unwrap_err(),
            FilesError::Missing { .. }
        ));
        assert!(read("relative.png").is_err());
        assert!(read("~/p/a\0.png").is_err());
    }

    #[test]
    fn an_image_becomes_a_data_url_and_anything_else_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let png = tmp.path().join("a.png");
        std::fs::write(&png, PNG).unwrap();
        let url = image_data_url(&png, "a.png").unwrap();
        assert!(
            url.starts_with("data:image/png;base64,iVBORw0KGgo"),
            "{url}"
        );
        let fake = tmp.path().join("x.png");
        std::fs::write(&fake, b"<svg onload=alert(1)>").unwrap();
        let e = image_data_url(&fake, "x.png").unwrap_err();
        assert_eq!(
            e.to_string(),
            "fs_image: x.png is not a png, jpeg, gif or webp image"
        );
        let e = image_data_url(tmp.path(), "dir").unwrap_err();
        assert_eq!(e.to_string(), "fs_image: dir is not a file");
    }
}
