//! The whole jcode side against `jucode-fake-jcode` (a test double speaking
//! the recorded Harness API frames over the real Unix socket, with a real
//! detached "daemon" process): launch, readiness, turns, relaunch, fork,
//! refusals, a bridge closing mid-turn, a pre-MCP tool snapshot, a daemon
//! ignoring SIGTERM and stale-tree reaping. Run: `cargo test -p jucode-jcode`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use jucode_cotal::harness::{Harness, HarnessSignal, Steered, TurnFailure};
use jucode_jcode::harness::JcodeFactory;
use jucode_jcode::instance::{LaunchRecord, alive, recorded_daemons};

mod common;
use common::*;

#[tokio::test]
async fn launch_proves_orientation_runs_a_tool_turn_and_teardown_leaves_nothing() {
    let env = Env::new();
    let f = env.factory();
    let h = start(&f, env.ctx("alice", &[], &[])).await.unwrap();
    let home = env.home("alice");
    let pids = tree(&home);
    assert_eq!(pids.len(), 2, "bridge and daemon recorded");
    assert!(pids.iter().all(|p| alive(*p)));
    let log = logs(&home);
    assert!(
        log.contains("pre-join readiness: orientation proof in flight (bound 180s)"),
        "{log}"
    );
    assert!(
        log.contains("readiness: orientation proved; joining with no spawn --prompt"),
        "{log}"
    );
    assert!(
        log.contains("route: provider fake serves fake-model"),
        "{log}"
    );
    assert_eq!(env.sends("cotal_orientation"), 1);
    // Only the cotal entry in the private mcp.json.
    let mcp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.root.join("mcp.json")).unwrap()).unwrap();
    assert_eq!(
        mcp["mcpServers"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        vec!["cotal"]
    );
    // The mirrored config reached the private home.
    assert!(home.root.join("config.toml").exists());

    let mut sig = h.signals(); // the seat joined: the notice turn runs

    h.joined();
    h.send_turn("USE_TOOL now").await.unwrap();
    assert_eq!(env.sends("You have joined the Cotal mesh"), 1);
    let mut saw_activity = false;
    while let Ok(s) = sig.try_recv() {
        saw_activity |= s == HarnessSignal::Activity;
    }
    assert!(saw_activity);
    let j = h.journal().unwrap();
    let snap = std::fs::read_to_string(j.snapshot_path()).unwrap();
    assert!(snap.contains("\"tool_use\"") && snap.contains("fake-tool-output"));
    assert_eq!(
        h.model_label(),
        Some(("fake-model".to_string(), Some("fake".to_string())))
    );

    h.shutdown().await;
    assert!(f.fatal_line().is_none());
    for p in pids {
        assert!(!alive(p), "pid {p} survived the stop");
    }
}

#[tokio::test]
async fn relaunch_continues_the_largest_session_of_the_working_directory() {
    let env = Env::new();
    let f = env.factory();
    let h = start(&f, env.ctx("bob", &[], &[])).await.unwrap();
    let first = h.journal().unwrap().session_id;
    let _ = h.signals();
    h.joined();
    h.send_turn("remember this").await.unwrap();
    h.shutdown().await;
    let h = start(&f, env.ctx("bob", &[], &[])).await.unwrap();
    assert_eq!(h.journal().unwrap().session_id, first);
    assert!(logs(&env.home("bob")).contains(&format!("continuing session {first}")));
    h.shutdown().await;
    // Another name keys another home and starts fresh.
    let other = start(&f, env.ctx("carol", &[], &[])).await.unwrap();
    assert_ne!(other.journal().unwrap().session_id, first);
    other.shutdown().await;
}

