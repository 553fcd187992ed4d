//! The relay server against scripted hosts and clients on loopback: every close code, the
//! limits, and the push endpoint's checks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use jucode_relay_proto::client::{ClientWs, connect_stream, next_binary};
use jucode_relay_proto::connect::{authenticate, open_socket};
use jucode_relay_proto::frame::Frame;
use jucode_relay_proto::identity::{Identity, b64};
use jucode_relay_server::push::PushConfig;
use jucode_relay_server::{Limits, Relay, RelayConfig};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use web_push_native::jwt_simple::algorithms::ES256KeyPair;

const GUARD: Duration = Duration::from_secs(20);

struct Running {
    url: String,
    http: String,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start(limits: Limits, push: Option<PushConfig>) -> Running {
    start_with(limits, push, false).await
}

async fn start_with(limits: Limits, push: Option<PushConfig>, behind_proxy: bool) -> Running {
    let relay = Relay::bind(RelayConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        limits,
        push,
        behind_proxy,
    })
    .await
    .unwrap();
    let addr = relay.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(relay.serve(async {
        let _ = stopped.await;
    }));
    Running {
        url: format!("ws://{addr}/relay/v1"),
        http: format!("http://{addr}/relay/v1"),
        _stop: stop,
    }
}

type HostWs = ClientWs;

async fn host(r: &Running, id: &Identity) -> HostWs {
    let mut ws = open_socket(&format!("{}/host", r.url), 2 * 1024 * 1024)
        .await
        .unwrap();
    authenticate(&mut ws, id, "test").await.unwrap();
    ws
}

/// The next frame a scripted host receives.
async fn host_frame(ws: &mut HostWs) -> Frame {
    let bytes = tokio::time::timeout(GUARD, next_binary(ws))
        .await
        .unwrap()
        .unwrap();
    Frame::decode(&bytes).unwrap()
}

