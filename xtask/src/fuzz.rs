//! `cargo xtask fuzz`: builds the libFuzzer targets in fuzz/ and runs each against its
//! checked-in corpus, then prints executions, time, speed, corpus size and crashes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::daemon;

/// Runs per target in the full form.
pub const FULL_RUNS: u64 = 1_000_000;
/// What the toolchain has: stable only, so no nightly-only target triple tricks.
const TRIPLE: &str = "x86_64-unknown-linux-gnu";
/// How to get cargo-fuzz when it is missing (CI installs it in .ci/run).
const INSTALL: &str = "cargo install --locked cargo-fuzz";

/// How long each target runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    Runs(u64),
    Seconds(u64),
}

#[derive(Debug, PartialEq, Eq)]
pub struct Options {
    pub budget: Budget,
    /// Empty: every target.
    pub targets: Vec<String>,
}

/// `[--runs N | --seconds S] [TARGET...]`.
pub fn parse(rest: &[String]) -> Result<Options> {
    let mut budget = Budget::Runs(FULL_RUNS);
    let mut targets = Vec::new();
    let mut args = rest.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            flag @ ("--runs" | "--seconds") => {
                let Some(n) = args.next().and_then(|n| n.parse::<u64>().ok()) else {
                    bail!("{flag} needs a number");
                };
                budget = if flag == "--runs" {
                    Budget::Runs(n)
                } else {
                    Budget::Seconds(n)
                };
            }
            flag if flag.starts_with('-') => bail!("unknown flag {flag}"),
            target => targets.push(target.to_string()),
        }
    }
    Ok(Options { budget, targets })
}

/// What one libFuzzer run reported.
#[derive(Debug, Default, PartialEq)]
pub struct Stats {
    pub execs: u64,
    pub exec_per_sec: u64,
    /// libFuzzer's final corpus, as "units/bytes".
    pub corpus: String,
}

/// Reads libFuzzer's `-print_final_stats=1` lines and its last status line.
pub fn read_stats(stderr: &str) -> Stats {
    let mut stats = Stats::default();
    for line in stderr.lines() {
        let number = |key: &str| {
            line.strip_prefix(key)
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        if let Some(n) = number("stat::number_of_executed_units:") {
            stats.execs = n;
        } else if let Some(n) = number("stat::average_exec_per_sec:") {
            stats.exec_per_sec = n;
        }
        if let Some(at) = line.find("corp: ") {
            let tail = &line[at + "corp: ".len()..];
            stats.corpus = tail.split_whitespace().next().unwrap_or("").to_string();
        }
    }
    stats
}

/// The targets fuzz/Cargo.toml declares, in its order.
fn all_targets(fuzz: &Path) -> Result<Vec<String>> {
    let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml"))
        .with_context(|| format!("reading {}", fuzz.join("Cargo.toml").display()))?;
    Ok(manifest
        .lines()
        .filter_map(|l| l.trim().strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|name| *name != "jucode-fuzz")
        .map(str::to_string)
        .collect())
}

fn dir_size(dir: &Path) -> (usize, u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (0, 0);
    };
    entries
        .filter_map(|e| e.ok()?.metadata().ok())
        .filter(|m| m.is_file())
        .fold((0, 0), |(n, b), m| (n + 1, b + m.len()))
}

