//! Terminals on the real daemon: a login shell on a pty in a known directory, driven by the
//! client that opened it (a local client or a paired device), its output in frames of at most
//! 64 KiB, its exit code after it is reaped (`null` when killed), four per client, and killed
//! and reaped when its client goes away.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use base64::Engine as _;
use jucode_testsupport::{Client, TestHome};
use serde_json::{Value, json};

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

async fn open(client: &mut Client, cwd: &str, size: Option<(i64, i64)>) -> Value {
    let mut op = json!({"op": "term_open", "cwd": cwd});
    if let Some((cols, rows)) = size {
        op["cols"] = json!(cols);
        op["rows"] = json!(rows);
    }
    client.request(op).await.unwrap()
}

async fn open_ok(client: &mut Client, cwd: &str, size: Option<(i64, i64)>) -> String {
    let r = open(client, cwd, size).await;
    assert_eq!(r["type"], "term_opened", "{r}");
    let term = r["term"].as_str().unwrap().to_string();
    assert!(term.starts_with("t-"), "{term}");
    term
}

async fn type_in(client: &mut Client, term: &str, text: &str) {
    client
        .send(json!({"op": "term_input", "term": term, "data": b64(text)}))
        .await
        .unwrap();
}

/// Reads `term`'s output until it contains `needle`; returns all of it (decoded).
async fn output_until(client: &mut Client, term: &str, needle: &str) -> String {
    let mut seen = Vec::new();
    loop {
        let frame = client
            .recv_until(|f| {
                f["term"] == term && (f["type"] == "term_output" || f["type"] == "term_exit")
            })
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{e}; waiting for {needle:?} in {:?}",
                    String::from_utf8_lossy(&seen)
                )
            });
        assert_eq!(
            frame["type"], "term_output",
            "exited before {needle:?}: {frame}"
        );
        let data = base64::engine::general_purpose::STANDARD
            .decode(frame["data"].as_str().unwrap())
            .unwrap();
        assert!(data.len() <= 64 * 1024, "a frame of {} bytes", data.len());
        seen.extend_from_slice(&data);
        let text = String::from_utf8_lossy(&seen).into_owned();
        if text.contains(needle) {
            return text;
        }
    }
}

async fn exit_of(client: &mut Client, term: &str) -> Value {
    let frame = client
        .recv_until(|f| f["type"] == "term_exit" && f["term"] == term)
        .await
        .unwrap();
    frame["code"].clone()
}

#[tokio::test]
async fn a_shell_runs_in_its_directory_with_the_terminal_environment_resizes_and_exits_with_its_code()
 {
    let env = TestHome::new();
    let project = env.project("app");
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    desk.start_session(&project).await.unwrap();
    let cwd = project.display().to_string();

    let term = open_ok(&mut desk, &cwd, Some((100, 30))).await;
    // Arithmetic marks output apart from the terminal's echo of what was typed.
    type_in(&mut desk, &term, "stty size; echo \"size-$((1+1))\"\n").await;
    let out = output_until(&mut desk, &term, "size-2").await;
    assert!(out.contains("30 100"), "{out}");

    type_in(
        &mut desk,
        &term,
        "echo \"env-$((2+2)):$TERM:$COLORTERM:$PWD:${LANG:+set}\"\n",
    )
    .await;
    let out = output_until(&mut desk, &term, "env-4:").await;
    let line = out.lines().find(|l| l.contains("env-4:")).unwrap();
    assert!(
        line.contains(&format!("env-4:xterm-256color:truecolor:{cwd}:set")),
        "{line}"
    );

    desk.send(json!({"op": "term_resize", "term": term, "cols": 5000, "rows": 0}))
        .await
        .unwrap();
    type_in(&mut desk, &term, "stty size; echo \"resized-$((3+3))\"\n").await;
    let out = output_until(&mut desk, &term, "resized-6").await;
    assert!(out.contains("2 1000"), "the size is not clamped: {out}");

    type_in(&mut desk, &term, "exit 3\n").await;
    assert_eq!(exit_of(&mut desk, &term).await, json!(3));
    // Gone after its exit: the id is unknown now.
    let r = desk
        .request(json!({"op": "term_close", "term": term}))
        .await
        .unwrap();
    assert_eq!(r["type"], "error", "{r}");

    // Defaults: 80 × 24.
    let term = open_ok(&mut desk, "~/app", None).await;
    type_in(&mut desk, &term, "stty size; echo \"default-$((4+4))\"\n").await;
    let out = output_until(&mut desk, &term, "default-8").await;
    assert!(out.contains("24 80"), "{out}");
}

