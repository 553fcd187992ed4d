//! Layering rules: crates a workspace crate must not reach through its normal dependencies,
//! checked on the resolved graph (transitively, so a forbidden crate cannot sneak in through a
//! middle crate). A new rule is one more row in [`RULES`].

use super::graph::Workspace;

/// Async runtimes and their ecosystems.
const RUNTIME: &[&str] = &[
    "tokio",
    "tokio-*",
    "async-std",
    "async-std-*",
    "smol",
    "async-io",
    "futures",
    "futures-*",
    "mio",
];

/// A rule: `krate` reaches none of `forbidden` (an exact package name, or `stem-*` for the
/// stem and every `stem-…` crate).
#[derive(Debug)]
pub struct Rule {
    pub krate: &'static str,
    pub forbidden: &'static [&'static [&'static str]],
    pub why: &'static str,
    /// Set while a rule is known to fail until some other work lands: its violations are shown
    /// but do not fail the check.
    pub pending: Option<&'static str>,
}

pub const RULES: &[Rule] = &[
    Rule {
        krate: "jucode-protocol",
        forbidden: &[
            RUNTIME,
            &[
                "socket2",
                "nix",
                "hyper",
                "hyper-*",
                "reqwest",
                "tungstenite",
                "rustls",
                "async-nats",
                "tempfile",
                "jucode-store",
                "jucode-engine",
            ],
        ],
        why: "the wire types are pure data shared with clients that bring their own runtime and IO",
        pending: None,
    },
    Rule {
        krate: "jucode-hub",
        forbidden: &[&[
            "jucode-agent",
            "jucode-adapters",
            "jucode-relay",
            "jucode-relay-*",
            "jucode-server",
            "hyper",
            "hyper-*",
            "tokio-tungstenite",
            "tungstenite",
            "reqwest",
        ]],
        why: "the hub knows engines through jucode-engine only, and no transport",
        pending: None,
    },
    Rule {
        krate: "jucode-relay-server",
        forbidden: &[&["jucode-hub"]],
        why: "the relay server forwards ciphertext and needs none of the daemon",
        pending: Some("holds once the relay branch splits the relay crates (issue 11, item 5)"),
    },
];

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix("-*") {
        Some(stem) => name == stem || name.strip_prefix(stem).is_some_and(|r| r.starts_with('-')),
        None => name == pattern,
    }
}

/// What one rule found.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Holds,
    /// Each chain runs from the rule's crate to a forbidden one.
    Broken(Vec<Vec<String>>),
    /// The rule names a crate the workspace does not have.
    NoSuchCrate,
}

pub fn check(ws: &Workspace, rule: &Rule) -> Outcome {
    if ws.member(rule.krate).is_none() {
        return Outcome::NoSuchCrate;
    }
    let chains = ws.reachable(rule.krate, |name| {
        rule.forbidden
            .iter()
            .flat_map(|group| group.iter())
            .any(|p| matches(p, name))
    });
    if chains.is_empty() {
        Outcome::Holds
    } else {
        Outcome::Broken(chains)
    }
}

#[cfg(test)]
mod tests {
    use super::super::graph::fake_metadata;
    use super::*;
    use anyhow::Result;

    #[test]
    fn families_match_the_stem_and_its_dashed_members_only() {
        assert!(matches("tokio-*", "tokio"));
        assert!(matches("tokio-*", "tokio-util"));
        assert!(!matches("tokio-*", "tokionic"));
        assert!(!matches("mio", "miog"));
        assert!(matches("mio", "mio"));
    }

    #[test]
    fn a_forbidden_dependency_is_found_through_a_middle_crate() -> Result<()> {
        let ws = Workspace::from_metadata(&fake_metadata(
            &[
                (
                    "jucode-protocol",
                    &[("serde", &["normal"]), ("helper", &["normal"])],
                ),
                (
                    "jucode-hub",
                    &[("jucode-protocol", &["normal"]), ("hyper", &["dev"])],
                ),
                ("helper", &[("futures-util", &["normal"])]),
                ("serde", &[]),
                ("futures-util", &[]),
                ("hyper", &[]),
            ],
            2,
        ))?;
        assert_eq!(
            check(&ws, &RULES[0]),
            Outcome::Broken(vec![vec![
                "jucode-protocol".into(),
                "helper".into(),
                "futures-util".into()
            ]])
        );
        // A dev-dependency is not part of what the hub links.
        assert_eq!(check(&ws, &RULES[1]), Outcome::Holds);
        assert_eq!(check(&ws, &RULES[2]), Outcome::NoSuchCrate);
        Ok(())
    }
}
