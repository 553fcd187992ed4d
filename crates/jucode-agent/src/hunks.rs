//! A proposed file edit as hunks a person can accept one by one.
//!
//! The diff is `similar`'s line diff grouped with 3 lines of context; each group is one hunk
//! (`h1`, `h2`, …). Applying a subset replaces exactly the old lines of the chosen groups with
//! their new lines, so unchosen hunks leave the file as it was there.

use std::ops::Range;

use jucode_protocol::serve::Hunk;
use similar::{ChangeTag, TextDiff};

const CONTEXT: usize = 3;

/// An edit: the old and new text and the hunks between them.
#[derive(Debug, Clone)]
pub struct FileEdit {
    pub old: String,
    pub new: String,
    pub hunks: Vec<Hunk>,
    ranges: Vec<(Range<usize>, Range<usize>)>,
}

impl FileEdit {
    /// Diffs `old` against `new`; `file` is the name the hunks show.
    pub fn new(file: &str, old: String, new: String) -> FileEdit {
        let diff = TextDiff::from_lines(&old, &new);
        let mut hunks = Vec::new();
        let mut ranges = Vec::new();
        for (n, group) in diff.grouped_ops(CONTEXT).iter().enumerate() {
            let (Some(first), Some(last)) = (group.first(), group.last()) else {
                continue;
            };
            let old_range = first.old_range().start..last.old_range().end;
            let new_range = first.new_range().start..last.new_range().end;
            let mut lines = Vec::new();
            for op in group {
                for change in diff.iter_changes(op) {
                    let sign = match change.tag() {
                        ChangeTag::Delete => '-',
                        ChangeTag::Insert => '+',
                        ChangeTag::Equal => ' ',
                    };
                    let text = change.value();
                    let text = text.strip_suffix('\n').unwrap_or(text);
                    let text = text.strip_suffix('\r').unwrap_or(text);
                    lines.push(format!("{sign}{text}"));
                }
            }
            hunks.push(Hunk {
                id: format!("h{}", n + 1),
                file: file.to_string(),
                header: format!("@@ -{} +{} @@", span(&old_range), span(&new_range)),
                lines,
            });
            ranges.push((old_range, new_range));
        }
        FileEdit {
            old,
            new,
            hunks,
            ranges,
        }
    }

    /// The text with only the hunks named in `ids` applied. Unknown ids are an error, so a
    /// client that names a hunk by mistake does not get a silent partial edit.
    pub fn apply(&self, ids: &[String]) -> Result<String, String> {
        for id in ids {
            if !self.hunks.iter().any(|h| &h.id == id) {
                return Err(format!("no hunk {id} in this edit"));
            }
        }
        let diff = TextDiff::from_lines(&self.old, &self.new);
        let old_lines = diff.old_slices();
        let new_lines = diff.new_slices();
        let mut out = String::with_capacity(self.new.len().max(self.old.len()));
        let mut cursor = 0;
        for (hunk, (old_range, new_range)) in self.hunks.iter().zip(&self.ranges) {
            for line in &old_lines[cursor..old_range.start] {
                out.push_str(line);
            }
            let chosen = if ids.contains(&hunk.id) {
                &new_lines[new_range.clone()]
            } else {
                &old_lines[old_range.clone()]
            };
            for line in chosen {
                out.push_str(line);
            }
            cursor = old_range.end;
        }
        for line in &old_lines[cursor..] {
            out.push_str(line);
        }
        Ok(out)
    }
}

/// `start,len` in unified-diff style (1-based; an empty range names the line before it).
fn span(range: &Range<usize>) -> String {
    let len = range.end - range.start;
    let start = if len == 0 {
        range.start
    } else {
        range.start + 1
    };
    format!("{start},{len}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn distant_changes_make_separate_hunks_applied_one_at_a_time() {
        let old = numbered(20);
        let new = old
            .replace("line 2\n", "LINE TWO\n")
            .replace("line 18\n", "LINE EIGHTEEN\n");
        let edit = FileEdit::new("a.txt", old.clone(), new.clone());
        assert_eq!(edit.hunks.len(), 2);
        assert_eq!(edit.hunks[0].id, "h1");
        assert_eq!(edit.hunks[0].header, "@@ -1,5 +1,5 @@");
        assert!(edit.hunks[0].lines.contains(&"-line 2".to_string()));
        assert!(edit.hunks[0].lines.contains(&"+LINE TWO".to_string()));
        assert!(edit.hunks[0].lines.contains(&" line 1".to_string()));
        assert_eq!(edit.hunks[1].file, "a.txt");

        let only_second = edit.apply(&["h2".into()]).unwrap();
        assert!(only_second.contains("line 2\n"));
        assert!(only_second.contains("LINE EIGHTEEN\n"));
        assert_eq!(edit.apply(&["h1".into(), "h2".into()]).unwrap(), new);
        assert_eq!(edit.apply(&[]).unwrap(), old);
        assert!(edit.apply(&["h9".into()]).is_err());
    }

    #[test]
    fn a_new_file_and_a_missing_final_newline() {
        let edit = FileEdit::new("n.txt", String::new(), "a\nb".into());
        assert_eq!(edit.hunks.len(), 1);
        assert_eq!(edit.hunks[0].header, "@@ -0,0 +1,2 @@");
        assert_eq!(edit.hunks[0].lines, vec!["+a", "+b"]);
        assert_eq!(edit.apply(&["h1".into()]).unwrap(), "a\nb");
        let same = FileEdit::new("s", "x\n".into(), "x\n".into());
        assert!(same.hunks.is_empty());
    }
}
