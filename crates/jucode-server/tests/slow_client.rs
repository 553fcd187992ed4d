//! A client that stops reading is really disconnected: its TCP connection is reset, not only
//! forgotten by the hub, and everyone else carries on. The daemon's front end runs in process
//! on loopback with the scripted engine `jucode-fake-serve` (`cargo build -p
//! jucode-testsupport` first); the slow client is a raw TCP socket with a small receive buffer
//! that completes the WebSocket handshake and then never reads.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use jucode_engine::EngineFactory;
use jucode_hub::HubConfig;
use jucode_server::{Server, ServerConfig};
use jucode_testsupport::{Client, fake_serve_bin};
use serde_json::json;
use tokio::io::{AsyncReadExt, Interest};
use tokio::net::{TcpSocket, TcpStream};

/// Only a hang guard: every wait below ends on an event long before it.
const GUARD: Duration = Duration::from_secs(120);

struct Daemon {
    url: String,
    _dir: tempfile::TempDir,
}

async fn daemon(write_timeout: Duration) -> Result<Daemon> {
    daemon_with(write_timeout, jucode_server::ws::KEEPALIVE).await
}

async fn daemon_with(write_timeout: Duration, keepalive: Duration) -> Result<Daemon> {
    let dir = tempfile::tempdir()?;
    let mut engines: HashMap<String, Arc<dyn EngineFactory>> = HashMap::new();
    engines.insert(
        "jucode".into(),
        Arc::new(jucode_engine::process::ServeProcess {
            program: fake_serve_bin()?,
        }),
    );
    let server = Server::bind(ServerConfig {
        listen: "127.0.0.1:0".parse()?,
        web: None,
        hub: HubConfig {
            home: dir.path().join(".jucode"),
            user_home: dir.path().to_path_buf(),
            version: "test".into(),
            relay_url: None,
            engines,
            clock: jucode_clock::SystemClock::shared(),
            agent_mcp: Default::default(),
            billing: None,
            online: Default::default(),
        },
        write_timeout,
        keepalive,
    })
    .await?;
    let addr = server.local_addr().context("no address")?;
    let token = std::fs::read_to_string(server.hub().token_path())?;
    tokio::spawn(server.serve(std::future::pending()));
    Ok(Daemon {
        url: format!("ws://{addr}/?token={}", token.trim()),
        _dir: dir,
    })
}

/// Completes the WebSocket handshake on a socket with a tiny receive buffer, then hands back
/// the socket so nothing reads it.
async fn slow_client(url: &str) -> Result<tokio_tungstenite::WebSocketStream<TcpStream>> {
    let addr = url
        .trim_start_matches("ws://")
        .split('/')
        .next()
        .context("no address")?
        .parse()?;
    let socket = TcpSocket::new_v4()?;
    socket.set_recv_buffer_size(4096)?;
    let tcp = socket.connect(addr).await?;
    let (ws, _) = tokio_tungstenite::client_async(url, tcp).await?;
    Ok(ws)
}

/// Waits until the daemon resets the connection: the kernel reports an error on the socket
/// (a RST arrived) without anyone reading it.
async fn reset_by_daemon(tcp: &TcpStream) {
    let ready = tokio::time::timeout(GUARD, tcp.ready(Interest::ERROR))
        .await
        .expect("the daemon never closed the slow client's connection")
        .unwrap();
    assert!(ready.is_error(), "{ready:?}");
}

/// Resuming reading finds the end: whatever was still buffered, then a reset or EOF.
async fn reads_to_the_end(tcp: &mut TcpStream) {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match tokio::time::timeout(GUARD, tcp.read(&mut buf)).await {
            Err(_) => panic!("the connection is still open"),
            Ok(Ok(0) | Err(_)) => return,
            Ok(Ok(_)) => continue,
        }
    }
}

async fn create_session(client: &mut Client, dir: &std::path::Path) -> Result<String> {
    let reply = client
        .request(json!({"op": "session_create", "cwd": dir.to_string_lossy()}))
        .await?;
    Ok(reply["session"].as_str().context("no session")?.to_string())
}

/// Reads until the session's turn ends (`status` `ready`), as a client that keeps up does.
async fn read_turn(client: &mut Client, session: &str) {
    client
        .recv_until(|f| f["session"] == session && f["type"] == "status" && f["message"] == "ready")
        .await
        .unwrap();
}

