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
    let request = match WebPushBuilder::new(uri, ua_public, auth)
        .with_valid_duration(std::time::Duration::from_secs(24 * 60 * 60))
        .with_vapid(&pusher.config.vapid, &pusher.config.contact)
        .build(payload)
    {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("push: {e}");
            return StatusCode::BAD_GATEWAY;
        }
    };
    let Some(http) = &pusher.http else {
        return StatusCode::BAD_GATEWAY;
    };
    let (parts, body) = request.into_parts();
    let mut out = http.post(parts.uri.to_string()).body(body);
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

fn now_ms() -> u64 {
    use jucode_clock::Clock as _;
    jucode_clock::SystemClock::new().now_ms()
}
