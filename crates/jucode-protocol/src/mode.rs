//! Approval modes and every name clients and engines use for them.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How much a session may do without asking a person.
///
/// Several vocabularies are in use (serve v1 and v2, the desktop UI, requirement modes, Claude
/// Code's permission modes); [`ApprovalMode::parse`] accepts them all and the canonical serve v2
/// name is what goes back on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApprovalMode {
    /// Every tool call that changes something asks first.
    Manual,
    /// File edits run without asking; commands ask.
    AutoEdit,
    /// A safety check decides between running and asking.
    Auto,
    /// Nothing asks.
    FullAccess,
    /// Read-only planning (engines that have it: Claude Code, Codex).
    Plan,
}

impl ApprovalMode {
    /// Every mode, in canonical order.
    pub const ALL: [ApprovalMode; 5] = [
        ApprovalMode::Manual,
        ApprovalMode::AutoEdit,
        ApprovalMode::Auto,
        ApprovalMode::FullAccess,
        ApprovalMode::Plan,
    ];

    /// Reads a mode under any of its names; `None` for an unknown name.
    pub fn parse(name: &str) -> Option<ApprovalMode> {
        Some(match name.trim() {
            "manual" | "read-only" | "readonly" | "ask" | "default" => ApprovalMode::Manual,
            "auto-edit" | "acceptEdits" | "edits" => ApprovalMode::AutoEdit,
            "auto" => ApprovalMode::Auto,
            "full-access" | "full-auto" | "all" | "bypassPermissions" => ApprovalMode::FullAccess,
            "plan" => ApprovalMode::Plan,
            _ => return None,
        })
    }

    /// The canonical serve v2 name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::Manual => "manual",
            ApprovalMode::AutoEdit => "auto-edit",
            ApprovalMode::Auto => "auto",
            ApprovalMode::FullAccess => "full-access",
            ApprovalMode::Plan => "plan",
        }
    }
}

impl std::fmt::Display for ApprovalMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ApprovalMode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ApprovalMode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        ApprovalMode::parse(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown approval mode `{name}` (expected manual, auto-edit, auto, full-access or plan)"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_alias_maps_to_its_canonical_mode() {
        let cases = [
            ("manual", ApprovalMode::Manual),
            ("read-only", ApprovalMode::Manual),
            ("ask", ApprovalMode::Manual),
            ("default", ApprovalMode::Manual),
            ("auto-edit", ApprovalMode::AutoEdit),
            ("acceptEdits", ApprovalMode::AutoEdit),
            ("edits", ApprovalMode::AutoEdit),
            ("auto", ApprovalMode::Auto),
            ("full-access", ApprovalMode::FullAccess),
            ("full-auto", ApprovalMode::FullAccess),
            ("all", ApprovalMode::FullAccess),
            ("bypassPermissions", ApprovalMode::FullAccess),
            ("plan", ApprovalMode::Plan),
        ];
        for (name, mode) in cases {
            assert_eq!(ApprovalMode::parse(name), Some(mode), "{name}");
        }
        assert_eq!(ApprovalMode::parse("yolo"), None);
    }

    #[test]
    fn canonical_names_round_trip() {
        for mode in ApprovalMode::ALL {
            let json = serde_json::to_string(&mode).unwrap_or_default();
            let back: ApprovalMode = serde_json::from_str(&json).unwrap_or(ApprovalMode::Manual);
            assert_eq!(back, mode);
            assert_eq!(ApprovalMode::parse(mode.as_str()), Some(mode));
        }
        let err = serde_json::from_str::<ApprovalMode>("\"yolo\"");
        assert!(err.is_err_and(|e| e.to_string().contains("unknown approval mode `yolo`")));
    }
}