#[tokio::test]
async fn resume_forks_the_operator_session_and_a_relaunch_continues_the_fork() {
    let env = Env::new();
    let sessions = env.op.path().join(".jcode/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let snap = include_str!("data/session.snapshot.tooluse.json");
    let src_id = "session_tulip_1795987393872_555be4475d8f4fcc";
    std::fs::write(sessions.join(format!("{src_id}.json")), snap).unwrap();
    let f = env.factory();
    let h = start(
        &f,
        env.ctx("forker", &[], &[("COTAL_JCODE_RESUME", src_id)]),
    )
    .await
    .unwrap();
    let fork_id = h.journal().unwrap().session_id;
    assert_ne!(fork_id, src_id);
    let fork: serde_json::Value =
        serde_json::from_slice(&std::fs::read(h.journal().unwrap().snapshot_path()).unwrap())
            .unwrap();
    assert_eq!(fork["parent_id"], src_id);
    assert!(fork["messages"].to_string().contains("USE_TOOL now"));
    h.shutdown().await;
    assert_eq!(
        std::fs::read_to_string(sessions.join(format!("{src_id}.json"))).unwrap(),
        snap
    );
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.home("forker").resume_record()).unwrap())
            .unwrap();
    assert_eq!(rec["source_session_id"], src_id);
    assert_eq!(rec["title"], "Recorded session");
    assert_eq!(rec["sha256"].as_str().unwrap().len(), 64);
    // The source may be gone; the relaunch continues the fork without it.
    std::fs::remove_dir_all(&sessions).unwrap();
    let h = start(
        &f,
        env.ctx("forker", &[], &[("COTAL_JCODE_RESUME", src_id)]),
    )
    .await
    .unwrap();
    assert_eq!(h.journal().unwrap().session_id, fork_id);
    h.shutdown().await;
}

#[tokio::test]
async fn a_pre_mcp_tool_snapshot_repeats_the_proof_once() {
    let env = Env::new();
    let f = env.factory();
    let h = start(
        &f,
        env.ctx("late", &[("FAKE_JCODE_PRE_MCP_TURNS", "1")], &[]),
    )
    .await
    .unwrap();
    assert_eq!(env.sends("cotal_orientation"), 2);
    // The repeat waited for jcode to report the MCP server connected.
    let log = logs(&env.home("late"));
    assert!(
        log.contains("repeating the proof; jcode reported the cotal MCP server connected"),
        "{log}"
    );
    h.shutdown().await;
}

/// The second whole-seat flake: on a loaded host jcode's MCP server came up
/// after both readiness turns. The one repeat now waits for jcode to report
/// the server connected, so a late server still passes the proof.
#[tokio::test]
async fn a_late_mcp_server_still_passes_the_one_repeat() {
    let env = Env::new();
    let f = env.factory();
    let h = start(
        &f,
        env.ctx("slow-mcp", &[("FAKE_JCODE_MCP_DELAY_MS", "1500")], &[]),
    )
    .await
    .unwrap();
    assert_eq!(env.sends("cotal_orientation"), 2);
    assert!(logs(&env.home("slow-mcp")).contains("jcode reported the cotal MCP server connected"));
    h.shutdown().await;
}

