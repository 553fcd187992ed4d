//! Requirements on the real daemon binary: the list on connect and after each change, the
//! ops' replies and errors, the images moved out of the uploads, ids never given twice after
//! a restart, old `projects: ["/path"]` records given their project, and proposals decided.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_testsupport::{Client, TestHome};
use serde_json::{Value, json};

/// The first bytes of a png: enough for the daemon to call it an image.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUg==";

/// Project `p1` at `<root>/app`, a closed session `s1` in it, a requirement saved before
/// projects had ids (`R-1`) and one an agent proposed (`R-2`).
fn seed(env: &TestHome) -> String {
    let cwd = env.project("app").display().to_string();
    std::fs::create_dir_all(env.home().join("daemon")).unwrap();
    let workspaces = json!({"rev":1,"workspaces":[{"id":"w1","name":"W","projects":[
        {"id":"p1","name":"app","path":cwd}]}]});
    std::fs::write(
        env.home().join("daemon/workspaces.json"),
        workspaces.to_string(),
    )
    .unwrap();
    env.seed_log(
        "sessions.jsonl",
        &[
            json!({"kind":"open","session":"s1","cwd":cwd,"engine":"jucode","at":1}),
            json!({"kind":"close","session":"s1","at":2}),
        ],
    );
    env.seed_log(
        "requirements.jsonl",
        &[
            json!({"kind":"saved","requirement":{"id":"R-1","text":"old words","state":"idea",
                "projects":[cwd],"created_at":5,"updated_at":5}}),
            json!({"kind":"saved","requirement":{"id":"R-2","text":"agent idea","state":"proposed",
                "source":"agent","proposal":{"kind":"create","agent":"ops","session":"s1",
                "reason":"r","at":6},"created_at":6,"updated_at":6}}),
        ],
    );
    cwd
}

fn find<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{id} in {list}"))
}

async fn broadcast(client: &mut Client) -> Value {
    client.recv_type("requirements", None).await.unwrap()
}

#[tokio::test]
async fn the_list_comes_last_on_connect_with_old_records_given_their_project() {
    let env = TestHome::new();
    seed(&env);
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let last = desk.connect_batch.last().unwrap().clone();
    assert_eq!(last["type"], "requirements");
    let old = find(&last, "R-1");
    assert_eq!(old["project"], "p1");
    assert!(old.get("projects").is_none(), "{old}");
    assert_eq!(old["status"], "idea");
    assert_eq!(old["title"], "old words");
    assert_eq!(find(&last, "R-2")["status"], "proposed");
    let listed = desk
        .request(json!({"op":"requirement_list"}))
        .await
        .unwrap();
    assert_eq!(listed["requirements"], last["requirements"]);
}

#[tokio::test]
async fn create_link_update_and_delete_are_broadcast_and_ids_are_never_reused() {
    let env = TestHome::new();
    seed(&env);
    let mut daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();
    let up = phone
        .request(json!({"op":"upload","name":"shot.png","data":PNG_B64,"last":true}))
        .await
        .unwrap();
    let shot = up["path"].as_str().unwrap().to_string();
    let made = phone
        .request(
            json!({"op":"requirement_create","text":"make it fast","images":[shot],
            "session":"s1"}),
        )
        .await
        .unwrap();
    assert_eq!(made["type"], "requirement_created");
    assert_eq!(made["requirement"], "R-3");
    let list = broadcast(&mut desk).await;
    assert_eq!(
        broadcast(&mut phone).await,
        list,
        "the creator gets the list too"
    );
    let r = find(&list, "R-3");
    assert_eq!(r["project"], "p1", "from the session's cwd");
    assert_eq!(r["source"], "session");
    assert_eq!(r["source_session"], "s1");
    assert_eq!(r["state"], "idea");
    let image = r["images"][0].as_str().unwrap();
    assert!(
        image.starts_with(
            &env.home()
                .join("uploads/requirements/R-3/")
                .display()
                .to_string()
        ),
        "{image}"
    );
    assert!(!std::path::Path::new(&shot).exists(), "moved, not copied");
    let data = desk
        .request(json!({"op":"requirement_image","requirement":"R-3","index":0}))
        .await
        .unwrap();
    assert_eq!(data["data"], format!("data:image/png;base64,{PNG_B64}"));

    let linked = desk
        .request(json!({"op":"requirement_link","requirement":"R-1","session":"s1"}))
        .await
        .unwrap();
    assert_eq!(linked["type"], "requirement_linked");
    broadcast(&mut desk).await;
    let list = broadcast(&mut phone).await;
    let r = find(&list, "R-1");
    assert_eq!(r["state"], "open");
    assert_eq!(r["sessions"], json!(["s1"]));
    assert_eq!(r["session_states"], json!({"s1":"idle"}));
    assert_eq!(r["status"], "review");
    // Linking elsewhere moves the session.
    desk.request(json!({"op":"requirement_link","requirement":"R-3","session":"s1"}))
        .await
        .unwrap();
    broadcast(&mut desk).await;
    let list = broadcast(&mut phone).await;
    assert_eq!(find(&list, "R-1")["sessions"], json!([]));
    assert_eq!(find(&list, "R-1")["status"], "open");
    assert_eq!(find(&list, "R-3")["sessions"], json!(["s1"]));

    let saved = desk
        .request(
            json!({"op":"requirement_update","requirement":"R-3","project":null,
            "state":"parked","text":"make it faster"}),
        )
        .await
        .unwrap();
    assert_eq!(saved["type"], "requirement_saved");
    broadcast(&mut desk).await;
    let list = broadcast(&mut phone).await;
    let r = find(&list, "R-3");
    assert_eq!(r["project"], Value::Null);
    assert_eq!(r["status"], "parked");
    assert_eq!(r["title"], "make it faster");

    let gone = desk
        .request(json!({"op":"requirement_delete","requirement":"R-3"}))
        .await
        .unwrap();
    assert_eq!(gone["type"], "requirement_deleted");
    assert!(!env.home().join("uploads/requirements/R-3").exists());
    daemon.stop().await.unwrap();
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let list = desk.connect_batch.last().unwrap().clone();
    assert!(
        list["requirements"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["id"] != "R-3")
    );
    let made = desk
        .request(json!({"op":"requirement_create","text":"again"}))
        .await
        .unwrap();
    assert_eq!(made["requirement"], "R-4", "R-3 is not given twice");
    let list = broadcast(&mut desk).await;
    assert_eq!(find(&list, "R-4")["source"], "desktop");
    assert_eq!(find(&list, "R-4")["project"], Value::Null);
}

