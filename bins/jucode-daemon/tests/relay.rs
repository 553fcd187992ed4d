//! Remote access end to end: the real `jucode-relay` binary and the real daemon on loopback,
//! with a simulated phone (`jucode_relay_proto::client`, a Noise IK initiator) on the client side.
//!
//! Needs the binaries built first: `cargo build -p jucode-daemon -p jucode-testsupport --bins`
//! (`jucode_testsupport::RelayServer` builds `jucode-relay` itself when it is missing).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use jucode_relay_proto::client::{ClientError, DeviceKeys, PairLink, Phone, parse_pair_link};
use jucode_testsupport::fake_push::FakePush;
use jucode_testsupport::{Client, Daemon, RelayServer, daemon_bin};
use serde_json::{Value, json};
use tokio::process::Command;

/// Deadlock guard for anything a test waits on.
const WAIT: Duration = Duration::from_secs(30);

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> Result<T> {
    tokio::time::timeout(WAIT, fut)
        .await
        .with_context(|| format!("{what}: no result within 30 s"))
}

/// The daemon (fake serve engine) connected to `relay`, with the relay setting as stored.
async fn start_daemon(home: &Path, relay: &RelayServer) -> Result<Daemon> {
    Daemon::builder(home).relay(relay.url()).start().await
}

/// Turns the relay on and waits until the daemon reports the link up.
async fn relay_on(local: &mut Client) -> Result<Value> {
    let status = local
        .request(json!({"op": "relay_set", "enabled": true}))
        .await?;
    assert_eq!(status["type"], "relay_status", "{status}");
    assert_eq!(status["enabled"], true);
    wait_connected(local).await
}

