//! The daemon on a disk whose fsync fails (issue 18's second half; the full disk is
//! `storage_faults.rs`): the op that must write gets a clear error and leaves nothing behind,
//! the daemon stays up for reads and for the areas whose files still sync, and a SIGKILL and
//! restart find every acknowledged change and none of the refused ones.
//!
//! The fault comes from `jucode-fsync-fault`, preloaded into the daemon: while the flag file
//! exists, fsync and fdatasync of the files matching `JUCODE_FSYNC_FAIL_MATCH` fail with EIO.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use jucode_testsupport::{Client, Daemon, Engine, fsync_fault_lib};
use serde_json::{Value, json};

/// A jucode home, the switch file and a project directory, all in one temporary directory.
struct Setup {
    _root: tempfile::TempDir,
    home: PathBuf,
    flag: PathBuf,
    projects: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join(".jucode");
        let flag = root.path().join("fsync-fails");
        let projects = root.path().join("code");
        std::fs::create_dir_all(&projects).unwrap();
        Setup {
            home,
            flag,
            projects,
            _root: root,
        }
    }

    /// The daemon with the preload library; syncs of paths matching `pattern` fail while the
    /// flag is on. No op here starts an engine; the built-in one needs no other binary.
    async fn daemon(&self, pattern: &str) -> Daemon {
        Daemon::builder(&self.home)
            .engine(Engine::Builtin)
            .env("LD_PRELOAD", fsync_fault_lib().unwrap())
            .env("JUCODE_FSYNC_FAIL", &self.flag)
            .env("JUCODE_FSYNC_FAIL_MATCH", pattern)
            .start()
            .await
            .unwrap()
    }

    fn fault(&self, on: bool) {
        if on {
            std::fs::write(&self.flag, b"").unwrap();
        } else {
            std::fs::remove_file(&self.flag).unwrap();
        }
    }

    /// A new directory to add as a project.
    fn project(&self, name: &str) -> String {
        let dir = self.projects.join(name);
        std::fs::create_dir(&dir).unwrap();
        dir.to_str().unwrap().to_string()
    }

    fn state(&self, file: &str) -> PathBuf {
        self.home.join("daemon").join(file)
    }
}

async fn create(c: &mut Client, text: &str) -> Value {
    c.request(json!({"op": "requirement_create", "text": text}))
        .await
        .unwrap()
}

async fn requirements(c: &mut Client) -> Vec<(String, String)> {
    let list = c.request(json!({"op": "requirement_list"})).await.unwrap();
    list["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let field = |k: &str| r[k].as_str().unwrap().to_string();
            (field("id"), field("text"))
        })
        .collect()
}

async fn add_project(c: &mut Client, path: &str) -> Value {
    c.request(json!({"op": "project_add", "path": path}))
        .await
        .unwrap()
}

async fn project_paths(c: &mut Client) -> Vec<String> {
    let reply = c.request(json!({"op": "workspaces"})).await.unwrap();
    assert_eq!(reply["type"], "workspaces", "{reply}");
    reply["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|w| w["projects"].as_array().unwrap())
        .map(|p| p["path"].as_str().unwrap().to_string())
        .collect()
}

fn error_message(reply: &Value) -> &str {
    assert_eq!(reply["type"], "error", "{reply}");
    reply["message"].as_str().unwrap()
}

fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".tmp"))
        .collect()
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[tokio::test]
async fn a_log_whose_fsync_fails_refuses_writes_keeps_reads_and_loses_nothing_acknowledged() {
    let setup = Setup::new();
    let mut daemon = setup.daemon("requirements.jsonl").await;
    let mut c = daemon.client().await.unwrap();
    assert_eq!(create(&mut c, "first").await["requirement"], "R-1");
    assert_eq!(create(&mut c, "second").await["requirement"], "R-2");
    let log = setup.state("requirements.jsonl");
    let acknowledged = std::fs::read_to_string(&log).unwrap();

    setup.fault(true);
    let message = error_message(&create(&mut c, "refused").await).to_string();
    assert!(
        message.contains("requirements.jsonl") && message.contains("Input/output error"),
        "{message}"
    );
    // Nothing of the refused record stays in the file for the page cache to write out later.
    assert_eq!(std::fs::read_to_string(&log).unwrap(), acknowledged);
    // From now on the log refuses at once: a retried fsync could falsely succeed.
    let message = error_message(&create(&mut c, "refused again").await).to_string();
    assert!(message.contains("restart the daemon"), "{message}");

    // Up for reads, and for the areas whose files still sync.
    assert_eq!(
        requirements(&mut c).await,
        owned(&[("R-1", "first"), ("R-2", "second")])
    );
    let pong = c.request(json!({"op": "ping"})).await.unwrap();
    assert_eq!(pong["type"], "pong", "{pong}");
    let sessions = c.request(json!({"op": "session_list"})).await.unwrap();
    assert_eq!(sessions["type"], "sessions", "{sessions}");
    let project = setup.project("app");
    let added = add_project(&mut c, &project).await;
    assert_eq!(added["type"], "workspaces", "{added}");

    // The disk heals, but the log stays refused until a restart.
    setup.fault(false);
    let message = error_message(&create(&mut c, "still refused").await).to_string();
    assert!(message.contains("restart the daemon"), "{message}");

    daemon.kill9_and_wait().await.unwrap();
    let daemon = setup.daemon("requirements.jsonl").await;
    let mut c = daemon.client().await.unwrap();
    assert_eq!(
        requirements(&mut c).await,
        owned(&[("R-1", "first"), ("R-2", "second")])
    );
    assert_eq!(project_paths(&mut c).await, [project]);
    assert_eq!(
        create(&mut c, "after the restart").await["requirement"],
        "R-3"
    );
}

#[tokio::test]
async fn an_atomic_file_whose_fsync_fails_keeps_the_old_file() {
    let setup = Setup::new();
    let first = setup.project("first");

    // The new file's own fsync fails: it never replaces the old one.
    let mut daemon = setup.daemon("/daemon/.tmp").await;
    let mut c = daemon.client().await.unwrap();
    assert_eq!(add_project(&mut c, &first).await["type"], "workspaces");
    setup.fault(true);
    let message = error_message(&add_project(&mut c, &setup.project("refused")).await).to_string();
    assert!(message.contains("Input/output error"), "{message}");
    assert_eq!(project_paths(&mut c).await, [first.as_str()]);
    // Whole files are not poisoned: once the disk heals, writes work on.
    setup.fault(false);
    let second = setup.project("second");
    assert_eq!(add_project(&mut c, &second).await["type"], "workspaces");
    daemon.kill9_and_wait().await.unwrap();

    // The directory's fsync after the rename fails: the old file is put back.
    let mut daemon = setup.daemon("/daemon$").await;
    let mut c = daemon.client().await.unwrap();
    setup.fault(true);
    let message = error_message(&add_project(&mut c, &setup.project("undone")).await).to_string();
    assert!(message.contains("Input/output error"), "{message}");
    assert_eq!(
        project_paths(&mut c).await,
        [first.as_str(), second.as_str()]
    );
    assert_eq!(temp_files(&setup.home.join("daemon")), Vec::<String>::new());
    setup.fault(false);
    daemon.kill9_and_wait().await.unwrap();

    let daemon = setup.daemon("/daemon$").await;
    let mut c = daemon.client().await.unwrap();
    assert_eq!(project_paths(&mut c).await, [first, second]);
}
