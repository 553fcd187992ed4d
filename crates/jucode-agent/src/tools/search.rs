//! `ripgrep`: content search and file listing over the workspace, honouring .gitignore
//! (the `ignore` crate's walker, `regex` for lines, `globset` for globs).

use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;

use super::{ToolEnv, cap_output};

const DEFAULT_MAX: usize = 200;
const MAX_MAX: usize = 2000;
/// Files larger than this are listed but not searched.
const MAX_SEARCH_BYTES: u64 = 2 * 1024 * 1024;
const MAX_LINE_CHARS: usize = 300;

#[derive(Deserialize)]
pub struct Args {
    #[serde(default)]
    pattern: Option<String>,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
    #[serde(default)]
    max_results: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct SearchCall {
    root: PathBuf,
    display_root: String,
    pattern: Option<Regex>,
    glob: Option<(String, GlobMatcher)>,
    max: usize,
    /// Resolved credential and protected paths are checked per file through this.
    env: ToolEnv,
}

impl SearchCall {
    pub fn summary(&self) -> String {
        match (&self.pattern, &self.glob) {
            (Some(p), _) => format!("search {} in {}", p.as_str(), self.display_root),
            (None, Some((g, _))) => format!("list {g} in {}", self.display_root),
            (None, None) => format!("list files in {}", self.display_root),
        }
    }
}

pub fn prepare(args: Args, env: &ToolEnv) -> Result<SearchCall, String> {
    let root = env.read_path(args.path.as_deref().unwrap_or("."))?;
    let pattern = match args.pattern.filter(|p| !p.is_empty()) {
        Some(p) => Some(
            RegexBuilder::new(&p)
                .case_insensitive(args.case_insensitive)
                .size_limit(10 * 1024 * 1024)
                .build()
                .map_err(|e| format!("invalid pattern: {e}"))?,
        ),
        None => None,
    };
    let glob = match args.glob.filter(|g| !g.is_empty()) {
        Some(g) => {
            let matcher = Glob::new(&g)
                .map_err(|e| format!("invalid glob: {e}"))?
                .compile_matcher();
            Some((g, matcher))
        }
        None => None,
    };
    Ok(SearchCall {
        display_root: env.display(&root),
        root,
        pattern,
        glob,
        max: args.max_results.unwrap_or(DEFAULT_MAX).clamp(1, MAX_MAX),
        env: env.clone(),
    })
}

/// Walks and searches; blocking, so run it off the async threads.
pub fn run(call: &SearchCall) -> (String, bool) {
    let mut out = String::new();
    let mut found = 0usize;
    let mut truncated = false;
    let walker = ignore::WalkBuilder::new(&call.root)
        .hidden(true)
        .git_ignore(true)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    'files: for entry in walker {
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let rel = path.strip_prefix(&call.root).unwrap_or(path);
        if let Some((_, glob)) = &call.glob {
            let name_only = rel.components().count() == 1;
            if !(glob.is_match(rel) || name_only && glob.is_match(file_name(rel))) {
                continue;
            }
        }
        // Credentials stay unreadable even inside the workspace.
        if call.env.read_path(&path.to_string_lossy()).is_err() {
            continue;
        }
        let shown = call.env.display(path);
        let Some(pattern) = &call.pattern else {
            if found == call.max {
                truncated = true;
                break;
            }
            out.push_str(&shown);
            out.push('\n');
            found += 1;
            continue;
        };
        if entry.metadata().map(|m| m.len()).unwrap_or(0) > MAX_SEARCH_BYTES {
            continue;
        }
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        if bytes.contains(&0) {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for (n, line) in text.lines().enumerate() {
            if !pattern.is_match(line) {
                continue;
            }
            if found == call.max {
                truncated = true;
                break 'files;
            }
            let line = if line.chars().count() > MAX_LINE_CHARS {
                let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
                format!("{cut}…")
            } else {
                line.to_string()
            };
            out.push_str(&format!("{shown}:{}:{line}\n", n + 1));
            found += 1;
        }
    }
    if found == 0 {
        out.push_str("no matches\n");
    } else if truncated {
        out.push_str(&format!(
            "(stopped at {} results; narrow the search or raise max_results)\n",
            call.max
        ));
    }
    (cap_output(&out), false)
}

fn file_name(rel: &Path) -> &Path {
    rel.file_name().map(Path::new).unwrap_or(rel)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::tools::tests::env_in;

    #[test]
    fn search_and_glob_honour_gitignore() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("target")).unwrap();
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        std::fs::write(root.join("src/a.rs"), "fn main() {}\n// TODO one\n").unwrap();
        std::fs::write(root.join("src/b.txt"), "todo two\n").unwrap();
        std::fs::write(root.join("target/c.rs"), "TODO ignored\n").unwrap();
        let env = env_in(root, &[]);

        let args: Args =
            serde_json::from_str(r#"{"pattern":"todo","case_insensitive":true}"#).unwrap();
        let (out, err) = run(&prepare(args, &env).unwrap());
        assert!(!err);
        assert!(out.contains("src/a.rs:2:// TODO one"), "{out}");
        assert!(out.contains("src/b.txt:1:todo two"), "{out}");
        assert!(!out.contains("ignored"), "{out}");

        let args: Args = serde_json::from_str(r#"{"glob":"**/*.rs"}"#).unwrap();
        let (out, _) = run(&prepare(args, &env).unwrap());
        assert_eq!(out, "src/a.rs\n");

        let args: Args = serde_json::from_str(r#"{"pattern":"nothing here"}"#).unwrap();
        assert_eq!(run(&prepare(args, &env).unwrap()).0, "no matches\n");
        let args: Args = serde_json::from_str(r#"{"pattern":"("}"#).unwrap();
        assert!(prepare(args, &env).is_err());
        let args: Args = serde_json::from_str(r#"{"path":"/etc"}"#).unwrap();
        assert!(prepare(args, &env).is_err());
    }
}
