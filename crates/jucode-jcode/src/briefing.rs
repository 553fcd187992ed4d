//! The seat's briefing: its persona (the body of `COTAL_AGENT_FILE`) and
//! where it sits on the mesh, put into the session's transcript as one
//! no-reply message before the readiness proof, once per session.
//!
//! The record of which sessions were briefed (`<home>/cotal-briefing.json`)
//! is kept apart from the `--resume` fork record and written only once jcode
//! took the message: a first launch that forks and then fails before the
//! briefing leaves the fork unbriefed, and the next launch, which continues
//! that fork, briefs it. A continued session already briefed is not briefed
//! again; no turn ever carries the briefing.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::api::Client;
use crate::home::{ConnectorLog, PrivateHome, sha256_hex};
use crate::{Error, Result};

/// `<home>/cotal-briefing.json`.
pub const RECORD: &str = "cotal-briefing.json";

/// Which sessions of this home were briefed, and with which text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BriefingRecord {
    #[serde(default)]
    pub sessions: BTreeMap<String, Briefed>,
}

/// One briefed session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Briefed {
    /// SHA-256 of the briefing text jcode took.
    pub sha256: String,
}

impl BriefingRecord {
    pub fn read(home: &PrivateHome) -> Result<BriefingRecord> {
        let p = home.root.join(RECORD);
        match std::fs::read(&p) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| Error::PrivateState(format!("{}: {e}", p.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BriefingRecord::default()),
            Err(e) => Err(Error::io(&p, e)),
        }
    }

    fn write(&self, home: &PrivateHome) -> Result<()> {
        let b = serde_json::to_vec(self).map_err(|e| Error::PrivateState(e.to_string()))?;
        home.write_private(RECORD, &b)
    }
}

/// The persona text of an agent file: its body, without a leading
/// `---`-fenced front-matter block (model, variant and the like, which the
/// manager already turned into launch settings).
pub fn persona_body(file: &str) -> String {
    let text = file.strip_prefix('\u{feff}').unwrap_or(file);
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) == Some("---") {
        let rest: Vec<&str> = lines.collect();
        if let Some(end) = rest.iter().position(|l| l.trim_end() == "---") {
            return rest[end + 1..].join("\n").trim().to_string();
        }
    }
    text.trim().to_string()
}

/// Read the persona file; an unreadable one fails the launch loudly.
pub fn read_persona(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map(|t| persona_body(&t))
        .map_err(|e| Error::Config(format!("COTAL_AGENT_FILE {}: {e}", path.display())))
}

/// The briefing text: the persona first, then the seat's place on the mesh.
pub fn compose(space: &str, name: &str, role: Option<&str>, persona: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(p) = persona.filter(|p| !p.is_empty()) {
        out.push_str(p);
        out.push_str("\n\n");
    }
    out.push_str(&format!(
        "[Cotal] You are the peer \"{name}\"{} in the Cotal space \"{space}\". Other agents reach you through the Cotal connector: their messages arrive as user messages, and you answer and coordinate with the cotal_* tools (cotal_orientation shows your live context). This message is context only; it needs no reply.",
        role.map(|r| format!(" with the role \"{r}\"")).unwrap_or_default()
    ));
    out
}

/// Put the briefing into `sid`'s transcript unless it is there already.
/// Returns whether it was sent now.
pub async fn brief(
    client: &Client,
    home: &PrivateHome,
    sid: &str,
    text: &str,
    log: &ConnectorLog,
) -> Result<bool> {
    let mut rec = BriefingRecord::read(home)?;
    if rec.sessions.contains_key(sid) {
        log.private(&format!("session {sid} was briefed by an earlier launch"));
        return Ok(false);
    }
    client.send_no_reply(sid, text).await?;
    rec.sessions.insert(
        sid.to_string(),
        Briefed {
            sha256: sha256_hex(&[text.as_bytes()]),
        },
    );
    rec.write(home)?;
    log.line(&format!(
        "briefing (persona and mesh context) in the transcript of {sid}"
    ));
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_is_dropped_and_the_body_kept() {
        let f = "---\nmodel: gpt-5\nvariant: high\n---\n\nYou review Rust code.\nBe brief.\n";
        assert_eq!(persona_body(f), "You review Rust code.\nBe brief.");
        assert_eq!(persona_body("Plain persona."), "Plain persona.");
        // An unclosed fence is text, not front matter.
        assert_eq!(persona_body("---\nno end"), "---\nno end");
    }

    #[test]
    fn the_briefing_puts_the_persona_first() {
        let b = compose(
            "dev",
            "alice",
            Some("reviewer"),
            Some("You review Rust code."),
        );
        assert!(b.starts_with("You review Rust code.\n\n[Cotal] You are the peer \"alice\" with the role \"reviewer\" in the Cotal space \"dev\""));
        let b = compose("dev", "alice", None, None);
        assert!(b.starts_with("[Cotal] You are the peer \"alice\" in"));
    }
}
