//! `cargo xtask web` and `cargo xtask browser`: the remote page (`web/`, TypeScript bundled by
//! esbuild from the pinned lockfile) and its suite in real headless Chromium.
//!
//! - `web` installs the locked dependencies when they are missing and rebuilds
//!   `crates/jucode-web/assets`, the committed bundle the daemon embeds.
//! - `web --check` (run by `cargo xtask tidy`) builds into a temporary directory and fails when
//!   the committed bundle is not what the sources build.
//! - `browser` type-checks the sources, runs the unit tests (`web/test`, node --test) and then
//!   the scenarios in `web/e2e` against the built daemon and relay, with the embedded page.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{daemon, extension};

/// The page's package, relative to the workspace root.
pub const PACKAGE: &str = "web";

pub struct BrowserOptions {
    pub build: bool,
    pub filter: Option<String>,
}

struct Node {
    node: PathBuf,
    npm: PathBuf,
    path: std::ffi::OsString,
    dir: PathBuf,
}

impl Node {
    fn find() -> Result<Node> {
        let node = extension::node_program();
        extension::check_node(&node)?;
        let npm = extension::npm_program(&node);
        // npm runs `node` from PATH for the scripts: put the chosen one first.
        let path = match (node.parent(), std::env::var_os("PATH")) {
            (Some(d), Some(p)) if !d.as_os_str().is_empty() => std::env::join_paths(
                std::iter::once(d.to_path_buf()).chain(std::env::split_paths(&p)),
            )
            .context("joining PATH")?,
            (_, Some(p)) => p,
            _ => "/usr/bin:/bin".into(),
        };
        Ok(Node {
            node,
            npm,
            path,
            dir: daemon::workspace_root()?.join(PACKAGE),
        })
    }

    fn npm(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.npm);
        c.current_dir(&self.dir).args(args).env("PATH", &self.path);
        c
    }

    fn node(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.node);
        c.current_dir(&self.dir).args(args).env("PATH", &self.path);
        c
    }

    /// `npm ci` unless the installed tree is the locked one already (npm records what it
    /// installed in node_modules/.package-lock.json).
    fn install(&self) -> Result<()> {
        let lock = std::fs::read(self.dir.join("package-lock.json"))
            .context("reading web/package-lock.json")?;
        let installed = std::fs::read(self.dir.join("node_modules/.package-lock.json")).ok();
        if installed.is_some_and(|i| same_packages(&lock, &i)) {
            return Ok(());
        }
        step(
            &mut self.npm(&["ci", "--no-audit", "--no-fund"]),
            "npm ci (web, the pinned lockfile)",
        )
    }
}

/// Whether two lockfiles name the same packages at the same versions.
fn same_packages(a: &[u8], b: &[u8]) -> bool {
    let versions = |bytes: &[u8]| -> Option<Vec<(String, String)>> {
        let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
        let mut out: Vec<(String, String)> = v
            .get("packages")?
            .as_object()?
            .iter()
            .filter(|(k, _)| !k.is_empty())
            .map(|(k, p)| {
                let version = p.get("version").and_then(|v| v.as_str()).unwrap_or("");
                (k.clone(), version.to_string())
            })
            .collect();
        out.sort();
        Some(out)
    };
    versions(a).is_some() && versions(a) == versions(b)
}

fn step(cmd: &mut Command, what: &str) -> Result<()> {
    println!("web: {what}");
    let status = cmd.status().with_context(|| format!("running {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// `cargo xtask web`: rebuild the committed bundle.
pub fn build() -> Result<bool> {
    let node = Node::find()?;
    node.install()?;
    step(
        &mut node.node(&["build.mjs"]),
        "node build.mjs (esbuild into crates/jucode-web/assets)",
    )?;
    Ok(true)
}

/// `cargo xtask web --check`: the committed bundle is a fresh build of the sources.
pub fn check() -> Result<bool> {
    let node = Node::find()?;
    node.install()?;
    let status = node
        .node(&["build.mjs", "--check"])
        .status()
        .context("running node build.mjs --check")?;
    Ok(status.success())
}

/// `cargo xtask browser`: type-check, unit tests, then the scenarios in headless Chromium.
pub fn browser(options: BrowserOptions) -> Result<bool> {
    let root = daemon::workspace_root()?;
    let node = Node::find()?;
    node.install()?;
    step(
        &mut node.npm(&["run", "typecheck"]),
        "tsc --noEmit (the page's types)",
    )?;
    step(
        &mut node.node(&["build.mjs", "--unit"]),
        "node --test (web/test)",
    )?;
    if options.build {
        step(
            Command::new(daemon::cargo_program())
                .current_dir(&root)
                .args([
                    "build",
                    "-p",
                    "jucode-daemon",
                    "-p",
                    "jucode-testsupport",
                    "-p",
                    "jucode-relay",
                ]),
            "cargo build (the daemon, the scripted engine and model server, the relay)",
        )?;
    }
    let chromium = chromium()?;
    let target = daemon::target_dir()?;
    let debug = target.join("debug");
    for bin in [
        "jucode-daemon",
        "jucode-fake-serve",
        "jucode-fake-model",
        "jucode-relay",
    ] {
        if !debug.join(bin).exists() {
            bail!("{} is missing: build it first", debug.join(bin).display());
        }
    }
    let mut run = node.node(&["--experimental-websocket", "e2e/run.mjs"]);
    if let Some(filter) = &options.filter {
        run.arg(filter);
    }
    run.env("CARGO_TARGET_DIR", &target)
        .env("CHROMIUM", &chromium)
        // The embedded page is what ships: never a --web override here.
        .env_remove("JUCODE_WEB_DIR");
    println!(
        "web: screenshots go to {}",
        target.join("screenshots").display()
    );
    let status = run.status().context("running web/e2e/run.mjs")?;
    Ok(status.success())
}

/// Debian's Chromium, or `CHROMIUM` when set.
fn chromium() -> Result<PathBuf> {
    let path = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if !Path::new(&path).exists() {
        bail!(
            "{} is missing: the browser suite runs Debian's chromium \
             (apt-get install chromium; .ci/run installs it), or set CHROMIUM",
            path.display()
        );
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lockfiles_compare_by_package_versions() {
        let a = br#"{"packages":{"":{"name":"x"},"node_modules/a":{"version":"1.0.0"}}}"#;
        let b = br#"{"packages":{"node_modules/a":{"version":"1.0.0","resolved":"r"}}}"#;
        let c = br#"{"packages":{"node_modules/a":{"version":"1.0.1"}}}"#;
        assert!(same_packages(a, b));
        assert!(!same_packages(a, c));
        assert!(!same_packages(b"not json", b"not json"));
    }
}
