//! The hunks of a Codex `fileChange` item, in the serve-v2 `approval_request` shape the jucode
//! engine sends (`{id, file, header, lines}`, ids `h1`, `h2`, … across the whole card).
//!
//! Codex gives each changed file as `{path, kind, diff}`: a unified diff for an update, the
//! whole content for an added or deleted file.

use std::path::Path;

use serde_json::{Value, json};

/// The most lines one card carries; a longer change is cut with a last line saying so.
const MAX_LINES: usize = 4000;

/// The hunks of `changes` (a `fileChange` item's `changes`), paths shown relative to `cwd`.
pub(crate) fn hunks(changes: &Value, cwd: &Path) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut budget = MAX_LINES;
    for change in changes.as_array().into_iter().flatten() {
        let Some(path) = change.get("path").and_then(Value::as_str) else {
            continue;
        };
        let file = Path::new(path)
            .strip_prefix(cwd)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| path.to_string());
        let diff = change.get("diff").and_then(Value::as_str).unwrap_or("");
        let kind = change
            .get("kind")
            .and_then(|k| k.get("type").or(Some(k)))
            .and_then(Value::as_str)
            .unwrap_or("update");
        let parts: Vec<(String, Vec<String>)> = match kind {
            "add" | "delete" => {
                let sign = if kind == "add" { '+' } else { '-' };
                let lines: Vec<String> = diff.lines().map(|l| format!("{sign}{l}")).collect();
                let n = lines.len();
                let header = if kind == "add" {
                    format!("@@ -0,0 +1,{n} @@")
                } else {
                    format!("@@ -1,{n} +0,0 @@")
                };
                vec![(header, lines)]
            }
            _ => unified(diff),
        };
        for (header, mut lines) in parts {
            if budget == 0 {
                break;
            }
            if lines.len() > budget {
                let cut = lines.len() - budget;
                lines.truncate(budget);
                lines.push(format!(" … {cut} more lines"));
            }
            budget = budget.saturating_sub(lines.len());
            out.push(json!({
                "id": format!("h{}", out.len() + 1),
                "file": file,
                "header": header,
                "lines": lines,
            }));
        }
    }
    out
}

/// Splits a unified diff at its `@@` lines; file headers (`---`, `+++`, `diff`, `index`) and
/// "no newline" markers are left out.
fn unified(diff: &str) -> Vec<(String, Vec<String>)> {
    let mut parts: Vec<(String, Vec<String>)> = Vec::new();
    for line in diff.lines() {
        if line.starts_with("@@") {
            parts.push((hunk_header(line), Vec::new()));
            continue;
        }
        let Some((_, lines)) = parts.last_mut() else {
            continue;
        };
        if line.starts_with('\\') {
            continue;
        }
        if line.starts_with(['+', '-', ' ']) {
            lines.push(line.to_string());
        } else if line.is_empty() {
            // Some writers drop the space of an empty context line.
            lines.push(" ".to_string());
        }
    }
    parts
}

/// `@@ -a,b +c,d @@` without the section text some diffs add after it.
fn hunk_header(line: &str) -> String {
    match line[2..].find("@@") {
        Some(end) => line[..end + 4].to_string(),
        None => line.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn updates_split_at_their_hunks_and_new_files_are_all_added() {
        let changes = json!([
            {"path":"/w/src/a.rs","kind":{"type":"update","move_path":null},
             "diff":"--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1,2 +1,2 @@ fn main\n-a\n+b\n c\n@@ -10 +10 @@\n-x\n+y\n\\ No newline at end of file\n"},
            {"path":"/w/new.txt","kind":{"type":"add"},"diff":"one\ntwo\n"},
            {"path":"/elsewhere/gone.txt","kind":{"type":"delete"},"diff":"old\n"},
        ]);
        let hunks = hunks(&changes, Path::new("/w"));
        assert_eq!(hunks.len(), 4);
        assert_eq!(
            hunks[0],
            json!({"id":"h1","file":"src/a.rs","header":"@@ -1,2 +1,2 @@","lines":["-a","+b"," c"]})
        );
        assert_eq!(hunks[1]["lines"], json!(["-x", "+y"]));
        assert_eq!(
            hunks[2],
            json!({"id":"h3","file":"new.txt","header":"@@ -0,0 +1,2 @@","lines":["+one","+two"]})
        );
        assert_eq!(hunks[3]["file"], "/elsewhere/gone.txt");
        assert_eq!(hunks[3]["lines"], json!(["-old"]));
    }

    #[test]
    fn nothing_to_show_is_no_hunks() {
        assert!(hunks(&json!(null), Path::new("/w")).is_empty());
        assert!(
            hunks(
                &json!([{"path":"/w/a","kind":{"type":"update"},"diff":"garbage"}]),
                Path::new("/w")
            )
            .is_empty()
        );
    }
}
