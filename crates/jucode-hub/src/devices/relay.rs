//! The relay connection as the hub sees it: the link the relay task attaches, its state,
//! the `relay_set` switch and pairing links.

use jucode_protocol::daemon::DaemonEvent;

use super::DeviceError;

/// What the hub knows of the relay connection, kept current by the relay task.
#[derive(Default)]
pub(crate) struct RelayState {
    pub(crate) link: Option<std::sync::Arc<dyn crate::RelayLink>>,
    pub(crate) connected: bool,
    pub(crate) host: Option<String>,
    /// Whether the relay connection should be up; the relay task watches it.
    pub(crate) switch: Option<tokio::sync::watch::Sender<bool>>,
}

/// What the hub asks of the relay connection, which lives outside the hub (`jucode-relay-host`)
/// so the hub stays transport-free.
pub trait RelayLink: Send + Sync {
    /// The host id and the Noise static public key (base64url), made on first use.
    fn identity(&self) -> Result<(String, String), RelayLinkError>;
    /// Sends one notification through the relay's push endpoint: the relay's HTTP status.
    fn push(
        &self,
        subscription: serde_json::Value,
        payload: serde_json::Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<u16, RelayLinkError>> + Send>>;
}

/// The implementor's own error, boxed because the hub cannot name the relay crate's types.
pub type LinkSource = Box<dyn std::error::Error + Send + Sync>;

/// Why a [`RelayLink`] call failed. Its text is the source's own: clients see it as it is, in
/// `pair_link`'s error and a `push_test` result.
#[derive(Debug, thiserror::Error)]
pub enum RelayLinkError {
    /// The relay identity could not be read or made.
    #[error(transparent)]
    Identity(LinkSource),
    /// A notification did not reach the push service.
    #[error(transparent)]
    Push(LinkSource),
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
    ) -> Result<(String, String), super::PairError> {
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
    pub(crate) fn relay_set(&self, enabled: bool) -> Result<DaemonEvent, DeviceError> {
        {
            let mut inner = self.lock();
            let settings = crate::Settings { relay: enabled };
            jucode_store::write_json_atomic(&inner.store.path("settings.json"), &settings)?;
            inner.settings = settings;
        }
        let on = self.relay_enabled();
        if let Some(tx) = &self.lock().devices.relay.switch {
            tx.send_replace(on);
        }
        Ok(self.relay_status_event())
    }

    /// `pair_link`: a pairing code inside the link the phone opens.
    pub(crate) fn pair_link_event(&self) -> Result<DaemonEvent, DeviceError> {
        if !self.relay_enabled() {
            return Err(DeviceError::RelayOff);
        }
        let origin = self
            .config
            .relay_url
            .as_deref()
            .and_then(app_origin)
            .ok_or(DeviceError::RelayUrl)?;
        let link = self
            .lock()
            .devices
            .relay
            .link
            .clone()
            .ok_or(DeviceError::RelayStarting)?;
        let (host, key) = link.identity()?;
        let mut inner = self.lock();
        inner.devices.relay.host = Some(host.clone());
        let (code, expires_at) = inner.devices.start_pairing()?;
        Ok(DaemonEvent::PairLink {
            link: format!("{origin}/remote#pair={host}.{key}.{code}"),
            code,
            expires_at,
        })
    }
}
