//! What the spec says fails loud, refused by the built binary itself: the exit
//! code and the text of `extension/cotal-jcode/test/fixtures/refusals.json`
//! (the manager extension refuses with the same text), before the launch
//! material is read, the control socket is bound, a private home is made or
//! the broker is dialled.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn fixture() -> Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../extension/cotal-jcode/test/fixtures/refusals.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

#[test]
fn every_refused_spelling_exits_before_touching_anything() {
    let f = fixture();
    let prefix = f["prefix"].as_str().unwrap();
    let code = f["exitCode"].as_i64().unwrap() as i32;
    let mut seen = 0;
    for (key, r) in f["refusals"].as_object().unwrap() {
        let message = r["message"].as_str().unwrap();
        for arg in r["args"].as_array().unwrap() {
            let arg = arg.as_str().unwrap();
            let ws = tempfile::tempdir().unwrap();
            let broker = TcpListener::bind("127.0.0.1:0").unwrap();
            broker.set_nonblocking(true).unwrap();
            let material = ws.path().join("material.json");
            std::fs::write(
                &material,
                format!(
                    r#"{{"servers":["nats://{}"],"controlToken":"t"}}"#,
                    broker.local_addr().unwrap()
                ),
            )
            .unwrap();
            std::fs::set_permissions(&material, std::fs::Permissions::from_mode(0o600)).unwrap();
            let control = ws.path().join("control.sock");
            let out = Command::new(env!("CARGO_BIN_EXE_jucode-cotal-jcode"))
                .arg("--no-events")
                .arg(arg)
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .env("COTAL_SPACE", "dev")
                .env("COTAL_NAME", "alice")
                .env("COTAL_LAUNCH_MATERIAL", &material)
                .env("COTAL_CONTROL_SOCKET", &control)
                .env("COTAL_JCODE_HOME", ws.path())
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(code), "{key} {arg}: {stderr}");
            assert_eq!(stderr, format!("{prefix}{message}\n"), "{key} {arg}");
            assert!(out.stdout.is_empty(), "{key} {arg}");
            assert!(material.exists(), "{arg}: the launch material was not read");
            assert!(!control.exists(), "{arg}: no control socket was bound");
            assert!(
                !ws.path().join(".cotal").exists(),
                "{arg}: no private home was made"
            );
            match broker.accept() {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                other => panic!("{arg}: the broker was dialled: {other:?}"),
            }
            seen += 1;
        }
    }
    assert_eq!(seen, 7, "every spelling of the fixture ran");
}

#[test]
fn ordinary_arguments_are_not_refusals() {
    // An unknown flag is still a usage error, not a refusal.
    let out = Command::new(env!("CARGO_BIN_EXE_jucode-cotal-jcode"))
        .arg("--optional")
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("usage: jucode-cotal-jcode"), "{stderr}");
    assert!(!stderr.contains("refused"), "{stderr}");
}
