//! The `CotalMessage` envelope (SPEC §5, `spec/cotal.schema.json`) and the
//! receive-side checks: exactly one routing field, sender equals subject sender.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::subject::{self, Delivery, Parsed, Principal};

/// `from`: the sender's reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointRef {
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

/// One message on the mesh.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CotalMessage {
    pub id: String,
    /// Epoch milliseconds.
    pub ts: f64,
    pub space: String,
    pub from: EndpointRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_service: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mentions: Option<Vec<String>>,
    pub parts: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
}

/// Why a delivery is terminated instead of surfaced; these are never redelivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reject {
    MalformedSubject,
    MalformedJson(String),
    SenderMismatch,
}

impl std::fmt::Display for Reject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reject::MalformedSubject => f.write_str("malformed-subject"),
            Reject::MalformedJson(e) => write!(f, "malformed-json: {e}"),
            Reject::SenderMismatch => f.write_str("sender-mismatch"),
        }
    }
}

/// A delivery that passed every check.
#[derive(Debug, Clone)]
pub struct Checked {
    pub subject: Parsed,
    pub message: CotalMessage,
}

/// Check one raw delivery: subject shape, JSON shape, single routing field
/// agreeing with the subject kind, and `from.id` equal to the subject sender.
pub fn check(subject_str: &str, payload: &[u8]) -> Result<Checked, Reject> {
    let subject = subject::parse(subject_str).ok_or(Reject::MalformedSubject)?;
    if !subject::is_owner_token(&subject.sender.owner) {
        return Err(Reject::MalformedSubject);
    }
    let message: CotalMessage =
        serde_json::from_slice(payload).map_err(|e| Reject::MalformedJson(e.to_string()))?;
    let routing = [
        message.channel.is_some(),
        message.to.is_some(),
        message.to_service.is_some(),
    ];
    if routing.iter().filter(|x| **x).count() != 1 {
        return Err(Reject::MalformedJson(
            "exactly one of channel, to, toService must be set".into(),
        ));
    }
    let kind_agrees = match &subject.delivery {
        Delivery::Channel { .. } => message.channel.is_some(),
        Delivery::Direct { .. } => message.to.is_some(),
        Delivery::Anycast { .. } => message.to_service.is_some(),
    };
    if !kind_agrees {
        return Err(Reject::MalformedJson(
            "routing field does not match the subject kind".into(),
        ));
    }
    if message.id.is_empty() || message.id.len() > 256 {
        return Err(Reject::MalformedJson("bad message id".into()));
    }
    if message.from.id != subject.sender.dot() {
        return Err(Reject::SenderMismatch);
    }
    Ok(Checked { subject, message })
}

/// Concatenated text of the message's `text` parts; other parts are named, not inlined.
pub fn text_of(message: &CotalMessage) -> String {
    let mut out = Vec::new();
    for part in &message.parts {
        match part.get("kind").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = part.get("text").and_then(Value::as_str) {
                    out.push(t.to_string());
                }
            }
            Some("artifact") => {
                let name = part.get("name").and_then(Value::as_str).unwrap_or("?");
                out.push(format!("[artifact {name}]"));
            }
            Some(kind) => out.push(format!("[{kind} part]")),
            None => {}
        }
    }
    out.join("\n")
}

/// A fresh message id: 22 characters of URL-safe randomness (128 bits).
pub fn new_id() -> String {
    crate::util::random_token(16)
}

/// Build an outgoing text message.
pub fn text_message(
    space: &str,
    me: &Principal,
    name: &str,
    role: Option<&str>,
    text: &str,
) -> CotalMessage {
    CotalMessage {
        id: new_id(),
        ts: crate::util::now_ms() as f64,
        space: space.to_string(),
        from: EndpointRef {
            id: me.dot(),
            name: name.to_string(),
            role: role.map(str::to_string),
        },
        channel: None,
        to: None,
        to_service: None,
        mentions: None,
        parts: vec![serde_json::json!({"kind": "text", "text": text})],
        reply_to: None,
        context_id: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(from: &str, routing: &str) -> Vec<u8> {
        let mut v = serde_json::json!({
            "id": "m1", "ts": 1.0, "space": "dev",
            "from": {"id": from, "name": "bob"},
            "parts": [{"kind": "text", "text": "hi"}]
        });
        match routing {
            "to" => v["to"] = "local.alice".into(),
            "channel" => v["channel"] = "general".into(),
            "both" => {
                v["to"] = "local.alice".into();
                v["channel"] = "general".into();
            }
            _ => {}
        }
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn accepts_a_well_formed_dm() {
        let c = check(
            "cotal.dev.inst.local.alice.local.bob",
            &msg("local.bob", "to"),
        )
        .unwrap();
        assert_eq!(text_of(&c.message), "hi");
    }

    #[test]
    fn rejects_each_bad_shape() {
        let s = "cotal.dev.inst.local.alice.local.bob";
        assert_eq!(
            check(s, &msg("local.eve", "to")).unwrap_err(),
            Reject::SenderMismatch
        );
        assert!(matches!(
            check(s, &msg("local.bob", "both")),
            Err(Reject::MalformedJson(_))
        ));
        assert!(matches!(
            check(s, &msg("local.bob", "none")),
            Err(Reject::MalformedJson(_))
        ));
        assert!(matches!(
            check(s, &msg("local.bob", "channel")),
            Err(Reject::MalformedJson(_))
        ));
        assert!(matches!(
            check(s, b"{not json"),
            Err(Reject::MalformedJson(_))
        ));
        assert_eq!(
            check("cotal.dev.inst.local.alice", &msg("local.bob", "to")).unwrap_err(),
            Reject::MalformedSubject
        );
        assert_eq!(
            check(
                "cotal.dev.inst.local.alice.UABC.bob",
                &msg("UABC.bob", "to")
            )
            .unwrap_err(),
            Reject::MalformedSubject
        );
    }
}
