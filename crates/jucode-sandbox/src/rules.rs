//! The file tools' side of the policy: the same rules bwrap enforces for commands.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::resolve::resolve_path;
use crate::{Mode, PROTECTED_NAMES, Policy, SandboxError};

/// How deep and how wide the hard-link scan of hidden directories goes: enough for ~/.ssh or
/// ~/.aws, bounded so a huge ~/.config/gcloud cannot stall a tool call.
const HARDLINK_SCAN_DEPTH: usize = 3;
const HARDLINK_SCAN_LIMIT: usize = 2000;

/// Refuses reads of credentials (see [`Policy::hidden_paths`]), also through symlinks and
/// hard links. Full access allows everything.
pub fn check_read(policy: &Policy, path: &Path) -> Result<(), SandboxError> {
    checked_read_path(policy, path).map(|_| ())
}

/// [`check_read`], returning the resolved path to open.
pub fn checked_read_path(policy: &Policy, path: &Path) -> Result<PathBuf, SandboxError> {
    policy.validate()?;
    let resolved = resolve_path(&policy.cwd, path)?;
    if policy.mode == Mode::FullAccess {
        return Ok(resolved);
    }
    if is_credential(policy, &resolved)? {
        return Err(SandboxError::ReadDenied { path: resolved });
    }
    Ok(resolved)
}

/// Allows writes only under cwd and the writable roots, never inside `.git` (nor a worktree's
/// real git directory), `.jucode`, `.agents`, a read-only directory or a credential path.
/// Read-only refuses every write; full access allows everything.
pub fn check_write(policy: &Policy, path: &Path) -> Result<(), SandboxError> {
    checked_write_path(policy, path).map(|_| ())
}

/// [`check_write`], returning the resolved path to write.
pub fn checked_write_path(policy: &Policy, path: &Path) -> Result<PathBuf, SandboxError> {
    policy.validate()?;
    let resolved = resolve_path(&policy.cwd, path)?;
    let deny = |reason: &str| SandboxError::WriteDenied {
        path: resolved.clone(),
        reason: reason.to_string(),
    };
    match policy.mode {
        Mode::FullAccess => return Ok(resolved),
        Mode::ReadOnly => return Err(deny("the session is read-only")),
        Mode::WorkspaceWrite => {}
    }
    if is_credential(policy, &resolved)? {
        return Err(deny("it holds credentials"));
    }
    let roots = resolved_write_roots(policy)?;
    let Some(root) = roots.iter().find(|r| resolved.starts_with(r)) else {
        return Err(deny(
            "it is outside the writable directories (cwd and the rw directories)",
        ));
    };
    if let Ok(rel) = resolved.strip_prefix(root) {
        for comp in rel.components() {
            let name = comp.as_os_str();
            if let Some(p) = PROTECTED_NAMES.iter().find(|p| name == **p) {
                return Err(deny(&format!("{p} stays read-only")));
            }
        }
    }
    for root in &roots {
        for git_dir in worktree_git_dirs(root)? {
            if resolved.starts_with(&git_dir) {
                return Err(deny("a git directory stays read-only"));
            }
        }
    }
    for ro in &policy.readable {
        if resolved.starts_with(resolve_path(Path::new("/"), ro)?) {
            return Err(deny("it is inside a read-only directory"));
        }
    }
    Ok(resolved)
}

/// cwd and the writable roots, resolved.
pub(crate) fn resolved_write_roots(policy: &Policy) -> Result<Vec<PathBuf>, SandboxError> {
    policy
        .write_roots()
        .iter()
        .map(|r| resolve_path(Path::new("/"), r))
        .collect()
}

/// True when `resolved` (already free of symlinks) is a hidden path or below one, or a hard
/// link to a file in one.
fn is_credential(policy: &Policy, resolved: &Path) -> Result<bool, SandboxError> {
    let hidden = resolved_hidden(policy)?;
    if hidden.iter().any(|h| resolved.starts_with(h)) {
        return Ok(true);
    }
    // A hard link made elsewhere shares the inode: compare identities, not names.
    let meta = match std::fs::symlink_metadata(resolved) {
        Ok(meta) => meta,
        Err(_) => return Ok(false),
    };
    if !meta.is_file() || meta.nlink() < 2 {
        return Ok(false);
    }
    let mut ids = HashSet::new();
    for h in &hidden {
        collect_file_ids(h, HARDLINK_SCAN_DEPTH, &mut ids);
    }
    Ok(ids.contains(&(meta.dev(), meta.ino())))
}

