//! A fake Web Push service on `127.0.0.1:0`, standing in for a browser's push service behind
//! the relay. [`FakePush::subscription`] makes a browser's side of a subscription (a P-256 key
//! pair and an auth secret, kept here); each message posted to an endpoint is checked and
//! decrypted the way a browser and its push service would, written from the RFCs and not
//! with the library the relay encrypts with:
//!
//! - VAPID (RFC 8292): `Authorization: vapid t=<JWT>, k=<key>`; the JWT is ES256, signed by
//!   `k`, its `aud` this service's origin with the port, its `exp` in the future (system time:
//!   a push service's own clock) and its `sub` a `mailto:` or `https:` contact.
//! - Content (RFC 8291 with RFC 8188 `aes128gcm`): ECDH P-256 between the subscription's key
//!   and the sender's key from the header's key id, HKDF-SHA256 with the auth secret, then
//!   AES-128-GCM of one record.
//!
//! A message that passes is recorded with its payload and answered with the status the test
//! set (201 unless told otherwise, e.g. 410 for a subscription gone); one that fails is
//! recorded with the reason and answered 400 (bad content) or 401 (bad VAPID).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, anyhow, bail, ensure};
use base64::Engine as _;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use p256::elliptic_curve::sec1::ToEncodedPoint as _;
use ring::rand::SecureRandom as _;
use ring::{aead, hkdf, signature};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::RECV_TIMEOUT;

/// One message as the service received it.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// The endpoint's path (`/push/<name>`).
    pub path: String,
    /// The decrypted payload and what VAPID said, or why the message was refused.
    pub outcome: Result<Delivered, String>,
}

/// A message that verified and decrypted.
#[derive(Debug, Clone)]
pub struct Delivered {
    /// The plaintext, parsed as JSON.
    pub payload: Value,
    /// The VAPID public key (`k=`, base64url) the JWT verified with.
    pub vapid_key: String,
    /// The JWT's claims.
    pub claims: Value,
    /// The `TTL` header.
    pub ttl: Option<u64>,
}

/// A browser's keys for one subscription.
struct Browser {
    secret: p256::SecretKey,
    public: Vec<u8>,
    auth: [u8; 16],
}

struct State {
    status: u16,
    browsers: HashMap<String, Browser>,
}