#[tokio::test]
async fn terminals_belong_to_their_client_four_at_most_and_close_kills_with_a_null_code() {
    let env = TestHome::new();
    let project = env.project("app");
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    desk.start_session(&project).await.unwrap();
    let cwd = project.display().to_string();
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();

    let mut terms = Vec::new();
    for _ in 0..4 {
        terms.push(open_ok(&mut desk, &cwd, None).await);
    }
    let r = open(&mut desk, &cwd, None).await;
    assert_eq!(r["type"], "error", "{r}");
    assert_eq!(
        r["message"],
        "term_open: a client may have at most 4 terminals open"
    );

    // A paired device may have terminals of its own, and cannot see or drive the desk's.
    let mine = open_ok(&mut phone, &cwd, None).await;
    type_in(&mut phone, &mine, "echo \"phone-$((5+5))\"\n").await;
    output_until(&mut phone, &mine, "phone-10").await;
    let theirs = &terms[0];
    for op in [
        json!({"op": "term_input", "term": theirs, "data": b64("echo hacked\n")}),
        json!({"op": "term_resize", "term": theirs, "cols": 10, "rows": 10}),
        json!({"op": "term_close", "term": theirs}),
    ] {
        let name = op["op"].as_str().unwrap().to_string();
        let r = phone.request(op).await.unwrap();
        assert_eq!(r["type"], "error", "{r}");
        assert_eq!(
            r["message"],
            format!("{name}: no terminal {theirs} is open on this connection")
        );
    }
    // An unknown id gets the same answer.
    let r = phone
        .request(json!({"op": "term_close", "term": "t-0000000000000000"}))
        .await
        .unwrap();
    assert_eq!(
        r["message"],
        "term_close: no terminal t-0000000000000000 is open on this connection"
    );
    let r = desk
        .request(json!({"op": "term_input", "term": theirs, "data": "!!not base64"}))
        .await
        .unwrap();
    assert_eq!(r["message"], "term_input: data is not base64");

    // The desk's shell is still its own: it never ran the phone's input.
    type_in(&mut desk, theirs, "echo \"still-$((6+6))\"\n").await;
    let out = output_until(&mut desk, theirs, "still-12").await;
    assert!(!out.contains("hacked"), "{out}");

    // term_close kills the shell: a signal, so the code is null.
    desk.send(json!({"op": "term_close", "term": theirs}))
        .await
        .unwrap();
    assert_eq!(exit_of(&mut desk, theirs).await, Value::Null);
    // Its place is free again.
    open_ok(&mut desk, &cwd, None).await;
}

