//! Diff hunks for the approval card of a Claude Code file edit (`Edit`, `MultiEdit`, `Write`),
//! in the shape a jucode session sends: `{id: "h1", file, header: "@@ -a,b +c,d @@", lines}`
//! with ` `, `-` and `+` lines and 3 lines of context.
//!
//! The file is read only inside the session's directories (and at most `MAX_FILE` bytes), to
//! number the lines as they are in the file; otherwise the edit's own strings are diffed.
//!
//! When the hunks come from the file itself, an `approve` may name only some of them: the
//! CLI is then allowed a rewritten input that makes just those changes.

use std::ops::Range;
use std::path::{Path, PathBuf};

use jucode_protocol::serve::Hunk;
use serde_json::{Value, json};
use similar::{ChangeTag, TextDiff};

const CONTEXT: usize = 3;
const MAX_FILE: u64 = 2 * 1024 * 1024;

/// A hunk's line ranges in the old and the new text.
type Spans = (Range<usize>, Range<usize>);

/// A file edit's card: its hunks and, when they were diffed against the file itself, what is
/// needed to apply only some of them.
#[derive(Debug, Clone)]
pub(crate) struct EditCard {
    pub hunks: Vec<Hunk>,
    /// The file before and after the whole edit, and each hunk's line ranges in both.
    file: Option<(String, String, Vec<Spans>)>,
}