#[tokio::test]
async fn bad_requests_are_refused_with_their_reasons() {
    let env = TestHome::new();
    seed(&env);
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let outside = env.root().join("secret.png");
    std::fs::write(&outside, b"\x89PNG\r\n\x1a\n0000").unwrap();
    let outside = outside.display().to_string();
    for (frame, message) in [
        (
            json!({"op":"requirement_create","text":"  "}),
            "requirement_create: text must not be empty".to_string(),
        ),
        (
            json!({"op":"requirement_create","text":"x","project":"p9"}),
            "unknown project p9".to_string(),
        ),
        (
            json!({"op":"requirement_create","text":"x","session":"s9"}),
            "unknown session s9".to_string(),
        ),
        (
            json!({"op":"requirement_create","text":"x","source":"agent"}),
            "source must be desktop, phone or session".to_string(),
        ),
        (
            json!({"op":"requirement_create","text":"x","images":[outside]}),
            format!("{outside} is not an uploaded image"),
        ),
        (
            json!({"op":"requirement_create","text":"x","images":["a","b","c","d","e"]}),
            "a requirement holds at most 4 images".to_string(),
        ),
        (
            json!({"op":"requirement_update","requirement":"R-9","text":"x"}),
            "unknown requirement R-9".to_string(),
        ),
        (
            json!({"op":"requirement_unlink","requirement":"R-1","session":"s1"}),
            "session s1 is not linked to R-1".to_string(),
        ),
        (
            json!({"op":"requirement_link","requirement":"R-1"}),
            "requirement_link: missing field `session`".to_string(),
        ),
        (
            json!({"op":"requirement_image","requirement":"R-1","index":0}),
            "R-1 has no image 0".to_string(),
        ),
        (
            json!({"op":"requirement_proposal","requirement":"R-1","accept":true}),
            "R-1 has no proposal to decide".to_string(),
        ),
    ] {
        let reply = desk.request(frame.clone()).await.unwrap();
        assert_eq!(reply["type"], "error", "{frame}");
        assert_eq!(reply["message"], message, "{frame}");
    }
    assert!(std::path::Path::new(&outside).exists());
    let list = desk
        .request(json!({"op":"requirement_list"}))
        .await
        .unwrap();
    assert_eq!(list["requirements"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn proposals_accepted_become_ideas_and_declined_ones_are_deleted() {
    let env = TestHome::new();
    seed(&env);
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let decided = desk
        .request(json!({"op":"requirement_proposal","requirement":"R-2","accept":true}))
        .await
        .unwrap();
    assert_eq!(decided["type"], "requirement_proposal_decided");
    assert_eq!(decided["accept"], true);
    let list = broadcast(&mut desk).await;
    assert_eq!(find(&list, "R-2")["state"], "idea");
    assert_eq!(find(&list, "R-2")["proposal"], Value::Null);
    desk.request(json!({"op":"requirement_update","requirement":"R-2","state":"proposed"}))
        .await
        .unwrap();
    broadcast(&mut desk).await;
    desk.request(json!({"op":"requirement_proposal","requirement":"R-2","accept":false}))
        .await
        .unwrap();
    let list = broadcast(&mut desk).await;
    assert!(
        list["requirements"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["id"] != "R-2")
    );
}
