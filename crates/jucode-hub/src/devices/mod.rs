//! Paired devices and pairing codes ([`relay`]: the relay link and relay devices' pairing;
//! [`push`]: notification subscriptions and sending).
//!
//! A device token is shown once, at pairing; `devices.jsonl` keeps only its SHA-256. A relay
//! device (paired through a Noise handshake) is keyed by the SHA-256 of its Noise static public
//! key and has `kind: "relay"`; it never authenticates with a token. Pairing codes live in
//! memory only: a restart forgets them, which is what a 5-minute code wants. Push
//! subscriptions live in `push.json` and go with their device.

pub(crate) mod push;
mod relay;

use std::collections::{HashMap, VecDeque};

use jucode_clock::SharedClock;
use jucode_protocol::daemon::{DaemonEvent, DeviceInfo, DevicesOp};
use jucode_store::{JsonlLog, StateDir, StoreError};
use serde::{Deserialize, Serialize};

use crate::HubError;
use crate::cx::OpCx;
use crate::error::OpError;
use crate::util::{hex, new_id, random_bytes, sha256_hex};

#[cfg(test)]
use push::PushTarget;
pub use push::push_payload;
use push::{PUSH_FILE, PushSubscriptions};
pub(crate) use relay::RelayState;
pub use relay::{LinkSource, RelayLink, RelayLinkError, app_origin};

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
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    /// Wrong, expired and used codes are one answer, so a guesser learns nothing.
    #[error("wrong or expired pairing code")]
    WrongCode,
    #[error("too many wrong pairing codes; wait a minute")]
    TooManyAttempts,
    /// No randomness for the token, or the `paired` record could not be written.
    #[error("could not save the device: {0}")]
    Store(HubError),
}

/// Store failures are equal when they say the same (their sources are not comparable).
impl PartialEq for PairError {
    fn eq(&self, other: &PairError) -> bool {
        match (self, other) {
            (PairError::WrongCode, PairError::WrongCode)
            | (PairError::TooManyAttempts, PairError::TooManyAttempts) => true,
            (PairError::Store(a), PairError::Store(b)) => a.to_string() == b.to_string(),
            _ => false,
        }
    }
}

/// Why a device, relay or push op failed; the texts are the protocol's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeviceError {
    #[error(transparent)]
    Hub(#[from] HubError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("unknown device {0}")]
    Unknown(String),
    #[error("the relay is off: turn it on with relay_set first")]
    RelayOff,
    #[error("the relay URL must start with wss:// or ws://")]
    RelayUrl,
    #[error("the relay connection is starting; try again")]
    RelayStarting,
    #[error(transparent)]
    Relay(#[from] RelayLinkError),
    #[error("the relay is off: notifications go through the relay")]
    PushRelayOff,
    #[error("only a paired device can receive notifications")]
    NotPaired,
    #[error("{0}")]
    Subscription(&'static str),
    #[error("push_unsubscribe: endpoint or client_id is needed")]
    UnsubscribeUsage,
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

    /// A new pairing code and when it expires (ms).
    pub(crate) fn start_pairing(&mut self) -> Result<(String, u64), DeviceError> {
        let now = self.clock.now_ms();
        self.codes.retain(|_, expires| *expires > now);
        let bytes: [u8; CODE_LEN] = random_bytes()?;
        // 256 is a multiple of 32, so the modulo is unbiased.
        let code: String = bytes
            .iter()
            .map(|b| char::from(CODE_ALPHABET[usize::from(*b) % CODE_ALPHABET.len()]))
            .collect();
        let expires_at = now + CODE_TTL_MS;
        self.codes.insert(code.clone(), expires_at);
        Ok((code, expires_at))
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
        let secret: [u8; 32] = random_bytes().map_err(PairError::Store)?;
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
            .map_err(|e| PairError::Store(e.into()))?;
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

    pub(crate) fn revoke(&mut self, device: &str) -> Result<(), DeviceError> {
        if !self.devices.iter().any(|d| d.id == device) {
            return Err(DeviceError::Unknown(device.to_string()));
        }
        self.log.append(&Record::Revoked {
            id: device.to_string(),
            at: self.clock.now_ms(),
        })?;
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

/// Answers the device and relay ops (local clients only: the router refused devices).
pub(crate) fn handle(cx: &OpCx<'_>, op: DevicesOp) -> Result<(), OpError> {
    let hub = cx.hub;
    let event = match op {
        DevicesOp::PairStart => {
            let (code, expires_at) = hub.lock().devices.start_pairing()?;
            DaemonEvent::Pairing { code, expires_at }
        }
        DevicesOp::PairLink => hub.pair_link_event()?,
        DevicesOp::DeviceList => hub.lock().devices.list_event(),
        DevicesOp::DeviceRevoke { device } => {
            let mut inner = hub.lock();
            inner.devices.revoke(&device)?;
            for dropped in inner.clients.drop_device(&device) {
                inner.client_gone(dropped);
            }
            cx.reply_locked(&mut inner, DaemonEvent::DeviceRevoked { device });
            return Ok(());
        }
        DevicesOp::RelayStatus => hub.relay_status_event(),
        DevicesOp::RelaySet { enabled } => hub.relay_set(enabled)?,
    };
    cx.reply(event);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_failure_keeps_its_text_and_compares_by_it() {
        let random = PairError::Store(HubError::Random);
        assert_eq!(
            random.to_string(),
            "could not save the device: the system random generator failed"
        );
        assert_eq!(random, PairError::Store(HubError::Random));
        let invalid = PairError::Store(HubError::Invalid {
            path: "devices.jsonl".into(),
            message: "bad".into(),
        });
        assert_ne!(random, invalid);
        assert_ne!(random, PairError::WrongCode);
        assert_eq!(PairError::WrongCode, PairError::WrongCode);
    }

    fn devices() -> (tempfile::TempDir, StateDir, Devices) {
        let dir = tempfile::tempdir().unwrap();
        let store = StateDir::open(dir.path()).unwrap();
        let devices = Devices::open(&store, jucode_clock::SystemClock::shared()).unwrap();
        (dir, store, devices)
    }

    fn code(d: &mut Devices) -> String {
        d.start_pairing().unwrap().0
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
