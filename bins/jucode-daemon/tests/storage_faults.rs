//! The daemon with its state directory on a file system that fills up (a small tmpfs): an op
//! that must write gets a clear error and changes nothing, the daemon stays up and answers
//! reads, it takes writes again once there is space, and a SIGKILL and restart find every
//! acknowledged change and none of the refused ones.
//!
//! The tmpfs is mounted in a mount namespace of its own (`unshare -rm`, no privileges needed
//! where user namespaces are on): the test runs itself again in there, with the daemon as its
//! child. Ignored, for the slow suites:
//!   cargo build -p jucode-daemon -p jucode-testsupport --bins
//!   cargo nextest run -p jucode-daemon --run-ignored only -E 'binary(storage_faults)'

#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_testsupport::full_disk::{fill, in_own_mount_namespace, mount_tmpfs};
use jucode_testsupport::{Client, Daemon};
use serde_json::{Value, json};

async fn create(c: &mut Client, text: &str) -> Value {
    c.request(json!({"op": "requirement_create", "text": text}))
        .await
        .unwrap()
}

fn texts(list: &Value) -> Vec<String> {
    list["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["text"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
#[ignore = "slow suite: mounts a small tmpfs in a namespace of its own"]
async fn a_full_state_directory_refuses_writes_keeps_reads_and_recovers_once_there_is_space() {
    if !in_own_mount_namespace(
        "a_full_state_directory_refuses_writes_keeps_reads_and_recovers_once_there_is_space",
    ) {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join(".jucode");
    mount_tmpfs(&home, "4m");
    let mut daemon = Daemon::builder(&home).start().await.unwrap();
    let mut c = daemon.client().await.unwrap();
    assert_eq!(
        create(&mut c, "before the disk filled").await["requirement"],
        "R-1"
    );

    let filler = fill(&home);
    let big = "words ".repeat(3000).trim_end().to_string();
    for _ in 0..3 {
        let refused = create(&mut c, &big).await;
        assert_eq!(refused["type"], "error", "{refused}");
        let message = refused["message"].as_str().unwrap();
        assert!(message.contains("No space left on device"), "{message}");
    }
    // Still up for reads, and nothing of the refused ops shows.
    let list = c.request(json!({"op": "requirement_list"})).await.unwrap();
    assert_eq!(texts(&list), ["before the disk filled"]);
    assert_eq!(
        c.request(json!({"op": "ping"})).await.unwrap()["type"],
        "pong"
    );

    // Space again: writes work, on the same logs.
    std::fs::remove_file(&filler).unwrap();
    let made = create(&mut c, "after space came back").await;
    assert_eq!(made["type"], "requirement_created", "{made}");
    let made = create(&mut c, &big).await;
    assert_eq!(made["type"], "requirement_created", "{made}");

    // A SIGKILL and restart: exactly what was acknowledged.
    daemon.kill9_and_wait().await.unwrap();
    let daemon = Daemon::builder(&home).start().await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let list = c.request(json!({"op": "requirement_list"})).await.unwrap();
    let got = texts(&list);
    assert!(
        got == [
            "before the disk filled",
            "after space came back",
            big.as_str()
        ],
        "{:?}",
        got.iter().map(|t| t.len()).collect::<Vec<_>>()
    );
    let ids: Vec<&str> = list["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["R-1", "R-2", "R-3"], "a refused create used an id");
}
