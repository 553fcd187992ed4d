//! `fs_list`: a directory's entries, folders first, then by name. `.git` and git-ignored
//! entries are left out, and so are credential paths (a listing of `~` does not offer
//! `.ssh`) and names that are not UTF-8 (a client could not name them back).

use std::sync::Arc;

use jucode_protocol::daemon::DaemonEvent;
use jucode_protocol::daemon::files::{FS_LIST_MAX_ENTRIES, FsEntry};

use super::rule::through;
use super::{FilesError, Rule, Scope, git};

/// How many entries are read before ignored ones are taken out; past it the listing is
/// `truncated` without reading the rest of a huge directory.
const READ_MAX_ENTRIES: usize = FS_LIST_MAX_ENTRIES * 4;

pub(super) async fn fs_list(
    rule: Arc<Rule>,
    path: String,
    dirs_only: bool,
) -> Result<DaemonEvent, FilesError> {
    let scope = if dirs_only { Scope::Home } else { Scope::Known };
    let (real, mut entries, mut truncated) = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || read_entries(&rule, &path, scope, dirs_only))
            .await
            .map_err(|e| FilesError::Git {
                op: "fs_list",
                message: e.to_string(),
            })??
    };
    let in_repo = git::inside_work_tree(&real).await;
    if in_repo && !entries.is_empty() {
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        let ignored = git::ignored(&real, &names)
            .await
            .map_err(|message| FilesError::Git {
                op: "fs_list",
                message,
            })?;
        entries.retain(|e| !ignored.contains(&e.name));
    }
    entries.sort_by(|a, b| b.dir.cmp(&a.dir).then_with(|| a.name.cmp(&b.name)));
    if entries.len() > FS_LIST_MAX_ENTRIES {
        entries.truncate(FS_LIST_MAX_ENTRIES);
        truncated = true;
    }
    Ok(DaemonEvent::FsList {
        path: real.display().to_string(),
        git: in_repo,
        entries,
        truncated,
    })
}

type Listing = (std::path::PathBuf, Vec<FsEntry>, bool);

fn read_entries(
    rule: &Rule,
    path: &str,
    scope: Scope,
    dirs_only: bool,
) -> Result<Listing, FilesError> {
    let op = "fs_list";
    let real = rule.check(op, path, scope)?;
    let dir = rule.open(op, path, &real, scope)?;
    let io = |e: std::io::Error| FilesError::Io {
        op,
        path: path.to_string(),
        message: e.to_string(),
    };
    if !dir.metadata().map_err(io)?.is_dir() {
        return Err(FilesError::NotADir {
            op,
            path: path.to_string(),
        });
    }
    // Read the directory that was opened and checked, not whatever the path names now.
    let opened = through(&dir, &real);
    let mut entries = Vec::new();
    let mut truncated = false;
    for entry in std::fs::read_dir(&opened).map_err(io)? {
        let Ok(entry) = entry else { continue };
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if name == ".git" || rule.is_secret(&real.join(&name)) {
            continue;
        }
        if entries.len() == READ_MAX_ENTRIES {
            truncated = true;
            break;
        }
        // A link is described by its target; a dangling one is a file of size 0.
        let child = opened.join(&name);
        let meta = std::fs::metadata(&child).or_else(|_| std::fs::symlink_metadata(&child));
        let (is_dir, size) = match meta {
            Ok(m) if m.is_dir() => (true, 0),
            Ok(m) => (false, m.len()),
            Err(_) => (false, 0),
        };
        if dirs_only && !is_dir {
            continue;
        }
        entries.push(FsEntry {
            name,
            dir: is_dir,
            size,
        });
    }
    Ok((real, entries, truncated))
}
