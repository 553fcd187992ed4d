//! The benches of the other paths, each printed beside its reference from the same run:
//! model token → client through the built-in engine (vs. the engine's model client alone),
//! relay streams (vs. raw ChaCha20-Poly1305 on the same bytes) and the Cotal event plane's
//! journal line → stored frame (vs. a bare JetStream publish of the same frame), and the
//! seat's memory next to an idle node ([`super::seat`]).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// Sizes of one run of these benches.
pub struct PathSizes {
    pub tokens: usize,
    pub relay_frames: usize,
    pub journal_samples: usize,
}

pub async fn run(sizes: &PathSizes) -> Result<()> {
    agent(sizes.tokens).await?;
    relay(sizes.relay_frames).await?;
    cotal(sizes.journal_samples).await?;
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

async fn agent(tokens: usize) -> Result<()> {
    // Tokens 2 ms apart: the latency of each, not the throughput of a burst.
    let report = jucode_testsupport::bench_latency::bench_latency(tokens, Duration::from_millis(2))
        .await
        .context("model token → assistant_delta bench")?;
    println!();
    println!(
        "model token → assistant_delta ({} tokens, 2 ms apart); reference: the engine's model client reading the same stream without the daemon",
        report.tokens
    );
    println!(
        "{:>6}  {:>12}  {:>12}  {:>6}",
        "", "daemon", "reference", "ratio"
    );
    for (name, d, r) in [
        ("p50", report.daemon.p50, report.direct.p50),
        ("p99", report.daemon.p99, report.direct.p99),
    ] {
        println!(
            "{name:>6}  {:>12}  {:>12}  {:>6.2}",
            ms(d),
            ms(r),
            ratio(d, r)
        );
    }
    Ok(())
}

async fn relay(frames: usize) -> Result<()> {
    use jucode_relay_server::{Limits, Relay, RelayConfig};
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
    .await
    .context("starting the relay")?;
    let addr = relay.local_addr().context("the relay has no address")?;
    let url = format!("ws://{addr}/relay/v1");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(relay.serve(async {
        let _ = stopped.await;
    }));
    println!();
    println!(
        "relay streams (16 KiB frames, {frames} per stream, echoed, up to 4 in flight per stream; \"serial\": one in flight); reference: ChaCha20-Poly1305 seal+open of the same bytes in memory"
    );
    println!(
        "{:>7}  {:>14}  {:>14}  {:>14}  {:>6}  {:>11}  {:>11}",
        "streams", "relay MiB/s", "serial MiB/s", "raw MiB/s", "ratio", "rtt p50", "rtt p99"
    );
    let mib = |b: f64| b / (1024.0 * 1024.0);
    for streams in [1, 32] {
        let r = jucode_relay_proto::bench::run(&url, streams, 16 * 1024, frames)
            .await
            .with_context(|| format!("relay bench with {streams} streams"))?;
        println!(
            "{:>7}  {:>14.1}  {:>14.1}  {:>14.1}  {:>6.3}  {:>11}  {:>11}",
            streams,
            mib(r.relay_bytes_per_sec),
            mib(r.serial_bytes_per_sec),
            mib(r.raw_bytes_per_sec),
            r.relay_bytes_per_sec / r.raw_bytes_per_sec.max(1.0),
            ms(r.rtt_p50),
            ms(r.rtt_p99),
        );
    }
    let _ = stop.send(());
    server.await??;
    Ok(())
}

async fn cotal(samples: usize) -> Result<()> {
    // A line that needs a peer says so and lets the others run: the bench installs nothing.
    let broker = jucode_cotal::testkit::nats_server_bin();
    if !broker.exists() {
        println!();
        println!(
            "Cotal event plane and seat memory: skipped: {} is missing (run bash scripts/install-nats.sh)",
            broker.display()
        );
        return Ok(());
    }
    let nats = jucode_cotal::testkit::NatsServer::start()
        .await
        .context("starting nats-server (scripts/install-nats.sh installs it)")?;
    let poll = Duration::from_millis(5);
    let seat = jucode_cotal::bench::journal_to_stored_latency(&nats.url, samples, poll)
        .await
        .context("journal → stored frame bench")?;
    let reference = jetstream_publish_latency(&nats.url, samples).await?;
    let seat_mem = super::seat::seat_rss(&nats.url)
        .await
        .context("the seat's RSS (release jucode-cotal-jcode with jucode-fake-jcode)")?;
    let node_mem = if super::seat::node_available() {
        Some(super::seat::idle_node_rss().await?)
    } else {
        None
    };
    println!();
    println!(
        "Cotal event plane: journal line written → AG-UI frame stored ({samples} samples, journal polled every 5 ms); reference: a bare JetStream publish of a frame, awaited"
    );
    println!(
        "{:>6}  {:>12}  {:>12}  {:>6}",
        "", "seat", "reference", "ratio"
    );
    for p in [0.5, 0.99] {
        let s = Duration::from_micros(seat.percentile(p));
        let r = reference
            .get(((reference.len().saturating_sub(1)) as f64 * p).round() as usize)
            .copied()
            .unwrap_or_default();
        println!(
            "{:>6}  {:>12}  {:>12}  {:>6.2}",
            format!("p{:.0}", p * 100.0),
            ms(s),
            ms(r),
            ratio(s, r)
        );
    }
    println!();
    let Some(node_mem) = node_mem else {
        println!(
            "Cotal seat memory: skipped: no node to compare with (install Node.js 20 or later, or set JUCODE_NODE)"
        );
        return Ok(());
    };
    println!(
        "Cotal seat memory: release jucode-cotal-jcode joined (driving jucode-fake-jcode, not counted) vs an idle node, after 2 s idle; ratio = seat / node"
    );
    println!(
        "{:>6}  {:>12}  {:>12}  {:>6}",
        "", "seat", "idle node", "ratio"
    );
    for (label, s, n) in [
        ("RSS", seat_mem.rss_kib, node_mem.rss_kib),
        ("peak", seat_mem.hwm_kib, node_mem.hwm_kib),
    ] {
        println!(
            "{:>6}  {:>12}  {:>12}  {:>6.2}",
            label,
            format!("{:.1} MiB", s as f64 / 1024.0),
            format!("{:.1} MiB", n as f64 / 1024.0),
            s as f64 / (n as f64).max(1.0)
        );
    }
    Ok(())
}

/// Publishes `samples` frame-sized messages through JetStream one by one, timing each until
/// its ack: the floor under the event plane's latency.
#[allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
async fn jetstream_publish_latency(url: &str, samples: usize) -> Result<Vec<Duration>> {
    let client = async_nats::connect(url)
        .await
        .context("connecting to nats")?;
    let js = async_nats::jetstream::new(client);
    js.get_or_create_stream(async_nats::jetstream::stream::Config {
        name: "XTASK_BENCH".into(),
        subjects: vec!["xtask.bench".into()],
        ..Default::default()
    })
    .await
    .context("creating the bench stream")?;
    let frame = serde_json::json!({
        "type": "TEXT_MESSAGE_CONTENT",
        "messageId": "m-1",
        "delta": "x".repeat(64),
    })
    .to_string();
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let start = Instant::now();
        js.publish("xtask.bench", frame.clone().into())
            .await
            .context("publishing")?
            .await
            .context("waiting for the ack")?;
        out.push(start.elapsed());
    }
    out.sort();
    Ok(out)
}
