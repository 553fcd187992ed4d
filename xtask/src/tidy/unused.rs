//! Unused dependencies: a dependency whose name the crate's Rust sources never use as a path
//! (`name::…`), in a `use name` or in `extern crate name`. The same textual test as
//! cargo-machete, without installing it; a dependency needed for another reason (a feature it
//! turns on, a crate only linked) is listed in `[package.metadata.cargo-machete] ignored` with
//! a comment why, which cargo-machete honours too.

use super::graph::{Dep, Member};

/// Whether `source` uses the crate `name` (an extern name: `serde_json`).
pub fn uses(source: &str, name: &str) -> bool {
    source
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .any(|line| line_uses(line, name))
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn ends_with_word(text: &str, word: &str) -> bool {
    text.strip_suffix(word)
        .is_some_and(|rest| !rest.chars().next_back().is_some_and(is_ident))
}

fn line_uses(line: &str, name: &str) -> bool {
    let mut from = 0;
    while let Some(at) = line[from..].find(name) {
        let start = from + at;
        let end = start + name.len();
        from = end;
        let before = &line[..start];
        let after = &line[end..];
        if before.chars().next_back().is_some_and(is_ident)
            || after.chars().next().is_some_and(is_ident)
        {
            continue;
        }
        let before = before.trim_end();
        if after.starts_with("::")
            || ends_with_word(before, "use")
            || ends_with_word(before, "extern crate")
        {
            return true;
        }
    }
    false
}

/// The dependencies of `member` that none of `sources` use, minus its `ignored` list.
pub fn unused<'a>(member: &'a Member, sources: &[String]) -> Vec<&'a Dep> {
    member
        .deps
        .iter()
        .filter(|dep| !member.unused_ok.contains(&dep.package))
        .filter(|dep| !sources.iter().any(|s| uses(s, &dep.extern_name)))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::PathBuf;

    use super::super::graph::DepKind;
    use super::*;

    #[test]
    fn paths_uses_and_extern_crates_count_and_lookalikes_do_not() {
        assert!(uses("let v = serde_json::json!({});", "serde_json"));
        assert!(uses("use serde_json;", "serde_json"));
        assert!(uses("    use tokio::sync::mpsc;", "tokio"));
        assert!(uses("#[tokio::test]", "tokio"));
        assert!(uses("extern crate ring;", "ring"));
        assert!(uses("let x = ::base64::engine;", "base64"));
        assert!(!uses("// serde_json::json! is not used", "serde_json"));
        assert!(!uses(
            "let serde_json_value = 1; my_tokio::x();",
            "serde_json"
        ));
        assert!(!uses("my_tokio::spawn();", "tokio"));
        assert!(!uses("let tokio = 1;", "tokio"));
        assert!(!uses("let s = \"refuse tokio\";", "tokio"));
    }

    #[test]
    fn an_unused_dependency_is_reported_unless_it_is_ignored() {
        let dep = |package: &str| Dep {
            package: package.into(),
            extern_name: package.replace('-', "_"),
            kinds: BTreeSet::from([DepKind::Normal]),
        };
        let mut member = Member {
            name: "x".into(),
            dir: PathBuf::from("/ws/x"),
            deps: vec![dep("serde-json"), dep("percent-encoding"), dep("ring")],
            unused_ok: Vec::new(),
        };
        let sources = vec!["use serde_json::Value;\n".to_string(), "fn f() {}\n".into()];
        let names = |m: &Member| -> Vec<String> {
            unused(m, &sources)
                .iter()
                .map(|d| d.package.clone())
                .collect()
        };
        assert_eq!(names(&member), vec!["percent-encoding", "ring"]);
        member.unused_ok = vec!["ring".into()];
        assert_eq!(names(&member), vec!["percent-encoding"]);
    }
}
