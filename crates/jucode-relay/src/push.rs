//! Notifications through the relay (relay-protocol §9): a signed `POST /relay/v1/push`. The
//! relay does the VAPID signing and Web Push encryption, so it reads the payload: keep titles
//! and bodies free of anything sensitive.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::identity::{Identity, b64};

/// The header carrying the Ed25519 signature over `jucode-relay-push-v1:` ‖ body.
pub const SIGNATURE_HEADER: &str = "x-jucode-signature";

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

/// `wss://h/relay/v1` → `https://h/relay/v1/push` (and `ws` → `http`).
pub fn push_endpoint(relay_url: &str) -> Option<String> {
    let (scheme, rest) = relay_url.split_once("://")?;
    let web = match scheme {
        "wss" => "https",
        "ws" => "http",
        _ => return None,
    };
    let base = rest.split(['?', '#']).next()?.trim_end_matches('/');
    Some(format!("{web}://{base}/push"))
}

/// An HTTP client on rustls with the ring provider (no OpenSSL, no aws-lc build).
pub fn http_client() -> Result<reqwest::Client, String> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .timeout(std::time::Duration::from_secs(20))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())
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

/// The exact body bytes and their signature header value.
pub fn signed_body(
    identity: &Identity,
    subscription: Value,
    payload: Value,
    ts: u64,
) -> (Vec<u8>, String) {
    let body = json!({
        "pub": b64(identity.public()),
        "ts": ts,
        "subscription": subscription,
        "payload": payload,
    })
    .to_string()
    .into_bytes();
    let mut signed = crate::PUSH_CONTEXT.to_vec();
    signed.extend_from_slice(&body);
    let signature = b64(&identity.sign(&signed));
    (body, signature)
}

fn now_ms() -> u64 {
    use jucode_clock::Clock as _;
    jucode_clock::SystemClock::new().now_ms()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_from_relay_url() {
        assert_eq!(
            push_endpoint("wss://app.example/relay/v1").as_deref(),
            Some("https://app.example/relay/v1/push")
        );
        assert_eq!(
            push_endpoint("ws://127.0.0.1:9/relay/v1/").as_deref(),
            Some("http://127.0.0.1:9/relay/v1/push")
        );
        assert_eq!(push_endpoint("http://x/relay/v1"), None);
    }

    #[test]
    fn the_signature_covers_the_exact_body() {
        let dir = tempfile::tempdir().unwrap();
        let id = Identity::load_or_create(dir.path()).unwrap();
        let (body, sig) = signed_body(
            &id,
            json!({"endpoint": "https://p/x"}),
            json!({"title": "t"}),
            5,
        );
        let mut signed = crate::PUSH_CONTEXT.to_vec();
        signed.extend_from_slice(&body);
        let key = ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, id.public());
        key.verify(&signed, &crate::identity::unb64(&sig).unwrap())
            .unwrap();
        signed.push(b' ');
        assert!(
            key.verify(&signed, &crate::identity::unb64(&sig).unwrap())
                .is_err()
        );
    }
}
