//! Paths clients name: `~` expanded, absolute, canonical, an existing directory.

use std::path::{Path, PathBuf};

use crate::error::IoError;

/// Why a path a client sent cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PathError {
    #[error("a path cannot contain a NUL byte")]
    NulByte,
    #[error("{0} is not an absolute path")]
    NotAbsolute(String),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
}

/// Expands a leading `~` to `home` and refuses relative paths and NUL bytes.
pub(crate) fn expand_home(path: &str, home: &Path) -> Result<PathBuf, PathError> {
    if path.contains('\0') {
        return Err(PathError::NulByte);
    }
    let expanded = if path == "~" {
        home.to_path_buf()
    } else if let Some(rest) = path.strip_prefix("~/") {
        home.join(rest)
    } else {
        PathBuf::from(path)
    };
    if !expanded.is_absolute() {
        return Err(PathError::NotAbsolute(path.to_string()));
    }
    Ok(expanded)
}

/// Expands `~` and makes `path` absolute and canonical; errors name the path.
pub(crate) fn resolve_dir(path: &str, home: &Path) -> Result<PathBuf, PathError> {
    let expanded = expand_home(path, home)?;
    let canonical = std::fs::canonicalize(&expanded).map_err(IoError::at(&expanded))?;
    if canonical.is_dir() {
        Ok(canonical)
    } else {
        Err(PathError::NotADirectory(canonical))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_expanded_and_checked_with_their_texts() {
        let home = Path::new("/home/u");
        assert_eq!(expand_home("~", home).unwrap(), home);
        assert_eq!(expand_home("~/a", home).unwrap(), home.join("a"));
        assert_eq!(
            expand_home("rel", home).unwrap_err().to_string(),
            "rel is not an absolute path"
        );
        assert_eq!(
            expand_home("/a\0b", home).unwrap_err().to_string(),
            "a path cannot contain a NUL byte"
        );
        let err = resolve_dir("/no/such/dir", home).unwrap_err().to_string();
        assert!(err.starts_with("/no/such/dir: "), "{err}");
    }
}