/// The third whole-seat flake: jcode 0.67.1 acked the repeat sent right
/// after the first proof turn's turn_done, then refused it ("Already
/// processing a message"); the refused message is sent again.
#[tokio::test]
async fn a_message_acked_then_refused_as_busy_is_sent_again() {
    let env = Env::new();
    let f = env.factory();
    let h = start(
        &f,
        env.ctx(
            "busy",
            &[
                ("FAKE_JCODE_PRE_MCP_TURNS", "1"),
                ("FAKE_JCODE_BUSY_AFTER_TURN", "1"),
            ],
            &[],
        ),
    )
    .await
    .unwrap();
    // Two proof turns ran; the refused send in between was repeated.
    assert_eq!(env.sends("cotal_orientation"), 3);
    let log = logs(&env.home("busy"));
    assert!(
        log.contains("readiness: orientation proved; joining with no spawn --prompt"),
        "{log}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_bridge_that_never_shows_the_tools_fails_loud_and_is_stopped() {
    let env = Env::new();
    let f = JcodeFactory {
        mcp_hint_wait: Some(Duration::from_millis(300)),
        ..env.factory()
    };
    let err = start(
        &f,
        env.ctx("mute", &[("FAKE_JCODE_PRE_MCP_TURNS", "5")], &[]),
    )
    .await
    .err()
    .unwrap();
    assert!(err.to_string().contains("readiness_failed"), "{err}");
    assert_eq!(startup_code(&f), "readiness_failed");
    assert_eq!(env.sends("cotal_orientation"), 2);
    let home = env.home("mute");
    assert!(
        logs(&home).contains("jcode did not report (within the wait)"),
        "{}",
        logs(&home)
    );
    for p in tree(&home) {
        assert!(!alive(p), "pid {p} survived a failed start");
    }
}

#[tokio::test]
async fn a_provider_refusal_of_the_readiness_turn_is_named() {
    let env = Env::new();
    let f = env.factory();
    let err = start(
        &f,
        env.ctx(
            "refused",
            &[
                ("FAKE_JCODE_FAIL_ON", "cotal_orientation"),
                ("FAKE_JCODE_FAIL_CODE", "rate_limit"),
            ],
            &[],
        ),
    )
    .await;
    assert!(err.is_err());
    assert_eq!(startup_code(&f), "provider_refused");
    // The Harness's own code, not a guess from the refusal's text.
    assert!(logs(&env.home("refused")).contains("readiness: provider refusal (rate_limit)"));
}

#[tokio::test]
async fn readiness_timeout_names_whether_the_call_was_observed() {
    let env = Env::new();
    let f = env.factory();
    let ctx = env.ctx(
        "slow",
        &[("FAKE_JCODE_TURN_DELAY_MS", "30000")],
        &[("COTAL_JCODE_READINESS_TIMEOUT_MS", "300")],
    );
    assert!(start(&f, ctx).await.is_err());
    assert_eq!(startup_code(&f), "readiness_timeout");
    assert!(logs(&env.home("slow")).contains("(orientation call observed: false)"));
}

#[tokio::test]
async fn model_and_effort_refusals_use_their_codes() {
    let env = Env::new();
    /// name, --model, --variant, fake knobs, expected code
    type Case<'a> = (
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
        Vec<(&'a str, &'a str)>,
        &'a str,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "m1",
            Some("fake/fake-model"),
            None,
            vec![],
            "model_prefix_rejected",
        ),
        (
            "m2",
            Some("nope"),
            None,
            vec![("FAKE_JCODE_REFUSE_MODEL", "nope")],
            "model_refused",
        ),
        (
            "m3",
            Some("fake-model"),
            Some("high"),
            vec![(
                "FAKE_JCODE_ROUTES",
                r#"[{"model":"fake-model","provider":"a","available":true},{"model":"fake-model","provider":"b","available":true}]"#,
            )],
            "model_mismatch",
        ),
        (
            "m4",
            None,
            Some("high"),
            vec![("FAKE_JCODE_EFFORT", "unsupported")],
            "effort_unsupported",
        ),
        (
            "m5",
            None,
            Some("ultra"),
            vec![("FAKE_JCODE_EFFORT", "refuse")],
            "effort_refused",
        ),
        (
            "m7",
            None,
            Some("ultra"),
            vec![("FAKE_JCODE_EFFORT", "refuse-ladder")],
            "effort_refused",
        ),
    ];
    for (name, model, variant, extra, code) in cases {
        let f = env.factory();
        let mut ctx = env.ctx(name, &extra, &[]);
        ctx.model = model.map(str::to_string);
        ctx.variant = variant.map(str::to_string);
        assert!(start(&f, ctx).await.is_err(), "{name}");
        assert_eq!(startup_code(&f), code, "{name}");
        for p in tree(&env.home(name)) {
            assert!(!alive(p), "{name}: pid {p} survived");
        }
    }
    // The ladder jcode named is logged; its other text stays out of that line.
    let log = logs(&env.home("m7"));
    let line = log
        .lines()
        .find(|l| l.contains("accepted ladder"))
        .expect(&log);
    assert!(
        line.ends_with(
            "reasoning effort \"ultra\" refused; accepted ladder: none, low, medium, high"
        ),
        "{line}"
    );
    assert!(!line_mentions(&log, "req_PRIVATE42", "accepted ladder"));
    assert!(!logs(&env.home("m5")).contains("accepted ladder"));
    // An accepted model and variant pass, and the model is the presence label.
    let f = env.factory();
    let mut ctx = env.ctx("m6", &[], &[]);
    ctx.model = Some("fake-model".into());
    ctx.variant = Some("high".into());
    let h = start(&f, ctx).await.unwrap();
    assert_eq!(h.model_label().unwrap().0, "fake-model");
    let reqs = env.requests();
    let set_model = reqs.iter().position(|r| r["req"] == "set_model").unwrap();
    let effort = reqs
        .iter()
        .position(|r| r["req"] == "set_reasoning_effort")
        .unwrap();
    let first_turn = reqs
        .iter()
        .rposition(|r| r["req"] == "send_message")
        .unwrap();
    assert!(set_model < effort && effort < first_turn);
    h.shutdown().await;
}

