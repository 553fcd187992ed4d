//! Calls to Cotal's manager over the endpoint rails (SPEC §13.2–13.3): an
//! ephemeral `EndpointRequest` on `ep.one.manager.<command>`, the reply read
//! from our own nonce-keyed reply subject.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::config::LaunchConfig;
use crate::mesh::Mesh;

/// How long a manager call may take.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// Request subject for `command` from this seat with `nonce`.
pub fn request_subject(cfg: &LaunchConfig, command: &str, nonce: &str) -> String {
    format!(
        "cotal.{}.ep.one.manager.{}.{}.{}.{}.{}",
        cfg.space, command, cfg.principal.owner, cfg.principal.actor, cfg.lifecycle_uid, nonce
    )
}

/// Reply subjects for that nonce (any manager instance and epoch).
pub fn reply_filter(cfg: &LaunchConfig, nonce: &str) -> String {
    format!(
        "cotal.{}.ep.reply.manager.*.*.{}.{}.{}.{}",
        cfg.space, cfg.principal.owner, cfg.principal.actor, cfg.lifecycle_uid, nonce
    )
}

/// Send `command` with `args`; returns the reply's `data`, or the manager's
/// error as `code: message`.
pub async fn call(
    mesh: &Mesh,
    cfg: &LaunchConfig,
    command: &str,
    args: Value,
) -> Result<Value, String> {
    // Nonce grammar [A-Za-z0-9_-]{22,64}: 32 random bytes, URL-safe base64.
    let nonce = crate::util::random_token(24);
    let id = crate::util::random_token(16);
    let mut sub = mesh
        .client
        .subscribe(reply_filter(cfg, &nonce))
        .await
        .map_err(|e| format!("cannot subscribe the reply rail: {e}"))?;
    let req = json!({
        "v": 1,
        "id": id,
        "op": {"endpoint": "manager", "command": command},
        "class": "ephemeral",
        "replyExpected": true,
        "args": args,
        "from": {"id": cfg.principal.dot(), "name": cfg.name, "role": cfg.role},
        "deadlineMs": DEADLINE.as_millis() as u64,
    });
    mesh.client
        .publish(
            request_subject(cfg, command, &nonce),
            req.to_string().into(),
        )
        .await
        .map_err(|e| format!("cannot send to the manager: {e}"))?;
    mesh.client
        .flush()
        .await
        .map_err(|e| format!("flush failed: {e}"))?;
    let reply = tokio::time::timeout(DEADLINE, async {
        while let Some(m) = sub.next().await {
            if let Ok(v) = serde_json::from_slice::<Value>(&m.payload)
                && v["id"] == json!(id)
            {
                return Some(v);
            }
        }
        None
    })
    .await
    .map_err(|_| {
        "deadline-exceeded: the manager did not answer (is a manager serving this space?)"
            .to_string()
    })?
    .ok_or_else(|| "unavailable: the reply subscription closed".to_string())?;
    if reply["ok"].as_bool() == Some(true) {
        Ok(reply.get("data").cloned().unwrap_or(Value::Null))
    } else {
        Err(format!(
            "{}: {}",
            reply["error"]["code"].as_str().unwrap_or("internal"),
            reply["error"]["message"].as_str().unwrap_or("no message")
        ))
    }
}
