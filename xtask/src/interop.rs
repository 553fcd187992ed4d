//! `cargo xtask interop`: installs the pinned real engine CLIs, then runs the ignored suites
//! that drive them against the fake model server on loopback: the engines' own
//! (`crates/jucode-fake-engines/tests/real_clis.rs`: Claude Code, Codex and claude-agent-acp
//! through their adapters) and the daemon's (`bins/jucode-daemon/tests/*_real.rs`: the start
//! gate, the JuCode gateway and the TUI hand-off with the real CLIs).
//! Closes with `interop: N passed, M failed`; fails when any test failed or none ran.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::daemon::{cargo_program, workspace_root};

/// Each suite: its package, and the test binaries of it that drive the real CLIs.
const SUITES: &[(&str, &[&str])] = &[
    ("jucode-fake-engines", &["real_clis"]),
    (
        "jucode-daemon",
        &["requirements_gate_real", "gateway_real", "tui_real"],
    ),
];

pub fn run() -> Result<bool> {
    let root = workspace_root()?;
    println!("interop: installing the engine CLIs (scripts/install-engines.sh)");
    let installed = Command::new("bash")
        .arg("scripts/install-engines.sh")
        .current_dir(&root)
        .status()
        .context("running bash scripts/install-engines.sh")?;
    if !installed.success() {
        bail!("scripts/install-engines.sh failed ({installed})");
    }

    let mut build = Command::new(cargo_program());
    build.arg("build");
    for (package, _) in SUITES {
        build.args(["-p", package]);
    }
    println!("interop: building the suites' packages");
    let built = build
        .args(["--tests", "--bins"])
        .current_dir(&root)
        .status()
        .context("running cargo build")?;
    if !built.success() {
        bail!("building the suites' packages failed");
    }

    let has_nextest = Command::new(cargo_program())
        .args(["nextest", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let mut total = Counts::default();
    let mut all_ok = true;
    for (package, binaries) in SUITES {
        let cmd = suite_command(package, binaries, has_nextest);
        println!(
            "interop: running {package}'s real-CLI suites ({})",
            binaries.join(", ")
        );
        let (ok, counts) = run_suite(cmd, &root)?;
        all_ok &= ok;
        total.add(counts);
    }
    println!("interop: {} passed, {} failed", total.passed, total.failed);
    Ok(all_ok && total.failed == 0 && total.passed > 0)
}

fn suite_command(package: &str, binaries: &[&str], has_nextest: bool) -> Command {
    let mut cmd = Command::new(cargo_program());
    if has_nextest {
        let filter = binaries
            .iter()
            .map(|b| format!("binary({b})"))
            .collect::<Vec<_>>()
            .join(" | ");
        cmd.args(["nextest", "run", "-p", package, "--run-ignored", "only"]);
        cmd.args(["--no-fail-fast", "-E", &filter]);
    } else {
        cmd.args(["test", "-p", package, "--no-fail-fast"]);
        for b in binaries {
            cmd.args(["--test", b]);
        }
        cmd.args(["--", "--ignored"]);
    }
    cmd
}

/// Runs one suite, passing its output through as it comes and reading it for the counts.
fn run_suite(mut cmd: Command, root: &std::path::Path) -> Result<(bool, Counts)> {
    let mut child = cmd
        .current_dir(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the test runner")?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        bail!("the test runner's output was not piped");
    };
    let err_reader = std::thread::spawn(move || relay(BufReader::new(stderr), true));
    let mut counts = relay(BufReader::new(stdout), false);
    let status = child.wait().context("waiting for the test runner")?;
    if let Ok(from_stderr) = err_reader.join() {
        counts.add(from_stderr);
    }
    if !counts.seen {
        bail!("the test runner ({status}) printed no result line");
    }
    Ok((status.success(), counts))
}

#[derive(Debug, Default, PartialEq)]
struct Counts {
    passed: u64,
    failed: u64,
    seen: bool,
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.seen |= other.seen;
    }
}

/// Echoes every line and sums the counts of the runner's result lines.
fn relay(reader: impl BufRead, to_stderr: bool) -> Counts {
    let mut counts = Counts::default();
    for line in reader.lines().map_while(Result::ok) {
        if to_stderr {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
        if let Some(found) = result_line(&line) {
            counts.add(found);
        }
    }
    counts
}

/// The counts of nextest's `Summary … N tests run: P passed, F failed, …` or libtest's
/// `test result: ok. P passed; F failed; …`; timed-out tests count as failed.
fn result_line(line: &str) -> Option<Counts> {
    let line = line.trim();
    let rest = if let Some(at) = line.find(" run: ").filter(|_| line.starts_with("Summary")) {
        &line[at + " run: ".len()..]
    } else if let Some(rest) = line.strip_prefix("test result: ") {
        rest.split_once(". ").map(|(_, r)| r).unwrap_or(rest)
    } else {
        return None;
    };
    let mut counts = Counts {
        seen: true,
        ..Counts::default()
    };
    for part in rest.split([',', ';']) {
        let mut words = part.split_whitespace();
        let (Some(n), Some(what)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        match what {
            "passed" => counts.passed += n,
            "failed" | "timed" => counts.failed += n,
            _ => {}
        }
    }
    Some(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_of_both_runners_are_read() {
        let c = |passed, failed| {
            Some(Counts {
                passed,
                failed,
                seen: true,
            })
        };
        assert_eq!(
            result_line("     Summary [  23.057s] 12 tests run: 12 passed, 0 skipped"),
            c(12, 0)
        );
        assert_eq!(
            result_line("Summary [ 1.0s] 3 tests run: 1 passed, 1 failed, 1 timed out, 9 skipped"),
            c(1, 2)
        );
        assert_eq!(
            result_line("test result: FAILED. 7 passed; 1 failed; 0 ignored; 0 measured"),
            c(7, 1)
        );
        assert_eq!(result_line("PASS [ 1.0s] real_clis codex_approved"), None);
    }
}
