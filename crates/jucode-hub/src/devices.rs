//! Paired devices, pairing codes, relay devices and their push subscriptions.
//!
//! A device token is shown once, at pairing; `devices.jsonl` keeps only its SHA-256. A relay
//! device (paired through a Noise handshake) is keyed by the SHA-256 of its Noise static public
//! key and has `kind: "relay"`; it never authenticates with a token. Pairing codes live in
//! memory only: a restart forgets them, which is what a 5-minute code wants. Push
//! subscriptions live in `push.json` and go with their device.

use std::collections::{HashMap, VecDeque};

use jucode_protocol::daemon::{DaemonEvent, DeviceInfo, PushOp, PushResult};
use jucode_store::{JsonlLog, StateDir};
use serde::{Deserialize, Serialize};

use crate::HubError;
use crate::util::{hex, new_id, random_bytes, sha256_hex};
use jucode_clock::SharedClock;

/// Characters of a pairing code: no I, O, 0 or 1, which people misread.
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
const CODE_LEN: usize = 8;
const CODE_TTL_MS: u64 = 5 * 60 * 1000;
/// Wrong codes allowed per minute before `/api/pair` answers 429.
const MAX_FAILURES_PER_MINUTE: usize = 5;
const NAME_MAX: usize = 60;
/// Wrong codes through the relay before every outstanding code dies.
const MAX_RELAY_WRONG_CODES: usize = 5;
/// The `kind` of a device paired through the relay.
pub const RELAY_KIND: &str = "relay";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record {
    Paired {
        id: String,
        name: String,
        token_hash: String,
        at: u64,
        /// `relay` for a device paired through the relay (`kind` is the record's own tag).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        device_kind: Option<String>,
    },
    Revoked {
        id: String,
        at: u64,
    },
    #[serde(other)]
    Unknown,
}

struct Device {
    id: String,
    name: String,
    token_hash: String,
    paired_at: u64,
    kind: Option<String>,
}

impl Device {
    fn is_relay(&self) -> bool {
        self.kind.as_deref() == Some(RELAY_KIND)
    }
}

/// A device that just paired: the token is shown to it once.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Paired {
    pub device: String,
    pub name: String,
    pub token: String,
}

/// Why a pairing failed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PairError {
    /// Wrong, expired and used codes are one answer, so a guesser learns nothing.
    #[error("wrong or expired pairing code")]
    WrongCode,
    #[error("too many wrong pairing codes; wait a minute")]
    TooManyAttempts,
    #[error("could not save the device: {0}")]
    Store(String),
}

pub(crate) struct Devices {
    clock: SharedClock,
    log: JsonlLog,
    devices: Vec<Device>,
    /// code → expiry (ms).
    codes: HashMap<String, u64>,
    /// Times of recent wrong codes.
    failures: VecDeque<u64>,
    /// Wrong codes through the relay since the last code died.
    relay_wrong: usize,
    pub(crate) relay: RelayState,
    push: PushSubscriptions,
}

impl Devices {
    pub(crate) fn open(store: &StateDir, clock: SharedClock) -> Result<Devices, HubError> {
        let (log, records) = store.open_log::<Record>("devices.jsonl")?;
        let mut devices: Vec<Device> = Vec::new();
        for record in records {
            match record {
                Record::Paired {
                    id,
                    name,
                    token_hash,
                    at,
                    device_kind: kind,
                } => devices.push(Device {
                    id,
                    name,
                    token_hash,
                    paired_at: at,
                    kind,
                }),
                Record::Revoked { id, .. } => devices.retain(|d| d.id != id),
                Record::Unknown => {}
            }
        }
        let push = PushSubscriptions::open(store.path(PUSH_FILE), &devices)?;
        Ok(Devices {
            clock,
            log,
            devices,
            codes: HashMap::new(),
            failures: VecDeque::new(),
            relay_wrong: 0,
            relay: RelayState::default(),
            push,
        })
    }

