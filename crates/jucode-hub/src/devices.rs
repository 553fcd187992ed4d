//! Paired devices and pairing codes.
//!
//! A device token is shown once, at pairing; `devices.jsonl` keeps only its SHA-256. Pairing
//! codes live in memory only: a restart forgets them, which is what a 5-minute code wants.

use std::collections::{HashMap, VecDeque};

use jucode_protocol::daemon::{DaemonEvent, DeviceInfo};
use jucode_store::{JsonlLog, StateDir};
use serde::{Deserialize, Serialize};

use crate::HubError;
use crate::util::{hex, new_id, now_ms, random_bytes, sha256_hex};

/// Characters of a pairing code: no I, O, 0 or 1, which people misread.
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
const CODE_LEN: usize = 8;
const CODE_TTL_MS: u64 = 5 * 60 * 1000;
/// Wrong codes allowed per minute before `/api/pair` answers 429.
const MAX_FAILURES_PER_MINUTE: usize = 5;
const NAME_MAX: usize = 60;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record {
    Paired {
        id: String,
        name: String,
        token_hash: String,
        at: u64,
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
    log: JsonlLog,
    devices: Vec<Device>,
    /// code → expiry (ms).
    codes: HashMap<String, u64>,
    /// Times of recent wrong codes.
    failures: VecDeque<u64>,
}

impl Devices {
    pub(crate) fn open(store: &StateDir) -> Result<Devices, HubError> {
        let (log, records) = store.open_log::<Record>("devices.jsonl")?;
        let mut devices: Vec<Device> = Vec::new();
        for record in records {
            match record {
                Record::Paired {
                    id,
                    name,
                    token_hash,
                    at,
                } => devices.push(Device {
                    id,
                    name,
                    token_hash,
                    paired_at: at,
                }),
                Record::Revoked { id, .. } => devices.retain(|d| d.id != id),
                Record::Unknown => {}
            }
        }
        Ok(Devices {
            log,
            devices,
            codes: HashMap::new(),
            failures: VecDeque::new(),
        })
    }

    /// The device holding `token`, by comparing SHA-256 hashes (a plain map search on a hash
    /// leaks nothing useful about the token).
    pub(crate) fn device_for_token(&self, token: &str) -> Option<String> {
        if token.is_empty() {
            return None;
        }
        let hash = sha256_hex(token.as_bytes());
        self.devices
            .iter()
            .find(|d| d.token_hash == hash)
            .map(|d| d.id.clone())
    }

    pub(crate) fn start_pairing(&mut self) -> Result<DaemonEvent, String> {
        let now = now_ms();
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
        let now = now_ms();
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
        let now = now_ms();
        let code = code.trim().to_ascii_uppercase();
        // Single use: the code is gone whether or not it was still valid.
        match self.codes.remove(&code) {
            Some(expires) if expires > now => {}
            _ => {
                self.failures.push_back(now);
                return Err(PairError::WrongCode);
            }
        }
        let name = name.trim();
        let name: String = if name.is_empty() {
            "device".into()
        } else {
            name.chars().take(NAME_MAX).collect()
        };
        let secret: [u8; 32] = random_bytes().map_err(|e| PairError::Store(e.to_string()))?;
        let token = hex(&secret);
        let device = Device {
            id: new_id("dev"),
            name,
            token_hash: sha256_hex(token.as_bytes()),
            paired_at: now,
        };
        self.log
            .append(&Record::Paired {
                id: device.id.clone(),
                name: device.name.clone(),
                token_hash: device.token_hash.clone(),
                at: now,
            })
            .map_err(|e| PairError::Store(e.to_string()))?;
        let paired = Paired {
            device: device.id.clone(),
            name: device.name.clone(),
            token,
        };
        self.devices.push(device);
        Ok(paired)
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
                    kind: None,
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
                at: now_ms(),
            })
            .map_err(|e| e.to_string())?;
        self.devices.retain(|d| d.id != device);
        Ok(())
    }
}
