//! Diff hunks for the approval card of a Claude Code file edit (`Edit`, `MultiEdit`, `Write`),
//! in the shape a jucode session sends: `{id: "h1", file, header: "@@ -a,b +c,d @@", lines}`
//! with ` `, `-` and `+` lines and 3 lines of context.
//!
//! The file is read only inside the session's directories (and at most `MAX_FILE` bytes), to
//! number the lines as they are in the file; otherwise the edit's own strings are diffed.

use std::path::{Path, PathBuf};

use jucode_protocol::serve::Hunk;
use serde_json::Value;
use similar::{ChangeTag, TextDiff};

const CONTEXT: usize = 3;
const MAX_FILE: u64 = 2 * 1024 * 1024;

/// The hunks of a `can_use_tool` for `tool`, or `None` when it is not a file edit.
pub(crate) fn for_tool(
    tool: &str,
    input: &Value,
    cwd: &Path,
    roots: &[PathBuf],
) -> Option<Vec<Hunk>> {
    let path = input.get("file_path").and_then(Value::as_str)?;
    let file = shown_name(path, cwd);
    let current = read_inside(path, cwd, roots);
    let (old, new) = match tool {
        "Write" => {
            let content = input.get("content").and_then(Value::as_str)?;
            (current.unwrap_or_default(), content.to_string())
        }
        "Edit" => {
            let edit = (
                str_field(input, "old_string")?,
                str_field(input, "new_string")?,
            );
            let all = input
                .get("replace_all")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            edited(current, &[(edit.0, edit.1, all)])
        }
        "MultiEdit" => {
            let edits: Vec<(&str, &str, bool)> = input
                .get("edits")
                .and_then(Value::as_array)?
                .iter()
                .filter_map(|e| {
                    Some((
                        str_field(e, "old_string")?,
                        str_field(e, "new_string")?,
                        e.get("replace_all")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    ))
                })
                .collect();
            edited(current, &edits)
        }
        _ => return None,
    };
    Some(hunks(&file, &old, &new))
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The file before and after the edits; when the file is unknown or an edit does not apply
/// to it, only the edits' own strings.
fn edited(current: Option<String>, edits: &[(&str, &str, bool)]) -> (String, String) {
    if let Some(before) = current {
        let mut after = before.clone();
        let applies = edits.iter().all(|(old, new, all)| {
            if old.is_empty() || !after.contains(old) {
                return false;
            }
            after = if *all {
                after.replace(old, new)
            } else {
                after.replacen(old, new, 1)
            };
            true
        });
        if applies {
            return (before, after);
        }
    }
    let old: Vec<&str> = edits.iter().map(|e| e.0).collect();
    let new: Vec<&str> = edits.iter().map(|e| e.1).collect();
    (with_newline(old.join("\n")), with_newline(new.join("\n")))
}

fn with_newline(mut s: String) -> String {
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

/// The file's text when it lies inside one of `roots` (symlinks resolved) and is small.
fn read_inside(path: &str, cwd: &Path, roots: &[PathBuf]) -> Option<String> {
    let path = cwd.join(path);
    let real = path.canonicalize().ok()?;
    let inside = roots
        .iter()
        .filter_map(|r| r.canonicalize().ok())
        .any(|r| real.starts_with(r));
    if !inside || std::fs::metadata(&real).ok()?.len() > MAX_FILE {
        return None;
    }
    std::fs::read_to_string(real).ok()
}

/// A path as the card shows it: relative to the session's directory when inside it.
fn shown_name(path: &str, cwd: &Path) -> String {
    Path::new(path)
        .strip_prefix(cwd)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.to_string())
}

fn hunks(file: &str, old: &str, new: &str) -> Vec<Hunk> {
    let diff = TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    for group in diff.grouped_ops(CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old_span = (first.old_range().start, last.old_range().end);
        let new_span = (first.new_range().start, last.new_range().end);
        let mut lines = Vec::new();
        for op in &group {
            for change in diff.iter_changes(op) {
                let sign = match change.tag() {
                    ChangeTag::Equal => ' ',
                    ChangeTag::Delete => '-',
                    ChangeTag::Insert => '+',
                };
                let text = change.value().trim_end_matches(['\n', '\r']);
                lines.push(format!("{sign}{text}"));
            }
        }
        out.push(Hunk {
            id: format!("h{}", out.len() + 1),
            file: file.to_string(),
            header: format!("@@ -{} +{} @@", span(old_span), span(new_span)),
            lines,
        });
    }
    out
}

/// A unified-diff range: 1-based start and length (an empty range names the line before).
fn span((start, end): (usize, usize)) -> String {
    let len = end - start;
    if len == 0 {
        format!("{start},0")
    } else {
        format!("{},{len}", start + 1)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_edit_is_numbered_as_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.path().join("a.txt"), &text).unwrap();
        let input = json!({"file_path": dir.path().join("a.txt"), "old_string": "line 5", "new_string": "line five"});
        let roots = vec![dir.path().to_path_buf()];
        let h = for_tool("Edit", &input, dir.path(), &roots).unwrap();
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].file, "a.txt");
        assert_eq!(h[0].header, "@@ -2,7 +2,7 @@");
        assert_eq!(
            h[0].lines,
            vec![
                " line 2",
                " line 3",
                " line 4",
                "-line 5",
                "+line five",
                " line 6",
                " line 7",
                " line 8"
            ]
        );
    }

    #[test]
    fn a_file_outside_the_roots_is_not_read() {
        let inside = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("s.txt"), "secret\nx\n").unwrap();
        let input = json!({"file_path": outside.path().join("s.txt"), "old_string": "x", "new_string": "y"});
        let roots = vec![inside.path().to_path_buf()];
        let h = for_tool("Edit", &input, inside.path(), &roots).unwrap();
        assert_eq!(h[0].lines, vec!["-x", "+y"]);
        assert_eq!(h[0].header, "@@ -1,1 +1,1 @@");
    }

    #[test]
    fn a_new_file_and_multi_edits() {
        let dir = tempfile::tempdir().unwrap();
        let roots = vec![dir.path().to_path_buf()];
        let w = json!({"file_path": dir.path().join("new.txt"), "content": "a\nb\n"});
        let h = for_tool("Write", &w, dir.path(), &roots).unwrap();
        assert_eq!(h[0].header, "@@ -0,0 +1,2 @@");
        assert_eq!(h[0].lines, vec!["+a", "+b"]);
        std::fs::write(dir.path().join("m.txt"), "one\ntwo\nthree\n").unwrap();
        let m = json!({"file_path": dir.path().join("m.txt"), "edits": [
            {"old_string": "one", "new_string": "1"}, {"old_string": "three", "new_string": "3"}]});
        let h = for_tool("MultiEdit", &m, dir.path(), &roots).unwrap();
        assert_eq!(h[0].lines, vec!["-one", "+1", " two", "-three", "+3"]);
        assert!(for_tool("Bash", &json!({"command": "ls"}), dir.path(), &roots).is_none());
    }
}
