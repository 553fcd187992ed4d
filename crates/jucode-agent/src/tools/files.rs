//! `read`, `write` and `str_replace`.
//!
//! Edits are computed when the call is prepared, so the approval shows exactly what will be
//! written; when run, the file must still hold what the edit was computed from.

use std::path::PathBuf;

use serde::Deserialize;

use super::{ToolEnv, cap_output};
use crate::hunks::FileEdit;

/// Files larger than this are not read or edited whole.
const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
const DEFAULT_LINES: usize = 2000;
const MAX_LINE_CHARS: usize = 2000;

#[derive(Deserialize)]
pub struct ReadArgs {
    path: String,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct ReadCall {
    pub path: PathBuf,
    pub display: String,
    offset: usize,
    limit: usize,
}

pub fn prepare_read(args: ReadArgs, env: &ToolEnv) -> Result<ReadCall, String> {
    let path = env.read_path(&args.path)?;
    Ok(ReadCall {
        display: env.display(&path),
        path,
        offset: args.offset.unwrap_or(1).max(1),
        limit: args.limit.unwrap_or(DEFAULT_LINES).max(1),
    })
}

/// Reads a whole text file, refusing what is not a regular file or too big.
fn read_text(path: &std::path::Path, display: &str) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{display}: {e}"))?;
    if meta.is_dir() {
        return Err(format!(
            "{display} is a directory; use ripgrep with a glob to list files"
        ));
    }
    if !meta.is_file() {
        return Err(format!("{display} is not a regular file"));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{display} is {} bytes, more than the {MAX_FILE_BYTES} this tool reads",
            meta.len()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{display}: {e}"))?;
    if bytes.contains(&0) {
        return Err(format!("{display} looks like a binary file"));
    }
    String::from_utf8(bytes).map_err(|_| format!("{display} is not UTF-8 text"))
}

pub fn run_read(call: &ReadCall) -> (String, bool) {
    let text = match read_text(&call.path, &call.display) {
        Ok(text) => text,
        Err(e) => return (e, true),
    };
    let total = text.lines().count();
    let mut out = String::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .skip(call.offset - 1)
        .take(call.limit)
    {
        let line = if line.chars().count() > MAX_LINE_CHARS {
            let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
            format!("{cut}…")
        } else {
            line.to_string()
        };
        out.push_str(&format!("{:>6}\t{line}\n", n + 1));
    }
    let shown_end = (call.offset - 1 + call.limit).min(total);
    if total == 0 {
        out.push_str("(empty file)\n");
    } else if call.offset > total {
        out.push_str(&format!("(the file has only {total} lines)\n"));
    } else if shown_end < total {
        out.push_str(&format!(
            "(lines {}-{shown_end} of {total}; read on with offset {})\n",
            call.offset,
            shown_end + 1
        ));
    }
    (cap_output(&out), false)
}

#[derive(Deserialize)]
pub struct WriteArgs {
    path: String,
    content: String,
}

#[derive(Deserialize)]
pub struct ReplaceArgs {
    path: String,
    old_str: String,
    new_str: String,
    #[serde(default)]
    replace_all: bool,
}

/// A computed edit of one file.
#[derive(Debug, Clone)]
pub struct EditCall {
    pub path: PathBuf,
    pub display: String,
    pub created: bool,
    pub edit: FileEdit,
}

/// The current text of a file to edit; `None` when it does not exist yet.
fn current(path: &std::path::Path, display: &str) -> Result<Option<String>, String> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{display}: {e}")),
        Ok(_) => read_text(path, display).map(Some),
    }
}

pub fn prepare_write(args: WriteArgs, env: &ToolEnv) -> Result<EditCall, String> {
    let path = env.write_path(&args.path)?;
    let display = env.display(&path);
    let old = current(&path, &display)?;
    Ok(EditCall {
        created: old.is_none(),
        edit: FileEdit::new(&display, old.unwrap_or_default(), args.content),
        path,
        display,
    })
}

pub fn prepare_replace(args: ReplaceArgs, env: &ToolEnv) -> Result<EditCall, String> {
    let path = env.write_path(&args.path)?;
    let display = env.display(&path);
    let Some(old) = current(&path, &display)? else {
        return Err(format!("{display} does not exist; use write to create it"));
    };
    if args.old_str.is_empty() {
        return Err("old_str is empty".into());
    }
    let count = old.matches(&args.old_str).count();
    let new = match count {
        0 => return Err(format!("old_str was not found in {display}")),
        1 => old.replacen(&args.old_str, &args.new_str, 1),
        n if args.replace_all => {
            let _ = n;
            old.replace(&args.old_str, &args.new_str)
        }
        n => {
            return Err(format!(
                "old_str occurs {n} times in {display}; give more context or set replace_all"
            ));
        }
    };
    Ok(EditCall {
        created: false,
        edit: FileEdit::new(&display, old, new),
        path,
        display,
    })
}

