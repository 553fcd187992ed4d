//! Calls to Cotal's manager over the endpoint rails (SPEC §13.2–13.3, §13.7):
//! an ephemeral `EndpointRequest` on `ep.one.manager.<command>`, the reply
//! read from our own nonce-keyed reply subject.
//!
//! Every command except `describe` must pin the manager's contract: `op`
//! carries the input and output closure digests of that command. They come
//! from a `describe` round trip (the manager's visible clusters), then the
//! cluster documents fetched from the contract store (`EPC_<space>`, one
//! artifact per `cotal.<space>.epc.<hex>` subject) and verified by digest.
//! The result is cached for the launch and dropped when the manager answers
//! `contract-mismatch`, so the next call describes again.
//!
//! Each command's input schema (the root of its input closure) is fetched and
//! verified the same way, and a call's arguments are checked against it before
//! anything is sent (`argcheck`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::config::LaunchConfig;
use crate::mesh::Mesh;

/// How long a manager call may take.
pub const DEADLINE: Duration = Duration::from_secs(20);
/// How long the describe bootstrap may take.
pub const DESCRIBE_DEADLINE: Duration = Duration::from_secs(10);
/// A describe sent before the manager subscribed is lost (core NATS), so it is
/// re-sent at this pace within its own deadline; commands are never re-sent.
const DESCRIBE_RESEND: Duration = Duration::from_millis(250);
/// The contract store's per-artifact bound (SPEC §13.7).
const ARTIFACT_MAX: usize = 256 * 1024;

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

/// The contract store stream of a space.
pub fn store_stream(space: &str) -> String {
    format!("EPC_{space}")
}

/// The subject one artifact is stored on.
pub fn artifact_subject(space: &str, hex: &str) -> String {
    format!("cotal.{space}.epc.{hex}")
}

/// The pinned digests of one command and its verified input schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandContract {
    pub input: String,
    pub output: String,
    pub input_schema: Value,
}

/// What one `describe` resolved: the answering incarnation and the commands
/// this seat may call with their digests.
#[derive(Debug, Clone)]
pub struct Contracts {
    pub instance_id: String,
    pub epoch: u64,
    pub commands: BTreeMap<String, CommandContract>,
}

/// The manager as this seat sees it: calls plus the per-launch contract cache.
#[derive(Default)]
pub struct Manager {
    cache: tokio::sync::Mutex<Option<Arc<Contracts>>>,
}

impl Manager {
    /// Send `command` with `args`; returns the reply's `data`, or the error as
    /// `code: message` (what the tool caller reads).
    pub async fn call(
        &self,
        mesh: &Mesh,
        cfg: &LaunchConfig,
        command: &str,
        args: Value,
    ) -> Result<Value, String> {
        let contracts = self.contracts(mesh, cfg).await?;
        let Some(pin) = contracts.commands.get(command) else {
            let offered: Vec<&str> = contracts.commands.keys().map(String::as_str).collect();
            return Err(format!(
                "not-found: the manager offers no \"{command}\" to this seat (described: {})",
                if offered.is_empty() {
                    "nothing".to_string()
                } else {
                    offered.join(", ")
                }
            ));
        };
        if let Err(e) = crate::argcheck::check(&pin.input_schema, &args) {
            return Err(format!(
                "bad-request: {e} (checked against the manager's \"{command}\" input schema {}); \
                 nothing was sent to the manager",
                pin.input
            ));
        }
        let op = json!({
            "endpoint": "manager",
            "command": command,
            "inputDigest": pin.input,
            "outputDigest": pin.output,
        });
        let bind = json!({"instanceId": contracts.instance_id, "epoch": contracts.epoch});
        let (reply, _) = exchange(
            mesh,
            cfg,
            command,
            op,
            Some(bind),
            Some(args),
            DEADLINE,
            false,
        )
        .await?;
        if reply["ok"].as_bool() == Some(true) {
            return Ok(reply.get("data").cloned().unwrap_or(Value::Null));
        }
        let code = reply["error"]["code"].as_str().unwrap_or("internal");
        let message = reply["error"]["message"].as_str().unwrap_or("no message");
        if code == "contract-mismatch" {
            // The manager's contract moved (or ours is stale): describe again next time.
            *self.cache.lock().await = None;
            return Err(format!(
                "contract-mismatch: the manager refused the contract this seat pinned for \"{command}\" \
                 (input {}, output {}); its contract changed since this seat described it. \
                 Nothing ran; the next call describes the manager again. Manager said: {message}",
                pin.input, pin.output
            ));
        }
        Err(format!("{code}: {message}"))
    }

