//! `--resume <id>`: fork a session of the operator's jcode home into the
//! seat's private home, as jcode's own split does (new id, parent = source,
//! the source's messages, compaction state, system prompt and model; status
//! `Closed`; a hidden fork notice). The source is only read.
//!
//! Every carried message, content block and compaction state is checked
//! against jcode's schema and a refusal names the field. Messages and the
//! compaction state are copied as the raw JSON text they were read as, so a
//! u64 count above what a double holds stays byte for byte; a count spelled
//! with a fraction or an exponent, or above u64, is refused (jcode reads
//! counts only as plain decimal integers).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::home::{PrivateHome, sha256_hex, write_atomic};
use crate::{Error, Result};

/// The manager keeps titles of at most this many characters.
pub const MAX_TITLE_CHARS: usize = 1024;
/// Reads of a live source before it counts as still changing.
pub const MAX_READS: usize = 10;

/// What `<home>/cotal-resume.json` records.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ResumeRecord {
    pub source_session_id: String,
    pub title: Option<String>,
    /// SHA-256 of the snapshot bytes followed by the journal bytes that were read.
    pub sha256: String,
    pub fork_session_id: String,
    pub forked_at: String,
}

/// jcode's accepted session id shape.
pub fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn bad(field: &str, what: &str) -> Error {
    Error::Resume(format!("{field}: {what}"))
}

/// A u64 count as jcode reads it: a plain non-negative decimal integer.
fn check_u64(v: &Value, field: &str) -> Result<()> {
    match v {
        Value::Number(n) if n.is_u64() => Ok(()),
        Value::Number(_) => Err(bad(
            field,
            "not a plain u64 (fraction, exponent, sign or out of range)",
        )),
        _ => Err(bad(field, "not a number")),
    }
}

fn opt_u64(obj: &serde_json::Map<String, Value>, key: &str, at: &str) -> Result<()> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(()),
        Some(v) => check_u64(v, &format!("{at}.{key}")),
    }
}

fn req_str(obj: &serde_json::Map<String, Value>, key: &str, at: &str) -> Result<()> {
    match obj.get(key) {
        Some(Value::String(_)) => Ok(()),
        Some(_) => Err(bad(&format!("{at}.{key}"), "not a string")),
        None => Err(bad(&format!("{at}.{key}"), "missing")),
    }
}

fn opt_str(obj: &serde_json::Map<String, Value>, key: &str, at: &str) -> Result<()> {
    match obj.get(key) {
        None | Some(Value::Null) | Some(Value::String(_)) => Ok(()),
        Some(_) => Err(bad(&format!("{at}.{key}"), "not a string")),
    }
}

fn as_obj<'a>(v: &'a Value, at: &str) -> Result<&'a serde_json::Map<String, Value>> {
    v.as_object().ok_or_else(|| bad(at, "not an object"))
}

/// One content block (`type`-tagged, snake_case).
pub fn validate_block(v: &Value, at: &str) -> Result<()> {
    let o = as_obj(v, at)?;
    let ty = match o.get("type") {
        Some(Value::String(s)) => s.as_str(),
        _ => return Err(bad(&format!("{at}.type"), "missing or not a string")),
    };
    match ty {
        "text" => req_str(o, "text", at),
        "reasoning" | "reasoning_trace" => req_str(o, "text", at),
        "anthropic_thinking" => {
            req_str(o, "thinking", at)?;
            req_str(o, "signature", at)
        }
        "tool_use" => {
            req_str(o, "id", at)?;
            req_str(o, "name", at)?;
            if !o.contains_key("input") {
                return Err(bad(&format!("{at}.input"), "missing"));
            }
            opt_str(o, "thought_signature", at)
        }
        "tool_result" => {
            req_str(o, "tool_use_id", at)?;
            req_str(o, "content", at)?;
            match o.get("is_error") {
                None | Some(Value::Null) | Some(Value::Bool(_)) => Ok(()),
                Some(_) => Err(bad(&format!("{at}.is_error"), "not a boolean")),
            }
        }
        "image" => {
            req_str(o, "media_type", at)?;
            req_str(o, "data", at)
        }
        "open_a_i_reasoning" => {
            req_str(o, "id", at)?;
            if !o.get("summary").is_some_and(Value::is_array) {
                return Err(bad(&format!("{at}.summary"), "missing or not an array"));
            }
            opt_str(o, "encrypted_content", at)?;
            opt_str(o, "status", at)
        }
        "open_a_i_compaction" => req_str(o, "encrypted_content", at),
        other => Err(bad(
            &format!("{at}.type"),
            &format!("unknown block type {other:?}"),
        )),
    }
}