    /// The device holding `token`, by comparing SHA-256 hashes (a plain map search on a hash
    /// leaks nothing useful about the token).
    pub(crate) fn device_for_token(&self, token: &str) -> Option<String> {
        if token.is_empty() {
            return None;
        }
        let hash = sha256_hex(token.as_bytes());
        // A relay device's hash is of its Noise key, which is not a token.
        self.devices
            .iter()
            .find(|d| !d.is_relay() && d.token_hash == hash)
            .map(|d| d.id.clone())
    }

    pub(crate) fn start_pairing(&mut self) -> Result<DaemonEvent, String> {
        let now = self.clock.now_ms();
        self.codes.retain(|_, expires| *expires > now);
        let bytes: [u8; CODE_LEN] = random_bytes().map_err(|e| e.to_string())?;
        // 256 is a multiple of 32, so the modulo is unbiased.
        let code: String = bytes
            .iter()
            .map(|b| char::from(CODE_ALPHABET[usize::from(*b) % CODE_ALPHABET.len()]))
            .collect();
        let expires_at = now + CODE_TTL_MS;
        self.codes.insert(code.clone(), expires_at);
        Ok(DaemonEvent::Pairing { code, expires_at })
    }

    /// Whether pairing is refused for now after too many wrong codes.
    pub(crate) fn pairing_blocked(&mut self) -> bool {
        let now = self.clock.now_ms();
        while self
            .failures
            .front()
            .is_some_and(|t| now.saturating_sub(*t) > 60_000)
        {
            self.failures.pop_front();
        }
        self.failures.len() >= MAX_FAILURES_PER_MINUTE
    }

    pub(crate) fn pair(&mut self, code: &str, name: &str) -> Result<Paired, PairError> {
        if self.pairing_blocked() {
            return Err(PairError::TooManyAttempts);
        }
        let now = self.clock.now_ms();
        let code = code.trim().to_ascii_uppercase();
        // Single use: the code is gone whether or not it was still valid.
        match self.codes.remove(&code) {
            Some(expires) if expires > now => {}
            _ => {
                self.failures.push_back(now);
                return Err(PairError::WrongCode);
            }
        }
        let name = clean_name(name);
        let secret: [u8; 32] = random_bytes().map_err(|e| PairError::Store(e.to_string()))?;
        let token = hex(&secret);
        let device = self.add_device(name, sha256_hex(token.as_bytes()), None, now)?;
        Ok(Paired {
            device: device.0,
            name: device.1,
            token,
        })
    }

    /// Writes a `paired` record, then adds the device. Returns its id and name.
    fn add_device(
        &mut self,
        name: String,
        token_hash: String,
        kind: Option<String>,
        now: u64,
    ) -> Result<(String, String), PairError> {
        let device = Device {
            id: new_id("dev", self.clock.now_ms()),
            name,
            token_hash,
            paired_at: now,
            kind,
        };
        self.log
            .append(&Record::Paired {
                id: device.id.clone(),
                name: device.name.clone(),
                token_hash: device.token_hash.clone(),
                at: now,
                device_kind: device.kind.clone(),
            })
            .map_err(|e| PairError::Store(e.to_string()))?;
        let out = (device.id.clone(), device.name.clone());
        self.devices.push(device);
        Ok(out)
    }

    /// The paired relay device whose Noise static key is `key`: `(id, name)`.
    pub(crate) fn relay_device(&self, key: &[u8]) -> Option<(String, String)> {
        let hash = sha256_hex(key);
        // Upstream logs carry no kind for relay devices; a key hash is never a token's.
        self.devices
            .iter()
            .find(|d| d.token_hash == hash)
            .map(|d| (d.id.clone(), d.name.clone()))
    }

