//! Uploads on the in-process harness and its manual clock: the date folder and the id come from
//! the hub's clock, the purge at start keeps 30 days and removes the 31st, and the uploads of a
//! connection that went away, or a connection's oldest beyond 8 unfinished, are abandoned
//! (their parts removed).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use jucode_testsupport::harness::{Harness, TestClient};
use serde_json::{Value, json};

const DAY: u64 = 24 * 3600;

async fn start(c: &mut TestClient, name: &str) -> Value {
    let r = c
        .request(json!({"op":"upload","name":name,"data":"eHl6","last":false}))
        .await
        .unwrap();
    assert_eq!(r["type"], "upload_part", "{r}");
    r
}

fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[tokio::test]
async fn the_purge_keeps_thirty_days_on_the_hubs_clock() {
    // 2026-03-01T12:00:00Z, the harness's start.
    let h = Harness::start().unwrap();
    let mut c = h.connect().await.unwrap();
    let done = c
        .request(json!({"op":"upload","name":"a.txt","data":"aGk=","last":true}))
        .await
        .unwrap();
    assert_eq!(done["type"], "uploaded", "{done}");
    assert_eq!(
        done["upload"],
        format!("u-{}-1", h.now_ms()),
        "the id's ms are the clock's"
    );
    let day = h.home().join("uploads").join("2026-03-01");
    assert!(Path::new(done["path"].as_str().unwrap()).starts_with(&day));
    start(&mut c, "half.bin").await;
    drop(c);
    assert_eq!(names(&day).len(), 2);

    // Thirty days on (2026-03-31): the file stays, the part goes.
    h.advance(Duration::from_secs(30 * DAY));
    let h = h.restart().await.unwrap();
    assert_eq!(
        names(&day),
        vec![format!("{}-a.txt", done["upload"].as_str().unwrap())]
    );
    // The 31st day (2026-04-01): the day goes.
    h.advance(Duration::from_secs(DAY));
    let h = h.restart().await.unwrap();
    assert!(!day.exists());
    drop(h);
}

#[tokio::test]
async fn abandoned_uploads_lose_their_parts() {
    let h = Harness::start().unwrap();
    let day = h.home().join("uploads").join("2026-03-01");
    let mut gone = h.connect().await.unwrap();
    let left = start(&mut gone, "left.bin").await;
    drop(gone);
    let mut c = h.connect().await.unwrap();
    // Starting an upload sweeps those of connections that are gone.
    let mut ids = vec![start(&mut c, "f0.bin").await["upload"].clone()];
    assert!(
        !names(&day).iter().any(|n| n.contains("left.bin")),
        "{:?}",
        names(&day)
    );
    let e = c
        .request(json!({"op":"upload","upload":left["upload"],"offset":3,"data":""}))
        .await
        .unwrap();
    assert_eq!(e["type"], "error", "{e}");
    // A ninth unfinished upload abandons the oldest.
    for i in 1..9 {
        ids.push(start(&mut c, &format!("f{i}.bin")).await["upload"].clone());
    }
    assert_eq!(names(&day).len(), 8, "{:?}", names(&day));
    let e = c
        .request(json!({"op":"upload","upload":ids[0],"offset":3,"data":""}))
        .await
        .unwrap();
    assert!(
        e["message"].as_str().unwrap().contains("no such upload"),
        "{e}"
    );
    let ok = c
        .request(json!({"op":"upload","upload":ids[1],"offset":3,"data":"","last":true}))
        .await
        .unwrap();
    assert_eq!(ok["type"], "uploaded", "{ok}");
}
