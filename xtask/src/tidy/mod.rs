//! `cargo xtask tidy [--fix]`: the workspace's shape, checked on `cargo metadata` and the
//! sources. The crate graph in docs/ARCHITECTURE.md is the generated one (`--fix` rewrites
//! it), the layering rules hold, no dependency is unused, no file is oversized, and the frame
//! schemas and PROTOCOL.md's op index are the ones `jucode-protocol` generates.
//!
//! Each check is a pure function over the parsed metadata or a file's text ([`graph`] reads
//! the metadata); this file only gathers the inputs and prints what they found.

mod diagram;
mod extension;
mod graph;
mod layering;
mod size;
mod unused;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::daemon;
use graph::Workspace;
use layering::Outcome;

pub struct Options {
    /// Rewrite the diagram instead of failing on drift.
    pub fix: bool,
}

const ARCHITECTURE: &str = "docs/ARCHITECTURE.md";

pub fn run(options: Options) -> Result<bool> {
    let ws = load()?;
    let mut ok = true;
    ok &= crate_graph(&ws, options.fix)?;
    ok &= layering_rules(&ws);
    ok &= unused_dependencies(&ws)?;
    ok &= file_sizes(&ws)?;
    ok &= generated_protocol_files(&ws.root, options.fix)?;
    ok &= node_package(&ws.root, crate::extension::PACKAGE);
    ok &= node_package(&ws.root, crate::bench::NODE_PACKAGE);
    ok &= web_package(&ws.root);
    println!(
        "tidy: {}",
        if ok {
            "all checks passed"
        } else {
            "FAILED (see above)"
        }
    );
    Ok(ok)
}

/// The frame schemas and PROTOCOL.md's op index match the protocol crate (`--fix` rewrites).
fn generated_protocol_files(root: &Path, fix: bool) -> Result<bool> {
    if fix {
        for path in crate::schema::write(root)? {
            println!("tidy: wrote {}", path.display());
        }
        return Ok(true);
    }
    match crate::schema::check(root) {
        Ok(()) => {
            println!("tidy: ok: docs/schema and the op index of docs/PROTOCOL.md are generated");
            Ok(true)
        }
        Err(e) => {
            println!("tidy: {e:#}");
            Ok(false)
        }
    }
}

/// A Node package's dependencies (the extension's, the bench's Node reference's) are exact
/// versions its lockfile pins.
fn node_package(root: &Path, package: &str) -> bool {
    match extension::check(&root.join(package)) {
        Ok(n) => {
            println!("tidy: ok: {package} pins its {n} dependencies exactly in package-lock.json");
            true
        }
        Err(e) => {
            println!("tidy: FAIL: {package}: {e}");
            false
        }
    }
}

/// The remote page pins its dependencies exactly, and the committed bundle is what its
/// sources build (`cargo xtask web` rewrites it).
fn web_package(root: &Path) -> bool {
    let dir = root.join(crate::web::PACKAGE);
    let pinned = match extension::check(&dir) {
        Ok(n) => {
            println!("tidy: ok: web pins its {n} dependencies exactly in package-lock.json");
            true
        }
        Err(e) => {
            println!("tidy: FAIL: web: {e}");
            false
        }
    };
    let built = match crate::web::check() {
        Ok(true) => {
            println!("tidy: ok: crates/jucode-web/assets is a fresh build of web/");
            true
        }
        Ok(false) => {
            println!("tidy: FAIL: crates/jucode-web/assets differs from web/ (cargo xtask web)");
            false
        }
        Err(e) => {
            println!("tidy: FAIL: web: {e:#}");
            false
        }
    };
    pinned && built
}

/// The host's target triple: the graph is resolved for the machine the daemon runs on, so a
/// dependency only another platform builds (e.g. `js-sys` on wasm) is not counted.
fn host_triple() -> Result<String> {
    let output = std::process::Command::new("rustc")
        .arg("-vV")
        .output()
        .context("running rustc -vV")?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(|h| h.trim().to_string())
        .context("rustc -vV printed no host line")
}

fn load() -> Result<Workspace> {
    let output = std::process::Command::new(daemon::cargo_program())
        .current_dir(daemon::workspace_root()?)
        .args(["metadata", "--format-version", "1", "--filter-platform"])
        .arg(host_triple()?)
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("cargo metadata printed no JSON")?;
    Workspace::from_metadata(&meta)
}

