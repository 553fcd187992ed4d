//! What an agent's settings must be, as the spec's Agents table says; each check returns
//! the error a client is shown. Nothing here touches the disk except [`directories`]'s
//! absoluteness check, which only looks at the text.

use std::path::Path;

use jucode_protocol::daemon::limits::{SLUG_UNITS, SVG_BYTES};
use jucode_protocol::daemon::sessions::ENGINES;
use serde_json::Value;

use super::{AgentError, CommandRule, DISPATCH, Directory, is_agent_id};

pub(super) const APPROVAL_MODES: [&str; 4] = ["manual", "auto-edit", "auto", "full-access"];
pub(super) const SANDBOXES: [&str; 3] = ["read-only", "workspace-write", "full-access"];

/// A new agent's id: the id shape, and never the reserved `dispatch`.
pub(super) fn new_id(id: &str) -> Result<(), AgentError> {
    if id == DISPATCH {
        return Err(AgentError::Reserved);
    }
    if !is_agent_id(id) {
        return Err(AgentError::BadId(id.to_string()));
    }
    Ok(())
}

pub(super) fn name(name: &str) -> Result<(), AgentError> {
    if name.trim().is_empty() {
        return Err(AgentError::EmptyName);
    }
    Ok(())
}

/// `{kind: builtin, id}`, `{kind: slug, value}` (32 UTF-16 units at most) or
/// `{kind: svg, markup}` (8192 bytes at most). Only shape and size: clients sanitize SVG.
pub(super) fn icon(icon: &Value) -> Result<(), AgentError> {
    let bad = |why: &str| Err(AgentError::Icon(why.to_string()));
    let Some(fields) = icon.as_object() else {
        return bad("must be an object with a kind");
    };
    let text = |key: &str| fields.get(key).and_then(Value::as_str);
    match fields.get("kind").and_then(Value::as_str) {
        Some("builtin") => match text("id") {
            Some(_) => Ok(()),
            None => bad("a builtin icon needs an id string"),
        },
        Some("slug") => match text("value") {
            Some(v) if v.encode_utf16().count() <= SLUG_UNITS => Ok(()),
            Some(_) => bad("a slug is at most 32 UTF-16 units"),
            None => bad("a slug icon needs a value string"),
        },
        Some("svg") => match text("markup") {
            Some(m) if m.len() <= SVG_BYTES => Ok(()),
            Some(_) => bad("svg markup is at most 8192 bytes"),
            None => bad("an svg icon needs a markup string"),
        },
        _ => bad("kind must be builtin, slug or svg"),
    }
}

/// `#rrggbb`.
pub(super) fn color(color: &str) -> Result<(), AgentError> {
    let ok = color.len() == 7
        && color.starts_with('#')
        && color[1..].bytes().all(|b| b.is_ascii_hexdigit());
    if ok {
        Ok(())
    } else {
        Err(AgentError::Color(color.to_string()))
    }
}

/// Hex digits, 1 to 64 of them.
pub(super) fn avatar_seed(seed: &str) -> Result<(), AgentError> {
    if (1..=64).contains(&seed.len()) && seed.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(AgentError::AvatarSeed(seed.to_string()))
    }
}

pub(super) fn approval_mode(mode: &str) -> Result<(), AgentError> {
    if APPROVAL_MODES.contains(&mode) {
        Ok(())
    } else {
        Err(AgentError::ApprovalMode(mode.to_string()))
    }
}

pub(super) fn sandbox(sandbox: &str) -> Result<(), AgentError> {
    if SANDBOXES.contains(&sandbox) {
        Ok(())
    } else {
        Err(AgentError::Sandbox(sandbox.to_string()))
    }
}

/// Absolute paths, each `ro` or `rw`.
pub(super) fn directories(dirs: &[Directory]) -> Result<(), AgentError> {
    for d in dirs {
        if d.path.contains('\0') || !Path::new(&d.path).is_absolute() {
            return Err(AgentError::DirectoryPath(d.path.clone()));
        }
        if d.mode != "ro" && d.mode != "rw" {
            return Err(AgentError::DirectoryMode {
                path: d.path.clone(),
                mode: d.mode.clone(),
            });
        }
    }
    Ok(())
}

/// Non-empty prefixes, each `allow`, `ask` or `forbid`.
pub(super) fn command_rules(rules: &[CommandRule]) -> Result<(), AgentError> {
    for r in rules {
        if r.prefix.trim().is_empty() {
            return Err(AgentError::RulePrefix);
        }
        if !["allow", "ask", "forbid"].contains(&r.action.as_str()) {
            return Err(AgentError::RuleAction {
                prefix: r.prefix.clone(),
                action: r.action.clone(),
            });
        }
    }
    Ok(())
}

