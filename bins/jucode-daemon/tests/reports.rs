//! `report_list` and `report_read` on the real daemon binary, for a local client and a paired
//! device. Reports are posted by agent sessions through their `report` tool; here they are
//! written to `reports.jsonl` before the daemon starts.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_testsupport::{Daemon, TestHome};
use serde_json::{Value, json};

fn report(id: &str, at: u64, read: bool) -> Value {
    json!({"id":id,"agent":"ops","session":"s1","title":format!("{id} title"),"body":"done","at":at,"read":read})
}

fn seed(env: &TestHome) {
    let dir = env.home().join("daemon");
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = String::new();
    for (id, at) in [("r-1", 10), ("r-2", 20), ("r-3", 30)] {
        let posted = json!({"kind":"posted","id":id,"agent":"ops","session":"s1","title":format!("{id} title"),"body":"done","at":at});
        text.push_str(&format!("{posted}\n"));
    }
    text.push_str("{\"kind\":\"read\",\"id\":\"r-1\",\"at\":40}\n");
    // A torn last line (a crash mid-write) is passed over.
    text.push_str("{\"kind\":\"posted\",\"id\":\"r-4\",\"ag");
    std::fs::write(dir.join("reports.jsonl"), text).unwrap();
}

#[tokio::test]
async fn reports_are_listed_newest_first_with_whether_they_were_read() {
    let env = TestHome::new();
    seed(&env);
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();
    for client in [&mut desk, &mut phone] {
        let list = client.request(json!({"op":"report_list"})).await.unwrap();
        assert_eq!(list["type"], "reports");
        assert_eq!(
            list["reports"],
            json!([
                report("r-3", 30, false),
                report("r-2", 20, false),
                report("r-1", 10, true)
            ])
        );
        let two = client
            .request(json!({"op":"report_list","limit":2}))
            .await
            .unwrap();
        assert_eq!(two["reports"].as_array().unwrap().len(), 2);
        let err = client
            .request(json!({"op":"report_list","limit":-1}))
            .await
            .unwrap();
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .starts_with("report_list: invalid value"),
            "{err}"
        );
    }
}

#[tokio::test]
async fn a_report_read_on_one_client_is_read_on_every_client_and_after_a_restart() {
    let env = TestHome::new();
    seed(&env);
    let mut daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();
    let reply = phone
        .request(json!({"op":"report_read","report":"r-2"}))
        .await
        .unwrap();
    assert_eq!(reply["type"], "report_read");
    assert_eq!(reply["report"], "r-2");
    let told = desk.recv_type("report_read", None).await.unwrap();
    assert_eq!(told, json!({"type":"report_read","report":"r-2"}));
    // Read again: the same reply, nothing new to tell the others.
    let again = desk
        .request(json!({"op":"report_read","report":"r-2"}))
        .await
        .unwrap();
    assert_eq!(again["type"], "report_read");
    for (frame, message) in [
        (
            json!({"op":"report_read","report":"r-9"}),
            "unknown report r-9",
        ),
        (
            json!({"op":"report_read"}),
            "report_read: missing field `report`",
        ),
    ] {
        let err = desk.request(frame).await.unwrap();
        assert_eq!(err["message"], message);
    }

    daemon.kill9_and_wait().await.unwrap();
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut desk = daemon.client().await.unwrap();
    let list = desk.request(json!({"op":"report_list"})).await.unwrap();
    let read: Vec<bool> = list["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["read"].as_bool().unwrap())
        .collect();
    assert_eq!(read, [false, true, true]);
}