/// One stored message.
pub fn validate_message(v: &Value, at: &str) -> Result<()> {
    let o = as_obj(v, at)?;
    req_str(o, "id", at)?;
    match o.get("role").and_then(Value::as_str) {
        Some("user") | Some("assistant") => {}
        _ => return Err(bad(&format!("{at}.role"), "not user or assistant")),
    }
    let content = o
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| bad(&format!("{at}.content"), "missing or not an array"))?;
    for (i, b) in content.iter().enumerate() {
        validate_block(b, &format!("{at}.content[{i}]"))?;
    }
    match o.get("display_role") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "system" || s == "background_task" => {}
        Some(_) => {
            return Err(bad(
                &format!("{at}.display_role"),
                "not system or background_task",
            ));
        }
    }
    opt_str(o, "timestamp", at)?;
    opt_u64(o, "tool_duration_ms", at)?;
    match o.get("token_usage") {
        None | Some(Value::Null) => {}
        Some(u) => {
            let ut = format!("{at}.token_usage");
            let uo = as_obj(u, &ut)?;
            for k in ["input_tokens", "output_tokens"] {
                match uo.get(k) {
                    Some(v) => check_u64(v, &format!("{ut}.{k}"))?,
                    None => return Err(bad(&format!("{ut}.{k}"), "missing")),
                }
            }
            opt_u64(uo, "cache_read_input_tokens", &ut)?;
            opt_u64(uo, "cache_creation_input_tokens", &ut)?;
        }
    }
    Ok(())
}

/// A `StoredCompactionState` (or null).
pub fn validate_compaction(v: &Value, at: &str) -> Result<()> {
    if v.is_null() {
        return Ok(());
    }
    let o = as_obj(v, at)?;
    req_str(o, "summary_text", at)?;
    opt_str(o, "openai_encrypted_content", at)?;
    for k in [
        "covers_up_to_turn",
        "original_turn_count",
        "compacted_count",
    ] {
        match o.get(k) {
            Some(v) => check_u64(v, &format!("{at}.{k}"))?,
            None => return Err(bad(&format!("{at}.{k}"), "missing")),
        }
    }
    Ok(())
}

#[derive(Deserialize)]
struct RawSnapshot<'a> {
    #[serde(borrow)]
    messages: Vec<&'a RawValue>,
    #[serde(default, borrow)]
    compaction: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct RawLine<'a> {
    #[serde(borrow)]
    meta: &'a RawValue,
    #[serde(default, borrow)]
    append_messages: Vec<&'a RawValue>,
}

fn parse_time(s: &str, field: &str) -> Result<chrono::DateTime<chrono::FixedOffset>> {
    chrono::DateTime::parse_from_rfc3339(s).map_err(|_| bad(field, "not an RFC 3339 time"))
}

/// The fork's content as validated from one consistent read.
#[derive(Debug)]
pub struct Carried {
    messages: Vec<String>,
    compaction: Option<String>,
    model: Option<String>,
    system_prompt: Option<String>,
    pub title: Option<String>,
    /// Whether every journal line is newer than the snapshot (older ones are skipped).
    pub journal_newer: bool,
}