async fn wait_connected(local: &mut Client) -> Result<Value> {
    within("relay link up", async {
        loop {
            let status = local.request(json!({"op": "relay_status"})).await?;
            if status["connected"] == true {
                return Ok::<_, anyhow::Error>(status);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await?
}

async fn pair_link(local: &mut Client) -> Result<PairLink> {
    let reply = local.request(json!({"op": "pair_link"})).await?;
    assert_eq!(reply["type"], "pair_link", "{reply}");
    let link = reply["link"].as_str().context("link")?;
    let parsed = parse_pair_link(link).context("the link does not parse like the page's")?;
    assert_eq!(parsed.code, reply["code"].as_str().unwrap_or_default());
    Ok(parsed)
}

async fn phone(
    relay: &RelayServer,
    link: &PairLink,
    keys: &DeviceKeys,
    code: Option<&str>,
) -> Result<Phone, ClientError> {
    tokio::time::timeout(
        WAIT,
        Phone::open(
            &relay.url(),
            &link.host,
            &link.host_static,
            keys,
            "test phone",
            code,
        ),
    )
    .await
    .unwrap_or_else(|_| Err(ClientError::Protocol("handshake timed out".into())))
}

async fn recv(p: &mut Phone) -> Result<Value> {
    Ok(within("a frame", p.recv()).await??)
}

async fn request(p: &mut Phone, op: Value) -> Result<Value> {
    let id = op["id"].clone();
    p.send(&op).await?;
    within("a reply", async {
        loop {
            let f = p.recv().await?;
            if f["id"] == id {
                return Ok::<_, anyhow::Error>(f);
            }
        }
    })
    .await?
}

/// Starts a relay and a daemon with the relay on; returns them with a local client.
async fn setup(dir: &Path, relay_args: &[&str]) -> Result<(RelayServer, Daemon, Client)> {
    let relay = RelayServer::start("127.0.0.1:0", relay_args).await?;
    let daemon = start_daemon(&dir.join("home/.jucode"), &relay).await?;
    let mut local = daemon.client().await?;
    relay_on(&mut local).await?;
    Ok((relay, daemon, local))
}

#[tokio::test]
async fn a_phone_pairs_gets_hello_runs_ops_reconnects_and_is_dropped_on_revoke() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let relay = RelayServer::start("127.0.0.1:0", &[]).await?;
    let daemon = start_daemon(&dir.path().join("home/.jucode"), &relay).await?;
    let mut local = daemon.client().await?;

    // Off by default: no link, pair_link refused.
    let status = local.request(json!({"op": "relay_status"})).await?;
    assert_eq!(status["enabled"], false);
    assert_eq!(status["connected"], false);
    assert_eq!(status["url"], relay.url());
    let refused = local.request(json!({"op": "pair_link"})).await?;
    assert_eq!(refused["type"], "error");

    let status = relay_on(&mut local).await?;
    let host = status["host"].as_str().context("host")?.to_string();
    assert_eq!(host.len(), 22);
    let identity = daemon.home.join("daemon/relay-identity.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&identity)?.permissions().mode() & 0o777,
        0o600
    );

    let link = pair_link(&mut local).await?;
    assert_eq!(link.host, host);
    assert_eq!(link.origin, format!("http://{}", relay.addr));

    let keys = DeviceKeys::generate()?;
    let mut p = phone(&relay, &link, &keys, Some(&link.code)).await?;
    assert!(p.device.starts_with("dev-"), "{}", p.device);
    assert_eq!(p.name, "test phone");
    let hello = recv(&mut p).await?;
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["protocol"], 2);
    let pong = request(&mut p, json!({"op": "ping", "id": 1})).await?;
    assert_eq!(pong["type"], "pong");
    let ws = request(&mut p, json!({"op": "workspaces", "id": "w"})).await?;
    assert_eq!(ws["type"], "workspaces");
    // The same local-only gates as a device's local WebSocket.
    let gate = request(&mut p, json!({"op": "device_list", "id": 2})).await?;
    assert_eq!(gate["message"], "only the desktop can manage devices");

    let devices = local.request(json!({"op": "device_list"})).await?;
    let list = devices["devices"].as_array().context("devices")?;
    assert_eq!(list.len(), 1, "{devices}");
    assert_eq!(list[0]["id"], p.device.as_str());
    assert_eq!(list[0]["kind"], "relay");
    let log = std::fs::read_to_string(daemon.home.join("daemon/devices.jsonl"))?;
    let hash = hex_sha256(keys.public());
    assert!(
        log.contains(&hash),
        "devices.jsonl keys the device by its Noise key hash"
    );

    // Later connections need no code; both streams live at once.
    let mut again = phone(&relay, &link, &keys, None).await?;
    assert_eq!(again.device, p.device);
    assert_eq!(recv(&mut again).await?["type"], "hello");

    // Revoking closes every stream of the device at once, and the key no longer opens one.
    let revoked = local
        .request(json!({"op": "device_revoke", "device": p.device}))
        .await?;
    assert_eq!(revoked["type"], "device_revoked");
    let (code, reason) = within("first stream closed", p.closed()).await?;
    assert_eq!((code, reason.as_str()), (4410, "host closed"));
    let (code, _) = within("second stream closed", again.closed()).await?;
    assert_eq!(code, 4410);
    match phone(&relay, &link, &keys, None).await {
        Err(ClientError::Refused(e)) => assert!(e.contains("not paired"), "{e}"),
        Err(e) => bail!("expected a refusal, got {e}"),
        Ok(_) => bail!("a revoked key opened a stream"),
    }
    drop(daemon);
    Ok(())
}

fn hex_sha256(data: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, data)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn wrong_host_key_unknown_key_and_reused_code_are_refused() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (relay, _daemon, mut local) = setup(dir.path(), &[]).await?;
    let link = pair_link(&mut local).await?;

    // A link with another host key: the daemon cannot read msg1 and closes the stream.
    let mut wrong = link.clone();
    wrong.host_static = DeviceKeys::generate()?.public().to_vec();
    match phone(&relay, &wrong, &DeviceKeys::generate()?, Some(&link.code)).await {
        Err(ClientError::Closed(code, _)) => assert_eq!(code, 4410),
        other => bail!("wrong host key: {:?}", other.err()),
    }
    // An unknown key without a code.
    match phone(&relay, &link, &DeviceKeys::generate()?, None).await {
        Err(ClientError::Refused(_)) => {}
        other => bail!("unknown key: {:?}", other.err()),
    }
    // The code still works (the wrong-key try never reached it), once.
    let first = DeviceKeys::generate()?;
    phone(&relay, &link, &first, Some(&link.code)).await?;
    match phone(&relay, &link, &DeviceKeys::generate()?, Some(&link.code)).await {
        Err(ClientError::Refused(e)) => assert!(e.contains("wrong or expired"), "{e}"),
        other => bail!("reused code: {:?}", other.err()),
    }
    // Lower case is the same code (trimmed, upper-cased), but it is used now.
    let devices = local.request(json!({"op": "device_list"})).await?;
    assert_eq!(devices["devices"].as_array().map(Vec::len), Some(1));
    Ok(())
}

#[tokio::test]
async fn five_wrong_codes_kill_the_outstanding_code() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (relay, _daemon, mut local) = setup(dir.path(), &[]).await?;
    let link = pair_link(&mut local).await?;
    for guess in ["AAAAAAAA", "BBBBBBBB", "short", "CCCCCCCC", "DDDDDDDD"] {
        match phone(&relay, &link, &DeviceKeys::generate()?, Some(guess)).await {
            Err(ClientError::Refused(_)) => {}
            other => bail!("guess {guess}: {:?}", other.err()),
        }
    }
    match phone(&relay, &link, &DeviceKeys::generate()?, Some(&link.code)).await {
        Err(ClientError::Refused(_)) => {}
        other => bail!("the real code outlived 5 wrong tries: {:?}", other.err()),
    }
    // A fresh code works again.
    let fresh = pair_link(&mut local).await?;
    phone(&relay, &fresh, &DeviceKeys::generate()?, Some(&fresh.code)).await?;
    Ok(())
}