    /// Pairs the Noise key `key` with a pairing code sent in a relay handshake.
    ///
    /// The code is checked strictly (8 characters of the code alphabet) and compared in
    /// constant time; it is single use. After [`MAX_RELAY_WRONG_CODES`] wrong codes every
    /// outstanding code dies, so guessing through the relay cannot outlast a code's life.
    pub(crate) fn pair_relay(
        &mut self,
        code: &str,
        name: &str,
        key: &[u8],
    ) -> Result<(String, String), PairError> {
        use subtle::ConstantTimeEq;
        if let Some(found) = self.relay_device(key) {
            return Ok(found);
        }
        let now = self.clock.now_ms();
        self.codes.retain(|_, expires| *expires > now);
        let code = code.trim().to_ascii_uppercase();
        let well_formed =
            code.len() == CODE_LEN && code.bytes().all(|b| CODE_ALPHABET.contains(&b));
        let matched = if well_formed {
            // Look at every code so the time taken does not say which prefix matched.
            self.codes.keys().fold(None, |found, c| {
                if bool::from(c.as_bytes().ct_eq(code.as_bytes())) {
                    Some(c.clone())
                } else {
                    found
                }
            })
        } else {
            None
        };
        let Some(matched) = matched else {
            self.relay_wrong += 1;
            if self.relay_wrong >= MAX_RELAY_WRONG_CODES {
                self.codes.clear();
                self.relay_wrong = 0;
            }
            return Err(PairError::WrongCode);
        };
        self.codes.remove(&matched);
        let name = clean_name(name);
        self.add_device(name, sha256_hex(key), Some(RELAY_KIND.into()), now)
    }

    pub(crate) fn list_event(&self) -> DaemonEvent {
        DaemonEvent::Devices {
            devices: self
                .devices
                .iter()
                .map(|d| DeviceInfo {
                    id: d.id.clone(),
                    name: d.name.clone(),
                    paired_at: d.paired_at,
                    kind: d.kind.clone(),
                })
                .collect(),
        }
    }

    pub(crate) fn revoke(&mut self, device: &str) -> Result<(), String> {
        if !self.devices.iter().any(|d| d.id == device) {
            return Err(format!("unknown device {device}"));
        }
        self.log
            .append(&Record::Revoked {
                id: device.to_string(),
                at: self.clock.now_ms(),
            })
            .map_err(|e| e.to_string())?;
        self.devices.retain(|d| d.id != device);
        if let Err(e) = self.push.remove_device(device) {
            tracing::warn!("push.json: {e}");
        }
        Ok(())
    }

    pub(crate) fn is_device(&self, device: &str) -> bool {
        self.devices.iter().any(|d| d.id == device)
    }

    pub(crate) fn push(&mut self) -> &mut PushSubscriptions {
        &mut self.push
    }
}

/// Trims a device name, caps it at 60 characters; empty becomes `device`.
fn clean_name(name: &str) -> String {
    let name = name.trim();
    if name.is_empty() {
        "device".into()
    } else {
        name.chars().take(NAME_MAX).collect()
    }
}

/// What the hub knows of the relay connection, kept current by the relay task.
#[derive(Default)]
pub(crate) struct RelayState {
    pub(crate) link: Option<std::sync::Arc<dyn crate::RelayLink>>,
    pub(crate) connected: bool,
    pub(crate) host: Option<String>,
    /// Whether the relay connection should be up; the relay task watches it.
    pub(crate) switch: Option<tokio::sync::watch::Sender<bool>>,
}

const PUSH_FILE: &str = "push.json";