/// Validate a snapshot and journal pair and collect what the fork carries.
pub fn carry(source_id: &str, snapshot: &[u8], journal: &[u8]) -> Result<Carried> {
    let snap: Value =
        serde_json::from_slice(snapshot).map_err(|e| bad("snapshot", &format!("not JSON: {e}")))?;
    let so = as_obj(&snap, "snapshot")?;
    if so.get("id").and_then(Value::as_str) != Some(source_id) {
        return Err(bad("snapshot.id", "does not name the requested session"));
    }
    req_str(so, "created_at", "snapshot")?;
    req_str(so, "updated_at", "snapshot")?;
    let snap_time = parse_time(
        so.get("updated_at")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        "snapshot.updated_at",
    )?;
    let msgs = so
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("snapshot.messages", "missing or not an array"))?;
    for (i, m) in msgs.iter().enumerate() {
        validate_message(m, &format!("snapshot.messages[{i}]"))?;
    }
    validate_compaction(
        so.get("compaction").unwrap_or(&Value::Null),
        "snapshot.compaction",
    )?;
    let raw: RawSnapshot<'_> = serde_json::from_slice(snapshot)
        .map_err(|e| bad("snapshot", &format!("not loadable: {e}")))?;
    let mut messages: Vec<String> = raw.messages.iter().map(|r| r.get().to_string()).collect();
    let mut compaction = raw
        .compaction
        .map(|r| r.get().to_string())
        .filter(|s| s != "null");
    let text = |o: &serde_json::Map<String, Value>, k: &str| {
        o.get(k).and_then(Value::as_str).map(str::to_string)
    };
    let mut model = text(so, "model");
    let mut system_prompt = text(so, "system_prompt");
    let mut title = text(so, "custom_title").or_else(|| text(so, "title"));
    let mut journal_newer = true;

    for (n, line) in journal.split(|b| *b == b'\n').enumerate() {
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let at = format!("journal line {}", n + 1);
        if !line.starts_with(b"{\"meta\":") {
            return Err(bad(&at, "does not start with {\"meta\":"));
        }
        let v: Value =
            serde_json::from_slice(line).map_err(|e| bad(&at, &format!("not JSON: {e}")))?;
        let lo = as_obj(&v, &at)?;
        let meta = lo
            .get("meta")
            .and_then(Value::as_object)
            .ok_or_else(|| bad(&format!("{at}.meta"), "not an object"))?;
        let mt = format!("{at}.meta");
        req_str(meta, "updated_at", &mt)?;
        let t = parse_time(
            meta.get("updated_at")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            &format!("{mt}.updated_at"),
        )?;
        if t <= snap_time {
            // Already folded into the snapshot by a checkpoint whose journal
            // removal was not seen (or never happened): applying it would
            // duplicate its messages.
            journal_newer = false;
            continue;
        }
        validate_compaction(
            meta.get("compaction").unwrap_or(&Value::Null),
            &format!("{mt}.compaction"),
        )?;
        if let Some(am) = lo.get("append_messages") {
            let arr = am
                .as_array()
                .ok_or_else(|| bad(&format!("{at}.append_messages"), "not an array"))?;
            for (i, m) in arr.iter().enumerate() {
                validate_message(m, &format!("{at}.append_messages[{i}]"))?;
            }
        }
        let raw: RawLine<'_> =
            serde_json::from_slice(line).map_err(|e| bad(&at, &format!("not loadable: {e}")))?;
        messages.extend(raw.append_messages.iter().map(|r| r.get().to_string()));
        // The journal's meta replaces the metadata wholesale, as jcode loads it.
        let raw_meta: std::collections::HashMap<&str, &RawValue> =
            serde_json::from_str(raw.meta.get()).map_err(|e| bad(&mt, &e.to_string()))?;
        compaction = raw_meta
            .get("compaction")
            .map(|r| r.get().to_string())
            .filter(|s| s != "null");
        model = text(meta, "model");
        system_prompt = text(meta, "system_prompt");
        title = text(meta, "custom_title").or_else(|| text(meta, "title"));
    }
    if let Some(t) = &title
        && t.chars().count() > MAX_TITLE_CHARS
    {
        return Err(bad(
            "title",
            &format!("longer than {MAX_TITLE_CHARS} characters"),
        ));
    }
    Ok(Carried {
        messages,
        compaction,
        model,
        system_prompt,
        title,
        journal_newer,
    })
}

