//! Finding an engine's CLI: `options.bin`, the engine's variable (`CLAUDE_BIN`, `CODEX_BIN`),
//! `PATH`, then the directories installers commonly use. A miss names every place looked at.

use std::path::{Path, PathBuf};

use jucode_engine::EngineError;

use crate::EngineOptions;

/// The directories looked at after `PATH`, relative to the user's home when not absolute.
const USUAL_DIRS: &[&str] = &[
    ".claude/local",
    ".local/bin",
    ".npm-global/bin",
    ".bun/bin",
    ".cargo/bin",
    "/usr/local/bin",
    "/opt/homebrew/bin",
    "/usr/bin",
];

/// Finds `program` for an engine, in the order the spec gives.
pub fn find_binary(
    program: &str,
    env_var: &str,
    options: &EngineOptions,
    user_home: &Path,
) -> Result<PathBuf, EngineError> {
    let mut looked = Vec::new();
    if let Some(bin) = &options.bin {
        if is_executable(bin) {
            return Ok(bin.clone());
        }
        return Err(EngineError::Unavailable(format!(
            "options.bin {} is not an executable file",
            bin.display()
        )));
    }
    if let Some(bin) = options.env_var(env_var).filter(|b| !b.is_empty()) {
        let bin = PathBuf::from(bin);
        if is_executable(&bin) {
            return Ok(bin);
        }
        looked.push(format!("{env_var}={}", bin.display()));
    }
    let path_var = options.env_var("PATH").unwrap_or_default();
    if let Ok(found) = which::which_in(program, Some(&path_var), user_home) {
        return Ok(found);
    }
    looked.push("PATH".to_string());
    for dir in USUAL_DIRS {
        let dir = if dir.starts_with('/') {
            PathBuf::from(dir)
        } else {
            user_home.join(dir)
        };
        let candidate = dir.join(program);
        if is_executable(&candidate) {
            return Ok(candidate);
        }
        looked.push(dir.display().to_string());
    }
    Err(EngineError::Unavailable(format!(
        "{program} was not found (looked in {}); install it or set {env_var} or options.bin",
        looked.join(", ")
    )))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn exe(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn the_order_is_bin_variable_path_then_usual_dirs() {
        let home = tempfile::tempdir().unwrap();
        let usual = home.path().join(".local/bin/fakeprog-x");
        exe(&usual);
        let on_path = home.path().join("p/fakeprog-x");
        exe(&on_path);
        let by_var = home.path().join("v/fakeprog-x");
        exe(&by_var);
        let mut o = EngineOptions {
            env: vec![("PATH".into(), "/nonexistent".into())],
            ..Default::default()
        };
        assert_eq!(
            find_binary("fakeprog-x", "FAKEPROG_BIN", &o, home.path()).unwrap(),
            usual
        );
        o.env = vec![("PATH".into(), home.path().join("p").display().to_string())];
        assert_eq!(
            find_binary("fakeprog-x", "FAKEPROG_BIN", &o, home.path()).unwrap(),
            on_path
        );
        o.env
            .push(("FAKEPROG_BIN".into(), by_var.display().to_string()));
        assert_eq!(
            find_binary("fakeprog-x", "FAKEPROG_BIN", &o, home.path()).unwrap(),
            by_var
        );
        o.bin = Some(usual.clone());
        assert_eq!(
            find_binary("fakeprog-x", "FAKEPROG_BIN", &o, home.path()).unwrap(),
            usual
        );
    }

    #[test]
    fn a_miss_names_where_it_looked() {
        let home = tempfile::tempdir().unwrap();
        let o = EngineOptions {
            env: vec![("PATH".into(), "/nonexistent".into())],
            ..Default::default()
        };
        let err = find_binary("nosuchprog-y", "NOSUCH_BIN", &o, home.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("nosuchprog-y was not found"), "{err}");
        assert!(err.contains("PATH"), "{err}");
        assert!(err.contains(".claude/local"), "{err}");
        assert!(err.contains("/opt/homebrew/bin"), "{err}");
        assert!(err.contains("NOSUCH_BIN"), "{err}");
    }
}
