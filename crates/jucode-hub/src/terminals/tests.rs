//! [`Hub::open_process`] as the TUI hand-off uses it: any program, extra and removed variables,
//! the announce step before any output, the exit code on the oneshot after `term_exit`, and
//! [`Hub::close_process`].

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use jucode_protocol::daemon::DaemonEvent;
use serde_json::Value;

use super::{ProcessSpec, TermSize};
use crate::{Auth, Connection, Hub, HubConfig, Outgoing};

fn hub(dir: &std::path::Path) -> Arc<Hub> {
    Hub::open(HubConfig {
        home: dir.join(".jucode"),
        user_home: dir.to_path_buf(),
        version: "test".into(),
        relay_url: None,
        engines: HashMap::new(),
        clock: jucode_clock::ManualClock::new("2026-03-01T12:00:00Z".parse().unwrap()).shared(),
        agent_mcp: Default::default(),
        billing: None,
        online: Default::default(),
    })
    .unwrap()
}

async fn next(conn: &mut Connection) -> Value {
    let wait = conn.frames.recv();
    let Some(Outgoing::Frame(text)) =
        tokio::time::timeout(std::time::Duration::from_secs(20), wait)
            .await
            .expect("a frame within 20 s")
    else {
        panic!("the connection ended")
    };
    serde_json::from_str(&text).unwrap()
}

/// Frames of `term` from now on until its exit: (output, the exit frame's code).
async fn run_out(conn: &mut Connection, term: &str) -> (String, Value) {
    let mut out = Vec::new();
    loop {
        let f = next(conn).await;
        if f["term"] != term {
            continue;
        }
        match f["type"].as_str().unwrap() {
            "term_output" => out.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(f["data"].as_str().unwrap())
                    .unwrap(),
            ),
            "term_exit" => {
                return (
                    String::from_utf8_lossy(&out).into_owned(),
                    f["code"].clone(),
                );
            }
            other => panic!("unexpected {other}"),
        }
    }
}

fn sh(script: &str, dir: &std::path::Path) -> ProcessSpec {
    ProcessSpec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: dir.to_path_buf(),
        ..ProcessSpec::default()
    }
}

#[tokio::test]
async fn a_process_gets_its_variables_its_announce_first_and_its_code_after_term_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = hub(tmp.path());
    let mut conn = hub.connect(Auth::Local);
    // The connect batch.
    while next(&mut conn).await["type"] != "requirements" {}
    let mut spec = sh(
        "echo \"[$JUCODE_TEST_ADD][${HOME:-none}][$TERM]\"; exit 7",
        tmp.path(),
    );
    spec.env.push(("JUCODE_TEST_ADD".into(), "added".into()));
    spec.env_remove.push("HOME".into());
    let opened = hub
        .open_process(
            conn.id,
            spec,
            TermSize::from_request(None, None),
            |inner, id| {
                let frame = crate::to_value(&jucode_protocol::daemon::Reply::to(
                    None,
                    DaemonEvent::TermOpened {
                        term: id.as_str().to_string(),
                    },
                ));
                inner.clients.send(conn.id, &frame);
            },
        )
        .unwrap();
    let first = next(&mut conn).await;
    assert_eq!(first["type"], "term_opened");
    assert_eq!(first["term"], opened.id.as_str());
    let (out, code) = run_out(&mut conn, opened.id.as_str()).await;
    assert!(out.contains("[added][none][xterm-256color]"), "{out:?}");
    assert_eq!(code, 7);
    assert_eq!(opened.exited.await.unwrap(), Some(7));
}

#[tokio::test]
async fn close_process_kills_it_and_the_exit_says_null() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = hub(tmp.path());
    let mut conn = hub.connect(Auth::Local);
    let opened = hub
        .open_process(
            conn.id,
            sh("echo ready; exec sleep 100", tmp.path()),
            TermSize::from_request(Some(120), Some(40)),
            |_, _| {},
        )
        .unwrap();
    loop {
        let f = next(&mut conn).await;
        if f["type"] == "term_output" {
            break;
        }
    }
    assert!(hub.close_process(&opened.id));
    let (_, code) = run_out(&mut conn, opened.id.as_str()).await;
    assert_eq!(code, Value::Null);
    assert_eq!(opened.exited.await.unwrap(), None);
    assert!(
        !hub.close_process(&opened.id),
        "still listed after its exit"
    );
}

