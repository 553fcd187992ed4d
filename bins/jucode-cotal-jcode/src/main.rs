//! `jucode-cotal-jcode`: one Cotal seat for jcode; with `mcp-bridge` the stdio
//! MCP bridge jcode spawns as its `cotal` server; with `models` the operator's
//! declared jcode model catalog (`--json`: what the extension's `listModels` returns).
//!
//! Thin: arguments here; the mesh side is `jucode_cotal`, the jcode side
//! (the private instance over the Harness API) is `jucode_jcode`. What the spec
//! says fails loud is refused here too, before anything is connected, as the
//! backstop of the manager extension's own refusals (`refusal`).

mod refusal;

fn usage() -> ! {
    eprintln!(
        "usage: jucode-cotal-jcode [--no-events] | jucode-cotal-jcode mcp-bridge | jucode-cotal-jcode models [--json]"
    );
    std::process::exit(2)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Before logging, the runtime or any socket: a refused launch touches nothing.
    if let Some(r) = refusal::find(&args) {
        eprintln!("{}", r.line());
        std::process::exit(refusal::EXIT_CODE)
    }
    // Logs go to stderr: stdout belongs to MCP in bridge mode.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("JUCODE_COTAL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match args.first().map(String::as_str) {
        Some("mcp-bridge") => {
            if args.len() != 1 {
                usage();
            }
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            let bridge = jucode_cotal::bridge::Bridge::from_env(std::env::vars())?;
            rt.block_on(bridge.serve_stdio())?;
            Ok(())
        }
        Some("models") => {
            let json = match &args[1..] {
                [] => false,
                [flag] if flag == "--json" => true,
                _ => usage(),
            };
            std::process::exit(jucode_jcode::run_models(json))
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
            std::process::exit(jucode_jcode::run_seat(no_events))
        }
    }
}