#[tokio::test]
async fn startup_refusals_before_launch() {
    let env = Env::new();
    let f = env.factory();
    std::fs::write(env.workdir().join(".mcp.json"), "{}").unwrap();
    assert!(start(&f, env.ctx("p", &[], &[])).await.is_err());
    assert_eq!(startup_code(&f), "project_mcp_config");
    std::fs::remove_file(env.workdir().join(".mcp.json")).unwrap();

    let f = env.factory();
    assert!(
        start(&f, env.ctx("t", &[], &[("COTAL_JCODE_TUI", "maybe")]))
            .await
            .is_err()
    );
    assert_eq!(startup_code(&f), "invalid_config");

    let f = env.factory();
    assert!(
        start(
            &f,
            env.ctx("n", &[], &[("COTAL_JCODE_BIN", "/nonexistent/jcode")])
        )
        .await
        .is_err()
    );
    assert_eq!(startup_code(&f), "jcode_not_found");

    // Listing the home's prior sessions kills the harness: named, the tree stopped.
    let f = env.factory();
    let ctx = env.ctx("l", &[("FAKE_JCODE_DIE_ON_LIST", "1")], &[]);
    assert!(start(&f, ctx).await.is_err());
    assert_eq!(startup_code(&f), "sessions_enumeration_failed");
    for p in tree(&env.home("l")) {
        assert!(!alive(p), "pid {p} of the failed launch survived");
    }

    let f = env.factory();
    let ctx = env.ctx("r", &[], &[("COTAL_JCODE_RESUME", "session_missing_1_abc")]);
    assert!(start(&f, ctx).await.is_err());
    assert_eq!(startup_code(&f), "resume_refused");
}

#[tokio::test]
async fn an_attach_returning_another_session_is_refused() {
    let env = Env::new();
    let f = env.factory();
    let h = start(&f, env.ctx("swap", &[], &[])).await.unwrap();
    h.shutdown().await;
    let f = env.factory();
    assert!(
        start(
            &f,
            env.ctx("swap", &[("FAKE_JCODE_ATTACH_OTHER", "1")], &[])
        )
        .await
        .is_err()
    );
    assert_eq!(startup_code(&f), "attach_mismatch");
}

