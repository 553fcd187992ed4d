//! The jcode side against the real jcode binary (`JCODE_BIN`, else 0.67.1 from
//! the pinned npm platform package) with a fake OpenAI-compatible provider on loopback and a
//! stand-in `cotal` stdio MCP server: launch, orientation proof, a turn with a
//! tool call, relaunch continuing the session, a fork, the spawn `--prompt`, a
//! killed bridge replaced on the same session, teardown proven.
//!
//! Needs `scripts/install-jcode.sh`; ignored in the fast suite. Run:
//! `cargo nextest run -p jucode-jcode --run-ignored only`
//! (or `cargo test -p jucode-jcode -- --ignored`). Fails, naming the script,
//! when jcode is missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use jucode_cotal::harness::Harness;
use jucode_cotal::relay::McpLaunch;
use jucode_cotal::seat::{HarnessContext, HarnessFactory};
use jucode_jcode::harness::JcodeFactory;
use jucode_jcode::home::PrivateHome;
use jucode_jcode::instance::{LaunchRecord, alive};
use jucode_testsupport::fake_model::FakeModel;

mod common;
use common::tree;

const GUARD: Duration = Duration::from_secs(240);

pub fn jcode_bin() -> PathBuf {
    if let Ok(p) = std::env::var("JCODE_BIN") {
        return PathBuf::from(p);
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/peers/npm-jcode/node_modules/@1jehuang/jcode-linux-x64/bin/jcode");
    assert!(
        p.exists(),
        "{} is missing: run scripts/install-jcode.sh first",
        p.display()
    );
    p
}

struct Setup {
    ws: tempfile::TempDir,
    op: tempfile::TempDir,
    provider: FakeModel,
    mcp_log: PathBuf,
}

impl Setup {
    async fn new() -> Setup {
        let provider = FakeModel::start().await.unwrap();
        let ws = tempfile::tempdir().unwrap();
        let op = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(op.path().join(".jcode")).unwrap();
        std::fs::write(
            op.path().join(".jcode/config.toml"),
            provider.jcode_config_toml(),
        )
        .unwrap();
        std::fs::create_dir_all(ws.path().join("work")).unwrap();
        let mcp_log = ws.path().join("mcp.log");
        Setup {
            ws,
            op,
            provider,
            mcp_log,
        }
    }
    fn workdir(&self) -> PathBuf {
        self.ws.path().join("work")
    }
    fn factory(&self) -> JcodeFactory {
        JcodeFactory {
            working_dir: Some(self.workdir()),
            ..JcodeFactory::default()
        }
    }
    fn ctx(&self, name: &str, jcode: &[(&str, &str)]) -> HarnessContext {
        let agent_env = vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("HOME".into(), self.op.path().display().to_string()),
        ];
        let mcp = McpLaunch {
            command: PathBuf::from(env!("CARGO_BIN_EXE_jucode-fake-cotal-mcp")),
            args: vec![],
            socket: self.ws.path().join("unused.sock"),
            token: "unused".into(),
            config: format!("{{\"log\":\"{}\"}}", self.mcp_log.display()),
        };
        common::context(self.ws.path(), name, &jcode_bin(), agent_env, jcode, mcp)
    }
    fn home(&self, name: &str) -> PrivateHome {
        PrivateHome::prepare(self.ws.path(), "dev", name).unwrap()
    }
}

async fn start(f: &JcodeFactory, ctx: HarnessContext) -> Arc<dyn Harness> {
    let home =
        PrivateHome::prepare(ctx.workspace_root.as_ref().unwrap(), &ctx.space, &ctx.name).unwrap();
    match tokio::time::timeout(GUARD, f.start(ctx))
        .await
        .expect("deadlock guard")
    {
        Ok(h) => h,
        Err(e) => {
            let mut logs = String::new();
            for e in std::fs::read_dir(home.root.join("logs")).unwrap().flatten() {
                if e.file_name().to_string_lossy().starts_with("connector-") {
                    logs.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
                }
            }
            panic!("start failed: {e}; fatal {:?}\n{logs}", f.fatal_line())
        }
    }
}

