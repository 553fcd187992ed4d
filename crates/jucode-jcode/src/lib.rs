//! `jucode-jcode`: the jcode side of the Cotal connector. One seat gets one
//! private jcode instance (its own `JCODE_HOME`, runtime directory and
//! `jcode api-bridge`), driven over the Harness API v1 Unix socket.
//!
//! Start reading at [`harness::JcodeFactory`] (what the seat calls to bring the
//! instance up) and [`run_seat`] (the process entry the binary calls). The
//! pieces: [`api`] (the Harness API client), [`briefing`] (persona and mesh context,
//! once per session), [`home`] (the private home, its
//! socket alias and the connector log), [`creds`] (credential mirroring through
//! pinned parents), [`fork`] (`--resume` forks), [`instance`] (the private
//! process tree and its PID-exact teardown), [`models`] (the `models` listing),
//! [`version`] (which jcode build a seat runs and what it offers).

pub mod api;
pub mod briefing;
pub mod creds;
pub mod error;
pub mod fork;
pub mod harness;
pub mod home;
pub mod instance;
pub mod models;
pub mod version;

pub use error::{Error, Result};

/// Run one seat in this process; returns the process exit code.
///
/// A startup failure prints only its allow-listed code (details are in the
/// owner-only connector log); a seat ended by the harness prints the line
/// naming `last turn error:` and `recovery error:`.
pub fn run_seat(no_events: bool) -> i32 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("[cotal-jcode] fatal: cannot start the runtime: {e}");
            return 1;
        }
    };
    let factory = harness::JcodeFactory::default();
    let res = rt.block_on(jucode_cotal::run_process(
        no_events,
        &factory,
        jucode_cotal::seat::SeatOptions::default(),
    ));
    // Teardown and recovery tasks must not outlive the seat.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    match (res, factory.fatal_line()) {
        (Ok(()), None) => 0,
        (_, Some(line)) => {
            eprintln!("[cotal-jcode] fatal: {line}");
            1
        }
        (Err(e), None) => {
            eprintln!("[cotal-jcode] fatal: {e}");
            1
        }
    }
}

/// `models`: the operator's declared catalog; returns the process exit code.
pub fn run_models(json: bool) -> i32 {
    let env: Vec<(String, String)> = std::env::vars().collect();
    let Some(home) = fork::operator_home(&env, None) else {
        eprintln!("[cotal-jcode] models: neither JCODE_HOME nor HOME is set");
        return 1;
    };
    let listed = if json {
        models::list_json(&home).map(|v| format!("{v}\n"))
    } else {
        models::list(&home)
    };
    match listed {
        Ok(s) => {
            print!("{s}");
            0
        }
        Err(e) => {
            eprintln!("[cotal-jcode] models: {e}");
            1
        }
    }
}