/// The card of a `can_use_tool` for `tool`, or `None` when it is not a file edit.
pub(crate) fn for_tool(
    tool: &str,
    input: &Value,
    cwd: &Path,
    roots: &[PathBuf],
) -> Option<EditCard> {
    let path = input.get("file_path").and_then(Value::as_str)?;
    let file = shown_name(path, cwd);
    let current = read_inside(path, cwd, roots);
    let (old, new, from_file) = match tool {
        "Write" => {
            let content = input.get("content").and_then(Value::as_str)?;
            let known = current.is_some();
            (current.unwrap_or_default(), content.to_string(), known)
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
    let (hunks, ranges) = hunks(&file, &old, &new).into_iter().unzip();
    Some(EditCard {
        hunks,
        file: from_file.then_some((old, new, ranges)),
    })
}

impl EditCard {
    /// The input that makes only the hunks `ids` of `tool`'s edit: `Ok(None)` when that is none
    /// of them, the input unchanged when it is all of them. Unknown ids, and a choice the
    /// card cannot honour (its hunks were not diffed against the file), are errors.
    pub(crate) fn input_for(
        &self,
        tool: &str,
        input: &Value,
        ids: &[String],
    ) -> Result<Option<Value>, String> {
        if let Some(id) = ids
            .iter()
            .find(|id| !self.hunks.iter().any(|h| &h.id == *id))
        {
            return Err(format!("no hunk {id} in this edit"));
        }
        if ids.is_empty() {
            return Ok(None);
        }
        if self.hunks.iter().all(|h| ids.contains(&h.id)) {
            return Ok(Some(input.clone()));
        }
        let Some((before, after, ranges)) = &self.file else {
            return Err(
                "the file could not be read, so this edit applies whole: allow it without hunks, or with all of them"
                    .into(),
            );
        };
        let chosen: Vec<bool> = self.hunks.iter().map(|h| ids.contains(&h.id)).collect();
        let text = partly_applied(before, after, ranges, &chosen);
        let path = input.get("file_path").cloned().unwrap_or(Value::Null);
        Ok(Some(match tool {
            "Write" => {
                let mut rewritten = input.clone();
                rewritten["content"] = Value::String(text);
                rewritten
            }
            // One replacement of the whole file as read: exact, whatever the edits were.
            "MultiEdit" => json!({"file_path": path,
                                  "edits": [{"old_string": before, "new_string": text}]}),
            _ => json!({"file_path": path, "old_string": before, "new_string": text,
                        "replace_all": false}),
        }))
    }
}

/// `before` with only the chosen hunks' changes (their lines from `after`).
fn partly_applied(before: &str, after: &str, ranges: &[Spans], chosen: &[bool]) -> String {
    let old: Vec<&str> = before.split_inclusive('\n').collect();
    let new: Vec<&str> = after.split_inclusive('\n').collect();
    let mut out = String::with_capacity(before.len().max(after.len()));
    let mut at = 0;
    for ((old_range, new_range), take) in ranges.iter().zip(chosen) {
        out.extend(
            old.get(at..old_range.start)
                .unwrap_or_default()
                .iter()
                .copied(),
        );
        let lines = if *take {
            new.get(new_range.clone())
        } else {
            old.get(old_range.clone())
        };
        out.extend(lines.unwrap_or_default().iter().copied());
        at = old_range.end;
    }
    out.extend(old.get(at..).unwrap_or_default().iter().copied());
    out
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The file before and after the edits (and true); when the file is unknown or an edit does
/// not apply to it, only the edits' own strings (and false).
fn edited(current: Option<String>, edits: &[(&str, &str, bool)]) -> (String, String, bool) {
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
            return (before, after, true);
        }
    }
    let old: Vec<&str> = edits.iter().map(|e| e.0).collect();
    let new: Vec<&str> = edits.iter().map(|e| e.1).collect();
    (
        with_newline(old.join("\n")),
        with_newline(new.join("\n")),
        false,
    )
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

/// The hunks, each with its line ranges in `old` and `new`.
fn hunks(file: &str, old: &str, new: &str) -> Vec<(Hunk, Spans)> {
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
        let hunk = Hunk {
            id: format!("h{}", out.len() + 1),
            file: file.to_string(),
            header: format!("@@ -{} +{} @@", span(old_span), span(new_span)),
            lines,
        };
        out.push((hunk, (old_span.0..old_span.1, new_span.0..new_span.1)));
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
        let h = for_tool("Edit", &input, dir.path(), &roots).unwrap().hunks;
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
        let h = for_tool("Edit", &input, inside.path(), &roots)
            .unwrap()
            .hunks;
        assert_eq!(h[0].lines, vec!["-x", "+y"]);
        assert_eq!(h[0].header, "@@ -1,1 +1,1 @@");
    }

    #[test]
    fn a_new_file_and_multi_edits() {
        let dir = tempfile::tempdir().unwrap();
        let roots = vec![dir.path().to_path_buf()];
        let w = json!({"file_path": dir.path().join("new.txt"), "content": "a\nb\n"});
        let h = for_tool("Write", &w, dir.path(), &roots).unwrap().hunks;
        assert_eq!(h[0].header, "@@ -0,0 +1,2 @@");
        assert_eq!(h[0].lines, vec!["+a", "+b"]);
        std::fs::write(dir.path().join("m.txt"), "one\ntwo\nthree\n").unwrap();
        let m = json!({"file_path": dir.path().join("m.txt"), "edits": [
            {"old_string": "one", "new_string": "1"}, {"old_string": "three", "new_string": "3"}]});
        let h = for_tool("MultiEdit", &m, dir.path(), &roots).unwrap().hunks;
        assert_eq!(h[0].lines, vec!["-one", "+1", " two", "-three", "+3"]);
        assert!(for_tool("Bash", &json!({"command": "ls"}), dir.path(), &roots).is_none());
    }

    #[test]
    fn only_the_chosen_hunks_are_made() {
        let dir = tempfile::tempdir().unwrap();
        let roots = vec![dir.path().to_path_buf()];
        let path = dir.path().join("p.txt");
        let before: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, &before).unwrap();
        let content = before
            .replace("line 2\n", "line two\n")
            .replace("line 18\n", "line eighteen\n");
        let w = json!({"file_path": path, "content": content});
        let card = for_tool("Write", &w, dir.path(), &roots).unwrap();
        assert_eq!(card.hunks.len(), 2);
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let second = card.input_for("Write", &w, &ids(&["h2"])).unwrap().unwrap();
        assert_eq!(
            second["content"],
            before.replace("line 18\n", "line eighteen\n")
        );
        assert_eq!(second["file_path"], w["file_path"]);
        assert_eq!(
            card.input_for("Write", &w, &ids(&["h2", "h1"])),
            Ok(Some(w.clone()))
        );
        assert_eq!(card.input_for("Write", &w, &[]), Ok(None));
        assert_eq!(
            card.input_for("Write", &w, &ids(&["h3"])),
            Err("no hunk h3 in this edit".to_string())
        );

        // A replace-all edit of two distant lines: the first only, as one exact replacement.
        let text = before
            .replace("line 3\n", "x\n")
            .replace("line 17\n", "x\n");
        std::fs::write(&path, &text).unwrap();
        let e = json!({"file_path": path, "old_string": "x\n", "new_string": "y\n", "replace_all": true});
        let card = for_tool("Edit", &e, dir.path(), &roots).unwrap();
        assert_eq!(card.hunks.len(), 2);
        let first = card.input_for("Edit", &e, &ids(&["h1"])).unwrap().unwrap();
        assert_eq!(
            first,
            json!({"file_path": path, "old_string": text,
                   "new_string": text.replacen("x\n", "y\n", 1), "replace_all": false})
        );
        let m = json!({"file_path": path, "edits": [{"old_string": "x\n", "new_string": "y\n", "replace_all": true}]});
        let card = for_tool("MultiEdit", &m, dir.path(), &roots).unwrap();
        let first = card
            .input_for("MultiEdit", &m, &ids(&["h1"]))
            .unwrap()
            .unwrap();
        assert_eq!(first["edits"][0]["old_string"], text);
        assert_eq!(
            first["edits"][0]["new_string"],
            text.replacen("x\n", "y\n", 1)
        );
    }

    #[test]
    fn an_edit_not_diffed_against_its_file_applies_whole() {
        let inside = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let roots = vec![inside.path().to_path_buf()];
        let m = json!({"file_path": outside.path().join("o.txt"), "edits": [
            {"old_string": "a\nb\nc\nd\ne\nf\ng\nh\ni", "new_string": "A\nb\nc\nd\ne\nf\ng\nh\nI"}]});
        let card = for_tool("MultiEdit", &m, inside.path(), &roots).unwrap();
        assert_eq!(card.hunks.len(), 2);
        let err = card
            .input_for("MultiEdit", &m, &["h1".to_string()])
            .unwrap_err();
        assert!(err.contains("applies whole"), "{err}");
        let all = ["h1".to_string(), "h2".to_string()];
        assert_eq!(card.input_for("MultiEdit", &m, &all), Ok(Some(m.clone())));
    }
}