#[tokio::test]
async fn a_directory_outside_the_known_ones_is_refused() {
    let env = TestHome::new();
    let project = env.project("app");
    let outside = env.project("elsewhere");
    std::fs::write(project.join("file.txt"), "x").unwrap();
    std::fs::create_dir_all(env.root().join(".ssh")).unwrap();
    std::os::unix::fs::symlink(&outside, project.join("out")).unwrap();
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    desk.start_session(&project).await.unwrap();
    for (cwd, message) in [
        (outside.display().to_string(), "outside the directories"),
        (
            format!("{}/out", project.display()),
            "outside the directories",
        ),
        (
            format!("{}/../elsewhere", project.display()),
            "outside the directories",
        ),
        ("~".to_string(), "outside the directories"),
        (
            env.home().join("daemon").display().to_string(),
            "holds credentials",
        ),
        ("~/.ssh".to_string(), "holds credentials"),
        (
            format!("{}/file.txt", project.display()),
            "is not a directory",
        ),
        (format!("{}/none", project.display()), "does not exist"),
        ("app".to_string(), "is not an absolute path"),
    ] {
        let r = open(&mut desk, &cwd, None).await;
        assert_eq!(r["type"], "error", "{cwd}: {r}");
        let text = r["message"].as_str().unwrap();
        assert!(text.contains(message), "{cwd}: {text}");
    }
}

/// Whether `pid` is still a process (a zombie counts: it is not reaped).
fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test]
async fn a_disconnect_kills_the_shells_and_reaps_them_even_one_that_ignores_hangups() {
    let env = TestHome::new();
    let project = env.project("app");
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    desk.start_session(&project).await.unwrap();
    let cwd = project.display().to_string();
    let mut pids = Vec::new();
    for (i, script) in ["", "trap '' HUP; "].iter().enumerate() {
        let term = open_ok(&mut desk, &cwd, None).await;
        type_in(
            &mut desk,
            &term,
            &format!("{script}echo \"pid-{i}-$$-end\"\n"),
        )
        .await;
        let out = output_until(&mut desk, &term, "-end\r\n").await;
        let marker = format!("pid-{i}-");
        // The terminal echoes the typed `$$` too; only the shell's own line has a number.
        let pid: u32 = out
            .split(&marker)
            .filter_map(|rest| rest.split("-end").next()?.parse().ok())
            .next()
            .unwrap();
        assert!(alive(pid));
        pids.push(pid);
    }
    desk.close().await;
    // SIGHUP at once, SIGKILL after the grace period; reaped either way.
    for _ in 0..200 {
        if pids.iter().all(|p| !alive(*p)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left: Vec<_> = pids.iter().filter(|p| alive(**p)).collect();
    panic!("still there (or not reaped): {left:?}");
}

#[tokio::test]
async fn a_large_output_arrives_whole_in_frames_of_at_most_64_kib() {
    let env = TestHome::new();
    let project = env.project("app");
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    desk.start_session(&project).await.unwrap();
    let term = open_ok(&mut desk, &project.display().to_string(), None).await;
    type_in(
        &mut desk,
        &term,
        "head -c 1000000 /dev/zero | base64; echo \"done-$((7+7))\"\n",
    )
    .await;
    let out = output_until(&mut desk, &term, "done-14").await;
    // base64 of a million zero bytes: 1,333,334 'A's and the padding.
    let encoded: String = out
        .lines()
        // A line may start with bash's bracketed-paste switch and a carriage return.
        .map(|l| l.trim_end_matches('\r').rsplit('\r').next().unwrap_or(""))
        .filter(|l| !l.is_empty() && l.chars().all(|c| c == 'A' || c == '='))
        .collect();
    assert_eq!(encoded.matches('A').count(), 1_333_334);
    assert!(out.contains("AA=="), "the padding is missing");
}

#[tokio::test]
async fn the_exit_is_reported_even_while_a_background_process_keeps_the_pty_open() {
    let env = TestHome::new();
    let project = env.project("app");
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    desk.start_session(&project).await.unwrap();
    let term = open_ok(&mut desk, &project.display().to_string(), None).await;
    // The job holds the pty's other side after the shell is gone: no end of file comes.
    type_in(&mut desk, &term, "sleep 20 & echo \"bg-$((8+8))\"\n").await;
    output_until(&mut desk, &term, "bg-16").await;
    type_in(&mut desk, &term, "exit 5\n").await;
    assert_eq!(exit_of(&mut desk, &term).await, json!(5));
}