fn crate_graph(ws: &Workspace, fix: bool) -> Result<bool> {
    let path = ws.root.join(ARCHITECTURE);
    let doc =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let block = diagram::render(ws);
    let drift = match diagram::drift(&doc, &block) {
        Ok(drift) => drift,
        Err(e) => {
            println!("tidy: FAIL: {e}");
            return Ok(false);
        }
    };
    let Some(diff) = drift else {
        println!("tidy: ok: the crate graph in {ARCHITECTURE} matches cargo metadata");
        return Ok(true);
    };
    if fix {
        let fixed = diagram::splice(&doc, &block)?;
        std::fs::write(&path, fixed).with_context(|| format!("writing {}", path.display()))?;
        println!("tidy: fixed: rewrote the crate graph in {ARCHITECTURE}");
        return Ok(true);
    }
    println!("tidy: FAIL: the crate graph in {ARCHITECTURE} differs from cargo metadata:");
    for line in diff {
        println!("    {line}");
    }
    println!("  run `cargo xtask tidy --fix` to regenerate it");
    Ok(false)
}

fn layering_rules(ws: &Workspace) -> bool {
    let mut ok = true;
    for rule in layering::RULES {
        let chains = match layering::check(ws, rule) {
            Outcome::Holds => {
                match rule.pending {
                    Some(_) => println!(
                        "tidy: ok: {} layering holds now; drop the rule's `pending` note in \
                         xtask/src/tidy/layering.rs",
                        rule.krate
                    ),
                    None => println!("tidy: ok: {} layering ({})", rule.krate, rule.why),
                }
                continue;
            }
            Outcome::NoSuchCrate => {
                if let Some(pending) = rule.pending {
                    println!(
                        "tidy: pending: no crate {} yet; the rule {pending}",
                        rule.krate
                    );
                    continue;
                }
                println!(
                    "tidy: FAIL: a layering rule names {}, which is not a workspace crate; \
                     update RULES in xtask/src/tidy/layering.rs",
                    rule.krate
                );
                ok = false;
                continue;
            }
            Outcome::Broken(chains) => chains,
        };
        let label = match rule.pending {
            Some(pending) => format!("pending ({pending})"),
            None => {
                ok = false;
                "FAIL".to_string()
            }
        };
        println!(
            "tidy: {label}: {} must not depend on these ({}):",
            rule.krate, rule.why
        );
        for chain in chains {
            println!("    {}", chain.join(" → "));
        }
    }
    ok
}

fn read_all(files: &[PathBuf]) -> Result<Vec<String>> {
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display())))
        .collect()
}

fn unused_dependencies(ws: &Workspace) -> Result<bool> {
    let mut found = Vec::new();
    for member in &ws.members {
        let sources = read_all(&rust_files(&member.dir, &ws.target_dir, true)?)?;
        for dep in unused::unused(member, &sources) {
            let sections: Vec<&str> = dep.kinds.iter().map(|k| k.section()).collect();
            found.push(format!(
                "{}: {} in {}",
                member.name,
                dep.package,
                sections.join(", ")
            ));
        }
    }
    if found.is_empty() {
        println!("tidy: ok: every dependency is used");
        return Ok(true);
    }
    println!("tidy: FAIL: dependencies no source file uses:");
    for line in found {
        println!("    {line}");
    }
    println!(
        "  remove them from the crate's Cargo.toml, or, when one is needed all the same, list it \
         under [package.metadata.cargo-machete] ignored with a comment why"
    );
    Ok(false)
}

fn relative<'a>(root: &Path, path: &'a Path) -> std::borrow::Cow<'a, str> {
    path.strip_prefix(root).unwrap_or(path).to_string_lossy()
}

fn file_sizes(ws: &Workspace) -> Result<bool> {
    let mut over = Vec::new();
    for file in rust_files(&ws.root, &ws.target_dir, false)? {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let lines = size::code_lines(&text);
        if lines > size::LIMIT {
            over.push(format!(
                "{} ({lines} lines of code)",
                relative(&ws.root, &file)
            ));
        }
    }
    if over.is_empty() {
        println!(
            "tidy: ok: no source file over {} lines of code",
            size::LIMIT
        );
        return Ok(true);
    }
    println!(
        "tidy: FAIL: source files over {} lines of code before their inline tests:",
        size::LIMIT
    );
    for line in over {
        println!("    {line}");
    }
    println!("  split them into submodules along their sections");
    Ok(false)
}

/// Every `.rs` file under `dir`, skipping `skip` (the target directory), `target` and hidden
/// directories, and with `one_package` nested packages (a directory with its own Cargo.toml is
/// another crate).
pub fn rust_files(dir: &Path, skip: &Path, one_package: bool) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        let entries =
            std::fs::read_dir(&at).with_context(|| format!("reading {}", at.display()))?;
        for entry in entries {
            let path = entry
                .with_context(|| format!("reading {}", at.display()))?
                .path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                let nested_package = one_package && path.join("Cargo.toml").exists();
                // node_modules: the extension's installed packages, never ours.
                if name.starts_with('.')
                    || name == "target"
                    || name == "node_modules"
                    || path == skip
                    || nested_package
                {
                    continue;
                }
                stack.push(path);
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}