/// An engine name the protocol knows, other than `acp` (whether this build has it is checked
/// when a session starts, as for any session). An ACP engine runs the program its options
/// name, which only a local client may choose for a session; an agent's sessions are started
/// by anyone who may message it, so an agent never runs on it.
pub(super) fn engine(engine: &str) -> Result<(), AgentError> {
    if engine == "acp" {
        return Err(AgentError::AcpEngine);
    }
    if ENGINES.iter().any(|(name, _)| *name == engine) {
        Ok(())
    } else {
        Err(AgentError::Engine(engine.to_string()))
    }
}

/// The `<name>` of a memory file from `deploy.md` or `memory/deploy.md`: letters, digits,
/// `-` and `_` only, so the name can never leave `memory/`.
pub(super) fn memory_name(file: &str) -> Result<String, AgentError> {
    let bare = file.strip_prefix("memory/").unwrap_or(file);
    let stem = bare.strip_suffix(".md").unwrap_or_default();
    let plain = !stem.is_empty()
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain {
        Ok(stem.to_string())
    } else {
        Err(AgentError::MemoryName(file.to_string()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn icons_are_checked_for_shape_and_size_only() {
        assert!(icon(&json!({"kind": "builtin", "id": "rocket"})).is_ok());
        assert!(icon(&json!({"kind": "slug", "value": "a".repeat(32)})).is_ok());
        // An emoji outside the BMP is two UTF-16 units: 16 of them fill a slug.
        assert!(icon(&json!({"kind": "slug", "value": "🚀".repeat(16)})).is_ok());
        assert!(icon(&json!({"kind": "slug", "value": "🚀".repeat(17)})).is_err());
        assert!(icon(&json!({"kind": "svg", "markup": "x".repeat(8192)})).is_ok());
        let err = icon(&json!({"kind": "svg", "markup": "x".repeat(8193)})).unwrap_err();
        assert_eq!(err.to_string(), "icon: svg markup is at most 8192 bytes");
        let err = icon(&json!({"kind": "emoji"})).unwrap_err();
        assert_eq!(err.to_string(), "icon: kind must be builtin, slug or svg");
        assert!(icon(&json!("rocket")).is_err());
        assert!(icon(&json!({"kind": "builtin"})).is_err());
    }

    #[test]
    fn colors_seeds_modes_and_sandboxes() {
        assert!(color("#a0B1c2").is_ok());
        for bad in ["a0b1c2", "#a0b1c", "#a0b1c2f", "#g0b1c2", ""] {
            assert!(color(bad).is_err(), "{bad}");
        }
        assert!(avatar_seed("00ff").is_ok());
        for bad in ["", "xyz", &"a".repeat(65)] {
            assert!(avatar_seed(bad).is_err(), "{bad}");
        }
        for mode in APPROVAL_MODES {
            assert!(approval_mode(mode).is_ok());
        }
        assert!(approval_mode("plan").is_err());
        assert!(sandbox("workspace-write").is_ok());
        assert!(sandbox("none").is_err());
        assert!(engine("claude").is_ok());
        assert!(engine("vim").is_err());
        assert_eq!(
            engine("acp").unwrap_err().to_string(),
            "an agent cannot run on the acp engine (it runs a program the client names)"
        );
    }

    #[test]
    fn directories_and_rules() {
        let dir = |path: &str, mode: &str| Directory {
            path: path.into(),
            mode: mode.into(),
        };
        assert!(directories(&[dir("/a", "ro"), dir("/b", "rw")]).is_ok());
        assert!(directories(&[dir("a", "ro")]).is_err());
        let err = directories(&[dir("/a", "rx")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "directories: the mode of /a must be ro or rw, not \"rx\""
        );
        let rule = |prefix: &str, action: &str| CommandRule {
            prefix: prefix.into(),
            action: action.into(),
        };
        assert!(command_rules(&[rule("git push", "forbid")]).is_ok());
        assert!(command_rules(&[rule(" ", "allow")]).is_err());
        assert!(command_rules(&[rule("rm", "maybe")]).is_err());
    }

    #[test]
    fn ids_and_memory_names() {
        assert!(new_id("ops").is_ok());
        assert_eq!(
            new_id("dispatch").unwrap_err().to_string(),
            "the agent id dispatch is reserved"
        );
        assert!(new_id("Ops").is_err());
        assert!(name("  ").is_err());
        assert_eq!(memory_name("deploy.md").unwrap(), "deploy");
        assert_eq!(memory_name("memory/deploy_2-b.md").unwrap(), "deploy_2-b");
        for bad in [
            "../x.md",
            "memory/../role.md",
            "memory/a/b.md",
            "deploy",
            ".md",
            "memory/.md",
            "a b.md",
            "role.txt",
        ] {
            assert!(memory_name(bad).is_err(), "{bad}");
        }
    }
}