/// Writes the edit, all of it or only the hunks in `hunks`.
pub fn run_edit(call: &EditCall, hunks: Option<&[String]>) -> (String, bool) {
    // The file must still be what the edit was computed from.
    let now = match current(&call.path, &call.display) {
        Ok(now) => now,
        Err(e) => return (e, true),
    };
    let unchanged = match &now {
        None => call.created,
        Some(text) => !call.created && *text == call.edit.old,
    };
    if !unchanged {
        return (
            format!(
                "{} changed since this edit was proposed; read it again and redo the edit",
                call.display
            ),
            true,
        );
    }
    let (text, applied) = match hunks {
        None => (call.edit.new.clone(), call.edit.hunks.len()),
        Some(ids) => match call.edit.apply(ids) {
            Ok(text) => (text, ids.len()),
            Err(e) => return (e, true),
        },
    };
    if let Some(parent) = call.path.parent()
        && let Err(e) = std::fs::create_dir_all(parent)
    {
        return (format!("{}: {e}", parent.display()), true);
    }
    if let Err(e) = std::fs::write(&call.path, &text) {
        return (format!("{}: {e}", call.display), true);
    }
    let total = call.edit.hunks.len();
    let what = if call.created { "created" } else { "edited" };
    let message = if applied == total {
        format!("{what} {}", call.display)
    } else {
        let rejected: Vec<&str> = call
            .edit
            .hunks
            .iter()
            .filter(|h| hunks.is_some_and(|ids| !ids.contains(&h.id)))
            .map(|h| h.header.as_str())
            .collect();
        format!(
            "{what} {}: the user applied {applied} of {total} hunks and rejected {}",
            call.display,
            rejected.join(", ")
        )
    };
    (message, false)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::tools::tests::env_in;

    #[test]
    fn read_numbers_lines_and_pages() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
        let env = env_in(dir.path(), &[]);
        let args: ReadArgs =
            serde_json::from_str(r#"{"path":"a.txt","offset":2,"limit":1}"#).unwrap();
        let (out, err) = run_read(&prepare_read(args, &env).unwrap());
        assert!(!err);
        assert!(out.contains("     2\ttwo"), "{out}");
        assert!(out.contains("offset 3"), "{out}");
        std::fs::write(dir.path().join("b.bin"), [0u8, 1, 2]).unwrap();
        let args: ReadArgs = serde_json::from_str(r#"{"path":"b.bin"}"#).unwrap();
        let (out, err) = run_read(&prepare_read(args, &env).unwrap());
        assert!(err && out.contains("binary"));
    }

    #[test]
    fn replace_needs_one_match_and_applies_chosen_hunks() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (1..=20).map(|i| format!("l{i}\n")).collect();
        std::fs::write(dir.path().join("f.txt"), &text).unwrap();
        let env = env_in(dir.path(), &[]);
        let args: ReplaceArgs =
            serde_json::from_str(r#"{"path":"f.txt","old_str":"l","new_str":"x"}"#).unwrap();
        assert!(prepare_replace(args, &env).unwrap_err().contains("occurs"));
        let args: ReplaceArgs =
            serde_json::from_str(r#"{"path":"f.txt","old_str":"l1\nl2\n","new_str":"A\nB\n"}"#)
                .unwrap();
        let call = prepare_replace(args, &env).unwrap();
        assert_eq!(call.edit.hunks.len(), 1);
        let (out, err) = run_edit(&call, None);
        assert!(!err, "{out}");
        assert!(
            std::fs::read_to_string(dir.path().join("f.txt"))
                .unwrap()
                .starts_with("A\nB\nl3")
        );
        // The file changed since: refused.
        let (out, err) = run_edit(&call, None);
        assert!(err && out.contains("changed since"), "{out}");
    }

    #[test]
    fn write_creates_files_and_directories_inside_the_workspace_only() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_in(dir.path(), &[]);
        let args: WriteArgs =
            serde_json::from_str(r#"{"path":"new/dir/n.txt","content":"hi\n"}"#).unwrap();
        let call = prepare_write(args, &env).unwrap();
        assert!(call.created);
        let (out, err) = run_edit(&call, None);
        assert!(!err, "{out}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("new/dir/n.txt")).unwrap(),
            "hi\n"
        );
        let args: WriteArgs =
            serde_json::from_str(r#"{"path":"../out.txt","content":"x"}"#).unwrap();
        assert!(prepare_write(args, &env).is_err());
    }
}
