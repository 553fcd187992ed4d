//! `upload` on the real daemon: a file sent in chunks lands under `~/.jucode/uploads/<date>/`
//! with a cleaned name, for a local client and a paired device; wrong offsets, oversized
//! chunks, bad names and another connection's upload get clear errors and leave the part as
//! it was; an upload that never ends leaves only its `.part`, which the next start removes
//! with the days past the 30 kept.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use base64::Engine as _;
use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01";
const MB4: usize = 4 * 1024 * 1024;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Every file under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

fn message(reply: &Value) -> &str {
    assert_eq!(reply["type"], "error", "{reply}");
    reply["message"].as_str().unwrap()
}

/// Sends `bytes` in chunks of `chunk` bytes; returns the last reply.
async fn upload(client: &mut Client, name: &str, bytes: &[u8], chunk: usize) -> Value {
    let mut pieces = bytes.chunks(chunk.max(1)).peekable();
    let first = pieces.next().unwrap_or(&[]);
    let mut reply = client
        .request(
            json!({"op":"upload","name":name,"data":b64(first),"last":pieces.peek().is_none()}),
        )
        .await
        .unwrap();
    let mut sent = first.len();
    while let Some(piece) = pieces.next() {
        assert_eq!(reply["type"], "upload_part", "{reply}");
        assert_eq!(reply["size"], sent as u64);
        let id = reply["upload"].clone();
        reply = client
            .request(json!({"op":"upload","upload":id,"offset":sent,"data":b64(piece),"last":pieces.peek().is_none()}))
            .await
            .unwrap();
        sent += piece.len();
    }
    reply
}

#[tokio::test]
async fn a_file_in_chunks_lands_under_its_date_with_a_clean_name_for_desk_and_phone() {
    let env = TestHome::new();
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let mut picture = PNG.to_vec();
    picture.extend((0..70_000u32).map(|i| (i % 251) as u8));
    let done = upload(&mut desk, "../Screen\nShot.png", &picture, 30_000).await;
    assert_eq!(done["type"], "uploaded", "{done}");
    assert_eq!(done["name"], "_Screen_Shot.png");
    assert_eq!(done["size"], picture.len() as u64);
    assert_eq!(done["image"], true);
    let id = done["upload"].as_str().unwrap();
    assert!(id.starts_with("u-"), "{id}");
    let path = PathBuf::from(done["path"].as_str().unwrap());
    let day = path.parent().unwrap();
    let uploads = std::fs::canonicalize(env.home().join("uploads")).unwrap();
    assert_eq!(
        std::fs::canonicalize(day.parent().unwrap()).unwrap(),
        uploads
    );
    let date = day.file_name().unwrap().to_str().unwrap();
    assert!(date.parse::<jiff::civil::Date>().is_ok(), "{date}");
    assert_eq!(
        path.file_name().unwrap().to_str().unwrap(),
        format!("{id}-_Screen_Shot.png")
    );
    assert_eq!(std::fs::read(&path).unwrap(), picture);
    assert_eq!(files(&uploads).len(), 1, "no part is left");

    // An upload is a known directory: the page shows a sent image through fs_image.
    let shown = desk
        .request(json!({"op":"fs_image","path":path}))
        .await
        .unwrap();
    assert_eq!(shown["type"], "fs_image", "{shown}");

    // A paired device uploads the same way; a one-chunk file that is not an image.
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();
    let notes = upload(&mut phone, "notes.txt", b"hello", 1 << 20).await;
    assert_eq!(notes["type"], "uploaded", "{notes}");
    assert_eq!(notes["image"], false);
    assert_eq!(notes["size"], 5);
    assert_ne!(notes["upload"], done["upload"]);
    let empty = upload(&mut phone, "empty.bin", b"", 1).await;
    assert_eq!(empty["type"], "uploaded", "{empty}");
    assert_eq!(empty["size"], 0);
    assert_eq!(files(&uploads).len(), 3);
}

