//! The seat's briefing against `jucode-fake-jcode`: the persona goes into the
//! transcript as a no-reply message before the readiness proof, once per
//! session; its record is kept apart from the fork, so a first launch that
//! forks and then fails still briefs the fork on the next launch; no driven
//! turn carries it. Run: `cargo test -p jucode-jcode --test briefing`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_cotal::harness::HarnessSignal;
use jucode_jcode::briefing::BriefingRecord;

mod common;
use common::*;

const PERSONA: &str = "You review Rust changes and answer in one paragraph.";

fn persona_file(env: &Env) -> std::path::PathBuf {
    let p = env.ws.path().join("reviewer.md");
    std::fs::write(&p, format!("---\nmodel: fake-model\n---\n{PERSONA}\n")).unwrap();
    p
}

/// Requests carrying the persona: (no_reply, session).
fn persona_sends(env: &Env) -> Vec<(bool, String)> {
    env.requests()
        .iter()
        .filter(|r| {
            r["req"] == "send_message" && r["content"].as_str().unwrap_or("").contains(PERSONA)
        })
        .map(|r| {
            (
                r["no_reply"] == true,
                r["session_id"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_persona_is_a_no_reply_message_before_the_proof_once_per_session() {
    let env = Env::new();
    let f = env.factory();
    let mut ctx = env.ctx("briefed", &[], &[]);
    ctx.agent_file = Some(persona_file(&env));
    ctx.role = Some("reviewer".into());
    let h = start(&f, ctx.clone()).await.unwrap();
    let sid = h.journal().unwrap().session_id;
    assert_eq!(persona_sends(&env), [(true, sid.clone())]);
    let reqs = env.requests();
    let brief_at = reqs
        .iter()
        .position(|r| r["content"].as_str().is_some_and(|c| c.contains(PERSONA)))
        .unwrap();
    let proof_at = reqs
        .iter()
        .position(|r| {
            r["no_reply"] != true
                && r["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("cotal_orientation"))
        })
        .unwrap();
    assert!(
        brief_at < proof_at,
        "the briefing precedes the readiness proof"
    );
    // The transcript holds it; no driven turn carries it.
    let snap = std::fs::read_to_string(h.journal().unwrap().snapshot_path()).unwrap();
    assert!(snap.contains(PERSONA) && snap.contains("with the role \\\"reviewer\\\""));
    let mut sig = h.signals();
    h.joined();
    assert!(next_signal(&mut sig, &HarnessSignal::TurnEnded { ok: true }).await);
    h.send_turn("DM from bob: hi").await.unwrap();
    assert_eq!(env.sends(PERSONA), 0);
    assert!(env.requests().iter().all(|r| {
        r["no_reply"] == true
            || !r["content"]
                .as_str()
                .unwrap_or("")
                .contains("[Cotal] You are the peer")
    }));
    h.shutdown().await;
    // A relaunch continues the session: briefed already, not again.
    let h = start(&f, ctx).await.unwrap();
    assert_eq!(h.journal().unwrap().session_id, sid);
    assert_eq!(persona_sends(&env).len(), 1);
    h.shutdown().await;
    let rec = BriefingRecord::read(&env.home("briefed")).unwrap();
    assert_eq!(rec.sessions.keys().collect::<Vec<_>>(), [&sid]);
}

#[tokio::test]
async fn a_first_launch_that_fails_after_forking_still_briefs_the_fork_next_time() {
    let env = Env::new();
    let sessions = env.op.path().join(".jcode/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let src_id = "session_tulip_1795987393872_555be4475d8f4fcc";
    std::fs::write(
        sessions.join(format!("{src_id}.json")),
        include_str!("data/session.snapshot.tooluse.json"),
    )
    .unwrap();
    let f = env.factory();
    // The fork is written, then the model is refused: no briefing yet.
    let mut ctx = env.ctx(
        "forked",
        &[("FAKE_JCODE_REFUSE_MODEL", "fake-model-2")],
        &[("COTAL_JCODE_RESUME", src_id)],
    );
    ctx.agent_file = Some(persona_file(&env));
    ctx.model = Some("fake-model-2".into());
    assert!(start(&f, ctx).await.is_err());
    assert_eq!(startup_code(&f), "model_refused");
    let home = env.home("forked");
    let fork: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.resume_record()).unwrap()).unwrap();
    let fork_id = fork["fork_session_id"].as_str().unwrap().to_string();
    assert!(persona_sends(&env).is_empty());
    assert!(BriefingRecord::read(&home).unwrap().sessions.is_empty());
    // The next launch continues that fork and briefs it.
    let f = env.factory();
    let mut ctx = env.ctx("forked", &[], &[("COTAL_JCODE_RESUME", src_id)]);
    ctx.agent_file = Some(persona_file(&env));
    let h = start(&f, ctx).await.unwrap();
    assert_eq!(h.journal().unwrap().session_id, fork_id);
    assert_eq!(persona_sends(&env), [(true, fork_id.clone())]);
    assert!(
        BriefingRecord::read(&home)
            .unwrap()
            .sessions
            .contains_key(&fork_id)
    );
    h.shutdown().await;
}

#[tokio::test]
async fn an_unreadable_persona_fails_before_anything_launches() {
    let env = Env::new();
    let f = env.factory();
    let mut ctx = env.ctx("nopersona", &[], &[]);
    ctx.agent_file = Some(env.ws.path().join("missing.md"));
    assert!(start(&f, ctx).await.is_err());
    assert_eq!(startup_code(&f), "invalid_config");
    assert!(env.requests().is_empty(), "no jcode was launched");
}