    /// The cached contracts, or a fresh describe.
    pub async fn contracts(
        &self,
        mesh: &Mesh,
        cfg: &LaunchConfig,
    ) -> Result<Arc<Contracts>, String> {
        let mut cache = self.cache.lock().await;
        if let Some(c) = cache.as_ref() {
            return Ok(c.clone());
        }
        let fresh = Arc::new(describe(mesh, cfg).await?);
        *cache = Some(fresh.clone());
        Ok(fresh)
    }
}

/// One request/reply on the rails. Returns the reply body and the reply subject.
#[allow(clippy::too_many_arguments)]
async fn exchange(
    mesh: &Mesh,
    cfg: &LaunchConfig,
    command: &str,
    op: Value,
    bind: Option<Value>,
    args: Option<Value>,
    deadline: Duration,
    resend: bool,
) -> Result<(Value, String), String> {
    // Nonce grammar [A-Za-z0-9_-]{22,64}: 24 random bytes, URL-safe base64.
    let nonce = crate::util::random_token(24);
    let id = crate::util::random_token(16);
    let mut sub = mesh
        .client
        .subscribe(reply_filter(cfg, &nonce))
        .await
        .map_err(|e| format!("unavailable: cannot subscribe the reply rail: {e}"))?;
    let mut req = json!({
        "v": 1,
        "id": id,
        "op": op,
        "class": "ephemeral",
        "replyExpected": true,
        "from": {"id": cfg.principal.dot(), "name": cfg.name, "role": cfg.role},
        "deadlineMs": deadline.as_millis() as u64,
    });
    if let Some(b) = bind {
        req["bind"] = b;
    }
    if let Some(a) = args {
        req["args"] = a;
    }
    let subject = request_subject(cfg, command, &nonce);
    let body = bytes::Bytes::from(req.to_string());
    let send = || async {
        mesh.client
            .publish(subject.clone(), body.clone())
            .await
            .map_err(|e| format!("unavailable: cannot send to the manager: {e}"))?;
        mesh.client
            .flush()
            .await
            .map_err(|e| format!("unavailable: flush failed: {e}"))
    };
    send().await?;
    let wait = async {
        let mut tick = tokio::time::interval(DESCRIBE_RESEND);
        tick.tick().await;
        loop {
            tokio::select! {
                m = sub.next() => {
                    let m = m?;
                    if let Ok(v) = serde_json::from_slice::<Value>(&m.payload)
                        && v["id"] == json!(id)
                    {
                        return Some((v, m.subject.to_string()));
                    }
                }
                _ = tick.tick(), if resend => {
                    if let Err(e) = send().await {
                        tracing::debug!(error = %e, "describe resend failed");
                    }
                }
            }
        }
    };
    tokio::time::timeout(deadline, wait)
        .await
        .map_err(|_| {
            format!(
                "deadline-exceeded: the manager did not answer {command} within {} s (is a manager serving this space?)",
                deadline.as_secs()
            )
        })?
        .ok_or_else(|| "unavailable: the reply subscription closed".to_string())
}

