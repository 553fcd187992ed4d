//! What the fake-harness suites share: a workspace and operator home, the
//! fake jcode's request log, and waits bounded by a deadlock guard.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use jucode_cotal::harness::{Harness, HarnessSignal};
use jucode_cotal::relay::McpLaunch;
use jucode_cotal::seat::{HarnessContext, HarnessFactory};
use jucode_jcode::harness::JcodeFactory;
use jucode_jcode::home::PrivateHome;
use jucode_jcode::instance::{LaunchRecord, recorded_daemons};

pub const GUARD: Duration = Duration::from_secs(60);

pub struct Env {
    pub ws: tempfile::TempDir,
    pub op: tempfile::TempDir,
    pub log: PathBuf,
}

impl Env {
    pub fn new() -> Env {
        let ws = tempfile::tempdir().unwrap();
        let op = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(op.path().join(".jcode")).unwrap();
        std::fs::write(
            op.path().join(".jcode/config.toml"),
            "[provider]\ndefault_provider = \"fake\"\n",
        )
        .unwrap();
        let log = ws.path().join("fake.log");
        Env { ws, op, log }
    }
    pub fn workdir(&self) -> PathBuf {
        let w = self.ws.path().join("work");
        std::fs::create_dir_all(&w).unwrap();
        w
    }
    pub fn ctx(
        &self,
        name: &str,
        extra: &[(&str, &str)],
        jcode: &[(&str, &str)],
    ) -> HarnessContext {
        let mut agent_env = vec![
            ("PATH".to_string(), "/usr/bin:/bin".to_string()),
            ("HOME".to_string(), self.op.path().display().to_string()),
            ("FAKE_JCODE_LOG".to_string(), self.log.display().to_string()),
        ];
        for (k, v) in extra {
            agent_env.push((k.to_string(), v.to_string()));
        }
        let mcp = McpLaunch {
            command: PathBuf::from("/bin/true"),
            args: vec!["mcp-bridge".into()],
            socket: self.ws.path().join("relay.sock"),
            token: "t".into(),
            config: "{}".into(),
        };
        context(
            self.ws.path(),
            name,
            Path::new(env!("CARGO_BIN_EXE_jucode-fake-jcode")),
            agent_env,
            jcode,
            mcp,
        )
    }
    pub fn factory(&self) -> JcodeFactory {
        JcodeFactory {
            working_dir: Some(self.workdir()),
            recovery_window: Some(Duration::from_secs(20)),
            ..JcodeFactory::default()
        }
    }
    pub fn home(&self, name: &str) -> PrivateHome {
        PrivateHome::prepare(self.ws.path(), "dev", name).unwrap()
    }
    pub fn requests(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
    /// Driven turns (no-reply appends excluded) whose message contains `needle`.
    pub fn sends(&self, needle: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| {
                r["req"] == "send_message"
                    && r["no_reply"] != true
                    && r["content"].as_str().unwrap_or("").contains(needle)
            })
            .count()
    }
}

/// A seat's context for the jcode at `bin`: space `dev`, headless, the
/// private homes under the workspace `ws`, `jcode` overriding the defaults.
pub fn context(
    ws: &Path,
    name: &str,
    bin: &Path,
    agent_env: Vec<(String, String)>,
    jcode: &[(&str, &str)],
    mcp: McpLaunch,
) -> HarnessContext {
    let mut j = BTreeMap::new();
    j.insert("COTAL_JCODE_BIN".to_string(), bin.display().to_string());
    j.insert("COTAL_JCODE_HOME".to_string(), ws.display().to_string());
    j.insert("COTAL_JCODE_TUI".to_string(), "0".to_string());
    for (k, v) in jcode {
        j.insert(k.to_string(), v.to_string());
    }
    HarnessContext {
        space: "dev".into(),
        name: name.into(),
        role: None,
        model: None,
        variant: None,
        agent_file: None,
        workspace_root: Some(ws.to_path_buf()),
        jcode: j,
        agent_env,
        mcp,
    }
}

pub async fn start(
    f: &JcodeFactory,
    ctx: HarnessContext,
) -> jucode_cotal::Result<Arc<dyn Harness>> {
    tokio::time::timeout(GUARD, f.start(ctx))
        .await
        .expect("deadlock guard")
}

pub fn tree(home: &PrivateHome) -> Vec<u32> {
    let mut pids = recorded_daemons(home);
    if let Some(rec) = LaunchRecord::read(home).unwrap() {
        pids.extend(rec.bridge_pid);
    }
    pids
}

pub fn logs(home: &PrivateHome) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(home.root.join("logs")).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("connector-") {
            out.push_str(&std::fs::read_to_string(e.path()).unwrap());
        }
    }
    out
}

pub fn startup_code(f: &JcodeFactory) -> String {
    let line = f.fatal_line().expect("a fatal line");
    assert!(line.starts_with("Jcode host startup failed ("), "{line}");
    assert!(
        line.ends_with("); inspect the private Jcode logs."),
        "{line}"
    );
    line["Jcode host startup failed (".len()..line.find(')').unwrap()].to_string()
}

pub fn line_mentions(log: &str, needle: &str, marker: &str) -> bool {
    log.lines()
        .any(|l| l.contains(marker) && l.contains(needle))
}

pub async fn next_signal(
    rx: &mut tokio::sync::broadcast::Receiver<HarnessSignal>,
    want: &HarnessSignal,
) -> bool {
    loop {
        match tokio::time::timeout(GUARD, rx.recv())
            .await
            .expect("deadlock guard")
        {
            Ok(s) if &s == want => return true,
            Ok(_) => {}
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return false,
        }
    }
}

/// Wait (deadlock-guarded) until `cond` holds: a condition, never a duration.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    tokio::time::timeout(GUARD, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("deadlock guard: {what}"));
}

/// A manual clock for the seat's time-driven rules.
pub fn manual_clock() -> jucode_clock::ManualClock {
    jucode_clock::ManualClock::new(jiff::Timestamp::UNIX_EPOCH)
}

/// The position of `needle` in the connector log (panics when absent).
pub fn log_pos(log: &str, needle: &str) -> usize {
    log.find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in the log:\n{log}"))
}

/// The argv of a live process.
pub fn proc_args(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).to_string())
        .collect()
}

/// One variable of a live process's environment.
pub fn proc_env(pid: u32, key: &str) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{key}=");
    raw.split(|b| *b == 0)
        .map(|e| String::from_utf8_lossy(e).to_string())
        .find_map(|e| e.strip_prefix(&prefix).map(str::to_string))
}