/// Whether a log line containing `marker` also contains `needle`.
#[tokio::test]
async fn a_bridge_closing_mid_turn_is_replaced_once_then_ends_the_seat() {
    let env = Env::new();
    let marker = env.ws.path().join("closed-once");
    let f = env.factory();
    let ctx = env.ctx(
        "flaky",
        &[
            ("FAKE_JCODE_CLOSE_ON", "BOOM"),
            ("FAKE_JCODE_CLOSE_MARKER", marker.to_str().unwrap()),
        ],
        &[],
    );
    let h = start(&f, ctx).await.unwrap();
    let sid = h.journal().unwrap().session_id;
    let home = env.home("flaky");
    let first_tree = tree(&home);
    let mut sig = h.signals();
    h.joined();
    let failed = h.send_turn("BOOM please").await.unwrap_err();
    assert!(failed.message.contains("closed"), "{failed:?}");
    assert!(next_signal(&mut sig, &HarnessSignal::Reconnecting).await);
    assert!(next_signal(&mut sig, &HarnessSignal::Reconnected).await);
    for p in &first_tree {
        assert!(!alive(*p), "the broken tree's pid {p} survived");
    }
    // The batch is redriven on the same session.
    h.send_turn("again").await.unwrap();
    assert_eq!(h.journal().unwrap().session_id, sid);
    let attaches = env
        .requests()
        .iter()
        .filter(|r| r["req"] == "attach_session" && r["session_id"] == sid.as_str())
        .count();
    assert_eq!(attaches, 1);

    // A second disconnect after a successful replacement ends the seat.
    std::fs::remove_file(&marker).unwrap();
    assert!(h.send_turn("BOOM again").await.is_err());
    assert!(
        !next_signal(&mut sig, &HarnessSignal::Reconnected).await,
        "the signal channel closes"
    );
    let line = f.fatal_line().unwrap();
    assert!(line.chars().count() <= 240, "{line}");
    let lte = line.find("last turn error:").expect(&line);
    let rec = line.find("recovery error:").expect(&line);
    assert!(lte < rec, "{line}");
    h.shutdown().await;
    for p in tree(&home) {
        assert!(!alive(p));
    }
}

/// The whole-seat flake: a peer message that arrives only after the
/// post-join notice turn ended must still start a turn (the startup gate
/// stays open for senders that come later).
#[tokio::test]
async fn a_turn_sent_after_the_startup_turn_ended_still_runs() {
    let env = Env::new();
    let f = env.factory();
    let h = start(&f, env.ctx("late-dm", &[], &[])).await.unwrap();
    let mut sig = h.signals(); // joined: the notice runs as the first turn
    h.joined();
    assert!(next_signal(&mut sig, &HarnessSignal::TurnEnded { ok: true }).await);
    assert_eq!(env.sends("You have joined the Cotal mesh"), 1);
    tokio::time::timeout(GUARD, h.send_turn("DM from bob: ping"))
        .await
        .expect("deadlock guard: a turn after the startup turn never ran")
        .unwrap();
    assert_eq!(env.sends("DM from bob: ping"), 1);
    h.shutdown().await;
}

#[tokio::test]
async fn a_daemon_ignoring_sigterm_is_killed_by_exact_pid() {
    let env = Env::new();
    let f = env.factory();
    let h = start(
        &f,
        env.ctx("stubborn", &[("FAKE_JCODE_IGNORE_TERM", "1")], &[]),
    )
    .await
    .unwrap();
    let home = env.home("stubborn");
    let daemons = recorded_daemons(&home);
    assert_eq!(daemons.len(), 1);
    h.shutdown().await;
    assert!(f.fatal_line().is_none(), "{:?}", f.fatal_line());
    assert!(!alive(daemons[0]));
}

fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

#[tokio::test]
async fn a_next_launch_stops_a_dead_seats_tree_but_not_a_live_seats() {
    let env = Env::new();
    // The first host runs on its own runtime; dropping that runtime is the
    // host dying: no teardown runs and its tree keeps running.
    let (f, ctx) = (env.factory(), env.ctx("orphan", &[], &[]));
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let h = rt.block_on(start(&f, ctx)).unwrap();
        std::mem::forget(h);
        rt.shutdown_background();
    })
    .join()
    .unwrap();
    let home = env.home("orphan");
    let old = tree(&home);
    assert_eq!(old.len(), 2);
    assert!(old.iter().all(|p| alive(*p)));
    // The host "dies" without teardown: its record names a live host first.
    let mut host = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap();
    let mut rec = LaunchRecord::read(&home).unwrap().unwrap();
    rec.host_pid = host.id();
    rec.write(&home).unwrap();
    let f2 = env.factory();
    assert!(start(&f2, env.ctx("orphan", &[], &[])).await.is_err());
    assert_eq!(startup_code(&f2), "startup_failed");
    assert!(
        old.iter().all(|p| alive(*p)),
        "a live host's tree is left alone"
    );
    host.kill().unwrap();
    host.wait().unwrap();
    rec.host_pid = dead_pid();
    rec.write(&home).unwrap();
    let f3 = env.factory();
    let h2 = start(&f3, env.ctx("orphan", &[], &[])).await.unwrap();
    for p in &old {
        assert!(!alive(*p), "the dead seat's pid {p} survived");
    }
    h2.shutdown().await;
}