/// One push subscription: a browser's Web Push endpoint or the Android app's Getui client id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PushSubscription {
    pub(crate) device: String,
    #[serde(flatten)]
    pub(crate) target: PushTarget,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum PushTarget {
    Web { endpoint: String, keys: PushKeys },
    Getui { provider: String, client_id: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PushKeys {
    pub(crate) p256dh: String,
    pub(crate) auth: String,
}

impl PushTarget {
    /// Reads a client's `subscription` object; anything else is a clear error.
    pub(crate) fn parse(value: &serde_json::Value) -> Result<PushTarget, String> {
        let target: PushTarget = serde_json::from_value(value.clone())
            .map_err(|_| "push_subscribe: subscription needs endpoint and keys {p256dh, auth}, or provider \"getui\" and client_id".to_string())?;
        match &target {
            PushTarget::Web { endpoint, keys } => {
                // http only to this machine: a self-hosted push service behind the relay.
                let loopback = ["http://127.0.0.1", "http://[::1]", "http://localhost"]
                    .iter()
                    .any(|p| endpoint.starts_with(p));
                if !(endpoint.starts_with("https://") || loopback) || endpoint.len() > 2048 {
                    return Err("push_subscribe: endpoint must be an https URL".into());
                }
                if keys.p256dh.is_empty() || keys.auth.is_empty() {
                    return Err("push_subscribe: keys p256dh and auth are needed".into());
                }
            }
            PushTarget::Getui {
                provider,
                client_id,
            } => {
                if provider != "getui" || client_id.is_empty() || client_id.len() > 256 {
                    return Err("push_subscribe: provider must be getui with a client_id".into());
                }
            }
        }
        Ok(target)
    }

    /// The service a result names: the endpoint's host, or `getui`.
    pub(crate) fn service(&self) -> String {
        match self {
            PushTarget::Web { endpoint, .. } => endpoint
                .split_once("://")
                .map_or(endpoint.as_str(), |(_, rest)| rest)
                .split(['/', '?', '#'])
                .next()
                .unwrap_or_default()
                .to_string(),
            PushTarget::Getui { .. } => "getui".into(),
        }
    }

    fn key(&self) -> &str {
        match self {
            PushTarget::Web { endpoint, .. } => endpoint,
            PushTarget::Getui { client_id, .. } => client_id,
        }
    }
}

/// `push.json`: every subscription, rewritten atomically on each change.
pub(crate) struct PushSubscriptions {
    path: std::path::PathBuf,
    subs: Vec<PushSubscription>,
}

impl PushSubscriptions {
    fn open(path: std::path::PathBuf, devices: &[Device]) -> Result<PushSubscriptions, HubError> {
        let mut subs: Vec<PushSubscription> = jucode_store::read_json(&path)?.unwrap_or_default();
        // A device revoked while the file could not be written loses its subscriptions now.
        subs.retain(|s| devices.iter().any(|d| d.id == s.device));
        Ok(PushSubscriptions { path, subs })
    }

    fn save(&self) -> Result<(), String> {
        jucode_store::write_json_atomic(&self.path, &self.subs).map_err(|e| e.to_string())
    }

    /// Adds (or moves to `device`) a subscription.
    pub(crate) fn subscribe(&mut self, device: &str, target: PushTarget) -> Result<(), String> {
        self.subs.retain(|s| s.target.key() != target.key());
        self.subs.push(PushSubscription {
            device: device.to_string(),
            target,
        });
        self.save()
    }

    /// Removes a device's subscription by endpoint or client id; whether one was there.
    pub(crate) fn unsubscribe(&mut self, device: &str, key: &str) -> Result<bool, String> {
        let before = self.subs.len();
        self.subs
            .retain(|s| !(s.device == device && s.target.key() == key));
        if self.subs.len() == before {
            return Ok(false);
        }
        self.save().map(|()| true)
    }

    /// Drops a subscription the push service says is gone (410), whoever holds it.
    pub(crate) fn drop_target(&mut self, target: &PushTarget) -> Result<(), String> {
        self.subs.retain(|s| s.target.key() != target.key());
        self.save()
    }

    fn remove_device(&mut self, device: &str) -> Result<(), String> {
        let before = self.subs.len();
        self.subs.retain(|s| s.device != device);
        if self.subs.len() == before {
            return Ok(());
        }
        self.save()
    }

    /// The subscriptions of one device, or of every device with `None`.
    pub(crate) fn of(&self, device: Option<&str>) -> Vec<PushTarget> {
        self.subs
            .iter()
            .filter(|s| device.is_none_or(|d| s.device == d))
            .map(|s| s.target.clone())
            .collect()
    }
}

/// What the hub asks of the relay connection, which lives outside the hub (`jucode-relay`)
/// so the hub stays transport-free.
pub trait RelayLink: Send + Sync {
    /// The host id and the Noise static public key (base64url), made on first use.
    fn identity(&self) -> Result<(String, String), String>;
    /// Sends one notification through the relay's push endpoint: the relay's HTTP status.
    fn push(
        &self,
        subscription: serde_json::Value,
        payload: serde_json::Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<u16, String>> + Send>>;
}

/// The origin a pairing link uses: `wss://h/relay/v1` → `https://h`, `ws://h/…` → `http://h`.
pub fn app_origin(relay_url: &str) -> Option<String> {
    let (scheme, rest) = relay_url.split_once("://")?;
    let web = match scheme {
        "wss" => "https",
        "ws" => "http",
        _ => return None,
    };
    let host = rest
        .split(['/', '?', '#'])
        .next()
        .filter(|h| !h.is_empty())?;
    Some(format!("{web}://{host}"))
}

/// A notification's payload: `body` clipped to 300 characters plus `…`.
pub fn push_payload(title: &str, body: &str, tag: &str, url: Option<&str>) -> serde_json::Value {
    let mut clipped: String = body.chars().take(300).collect();
    if body.chars().count() > 300 {
        clipped.push('…');
    }
    serde_json::json!({"title": title, "body": clipped, "tag": tag, "url": url.unwrap_or("/remote")})
}

impl crate::Hub {
    /// Connects the relay task: from now on `pair_link` and push go through `link`.
    pub fn attach_relay(&self, link: std::sync::Arc<dyn RelayLink>) {
        self.lock().devices.relay.link = Some(link);
    }

    /// Whether the relay connection should be up, as it changes (`relay_set`, `--no-relay`).
    pub fn relay_switch(&self) -> tokio::sync::watch::Receiver<bool> {
        let on = self.relay_enabled();
        let mut inner = self.lock();
        match &inner.devices.relay.switch {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = tokio::sync::watch::channel(on);
                inner.devices.relay.switch = Some(tx);
                rx
            }
        }
    }

    /// The relay task reports whether the link is up and under which host id.
    pub fn set_relay_connected(&self, connected: bool, host: Option<String>) {
        let mut inner = self.lock();
        inner.devices.relay.connected = connected;
        if host.is_some() {
            inner.devices.relay.host = host;
        }
    }

    /// The paired, unrevoked relay device holding Noise static key `key`: `(id, name)`.
    pub fn relay_device(&self, key: &[u8]) -> Option<(String, String)> {
        self.lock().devices.relay_device(key)
    }

    /// Pairs Noise static key `key` with a pairing code from a relay handshake: `(id, name)`.
    pub fn pair_relay_device(
        &self,
        code: &str,
        name: &str,
        key: &[u8],
    ) -> Result<(String, String), PairError> {
        self.lock().devices.pair_relay(code, name, key)
    }

    pub(crate) fn relay_status_event(&self) -> DaemonEvent {
        let enabled = self.relay_enabled();
        let inner = self.lock();
        DaemonEvent::RelayStatus {
            enabled,
            connected: enabled && inner.devices.relay.connected,
            host: inner.devices.relay.host.clone(),
            url: self.config.relay_url.clone(),
        }
    }

    /// Remembers the relay setting and flips the relay task's switch.
    pub(crate) fn relay_set(&self, enabled: bool) -> Result<DaemonEvent, String> {
        {
            let mut inner = self.lock();
            let settings = crate::Settings { relay: enabled };
            jucode_store::write_json_atomic(&inner.store.path("settings.json"), &settings)
                .map_err(|e| e.to_string())?;
            inner.settings = settings;
        }
        let on = self.relay_enabled();
        if let Some(tx) = &self.lock().devices.relay.switch {
            tx.send_replace(on);
        }
        Ok(self.relay_status_event())
    }

    /// `pair_link`: a pairing code inside the link the phone opens.
    pub(crate) fn pair_link_event(&self) -> Result<DaemonEvent, String> {
        if !self.relay_enabled() {
            return Err("the relay is off: turn it on with relay_set first".into());
        }
        let origin = self
            .config
            .relay_url
            .as_deref()
            .and_then(app_origin)
            .ok_or("the relay URL must start with wss:// or ws://")?;
        let link = self
            .lock()
            .devices
            .relay
            .link
            .clone()
            .ok_or("the relay connection is starting; try again")?;
        let (host, key) = link.identity()?;
        let mut inner = self.lock();
        inner.devices.relay.host = Some(host.clone());
        let DaemonEvent::Pairing { code, expires_at } = inner.devices.start_pairing()? else {
            return Err("pairing failed".into());
        };
        Ok(DaemonEvent::PairLink {
            link: format!("{origin}/remote#pair={host}.{key}.{code}"),
            code,
            expires_at,
        })
    }

    /// `push_subscribe`, `push_unsubscribe` and `push_test` (the router let only paired
    /// devices through).
    pub(crate) async fn push_op(
        &self,
        client: crate::ClientId,
        auth: &crate::Auth,
        id: Option<serde_json::Value>,
        op: PushOp,
    ) -> Result<(), String> {
        const NOT_PAIRED: &str = "only a paired device can receive notifications";
        let crate::Auth::Device(device) = auth else {
            return Err(NOT_PAIRED.into());
        };
        let event = match op {
            PushOp::PushSubscribe { subscription } => {
                let target = PushTarget::parse(&subscription)?;
                let mut inner = self.lock();
                if !inner.devices.is_device(device) {
                    return Err(NOT_PAIRED.into());
                }
                inner.devices.push().subscribe(device, target)?;
                DaemonEvent::PushSubscribed
            }
            PushOp::PushUnsubscribe {
                endpoint,
                client_id,
            } => {
                let key = endpoint.or(client_id);
                let Some(key) = key.as_ref().and_then(|v| v.as_str()) else {
                    return Err("push_unsubscribe: endpoint or client_id is needed".into());
                };
                self.lock().devices.push().unsubscribe(device, key)?;
                DaemonEvent::PushUnsubscribed
            }
            PushOp::PushTest => self.push_test(device).await,
        };
        self.reply(client, id, event);
        Ok(())
    }

    async fn push_test(&self, device: &str) -> DaemonEvent {
        let (targets, link) = {
            let mut inner = self.lock();
            let targets = inner.devices.push().of(Some(device));
            (targets, inner.devices.relay.link.clone())
        };
        let payload = push_payload(
            "jucode",
            "Notifications from this computer reach this device.",
            "push-test",
            None,
        );
        let results = self.send_pushes(targets, link, payload).await;
        DaemonEvent::PushTested { results }
    }

    /// Sends `payload` to every subscription of every device (the notification triggers call
    /// this); a 410 answer drops the subscription. Takes the hub lock: call it without holding
    /// it (e.g. after an event was broadcast, not inside the event pump's locked section).
    pub fn notify(
        self: &std::sync::Arc<Self>,
        title: &str,
        body: &str,
        tag: &str,
        url: Option<&str>,
    ) {
        let (targets, link) = {
            let mut inner = self.lock();
            (
                inner.devices.push().of(None),
                inner.devices.relay.link.clone(),
            )
        };
        if targets.is_empty() || !self.relay_enabled() {
            return;
        }
        let payload = push_payload(title, body, tag, url);
        let hub = self.clone();
        tokio::spawn(async move {
            hub.send_pushes(targets, link, payload).await;
        });
    }

    async fn send_pushes(
        &self,
        targets: Vec<PushTarget>,
        link: Option<std::sync::Arc<dyn RelayLink>>,
        payload: serde_json::Value,
    ) -> Vec<PushResult> {
        let mut results = Vec::new();
        for target in targets {
            let service = target.service();
            let outcome = match (&link, self.relay_enabled()) {
                (Some(link), true) => {
                    let sub = serde_json::to_value(&target).unwrap_or_default();
                    link.push(sub, payload.clone()).await
                }
                _ => Err("the relay is off: notifications go through the relay".into()),
            };
            match outcome {
                Ok(status) => {
                    if status == 410
                        && let Err(e) = self.lock().devices.push().drop_target(&target)
                    {
                        tracing::warn!("push.json: {e}");
                    }
                    results.push(PushResult {
                        service,
                        status: Some(status),
                        error: None,
                    });
                }
                Err(error) => {
                    results.push(PushResult {
                        service,
                        status: None,
                        error: Some(error),
                    });
                }
            }
        }
        results
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn devices() -> (tempfile::TempDir, StateDir, Devices) {
        let dir = tempfile::tempdir().unwrap();
        let store = StateDir::open(dir.path()).unwrap();
        let devices = Devices::open(&store, jucode_clock::SystemClock::shared()).unwrap();
        (dir, store, devices)
    }

    fn code(d: &mut Devices) -> String {
        match d.start_pairing().unwrap() {
            DaemonEvent::Pairing { code, .. } => code,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_relay_key_pairs_once_and_is_listed_with_its_kind() {
        let (_dir, store, mut d) = devices();
        let key = [7u8; 32];
        let c = code(&mut d);
        let (id, name) = d.pair_relay(&c.to_lowercase(), "  phone  ", &key).unwrap();
        assert_eq!(name, "phone");
        assert_eq!(d.relay_device(&key), Some((id.clone(), name)));
        // Used: the same code pairs nothing else.
        assert_eq!(d.pair_relay(&c, "x", &[8u8; 32]), Err(PairError::WrongCode));
        // A relay device is not a token device, even for a token whose bytes are its key.
        let ascii = *b"0123456789abcdef0123456789abcdef";
        let c = code(&mut d);
        d.pair_relay(&c, "ascii", &ascii).unwrap();
        assert_eq!(d.device_for_token("0123456789abcdef0123456789abcdef"), None);
        let DaemonEvent::Devices { devices } = d.list_event() else {
            panic!()
        };
        assert!(
            devices
                .iter()
                .all(|d| d.kind.as_deref() == Some(RELAY_KIND))
        );
        // Survives a restart, kind included.
        drop(d);
        let d = Devices::open(&store, jucode_clock::SystemClock::shared()).unwrap();
        assert_eq!(d.relay_device(&key).map(|f| f.0), Some(id));
    }

    #[test]
    fn expired_codes_and_five_wrong_tries_kill_codes() {
        let (_dir, _store, mut d) = devices();
        let c = code(&mut d);
        d.codes.insert(c.clone(), d.clock.now_ms() - 1);
        assert_eq!(d.pair_relay(&c, "p", &[1u8; 32]), Err(PairError::WrongCode));
        let c = code(&mut d);
        for wrong in ["AAAAAAAA", "bad", "BBBBBBBB", "CCCCCCCC", "DDDDDDDD"] {
            assert_eq!(
                d.pair_relay(wrong, "p", &[2u8; 32]),
                Err(PairError::WrongCode)
            );
        }
        assert_eq!(d.pair_relay(&c, "p", &[2u8; 32]), Err(PairError::WrongCode));
        let c = code(&mut d);
        assert!(d.pair_relay(&c, "p", &[2u8; 32]).is_ok());
    }

    #[test]
    fn push_subscriptions_move_and_go_with_their_device() {
        let (_dir, store, mut d) = devices();
        let c = code(&mut d);
        let (a, _) = d.pair_relay(&c, "a", &[3u8; 32]).unwrap();
        let c = code(&mut d);
        let (b, _) = d.pair_relay(&c, "b", &[4u8; 32]).unwrap();
        let sub = serde_json::json!({"endpoint": "https://push.example/x", "keys": {"p256dh": "k", "auth": "a"}});
        let target = PushTarget::parse(&sub).unwrap();
        assert_eq!(target.service(), "push.example");
        d.push().subscribe(&a, target.clone()).unwrap();
        // The same endpoint registered by another device moves to it.
        d.push().subscribe(&b, target.clone()).unwrap();
        assert!(d.push().of(Some(&a)).is_empty());
        assert_eq!(d.push().of(Some(&b)), vec![target]);
        let getui =
            PushTarget::parse(&serde_json::json!({"provider": "getui", "client_id": "cid"}))
                .unwrap();
        assert_eq!(getui.service(), "getui");
        d.push().subscribe(&b, getui).unwrap();
        assert!(
            PushTarget::parse(
                &serde_json::json!({"endpoint": "ftp://x", "keys": {"p256dh": "k", "auth": "a"}})
            )
            .is_err()
        );
        d.revoke(&b).unwrap();
        assert!(d.push().of(None).is_empty());
        let saved = std::fs::read_to_string(store.path(PUSH_FILE)).unwrap();
        assert_eq!(saved.trim(), "[]");
    }
}
