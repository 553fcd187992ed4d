//! `cargo xtask ci`: every check CI runs, in order, stopping at the first failure.

use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{bench, conformance, daemon};

/// Crates that mean an async runtime (or its ecosystem) is in the protocol crate's tree: the
/// protocol is pure data, shared with clients that bring their own runtime.
const RUNTIME_CRATES: &[&str] = &["tokio", "async-std", "smol", "futures", "mio"];
/// Families whose members all come with the runtime (`tokio-util`, `futures-util`, …).
const RUNTIME_FAMILIES: &[&str] = &["tokio-", "futures-", "async-std-"];

enum Check {
    Cargo(&'static [&'static str]),
    ProtocolHasNoRuntime,
    Tests,
    Conformance,
    BenchQuick,
}

const STEPS: &[(&str, Check)] = &[
    (
        "cargo fmt --all -- --check",
        Check::Cargo(&["fmt", "--all", "--", "--check"]),
    ),
    (
        "cargo clippy --workspace --all-targets -- -D warnings",
        Check::Cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    ),
    (
        "jucode-protocol depends on no async runtime",
        Check::ProtocolHasNoRuntime,
    ),
    (
        "cargo build --workspace --all-targets",
        Check::Cargo(&["build", "--workspace", "--all-targets"]),
    ),
    ("tests (cargo nextest run, else cargo test)", Check::Tests),
    ("cargo xtask conformance --no-build", Check::Conformance),
    (
        "cargo deny check licenses bans sources",
        Check::Cargo(&["deny", "check", "licenses", "bans", "sources"]),
    ),
    (
        "slow suites against real peers (cargo nextest run --run-ignored only)",
        Check::Cargo(&[
            "nextest",
            "run",
            "--workspace",
            "--run-ignored",
            "only",
            "--no-tests=pass",
        ]),
    ),
    ("cargo xtask bench --quick", Check::BenchQuick),
];

pub fn run() -> Result<bool> {
    let total = STEPS.len();
    for (i, (name, check)) in STEPS.iter().enumerate() {
        println!("ci: [{}/{total}] {name}", i + 1);
        let passed = match run_check(check) {
            Ok(passed) => passed,
            Err(e) => {
                eprintln!("ci: {e:#}");
                false
            }
        };
        if !passed {
            println!("ci: FAILED at step {}/{total}: {name}", i + 1);
            return Ok(false);
        }
    }
    println!("ci: all {total} steps passed");
    Ok(true)
}

fn cargo() -> Result<Command> {
    let mut cmd = Command::new(daemon::cargo_program());
    cmd.current_dir(daemon::workspace_root()?);
    Ok(cmd)
}

fn cargo_status(args: &[&str]) -> Result<bool> {
    let status = cargo()?
        .args(args)
        .status()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    Ok(status.success())
}

fn run_check(check: &Check) -> Result<bool> {
    match check {
        Check::Cargo(args) => cargo_status(args),
        Check::ProtocolHasNoRuntime => protocol_has_no_runtime(),
        Check::Tests => {
            let has_nextest = cargo()?
                .args(["nextest", "--version"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if has_nextest {
                cargo_status(&["nextest", "run", "--workspace"])
            } else {
                println!("ci: cargo-nextest is not installed; using cargo test");
                cargo_status(&["test", "--workspace"])
            }
        }
        // Same process: the binaries were just built by the build step.
        Check::Conformance => conformance::run(conformance::Options {
            build: false,
            filter: None,
        }),
        Check::BenchQuick => bench::run(bench::Options {
            quick: true,
            build: true,
        }),
    }
}

fn protocol_has_no_runtime() -> Result<bool> {
    let output = cargo()?
        .args([
            "tree",
            "-p",
            "jucode-protocol",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .output()
        .context("running cargo tree")?;
    if !output.status.success() {
        bail!(
            "cargo tree failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let tree = String::from_utf8_lossy(&output.stdout);
    let found = runtime_crates(&tree);
    if found.is_empty() {
        println!("ci: jucode-protocol's normal dependencies hold no async runtime");
        return Ok(true);
    }
    println!(
        "ci: jucode-protocol depends on {} (it must stay runtime-free)",
        found.join(", ")
    );
    Ok(false)
}

/// Runtime crates named in `cargo tree --prefix none` output (one `name vX.Y.Z …` per line),
/// including their family (`tokio-util`, `futures-util`, …).
fn runtime_crates(tree: &str) -> Vec<String> {
    let mut found: Vec<String> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| {
            RUNTIME_CRATES.contains(name) || RUNTIME_FAMILIES.iter().any(|f| name.starts_with(f))
        })
        .map(str::to_string)
        .collect();
    found.sort();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_crates_are_found_by_name_and_family() {
        let tree = "jucode-protocol v0.1.0 (/x)\nserde v1.0.0\ntokio v1.0.0\nfutures-util v0.3.0\n\
                    tokio v1.0.0 (*)\nmiog v1.0.0\nsmol_str v0.2.0\nmio v1.0.0\n";
        assert_eq!(runtime_crates(tree), vec!["futures-util", "mio", "tokio"]);
        assert!(runtime_crates("jucode-protocol v0.1.0\nserde_json v1.0.0\n").is_empty());
    }
}
