//! The local-only and device-only gates, driven from the op table itself
//! (`jucode_protocol::daemon::OPS`): every local-only op is refused, with its text, to a
//! device paired over the daemon's own port and to one paired through the relay; every
//! device-only op is refused to the local client. A row added to the table is covered
//! without touching this file. The refusal comes before the op's fields are read, so each op
//! is sent bare.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport --bins`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use anyhow::{Context, Result};
use jucode_protocol::daemon::{Gate, OPS};
use jucode_relay_proto::client::{DeviceKeys, Phone, parse_pair_link};
use jucode_testsupport::{Daemon, RelayServer};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// Each gated op of the table: (op, the text a client of the wrong kind gets, whether it is
/// local-only).
fn gated() -> Vec<(&'static str, &'static str, bool)> {
    OPS.iter()
        .filter_map(|s| match s.gate {
            Gate::LocalOnly(text) => Some((s.name, text, true)),
            Gate::DeviceOnly(text) => Some((s.name, text, false)),
            _ => None,
        })
        .collect()
}

async fn phone_request(p: &mut Phone, op: Value) -> Result<Value> {
    let id = op["id"].clone();
    p.send(&op).await?;
    tokio::time::timeout(WAIT, async {
        loop {
            let f = p.recv().await?;
            if f["id"] == id {
                return Ok::<_, anyhow::Error>(f);
            }
        }
    })
    .await
    .context("no reply through the relay")?
}

#[tokio::test]
async fn every_gated_op_of_the_table_is_refused_to_the_wrong_kind_of_client() -> Result<()> {
    let table = gated();
    assert!(
        table.iter().filter(|(_, _, local)| *local).count() >= 10,
        "the table lost its local-only rows: {table:?}"
    );
    assert!(table.iter().any(|(_, _, local)| !*local), "{table:?}");

    let dir = tempfile::tempdir()?;
    let relay = RelayServer::start("127.0.0.1:0", &[]).await?;
    let daemon = Daemon::builder(&dir.path().join("home/.jucode"))
        .relay(relay.url())
        .start()
        .await?;
    let mut local = daemon.client().await?;
    let mut paired = daemon.paired_device(&mut local).await?;

    // A phone through the relay.
    local
        .request(json!({"op": "relay_set", "enabled": true}))
        .await?;
    tokio::time::timeout(WAIT, async {
        while local.request(json!({"op": "relay_status"})).await?["connected"] != true {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok::<_, anyhow::Error>(())
    })
    .await
    .context("the relay link did not come up")??;
    let link = local.request(json!({"op": "pair_link"})).await?;
    let link = parse_pair_link(link["link"].as_str().context("link")?).context("the pair link")?;
    let keys = DeviceKeys::generate()?;
    let mut phone = tokio::time::timeout(
        WAIT,
        Phone::open(
            &relay.url(),
            &link.host,
            &link.host_static,
            &keys,
            "gate phone",
            Some(&link.code),
        ),
    )
    .await
    .context("the relay handshake timed out")??;

    let mut id = 100;
    for (op, text, local_only) in table {
        id += 1;
        let frame = json!({"op": op, "id": id});
        let refused: Vec<(&str, Value)> = if local_only {
            vec![
                ("a paired device", paired.request(frame.clone()).await?),
                ("a relay device", phone_request(&mut phone, frame).await?),
            ]
        } else {
            vec![("the local client", local.request(frame).await?)]
        };
        for (who, mut reply) in refused {
            // The test client numbers its own requests; only the relay phone keeps ours.
            reply
                .as_object_mut()
                .context("a reply object")?
                .remove("id");
            assert_eq!(
                reply,
                json!({"type": "error", "message": text}),
                "{op} sent by {who}"
            );
        }
    }

    // The connections are all still up and answering after every refusal.
    for reply in [
        local.request(json!({"op": "ping"})).await?,
        paired.request(json!({"op": "ping"})).await?,
        phone_request(&mut phone, json!({"op": "ping", "id": 1})).await?,
    ] {
        assert_eq!(reply["type"], "pong", "{reply}");
    }
    Ok(())
}
