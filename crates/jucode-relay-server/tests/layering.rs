//! The relay server stands on the relay protocol crate alone: no workspace crate it depends on
//! (normal, dev or build, transitively) is the hub or the daemon's side of the relay. Read from
//! the workspace's manifests, so it needs no cargo run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;

/// The `jucode-*` crates a manifest depends on, in any dependency table.
fn workspace_deps(manifest: &str) -> BTreeSet<String> {
    let mut deps = BTreeSet::new();
    let mut in_deps = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line.ends_with("dependencies]");
            continue;
        }
        if in_deps && line.starts_with("jucode-") {
            let name = line.split(['=', '.', ' ']).next().unwrap_or_default();
            deps.insert(name.to_string());
        }
    }
    deps
}

fn crate_dir(root: &Path, name: &str) -> std::path::PathBuf {
    let dir = root.join("crates").join(name);
    assert!(dir.join("Cargo.toml").is_file(), "no crate {name}");
    dir
}

#[test]
fn the_relay_server_reaches_no_hub_and_no_host_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut seen = BTreeSet::new();
    let mut todo = vec!["jucode-relay-server".to_string()];
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let manifest = std::fs::read_to_string(crate_dir(&root, &name).join("Cargo.toml")).unwrap();
        todo.extend(workspace_deps(&manifest));
    }
    assert!(seen.contains("jucode-relay-proto"), "{seen:?}");
    for forbidden in [
        "jucode-hub",
        "jucode-relay-host",
        "jucode-server",
        "jucode-store",
    ] {
        assert!(
            !seen.contains(forbidden),
            "the relay server reaches {forbidden}: {seen:?}"
        );
    }
}

#[test]
fn the_reader_sees_dependencies_in_every_table() {
    let deps = workspace_deps(
        "[package]\nname = \"x\"\n[dependencies]\njucode-a.workspace = true\n\
         serde = \"1\"\n[dev-dependencies]\njucode-b = { path = \"../b\" }\n[lints]\njucode-c = 1\n",
    );
    assert_eq!(
        deps,
        BTreeSet::from(["jucode-a".to_string(), "jucode-b".to_string()])
    );
}
