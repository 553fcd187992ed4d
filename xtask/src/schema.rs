//! `cargo xtask schema [--check]`: the JSON Schemas of every frame (`docs/schema/*.json`) and
//! the op index of `docs/PROTOCOL.md`, generated from `jucode-protocol`'s types and op table.
//!
//! [`check`] is what CI calls: it fails, naming the files and the command that fixes them,
//! when anything checked in differs from what the protocol crate generates. [`Validators`]
//! loads the checked-in schemas for the conformance harness.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use jucode_protocol::daemon::ops::{Gate, OPS, OpSpec, SessionUse};
use serde_json::Value;

/// Where the schemas live, relative to the workspace root.
pub const SCHEMA_DIR: &str = "docs/schema";
pub const CLIENT_SCHEMA: &str = "docs/schema/client-frame.json";
pub const DAEMON_SCHEMA: &str = "docs/schema/daemon-frame.json";
const PROTOCOL_DOC: &str = "docs/PROTOCOL.md";
const INDEX_BEGIN: &str = "<!-- ops:begin -->";
const INDEX_END: &str = "<!-- ops:end -->";
const FIX: &str = "cargo xtask schema";

/// Runs the command: writes the files, or with `--check` only compares them.
pub fn run(args: &[String]) -> Result<bool> {
    let check_only = match args {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => bail!("schema takes only --check, got {}", args.join(" ")),
    };
    let root = crate::daemon::workspace_root()?;
    if check_only {
        check(&root)?;
        println!("schema: docs/schema and the op index of {PROTOCOL_DOC} are up to date");
    } else {
        for path in write(&root)? {
            println!("schema: wrote {}", path.display());
        }
    }
    Ok(true)
}

/// Fails when a generated file under `root` differs from what the protocol crate generates.
pub fn check(root: &Path) -> Result<()> {
    let mut drifted = Vec::new();
    for (path, want) in generated(root)? {
        let have = std::fs::read_to_string(root.join(&path)).unwrap_or_default();
        if have != want {
            drifted.push(path.display().to_string());
        }
    }
    if !drifted.is_empty() {
        bail!(
            "{} differ from what jucode-protocol generates; run `{FIX}` and commit the result",
            drifted.join(", ")
        );
    }
    Ok(())
}

/// Writes every generated file that differs; returns the ones written.
pub fn write(root: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(root.join(SCHEMA_DIR))
        .with_context(|| format!("creating {SCHEMA_DIR}"))?;
    let mut written = Vec::new();
    for (path, want) in generated(root)? {
        let full = root.join(&path);
        if std::fs::read_to_string(&full).ok().as_deref() != Some(want.as_str()) {
            std::fs::write(&full, want).with_context(|| format!("writing {}", full.display()))?;
            written.push(path);
        }
    }
    Ok(written)
}

/// Every generated file, relative to `root`, with the text it should have.
fn generated(root: &Path) -> Result<Vec<(PathBuf, String)>> {
    let doc_path = root.join(PROTOCOL_DOC);
    let doc = std::fs::read_to_string(&doc_path)
        .with_context(|| format!("reading {}", doc_path.display()))?;
    Ok(vec![
        (
            CLIENT_SCHEMA.into(),
            pretty(&jucode_protocol::schema::client_frame())?,
        ),
        (
            DAEMON_SCHEMA.into(),
            pretty(&jucode_protocol::schema::daemon_frame())?,
        ),
        (
            PROTOCOL_DOC.into(),
            with_index(&doc, &op_index(OPS)).with_context(|| format!("in {PROTOCOL_DOC}"))?,
        ),
    ])
}

fn pretty(schema: &Value) -> Result<String> {
    Ok(serde_json::to_string_pretty(schema)? + "\n")
}

/// The op index: one row per op, sorted by name (byte order).
pub fn op_index(ops: &[OpSpec]) -> String {
    let mut rows: Vec<&OpSpec> = ops.iter().collect();
    rows.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    let mut out = String::from("| op | area | gate | session | available |\n");
    out.push_str("| --- | --- | --- | --- | --- |\n");
    for op in rows {
        let gate = match op.gate {
            Gate::Any => "any",
            Gate::LocalOnly(_) => "local",
            Gate::DeviceOnly(_) => "device",
        };
        let session = match op.session {
            SessionUse::No => "no",
            SessionUse::Required => "required",
            SessionUse::Optional => "optional",
        };
        // The area's name is its variant's, in lower case (`Basics` is `basics`).
        let area = format!("{:?}", op.area).to_lowercase();
        let available = if op.implemented { "yes" } else { "no" };
        out.push_str(&format!(
            "| `{}` | {area} | {gate} | {session} | {available} |\n",
            op.name
        ));
    }
    out
}

/// `doc` with the text between the index markers replaced by `index`.
fn with_index(doc: &str, index: &str) -> Result<String> {
    let start = doc
        .find(INDEX_BEGIN)
        .with_context(|| format!("no {INDEX_BEGIN} marker"))?
        + INDEX_BEGIN.len();
    let end = doc[start..]
        .find(INDEX_END)
        .with_context(|| format!("no {INDEX_END} marker after {INDEX_BEGIN}"))?
        + start;
    Ok(format!("{}\n{index}{}", &doc[..start], &doc[end..]))
}

/// The checked-in schemas, compiled, for checking frames.
pub struct Validators {
    client: jsonschema::Validator,
    daemon: jsonschema::Validator,
}

impl Validators {
    pub fn load(root: &Path) -> Result<Validators> {
        let compile = |rel: &str| -> Result<jsonschema::Validator> {
            let path = root.join(rel);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {} (`{FIX}` writes it)", path.display()))?;
            let schema: Value =
                serde_json::from_str(&text).with_context(|| format!("{rel} is not JSON"))?;
            jsonschema::validator_for(&schema).map_err(|e| anyhow::anyhow!("{rel}: {e}"))
        };
        Ok(Validators {
            client: compile(CLIENT_SCHEMA)?,
            daemon: compile(DAEMON_SCHEMA)?,
        })
    }

    /// Checks a frame a client sends; `Err` lists what is wrong.
    pub fn client(&self, frame: &Value) -> Result<(), String> {
        errors(&self.client, frame)
    }

    /// Checks a frame the daemon sends.
    pub fn daemon(&self, frame: &Value) -> Result<(), String> {
        errors(&self.daemon, frame)
    }
}

fn errors(validator: &jsonschema::Validator, frame: &Value) -> Result<(), String> {
    let found: Vec<String> = validator
        .iter_errors(frame)
        .map(|e| {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "(frame)".into() } else { at };
            format!("{at}: {e}")
        })
        .collect();
    if found.is_empty() {
        Ok(())
    } else {
        Err(found.join("; "))
    }
}

#[cfg(test)]
mod tests;
