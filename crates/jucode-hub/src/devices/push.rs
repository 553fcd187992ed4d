//! Notification subscriptions of paired devices (`push.json`) and sending notifications
//! through the relay's push endpoint.

use jucode_protocol::daemon::{DaemonEvent, PushOp, PushResult};
use jucode_store::StoreError;
use serde::{Deserialize, Serialize};

use super::{Device, DeviceError, RelayLink};
use crate::HubError;
use crate::cx::OpCx;
use crate::error::OpError;

pub(super) const PUSH_FILE: &str = "push.json";

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
    pub(crate) fn parse(value: &serde_json::Value) -> Result<PushTarget, DeviceError> {
        let target: PushTarget = serde_json::from_value(value.clone()).map_err(|_| {
            DeviceError::Subscription(
                "push_subscribe: subscription needs endpoint and keys {p256dh, auth}, or provider \"getui\" and client_id",
            )
        })?;
        match &target {
            PushTarget::Web { endpoint, keys } => {
                // http only to this machine: a self-hosted push service behind the relay.
                let loopback = ["http://127.0.0.1", "http://[::1]", "http://localhost"]
                    .iter()
                    .any(|p| endpoint.starts_with(p));
                if !(endpoint.starts_with("https://") || loopback) || endpoint.len() > 2048 {
                    return Err(DeviceError::Subscription(
                        "push_subscribe: endpoint must be an https URL",
                    ));
                }
                if keys.p256dh.is_empty() || keys.auth.is_empty() {
                    return Err(DeviceError::Subscription(
                        "push_subscribe: keys p256dh and auth are needed",
                    ));
                }
            }
            PushTarget::Getui {
                provider,
                client_id,
            } => {
                if provider != "getui" || client_id.is_empty() || client_id.len() > 256 {
                    return Err(DeviceError::Subscription(
                        "push_subscribe: provider must be getui with a client_id",
                    ));
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
    pub(super) fn open(
        path: std::path::PathBuf,
        devices: &[Device],
    ) -> Result<PushSubscriptions, HubError> {
        let mut subs: Vec<PushSubscription> = jucode_store::read_json(&path)?.unwrap_or_default();
        // A device revoked while the file could not be written loses its subscriptions now.
        subs.retain(|s| devices.iter().any(|d| d.id == s.device));
        Ok(PushSubscriptions { path, subs })
    }

    fn save(&self) -> Result<(), StoreError> {
        jucode_store::write_json_atomic(&self.path, &self.subs)
    }

    /// Adds (or moves to `device`) a subscription.
    pub(crate) fn subscribe(&mut self, device: &str, target: PushTarget) -> Result<(), StoreError> {
        self.subs.retain(|s| s.target.key() != target.key());
        self.subs.push(PushSubscription {
            device: device.to_string(),
            target,
        });
        self.save()
    }

    /// Removes a device's subscription by endpoint or client id; whether one was there.
    pub(crate) fn unsubscribe(&mut self, device: &str, key: &str) -> Result<bool, StoreError> {
        let before = self.subs.len();
        self.subs
            .retain(|s| !(s.device == device && s.target.key() == key));
        if self.subs.len() == before {
            return Ok(false);
        }
        self.save().map(|()| true)
    }

    /// Drops a subscription the push service says is gone (410), whoever holds it.
    pub(crate) fn drop_target(&mut self, target: &PushTarget) -> Result<(), StoreError> {
        self.subs.retain(|s| s.target.key() != target.key());
        self.save()
    }

    pub(super) fn remove_device(&mut self, device: &str) -> Result<(), StoreError> {
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

/// A notification's payload: `body` clipped to 300 characters plus `…`.
pub fn push_payload(title: &str, body: &str, tag: &str, url: Option<&str>) -> serde_json::Value {
    crate::Notification {
        title: title.into(),
        body: body.into(),
        tag: tag.into(),
        url: url.map(str::to_string),
        session: None,
    }
    .payload()
}

impl crate::Hub {
    /// `push_subscribe`, `push_unsubscribe` and `push_test` (the router let only paired
    /// devices through).
    pub(crate) async fn push_op(
        &self,
        device: &str,
        op: PushOp,
    ) -> Result<DaemonEvent, DeviceError> {
        let event = match op {
            PushOp::PushSubscribe { subscription } => {
                let target = PushTarget::parse(&subscription)?;
                let mut inner = self.lock();
                if !inner.devices.is_device(device) {
                    return Err(DeviceError::NotPaired);
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
                    return Err(DeviceError::UnsubscribeUsage);
                };
                self.lock().devices.push().unsubscribe(device, key)?;
                DaemonEvent::PushUnsubscribed
            }
            PushOp::PushTest => self.push_test(device).await,
        };
        Ok(event)
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

    /// Sends `note` to every subscription of every device, in a task of its own; a 410 answer
    /// drops the subscription. Takes the hub lock: never call it while holding it (the
    /// triggers in `notifications.rs` queue under the lock and a task sends afterwards).
    pub fn notify(self: &std::sync::Arc<Self>, note: crate::Notification) {
        let hub = self.clone();
        tokio::spawn(async move {
            hub.send_notification(&note).await;
        });
    }

    /// Sends `note` to every subscription of every device and waits for the answers.
    pub(crate) async fn send_notification(&self, note: &crate::Notification) {
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
        for result in self.send_pushes(targets, link, note.payload()).await {
            if let Some(error) = result.error {
                tracing::info!(service = result.service, "notification not sent: {error}");
            }
        }
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
                    link.push(sub, payload.clone())
                        .await
                        .map_err(DeviceError::from)
                }
                _ => Err(DeviceError::PushRelayOff),
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
                        error: Some(error.to_string()),
                    });
                }
            }
        }
        results
    }
}

/// Answers `push_subscribe`, `push_unsubscribe` and `push_test` (the router let only paired
/// devices through).
pub(crate) async fn handle(cx: &OpCx<'_>, op: PushOp) -> Result<(), OpError> {
    let crate::Auth::Device(device) = &cx.auth else {
        return Err(DeviceError::NotPaired.into());
    };
    let event = cx.hub.push_op(device, op).await?;
    cx.reply(event);
    Ok(())
}