#[tokio::test]
async fn replayed_tampered_and_reordered_frames_close_the_stream() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (relay, _daemon, mut local) = setup(dir.path(), &[]).await?;
    let link = pair_link(&mut local).await?;
    let keys = DeviceKeys::generate()?;

    // Record msg1 as the relay would see it, then replay it on a new stream.
    let (hs, msg1) =
        jucode_relay_proto::client::first_message(&keys, &link.host_static, "p", Some(&link.code))?;
    let ws = jucode_relay_proto::client::connect_stream(&relay.url(), &link.host).await?;
    let mut p = within("pair", Phone::finish(ws, hs, msg1.clone())).await??;
    assert_eq!(recv(&mut p).await?["type"], "hello");
    let mut replay = jucode_relay_proto::client::connect_stream(&relay.url(), &link.host).await?;
    use futures_util::{SinkExt, StreamExt};
    replay
        .send(tokio_tungstenite::tungstenite::Message::binary(msg1))
        .await?;
    // The replayer gets a msg2 it cannot read (it lacks the phone's ephemeral and static
    // keys), the code is spent, and nothing was paired twice.
    let msg2 = within("msg2", jucode_relay_proto::client::next_binary(&mut replay)).await??;
    let (mut attacker, _) = jucode_relay_proto::client::first_message(
        &DeviceKeys::generate()?,
        &link.host_static,
        "x",
        None,
    )?;
    let mut out = vec![0u8; msg2.len()];
    assert!(attacker.read_message(&msg2, &mut out).is_err());
    // Anything it sends next fails to decrypt and ends its stream.
    replay
        .send(tokio_tungstenite::tungstenite::Message::binary(vec![
            0u8;
            40
        ]))
        .await?;
    let closed = within("replay closed", async {
        loop {
            match replay.next().await {
                Some(Ok(tokio_tungstenite::tungstenite::Message::Close(f))) => {
                    return f.map(|f| u16::from(f.code));
                }
                Some(Ok(_)) => continue,
                _ => return None,
            }
        }
    })
    .await?;
    assert_eq!(closed, Some(4410));
    let devices = local.request(json!({"op": "device_list"})).await?;
    assert_eq!(devices["devices"].as_array().map(Vec::len), Some(1));

    // A flipped bit.
    let mut m = p.seal(r#"{"op":"ping","id":1}"#)?.remove(0);
    m[5] ^= 0x01;
    p.send_raw(m).await?;
    assert_eq!(within("tampered", p.closed()).await?.0, 4410);

    // A replayed transport message.
    let mut p = phone(&relay, &link, &keys, None).await?;
    assert_eq!(recv(&mut p).await?["type"], "hello");
    let m = p.seal(r#"{"op":"ping","id":1}"#)?.remove(0);
    p.send_raw(m.clone()).await?;
    let mut got_pong = false;
    while !got_pong {
        got_pong = recv(&mut p).await?["type"] == "pong";
    }
    p.send_raw(m).await?;
    assert_eq!(within("replayed", p.closed()).await?.0, 4410);

    // Two messages in the wrong order.
    let mut p = phone(&relay, &link, &keys, None).await?;
    let m1 = p.seal(r#"{"op":"ping","id":1}"#)?.remove(0);
    let m2 = p.seal(r#"{"op":"ping","id":2}"#)?.remove(0);
    p.send_raw(m2).await?;
    p.send_raw(m1).await?;
    assert_eq!(within("reordered", p.closed()).await?.0, 4410);

    // A text frame is the relay's business: 4400.
    let mut p = phone(&relay, &link, &keys, None).await?;
    p.send_text_frame("hello").await?;
    assert_eq!(within("text", p.closed()).await?.0, 4400);
    Ok(())
}

#[tokio::test]
async fn a_4mb_frame_crosses_in_chunks_and_32_streams_run_at_once() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (relay, _daemon, mut local) = setup(dir.path(), &["--connects-per-ip", "1000"]).await?;
    let link = pair_link(&mut local).await?;
    let keys = DeviceKeys::generate()?;
    let mut p = phone(&relay, &link, &keys, Some(&link.code)).await?;
    assert_eq!(recv(&mut p).await?["type"], "hello");

    // 4 MB each way: up in a ping, back in the workspaces the daemon echoes.
    let big = "x".repeat(4 * 1024 * 1024);
    let pong = request(&mut p, json!({"op": "ping", "id": 1, "pad": big})).await?;
    assert_eq!(pong["type"], "pong");
    let reply = request(
        &mut p,
        json!({"op": "workspaces_set", "id": 2, "rev": 0,
               "workspaces": [{"id": "w1", "name": "big", "projects": [], "icon": big}]}),
    )
    .await?;
    assert_eq!(reply["type"], "workspaces", "{}", reply["message"]);
    assert_eq!(
        reply["workspaces"][0]["icon"].as_str().map(str::len),
        Some(big.len())
    );
    // Small again, so each new stream's connect batch is not 4 MB.
    let rev = reply["rev"].clone();
    let reply = request(
        &mut p,
        json!({"op": "workspaces_set", "id": 3, "rev": rev, "workspaces": []}),
    )
    .await?;
    assert_eq!(reply["type"], "workspaces", "{}", reply["message"]);
    p.close().await;

    // 32 streams at once, each with its own hello and reply; the 33rd is refused busy.
    let mut phones = Vec::new();
    for _ in 0..32 {
        phones.push(phone(&relay, &link, &keys, None).await?);
    }
    let replies =
        futures_util::future::join_all(phones.iter_mut().enumerate().map(|(i, p)| async move {
            let hello = recv(p).await?;
            anyhow::ensure!(hello["type"] == "hello");
            request(p, json!({"op": "ping", "id": i})).await
        }))
        .await;
    for r in replies {
        assert_eq!(r?["type"], "pong");
    }
    match phone(&relay, &link, &keys, None).await {
        Err(ClientError::Closed(code, _)) => assert_eq!(code, 4429),
        other => bail!("33rd stream: {:?}", other.err()),
    }
    Ok(())
}

#[tokio::test]
async fn the_daemon_reconnects_when_the_relay_restarts() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (mut relay, daemon, mut local) = setup(dir.path(), &[]).await?;
    let link = pair_link(&mut local).await?;
    let keys = DeviceKeys::generate()?;
    let mut p = phone(&relay, &link, &keys, Some(&link.code)).await?;
    assert_eq!(recv(&mut p).await?["type"], "hello");

    let listen = relay.addr.to_string();
    relay.kill_and_wait().await?;
    let (code, _) = within("stream dropped", p.closed()).await?;
    assert_ne!(code, 1000);
    within("link down", async {
        loop {
            let s = local.request(json!({"op": "relay_status"})).await?;
            if s["connected"] == false {
                return Ok::<_, anyhow::Error>(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await??;

    let relay = RelayServer::start(&listen, &[]).await?;
    wait_connected(&mut local).await?;
    let mut p = phone(&relay, &link, &keys, None).await?;
    assert_eq!(recv(&mut p).await?["type"], "hello");

    // Off means off: the link goes down and streams with it.
    local
        .request(json!({"op": "relay_set", "enabled": false}))
        .await?;
    assert_eq!(within("off", p.closed()).await?.0, 4404);
    let s = local.request(json!({"op": "relay_status"})).await?;
    assert_eq!(
        (s["enabled"].clone(), s["connected"].clone()),
        (json!(false), json!(false))
    );
    let settings = std::fs::read_to_string(daemon.home.join("daemon/settings.json"))?;
    assert!(settings.contains("false"), "{settings}");
    let _ = relay.logs();
    Ok(())
}

#[tokio::test]
async fn push_reaches_a_fake_push_service_encrypted_and_410_drops_the_subscription() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let push = FakePush::start().await?;
    let vapid = dir.path().join("vapid.key");
    let prefix = push.prefix();
    let (relay, daemon, mut local) = setup(
        dir.path(),
        &[
            "--vapid-key",
            vapid.to_str().context("path")?,
            "--push-endpoint-prefix",
            &prefix,
        ],
    )
    .await?;
    let link = pair_link(&mut local).await?;
    let mut p = phone(&relay, &link, &DeviceKeys::generate()?, Some(&link.code)).await?;
    assert_eq!(recv(&mut p).await?["type"], "hello");

    // Local clients have no notifications.
    let refused = local.request(json!({"op": "push_test"})).await?;
    assert_eq!(
        refused["message"],
        "only a paired device can receive notifications"
    );

    let sub = push.subscription("device-1")?;
    let endpoint = sub["endpoint"].as_str().context("endpoint")?.to_string();
    let ok = request(
        &mut p,
        json!({"op": "push_subscribe", "id": 1, "subscription": sub}),
    )
    .await?;
    assert_eq!(ok["type"], "push_subscribed", "{ok}");
    let saved = std::fs::read_to_string(daemon.home.join("daemon/push.json"))?;
    assert!(saved.contains(&endpoint), "{saved}");

    let tested = request(&mut p, json!({"op": "push_test", "id": 2})).await?;
    assert_eq!(tested["type"], "push_tested", "{tested}");
    assert_eq!(tested["results"][0]["status"], 204, "{tested}");
    assert_eq!(tested["results"][0]["service"], push.addr().to_string());
    // Verified (VAPID aud with the port, signed by the relay's published key) and decrypted.
    let got = push.delivered(1).await?;
    let key = jucode_testsupport::http(relay.addr, "GET", "/relay/v1/push/key", None).await?;
    assert_eq!(
        got.vapid_key,
        key.json()?["key"],
        "signed with the published key"
    );
    assert_eq!(got.claims["aud"], push.origin());
    assert_eq!(got.payload["title"], "jucode");
    assert_eq!(got.payload["url"], "/remote");

    // The push service says the subscription is gone: the daemon forgets it.
    push.set_status(410);
    let tested = request(&mut p, json!({"op": "push_test", "id": 3})).await?;
    assert_eq!(tested["results"][0]["status"], 410, "{tested}");
    let saved = std::fs::read_to_string(daemon.home.join("daemon/push.json"))?;
    assert!(!saved.contains(&endpoint), "{saved}");
    let tested = request(&mut p, json!({"op": "push_test", "id": 4})).await?;
    assert_eq!(tested["results"], json!([]));
    assert_eq!(push.received().len(), 2);
    Ok(())
}

async fn cli(home: &Path, args: &[&str]) -> Result<(bool, String)> {
    let out = within(
        "jucode-daemon cli",
        Command::new(daemon_bin()?)
            .arg("--home")
            .arg(home)
            .args(args)
            .env("HOME", home.parent().unwrap_or(home))
            .stdin(Stdio::null())
            .output(),
    )
    .await??;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.success(), text))
}

#[tokio::test]
async fn headless_relay_and_pair_commands() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let home = dir.path().join("home/.jucode");
    std::fs::create_dir_all(&home)?;
    let relay = RelayServer::start("127.0.0.1:0", &[]).await?;
    // No daemon listening: `relay on` writes the setting the daemon starts with.
    let (ok, out) = cli(&home, &["--listen", "127.0.0.1:1", "relay", "on"]).await?;
    assert!(ok, "{out}");
    assert!(out.contains("relay: on"), "{out}");
    let (ok, out) = cli(&home, &["--listen", "127.0.0.1:1", "pair"]).await?;
    assert!(!ok && out.contains("no daemon is running"), "{out}");

    let daemon = start_daemon(&home, &relay).await?;
    let mut local = daemon.client().await?;
    wait_connected(&mut local).await?;
    let listen = daemon.addr.to_string();
    let (ok, out) = cli(&home, &["--listen", &listen, "relay", "status"]).await?;
    assert!(ok && out.contains("connected: yes"), "{out}");
    let (ok, out) = cli(&home, &["--listen", &listen, "pair"]).await?;
    assert!(ok, "{out}");
    let link = parse_pair_link(out.lines().next().unwrap_or_default()).context("link")?;
    phone(&relay, &link, &DeviceKeys::generate()?, Some(&link.code)).await?;
    let (ok, out) = cli(&home, &["--listen", &listen, "relay", "off"]).await?;
    assert!(ok && out.contains("relay: off"), "{out}");
    Ok(())
}

#[tokio::test]
async fn no_relay_wins_over_the_setting() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let home = dir.path().join("home/.jucode");
    std::fs::create_dir_all(home.join("daemon"))?;
    std::fs::write(home.join("daemon/settings.json"), r#"{"relay":true}"#)?;
    // The test-support daemon always runs with --no-relay.
    let daemon = Daemon::start(&home).await?;
    let mut local = daemon.client().await?;
    let status = local
        .request(json!({"op": "relay_set", "enabled": true}))
        .await?;
    assert_eq!(status["enabled"], false, "{status}");
    assert_eq!(status["connected"], false);
    assert_eq!(status["url"], Value::Null);
    let refused = local.request(json!({"op": "pair_link"})).await?;
    assert_eq!(refused["type"], "error");
    assert!(!home.join("daemon/relay-identity.json").exists());
    Ok(())
}

#[tokio::test]
async fn unknown_keys_without_a_code_are_rate_limited() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (relay, _daemon, mut local) = setup(dir.path(), &[]).await?;
    let link = pair_link(&mut local).await?;
    // Ten refusals a minute are answered ({"ok":false}); after that streams close unread.
    for _ in 0..10 {
        match phone(&relay, &link, &DeviceKeys::generate()?, None).await {
            Err(ClientError::Refused(_)) => {}
            other => bail!("unknown key: {:?}", other.err()),
        }
    }
    match phone(&relay, &link, &DeviceKeys::generate()?, None).await {
        Err(ClientError::Closed(code, _)) => assert_eq!(code, 4410),
        other => bail!("11th unknown key: {:?}", other.err()),
    }
    Ok(())
}
