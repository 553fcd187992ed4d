//! The host link against a scripted relay on loopback: challenge auth with the identity's
//! Ed25519 key, host id, and pings answered while the daemon is otherwise idle.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// The handshake callback's error type is tungstenite's, not ours.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use jucode_hub::{Auth, Hub, HubConfig, Outgoing};
use jucode_relay_proto::identity::{b64, host_id, unb64};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

const GUARD: Duration = Duration::from_secs(30);

async fn next_text(ws: &mut tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>) -> Value {
    loop {
        match ws.next().await.unwrap().unwrap() {
            Message::Text(t) => return serde_json::from_str(t.as_str()).unwrap(),
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

async fn relay_status(hub: &Arc<Hub>) -> Value {
    local_request(hub, r#"{"op":"relay_status","id":1}"#).await
}

/// Sends `frame` (with `"id":1`) as a local client and returns the reply.
async fn local_request(hub: &Arc<Hub>, frame: &str) -> Value {
    let mut conn = hub.connect(Auth::Local);
    hub.handle(conn.id, frame).await;
    loop {
        let Some(Outgoing::Frame(text)) = conn.frames.recv().await else {
            panic!("no reply")
        };
        let v: Value = serde_json::from_str(&text).unwrap();
        if v["id"] == 1 {
            hub.disconnect(conn.id);
            return v;
        }
    }
}

#[tokio::test]
async fn an_idle_daemon_authenticates_and_answers_every_ping() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join(".jucode");
    std::fs::create_dir_all(home.join("daemon")).unwrap();
    std::fs::write(home.join("daemon/settings.json"), r#"{"relay":true}"#).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/relay/v1", listener.local_addr().unwrap());
    let hub = Hub::open(HubConfig {
        home: home.clone(),
        user_home: dir.path().to_path_buf(),
        version: "test".into(),
        relay_url: Some(url.clone()),
        engines: HashMap::new(),
        clock: jucode_clock::SystemClock::shared(),
        agent_mcp: Default::default(),
        billing: None,
        online: Default::default(),
    })
    .unwrap();
    let task = jucode_relay_host::start(hub.clone(), url, "9.9.9".into());

    let (tcp, _) = tokio::time::timeout(GUARD, listener.accept())
        .await
        .unwrap()
        .unwrap();
    let mut ws = tokio_tungstenite::accept_hdr_async(
        tcp,
        |req: &tokio_tungstenite::tungstenite::handshake::server::Request, resp| {
            assert_eq!(req.uri().path(), "/relay/v1/host");
            Ok(resp)
        },
    )
    .await
    .unwrap();
    let nonce = [42u8; 32];
    ws.send(Message::text(
        json!({"t": "challenge", "nonce": b64(&nonce)}).to_string(),
    ))
    .await
    .unwrap();
    let auth = tokio::time::timeout(GUARD, next_text(&mut ws))
        .await
        .unwrap();
    assert_eq!(auth["t"], "auth");
    assert_eq!(auth["v"], "9.9.9");
    let public = unb64(auth["pub"].as_str().unwrap()).unwrap();
    let mut signed = b"jucode-relay-v1:".to_vec();
    signed.extend_from_slice(&nonce);
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &public)
        .verify(&signed, &unb64(auth["sig"].as_str().unwrap()).unwrap())
        .expect("the signature covers the prefix and the raw nonce");
    let host = host_id(&public);
    ws.send(Message::text(
        json!({"t": "ready", "host": host}).to_string(),
    ))
    .await
    .unwrap();

    // The daemon writes nothing else while idle; each ping must still get its pong.
    for i in 0u8..5 {
        ws.send(Message::Ping(vec![i].into())).await.unwrap();
        let pong = tokio::time::timeout(GUARD, async {
            loop {
                match ws.next().await.unwrap().unwrap() {
                    Message::Pong(p) => return p.to_vec(),
                    Message::Ping(_) => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
        })
        .await
        .expect("an idle daemon must answer pings");
        assert_eq!(pong, vec![i]);
    }
    let status = relay_status(&hub).await;
    assert_eq!(status["connected"], true);
    assert_eq!(status["host"], host.as_str());

    // Replaced (4409): the daemon reports the link down and backs off.
    ws.send(Message::Close(Some(CloseFrame {
        code: 4409.into(),
        reason: "replaced".into(),
    })))
    .await
    .unwrap();
    tokio::time::timeout(GUARD, async {
        while relay_status(&hub).await["connected"] == true {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap();
    task.abort();
}

/// A relay identity that cannot be read reaches the client as the identity code's own error,
/// text for text, through the hub's typed link error.
#[tokio::test]
async fn an_unreadable_identity_is_pair_links_error_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join(".jucode");
    let state = home.join("daemon");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("settings.json"), r#"{"relay":true}"#).unwrap();
    std::fs::write(
        state.join(jucode_relay_host::identity::FILE),
        r#"{"identity":"short","static":"short","static_pub":"short"}"#,
    )
    .unwrap();
    let want = jucode_relay_host::identity::load_or_create(&state)
        .err()
        .expect("a broken identity file must not load")
        .to_string();
    // Nothing listens there: the link never comes up, pair_link only needs the identity.
    let url = "ws://127.0.0.1:9/relay/v1".to_string();
    let hub = Hub::open(HubConfig {
        home: home.clone(),
        user_home: dir.path().to_path_buf(),
        version: "test".into(),
        relay_url: Some(url.clone()),
        engines: HashMap::new(),
        clock: jucode_clock::SystemClock::shared(),
        agent_mcp: Default::default(),
        billing: None,
        online: Default::default(),
    })
    .unwrap();
    let task = jucode_relay_host::start(hub.clone(), url, "9.9.9".into());
    let reply = local_request(&hub, r#"{"op":"pair_link","id":1}"#).await;
    assert_eq!(reply["type"], "error", "{reply}");
    assert_eq!(reply["message"], want.as_str(), "{reply}");
    task.abort();
}
