//! Relay throughput and latency for 1 and 32 streams next to raw ChaCha20-Poly1305, against an
//! in-process relay on loopback:
//! `cargo run --release -p jucode-relay-server --example relay_bench [frame_bytes] [frames]`.

use std::time::Duration;

use jucode_relay_server::{Limits, Relay, RelayConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let frame_bytes: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(16 * 1024);
    let frames: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(200);
    let relay = Relay::bind(RelayConfig {
        listen: "127.0.0.1:0".parse()?,
        limits: Limits {
            connects_per_ip: 10_000,
            idle: Duration::from_secs(3600),
            ..Limits::default()
        },
        push: None,
        behind_proxy: false,
    })
    .await?;
    let url = format!(
        "ws://{}/relay/v1",
        relay
            .local_addr()
            .ok_or_else(|| anyhow::anyhow!("no address"))?
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(relay.serve(async {
        let _ = stopped.await;
    }));
    for streams in [1, 32] {
        let report = jucode_relay_proto::bench::run(&url, streams, frame_bytes, frames).await?;
        println!("{report}");
    }
    let _ = stop.send(());
    server.await??;
    Ok(())
}
