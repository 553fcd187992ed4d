//! The push endpoint (relay-protocol §9): a connected host asks the relay to deliver a Web
//! Push notification; the relay checks the request, signs with VAPID (RFC 8292), encrypts
//! with aes128gcm (RFC 8291) and posts it to the browser's push service.

use std::path::Path;
use std::sync::Arc;

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use jucode_relay_proto::identity::{b64, host_id, unb64};
use serde::Deserialize;
use serde_json::Value;
use web_push_native::jwt_simple::algorithms::{ECDSAP256KeyPairLike, ES256KeyPair};
use web_push_native::jwt_simple::claims::Claims;
use web_push_native::{Auth, WebPushBuilder};

use crate::{Body, State, text};

/// Largest request body read (the payload limit is checked separately).
const MAX_BODY: usize = 16 * 1024;

/// Push services a request may name: the browsers' own. Anything else would make the relay
/// an open HTTP proxy.
const PUSH_SERVICES: &[&str] = &[
    "fcm.googleapis.com",
    "android.googleapis.com",
    "updates.push.services.mozilla.com",
    "web.push.apple.com",
    "notify.windows.com",
    "push.services.mozilla.com",
];

/// How long a push service may keep a message for an offline browser (the `TTL` header).
const MESSAGE_TTL: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// How long the VAPID token is valid: RFC 8292 allows at most 24 hours, so half of that
/// leaves room for a push service whose clock runs ahead.
const VAPID_VALID: std::time::Duration = std::time::Duration::from_secs(12 * 60 * 60);

/// Web Push settings.
pub struct PushConfig {
    /// The VAPID key (P-256).
    pub vapid: ES256KeyPair,
    /// The `sub` claim: a `mailto:` or `https:` contact for push services.
    pub contact: String,
    /// More endpoint prefixes to accept (a self-hosted push service; tests on loopback).
    pub extra_endpoints: Vec<String>,
}

/// Why the VAPID key file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum VapidError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
}

/// Loads the VAPID private key (32 bytes, base64url, one line) or creates it (mode 0600).
pub fn load_or_create_vapid(path: &Path) -> Result<ES256KeyPair, VapidError> {
    let err = |message: String| VapidError::File {
        path: path.display().to_string(),
        message,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let raw = unb64(text.trim()).ok_or_else(|| err("not base64url".into()))?;
            ES256KeyPair::from_bytes(&raw).map_err(|e| err(e.to_string()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = ES256KeyPair::generate();
            let mut line = b64(&key.to_bytes());
            line.push('\n');
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
            }
            jucode_relay_store_write(path, line.as_bytes()).map_err(err)?;
            Ok(key)
        }
        Err(e) => Err(err(e.to_string())),
    }
}

/// Writes a new file readable by its owner only.
fn jucode_relay_store_write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| e.to_string())?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| e.to_string())
}

pub(crate) struct Pusher {
    config: PushConfig,
    public: String,
    http: Option<reqwest::Client>,
}

impl Pusher {
    pub(crate) fn new(config: PushConfig) -> Pusher {
        let public = b64(&config.vapid.key_pair().public_key().to_bytes_uncompressed());
        Pusher {
            config,
            public,
            http: jucode_relay_proto::push::http_client()
                .inspect_err(|e| tracing::warn!("push: no HTTP client: {e}"))
                .ok(),
        }
    }

    fn endpoint_allowed(&self, endpoint: &str) -> bool {
        if self
            .config
            .extra_endpoints
            .iter()
            .any(|p| endpoint.starts_with(p.as_str()))
        {
            return true;
        }
        let Ok(uri) = endpoint.parse::<http::Uri>() else {
            return false;
        };
        uri.scheme_str() == Some("https")
            && uri.port().is_none()
            && uri.host().is_some_and(|h| {
                PUSH_SERVICES
                    .iter()
                    .any(|s| h == *s || h.ends_with(&format!(".{s}")))
            })
    }
}

/// `GET /relay/v1/push/key`: the VAPID public key pages subscribe with.
pub(crate) fn key(state: &State) -> Response<Body> {
    match &state.push {
        None => text(StatusCode::NOT_IMPLEMENTED, "push is not configured\n"),
        Some(p) => {
            let mut r = Response::new(Body::from(serde_json::json!({"key": p.public}).to_string()));
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            r
        }
    }
}

#[derive(Deserialize)]
struct PushRequest {
    #[serde(rename = "pub")]
    public: String,
    ts: u64,
    subscription: Value,
    payload: Value,
}

#[derive(Deserialize)]
struct WebSubscription {
    endpoint: String,
    keys: Keys,
}