#[allow(
    clippy::disallowed_methods,
    reason = "the report gives each run's real duration"
)]
pub fn run(options: Options) -> Result<bool> {
    let root = daemon::workspace_root()?;
    let fuzz = root.join("fuzz");
    let known = all_targets(&fuzz)?;
    let targets = if options.targets.is_empty() {
        known.clone()
    } else {
        options.targets.clone()
    };
    if let Some(bad) = targets.iter().find(|t| !known.contains(t)) {
        bail!("no fuzz target {bad}; the targets are {}", known.join(", "));
    }
    let has_fuzz = Command::new(daemon::cargo_program())
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_fuzz {
        bail!("cargo-fuzz is not installed; run `{INSTALL}`");
    }

    // One build for every target. Stable rustc: RUSTC_BOOTSTRAP lets it take the
    // sanitizer-coverage flags cargo-fuzz passes (docs/DECISIONS.md, Fuzzing).
    let started = Instant::now();
    let status = Command::new(daemon::cargo_program())
        .current_dir(&fuzz)
        .args(["fuzz", "build", "--release", "--sanitizer", "address"])
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_INCREMENTAL", "0")
        .status()
        .context("running cargo fuzz build")?;
    if !status.success() {
        return Ok(false);
    }
    println!(
        "fuzz: built {} targets in {:.0} s",
        known.len(),
        started.elapsed().as_secs_f64()
    );

    let bin_dir = fuzz.join("target").join(TRIPLE).join("release");
    let mut crashed = Vec::new();
    println!(
        "{:<18} {:>10} {:>8} {:>9} {:>16} {:>16}  result",
        "target", "execs", "seconds", "exec/s", "seeds", "corpus after"
    );
    for target in &targets {
        let seeds = fuzz.join("corpus").join(target);
        let scratch = fuzz.join("target").join("corpus").join(target);
        let artifacts = fuzz.join("target").join("artifacts").join(target);
        for dir in [&seeds, &scratch, &artifacts] {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let budget = match options.budget {
            Budget::Runs(n) => format!("-runs={n}"),
            Budget::Seconds(s) => format!("-max_total_time={s}"),
        };
        let before = std::fs::read_dir(&artifacts)?.count();
        let started = Instant::now();
        // The scratch dir comes first: libFuzzer writes new inputs to the first corpus dir only,
        // so the checked-in seeds stay as committed.
        let output = Command::new(bin_dir.join(target))
            .current_dir(&fuzz)
            .arg(&budget)
            .arg("-print_final_stats=1")
            .arg(format!("-artifact_prefix={}/", artifacts.display()))
            .arg(&scratch)
            .arg(&seeds)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .with_context(|| format!("running fuzz target {target}"))?;
        let seconds = started.elapsed().as_secs_f64();
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stats = read_stats(&stderr);
        let (seed_count, seed_bytes) = dir_size(&seeds);
        let new_artifacts: Vec<PathBuf> = std::fs::read_dir(&artifacts)?
            .filter_map(|e| Some(e.ok()?.path()))
            .collect();
        let ok = output.status.success() && new_artifacts.len() <= before;
        println!(
            "{target:<18} {:>10} {seconds:>8.1} {:>9} {:>16} {:>16}  {}",
            stats.execs,
            stats.exec_per_sec,
            format!("{seed_count}/{seed_bytes}b"),
            stats.corpus,
            if ok { "ok" } else { "CRASHED" }
        );
        if !ok {
            let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
            for line in tail.into_iter().rev() {
                eprintln!("  {target}: {line}");
            }
            for path in &new_artifacts {
                eprintln!("  {target}: crash input {}", path.display());
            }
            crashed.push(target.clone());
        }
    }
    if crashed.is_empty() {
        Ok(true)
    } else {
        println!("fuzz: crashed: {}", crashed.join(", "));
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn budget_and_targets_are_read() {
        assert_eq!(
            parse(&[]).unwrap(),
            Options {
                budget: Budget::Runs(FULL_RUNS),
                targets: vec![]
            }
        );
        assert_eq!(
            parse(&args(&["--seconds", "10", "relay_frame"])).unwrap(),
            Options {
                budget: Budget::Seconds(10),
                targets: vec!["relay_frame".into()]
            }
        );
        assert!(parse(&args(&["--runs"])).is_err());
        assert!(parse(&args(&["--runs", "x"])).is_err());
        assert!(parse(&args(&["--bogus"])).is_err());
    }

    #[test]
    fn final_stats_are_read() {
        let stderr = "#65536\tpulse  cov: 120 ft: 300 corp: 40/1200b lim: 100 exec/s: 30000\n\
                      Done 1000000 runs in 33 second(s)\n\
                      stat::number_of_executed_units: 1000000\n\
                      stat::average_exec_per_sec:     30303\n\
                      #1000000\tDONE   cov: 130 ft: 320 corp: 45/1300b lim: 120 exec/s: 30303\n";
        assert_eq!(
            read_stats(stderr),
            Stats {
                execs: 1_000_000,
                exec_per_sec: 30303,
                corpus: "45/1300b".into()
            }
        );
    }
}
