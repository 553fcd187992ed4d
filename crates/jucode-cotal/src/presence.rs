//! The presence record (KV `cotal_presence_<space>`, key = card id): built from
//! the seat's state and written on every change and every 2 s heartbeat.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::config::LaunchConfig;
use crate::inbox::{Attention, ChannelMode};

/// Heartbeat period.
pub const HEARTBEAT: std::time::Duration = std::time::Duration::from_millis(2000);

/// Self-reported status (never `offline`: observers derive that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Idle,
    Waiting,
    Working,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Idle => "idle",
            Status::Waiting => "waiting",
            Status::Working => "working",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "idle" => Some(Status::Idle),
            "waiting" => Some(Status::Waiting),
            "working" => Some(Status::Working),
            _ => None,
        }
    }
}

/// The closed condition vocabulary.
pub const CONDITION_CODES: &[&str] = &[
    "rate_limit",
    "overloaded",
    "auth",
    "billing",
    "budget",
    "context",
    "model",
    "request",
    "server",
    "retrying",
    "approval",
    "input",
    "failed",
];

/// A condition relayed from the harness.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub code: String,
    pub source: Option<String>,
    pub message: Option<String>,
    pub since: u64,
}

impl Condition {
    /// Map a native harness code: in the vocabulary as is, otherwise `failed`
    /// with the native code kept in `source`.
    pub fn from_native(native: &str, message: Option<String>, now: u64) -> Self {
        if CONDITION_CODES.contains(&native) {
            Condition {
                code: native.to_string(),
                source: None,
                message,
                since: now,
            }
        } else {
            Condition {
                code: "failed".to_string(),
                source: Some(native.to_string()),
                message,
                since: now,
            }
        }
    }
}

/// What presence shows about the seat.
#[derive(Debug, Clone)]
pub struct PresenceState {
    pub status: Status,
    pub status_since: u64,
    pub activity: Option<String>,
    pub activity_since: Option<u64>,
    pub condition: Option<Condition>,
    pub active_at: Option<u64>,
    pub attention: Attention,
    pub channel_modes: BTreeMap<String, ChannelMode>,
    pub model: Option<(String, Option<String>)>,
    pub session_id: Option<String>,
}

impl PresenceState {
    pub fn new(now: u64) -> Self {
        PresenceState {
            status: Status::Idle,
            status_since: now,
            activity: None,
            activity_since: None,
            condition: None,
            active_at: None,
            attention: Attention::Open,
            channel_modes: BTreeMap::new(),
            model: None,
            session_id: None,
        }
    }

    pub fn set_status(&mut self, status: Status, now: u64) {
        if self.status != status {
            self.status = status;
            self.status_since = now;
        }
    }

    pub fn set_activity(&mut self, activity: Option<String>, now: u64) {
        if self.activity != activity {
            self.activity_since = activity.as_ref().map(|_| now);
            self.activity = activity;
            self.status_since = now;
        }
    }
}

/// The card every presence record carries.
pub fn card(cfg: &LaunchConfig, st: &PresenceState) -> Value {
    let mut meta = serde_json::Map::new();
    meta.insert("connector".into(), json!("jcode"));
    if let Some((model, provider)) = &st.model {
        meta.insert("model".into(), json!(model));
        if let Some(p) = provider {
            meta.insert("provider".into(), json!(p));
        }
    } else if let Some(m) = &cfg.model {
        meta.insert("model".into(), json!(m));
    }
    if let Some(v) = &cfg.variant {
        meta.insert("variant".into(), json!(v));
    }
    if let Ok(host) = nix::unistd::gethostname() {
        meta.insert("host".into(), json!(host.to_string_lossy()));
    }
    if let Some(root) = &cfg.workspace_root {
        meta.insert("cwd".into(), json!(root.display().to_string()));
    }
    if let Some(sid) = &st.session_id {
        meta.insert("sessionKind".into(), json!("jcode"));
        meta.insert("sessionId".into(), json!(sid));
    }
    let mut card = json!({
        "id": cfg.principal.dot(),
        "owner": cfg.principal.owner,
        "actor": cfg.principal.actor,
        "name": cfg.name,
        "kind": "agent",
        "protocolVersion": "0.4",
        "meta": meta,
    });
    if let Some(role) = &cfg.role {
        card["role"] = json!(role);
    }
    card
}

/// The full record at `now`.
pub fn record(cfg: &LaunchConfig, st: &PresenceState, now: u64) -> Value {
    let mut rec = json!({
        "card": card(cfg, st),
        "status": st.status.as_str(),
        "attention": st.attention.as_str(),
        "lifecycleUid": cfg.lifecycle_uid,
        "ts": now,
        "statusSince": st.status_since,
    });
    if let Some(a) = &st.activity {
        rec["activity"] = json!(a);
        rec["activitySince"] = json!(st.activity_since);
    }
    if let Some(c) = &st.condition {
        let mut cv = json!({"code": c.code, "since": c.since});
        if let Some(s) = &c.source {
            cv["source"] = json!(s);
        }
        if let Some(m) = &c.message {
            cv["message"] = json!(m);
        }
        rec["condition"] = cv;
    }
    if let Some(t) = st.active_at {
        rec["activeAt"] = json!(t);
    }
    let modes: serde_json::Map<String, Value> = st
        .channel_modes
        .iter()
        .filter_map(|(k, m)| match m {
            ChannelMode::Quiet => Some((k.clone(), json!("quiet"))),
            ChannelMode::Muted => Some((k.clone(), json!("muted"))),
            ChannelMode::Normal => None,
        })
        .collect();
    if !modes.is_empty() {
        rec["channelModes"] = Value::Object(modes);
    }
    rec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_map_into_the_closed_vocabulary() {
        let c = Condition::from_native("rate_limit", None, 5);
        assert_eq!(c.code, "rate_limit");
        assert!(c.source.is_none());
        let c = Condition::from_native("weird_native", Some("x".into()), 5);
        assert_eq!(c.code, "failed");
        assert_eq!(c.source.as_deref(), Some("weird_native"));
    }

    #[test]
    fn record_shape() {
        let cfg = LaunchConfig::from_env(
            vec![
                ("COTAL_SPACE".to_string(), "dev".to_string()),
                ("COTAL_NAME".to_string(), "alice".to_string()),
                ("COTAL_ROLE".to_string(), "reviewer".to_string()),
            ],
            false,
        )
        .unwrap();
        let mut st = PresenceState::new(1);
        st.channel_modes.insert("q".into(), ChannelMode::Quiet);
        st.condition = Some(Condition::from_native("rate_limit", None, 2));
        st.active_at = Some(3);
        let r = record(&cfg, &st, 10);
        assert_eq!(r["card"]["id"], "local.alice");
        assert_eq!(r["card"]["protocolVersion"], "0.4");
        assert_eq!(r["card"]["role"], "reviewer");
        assert_eq!(r["status"], "idle");
        assert_eq!(r["channelModes"]["q"], "quiet");
        assert_eq!(r["condition"]["code"], "rate_limit");
        assert_eq!(r["activeAt"], 3);
        assert_eq!(r["lifecycleUid"], cfg.lifecycle_uid.as_str());
    }
}
