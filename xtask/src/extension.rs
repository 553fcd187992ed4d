//! `cargo xtask extension`: the Cotal manager extension (`extension/cotal-jcode`, TypeScript)
//! installed from its lockfile, built and tested with Node's own test runner. Its process-level
//! tests run the built `jucode-cotal-jcode`, so CI runs this after the build step.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::daemon;

/// The package, relative to the workspace root.
pub const PACKAGE: &str = "extension/cotal-jcode";
/// The oldest Node the package supports (`engines.node` in its package.json).
const MIN_NODE: u32 = 20;

pub struct Options {
    /// Build `jucode-cotal-jcode` first (CI has just built the workspace).
    pub build: bool,
}

/// Why Node cannot run the package, in words an operator can act on.
fn node_missing(detail: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{detail}: the Cotal extension ({PACKAGE}) needs Node.js {MIN_NODE} or later with npm \
         (Debian/Ubuntu: apt-get install nodejs npm; or set JUCODE_NODE to a node binary)"
    )
}

/// `v20.19.2` → 20.
pub fn major(version: &str) -> Option<u32> {
    version
        .trim()
        .strip_prefix('v')?
        .split('.')
        .next()?
        .parse()
        .ok()
}

pub(crate) fn node_program() -> PathBuf {
    std::env::var_os("JUCODE_NODE")
        .map(PathBuf::from)
        .unwrap_or_else(|| "node".into())
}

/// `npm` beside the node we run, else the one on PATH.
pub(crate) fn npm_program(node: &Path) -> PathBuf {
    match node.parent() {
        Some(dir) if dir.join("npm").exists() => dir.join("npm"),
        _ => "npm".into(),
    }
}

pub(crate) fn check_node(node: &Path) -> Result<()> {
    let out = match Command::new(node).arg("--version").output() {
        Ok(out) => out,
        Err(e) => return Err(node_missing(&format!("cannot run {}: {e}", node.display()))),
    };
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match major(&version) {
        Some(m) if out.status.success() && m >= MIN_NODE => {
            println!("extension: node {version}");
            Ok(())
        }
        _ => Err(node_missing(&format!(
            "{} reports version {version:?}",
            node.display()
        ))),
    }
}

fn run_step(cmd: &mut Command, what: &str) -> Result<()> {
    println!("extension: {what}");
    let status = cmd.status().with_context(|| format!("running {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

pub fn run(options: Options) -> Result<bool> {
    let root = daemon::workspace_root()?;
    let dir = root.join(PACKAGE);
    let node = node_program();
    check_node(&node)?;
    let npm = npm_program(&node);
    if options.build {
        let mut build = Command::new(daemon::cargo_program());
        build
            .current_dir(&root)
            .args(["build", "-p", "jucode-cotal-jcode"]);
        run_step(&mut build, "cargo build -p jucode-cotal-jcode")?;
    }
    let seat = daemon::target_dir()?
        .join("debug")
        .join("jucode-cotal-jcode");
    if !seat.exists() {
        bail!(
            "{} is missing: build it first (cargo build -p jucode-cotal-jcode)",
            seat.display()
        );
    }
    // npm runs `node` from PATH for the scripts: put the chosen one first.
    let path = match (node.parent(), std::env::var_os("PATH")) {
        (Some(d), Some(p)) if !d.as_os_str().is_empty() => {
            std::env::join_paths(std::iter::once(d.to_path_buf()).chain(std::env::split_paths(&p)))
                .context("joining PATH")?
        }
        (_, Some(p)) => p,
        _ => "/usr/bin:/bin".into(),
    };
    let npm_cmd = |args: &[&str]| {
        let mut c = Command::new(&npm);
        c.current_dir(&dir).args(args).env("PATH", &path);
        c
    };
    run_step(
        &mut npm_cmd(&["ci", "--no-audit", "--no-fund"]),
        "npm ci (the pinned lockfile)",
    )?;
    run_step(&mut npm_cmd(&["run", "build"]), "npm run build (tsc)")?;
    run_step(
        npm_cmd(&["test"]).env("JUCODE_COTAL_JCODE_BIN", &seat),
        "npm test (node --test, with the built jucode-cotal-jcode)",
    )?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_versions_are_read() {
        assert_eq!(major("v20.19.2\n"), Some(20));
        assert_eq!(major("v18.0.0"), Some(18));
        assert_eq!(major("20.1.0"), None);
        assert_eq!(major(""), None);
    }

    #[test]
    fn a_missing_node_is_named_with_the_fix() {
        let e = check_node(Path::new("/nonexistent/node")).unwrap_err();
        let text = format!("{e:#}");
        assert!(text.contains("needs Node.js 20 or later"), "{text}");
        assert!(text.contains("apt-get install nodejs npm"), "{text}");
    }
}
