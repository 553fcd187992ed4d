//! The post-join startup rules against `jucode-fake-jcode`: nothing before
//! the confirmed presence bind; the spawn `--prompt` after a no-reply notice;
//! the startup turn held (not dropped) while a TUI turn is busy, for the whole
//! deferral window, and while the bridge reconnects; a refused startup turn
//! retried on the seat's clock; mail that arrives meanwhile kept for the
//! following turn; the two log lines about steering and native state. Time-driven rules run on a `ManualClock`.
//! Run: `cargo test -p jucode-jcode --test startup`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use jucode_cotal::harness::{HarnessSignal, Steered};
use jucode_jcode::harness::{DEFERRED_NATIVE_CHANGE, JcodeFactory, WAITING_ON_STEERING};
use jucode_jcode::instance::{LaunchRecord, alive};

mod common;
use common::*;

const PROMPT: &str = "Review the current change.";
const NOTICE: &str = "You have joined the Cotal mesh";

fn no_reply_notices(env: &Env) -> usize {
    env.requests()
        .iter()
        .filter(|r| {
            r["req"] == "send_message"
                && r["no_reply"] == true
                && r["content"].as_str().unwrap_or("").contains(NOTICE)
        })
        .count()
}

/// Move the manual clock in steps until `cond` holds (a retry's sleep may be
/// created just after any one step).
async fn advance_until(
    clock: &jucode_clock::ManualClock,
    step: Duration,
    what: &str,
    mut cond: impl FnMut() -> bool,
) {
    tokio::time::timeout(GUARD, async {
        while !cond() {
            clock.advance(step);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("deadlock guard: {what}"));
}

#[tokio::test]
async fn the_spawn_prompt_follows_a_no_reply_notice_and_only_after_the_bind() {
    let env = Env::new();
    let f = env.factory();
    let h = start(
        &f,
        env.ctx("prompted", &[], &[("COTAL_JCODE_PROMPT", PROMPT)]),
    )
    .await
    .unwrap();
    let home = env.home("prompted");
    assert!(
        logs(&home)
            .contains("readiness: orientation proved; joining, then submitting the spawn --prompt")
    );
    let mut sig = h.signals();
    // Subscribed, not bound: nothing is delivered yet.
    assert_eq!(no_reply_notices(&env) + env.sends(PROMPT), 0);
    h.joined();
    assert!(next_signal(&mut sig, &HarnessSignal::TurnEnded { ok: true }).await);
    assert_eq!(no_reply_notices(&env), 1);
    assert_eq!(env.sends(PROMPT), 1);
    assert_eq!(env.sends(NOTICE), 0, "the notice is an append, not a turn");
    let reqs = env.requests();
    let notice_at = reqs.iter().position(|r| r["no_reply"] == true).unwrap();
    let prompt_at = reqs
        .iter()
        .position(|r| r["content"].as_str().is_some_and(|c| c.contains(PROMPT)))
        .unwrap();
    assert!(notice_at < prompt_at);
    // The seat's own turn (buffered mail) comes after the prompt.
    h.send_turn("DM from bob: hi").await.unwrap();
    assert_eq!(env.sends("DM from bob: hi"), 1);
    h.shutdown().await;
}

#[tokio::test]
async fn a_refused_no_reply_notice_is_logged_and_the_prompt_still_runs() {
    let env = Env::new();
    let f = env.factory();
    let h = start(
        &f,
        env.ctx(
            "refused-notice",
            &[("FAKE_JCODE_REFUSE_NO_REPLY", NOTICE)],
            &[("COTAL_JCODE_PROMPT", PROMPT)],
        ),
    )
    .await
    .unwrap();
    let mut sig = h.signals();
    h.joined();
    assert!(next_signal(&mut sig, &HarnessSignal::TurnEnded { ok: true }).await);
    let log = logs(&env.home("refused-notice"));
    assert!(log.contains("post-join notice refused: internal"), "{log}");
    assert_eq!(env.sends(PROMPT), 1);
    assert!(f.fatal_line().is_none());
    h.shutdown().await;
}

#[tokio::test]
async fn a_busy_tui_holds_the_startup_prompt_for_the_whole_deferral_window() {
    let env = Env::new();
    let clock = manual_clock();
    let f = JcodeFactory {
        clock: Some(clock.shared()),
        ..env.factory()
    };
    let busy = env.ws.path().join("tui-busy");
    let ctx = env.ctx(
        "busy",
        &[("FAKE_JCODE_BUSY_IF", busy.to_str().unwrap())],
        &[("COTAL_JCODE_PROMPT", PROMPT)],
    );
    let h = start(&f, ctx).await.unwrap();
    std::fs::write(&busy, b"").unwrap();
    let mut sig = h.signals();
    h.joined();
    wait_until("busy refusals", || env.sends(PROMPT) >= 3).await;
    // Four minutes in: far past the old ~5 s, still inside the window.
    clock.advance(Duration::from_secs(240));
    let n = env.sends(PROMPT);
    wait_until("still offered", || env.sends(PROMPT) >= n + 3).await;
    std::fs::remove_file(&busy).unwrap();
    assert!(next_signal(&mut sig, &HarnessSignal::TurnEnded { ok: true }).await);
    let log = logs(&env.home("busy"));
    assert!(!log.contains("whole deferral window"), "{log}");
    assert!(log.contains("startup turn done"), "{log}");
    h.shutdown().await;
}

/// Mail that reaches the seat while its startup turn is still held (here by a busy TUI) is
/// buffered: it is not folded into the startup turn and not sent before it, and it runs, once,
/// in the turn that follows.
#[tokio::test]
async fn mail_arriving_while_the_startup_turn_is_held_runs_in_the_following_turn() {
    const MAIL: &str = "DM from bob: are you there?";
    let env = Env::new();
    let clock = manual_clock();
    let f = JcodeFactory {
        clock: Some(clock.shared()),
        ..env.factory()
    };
    let busy = env.ws.path().join("tui-busy");
    let ctx = env.ctx(
        "buffered",
        &[("FAKE_JCODE_BUSY_IF", busy.to_str().unwrap())],
        &[("COTAL_JCODE_PROMPT", PROMPT)],
    );
    let h = start(&f, ctx).await.unwrap();
    std::fs::write(&busy, b"").unwrap();
    h.joined();
    wait_until("busy refusals", || env.sends(PROMPT) >= 2).await;
    let mail = h.send_turn(MAIL);
    let release = async {
        // The mail waits behind the held startup turn while jcode keeps refusing it.
        let n = env.sends(PROMPT);
        wait_until("more refusals", || env.sends(PROMPT) >= n + 2).await;
        assert_eq!(
            env.sends(MAIL),
            0,
            "mail went out ahead of the startup turn"
        );
        std::fs::remove_file(&busy).unwrap();
    };
    let (sent, ()) = tokio::time::timeout(GUARD, async { tokio::join!(mail, release) })
        .await
        .expect("deadlock guard: the buffered mail");
    sent.unwrap();
    assert_eq!(env.sends(MAIL), 1);
    let reqs: Vec<String> = env
        .requests()
        .iter()
        .filter(|r| r["req"] == "send_message" && r["no_reply"] != true)
        .map(|r| r["content"].as_str().unwrap_or("").to_string())
        .collect();
    let last_prompt = reqs.iter().rposition(|c| c.contains(PROMPT)).unwrap();
    let first_mail = reqs.iter().position(|c| c.contains(MAIL)).unwrap();
    assert!(last_prompt < first_mail, "{reqs:#?}");
    assert!(
        !reqs.iter().any(|c| c.contains(PROMPT) && c.contains(MAIL)),
        "{reqs:#?}"
    );
    let log = logs(&env.home("buffered"));
    assert!(log.contains("startup turn done"), "{log}");
    h.shutdown().await;
}

#[tokio::test]
async fn a_refused_notice_standing_in_for_the_startup_turn_is_retried() {
    let env = Env::new();
    let clock = manual_clock();
    let f = JcodeFactory {
        clock: Some(clock.shared()),
        ..env.factory()
    };
    let busy = env.ws.path().join("tui-busy");
    let ctx = env.ctx(
        "retried",
        &[("FAKE_JCODE_BUSY_IF", busy.to_str().unwrap())],
        &[],
    );
    let h = start(&f, ctx).await.unwrap();
    std::fs::write(&busy, b"").unwrap();
    let mut sig = h.signals();
    h.joined();
    wait_until("busy refusals", || env.sends(NOTICE) >= 2).await;
    // Past the deferral window: that try counts as refused, not as done.
    clock.advance(Duration::from_secs(301));
    assert!(next_signal(&mut sig, &HarnessSignal::TurnEnded { ok: false }).await);
    let home = env.home("retried");
    assert!(logs(&home).contains("the startup turn was refused (internal); retrying in 1s"));
    std::fs::remove_file(&busy).unwrap();
    advance_until(&clock, Duration::from_secs(1), "the retried notice", || {
        logs(&home).contains("startup turn done")
    })
    .await;
    assert!(f.fatal_line().is_none());
    // The seat's turns run after it.
    h.send_turn("DM from bob: hi").await.unwrap();
    h.shutdown().await;
}

#[tokio::test]
async fn the_startup_prompt_is_held_while_the_bridge_reconnects() {
    let env = Env::new();
    let clock = manual_clock();
    let f = JcodeFactory {
        clock: Some(clock.shared()),
        ..env.factory()
    };
    let exit_once = env.ws.path().join("exit-once");
    let ctx = env.ctx(
        "reconnect",
        &[("FAKE_JCODE_EXIT_AT_START_IF", exit_once.to_str().unwrap())],
        &[("COTAL_JCODE_PROMPT", PROMPT)],
    );
    let h = start(&f, ctx).await.unwrap();
    let home = env.home("reconnect");
    let first = tree(&home);
    let mut sig = h.signals();
    // The first replacement fails at start (transient); the bridge dies now.
    std::fs::write(&exit_once, b"").unwrap();
    let bridge = LaunchRecord::read(&home)
        .unwrap()
        .unwrap()
        .bridge_pid
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(bridge as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(next_signal(&mut sig, &HarnessSignal::Reconnecting).await);
    h.joined();
    wait_until("the failed first replacement", || {
        logs(&home)
            .contains("replacement attempt 1 failed (startup_failed); retrying inside the window")
    })
    .await;
    // Pending, not dropped and not sent into the gap.
    assert_eq!(env.sends(PROMPT) + no_reply_notices(&env), 0);
    for p in &first {
        assert!(!alive(*p), "the broken tree's pid {p} survived");
    }
    advance_until(&clock, Duration::from_secs(1), "the replacement", || {
        logs(&home).contains("startup turn done")
    })
    .await;
    assert_eq!(no_reply_notices(&env), 1);
    assert_eq!(env.sends(PROMPT), 1);
    let log = logs(&home);
    assert!(
        log.contains("private Harness connection replaced (attempt 2)"),
        "{log}"
    );
    h.shutdown().await;
    assert!(f.fatal_line().is_none(), "{:?}", f.fatal_line());
}

#[tokio::test]
async fn steering_in_flight_holds_the_startup_prompt_and_a_tui_turn_meanwhile_defers_it() {
    let env = Env::new();
    let f = env.factory();
    let tui = env.ws.path().join("tui");
    std::fs::create_dir_all(&tui).unwrap();
    let hold = env.ws.path().join("soft-hold");
    let ctx = env.ctx(
        "steered",
        &[
            ("FAKE_JCODE_TUI_SCRIPT", tui.to_str().unwrap()),
            ("FAKE_JCODE_SOFT_REPLY_WAIT", hold.to_str().unwrap()),
        ],
        &[("COTAL_JCODE_PROMPT", PROMPT)],
    );
    let h = start(&f, ctx).await.unwrap();
    let home = env.home("steered");
    let mut sig = h.signals();
    // A TUI turn runs; the seat steers a DM into it; its answer is held.
    std::fs::write(tui.join("start-1"), b"").unwrap();
    assert!(next_signal(&mut sig, &HarnessSignal::TurnStarted).await);
    std::fs::write(&hold, b"").unwrap();
    let h2 = h.clone();
    let steer = tokio::spawn(async move { h2.soft_interrupt("DM from bob: steer me").await });
    wait_until("the soft interrupt request", || {
        env.requests().iter().any(|r| r["req"] == "soft_interrupt")
    })
    .await;
    h.joined();
    wait_until("the steering wait", || {
        logs(&home).contains(WAITING_ON_STEERING)
    })
    .await;
    // The TUI turn ends and another begins while the steering is undecided.
    std::fs::write(tui.join("end-1"), b"").unwrap();
    std::fs::write(tui.join("start-2"), b"").unwrap();
    assert!(next_signal(&mut sig, &HarnessSignal::TurnStarted).await);
    std::fs::remove_file(&hold).unwrap();
    let steered = steer.await.unwrap().unwrap();
    let Steered::Joined { result } = steered else {
        panic!("joined into the TUI turn")
    };
    assert_eq!(env.sends(PROMPT), 0, "held while steering is undecided");
    std::fs::write(tui.join("end-2"), b"").unwrap();
    assert_eq!(
        result.await.unwrap(),
        Ok(()),
        "carried by the second TUI turn"
    );
    wait_until("the startup turn", || {
        logs(&home).contains("startup turn done")
    })
    .await;
    let log = logs(&home);
    let waiting = log_pos(&log, WAITING_ON_STEERING);
    let deferred = log_pos(&log, DEFERRED_NATIVE_CHANGE);
    let done = log_pos(&log, "startup turn done");
    assert!(waiting < deferred && deferred < done, "{log}");
    assert_eq!(env.sends(PROMPT), 1);
    h.shutdown().await;
}

#[tokio::test]
async fn a_startup_prompt_cut_off_by_a_close_is_consumed_not_sent_twice() {
    let env = Env::new();
    let f = env.factory();
    let marker = env.ws.path().join("closed");
    let ctx = env.ctx(
        "ambiguous",
        &[
            ("FAKE_JCODE_CLOSE_ON", "Review the current"),
            ("FAKE_JCODE_CLOSE_MARKER", marker.to_str().unwrap()),
        ],
        &[("COTAL_JCODE_PROMPT", PROMPT)],
    );
    let h = start(&f, ctx).await.unwrap();
    let mut sig = h.signals();
    h.joined();
    // The bridge dies with the prompt in flight: jcode may have run it.
    assert!(next_signal(&mut sig, &HarnessSignal::TurnEnded { ok: false }).await);
    assert!(next_signal(&mut sig, &HarnessSignal::Reconnected).await);
    let home = env.home("ambiguous");
    wait_until("the startup outcome", || {
        logs(&home).contains("the startup turn did not succeed; the seat stays up")
    })
    .await;
    assert!(logs(&home).contains("it is consumed, not retried"));
    // The seat's own turns run on the replacement; the prompt is not sent again.
    h.send_turn("DM from bob: hi").await.unwrap();
    assert_eq!(env.sends(PROMPT), 1);
    h.shutdown().await;
}