/// The hidden paths with symlinks resolved (a symlinked ~/.ssh hides its target), plus the
/// names as written.
pub(crate) fn resolved_hidden(policy: &Policy) -> Result<Vec<PathBuf>, SandboxError> {
    let mut out = Vec::new();
    for h in policy.hidden_paths() {
        out.push(resolve_path(Path::new("/"), &h)?);
        out.push(h);
    }
    Ok(out)
}

fn collect_file_ids(path: &Path, depth: usize, ids: &mut HashSet<(u64, u64)>) {
    if ids.len() >= HARDLINK_SCAN_LIMIT {
        return;
    }
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.is_file() {
        ids.insert((meta.dev(), meta.ino()));
    } else if meta.is_dir() && depth > 0 {
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        for entry in entries.flatten() {
            collect_file_ids(&entry.path(), depth - 1, ids);
        }
    }
}

/// For a git worktree or submodule (`<root>/.git` is a file `gitdir: <dir>`): the real git
/// directory and its `commondir` (the main repository's .git), resolved. Empty otherwise.
pub(crate) fn worktree_git_dirs(root: &Path) -> Result<Vec<PathBuf>, SandboxError> {
    let dot_git = root.join(".git");
    let meta = match std::fs::symlink_metadata(&dot_git) {
        Ok(meta) if meta.is_file() => meta,
        _ => return Ok(Vec::new()),
    };
    // A .git file is one short line; anything big is not one.
    if meta.len() > 64 * 1024 {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(&dot_git).map_err(|source| SandboxError::Io {
        path: dot_git.clone(),
        source,
    })?;
    let Some(target) = text.lines().find_map(|l| l.strip_prefix("gitdir:")) else {
        return Ok(Vec::new());
    };
    let git_dir = resolve_path(root, Path::new(target.trim()))?;
    let mut out = vec![git_dir.clone()];
    if let Ok(common) = std::fs::read_to_string(git_dir.join("commondir")) {
        let common = common.trim();
        if !common.is_empty() {
            out.push(resolve_path(&git_dir, Path::new(common))?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Fixture {
        _dir: tempfile::TempDir,
        root: PathBuf,
        policy: Policy,
    }

    /// home/ with credentials, home/proj/ as cwd (with .git), other/ outside everything.
    fn fixture(mode: Mode) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        for d in [
            "home/.ssh",
            "home/proj/.git",
            "home/proj/ro",
            "home/.jucode/daemon",
            "other",
            "rw",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(home.join(".ssh/id"), b"KEY").unwrap();
        std::fs::write(home.join(".jucode/auth.json"), b"{}").unwrap();
        let policy = Policy {
            mode,
            cwd: home.join("proj"),
            writable: vec![root.join("rw")],
            readable: vec![home.join("proj/ro")],
            network: false,
            user_home: home.clone(),
            jucode_home: home.join(".jucode"),
        };
        Fixture {
            _dir: dir,
            root,
            policy,
        }
    }

    #[test]
    fn writes_inside_cwd_and_writable_roots_only() {
        let f = fixture(Mode::WorkspaceWrite);
        check_write(&f.policy, Path::new("src/new.rs")).unwrap();
        check_write(&f.policy, &f.root.join("rw/deep/new")).unwrap();
        let err = check_write(&f.policy, &f.root.join("other/x")).unwrap_err();
        assert!(err.to_string().contains("outside the writable"), "{err}");
        let err = check_write(&f.policy, Path::new("../x")).unwrap_err();
        assert!(err.to_string().contains("outside the writable"), "{err}");
        let err = check_write(&f.policy, Path::new("sub/../../proj2/x")).unwrap_err();
        assert!(matches!(err, SandboxError::WriteDenied { .. }), "{err}");
    }

    #[test]
    fn protected_directories_stay_read_only() {
        let f = fixture(Mode::WorkspaceWrite);
        for p in [
            ".git/config",
            ".jucode/skills/x.md",
            ".agents/a",
            "sub/.git/HEAD",
            "ro/file",
        ] {
            let err = check_write(&f.policy, Path::new(p)).unwrap_err();
            assert!(
                matches!(err, SandboxError::WriteDenied { .. }),
                "{p}: {err}"
            );
        }
        // A name that only starts like a protected one is fine.
        check_write(&f.policy, Path::new(".github/workflows/ci.yml")).unwrap();
    }

    #[test]
    fn credentials_are_refused_even_when_cwd_is_home() {
        let mut f = fixture(Mode::WorkspaceWrite);
        f.policy.cwd = f.policy.user_home.clone();
        check_read(&f.policy, Path::new("proj/README")).unwrap();
        check_write(&f.policy, Path::new("notes.txt")).unwrap();
        for p in [
            ".ssh/id",
            ".ssh",
            ".jucode/auth.json",
            ".jucode/daemon/token",
            "proj/../.ssh/id",
        ] {
            assert!(
                matches!(
                    check_read(&f.policy, Path::new(p)),
                    Err(SandboxError::ReadDenied { .. })
                ),
                "{p}"
            );
            assert!(check_write(&f.policy, Path::new(p)).is_err(), "{p}");
        }
        // A missing credential path is refused too (no creating ~/.aws/credentials).
        assert!(check_write(&f.policy, Path::new(".aws/credentials")).is_err());
    }

    #[test]
    fn symlink_tricks_are_followed() {
        let f = fixture(Mode::WorkspaceWrite);
        let cwd = &f.policy.cwd;
        symlink(f.policy.user_home.join(".ssh"), cwd.join("keys")).unwrap();
        symlink(f.root.join("other"), cwd.join("out")).unwrap();
        symlink(".git", cwd.join("gitlink")).unwrap();
        let err = check_read(&f.policy, Path::new("keys/id")).unwrap_err();
        assert!(matches!(err, SandboxError::ReadDenied { .. }), "{err}");
        assert!(check_write(&f.policy, Path::new("keys/authorized_keys")).is_err());
        // mkdir -p missing && write missing/../keys/x would land in ~/.ssh.
        assert!(check_write(&f.policy, Path::new("missing/../keys/x")).is_err());
        assert!(check_write(&f.policy, Path::new("out/x")).is_err());
        assert!(check_write(&f.policy, Path::new("gitlink/hooks/pre-commit")).is_err());
        // Reading through a link to an ordinary place is fine.
        check_read(&f.policy, Path::new("out/x")).unwrap();
    }

    #[test]
    fn a_symlinked_ssh_directory_hides_its_target() {
        let f = fixture(Mode::WorkspaceWrite);
        let home = &f.policy.user_home;
        std::fs::rename(home.join(".ssh"), f.root.join("real-ssh")).unwrap();
        symlink(f.root.join("real-ssh"), home.join(".ssh")).unwrap();
        let err = check_read(&f.policy, &f.root.join("real-ssh/id")).unwrap_err();
        assert!(matches!(err, SandboxError::ReadDenied { .. }), "{err}");
    }

    #[test]
    fn hard_links_to_credentials_are_refused() {
        let f = fixture(Mode::WorkspaceWrite);
        let link = f.policy.cwd.join("innocent.txt");
        std::fs::hard_link(f.policy.user_home.join(".ssh/id"), &link).unwrap();
        let err = check_read(&f.policy, &link).unwrap_err();
        assert!(matches!(err, SandboxError::ReadDenied { .. }), "{err}");
        assert!(check_write(&f.policy, &link).is_err());
    }

    #[test]
    fn worktree_git_dir_is_read_only() {
        let f = fixture(Mode::WorkspaceWrite);
        let main_git = f.root.join("rw/main/.git");
        std::fs::create_dir_all(main_git.join("worktrees/wt")).unwrap();
        std::fs::write(main_git.join("worktrees/wt/commondir"), b"../..\n").unwrap();
        std::fs::remove_dir(f.policy.cwd.join(".git")).unwrap();
        std::fs::write(
            f.policy.cwd.join(".git"),
            format!("gitdir: {}\n", main_git.join("worktrees/wt").display()),
        )
        .unwrap();
        assert!(check_write(&f.policy, &main_git.join("worktrees/wt/HEAD")).is_err());
        assert!(check_write(&f.policy, &main_git.join("objects/ab/cd")).is_err());
        assert!(check_write(&f.policy, Path::new(".git")).is_err());
        check_write(&f.policy, &f.root.join("rw/main/src.rs")).unwrap();
    }

    #[test]
    fn read_only_and_full_access() {
        let f = fixture(Mode::ReadOnly);
        let err = check_write(&f.policy, Path::new("x")).unwrap_err();
        assert!(err.to_string().contains("read-only"), "{err}");
        check_read(&f.policy, Path::new("x")).unwrap();
        assert!(check_read(&f.policy, &f.policy.user_home.join(".ssh/id")).is_err());
        let f = fixture(Mode::FullAccess);
        check_write(&f.policy, &f.root.join("other/x")).unwrap();
        assert!(check_read(&f.policy, Path::new("a\0b")).is_err());
    }
}