#[derive(Deserialize)]
struct Keys {
    p256dh: String,
    auth: String,
}

pub(crate) async fn handle(req: Request<Incoming>, state: &Arc<State>) -> Response<Body> {
    let Some(pusher) = &state.push else {
        return text(StatusCode::NOT_IMPLEMENTED, "push is not configured\n");
    };
    let signature = req
        .headers()
        .get(jucode_relay_proto::push::SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(unb64);
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return text(StatusCode::BAD_REQUEST, "body too large\n"),
    };
    let Ok(request) = serde_json::from_slice::<PushRequest>(&body) else {
        return text(StatusCode::BAD_REQUEST, "not a push request\n");
    };
    let Some(public) = unb64(&request.public).filter(|k| k.len() == 32) else {
        return text(StatusCode::BAD_REQUEST, "bad pub\n");
    };
    let host = host_id(&public);
    let connected = state.hosts().get(&host).is_some_and(|h| h.public == public);
    if !connected {
        return text(StatusCode::FORBIDDEN, "host not connected\n");
    }
    let mut signed = jucode_relay_proto::PUSH_CONTEXT.to_vec();
    signed.extend_from_slice(&body);
    let verified = signature.is_some_and(|sig| {
        ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &public)
            .verify(&signed, &sig)
            .is_ok()
    });
    if !verified {
        return text(StatusCode::UNAUTHORIZED, "bad signature\n");
    }
    let now = now_ms();
    let skew = u64::try_from(state.limits.push_skew.as_millis()).unwrap_or(u64::MAX);
    if request.ts.abs_diff(now) > skew {
        return text(StatusCode::UNAUTHORIZED, "stale request\n");
    }
    if !state.rates().push(&host, &state.limits) {
        return text(StatusCode::TOO_MANY_REQUESTS, "too many pushes\n");
    }
    let payload = request.payload.to_string();
    if payload.len() > state.limits.push_payload {
        return text(StatusCode::BAD_REQUEST, "payload too large\n");
    }
    if request.subscription.get("provider").is_some() {
        return text(
            StatusCode::NOT_IMPLEMENTED,
            "only Web Push is configured on this relay\n",
        );
    }
    let Ok(sub) = serde_json::from_value::<WebSubscription>(request.subscription) else {
        return text(StatusCode::BAD_REQUEST, "bad subscription\n");
    };
    if !pusher.endpoint_allowed(&sub.endpoint) {
        return text(StatusCode::BAD_REQUEST, "not a push service endpoint\n");
    }
    let status = deliver(pusher, &sub, payload.into_bytes()).await;
    text(status, "")
}

/// Encrypts and posts one message; maps the push service's answer to ours.
async fn deliver(pusher: &Pusher, sub: &WebSubscription, payload: Vec<u8>) -> StatusCode {
    let (Ok(uri), Some(p256dh), Some(auth)) = (
        sub.endpoint.parse::<http::Uri>(),
        unb64(&sub.keys.p256dh),
        unb64(&sub.keys.auth).filter(|a| a.len() == 16),
    ) else {
        return StatusCode::BAD_REQUEST;
    };
    let Ok(ua_public) = web_push_native::p256::PublicKey::from_sec1_bytes(&p256dh) else {
        return StatusCode::BAD_REQUEST;
    };
    let auth = Auth::clone_from_slice(&auth);
    // Without the library's VAPID: it leaves the port out of `aud` (see `vapid_header`).
    let request = match WebPushBuilder::new(uri.clone(), ua_public, auth)
        .with_valid_duration(MESSAGE_TTL)
        .build(payload)
    {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("push: {e}");
            return StatusCode::BAD_GATEWAY;
        }
    };
    let authorization = match vapid_header(&pusher.config, &pusher.public, &uri, VAPID_VALID) {
        Ok(value) => value,
        Err(e) => {
            tracing::warn!("push: VAPID: {e}");
            return StatusCode::BAD_GATEWAY;
        }
    };
    let Some(http) = &pusher.http else {
        return StatusCode::BAD_GATEWAY;
    };
    let (parts, body) = request.into_parts();
    let mut out = http
        .post(parts.uri.to_string())
        .body(body)
        .header(hyper::header::AUTHORIZATION, authorization);
    for (name, value) in &parts.headers {
        out = out.header(name.as_str(), value.as_bytes());
    }
    match out.send().await {
        Ok(r) => match r.status().as_u16() {
            200..=299 => StatusCode::NO_CONTENT,
            404 | 410 => StatusCode::GONE,
            429 => StatusCode::TOO_MANY_REQUESTS,
            other => {
                tracing::info!("push service answered {other}");
                StatusCode::BAD_GATEWAY
            }
        },
        Err(e) => {
            tracing::info!("push service: {e}");
            StatusCode::BAD_GATEWAY
        }
    }
}

