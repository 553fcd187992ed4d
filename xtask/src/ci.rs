//! `cargo xtask ci`: every check CI runs, in order, stopping at the first failure.

use std::process::Command;

use anyhow::{Context, Result};

use crate::{bench, conformance, crashloop, daemon, extension, fuzz, load, tidy, web};

enum Check {
    Cargo(&'static [&'static str]),
    Tidy,
    Docs,
    Tests,
    Extension,
    Browser,
    Examples,
    Conformance,
    CrashloopQuick,
    NodeReference,
    BenchQuick,
    LoadQuick,
    Fuzz,
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
        "cargo xtask tidy (crate graph, layering, unused deps, file sizes, schemas, op index)",
        Check::Tidy,
    ),
    (
        "RUSTDOCFLAGS=\"-D warnings\" cargo doc --workspace --no-deps",
        Check::Docs,
    ),
    (
        "cargo build --workspace --all-targets",
        Check::Cargo(&["build", "--workspace", "--all-targets"]),
    ),
    ("tests (cargo nextest run, else cargo test)", Check::Tests),
    (
        "the Cotal extension: npm ci, tsc, node --test (extension/cotal-jcode)",
        Check::Extension,
    ),
    (
        "the remote page: npm ci, tsc, node --test, headless Chromium (cargo xtask browser --no-build)",
        Check::Browser,
    ),
    (
        "scripts/run-examples.sh --no-build (the client and embed examples, run for real)",
        Check::Examples,
    ),
    ("cargo xtask conformance --no-build", Check::Conformance),
    (
        "cargo xtask crashloop --quick --no-build (50 SIGKILLs, nothing acknowledged lost)",
        Check::CrashloopQuick,
    ),
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
    (
        "the fan-out bench's Node reference: npm ci (xtask/node-ws, the pinned ws)",
        Check::NodeReference,
    ),
    ("cargo xtask bench --quick", Check::BenchQuick),
    (
        "cargo xtask load --quick (100 clients, 5 streams, one client that stops reading)",
        Check::LoadQuick,
    ),
    ("cargo xtask fuzz --seconds 10 (every target)", Check::Fuzz),
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
        Check::Tidy => tidy::run(tidy::Options { fix: false }),
        Check::Examples => {
            let status = Command::new("bash")
                .current_dir(daemon::workspace_root()?)
                .args(["scripts/run-examples.sh", "--no-build"])
                .status()
                .context("running scripts/run-examples.sh")?;
            Ok(status.success())
        }
        Check::Docs => {
            let status = cargo()?
                .args(["doc", "--workspace", "--no-deps"])
                .env("RUSTDOCFLAGS", "-D warnings")
                .status()
                .context("running cargo doc")?;
            Ok(status.success())
        }
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
        // The build step built jucode-cotal-jcode, which its process-level tests run.
        Check::Extension => extension::run(extension::Options { build: false }),
        // The build step built the daemon, the scripted engine and the relay.
        Check::Browser => web::browser(web::BrowserOptions {
            build: false,
            filter: None,
        }),
        // Same process: the binaries were just built by the build step.
        Check::Conformance => conformance::run(conformance::Options {
            build: false,
            filter: None,
        }),
        Check::CrashloopQuick => crashloop::run(crashloop::Options {
            kills: 50,
            seed: None,
            build: false,
        }),
        Check::NodeReference => {
            let node = extension::node_program();
            extension::check_node(&node)?;
            let status = Command::new(extension::npm_program(&node))
                .current_dir(daemon::workspace_root()?.join(bench::NODE_PACKAGE))
                .args(["ci", "--no-audit", "--no-fund"])
                .status()
                .context("running npm ci for the bench's Node reference")?;
            Ok(status.success())
        }
        Check::BenchQuick => bench::run(bench::Options {
            quick: true,
            build: true,
            only: None,
            frames: None,
            clients: None,
            lines_per_write: None,
        }),
        // The bench step built the release binaries; cargo only checks them here.
        Check::LoadQuick => load::run(load::Options {
            quick: true,
            build: true,
            clients: None,
            rate: None,
            seconds: None,
            sessions: None,
            stream_ms: None,
            keepalive: None,
        }),
        Check::Fuzz => fuzz::run(fuzz::Options {
            budget: fuzz::Budget::Seconds(10),
            targets: Vec::new(),
        }),
    }
}
