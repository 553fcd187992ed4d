//! Model-facing tool names: `mcp__<server>__<tool>`, limited to `[A-Za-z0-9_-]` and 64
//! characters (what model APIs accept for function names).

use std::collections::HashSet;
use std::fmt::Write;

const MAX_LEN: usize = 64;
/// Hex digits of the hash that keeps shortened or colliding names apart.
const HASH_LEN: usize = 8;

/// The plain model-facing name of `tool` on `server`, before collision handling.
pub fn model_tool_name(server: &str, tool: &str) -> String {
    let full = format!("mcp__{}__{}", sanitise(server), sanitise(tool));
    if full.len() <= MAX_LEN {
        full
    } else {
        shortened(&full, server, tool)
    }
}

/// Names for a list of (server, tool) pairs, unique within the list and stable for a given
/// pair: a name already taken gets a hash suffix of its pair.
pub(crate) fn assign_names(pairs: &[(&str, &str)]) -> Vec<String> {
    let mut taken = HashSet::new();
    let mut out = Vec::with_capacity(pairs.len());
    for (server, tool) in pairs {
        let mut name = model_tool_name(server, tool);
        if taken.contains(&name) {
            name = shortened(&name, server, tool);
        }
        taken.insert(name.clone());
        out.push(name);
    }
    out
}

fn sanitise(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `name` cut to leave room for `_<hash of the pair>`. All characters are ASCII here, so
/// byte cuts are character cuts.
fn shortened(name: &str, server: &str, tool: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{server}\u{0}{tool}").as_bytes(),
    );
    let mut hash = String::with_capacity(HASH_LEN);
    for byte in digest.as_ref().iter().take(HASH_LEN / 2) {
        let _ = write!(hash, "{byte:02x}");
    }
    let keep = name.len().min(MAX_LEN - HASH_LEN - 1);
    format!("{}_{hash}", &name[..keep])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        name.len() <= MAX_LEN
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn plain_names() {
        assert_eq!(
            model_tool_name("github", "create_issue"),
            "mcp__github__create_issue"
        );
        assert_eq!(
            model_tool_name("my server", "a.b/c"),
            "mcp__my_server__a_b_c"
        );
        assert_eq!(model_tool_name("ünï", "x"), "mcp___n___x");
    }

    #[test]
    fn long_names_are_cut_with_a_stable_hash() {
        let long = "t".repeat(100);
        let a = model_tool_name("srv", &long);
        assert!(valid(&a), "{a}");
        assert_eq!(a, model_tool_name("srv", &long));
        let other = format!("{long}x");
        assert_ne!(a, model_tool_name("srv", &other));
    }

    #[test]
    fn collisions_get_distinct_names() {
        let names = assign_names(&[("s", "a.b"), ("s", "a_b"), ("s", "a.b")]);
        assert_eq!(names[0], "mcp__s__a_b");
        assert_ne!(names[1], names[0]);
        assert!(names.iter().all(|n| valid(n)));
    }
}