#[tokio::test]
async fn the_tui_opens_on_the_managed_session_and_is_stopped_with_the_seat() {
    let env = Env::new();
    let f = env.factory();
    let h = start(&f, env.ctx("tui", &[], &[("COTAL_JCODE_TUI", "1")]))
        .await
        .unwrap();
    let home = env.home("tui");
    let tui = LaunchRecord::read(&home)
        .unwrap()
        .unwrap()
        .tui_pid
        .expect("TUI recorded");
    assert!(alive(tui));
    let cmdline = std::fs::read(format!("/proc/{tui}/cmdline")).unwrap();
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).to_string())
        .collect();
    let sid = h.journal().unwrap().session_id;
    assert!(
        args.windows(2).any(|w| w[0] == "--resume" && w[1] == sid),
        "{args:?}"
    );
    assert!(
        args.windows(2)
            .any(|w| w[0] == "--socket" && w[1] == home.daemon_socket().display().to_string()),
        "{args:?}"
    );
    h.shutdown().await;
    assert!(!alive(tui));
    assert!(!home.alias_dir.exists(), "the socket alias is cleaned up");
}

/// Starts seat `name` on the fake with `knobs`, and a turn "long work" in the background.
async fn busy_seat(
    env: &Env,
    name: &str,
    knobs: &[(&str, &str)],
) -> (
    Arc<dyn Harness>,
    tokio::sync::broadcast::Receiver<HarnessSignal>,
    tokio::task::JoinHandle<Result<(), TurnFailure>>,
) {
    let f = env.factory();
    let h = start(&f, env.ctx(name, knobs, &[])).await.unwrap();
    let sig = h.signals();
    h.joined();
    let turn = {
        let h = h.clone();
        tokio::spawn(async move { h.send_turn("long work").await })
    };
    (h, sig, turn)
}