#[tokio::test]
async fn a_client_that_does_not_read_pauses_the_shell_instead_of_growing_its_queue() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = hub(tmp.path());
    let mut conn = hub.connect(Auth::Local);
    while next(&mut conn).await["type"] != "requirements" {}
    const TOTAL: usize = 12 * 1024 * 1024;
    let opened = hub
        .open_process(
            conn.id,
            sh(&format!("head -c {TOTAL} /dev/zero; exit 0"), tmp.path()),
            TermSize::from_request(None, None),
            |_, _| {},
        )
        .unwrap();
    // Nothing is read for a while: the queue stays near the pause mark (one frame over it at
    // most, about 88 KiB of JSON) and the client is not dropped as too slow.
    let bound = super::pty::BACKLOG_PAUSE + 100 * 1024;
    let mut highest = 0;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let backlog = hub.client_backlog(conn.id).expect("the client was dropped");
        highest = highest.max(backlog);
        assert!(backlog <= bound, "{backlog} bytes queued");
    }
    assert!(
        highest > super::pty::BACKLOG_PAUSE / 2,
        "the shell wrote little: {highest}"
    );
    // Reading again lets it finish, with every byte.
    let (out, code) = run_out(&mut conn, opened.id.as_str()).await;
    assert_eq!(out.len(), TOTAL);
    assert_eq!(code, 0);
}

/// The descriptors a child started the usual way (as engines are) finds open, with what
/// they point to.
fn inherited() -> Vec<String> {
    let out = std::process::Command::new("/bin/sh")
        .args(["-c", "for f in /proc/$$/fd/*; do readlink \"$f\"; done"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let mut fds: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    fds.sort();
    fds
}

#[tokio::test]
async fn a_later_child_inherits_no_terminal_descriptor() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = hub(tmp.path());
    let mut conn = hub.connect(Auth::Local);
    let before = inherited();
    let first = hub
        .open_process(
            conn.id,
            sh("exec sleep 100", tmp.path()),
            TermSize::from_request(None, None),
            |_, _| {},
        )
        .unwrap();
    let after = inherited();
    assert!(
        !after
            .iter()
            .any(|f| f.contains("ptmx") || f.contains("/dev/pts/"))
            || after == before,
        "a pty descriptor leaks into children: {after:?} (before: {before:?})"
    );
    assert!(hub.close_process(&first.id));
    let (_, code) = run_out(&mut conn, first.id.as_str()).await;
    assert_eq!(code, Value::Null);
}

/// The hand-built `term_output` text is what serde writes for the event, byte for byte, for
/// empty, padded and full frames and for an id that needs escaping.
#[test]
fn output_frames_are_the_serde_text_of_the_event() {
    let full: Vec<u8> = (0..jucode_protocol::daemon::terminals::TERM_OUTPUT_FRAME_BYTES)
        .map(|i| (i % 251) as u8)
        .collect();
    let cases: [(&str, &[u8]); 5] = [
        ("t-0123456789abcdef", b""),
        ("t-0123456789abcdef", b"a"),
        ("t-0123456789abcdef", b"\x1b[31mred\xe2\x9c"),
        ("t-\"odd\\id\"\n", b"xy"),
        ("t-0123456789abcdef", &full),
    ];
    for (term, data) in cases {
        let want = serde_json::to_string(&jucode_protocol::daemon::Reply::to(
            None,
            DaemonEvent::TermOutput {
                term: term.to_string(),
                data: base64::engine::general_purpose::STANDARD.encode(data),
            },
        ))
        .unwrap();
        // A used buffer, as the pump passes it.
        let mut text = String::from("left over");
        assert_eq!(
            &*super::output_frame(term, data, &mut text),
            want.as_str(),
            "{term:?}"
        );
    }
}