/// Why no VAPID header could be made.
#[derive(Debug, thiserror::Error)]
pub enum VapidHeaderError {
    #[error("the endpoint has no scheme or host")]
    NoOrigin,
    #[error("signing failed: {0}")]
    Sign(String),
}

/// The origin of `uri` as RFC 6454 writes it: scheme, host and the port unless it is the
/// scheme's default. A self-hosted push service on `127.0.0.1:<port>` checks the port too.
pub fn origin(uri: &http::Uri) -> Option<String> {
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let host = uri.host()?.to_ascii_lowercase();
    let default = match scheme.as_str() {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    };
    Some(match uri.port_u16() {
        Some(port) if Some(port) != default => format!("{scheme}://{host}:{port}"),
        _ => format!("{scheme}://{host}"),
    })
}

/// The `Authorization` header of RFC 8292: `vapid t=<ES256 JWT>, k=<public key>`, the JWT's
/// `aud` the endpoint's origin and `sub` the contact.
pub fn vapid_header(
    config: &PushConfig,
    public: &str,
    endpoint: &http::Uri,
    valid: std::time::Duration,
) -> Result<String, VapidHeaderError> {
    let audience = origin(endpoint).ok_or(VapidHeaderError::NoOrigin)?;
    let claims = Claims::create(valid.into())
        .with_audience(audience)
        .with_subject(&config.contact);
    let token = config
        .vapid
        .sign(claims)
        .map_err(|e| VapidHeaderError::Sign(e.to_string()))?;
    Ok(format!("vapid t={token}, k={public}"))
}

fn now_ms() -> u64 {
    use jucode_clock::Clock as _;
    jucode_clock::SystemClock::new().now_ms()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use web_push_native::jwt_simple::algorithms::ECDSAP256PublicKeyLike;
    use web_push_native::jwt_simple::claims::NoCustomClaims;
    use web_push_native::jwt_simple::common::VerificationOptions;

    use super::*;

    fn uri(text: &str) -> http::Uri {
        text.parse().unwrap()
    }

    #[test]
    fn the_origin_keeps_a_port_that_is_not_the_default() {
        assert_eq!(
            origin(&uri("http://127.0.0.1:8123/push/a?x=1")).as_deref(),
            Some("http://127.0.0.1:8123")
        );
        assert_eq!(
            origin(&uri("https://fcm.googleapis.com/fcm/send/abc")).as_deref(),
            Some("https://fcm.googleapis.com")
        );
        assert_eq!(
            origin(&uri("https://Push.Example:443/x")).as_deref(),
            Some("https://push.example")
        );
        assert_eq!(
            origin(&uri("https://push.example:8443/x")).as_deref(),
            Some("https://push.example:8443")
        );
        assert_eq!(origin(&uri("/relative")), None);
    }

    #[test]
    fn the_vapid_token_names_the_origin_with_its_port_and_verifies_with_k() {
        let config = PushConfig {
            vapid: ES256KeyPair::generate(),
            contact: "mailto:ops@example.com".into(),
            extra_endpoints: vec![],
        };
        let public = b64(&config.vapid.key_pair().public_key().to_bytes_uncompressed());
        let endpoint = uri("http://127.0.0.1:40001/push/device-1");
        let header = vapid_header(
            &config,
            &public,
            &endpoint,
            std::time::Duration::from_secs(3600),
        )
        .unwrap();
        let rest = header.strip_prefix("vapid t=").unwrap();
        let (token, k) = rest.split_once(", k=").unwrap();
        assert_eq!(k, public);
        let key =
            web_push_native::jwt_simple::algorithms::ES256PublicKey::from_bytes(&unb64(k).unwrap())
                .unwrap();
        let options = VerificationOptions {
            allowed_audiences: Some(["http://127.0.0.1:40001".to_string()].into()),
            ..Default::default()
        };
        let claims = key
            .verify_token::<NoCustomClaims>(token, Some(options))
            .unwrap();
        assert_eq!(claims.subject.as_deref(), Some("mailto:ops@example.com"));
        let exp = claims.expires_at.unwrap().as_secs();
        let iat = claims.issued_at.unwrap().as_secs();
        assert_eq!(exp - iat, 3600);
        // Another origin (the port left out, as the library wrote it) is refused.
        let wrong = VerificationOptions {
            allowed_audiences: Some(["http://127.0.0.1".to_string()].into()),
            ..Default::default()
        };
        assert!(
            key.verify_token::<NoCustomClaims>(token, Some(wrong))
                .is_err()
        );
    }
}
