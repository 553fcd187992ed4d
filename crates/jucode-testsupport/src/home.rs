//! A temporary directory standing in for the user's home in a test.

// Test support: a test that cannot make its temporary home should fail at once, naming why.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};

use crate::Daemon;

/// A temporary user home (canonicalised, so paths compare equal to what the daemon reports),
/// removed when dropped. The jucode home is its `.jucode`.
pub struct TestHome {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl TestHome {
    pub fn new() -> TestHome {
        let dir = tempfile::tempdir().expect("a temporary directory for the test's home");
        let root = std::fs::canonicalize(dir.path()).expect("the temporary home's real path");
        TestHome { _dir: dir, root }
    }

    /// A home under `parent` (Codex will not set up its helpers under `/tmp`, so its tests
    /// pass their target's temporary directory).
    pub fn new_in(parent: &Path) -> TestHome {
        let dir = tempfile::tempdir_in(parent).expect("a temporary directory for the test's home");
        let root = std::fs::canonicalize(dir.path()).expect("the temporary home's real path");
        TestHome { _dir: dir, root }
    }

    /// The user's home.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The jucode home (`<root>/.jucode`).
    pub fn home(&self) -> PathBuf {
        self.root.join(".jucode")
    }

    /// A project directory `<root>/<name>`, made if missing.
    pub fn project(&self, name: &str) -> PathBuf {
        let p = self.root.join(name);
        std::fs::create_dir_all(&p).expect("a project directory in the test's home");
        p
    }

    /// An agent the daemon finds at start: `<home>/agents/<id>/agent.json` holding `config`
    /// (`name` and `cwd` at least).
    pub fn agent(&self, id: &str, config: &serde_json::Value) {
        let dir = self.home().join("agents").join(id);
        std::fs::create_dir_all(&dir).expect("an agent directory in the test's home");
        std::fs::write(dir.join("agent.json"), config.to_string()).expect("write agent.json");
    }

    /// Writes `file` of the daemon's state directory (a log seeded before start), one JSON
    /// value per line.
    /// Every user message the built-in engine saved in its conversation logs
    /// (`sessions/`), over all sessions, with how many times: what the sessions received, from
    /// the engine's side. A line torn by a kill is skipped, as the engine does.
    pub fn saved_user_messages(&self) -> std::io::Result<std::collections::HashMap<String, usize>> {
        let mut out = std::collections::HashMap::new();
        let Ok(dir) = std::fs::read_dir(self.home().join("sessions")) else {
            return Ok(out);
        };
        for entry in dir {
            let text = std::fs::read_to_string(entry?.path())?;
            for line in text.lines() {
                let Ok(record) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                if record["kind"] == "message"
                    && record["message"]["role"] == "user"
                    && let Some(content) = record["message"]["content"].as_str()
                {
                    *out.entry(content.to_string()).or_default() += 1;
                }
            }
        }
        Ok(out)
    }

    pub fn seed_log(&self, file: &str, lines: &[serde_json::Value]) {
        let path = self.home().join("daemon").join(file);
        std::fs::create_dir_all(self.home().join("daemon")).expect("the state directory");
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(path, text).expect("write a seeded log");
    }

    /// The real daemon on this home, with the scripted engine ([`Daemon::start`]).
    pub async fn daemon(&self) -> Daemon {
        Daemon::start(&self.home())
            .await
            .expect("the daemon starts on the test's home")
    }
}

impl Default for TestHome {
    fn default() -> Self {
        TestHome::new()
    }
}

/// Runs `git args` in `dir` with a fixed identity and neither the system's nor the user's
/// configuration (`HOME` is `dir`), as the files and git wire tests set up repositories.
pub fn git(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()?;
    anyhow::ensure!(out.status.success(), "git {args:?}: {out:?}");
    Ok(())
}