/// `describe` the manager, then fetch and verify every visible cluster document.
pub async fn describe(mesh: &Mesh, cfg: &LaunchConfig) -> Result<Contracts, String> {
    let op = json!({"endpoint": "manager", "command": "describe"});
    let (reply, subject) = exchange(
        mesh,
        cfg,
        "describe",
        op,
        None,
        None,
        DESCRIBE_DEADLINE,
        true,
    )
    .await?;
    if reply["ok"].as_bool() != Some(true) {
        return Err(format!(
            "{}: describe(manager) failed: {}",
            reply["error"]["code"].as_str().unwrap_or("unavailable"),
            reply["error"]["message"].as_str().unwrap_or("no message")
        ));
    }
    // The answering incarnation comes from the broker-pinned reply subject:
    // cotal.<space>.ep.reply.manager.<instanceId>.<epoch>.<owner>.<actor>.<uid>.<nonce>
    let toks: Vec<&str> = subject.split('.').collect();
    let (instance_id, epoch) = match (toks.get(5), toks.get(6).and_then(|e| e.parse().ok())) {
        (Some(i), Some(e)) if toks.len() == 11 => (i.to_string(), e),
        _ => {
            return Err(format!(
                "bad-request: describe reply on a malformed subject {subject}"
            ));
        }
    };
    let clusters = reply["data"]["descriptor"]["clusters"]
        .as_array()
        .ok_or("contract-invalid: the describe answer has no descriptor.clusters")?;
    let mut commands = BTreeMap::new();
    // Commands often share a schema closure: fetch each once.
    let mut schemas: BTreeMap<String, Value> = BTreeMap::new();
    for cl in clusters {
        let digest = cl["digest"]
            .as_str()
            .ok_or("contract-invalid: a described cluster has no digest")?;
        let visible: Vec<&str> = cl["commands"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let manifest = fetch_artifact(mesh, &cfg.space, digest).await?;
        if manifest["v"] != json!(1) || manifest["members"] != json!([]) {
            return Err(format!(
                "contract-invalid: cluster manifest {digest} is not a single-document closure {{v:1, root, members:[]}}"
            ));
        }
        let root = manifest["root"]
            .as_str()
            .ok_or_else(|| format!("contract-invalid: cluster manifest {digest} has no root"))?;
        let doc = fetch_artifact(mesh, &cfg.space, root).await?;
        let declared = doc["commands"]
            .as_array()
            .ok_or_else(|| format!("contract-invalid: cluster document {root} has no commands"))?;
        for c in declared {
            let Some(name) = c["name"].as_str() else {
                return Err(format!("contract-invalid: a command of {root} has no name"));
            };
            // A describe view may narrow a cluster's commands.
            if !visible.contains(&name) {
                continue;
            }
            let (Some(input), Some(output)) =
                (c["inputDigest"].as_str(), c["outputDigest"].as_str())
            else {
                return Err(format!(
                    "contract-invalid: command {name} of {root} pins no digests"
                ));
            };
            if hex_of(input).is_none() || hex_of(output).is_none() {
                return Err(format!(
                    "contract-invalid: command {name} of {root} has a malformed digest"
                ));
            }
            let input_schema = match schemas.get(input) {
                Some(s) => s.clone(),
                None => {
                    let s = fetch_schema(mesh, &cfg.space, input).await?;
                    schemas.insert(input.to_string(), s.clone());
                    s
                }
            };
            commands.insert(
                name.to_string(),
                CommandContract {
                    input: input.to_string(),
                    output: output.to_string(),
                    input_schema,
                },
            );
        }
    }
    tracing::info!(
        instance = %instance_id,
        epoch,
        commands = commands.len(),
        "described the manager"
    );
    Ok(Contracts {
        instance_id,
        epoch,
        commands,
    })
}

/// The root schema of a closure: its manifest, then the root it names, both verified.
/// Members (digest-referenced documents) are not fetched; `$ref`s to them are left
/// to the manager.
async fn fetch_schema(mesh: &Mesh, space: &str, closure: &str) -> Result<Value, String> {
    let manifest = fetch_artifact(mesh, space, closure).await?;
    if manifest["v"] != json!(1) || !manifest["members"].is_array() {
        return Err(format!(
            "contract-invalid: schema closure {closure} is not a manifest {{v:1, root, members}}"
        ));
    }
    let root = manifest["root"]
        .as_str()
        .ok_or_else(|| format!("contract-invalid: schema closure {closure} has no root"))?;
    fetch_artifact(mesh, space, root).await
}

/// `sha256:<64 hex>` → the hex.
fn hex_of(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    .then_some(hex)
}

/// Fetch one artifact by digest and verify it: the bytes hash to the digest
/// and are their own canonical JSON (content addressing is the tamper boundary).
pub async fn fetch_artifact(mesh: &Mesh, space: &str, digest: &str) -> Result<Value, String> {
    let hex = hex_of(digest)
        .ok_or_else(|| format!("contract-invalid: {digest:?} is not a sha256:<hex> digest"))?;
    let stream = mesh
        .js
        .get_stream_no_info(store_stream(space))
        .await
        .map_err(|e| format!("unavailable: the contract store is not reachable: {e}"))?;
    let msg = stream
        .direct_get_last_for_subject(artifact_subject(space, hex))
        .await
        .map_err(|e| {
            format!("failed-precondition: contract artifact {digest} is not in the store: {e}")
        })?;
    verify_artifact(hex, &msg.payload)
        .map_err(|e| format!("contract-invalid: artifact {digest}: {e}"))
}

/// Check fetched bytes against their digest and canonical form; returns the parse.
pub fn verify_artifact(hex: &str, bytes: &[u8]) -> Result<Value, String> {
    if bytes.len() > ARTIFACT_MAX {
        return Err("above the 256 KiB artifact bound".into());
    }
    if crate::util::sha256_hex(bytes) != hex {
        return Err("the stored bytes do not hash to the digest".into());
    }
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let canon = canonical_json(&v)?;
    if canon.as_bytes() != bytes {
        return Err("not its own canonical JSON serialization".into());
    }
    Ok(v)
}

/// RFC 8785 canonical JSON for the values contract documents hold: keys sorted
/// by UTF-16 code units, no whitespace, integers only (a fraction is refused
/// rather than formatted differently from the writer).
pub fn canonical_json(v: &Value) -> Result<String, String> {
    let mut out = String::new();
    write_canonical(v, &mut out)?;
    Ok(out)
}

fn write_canonical(v: &Value, out: &mut String) -> Result<(), String> {
    match v {
        Value::Null | Value::Bool(_) | Value::String(_) => {
            out.push_str(&serde_json::to_string(v).map_err(|e| e.to_string())?)
        }
        Value::Number(n) => {
            if n.is_f64() {
                return Err(format!("the number {n} is not an integer"));
            }
            out.push_str(&n.to_string());
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out)?;
            }
            out.push(']');
        }
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).map_err(|e| e.to_string())?);
                out.push(':');
                write_canonical(&o[k.as_str()], out)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form_and_verification() {
        let v = json!({"b": [1, {"z": null, "a": true}], "a": "x\u{1}é"});
        let c = canonical_json(&v).unwrap();
        assert_eq!(c, "{\"a\":\"x\\u0001é\",\"b\":[1,{\"a\":true,\"z\":null}]}");
        let hex = crate::util::sha256_hex(c.as_bytes());
        assert_eq!(verify_artifact(&hex, c.as_bytes()).unwrap(), v);
        // Same value, other spelling: refused.
        let spaced = "{\"b\": [1,{\"a\":true,\"z\":null}],\"a\":\"x\\u0001é\"}";
        let hex2 = crate::util::sha256_hex(spaced.as_bytes());
        assert!(verify_artifact(&hex2, spaced.as_bytes()).is_err());
        // Right spelling, wrong digest: refused.
        assert!(verify_artifact(&hex2, c.as_bytes()).is_err());
        assert!(canonical_json(&json!(1.5)).is_err());
        assert!(hex_of("sha256:abc").is_none());
        assert!(hex_of(&format!("sha256:{hex}")).is_some());
    }
}
