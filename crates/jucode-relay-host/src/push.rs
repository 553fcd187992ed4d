//! Notifications through the relay (relay-protocol §9): the hub's push requests sent as signed
//! `POST /relay/v1/push`. The relay does the VAPID signing and Web Push encryption, so it reads
//! the payload: keep titles and bodies free of anything sensitive.

use jucode_relay_proto::identity::Identity;
use jucode_relay_proto::push::{SIGNATURE_HEADER, http_client, push_endpoint, signed_body};
use serde_json::Value;

/// Why a push could not be handed to the relay.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("the relay URL has no push endpoint (it must start with ws:// or wss://)")]
    Url,
    #[error("the relay could not be reached: {0}")]
    Http(String),
}

/// Sends push requests to one relay.
#[derive(Clone)]
pub struct PushClient {
    endpoint: Option<String>,
    http: Option<reqwest::Client>,
}

impl PushClient {
    pub fn new(relay_url: &str) -> PushClient {
        PushClient {
            endpoint: push_endpoint(relay_url),
            http: http_client()
                .inspect_err(|e| tracing::warn!("push: no HTTP client: {e}"))
                .ok(),
        }
    }

    /// Sends one notification; the relay's HTTP status (204 sent, 410 subscription gone, …).
    pub async fn send(
        &self,
        identity: &Identity,
        subscription: Value,
        payload: Value,
    ) -> Result<u16, PushError> {
        let (Some(endpoint), Some(http)) = (&self.endpoint, &self.http) else {
            return Err(PushError::Url);
        };
        let body = signed_body(identity, subscription, payload, now_ms());
        let response = http
            .post(endpoint)
            .header("content-type", "application/json")
            .header(SIGNATURE_HEADER, body.1)
            .body(body.0)
            .send()
            .await
            .map_err(|e| PushError::Http(e.to_string()))?;
        Ok(response.status().as_u16())
    }
}

fn now_ms() -> u64 {
    use jucode_clock::Clock as _;
    jucode_clock::SystemClock::new().now_ms()
}
