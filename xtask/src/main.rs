//! Project automation: `cargo xtask <command>`. Run with no command for the list.

mod bench;
mod ci;
mod conformance;
mod crashloop;
mod daemon;
mod extension;
mod fuzz;
mod interop;
mod load;
mod schema;
mod tidy;
mod web;

use std::process::ExitCode;

use anyhow::{Result, bail};

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  conformance [--no-build] [FILTER]  replay fixtures/conformance/*.jsonl against the built daemon
                                     (FILTER: run only fixtures whose name contains it)
  bench [--quick] [--no-build] [--only LIST] [--frames N] [--clients LIST] [--lines-per-write N]
                                     the release daemon against in-process references (LIST: comma-
                                     separated of fanout, coldstart, messages, paths, terminals,
                                     timers, usage, upload, page; default all; --frames and
                                     --clients size the fan-out runs, for profiling one of them;
                                     --lines-per-write sets how many lines the fan-out's engine
                                     writes at once, default 32)
  load [--quick] [--no-build] [--clients N] [--rate R] [--seconds S] [--sessions M] [--stream-ms MS] [--keepalive S]
                                     the release daemon under N clients x R ops/s while M sessions
                                     stream, one client stalled; fails on any error, a slow close or RSS
  tidy [--fix]                       crate graph vs docs/ARCHITECTURE.md (--fix rewrites it), layering
                                     rules, unused dependencies, file sizes
  schema [--check]                   write docs/schema/*.json and the op index of docs/PROTOCOL.md
                                     from jucode-protocol (--check: fail if they differ instead)
  ci                                 fmt, clippy, tidy, docs, build, tests, the extension, conformance,
                                     bench --quick
  extension [--no-build]             the Cotal extension (extension/cotal-jcode): npm ci, tsc and
                                     node --test against the built jucode-cotal-jcode
  web [--check]                      rebuild the remote page's committed bundle (crates/jucode-web/assets)
                                     from web/ (--check: fail if it differs from a fresh build)
  browser [--no-build] [FILTER]      the remote page: tsc, unit tests, then its scenarios in headless
                                     Chromium against the built daemon and relay
  crashloop [--quick] [--kills N] [--seed S] [--no-build]
                                     SIGKILL the daemon N times (default 1000, --quick 50) while a
                                     client changes every kind of state; nothing acknowledged lost
  interop                            install the real Claude Code, Codex and ACP CLIs and drive them
                                     against a fake model server, through the adapters and through
                                     the daemon (start gate, gateway, TUI hand-off)
  fuzz [--runs N | --seconds S] [TARGET...]
                                     build the libFuzzer targets in fuzz/ and run each on its corpus
                                     (default 1,000,000 runs each); fails on any crash (needs
                                     cargo-fuzz)";

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `[--no-build] [FILTER]`, as `conformance` and `browser` take them: (build, filter).
fn build_and_filter(rest: &[String]) -> Result<(bool, Option<String>)> {
    let mut build = true;
    let mut filter = None;
    for arg in rest {
        match arg.as_str() {
            "--no-build" => build = false,
            flag if flag.starts_with('-') => bail!("unknown flag {flag}\n{USAGE}"),
            f if filter.is_none() => filter = Some(f.to_string()),
            extra => bail!("unexpected argument {extra}\n{USAGE}"),
        }
    }
    Ok((build, filter))
}

fn run() -> Result<bool> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        println!("{USAGE}");
        return Ok(true);
    };
    match command.as_str() {
        "conformance" => {
            let (build, filter) = build_and_filter(rest)?;
            conformance::run(conformance::Options { build, filter })
        }
        "bench" => {
            let mut options = bench::Options {
                quick: false,
                build: true,
                only: None,
                frames: None,
                clients: None,
                lines_per_write: None,
            };
            let mut args = rest.iter();
            while let Some(arg) = args.next() {
                match arg.as_str() {
                    "--quick" => options.quick = true,
                    "--no-build" => options.build = false,
                    "--only" => {
                        let Some(list) = args.next() else {
                            bail!("--only needs a list of benches\n{USAGE}");
                        };
                        options.only = Some(bench::select(list)?);
                    }
                    "--frames" => {
                        let n = args.next().and_then(|n| n.parse().ok());
                        let Some(n) = n else {
                            bail!("--frames needs a number\n{USAGE}");
                        };
                        options.frames = Some(n);
                    }
                    "--clients" => {
                        let list = args.next().map(|l| bench::client_counts(l));
                        let Some(list) = list else {
                            bail!("--clients needs a list of numbers\n{USAGE}");
                        };
                        options.clients = Some(list?);
                    }
                    "--lines-per-write" => {
                        let n = args.next().and_then(|n| n.parse().ok()).filter(|n| *n > 0);
                        let Some(n) = n else {
                            bail!("--lines-per-write needs a number above 0\n{USAGE}");
                        };
                        options.lines_per_write = Some(n);
                    }
                    other => bail!("unexpected argument {other}\n{USAGE}"),
                }
            }
            bench::run(options)
        }
        "load" => {
            let mut options = load::Options {
                quick: false,
                build: true,
                clients: None,
                rate: None,
                seconds: None,
                sessions: None,
                stream_ms: None,
                keepalive: None,
            };
            let mut args = rest.iter();
            while let Some(arg) = args.next() {
                let mut value = |flag: &str| -> Result<String> {
                    match args.next() {
                        Some(v) => Ok(v.clone()),
                        None => bail!("{flag} needs a value\n{USAGE}"),
                    }
                };
                match arg.as_str() {
                    "--quick" => options.quick = true,
                    "--no-build" => options.build = false,
                    "--clients" => options.clients = Some(value(arg)?.parse()?),
                    "--rate" => options.rate = Some(value(arg)?.parse()?),
                    "--seconds" => options.seconds = Some(value(arg)?.parse()?),
                    "--sessions" => options.sessions = Some(value(arg)?.parse()?),
                    "--stream-ms" => options.stream_ms = Some(value(arg)?.parse()?),
                    "--keepalive" => options.keepalive = Some(value(arg)?.parse()?),
                    other => bail!("unexpected argument {other}\n{USAGE}"),
                }
            }
            load::run(options)
        }
        "ci" => {
            if let Some(extra) = rest.first() {
                bail!("ci takes no arguments, got {extra}");
            }
            ci::run()
        }
        "extension" => {
            let mut options = extension::Options { build: true };
            for arg in rest {
                match arg.as_str() {
                    "--no-build" => options.build = false,
                    other => bail!("unexpected argument {other}\n{USAGE}"),
                }
            }
            extension::run(options)
        }
        "tidy" => {
            let mut options = tidy::Options { fix: false };
            for arg in rest {
                match arg.as_str() {
                    "--fix" => options.fix = true,
                    other => bail!("unexpected argument {other}\n{USAGE}"),
                }
            }
            tidy::run(options)
        }
        "schema" => schema::run(rest),
        "web" => match rest {
            [] => web::build(),
            [flag] if flag == "--check" => web::check(),
            other => bail!("unexpected arguments {other:?}\n{USAGE}"),
        },
        "browser" => {
            let (build, filter) = build_and_filter(rest)?;
            web::browser(web::BrowserOptions { build, filter })
        }
        "crashloop" => crashloop::run(crashloop::parse(rest)?),
        "interop" => {
            if let Some(extra) = rest.first() {
                bail!("interop takes no arguments, got {extra}");
            }
            interop::run()
        }
        "fuzz" => fuzz::run(fuzz::parse(rest)?),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(true)
        }
        other => bail!("unknown command {other}\n{USAGE}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn no_build_and_one_filter_are_read_and_anything_else_refused() {
        assert_eq!(build_and_filter(&args(&[])).unwrap(), (true, None));
        assert_eq!(
            build_and_filter(&args(&["--no-build", "relay"])).unwrap(),
            (false, Some("relay".into()))
        );
        assert!(build_and_filter(&args(&["--bogus"])).is_err());
        assert!(build_and_filter(&args(&["a", "b"])).is_err());
    }
}