fn read_logs(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        out.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real jcode: scripts/install-jcode.sh"]
async fn real_jcode_launch_orientation_tool_turn_relaunch_and_teardown() {
    let s = Setup::new().await;
    let f = s.factory();
    let h = start(&f, s.ctx("alice", &[])).await;
    let home = s.home("alice");
    let logs = read_logs(&home.root.join("logs"));
    assert!(logs.contains("readiness: orientation proved"), "{logs}");
    // The provider saw the MCP tool and the orientation call came back as a tool result.
    let reqs = s.provider.jcode_requests();
    assert!(
        reqs.iter()
            .any(|r| r.tools.iter().any(|t| t == "mcp__cotal__cotal_orientation")),
        "{reqs:?}"
    );
    let pids = tree(&home);
    assert!(pids.len() >= 2, "bridge and daemon recorded: {pids:?}");
    // The updater is off in every process of the real tree, the daemon jcode spawned too.
    for p in &pids {
        assert_eq!(
            common::proc_env(*p, "JCODE_NO_AUTO_UPDATE").as_deref(),
            Some("1"),
            "pid {p}: {:?}",
            common::proc_args(*p)
        );
    }
    // Whichever build JCODE_BIN names, its version is logged and recorded.
    let rec = LaunchRecord::read(&home).unwrap().unwrap();
    let ver = rec.jcode_version.expect("the version in the launch record");
    assert!(logs.contains(&format!("jcode {}", ver.version)), "{logs}");
    assert!(ver.semver.is_some(), "{ver:?}");

    let _ = h.signals();

    h.joined();
    // The real jcode's message_accepted fires the hook run turns are shown by.
    let (accepted, was_accepted) = tokio::sync::oneshot::channel();
    h.send_turn_accepted("USE_TOOL now", accepted)
        .await
        .unwrap();
    assert!(was_accepted.await.is_ok(), "jcode accepted the message");
    let reqs = s.provider.jcode_requests();
    assert!(
        reqs.iter()
            .any(|r| r.last_role.as_deref() == Some("tool")
                && r.last_text.contains("fake orientation")),
        "{reqs:?}"
    );
    assert!(s.provider.jcode_requests().iter().any(
        |r| r.last_role.as_deref() == Some("tool") && r.last_text.contains("fake-tool-output")
    ));
    let sid = h.journal().unwrap().session_id;
    h.shutdown().await;
    assert!(f.fatal_line().is_none(), "{:?}", f.fatal_line());
    for p in &pids {
        assert!(!alive(*p), "pid {p} survived the stop");
    }
    // The transcript holds the tool turn; a relaunch continues that session.
    let snap = std::fs::read_to_string(home.sessions_dir().join(format!("{sid}.json"))).unwrap()
        + &std::fs::read_to_string(home.sessions_dir().join(format!("{sid}.journal.jsonl")))
            .unwrap_or_default();
    assert!(snap.contains("fake-tool-output"));
    let f = s.factory();
    let h = start(&f, s.ctx("alice", &[])).await;
    assert_eq!(h.journal().unwrap().session_id, sid);
    let pids = tree(&home);
    h.shutdown().await;
    for p in &pids {
        assert!(!alive(*p), "pid {p} survived the stop");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real jcode: scripts/install-jcode.sh"]
async fn real_jcode_fork_from_the_operator_home() {
    let s = Setup::new().await;
    // The operator's session: made by a first seat, then copied into the operator's home.
    let f = s.factory();
    let h = start(&f, s.ctx("source", &[])).await;
    let _ = h.signals();
    h.joined();
    h.send_turn("remember the word pineapple").await.unwrap();
    let src = h.journal().unwrap();
    h.shutdown().await;
    let op_sessions = s.op.path().join(".jcode/sessions");
    std::fs::create_dir_all(&op_sessions).unwrap();
    for ext in ["json", "journal.jsonl"] {
        let from = src.sessions_dir.join(format!("{}.{ext}", src.session_id));
        if from.exists() {
            std::fs::copy(&from, op_sessions.join(format!("{}.{ext}", src.session_id))).unwrap();
        }
    }
    let before = std::fs::read(op_sessions.join(format!("{}.json", src.session_id))).unwrap();

    let f = s.factory();
    let h = start(
        &f,
        s.ctx("forked", &[("COTAL_JCODE_RESUME", &src.session_id)]),
    )
    .await;
    let fork = h.journal().unwrap();
    assert_ne!(fork.session_id, src.session_id);
    let _ = h.signals();
    h.joined();
    h.send_turn("what was the word?").await.unwrap();
    // The provider saw the carried history in the fork's turn.
    assert!(
        s.provider
            .jcode_requests()
            .iter()
            .any(|r| r.path.contains("chat"))
    );
    h.shutdown().await;
    // Snapshot plus journal: what jcode loads.
    let snap = std::fs::read_to_string(fork.snapshot_path()).unwrap()
        + &std::fs::read_to_string(fork.journal_path()).unwrap_or_default();
    assert!(
        snap.contains("pineapple") && snap.contains("what was the word?"),
        "{snap}"
    );
    assert!(snap.contains(&src.session_id));
    assert_eq!(
        std::fs::read(op_sessions.join(format!("{}.json", src.session_id))).unwrap(),
        before
    );
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.home("forked").resume_record()).unwrap()).unwrap();
    assert_eq!(rec["source_session_id"], src.session_id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real jcode: scripts/install-jcode.sh"]
async fn real_jcode_spawn_prompt_then_a_killed_bridge_is_replaced_on_the_same_session() {
    use jucode_cotal::harness::HarnessSignal;
    let s = Setup::new().await;
    let f = s.factory();
    let prompt = "Review the current change please.";
    let h = start(&f, s.ctx("phoenix", &[("COTAL_JCODE_PROMPT", prompt)])).await;
    let home = s.home("phoenix");
    let sid = h.journal().unwrap().session_id;
    let mut sig = h.signals();
    h.joined();
    assert!(until_signal(&mut sig, HarnessSignal::TurnEnded { ok: true }).await);
    assert!(
        s.provider
            .jcode_requests()
            .iter()
            .any(|r| r.last_text.contains(prompt)),
        "the spawn --prompt reached the provider"
    );
    // The bridge dies; one replacement reattaches the same session.
    let first = tree(&home);
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
    assert!(
        until_signal(&mut sig, HarnessSignal::Reconnected).await,
        "{:?}",
        f.fatal_line()
    );
    for p in &first {
        assert!(!alive(*p), "the broken tree's pid {p} survived");
    }
    h.send_turn("after the replacement").await.unwrap();
    assert_eq!(h.journal().unwrap().session_id, sid);
    assert!(
        s.provider
            .jcode_requests()
            .iter()
            .any(|r| r.last_text.contains("after the replacement"))
    );
    let pids = tree(&home);
    h.shutdown().await;
    assert!(f.fatal_line().is_none(), "{:?}", f.fatal_line());
    for p in &pids {
        assert!(!alive(*p), "pid {p} survived the stop");
    }
}

async fn until_signal(
    rx: &mut tokio::sync::broadcast::Receiver<jucode_cotal::harness::HarnessSignal>,
    want: jucode_cotal::harness::HarnessSignal,
) -> bool {
    loop {
        match tokio::time::timeout(GUARD, rx.recv())
            .await
            .expect("deadlock guard")
        {
            Ok(s) if s == want => return true,
            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(_) => return false,
        }
    }
}