/// Read the source until two reads agree and every journal line is newer than the snapshot.
pub async fn read_stable(sessions: &Path, id: &str) -> Result<(Vec<u8>, Vec<u8>, Carried)> {
    let snap_path = sessions.join(format!("{id}.json"));
    let journal_path = sessions.join(format!("{id}.journal.jsonl"));
    let read = || -> Result<(Vec<u8>, Vec<u8>)> {
        let s = match std::fs::read(&snap_path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::Resume(format!(
                    "session {id} has no readable transcript"
                )));
            }
            Err(e) => return Err(Error::io(&snap_path, e)),
        };
        let j = match std::fs::read(&journal_path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(Error::io(&journal_path, e)),
        };
        Ok((s, j))
    };
    let mut prev = read()?;
    let mut stale_seen = 0;
    for _ in 0..MAX_READS {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let next = read()?;
        if next == prev {
            let carried = carry(id, &next.0, &next.1)?;
            // A journal older than its snapshot is a checkpoint caught mid-way:
            // read again; if it stays (the writer is gone) its lines are skipped.
            if carried.journal_newer || stale_seen >= 2 {
                return Ok((next.0, next.1, carried));
            }
            stale_seen += 1;
        }
        prev = next;
    }
    Err(Error::Resume(format!(
        "session {id} kept changing while it was read; retry the spawn"
    )))
}

fn new_session_id() -> Result<String> {
    let n = crate::home::nonce()?;
    Ok(format!(
        "session_cotal_{}_{}",
        chrono::Utc::now().timestamp_millis(),
        &n[..16]
    ))
}

/// The fork snapshot text (compact JSON, jcode's field order).
pub fn fork_snapshot(
    source_id: &str,
    fork_id: &str,
    carried: &Carried,
    working_dir: &Path,
) -> Result<String> {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    let notice = json!({
        "id": format!("message_{}_{}", chrono::Utc::now().timestamp_millis(), u64::from_str_radix(&crate::home::nonce()?[..15], 16).unwrap_or(0)),
        "role": "user",
        "content": [{"type": "text", "text": format!(
            "<system-reminder>\nThis session was forked (split) from session {source_id} by the user for a Cotal seat. Work that was in flight in the source session belongs to it; do NOT continue or duplicate that in-flight work here.\n</system-reminder>")}],
        "display_role": "system",
        "timestamp": now,
    });
    let mut out = String::from("{");
    out.push_str(&format!(
        "\"id\":{},\"parent_id\":{},\"title\":null,\"created_at\":{},\"updated_at\":{},\"messages\":[",
        js(fork_id),
        js(source_id),
        js(now.as_str()),
        js(now.as_str())
    ));
    for (i, m) in carried.messages.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(m);
    }
    if !carried.messages.is_empty() {
        out.push(',');
    }
    out.push_str(&notice.to_string());
    out.push(']');
    if let Some(c) = &carried.compaction {
        out.push_str(",\"compaction\":");
        out.push_str(c);
    }
    if let Some(m) = &carried.model {
        out.push_str(&format!(",\"model\":{}", js(m.as_str())));
    }
    if let Some(p) = &carried.system_prompt {
        out.push_str(&format!(",\"system_prompt\":{}", js(p.as_str())));
    }
    out.push_str(&format!(
        ",\"is_canary\":false,\"working_dir\":{},\"short_name\":\"cotal\",\"status\":\"Closed\",\"is_debug\":false,\"saved\":false}}",
        js(working_dir.display().to_string().as_str())
    ));
    Ok(out)
}

fn js(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// The session a seat should continue, from its resume record, if the fork exists.
pub fn recorded_fork(home: &PrivateHome) -> Result<Option<ResumeRecord>> {
    let p = home.resume_record();
    let raw = match std::fs::read(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&p, e)),
    };
    let rec: ResumeRecord = serde_json::from_slice(&raw)
        .map_err(|e| Error::PrivateState(format!("{}: {e}", p.display())))?;
    Ok(Some(rec))
}

/// Fork `source_id` from `source_home` into `home` (or continue the recorded fork).
pub async fn fork_or_continue(
    home: &PrivateHome,
    source_home: &Path,
    source_id: &str,
    working_dir: &Path,
) -> Result<(ResumeRecord, bool)> {
    if !valid_session_id(source_id) {
        return Err(Error::Resume(format!(
            "{source_id:?} is not a jcode session id"
        )));
    }
    if let Some(rec) = recorded_fork(home)? {
        if rec.source_session_id != source_id {
            return Err(Error::Resume(format!(
                "this seat already forked {}; spawn a new name to fork {source_id}",
                rec.source_session_id
            )));
        }
        if home
            .sessions_dir()
            .join(format!("{}.json", rec.fork_session_id))
            .exists()
        {
            return Ok((rec, false));
        }
    }
    let (snap, journal, carried) = read_stable(&source_home.join("sessions"), source_id).await?;
    let fork_id = new_session_id()?;
    let text = fork_snapshot(source_id, &fork_id, &carried, working_dir)?;
    let sessions = home.sessions_dir();
    std::fs::create_dir_all(&sessions).map_err(|e| Error::io(&sessions, e))?;
    write_atomic(&sessions.join(format!("{fork_id}.json")), text.as_bytes())?;
    let rec = ResumeRecord {
        source_session_id: source_id.to_string(),
        title: carried.title.clone(),
        sha256: sha256_hex(&[&snap, &journal]),
        fork_session_id: fork_id,
        forked_at: chrono::Utc::now().to_rfc3339(),
    };
    let bytes = serde_json::to_vec_pretty(&rec).map_err(|e| Error::Resume(e.to_string()))?;
    write_atomic(&home.resume_record(), &bytes)?;
    Ok((rec, true))
}

