//! The Harness accepting a message (jcode's `message_accepted`), which the
//! seat's run-turn ledger counts as "shown": fired for a message jcode took,
//! dropped unfired for one it refused for the whole deferral window. Against
//! `jucode-fake-jcode`; the real-jcode check is in `real_jcode.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use jucode_cotal::harness::HarnessSignal;
use jucode_jcode::harness::JcodeFactory;

mod common;
use common::*;

#[tokio::test]
async fn the_accepted_hook_fires_for_a_taken_message_and_never_for_a_refused_one() {
    let env = Env::new();
    let clock = manual_clock();
    let f = JcodeFactory {
        clock: Some(clock.shared()),
        ..env.factory()
    };
    let busy = env.ws.path().join("tui-busy");
    let ctx = env.ctx(
        "accepts",
        &[("FAKE_JCODE_BUSY_IF", busy.to_str().unwrap())],
        &[],
    );
    let h = start(&f, ctx).await.unwrap();
    h.joined();

    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::time::timeout(GUARD, h.send_turn_accepted("DM from bob: one", tx))
        .await
        .unwrap()
        .unwrap();
    assert!(rx.await.is_ok(), "jcode acknowledged the message");

    // A TUI turn holds the session: every try is refused as busy, never accepted.
    std::fs::write(&busy, b"").unwrap();
    let mut sig = h.signals();
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    let h2 = h.clone();
    let send = tokio::spawn(async move { h2.send_turn_accepted("DM from bob: two", tx).await });
    wait_until("busy refusals", || env.sends("DM from bob: two") >= 2).await;
    assert!(rx.try_recv().is_err(), "not accepted while refused");
    clock.advance(Duration::from_secs(301));
    let res = tokio::time::timeout(GUARD, send).await.unwrap().unwrap();
    assert!(res.is_err(), "refused for the whole deferral window");
    assert!(
        matches!(
            rx.try_recv(),
            Err(tokio::sync::oneshot::error::TryRecvError::Closed)
        ),
        "the hook is dropped unfired"
    );
    std::fs::remove_file(&busy).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    h.send_turn_accepted("DM from bob: three", tx)
        .await
        .unwrap();
    assert!(rx.await.is_ok());
    while let Ok(s) = sig.try_recv() {
        assert_ne!(
            s,
            HarnessSignal::Reconnecting,
            "a refusal is not a disconnect"
        );
    }
    h.shutdown().await;
}
