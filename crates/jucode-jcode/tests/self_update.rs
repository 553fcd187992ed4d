//! A managed seat never updates its own binary: every process of the private
//! tree (bridge, daemon, TUI) runs with jcode's updater off, read back from
//! the live processes (`/proc/<pid>/cmdline` and `environ`). Against
//! `jucode-fake-jcode`; `real_jcode.rs` reads the same back from the real jcode.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_jcode::instance::{LaunchRecord, recorded_daemons};

mod common;
use common::*;

#[tokio::test]
async fn every_process_of_the_private_tree_runs_with_the_updater_off() {
    let env = Env::new();
    let f = env.factory();
    let h = start(&f, env.ctx("noupdate", &[], &[("COTAL_JCODE_TUI", "1")]))
        .await
        .unwrap();
    let home = env.home("noupdate");
    let rec = LaunchRecord::read(&home).unwrap().unwrap();
    let bridge = rec.bridge_pid.expect("bridge recorded");
    let tui = rec.tui_pid.expect("TUI recorded");
    assert!(
        proc_args(bridge).iter().any(|a| a == "--no-update"),
        "{:?}",
        proc_args(bridge)
    );
    let daemons = recorded_daemons(&home);
    assert!(!daemons.is_empty());
    for pid in daemons.iter().copied().chain([bridge, tui]) {
        assert_eq!(
            proc_env(pid, "JCODE_NO_AUTO_UPDATE").as_deref(),
            Some("1"),
            "pid {pid}: {:?}",
            proc_args(pid)
        );
    }
    h.shutdown().await;
}