/// The service; it stops when dropped.
pub struct FakePush {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    received: Arc<Mutex<Vec<Pushed>>>,
    count: watch::Receiver<usize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakePush {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn unb64(text: &str) -> Result<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .map_err(|e| anyhow!("not base64url: {e}"))
}

impl FakePush {
    pub async fn start() -> Result<FakePush> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("bind the fake push service")?;
        let addr = listener.local_addr().context("fake push address")?;
        let state = Arc::new(Mutex::new(State {
            status: 201,
            browsers: HashMap::new(),
        }));
        let received: Arc<Mutex<Vec<Pushed>>> = Arc::default();
        let (counter, count) = watch::channel(0usize);
        let counter = Arc::new(counter);
        let origin = format!("http://{addr}");
        let (s, r) = (state.clone(), received.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (s, r, c, origin) = (s.clone(), r.clone(), counter.clone(), origin.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        let (s, r, c, origin) = (s.clone(), r.clone(), c.clone(), origin.clone());
                        async move {
                            let status = receive(req, &origin, &s, &r).await;
                            c.send_modify(|n| *n += 1);
                            let mut resp = Response::new(Full::new(Bytes::new()));
                            *resp.status_mut() = status;
                            Ok::<_, Infallible>(resp)
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(FakePush {
            addr,
            state,
            received,
            count,
            task,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>/`: what the relay's `--push-endpoint-prefix` takes.
    pub fn prefix(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// `http://127.0.0.1:<port>`: the `aud` a VAPID token must name.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A new subscription at `/push/<name>` as a browser's `pushManager.subscribe` gives it:
    /// `{endpoint, keys: {p256dh, auth}}`. The browser's private key stays here.
    pub fn subscription(&self, name: &str) -> Result<Value> {
        let rng = ring::rand::SystemRandom::new();
        let mut raw = [0u8; 32];
        let mut auth = [0u8; 16];
        rng.fill(&mut raw).map_err(|_| anyhow!("random"))?;
        rng.fill(&mut auth).map_err(|_| anyhow!("random"))?;
        let secret = p256::SecretKey::from_slice(&raw)?;
        let public = secret
            .public_key()
            .to_encoded_point(false)
            .as_bytes()
            .to_vec();
        let path = format!("/push/{name}");
        let sub = json!({
            "endpoint": format!("http://{}{path}", self.addr),
            "keys": {"p256dh": b64(&public), "auth": b64(&auth)},
        });
        let browser = Browser {
            secret,
            public,
            auth,
        };
        lock(&self.state).browsers.insert(path, browser);
        Ok(sub)
    }

    /// The status the next messages that verify are answered with.
    pub fn set_status(&self, status: u16) {
        lock(&self.state).status = status;
    }

    /// Every message received so far, oldest first.
    pub fn received(&self) -> Vec<Pushed> {
        lock(&self.received).clone()
    }

    /// Waits (up to [`RECV_TIMEOUT`]) until `n` messages have been received in all.
    pub async fn wait_for(&self, n: usize) -> Result<Vec<Pushed>> {
        let mut count = self.count.clone();
        tokio::time::timeout(RECV_TIMEOUT, count.wait_for(|c| *c >= n))
            .await
            .with_context(|| {
                format!(
                    "the fake push service got {} messages, not {n}",
                    *self.count.borrow()
                )
            })?
            .context("the fake push service stopped")?;
        Ok(self.received())
    }

    /// Message number `n` (from 1), once it came, decrypted; an error if it was refused.
    pub async fn delivered(&self, n: usize) -> Result<Delivered> {
        let all = self.wait_for(n).await?;
        let pushed = all.get(n - 1).context("no such message")?;
        pushed
            .outcome
            .clone()
            .map_err(|why| anyhow!("message {n} to {} was refused: {why}", pushed.path))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Checks and decrypts one request; records it and picks the answer.
async fn receive(
    req: Request<Incoming>,
    origin: &str,
    state: &Mutex<State>,
    received: &Mutex<Vec<Pushed>>,
) -> StatusCode {
    let path = req.uri().path().to_string();
    let headers = req.headers().clone();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes().to_vec(),
        Err(e) => {
            lock(received).push(Pushed {
                path,
                outcome: Err(format!("body: {e}")),
            });
            return StatusCode::BAD_REQUEST;
        }
    };
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let vapid = header("authorization")
        .context("no Authorization header")
        .and_then(|h| verify_vapid(&h, origin));
    let (status, outcome) = match vapid {
        Err(e) => (StatusCode::UNAUTHORIZED, Err(format!("VAPID: {e:#}"))),
        Ok((vapid_key, claims)) => {
            let decrypted = {
                let st = lock(state);
                match st.browsers.get(&path) {
                    None => Err(anyhow!("no subscription at {path}")),
                    Some(browser) => check_content(header("content-encoding"))
                        .and_then(|()| decrypt(browser, &body)),
                }
            };
            match decrypted.and_then(|plain| {
                serde_json::from_slice::<Value>(&plain).context("the payload is not JSON")
            }) {
                Err(e) => (StatusCode::BAD_REQUEST, Err(format!("{e:#}"))),
                Ok(payload) => {
                    let status = StatusCode::from_u16(lock(state).status)
                        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                    let ttl = header("ttl").and_then(|t| t.parse().ok());
                    (
                        status,
                        Ok(Delivered {
                            payload,
                            vapid_key,
                            claims,
                            ttl,
                        }),
                    )
                }
            }
        }
    };
    lock(received).push(Pushed { path, outcome });
    status
}

fn check_content(encoding: Option<String>) -> Result<()> {
    ensure!(
        encoding.as_deref() == Some("aes128gcm"),
        "Content-Encoding is {encoding:?}, not aes128gcm"
    );
    Ok(())
}

/// Verifies `vapid t=<jwt>, k=<key>`; returns the key and the claims.
fn verify_vapid(header: &str, origin: &str) -> Result<(String, Value)> {
    let rest = header
        .strip_prefix("vapid ")
        .context("the scheme is not vapid")?;
    let mut token = None;
    let mut key = None;
    for part in rest.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => token = Some(v.trim().to_string()),
            Some(("k", v)) => key = Some(v.trim().to_string()),
            _ => bail!("unexpected part {part:?}"),
        }
    }
    let token = token.context("no t=")?;
    let key = key.context("no k=")?;
    let public = unb64(&key)?;
    ensure!(
        public.len() == 65 && public[0] == 4,
        "k is not an uncompressed P-256 point"
    );
    let mut parts = token.split('.');
    let (Some(head_text), Some(claims), Some(sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        bail!("the token is not a JWS of three parts");
    };
    let head: Value = serde_json::from_slice(&unb64(head_text)?).context("JWT header")?;
    ensure!(head["alg"] == "ES256", "alg is {}, not ES256", head["alg"]);
    let signed = format!("{head_text}.{claims}");
    signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &public)
        .verify(signed.as_bytes(), &unb64(sig)?)
        .map_err(|_| anyhow!("the signature does not verify with k"))?;
    let claims: Value = serde_json::from_slice(&unb64(claims)?).context("JWT claims")?;
    ensure!(
        claims["aud"] == origin,
        "aud is {}, not this service's origin {origin}",
        claims["aud"]
    );
    let now = {
        use jucode_clock::Clock as _;
        jucode_clock::SystemClock::new().now_ms() / 1000
    };
    let exp = claims["exp"].as_u64().context("no exp")?;
    ensure!(exp > now, "exp {exp} is not in the future (now {now})");
    ensure!(
        exp <= now + 24 * 60 * 60,
        "exp {exp} is more than 24 hours away"
    );
    let sub = claims["sub"].as_str().unwrap_or_default();
    ensure!(
        sub.starts_with("mailto:") || sub.starts_with("https:"),
        "sub {sub:?} is not a mailto: or https: contact"
    );
    Ok((key, claims))
}

/// An output length for ring's HKDF.
struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

fn hkdf_expand(prk: &hkdf::Prk, info: &[u8], out: &mut [u8]) -> Result<()> {
    prk.expand(&[info], Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .map_err(|_| anyhow!("HKDF expand"))
}

/// RFC 8291 decryption of an `aes128gcm` body holding one record.
fn decrypt(browser: &Browser, body: &[u8]) -> Result<Vec<u8>> {
    // Header: salt (16), record size (4), key id length (1), key id (the sender's key).
    ensure!(body.len() > 21, "the body is shorter than its header");
    let salt = &body[..16];
    let rs = u32::from_be_bytes([body[16], body[17], body[18], body[19]]) as usize;
    let idlen = body[20] as usize;
    ensure!(body.len() >= 21 + idlen, "the key id runs past the body");
    let sender = &body[21..21 + idlen];
    let record = &body[21 + idlen..];
    ensure!(idlen == 65, "the key id is {idlen} bytes, not a P-256 key");
    ensure!(rs >= 18, "record size {rs} is too small");
    ensure!(
        record.len() <= rs,
        "more than one record ({} bytes, record size {rs})",
        record.len()
    );
    let sender_key = p256::PublicKey::from_sec1_bytes(sender)
        .map_err(|_| anyhow!("the key id is not a P-256 point"))?;
    let shared =
        p256::ecdh::diffie_hellman(browser.secret.to_nonzero_scalar(), sender_key.as_affine());
    // The input key material mixes the auth secret with both public keys.
    let prk_key = hkdf::Salt::new(hkdf::HKDF_SHA256, &browser.auth)
        .extract(shared.raw_secret_bytes().as_slice());
    let mut key_info = b"WebPush: info\0".to_vec();
    key_info.extend_from_slice(&browser.public);
    key_info.extend_from_slice(sender);
    let mut ikm = [0u8; 32];
    hkdf_expand(&prk_key, &key_info, &mut ikm)?;
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(&ikm);
    let mut cek = [0u8; 16];
    let mut nonce = [0u8; 12];
    hkdf_expand(&prk, b"Content-Encoding: aes128gcm\0", &mut cek)?;
    hkdf_expand(&prk, b"Content-Encoding: nonce\0", &mut nonce)?;
    let key = aead::LessSafeKey::new(
        aead::UnboundKey::new(&aead::AES_128_GCM, &cek).map_err(|_| anyhow!("AES key"))?,
    );
    // The first record's sequence number is 0, so its nonce is the derived one as it is.
    let mut buf = record.to_vec();
    let plain = key
        .open_in_place(
            aead::Nonce::assume_unique_for_key(nonce),
            aead::Aad::empty(),
            &mut buf,
        )
        .map_err(|_| anyhow!("AES-GCM: the record does not decrypt"))?;
    // Padding: the data, a delimiter (2 for the last record), then zeros.
    let end = plain
        .iter()
        .rposition(|b| *b != 0)
        .context("the record holds only padding")?;
    ensure!(
        plain[end] == 2,
        "the last record's delimiter is {}, not 2",
        plain[end]
    );
    Ok(plain[..end].to_vec())
}