/// Send a soft interrupt once jcode got the turn's message (the turn is open).
async fn interrupt_during(env: &Env, h: &Arc<dyn Harness>, text: &str) {
    use jucode_clock::Clock as _;
    let clock = jucode_clock::SystemClock::new();
    while env.sends("long work") == 0 {
        assert!(clock.elapsed() < GUARD, "deadlock guard: no running turn");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    h.soft_interrupt(text).await.unwrap();
}

fn count_in_snapshot(h: &Arc<dyn Harness>, needle: &str) -> usize {
    std::fs::read_to_string(h.journal().unwrap().snapshot_path())
        .unwrap()
        .matches(needle)
        .count()
}

#[tokio::test]
async fn a_soft_interrupt_during_a_turn_is_injected_once() {
    let env = Env::new();
    let (h, _sig, turn) = busy_seat(&env, "steer", &[("FAKE_JCODE_TURN_DELAY_MS", "400")]).await;
    interrupt_during(&env, &h, "STEER-1").await;
    turn.await.unwrap().unwrap();
    let snap = std::fs::read_to_string(h.journal().unwrap().snapshot_path()).unwrap();
    assert_eq!(count_in_snapshot(&h, "STEER-1"), 1, "{snap}");
    h.shutdown().await;
}

#[tokio::test]
async fn an_interrupt_that_missed_the_turn_runs_as_a_follow_up_not_twice() {
    let env = Env::new();
    let knobs = [
        ("FAKE_JCODE_TURN_DELAY_MS", "400"),
        ("FAKE_JCODE_INJECT", "never"),
    ];
    let (h, _sig, turn) = busy_seat(&env, "late-steer", &knobs).await;
    interrupt_during(&env, &h, "STEER-2").await;
    turn.await.unwrap().unwrap();
    // jcode's queue was cancelled and the text ran as its own turn, once.
    assert!(
        env.requests()
            .iter()
            .any(|r| r["req"] == "cancel_soft_interrupts")
    );
    assert_eq!(env.sends("STEER-2"), 1);
    assert_eq!(count_in_snapshot(&h, "STEER-2"), 1);
    // One that comes when no turn is open (the turn ended as the seat sent
    // it) starts its own turn, signalled like a foreign one, and runs once;
    // jcode's idle queue is never used.
    let mut sig = h.signals();
    h.joined();
    let cancels = |env: &Env| {
        env.requests()
            .iter()
            .filter(|r| r["req"] == "cancel_soft_interrupts" || r["req"] == "soft_interrupt")
            .count()
    };
    let before = cancels(&env);
    h.soft_interrupt("IDLE-1").await.unwrap();
    assert!(next_signal(&mut sig, &HarnessSignal::TurnStarted).await);
    assert!(next_signal(&mut sig, &HarnessSignal::TurnEnded { ok: true }).await);
    assert_eq!(env.sends("IDLE-1"), 1);
    assert_eq!(count_in_snapshot(&h, "IDLE-1"), 1);
    assert_eq!(cancels(&env), before);
    h.shutdown().await;
}

/// The third whole-seat flake: the seat sent a DM as a soft interrupt just
/// before the turn's turn_done and jcode answered after it. The turn now
/// stays open until the interrupt is decided, so the DM joins it (here as a
/// follow-up) instead of being refused after the seat counted the turn done.
#[tokio::test]
async fn an_interrupt_answered_after_turn_done_still_joins_that_turn() {
    let env = Env::new();
    let knobs = [
        ("FAKE_JCODE_TURN_DELAY_MS", "200"),
        ("FAKE_JCODE_SOFT_REPLY_DELAY_MS", "800"),
    ];
    let (h, _sig, turn) = busy_seat(&env, "late-answer", &knobs).await;
    interrupt_during(&env, &h, "STEER-3").await;
    turn.await.unwrap().unwrap();
    // By the time the turn returned, the interrupt ran, once.
    assert_eq!(env.sends("STEER-3"), 1);
    assert_eq!(count_in_snapshot(&h, "STEER-3"), 1);
    h.shutdown().await;
}

/// The seat gives up on an interrupt whose answer is late (its own bound):
/// the turn still ends, and jcode's queue, which may hold the text, is
/// cleared because the seat carries it again.
#[tokio::test]
async fn an_interrupt_the_seat_abandons_neither_hangs_the_turn_nor_stays_queued() {
    let env = Env::new();
    let knobs = [
        ("FAKE_JCODE_TURN_DELAY_MS", "200"),
        ("FAKE_JCODE_SOFT_REPLY_DELAY_MS", "800"),
    ];
    let (h, _sig, turn) = busy_seat(&env, "abandoned", &knobs).await;
    while env.sends("long work") == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let gave_up =
        tokio::time::timeout(Duration::from_millis(50), h.soft_interrupt("STEER-4")).await;
    assert!(gave_up.is_err(), "the seat's own bound fired first");
    tokio::time::timeout(GUARD, turn)
        .await
        .expect("deadlock guard: the turn never ended")
        .unwrap()
        .unwrap();
    assert!(
        env.requests()
            .iter()
            .any(|r| r["req"] == "cancel_soft_interrupts")
    );
    assert_eq!(env.sends("STEER-4"), 0);
    h.shutdown().await;
}

/// The turn the seat sent ends and, in that instant, the operator's TUI turn
/// begins; the interrupt sent during the first is answered only then and
/// jcode injects it into the TUI turn. `Joined` is told that turn's outcome.
async fn interrupt_into_a_tui_turn(tui_fails: bool) -> (Env, Arc<dyn Harness>, bool) {
    let env = Env::new();
    let mut extra = vec![("FAKE_JCODE_TUI_TURN_AFTER", "long work")];
    if tui_fails {
        extra.push(("FAKE_JCODE_TUI_TURN_FAIL", "1"));
    }
    let (h, mut sig, turn) = busy_seat(&env, "tui-steer", &extra).await;
    while env.sends("long work") == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let steered = tokio::time::timeout(GUARD, h.soft_interrupt("STEER-TUI"))
        .await
        .expect("deadlock guard")
        .unwrap();
    let Steered::Joined { result } = steered else {
        panic!("sent while the turn was open: it joins");
    };
    // The seat's own turn ended well either way.
    tokio::time::timeout(GUARD, turn)
        .await
        .expect("deadlock guard")
        .unwrap()
        .unwrap();
    assert!(next_signal(&mut sig, &HarnessSignal::TurnStarted).await);
    let outcome = tokio::time::timeout(GUARD, result)
        .await
        .expect("deadlock guard")
        .expect("the harness tells the outcome");
    assert!(next_signal(&mut sig, &HarnessSignal::TurnEnded { ok: !tui_fails }).await);
    (env, h, outcome.is_ok())
}

#[tokio::test]
async fn an_interrupt_joined_into_a_tui_turn_that_fails_is_decided_by_that_turn() {
    let (env, h, ok) = interrupt_into_a_tui_turn(true).await;
    assert!(
        !ok,
        "the TUI turn that carried it failed, though the turn it was sent in succeeded"
    );
    // Never re-sent by the harness: the seat carries it again.
    assert_eq!(env.sends("STEER-TUI"), 0);
    h.shutdown().await;
}

#[tokio::test]
async fn an_interrupt_joined_into_a_tui_turn_that_succeeds_is_carried_once() {
    let (env, h, ok) = interrupt_into_a_tui_turn(false).await;
    assert!(ok);
    assert_eq!(
        env.sends("STEER-TUI"),
        0,
        "no follow-up: the TUI turn took it"
    );
    assert_eq!(count_in_snapshot(&h, "STEER-TUI"), 1);
    h.shutdown().await;
}

#[tokio::test]
async fn a_bridge_dying_at_start_is_startup_failed_and_its_daemon_is_stopped() {
    let env = Env::new();
    let f = env.factory();
    assert!(
        start(
            &f,
            env.ctx("crash", &[("FAKE_JCODE_EXIT_AT_START", "1")], &[])
        )
        .await
        .is_err()
    );
    assert_eq!(startup_code(&f), "startup_failed");
    let daemons = recorded_daemons(&env.home("crash"));
    assert_eq!(daemons.len(), 1);
    assert!(
        !alive(daemons[0]),
        "the daemon the dead bridge started survived"
    );
}

#[tokio::test]
async fn a_permanent_refusal_during_recovery_ends_the_seat_at_once() {
    let env = Env::new();
    let marker = env.ws.path().join("closed");
    let m = marker.to_str().unwrap();
    let f = JcodeFactory {
        // A window far longer than the test: ending inside it proves "at once".
        recovery_window: Some(Duration::from_secs(3600)),
        ..env.factory()
    };
    let ctx = env.ctx(
        "refused-recovery",
        &[
            ("FAKE_JCODE_CLOSE_ON", "BOOM"),
            ("FAKE_JCODE_CLOSE_MARKER", m),
            ("FAKE_JCODE_ATTACH_OTHER_IF", m),
        ],
        &[],
    );
    let h = start(&f, ctx).await.unwrap();
    let mut sig = h.signals();
    h.joined();
    assert!(h.send_turn("BOOM").await.is_err());
    assert!(
        !next_signal(&mut sig, &HarnessSignal::Reconnected).await,
        "the seat ends"
    );
    let line = f.fatal_line().unwrap();
    assert!(line.contains("last turn error:"), "{line}");
    assert!(line.contains("recovery error: attach_mismatch"), "{line}");
    let hellos = env
        .requests()
        .iter()
        .filter(|r| r["req"] == "hello")
        .count();
    assert_eq!(hellos, 2, "one launch, one replacement, no retry");
    h.shutdown().await;
}
