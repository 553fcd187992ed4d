//! `jucode-cotal-jcode`: one Cotal seat for jcode, and with `mcp-bridge` the
//! stdio MCP bridge jcode spawns as its `cotal` server.
//!
//! Thin: arguments and environment here, everything else in `jucode_cotal`.
//! The jcode harness (issue 5) plugs in through `jucode_cotal::seat::HarnessFactory`;
//! until it lands a seat launch reports that and exits 1.

use std::sync::Arc;

use jucode_cotal::harness::Harness;
use jucode_cotal::seat::{HarnessContext, HarnessFactory, SeatOptions};

struct JcodeNotBuilt;

#[async_trait_shim::async_trait]
impl HarnessFactory for JcodeNotBuilt {
    async fn start(&self, _ctx: HarnessContext) -> jucode_cotal::Result<Arc<dyn Harness>> {
        Err(jucode_cotal::Error::Harness(
            "the jcode Harness API client is not in this build yet (issue 5)".into(),
        ))
    }
}

mod async_trait_shim {
    pub use jucode_cotal::harness::async_trait_reexport as async_trait;
}

fn usage() -> ! {
    eprintln!("usage: jucode-cotal-jcode [--no-events] | jucode-cotal-jcode mcp-bridge");
    std::process::exit(2)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Logs go to stderr: stdout belongs to MCP in bridge mode.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("JUCODE_COTAL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match args.first().map(String::as_str) {
        Some("mcp-bridge") => {
            if args.len() != 1 {
                usage();
            }
            let bridge = jucode_cotal::bridge::Bridge::from_env(std::env::vars())?;
            rt.block_on(bridge.serve_stdio())?;
            Ok(())
        }
        Some("-h") | Some("--help") => usage(),
        _ => {
            let mut no_events = false;
            for a in &args {
                match a.as_str() {
                    "--no-events" => no_events = true,
                    _ => usage(),
                }
            }
            let res = rt.block_on(jucode_cotal::run_process(
                no_events,
                &JcodeNotBuilt,
                SeatOptions::default(),
            ));
            if let Err(e) = res {
                eprintln!("[cotal-jcode] fatal: {e}");
                std::process::exit(1);
            }
            Ok(())
        }
    }
}