async fn session_list_works(client: &mut Client, session: &str) {
    let reply = client.request(json!({"op": "session_list"})).await.unwrap();
    assert_eq!(reply["type"], "sessions", "{reply}");
    assert_eq!(reply["sessions"][0]["session"], session, "{reply}");
}

/// Falling behind (the queue overflows while the writer is stuck in a write to a peer that
/// does not read) drops the client; its close frame cannot get past what it never reads, so
/// the connection is reset once the write timeout runs out.
#[tokio::test]
async fn a_subscriber_that_stops_reading_is_reset_when_it_falls_behind() {
    let daemon = daemon(Duration::from_secs(2)).await.unwrap();
    let project = tempfile::tempdir().unwrap();
    let mut slow = slow_client(&daemon.url).await.unwrap();
    let mut fast = Client::connect_and_greet(&daemon.url).await.unwrap();
    let session = create_session(&mut fast, project.path()).await.unwrap();
    // Far more bytes than the queue and the socket buffers hold (32 MiB), in frames few and
    // large enough that the client that reads keeps up whatever the engine's pace: an engine
    // flooding tiny deltas outruns a debug-built reader, which is then rightly too slow too.
    fast.send(json!({"op": "user_message", "session": session, "content": "flood 512 65536"}))
        .await
        .unwrap();
    // The fast client reads the whole turn meanwhile and is never dropped.
    tokio::join!(
        reset_by_daemon(slow.get_ref()),
        read_turn(&mut fast, &session)
    );
    reads_to_the_end(slow.get_mut()).await;
    session_list_works(&mut fast, &session).await;
}

/// A write that stalls (a few large frames, well inside the queue's limits) is cut off after
/// the write timeout and the connection reset. The sender leaves at once, so no client that
/// does read has to take 4 MB frames within the short timeout.
#[tokio::test]
async fn a_stalled_write_resets_the_connection_after_the_write_timeout() {
    let daemon = daemon(Duration::from_secs(1)).await.unwrap();
    let project = tempfile::tempdir().unwrap();
    let mut slow = slow_client(&daemon.url).await.unwrap();
    let mut fast = Client::connect_and_greet(&daemon.url).await.unwrap();
    let session = create_session(&mut fast, project.path()).await.unwrap();
    // Echoed back as a handful of 4 MB frames: more than the socket buffers hold.
    let content = "y".repeat(4 * 1024 * 1024);
    fast.send(json!({"op": "user_message", "session": session, "content": content}))
        .await
        .unwrap();
    fast.close().await;
    reset_by_daemon(slow.get_ref()).await;
    reads_to_the_end(slow.get_mut()).await;
    let mut other = Client::connect_and_greet(&daemon.url).await.unwrap();
    session_list_works(&mut other, &session).await;
}

/// A client that stops reading while little is sent to it fills no queue and blocks no
/// write for a long time: the socket buffers hold minutes of a slow stream. It answers no
/// ping, so it is reset after the keepalive's unanswered intervals.
#[tokio::test]
async fn a_client_that_answers_no_ping_is_reset() {
    let daemon = daemon_with(Duration::from_secs(30), Duration::from_millis(100))
        .await
        .unwrap();
    let mut silent = slow_client(&daemon.url).await.unwrap();
    reset_by_daemon(silent.get_ref()).await;
    reads_to_the_end(silent.get_mut()).await;
}

/// A client that reads but never sends anything is answered pings by its WebSocket library,
/// and stays connected well past the point a silent one is reset.
#[tokio::test]
async fn a_quiet_client_that_reads_stays_connected() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let daemon = daemon_with(Duration::from_secs(30), Duration::from_millis(100))
        .await
        .unwrap();
    let (mut ws, _) = tokio_tungstenite::connect_async(&daemon.url).await.unwrap();
    let mut pings = 0;
    let limit = jucode_server::ws::KEEPALIVE_MISSES * 3;
    while pings < limit {
        let message = tokio::time::timeout(GUARD, ws.next())
            .await
            .expect("no ping came")
            .expect("the daemon closed a client that answers its pings")
            .unwrap();
        if message.is_ping() {
            pings += 1;
        }
    }
    ws.send(Message::text(json!({"op": "ping", "id": "p"}).to_string()))
        .await
        .unwrap();
    loop {
        let message = tokio::time::timeout(GUARD, ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Message::Text(text) = message {
            let frame: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
            if frame["id"] == "p" {
                assert_eq!(frame["type"], "pong", "{frame}");
                break;
            }
        }
    }
}