/// Where the operator's own jcode home is.
pub fn operator_home(env: &[(String, String)], explicit: Option<&str>) -> Option<PathBuf> {
    if let Some(e) = explicit.filter(|s| !s.is_empty()) {
        return Some(PathBuf::from(e));
    }
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    get("JCODE_HOME")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| get("HOME").map(|h| PathBuf::from(h).join(".jcode")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const SNAP: &str = include_str!("../tests/data/session.snapshot.tooluse.json");

    fn id_of(s: &str) -> String {
        serde_json::from_str::<Value>(s).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn recorded_snapshot_carries() {
        let id = id_of(SNAP);
        let c = carry(&id, SNAP.as_bytes(), b"").unwrap();
        assert_eq!(c.messages.len(), 8);
        assert_eq!(c.title.as_deref(), Some("Recorded session"));
        let out = fork_snapshot(&id, "session_cotal_1_00", &c, Path::new("/w")).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["parent_id"], json!(id));
        assert_eq!(v["status"], json!("Closed"));
        assert_eq!(v["messages"].as_array().unwrap().len(), 9);
        for (i, m) in v["messages"].as_array().unwrap().iter().enumerate() {
            validate_message(m, &format!("m{i}")).unwrap();
        }
    }

    fn with_usage(raw_count: &str) -> String {
        format!(
            r#"{{"id":"s1","created_at":"2026-11-29T21:23:13Z","updated_at":"2026-11-29T21:23:13Z","messages":[{{"id":"m","role":"assistant","content":[{{"type":"text","text":"hi"}}],"token_usage":{{"input_tokens":{raw_count},"output_tokens":7}}}}]}}"#
        )
    }

    #[test]
    fn big_u64_counts_are_copied_byte_for_byte() {
        let big = "18446744073709551615"; // u64::MAX, far above 2^53
        let c = carry("s1", with_usage(big).as_bytes(), b"").unwrap();
        let out = fork_snapshot("s1", "s2", &c, Path::new("/w")).unwrap();
        assert!(out.contains(&format!("\"input_tokens\":{big}")), "{out}");
        let above_double = "9007199254740993";
        let c = carry("s1", with_usage(above_double).as_bytes(), b"").unwrap();
        let out = fork_snapshot("s1", "s2", &c, Path::new("/w")).unwrap();
        assert!(
            out.contains(&format!("\"input_tokens\":{above_double}")),
            "{out}"
        );
    }

    #[test]
    fn fractions_exponents_and_overflow_are_refused_naming_the_field() {
        for bad in ["1.0", "1e3", "18446744073709551616", "-1", "\"5\""] {
            let err = carry("s1", with_usage(bad).as_bytes(), b"").unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.contains("snapshot.messages[0].token_usage.input_tokens"),
                "{bad}: {msg}"
            );
        }
    }

    #[test]
    fn bad_blocks_and_compaction_are_named() {
        let s = r#"{"id":"s1","created_at":"2026-11-29T21:23:13Z","updated_at":"2026-11-29T21:23:13Z","messages":[{"id":"m","role":"user","content":[{"type":"tool_result","tool_use_id":"c","content":7}]}]}"#;
        let err = carry("s1", s.as_bytes(), b"").unwrap_err().to_string();
        assert!(
            err.contains("snapshot.messages[0].content[0].content"),
            "{err}"
        );
        let s = r#"{"id":"s1","created_at":"2026-11-29T21:23:13Z","updated_at":"2026-11-29T21:23:13Z","messages":[{"id":"m","role":"robot","content":[]}]}"#;
        let err = carry("s1", s.as_bytes(), b"").unwrap_err().to_string();
        assert!(err.contains("snapshot.messages[0].role"), "{err}");
        let s = r#"{"id":"s1","created_at":"2026-11-29T21:23:13Z","updated_at":"2026-11-29T21:23:13Z","messages":[],"compaction":{"summary_text":"x","covers_up_to_turn":1e3,"original_turn_count":1,"compacted_count":1}}"#;
        let err = carry("s1", s.as_bytes(), b"").unwrap_err().to_string();
        assert!(
            err.contains("snapshot.compaction.covers_up_to_turn"),
            "{err}"
        );
    }

    #[test]
    fn journal_lines_extend_and_their_meta_wins() {
        let snap = r#"{"id":"s1","created_at":"2026-11-29T21:23:13Z","updated_at":"2026-11-29T21:23:13Z","messages":[],"model":"a"}"#;
        let j = concat!(
            r#"{"meta":{"updated_at":"2026-11-29T21:23:14Z","compaction":{"summary_text":"s","covers_up_to_turn":18446744073709551615,"original_turn_count":2,"compacted_count":1},"model":"b","custom_title":"T"},"append_messages":[{"id":"m1","role":"user","content":[{"type":"text","text":"x"}]}]}"#,
            "\n"
        );
        let c = carry("s1", snap.as_bytes(), j.as_bytes()).unwrap();
        assert!(c.journal_newer);
        assert_eq!(c.messages.len(), 1);
        assert_eq!(c.model.as_deref(), Some("b"));
        assert_eq!(c.title.as_deref(), Some("T"));
        assert!(
            c.compaction
                .as_deref()
                .unwrap()
                .contains("18446744073709551615")
        );
        let bad = j.replace("\"original_turn_count\":2", "\"original_turn_count\":2.5");
        let err = carry("s1", snap.as_bytes(), bad.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("journal line 1.meta.compaction.original_turn_count"),
            "{err}"
        );
        // A line not newer than the snapshot: a checkpoint caught mid-way.
        let old = j.replace("21:23:14Z", "21:23:12Z");
        assert!(
            !carry("s1", snap.as_bytes(), old.as_bytes())
                .unwrap()
                .journal_newer
        );
    }

    #[test]
    fn long_titles_are_refused() {
        let long = "t".repeat(MAX_TITLE_CHARS + 1);
        let s = format!(
            r#"{{"id":"s1","title":"{long}","created_at":"2026-11-29T21:23:13Z","updated_at":"2026-11-29T21:23:13Z","messages":[]}}"#
        );
        let err = carry("s1", s.as_bytes(), b"").unwrap_err().to_string();
        assert!(err.contains("title"), "{err}");
    }

    #[tokio::test]
    async fn fork_records_and_a_relaunch_does_not_read_the_source() {
        let ws = tempfile::tempdir().unwrap();
        let op = tempfile::tempdir().unwrap();
        let id = id_of(SNAP);
        std::fs::create_dir_all(op.path().join("sessions")).unwrap();
        let src = op.path().join("sessions").join(format!("{id}.json"));
        std::fs::write(&src, SNAP).unwrap();
        let home = PrivateHome::prepare(ws.path(), "dev", "forker").unwrap();
        let (rec, fresh) = fork_or_continue(&home, op.path(), &id, ws.path())
            .await
            .unwrap();
        assert!(fresh);
        assert_eq!(rec.source_session_id, id);
        assert_eq!(rec.title.as_deref(), Some("Recorded session"));
        assert_eq!(rec.sha256, sha256_hex(&[SNAP.as_bytes(), b""]));
        assert_eq!(
            std::fs::read_to_string(&src).unwrap(),
            SNAP,
            "source untouched"
        );
        std::fs::remove_file(&src).unwrap();
        let (again, fresh) = fork_or_continue(&home, op.path(), &id, ws.path())
            .await
            .unwrap();
        assert!(!fresh);
        assert_eq!(again, rec);
        assert!(
            fork_or_continue(&home, op.path(), "../etc", ws.path())
                .await
                .is_err()
        );
    }
}
