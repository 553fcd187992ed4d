//! Any jcode build against `jucode-fake-jcode` posing as it: the version is
//! read, logged and recorded at launch; the applied effort is read back where
//! the build reports it; a failed or stopped turn is never a success and
//! relays the Harness's own code. Run: `cargo test -p jucode-jcode --test versions`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_cotal::harness::HarnessSignal;
use jucode_jcode::instance::LaunchRecord;
use jucode_jcode::version::Semver;

mod common;
use common::*;

#[tokio::test]
async fn the_version_is_logged_and_recorded_with_the_launch() {
    for (v, older) in [("0.67.1", true), ("0.79.1", false)] {
        let env = Env::new();
        let f = env.factory();
        let h = start(&f, env.ctx("v", &[("FAKE_JCODE_VERSION", v)], &[]))
            .await
            .unwrap();
        let home = env.home("v");
        let log = logs(&home);
        assert!(
            log.contains(&format!("jcode v{v} (fakehash) (semver {v}")),
            "{log}"
        );
        assert_eq!(
            log.contains("older than the supported 0.78.1"),
            older,
            "{log}"
        );
        let rec = LaunchRecord::read(&home).unwrap().unwrap();
        let ver = rec.jcode_version.expect("the version in the launch record");
        assert_eq!(Some(ver.semver.unwrap()), Semver::parse(v));
        assert_eq!(ver.git_hash.as_deref(), Some("fakehash"));
        h.shutdown().await;
    }
}

#[tokio::test]
async fn a_missing_binary_is_named_before_anything_launches() {
    let env = Env::new();
    let f = env.factory();
    let res = start(
        &f,
        env.ctx("nobin", &[], &[("COTAL_JCODE_BIN", "/nonexistent/jcode")]),
    )
    .await;
    assert!(res.is_err());
    assert_eq!(startup_code(&f), "jcode_not_found");
}

#[tokio::test]
async fn the_applied_effort_is_read_back_from_0_78_1_on() {
    // 0.79.1: what jcode applied must be what was asked.
    let env = Env::new();
    let f = env.factory();
    let mut ctx = env.ctx("eff", &[("FAKE_JCODE_VERSION", "0.79.1")], &[]);
    ctx.variant = Some("high".into());
    let h = start(&f, ctx).await.unwrap();
    assert!(logs(&env.home("eff")).contains("reasoning effort \"high\" applied (read back)"));
    h.shutdown().await;

    let env = Env::new();
    let f = env.factory();
    let mut ctx = env.ctx(
        "eff",
        &[
            ("FAKE_JCODE_VERSION", "0.79.1"),
            ("FAKE_JCODE_EFFORT", "misapply"),
        ],
        &[],
    );
    ctx.variant = Some("high".into());
    assert!(start(&f, ctx).await.is_err());
    assert_eq!(startup_code(&f), "effort_mismatch");
    assert!(
        env.sends("cotal_orientation") == 0,
        "no turn at an effort nobody chose"
    );

    // 0.67.1 cannot report it: the accepted request is all there is.
    let env = Env::new();
    let f = env.factory();
    let mut ctx = env.ctx("eff", &[("FAKE_JCODE_EFFORT", "misapply")], &[]);
    ctx.variant = Some("high".into());
    let h = start(&f, ctx).await.unwrap();
    assert!(logs(&env.home("eff")).contains(
        "reasoning effort \"high\" accepted (this jcode does not report the applied tier)"
    ));
    h.shutdown().await;
}

async fn failing_turn(knobs: &[(&str, &str)], text: &str) -> (Vec<HarnessSignal>, Option<String>) {
    let env = Env::new();
    let f = env.factory();
    let mut all = vec![("FAKE_JCODE_VERSION", "0.80.0")];
    all.extend_from_slice(knobs);
    let h = start(&f, env.ctx("stop", &all, &[])).await.unwrap();
    let mut sig = h.signals();
    h.joined();
    let res = h.send_turn(text).await;
    let failure = res.expect_err("a stopped or failed turn is never a success");
    let mut seen = Vec::new();
    while let Ok(s) = sig.try_recv() {
        seen.push(s);
    }
    // The next turn is served normally.
    h.send_turn("and now something else").await.unwrap();
    h.shutdown().await;
    (seen, failure.code)
}

fn conditions(seen: &[HarnessSignal]) -> Vec<String> {
    seen.iter()
        .filter_map(|s| match s {
            HarnessSignal::Condition { code, .. } => Some(code.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn turn_stopped_is_read_by_its_reason() {
    // An interrupt someone asked for: not a success, and not a failure condition.
    let (seen, code) = failing_turn(
        &[
            ("FAKE_JCODE_STOP_ON", "STOPME"),
            ("FAKE_JCODE_STOP_REASON", "interrupted"),
        ],
        "STOPME",
    )
    .await;
    assert_eq!(code.as_deref(), Some("interrupted"));
    assert!(conditions(&seen).is_empty(), "{seen:?}");
    // A limit: the reason is the condition.
    let (seen, code) = failing_turn(
        &[
            ("FAKE_JCODE_STOP_ON", "STOPME"),
            ("FAKE_JCODE_STOP_REASON", "limit_reached"),
        ],
        "STOPME",
    )
    .await;
    assert_eq!(code.as_deref(), Some("limit_reached"));
    assert_eq!(conditions(&seen), ["limit_reached"]);
}

#[tokio::test]
async fn a_failed_turn_relays_the_harness_code_not_its_text() {
    // The text says "rate limit"; the frame's code decides.
    let (seen, code) = failing_turn(&[("FAKE_JCODE_FAIL_ON", "FAILME")], "FAILME").await;
    assert_eq!(code.as_deref(), Some("internal"));
    assert_eq!(conditions(&seen), ["internal"]);
    let (seen, _) = failing_turn(
        &[
            ("FAKE_JCODE_FAIL_ON", "FAILME"),
            ("FAKE_JCODE_FAIL_CODE", "rate_limit"),
        ],
        "FAILME",
    )
    .await;
    assert_eq!(conditions(&seen), ["rate_limit"]);
}

#[tokio::test]
async fn a_readiness_refusal_names_only_the_code_and_the_rejected_value() {
    for (model, variant, want) in [
        (
            Some("fake-model-x"),
            None,
            "rejected model \"fake-model-x\"",
        ),
        (None, Some("xhigh"), "rejected reasoning effort \"xhigh\""),
    ] {
        let env = Env::new();
        let f = env.factory();
        let message = format!(
            "invalid value {:?} for this route (request req_SECRET42)",
            model.or(variant).unwrap()
        );
        let mut ctx = env.ctx(
            "refusal",
            &[
                ("FAKE_JCODE_FAIL_ON", "cotal_orientation"),
                ("FAKE_JCODE_FAIL_CODE", "invalid_request"),
                ("FAKE_JCODE_FAIL_MESSAGE", &message),
            ],
            &[],
        );
        ctx.model = model.map(str::to_string);
        ctx.variant = variant.map(str::to_string);
        assert!(start(&f, ctx).await.is_err());
        assert_eq!(startup_code(&f), "provider_refused");
        let log = logs(&env.home("refusal"));
        let line = log
            .lines()
            .find(|l| l.contains("readiness: provider refusal"))
            .expect(&log);
        assert!(
            line.contains(&format!("(invalid_request; {want})")),
            "{line}"
        );
        assert!(!line.contains("req_SECRET42"), "{line}");
        assert!(!f.fatal_line().unwrap().contains("req_SECRET42"));
    }
}
