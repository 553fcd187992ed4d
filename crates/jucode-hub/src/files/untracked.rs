//! The diff of an untracked file as a new file, written by the daemon: the file is read
//! through the rule (git would follow nothing, but reading it here keeps one rule for every
//! byte a client gets).

use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use jucode_protocol::daemon::git::GIT_DIFF_MAX_BYTES;

use super::read::decode;
use super::{Rule, Scope};

/// `name` (relative to `root`) as a unified diff from nothing, or `None` when the rule refuses
/// it or it cannot be read.
pub(super) fn new_file_diff(rule: &Rule, root: &Path, name: &str) -> Option<Vec<u8>> {
    let full = root.join(name);
    let meta = std::fs::symlink_metadata(&full).ok()?;
    let mut out = format!("diff --git a/{name} b/{name}\n").into_bytes();
    if meta.file_type().is_symlink() {
        // A link is its target's path, as git shows it.
        let target = std::fs::read_link(&full).ok()?;
        out.extend_from_slice(b"new file mode 120000\n");
        push_hunk(&mut out, name, &target.to_string_lossy());
        return Some(out);
    }
    if !meta.is_file() {
        return None;
    }
    let shown = full.display().to_string();
    let real = rule.check("git_diff", &shown, Scope::Known).ok()?;
    let file = rule.open("git_diff", &shown, &real, Scope::Known).ok()?;
    let mode = if meta.permissions().mode() & 0o111 != 0 {
        "100755"
    } else {
        "100644"
    };
    out.extend_from_slice(format!("new file mode {mode}\n").as_bytes());
    let mut bytes = Vec::new();
    file.take(GIT_DIFF_MAX_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    let cut = bytes.len() > GIT_DIFF_MAX_BYTES;
    bytes.truncate(GIT_DIFF_MAX_BYTES);
    let (binary, text) = decode(bytes, cut);
    if binary {
        out.extend_from_slice(format!("Binary files /dev/null and b/{name} differ\n").as_bytes());
    } else if !text.is_empty() {
        push_hunk(&mut out, name, &text);
    }
    Some(out)
}

/// `--- /dev/null`, `+++ b/<name>` and one hunk adding every line of `text`.
fn push_hunk(out: &mut Vec<u8>, name: &str, text: &str) {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    out.extend_from_slice(format!("--- /dev/null\n+++ b/{name}\n").as_bytes());
    let count = lines.len();
    let range = if count == 1 {
        "+1".to_string()
    } else {
        format!("+1,{count}")
    };
    out.extend_from_slice(format!("@@ -0,0 {range} @@\n").as_bytes());
    for line in lines {
        out.push(b'+');
        out.extend_from_slice(line.as_bytes());
        if !line.ends_with('\n') {
            out.extend_from_slice(b"\n\\ No newline at end of file\n");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_is_one_hunk_of_added_lines() {
        let mut out = Vec::new();
        push_hunk(&mut out, "a.txt", "one\ntwo");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n\\ No newline at end of file\n"
        );
    }
}
