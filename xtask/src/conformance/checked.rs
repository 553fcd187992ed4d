//! Every frame a fixture sends and receives is checked against the checked-in JSON Schemas
//! (`docs/schema/`, written by `cargo xtask schema`).
//!
//! A frame sent on purpose outside the protocol (malformed JSON, a missing `op`, a field of the
//! wrong type) is marked `"off_schema": true` on its step; the mark is checked too, so it
//! cannot outlive the reason for it. The daemon gets no such mark: what it sends must fit.

use serde_json::Value;

use super::client::{Incoming, shorten};
use crate::schema::{CLIENT_SCHEMA, DAEMON_SCHEMA, Validators};

/// Checks a text frame about to be sent; `off_schema` says the step expects it not to fit.
pub fn sent(schemas: &Validators, text: &str, off_schema: bool) -> Result<(), String> {
    let verdict = match serde_json::from_str::<Value>(text) {
        Ok(frame) => schemas.client(&frame),
        Err(e) => Err(format!("not JSON: {e}")),
    };
    match (verdict, off_schema) {
        (Ok(()), false) | (Err(_), true) => Ok(()),
        (Ok(()), true) => Err(format!(
            "the frame {} is marked \"off_schema\" but fits {CLIENT_SCHEMA}: drop the mark",
            shorten(text, 300)
        )),
        (Err(why), false) => Err(format!(
            "the frame {} breaks {CLIENT_SCHEMA}: {}\n    (mark the step \"off_schema\": true if that is the point)",
            shorten(text, 300),
            shorten(&why, 600)
        )),
    }
}

/// Checks what a client received: every text frame must fit the daemon's schema.
pub fn received(schemas: &Validators, client: &str, item: &Incoming) -> Result<(), String> {
    let Incoming::Text(text) = item else {
        return Ok(());
    };
    let verdict = match serde_json::from_str::<Value>(text) {
        Ok(frame) => schemas.daemon(&frame),
        Err(e) => Err(format!("not JSON: {e}")),
    };
    verdict.map_err(|why| {
        format!(
            "{client}: received frame {} breaks {DAEMON_SCHEMA}: {}",
            item.describe(),
            shorten(&why, 600)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schemas() -> Validators {
        let root = crate::daemon::workspace_root().unwrap_or_default();
        match Validators::load(&root) {
            Ok(v) => v,
            Err(e) => panic!("{e:#}"),
        }
    }

    #[test]
    fn a_sent_frame_must_fit_unless_marked_and_a_mark_must_be_needed() {
        let s = schemas();
        assert!(sent(&s, r#"{"op":"ping","id":1}"#, false).is_ok());
        assert!(sent(&s, r#"{"op":"watch","session":1}"#, true).is_ok());
        assert!(sent(&s, "not json", true).is_ok());
        let err = sent(&s, r#"{"op":"watch","session":1,"id":6}"#, false).unwrap_err();
        assert!(
            err.contains("breaks docs/schema/client-frame.json: /session:"),
            "{err}"
        );
        let err = sent(&s, r#"{"op":"ping"}"#, true).unwrap_err();
        assert!(err.contains("drop the mark"), "{err}");
    }

    #[test]
    fn a_received_frame_that_breaks_the_schema_is_named_with_the_error() {
        let s = schemas();
        let ok = Incoming::Text(r#"{"type":"pong","id":1}"#.into());
        assert!(received(&s, "a", &ok).is_ok());
        assert!(received(&s, "a", &Incoming::Binary(3)).is_ok());
        let bad = Incoming::Text(r#"{"type":"watching","session":"s1","watching":"yes"}"#.into());
        let err = received(&s, "a", &bad).unwrap_err();
        assert!(
            err.starts_with("a: received frame {\"type\":\"watching\""),
            "{err}"
        );
        assert!(
            err.contains("daemon-frame.json: /watching: \"yes\" is not of type"),
            "{err}"
        );
    }
}
