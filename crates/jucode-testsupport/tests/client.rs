//! Checks `Client` and `connect_status` against a tiny in-process WebSocket server.

use std::net::SocketAddr;

use anyhow::{Context, Result, ensure};
use futures_util::{SinkExt as _, StreamExt as _};
use jucode_testsupport::{CONNECT_BATCH, Client, connect_status};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

fn authorised(req: &Request) -> bool {
    let query = req.uri().query().unwrap_or_default();
    let header = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    query == "token=good" || header == Some("Bearer good")
}

// The callback's signature is tungstenite's, large Err and all.
#[allow(clippy::result_large_err)]
fn check(req: &Request, resp: Response) -> Result<Response, ErrorResponse> {
    if authorised(req) {
        return Ok(resp);
    }
    let mut refused = ErrorResponse::new(Some("bad token".into()));
    *refused.status_mut() = StatusCode::UNAUTHORIZED;
    Err(refused)
}

/// Accepts connections: refuses bad tokens with 401, sends the connect batch, then answers
/// `ping_me` with a noise frame and an id echo, and closes with 4000 on `bye`.
async fn serve() -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(stream, check).await else {
                    return;
                };
                for kind in CONNECT_BATCH {
                    let _ = ws
                        .send(Message::text(json!({"type": kind}).to_string()))
                        .await;
                }
                while let Some(Ok(message)) = ws.next().await {
                    // Pongs answering our pings arrive here too.
                    let Message::Text(text) = message else {
                        continue;
                    };
                    let op: Value = serde_json::from_str(text.as_str()).unwrap_or_default();
                    if op["op"] == "bye" {
                        let frame = CloseFrame {
                            code: CloseCode::from(4000),
                            reason: "bye".into(),
                        };
                        let _ = ws.close(Some(frame)).await;
                        return;
                    }
                    let _ = ws.send(Message::Ping(Vec::new().into())).await;
                    let noise = json!({"type": "noise", "session": "s1"});
                    let _ = ws.send(Message::text(noise.to_string())).await;
                    let reply = json!({"type": "ok", "id": op["id"]});
                    let _ = ws.send(Message::text(reply.to_string())).await;
                }
            });
        }
    });
    Ok(addr)
}

#[tokio::test]
async fn connect_status_reports_the_refusal() -> Result<()> {
    let addr = serve().await?;
    let url = format!("ws://{addr}/");
    assert_eq!(connect_status(&url, None).await?, Err(401));
    assert_eq!(connect_status(&url, Some("bad")).await?, Err(401));
    assert_eq!(connect_status(&url, Some("good")).await?, Ok(()));
    assert_eq!(
        connect_status(&format!("{url}?token=good"), None).await?,
        Ok(())
    );
    Ok(())
}

#[tokio::test]
async fn client_reads_the_batch_matches_replies_and_keeps_a_backlog() -> Result<()> {
    let addr = serve().await?;
    let mut client = Client::connect_and_greet(&format!("ws://{addr}/?token=good")).await?;
    let kinds: Vec<&str> = client
        .connect_batch
        .iter()
        .filter_map(|f| f["type"].as_str())
        .collect();
    assert_eq!(kinds, CONNECT_BATCH);

    let reply = client.request(json!({"op": "ping_me"})).await?;
    assert_eq!(reply, json!({"type": "ok", "id": 1}));
    // The noise frame read while waiting for the reply is kept for recv().
    assert_eq!(client.recv().await?["type"], "noise");

    let reply = client.request(json!({"op": "ping_me"})).await?;
    assert_eq!(reply["id"], 2);
    let noise = client.recv_type("noise", Some("s1")).await?;
    assert_eq!(noise["session"], "s1");

    client.send(json!({"op": "ping_me", "id": 99})).await?;
    let reply = client.recv_until(|f| f["id"] == 99).await?;
    assert_eq!(reply["type"], "ok");

    client.send(json!({"op": "bye"})).await?;
    let err = client
        .recv()
        .await
        .err()
        .context("expected the close to be an error")?;
    let message = format!("{err:#}");
    ensure!(
        message.contains("4000") && message.contains("bye"),
        "close error: {message}"
    );
    client.close().await;
    Ok(())
}
