//! The recovery window against `jucode-fake-jcode`, on a `ManualClock`: a
//! replacement launch the window cuts off is stopped and proven gone before
//! the seat ends; a replacement whose tree cannot be proven stopped ends the
//! seat at once; the ending line names both errors. (A transient failure
//! retried inside the window is in `startup.rs`, a permanent refusal and a
//! second disconnect in `fake_harness.rs`.)
//! Run: `cargo test -p jucode-jcode --test recovery`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use jucode_cotal::harness::HarnessSignal;
use jucode_jcode::harness::JcodeFactory;
use jucode_jcode::instance::{LaunchRecord, alive, recorded_daemons};

mod common;
use common::*;

#[tokio::test]
async fn a_replacement_cut_off_by_the_window_is_proven_stopped_before_the_seat_ends() {
    let env = Env::new();
    let clock = manual_clock();
    let f = JcodeFactory {
        clock: Some(clock.shared()),
        recovery_window: Some(Duration::from_secs(60)),
        ..env.factory()
    };
    let closed = env.ws.path().join("closed");
    let hang = env.ws.path().join("hang");
    let ctx = env.ctx(
        "cutoff",
        &[
            ("FAKE_JCODE_CLOSE_ON", "BOOM"),
            ("FAKE_JCODE_CLOSE_MARKER", closed.to_str().unwrap()),
            ("FAKE_JCODE_HANG_AT_START_IF", hang.to_str().unwrap()),
        ],
        &[],
    );
    let h = start(&f, ctx).await.unwrap();
    let home = env.home("cutoff");
    let first = tree(&home);
    let mut sig = h.signals();
    h.joined();
    assert!(next_signal(&mut sig, &HarnessSignal::TurnEnded { ok: true }).await);
    std::fs::write(&hang, b"").unwrap();
    let failed = h.send_turn("BOOM").await.unwrap_err();
    assert!(failed.message.contains("closed"), "{failed:?}");
    assert!(next_signal(&mut sig, &HarnessSignal::Reconnecting).await);
    // The replacement launched and hangs before binding its socket.
    let hanging = env.ws.path().join("hang.hanging");
    wait_until("the hanging replacement", || hanging.exists()).await;
    let rec = LaunchRecord::read(&home).unwrap().unwrap();
    let mut second = recorded_daemons(&home);
    second.extend(rec.bridge_pid);
    assert!(
        second.iter().all(|p| !first.contains(p) && alive(*p)),
        "{second:?}"
    );
    // 59 s in nothing has ended; past 60 s the launch is cut off.
    clock.advance(Duration::from_secs(59));
    assert!(f.fatal_line().is_none());
    clock.advance(Duration::from_secs(2));
    assert!(
        !next_signal(&mut sig, &HarnessSignal::Reconnected).await,
        "the seat ends"
    );
    for p in second.iter().chain(&first) {
        assert!(!alive(*p), "pid {p} outlived the window");
    }
    let line = f.fatal_line().unwrap();
    assert!(line.contains("last turn error:"), "{line}");
    assert!(
        line.contains("recovery error: the recovery window expired"),
        "{line}"
    );
    assert!(logs(&home).contains(
        "the recovery window closed during a replacement launch; its tree was proven stopped"
    ));
    h.shutdown().await;
}

#[tokio::test]
async fn a_replacement_whose_teardown_cannot_be_proven_ends_the_seat_at_once() {
    let env = Env::new();
    let clock = manual_clock();
    let f = JcodeFactory {
        clock: Some(clock.shared()),
        ..env.factory()
    };
    let closed = env.ws.path().join("closed");
    let corrupt = env.ws.path().join("corrupt");
    let exit = env.ws.path().join("exit");
    let ctx = env.ctx(
        "unprovable",
        &[
            ("FAKE_JCODE_CLOSE_ON", "BOOM"),
            ("FAKE_JCODE_CLOSE_MARKER", closed.to_str().unwrap()),
            ("FAKE_JCODE_SERVERS_CORRUPT_IF", corrupt.to_str().unwrap()),
            ("FAKE_JCODE_EXIT_AT_START_IF", exit.to_str().unwrap()),
        ],
        &[],
    );
    let h = start(&f, ctx).await.unwrap();
    let mut sig = h.signals();
    h.joined();
    assert!(next_signal(&mut sig, &HarnessSignal::TurnEnded { ok: true }).await);
    // The replacement loses its daemon's record, then dies at start.
    std::fs::write(&corrupt, b"").unwrap();
    std::fs::write(&exit, b"").unwrap();
    assert!(h.send_turn("BOOM").await.is_err());
    // No clock movement: ending inside the window proves "at once".
    assert!(
        !next_signal(&mut sig, &HarnessSignal::Reconnected).await,
        "the seat ends"
    );
    let line = f.fatal_line().unwrap();
    assert!(line.contains("recovery error: teardown_failed"), "{line}");
    assert!(line.chars().count() <= 240, "{line}");
    let hellos = env
        .requests()
        .iter()
        .filter(|r| r["req"] == "hello")
        .count();
    assert_eq!(hellos, 1, "no launch after an unprovable stop");
    h.shutdown().await;
}