async fn close_code(ws: &mut ClientWs) -> (u16, String) {
    loop {
        match tokio::time::timeout(GUARD, next_binary(ws)).await.unwrap() {
            Ok(_) => continue,
            Err(jucode_relay_proto::client::ClientError::Closed(code, reason)) => {
                return (code, reason);
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[tokio::test]
async fn health_and_unknown_paths() {
    let r = start(Limits::default(), None).await;
    let http = jucode_relay_proto::push::http_client().unwrap();
    let resp = http
        .get(format!("{}/healthz", r.http))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "ok");
    let resp = http.get(format!("{}/nope", r.http)).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    // No VAPID key configured: push is 501.
    let resp = http
        .get(format!("{}/push/key", r.http))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 501);
}

#[tokio::test]
async fn the_relay_serves_the_remote_page_with_its_policy() {
    let r = start(Limits::default(), None).await;
    let origin = r.http.trim_end_matches("/relay/v1").to_string();
    let http = jucode_relay_proto::push::http_client().unwrap();
    // A pairing link opens /remote#pair=…: the page, from the relay's own origin.
    let resp = http.get(format!("{origin}/remote")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let csp = resp.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("connect-src 'self'"), "{csp}");
    assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
    let html = resp.text().await.unwrap();
    assert!(html.contains("/remote/app.js"), "{html}");
    let js = http
        .get(format!("{origin}/remote/app.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(js.status(), 200);
    assert_eq!(
        js.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    // The relay's own paths stay its own.
    let resp = http
        .get(format!("{origin}/relay/v1/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
}

#[tokio::test]
async fn host_auth_failure_is_4401_and_a_newer_host_replaces_the_old_with_4409() {
    let r = start(Limits::default(), None).await;
    // A signature by another key.
    let mut ws = open_socket(&format!("{}/host", r.url), 1 << 20)
        .await
        .unwrap();
    let Some(Ok(Message::Text(challenge))) = ws.next().await else {
        panic!("no challenge")
    };
    let challenge: Value = serde_json::from_str(challenge.as_str()).unwrap();
    assert_eq!(challenge["t"], "challenge");
    let (a, b) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    let auth = json!({"t": "auth", "pub": b64(a.public()), "sig": b64(&b.sign(b"x")), "v": "1"});
    ws.send(Message::text(auth.to_string())).await.unwrap();
    assert_eq!(close_code(&mut ws).await.0, 4401);

    let mut first = host(&r, &a).await;
    let mut client = connect_stream(&r.url, &a.host_id()).await.unwrap();
    assert!(matches!(host_frame(&mut first).await, Frame::Open(_)));
    let _second = host(&r, &a).await;
    assert_eq!(close_code(&mut first).await.0, 4409);
    let (code, reason) = close_code(&mut client).await;
    assert_eq!((code, reason.as_str()), (4404, "host offline"));
}

#[tokio::test]
async fn streams_carry_data_both_ways_and_close_with_the_right_codes() {
    let r = start(
        Limits {
            streams_per_host: 2,
            max_message: 4096,
            ..Limits::default()
        },
        None,
    )
    .await;
    let id = Identity::generate().unwrap();
    // Nobody home.
    let mut offline = connect_stream(&r.url, &id.host_id()).await.unwrap();
    assert_eq!(
        close_code(&mut offline).await,
        (4404, "host offline".into())
    );

    let mut h = host(&r, &id).await;
    let mut c1 = connect_stream(&r.url, &id.host_id()).await.unwrap();
    let Frame::Open(s1) = host_frame(&mut h).await else {
        panic!()
    };
    assert_ne!(s1, 0);
    c1.send(Message::binary(vec![1, 2, 3])).await.unwrap();
    assert_eq!(host_frame(&mut h).await, Frame::Data(s1, vec![1, 2, 3]));
    h.send(Message::binary(Frame::Data(s1, vec![9]).encode()))
        .await
        .unwrap();
    assert_eq!(next_binary(&mut c1).await.unwrap(), vec![9]);

    let mut c2 = connect_stream(&r.url, &id.host_id()).await.unwrap();
    let Frame::Open(s2) = host_frame(&mut h).await else {
        panic!()
    };
    assert_ne!(s1, s2);
    // The third is one too many.
    let mut c3 = connect_stream(&r.url, &id.host_id()).await.unwrap();
    assert_eq!(close_code(&mut c3).await.0, 4429);

    // The host closes stream 1: 4410.
    h.send(Message::binary(Frame::Close(s1).encode()))
        .await
        .unwrap();
    assert_eq!(close_code(&mut c1).await, (4410, "host closed".into()));
    // A text frame from a client: 4400, and the host hears the stream closed.
    c2.send(Message::text("hi")).await.unwrap();
    assert_eq!(close_code(&mut c2).await.0, 4400);
    assert_eq!(host_frame(&mut h).await, Frame::Close(s2));

    // Over the message limit: 1009, host told.
    let mut c4 = connect_stream(&r.url, &id.host_id()).await.unwrap();
    let Frame::Open(s4) = host_frame(&mut h).await else {
        panic!()
    };
    c4.send(Message::binary(vec![0u8; 4097])).await.unwrap();
    assert_eq!(close_code(&mut c4).await.0, 1009);
    assert_eq!(host_frame(&mut h).await, Frame::Close(s4));
}

#[tokio::test]
async fn idle_streams_are_closed_and_the_host_is_told() {
    let r = start(
        Limits {
            idle: Duration::from_millis(200),
            ..Limits::default()
        },
        None,
    )
    .await;
    let id = Identity::generate().unwrap();
    let mut h = host(&r, &id).await;
    let mut c = connect_stream(&r.url, &id.host_id()).await.unwrap();
    let Frame::Open(s) = host_frame(&mut h).await else {
        panic!()
    };
    assert_eq!(close_code(&mut c).await, (1000, "idle".into()));
    assert_eq!(host_frame(&mut h).await, Frame::Close(s));
}

#[tokio::test]
async fn per_ip_rates_answer_429() {
    let r = start(
        Limits {
            connects_per_ip: 2,
            host_auth_per_ip: 1,
            ..Limits::default()
        },
        None,
    )
    .await;
    let id = Identity::generate().unwrap();
    let _h = host(&r, &id).await;
    let second = open_socket(&format!("{}/host", r.url), 1 << 20).await;
    assert!(format!("{:?}", second.err()).contains("429"));
    for _ in 0..2 {
        connect_stream(&r.url, &id.host_id()).await.unwrap();
    }
    let third = connect_stream(&r.url, &id.host_id()).await;
    assert!(format!("{:?}", third.err()).contains("429"));
}

/// A push service on loopback answering 201 and keeping the bodies.
async fn push_service() -> (String, Arc<Mutex<Vec<Vec<u8>>>>) {
    use http_body_util::BodyExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let got: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let g = got.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let g = g.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let g = g.clone();
                        async move {
                            let body = req.into_body().collect().await?.to_bytes().to_vec();
                            g.lock().unwrap().push(body);
                            let mut resp = hyper::Response::new(http_body_util::Full::new(
                                hyper::body::Bytes::new(),
                            ));
                            *resp.status_mut() = hyper::StatusCode::CREATED;
                            Ok::<_, hyper::Error>(resp)
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    (base, got)
}

#[tokio::test]
async fn the_push_endpoint_checks_everything_the_notes_ask() {
    let (service, got) = push_service().await;
    let r = start(
        Limits {
            pushes_per_host: 2,
            ..Limits::default()
        },
        Some(PushConfig {
            vapid: ES256KeyPair::generate(),
            contact: "mailto:ops@example.invalid".into(),
            extra_endpoints: vec![service.clone()],
        }),
    )
    .await;
    let http = jucode_relay_proto::push::http_client().unwrap();
    let key = http
        .get(format!("{}/push/key", r.http))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let key: Value = serde_json::from_str(&key).unwrap();
    assert_eq!(
        key["key"].as_str().map(str::len),
        Some(87),
        "65 bytes, base64url"
    );

    // A browser subscription (keys from a real P-256 key).
    let ua = web_push_native::p256::SecretKey::from_slice(&[7u8; 32]).unwrap();
    use web_push_native::p256::elliptic_curve::sec1::ToEncodedPoint;
    let p256dh = b64(ua.public_key().to_encoded_point(false).as_bytes());
    let sub = json!({"endpoint": format!("{service}s/1"), "keys": {"p256dh": p256dh, "auth": b64(&[1u8; 16])}});
    let id = Identity::generate().unwrap();
    let now = || jucode_clock::Clock::now_ms(&jucode_clock::SystemClock::new());
    let post = |body: Vec<u8>, sig: String| {
        let http = http.clone();
        let url = format!("{}/push", r.http);
        async move {
            http.post(url)
                .header("x-jucode-signature", sig)
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let payload = json!({"title": "t", "body": "b"});
    let signed = |sub: &Value, payload: &Value, ts: u64| {
        jucode_relay_proto::push::signed_body(&id, sub.clone(), payload.clone(), ts)
    };

    // Not connected yet.
    let (body, sig) = signed(&sub, &payload, now());
    assert_eq!(post(body, sig).await, 403);
    let _h = host(&r, &id).await;
    // Bad signature, stale, too big, not a push service, Getui: refused without a send.
    let (body, _) = signed(&sub, &payload, now());
    assert_eq!(post(body, b64(&id.sign(b"other"))).await, 401);
    let (body, sig) = signed(&sub, &payload, now() - 6 * 60 * 1000);
    assert_eq!(post(body, sig).await, 401);
    let (body, sig) = signed(&sub, &json!({"body": "x".repeat(4000)}), now());
    assert_eq!(post(body, sig).await, 400, "payload over 3 KB");
    // That used up the two allowed this minute (rate counts accepted-signature requests).
    let (body, sig) = signed(&sub, &payload, now());
    assert_eq!(post(body, sig).await, 204);
    let (body, sig) = signed(&sub, &payload, now());
    assert_eq!(post(body, sig).await, 429);
    assert_eq!(got.lock().unwrap().len(), 1);
    let plain = web_push_native::decrypt(
        got.lock().unwrap().remove(0),
        &ua,
        &web_push_native::Auth::clone_from_slice(&[1u8; 16]),
    )
    .unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&plain).unwrap(), payload);
}

#[tokio::test]
async fn push_refuses_endpoints_that_are_not_push_services() {
    let r = start(
        Limits::default(),
        Some(PushConfig {
            vapid: ES256KeyPair::generate(),
            contact: "mailto:ops@example.invalid".into(),
            extra_endpoints: vec![],
        }),
    )
    .await;
    let id = Identity::generate().unwrap();
    let _h = host(&r, &id).await;
    let http = jucode_relay_proto::push::http_client().unwrap();
    let ts = jucode_clock::Clock::now_ms(&jucode_clock::SystemClock::new());
    for (sub, want) in [
        (
            json!({"endpoint": "https://evil.example/x", "keys": {"p256dh": "a", "auth": "b"}}),
            400,
        ),
        (
            json!({"endpoint": "http://fcm.googleapis.com/x", "keys": {"p256dh": "a", "auth": "b"}}),
            400,
        ),
        (json!({"provider": "getui", "client_id": "c"}), 501),
    ] {
        let (body, sig) = jucode_relay_proto::push::signed_body(&id, sub.clone(), json!({}), ts);
        let status = http
            .post(format!("{}/push", r.http))
            .header("x-jucode-signature", sig)
            .body(body)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        assert_eq!(status, want, "{sub}");
    }
}

#[tokio::test]
async fn behind_a_proxy_limits_count_the_forwarded_address() {
    let r = start_with(
        Limits {
            connects_per_ip: 1,
            ..Limits::default()
        },
        None,
        true,
    )
    .await;
    let http = jucode_relay_proto::push::http_client().unwrap();
    let get = |ip: &'static str| {
        let http = http.clone();
        let url = format!("{}/connect?host=x", r.http);
        async move {
            http.get(url)
                .header("x-forwarded-for", format!("203.0.113.9, {ip}"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    // Not an upgrade (400), but counted first: the second from one address is 429.
    assert_eq!(get("10.0.0.1").await, 400);
    assert_eq!(get("10.0.0.1").await, 429);
    assert_eq!(get("10.0.0.2").await, 400);
}

/// A client that stops reading: once a write to it stalls for the write timeout its
/// connection is closed and the host hears the stream ended. Fewer frames than the client's
/// queue holds, so only the stalled write can have ended it.
#[tokio::test]
async fn a_client_that_stops_reading_is_closed_after_the_write_timeout() {
    let r = start(
        Limits {
            write_timeout: Duration::from_millis(200),
            ..Limits::default()
        },
        None,
    )
    .await;
    let id = Identity::generate().unwrap();
    let mut h = host(&r, &id).await;
    let _silent = connect_stream(&r.url, &id.host_id()).await.unwrap();
    let Frame::Open(s) = host_frame(&mut h).await else {
        panic!()
    };
    // About 7 MB: more than the socket buffers between the relay and a client not reading.
    for _ in 0..120 {
        h.send(Message::binary(Frame::Data(s, vec![5u8; 60_000]).encode()))
            .await
            .unwrap();
    }
    assert_eq!(host_frame(&mut h).await, Frame::Close(s));
    // The host link itself is unharmed: a new stream still opens.
    let _next = connect_stream(&r.url, &id.host_id()).await.unwrap();
    assert!(matches!(host_frame(&mut h).await, Frame::Open(_)));
}
