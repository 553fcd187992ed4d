//! Deferred actions: a call that needed a person while nobody watched (notes §9).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The record of notes §9.2; `action_deferred` is this plus `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeferredAction {
    pub id: String,
    pub session_id: String,
    pub cwd: String,
    pub call_id: String,
    pub name: String,
    /// The tool arguments as JSON text, exactly as the digest saw them.
    pub arguments: String,
    pub summary: String,
    pub subagent_id: Option<String>,
    pub digest: String,
    pub created_at: u64,
}

impl DeferredAction {
    pub fn to_event(&self) -> Value {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            map.insert("type".into(), Value::String("action_deferred".into()));
        }
        value
    }
}

/// `hex(SHA-256(name 0 arguments 0 cwd 0)[..12])`, notes §9.3.
pub fn digest(name: &str, arguments: &str, cwd: &str) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [name, arguments, cwd] {
        ctx.update(part.as_bytes());
        ctx.update(&[0]);
    }
    hex(&ctx.finish().as_ref()[..12])
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `act-<unix ms>-<8 hex>`.
pub fn new_id(now_ms: u64) -> String {
    format!("act-{now_ms}-{}", hex(&random_bytes::<4>()))
}

pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; N];
    // The system RNG failing leaves zeros: ids then only rely on the timestamp, which is
    // still unique enough for one session's actions.
    let _ = ring::rand::SystemRandom::new().fill(&mut bytes);
    bytes
}

/// The text the model gets instead of the call's result.
pub fn submitted_text(id: &str) -> String {
    format!(
        "Submitted for confirmation as deferred action {id}: nobody is watching this session, so the user will decide later. Do not retry the call; go on with what does not depend on it."
    )
}

/// The user message that tells the session how an action was decided (notes §9.5).
pub fn decision_message(action: &DeferredAction, outcome: Option<(&str, bool)>) -> String {
    let DeferredAction {
        id, name, summary, ..
    } = action;
    match outcome {
        None => format!(
            "[deferred action {id} declined]\nThe user declined `{name}` ({summary}). Do not retry it; ask the user if it is still needed."
        ),
        Some((output, false)) => format!(
            "[deferred action {id} approved and executed]\n`{name}` ({summary})\nresult:\n{output}"
        ),
        Some((output, true)) => format!(
            "[deferred action {id} approved and executed, failed]\n`{name}` ({summary})\nresult:\n{output}"
        ),
    }
}

/// What the session is told at its next start of an action allowed before a kill whose
/// outcome was never recorded: it may have run or not, so it is not run again.
pub fn interrupted_message(action: &DeferredAction) -> String {
    let DeferredAction {
        id, name, summary, ..
    } = action;
    format!(
        "[deferred action {id} approved, outcome unknown]\n`{name}` ({summary})\nThe daemon stopped after the approval, before the outcome was recorded: it may or may not have run. Check before running it again."
    )
}

/// Whether a user message is the one telling the session how action `id` was decided.
pub fn tells(content: &str, id: &str) -> bool {
    content
        .strip_prefix("[deferred action ")
        .and_then(|rest| rest.strip_prefix(id))
        .is_some_and(|rest| rest.starts_with(' '))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_24_lowercase_hex_over_nul_separated_fields() {
        let d = digest("bash", r#"{"command":"make deploy"}"#, "/home/u/app");
        assert_eq!(d.len(), 24);
        assert!(
            d.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        );
        // Computed independently: printf 'bash\0{"command":"make deploy"}\0/home/u/app\0' | sha256sum
        assert_eq!(d, "bc6779207c75b62326599eda");
        // The separators matter: moving a byte between fields changes the digest.
        assert_ne!(digest("bas", "h", "x"), digest("ba", "sh", "x"));
    }

    #[test]
    fn ids_and_events_have_the_documented_shape() {
        let id = new_id(1727500000000);
        assert!(id.starts_with("act-1727500000000-"));
        assert_eq!(id.len(), "act-1727500000000-".len() + 8);
        let action = DeferredAction {
            id: id.clone(),
            session_id: "s".into(),
            cwd: "/w".into(),
            call_id: "c".into(),
            name: "bash".into(),
            arguments: "{}".into(),
            summary: "ls".into(),
            subagent_id: None,
            digest: "d".into(),
            created_at: 1,
        };
        let event = action.to_event();
        assert_eq!(event["type"], "action_deferred");
        assert_eq!(event["subagent_id"], Value::Null);
        assert!(decision_message(&action, None).starts_with(&format!(
            "[deferred action {id} declined]\nThe user declined `bash` (ls). Do not retry it;"
        )));
        assert_eq!(
            decision_message(&action, Some(("out\n", false))),
            format!("[deferred action {id} approved and executed]\n`bash` (ls)\nresult:\nout\n")
        );
    }
}
