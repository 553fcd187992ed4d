//! `fs_image` on the real daemon: an image inside a session's directory comes back as a data
//! URL, to a local client and a paired device alike; paths outside the known directories,
//! credentials, links leading out and files that are not images are refused with clear errors.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_testsupport::TestHome;
use serde_json::json;

/// The smallest PNG header the daemon recognises (it reads the type from the bytes).
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01";

#[tokio::test]
async fn an_image_in_a_known_directory_comes_back_as_a_data_url_and_nothing_else_does() {
    let env = TestHome::new();
    let project = env.project("app");
    std::fs::write(project.join("shot.png"), PNG).unwrap();
    std::fs::write(project.join("notes.png"), b"<svg onload=alert(1)>").unwrap();
    let outside = env.project("elsewhere");
    std::fs::write(outside.join("private.png"), PNG).unwrap();
    std::os::unix::fs::symlink(outside.join("private.png"), project.join("link.png")).unwrap();
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    // Before any session or project names it, the directory is not known.
    let path = project.join("shot.png").display().to_string();
    let e = desk
        .request(json!({"op":"fs_image","path":path}))
        .await
        .unwrap();
    assert_eq!(e["type"], "error", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("outside the directories"),
        "{e}"
    );
    desk.start_session(&project).await.unwrap();

    let mut phone = daemon.paired_device(&mut desk).await.unwrap();
    for client in [&mut desk, &mut phone] {
        let r = client
            .request(json!({"op":"fs_image","path":path}))
            .await
            .unwrap();
        assert_eq!(r["type"], "fs_image", "{r}");
        assert_eq!(r["path"], path);
        let data = r["data"].as_str().unwrap();
        assert!(
            data.starts_with("data:image/png;base64,iVBORw0KGgo"),
            "{data}"
        );
    }

    let token = env.home().join("daemon").join("token");
    for (path, message) in [
        (
            outside.join("private.png").display().to_string(),
            "outside the directories".to_string(),
        ),
        (
            project.join("link.png").display().to_string(),
            "outside the directories".to_string(),
        ),
        (
            project.join("notes.png").display().to_string(),
            "is not a png, jpeg, gif or webp image".to_string(),
        ),
        (
            project.join("missing.png").display().to_string(),
            "does not exist".to_string(),
        ),
        (
            "shot.png".to_string(),
            "is not an absolute path".to_string(),
        ),
        (token.display().to_string(), "holds credentials".to_string()),
    ] {
        let r = desk
            .request(json!({"op":"fs_image","path":path}))
            .await
            .unwrap();
        assert_eq!(r["type"], "error", "{path}: {r}");
        let text = r["message"].as_str().unwrap();
        assert!(text.contains(&message), "{path}: {text}");
        assert!(!text.contains("base64"), "{text}");
    }
    let r = desk.request(json!({"op":"fs_image"})).await.unwrap();
    assert_eq!(r["type"], "error");
    assert!(
        r["message"].as_str().unwrap().starts_with("fs_image: "),
        "{r}"
    );
}

#[tokio::test]
async fn credentials_are_never_read_even_inside_a_known_directory() {
    let env = TestHome::new();
    // A project at the user's home makes everything under it known, ~/.ssh included.
    let home = env.root().to_path_buf();
    let ssh = home.join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("key.png"), PNG).unwrap();
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    desk.start_session(&home).await.unwrap();
    for path in [ssh.join("key.png"), env.home().join("daemon").join("token")] {
        let r = desk
            .request(json!({"op":"fs_image","path":path.display().to_string()}))
            .await
            .unwrap();
        assert_eq!(r["type"], "error", "{r}");
        assert!(
            r["message"].as_str().unwrap().contains("holds credentials"),
            "{r}"
        );
    }
}