#[tokio::test]
async fn bad_chunks_get_clear_errors_and_keep_the_part_as_it_was() {
    let env = TestHome::new();
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let mut other = daemon.client().await.unwrap();
    let first = desk
        .request(json!({"op":"upload","name":"log.txt","data":b64(b"abc"),"last":false}))
        .await
        .unwrap();
    assert_eq!(first["type"], "upload_part", "{first}");
    let id = first["upload"].as_str().unwrap().to_string();

    let cases: Vec<(Value, String)> = vec![
        (
            json!({"op":"upload","upload":id,"offset":2,"data":b64(b"x")}),
            format!("upload {id}: offset 2 is not the 3 bytes received so far"),
        ),
        (
            json!({"op":"upload","upload":id,"offset":3,"data":b64(&vec![0u8; MB4 + 1])}),
            "upload: a chunk holds at most 4 MB (4194304 bytes) decoded".into(),
        ),
        (
            json!({"op":"upload","upload":id,"data":b64(b"x")}),
            "upload: offset is required with upload".into(),
        ),
        (
            json!({"op":"upload","upload":id,"offset":3,"data":"%%%"}),
            "upload: data is not base64".into(),
        ),
        (
            json!({"op":"upload","upload":id,"name":"b.txt","offset":3,"data":""}),
            format!("upload: name goes only with the first chunk (this one names upload {id})"),
        ),
        (
            json!({"op":"upload","data":b64(b"x")}),
            "upload: the first chunk needs name; later ones need upload and offset".into(),
        ),
        (
            json!({"op":"upload","name":"a.txt","offset":5,"data":""}),
            "upload: the first chunk starts at offset 0, not 5".into(),
        ),
        (
            json!({"op":"upload","name":"../..","data":""}),
            "upload: name has nothing left once separators, control characters and dots are removed".into(),
        ),
        (
            json!({"op":"upload","name":"  ","data":""}),
            "upload: name is empty".into(),
        ),
        (
            json!({"op":"upload","name":"x".repeat(1025),"data":""}),
            "upload: name is longer than 1024 bytes".into(),
        ),
        (
            json!({"op":"upload","upload":"u-1-99","offset":0,"data":""}),
            "upload u-1-99: no such upload in progress (finished, failed, or never started)".into(),
        ),
    ];
    for (op, want) in cases {
        let e = desk.request(op.clone()).await.unwrap();
        assert!(message(&e).starts_with(&want), "{op}: {e}");
    }
    // Another connection cannot continue it, even knowing the id and the offset.
    let e = other
        .request(json!({"op":"upload","upload":id,"offset":3,"data":b64(b"evil")}))
        .await
        .unwrap();
    assert_eq!(
        message(&e),
        format!("upload {id}: started by another connection; only that one may continue it")
    );
    // Nothing refused was written: the upload goes on where it was.
    let done = desk
        .request(json!({"op":"upload","upload":id,"offset":3,"data":b64(b"def"),"last":true}))
        .await
        .unwrap();
    assert_eq!(done["type"], "uploaded", "{done}");
    assert_eq!(
        std::fs::read(done["path"].as_str().unwrap()).unwrap(),
        b"abcdef"
    );
    let e = desk
        .request(json!({"op":"upload","upload":id,"offset":6,"data":""}))
        .await
        .unwrap();
    assert!(message(&e).contains("no such upload in progress"), "{e}");
    // An upload named nowhere else than its chunk: the daemon is still there for the rest.
    let pong = other.request(json!({"op":"ping"})).await.unwrap();
    assert_eq!(pong["type"], "pong");
}

/// The daemon on `home` with its clock at `at` (the debug build's test clock).
async fn daemon_at(env: &TestHome, at: &str) -> Daemon {
    Daemon::builder(&env.home())
        .env("JUCODE_DEBUG_CLOCK", at)
        .start()
        .await
        .unwrap()
}

#[tokio::test]
async fn an_unfinished_upload_leaves_only_its_part_and_the_next_start_removes_it_and_old_days() {
    let env = TestHome::new();
    let uploads = env.home().join("uploads");
    let mut daemon = daemon_at(&env, "2026-03-01T12:00:00Z").await;
    let mut desk = daemon.client().await.unwrap();
    let done = upload(&mut desk, "kept.txt", b"kept", 10).await;
    assert_eq!(done["type"], "uploaded", "{done}");
    let first = desk
        .request(json!({"op":"upload","name":"big.bin","data":b64(&[1u8; 1000]),"last":false}))
        .await
        .unwrap();
    assert_eq!(first["type"], "upload_part", "{first}");
    let id = first["upload"].as_str().unwrap().to_string();
    assert!(
        id.starts_with("u-1772366400"),
        "the id's ms are the hub's clock: {id}"
    );
    desk.close().await;
    let done_name = format!(
        "2026-03-01/{}",
        Path::new(done["path"].as_str().unwrap())
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
    );
    assert_eq!(
        files(&uploads),
        vec![done_name.clone(), format!("2026-03-01/{id}-big.bin.part")]
    );
    daemon.stop().await.unwrap();
    std::fs::create_dir_all(uploads.join("requirements/R-1")).unwrap();
    std::fs::write(uploads.join("requirements/R-1/1.png"), PNG).unwrap();

    // 30 days on, the file is kept and the part is gone.
    let mut daemon = daemon_at(&env, "2026-03-31T23:00:00Z").await;
    assert_eq!(
        files(&uploads),
        vec![done_name, "requirements/R-1/1.png".to_string()]
    );
    daemon.stop().await.unwrap();
    // 31 days on, the day goes; what is not a day stays.
    let _daemon = daemon_at(&env, "2026-04-01T00:30:00Z").await;
    assert_eq!(files(&uploads), vec!["requirements/R-1/1.png".to_string()]);
    assert!(!uploads.join("2026-03-01").exists());
}

/// 100 MB is the real limit: 25 chunks of 4 MiB fill a file and one byte more is refused.
#[tokio::test]
#[ignore = "slow: sends 100 MB (cargo nextest run -p jucode-daemon --run-ignored only)"]
async fn a_file_stops_at_100_mb() {
    let env = TestHome::new();
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let chunk = b64(&vec![0x5au8; MB4]);
    let first = desk
        .request(json!({"op":"upload","name":"huge.bin","data":chunk,"last":false}))
        .await
        .unwrap();
    let id = first["upload"].clone();
    let mut size = MB4;
    while size < 100 * 1024 * 1024 {
        let r = desk
            .request(json!({"op":"upload","upload":id,"offset":size,"data":chunk}))
            .await
            .unwrap();
        size += MB4;
        assert_eq!(r["size"], size, "{r}");
    }
    let e = desk
        .request(json!({"op":"upload","upload":id,"offset":size,"data":b64(b"!"),"last":true}))
        .await
        .unwrap();
    assert_eq!(
        message(&e),
        format!(
            "upload {}: a file holds at most 100 MB (104857600 bytes)",
            id.as_str().unwrap()
        )
    );
    // The file can still end at the limit.
    let done = desk
        .request(json!({"op":"upload","upload":id,"offset":size,"data":"","last":true}))
        .await
        .unwrap();
    assert_eq!(done["type"], "uploaded", "{done}");
    assert_eq!(done["size"], 100 * 1024 * 1024);
}
