//! `fs_list` and `fs_read` on the real daemon, from a local client and a paired device: a
//! project's entries (folders first, `.git` and git-ignored entries left out), browsing
//! folders under home with `dirs_only`, the start of a file and binary files, and every
//! escape (`..`, links out, hard links and links to credentials, `~` forms, odd bytes)
//! refused with a clear error.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use jucode_testsupport::TestHome;
use serde_json::{Value, json};

fn git(dir: &Path, args: &[&str]) {
    jucode_testsupport::git(dir, args).unwrap();
}

fn names(reply: &Value) -> Vec<String> {
    reply["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect()
}

fn error_text(reply: &Value) -> &str {
    assert_eq!(reply["type"], "error", "{reply}");
    reply["message"].as_str().unwrap()
}

#[tokio::test]
async fn a_project_is_listed_and_read_from_a_desk_and_a_phone() {
    let env = TestHome::new();
    let project = env.project("app");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::create_dir_all(project.join("target/debug")).unwrap();
    std::fs::write(project.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(project.join("README.md"), "# app\n").unwrap();
    std::fs::write(
        project.join(".gitignore"),
        "target/\n*.log\n.jucode-fake/\n",
    )
    .unwrap();
    std::fs::write(project.join("build.log"), "noise").unwrap();
    std::fs::write(project.join("blob.bin"), b"\x7fELF\0\0\x01").unwrap();
    std::fs::write(project.join("big.txt"), "x".repeat(1024 * 1024 + 10)).unwrap();
    git(&project, &["init", "-q"]);
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let app = project.display().to_string();
    let r = desk
        .request(json!({"op":"fs_list","path":app}))
        .await
        .unwrap();
    assert!(error_text(&r).contains("outside the directories"), "{r}");
    desk.start_session(&project).await.unwrap();
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();
    for client in [&mut desk, &mut phone] {
        let r = client
            .request(json!({"op":"fs_list","path":"~/app"}))
            .await
            .unwrap();
        assert_eq!(r["type"], "fs_list", "{r}");
        assert_eq!(r["path"], app);
        assert_eq!(r["git"], true);
        assert_eq!(r["truncated"], false);
        assert_eq!(
            names(&r),
            ["src", ".gitignore", "README.md", "big.txt", "blob.bin"]
        );
        let readme = &r["entries"].as_array().unwrap()[2];
        assert_eq!(readme, &json!({"name":"README.md","dir":false,"size":6}));
        assert_eq!(r["entries"][0], json!({"name":"src","dir":true,"size":0}));

        let r = client
            .request(json!({"op":"fs_read","path":format!("{app}/src/main.rs")}))
            .await
            .unwrap();
        assert_eq!(r["type"], "fs_read", "{r}");
        assert_eq!(r["size"], 13);
        assert_eq!(r["binary"], false);
        assert_eq!(r["truncated"], false);
        assert_eq!(r["text"], "fn main() {}\n");
    }
    let r = desk
        .request(json!({"op":"fs_read","path":"~/app/blob.bin"}))
        .await
        .unwrap();
    assert_eq!(
        (&r["binary"], &r["text"], &r["size"]),
        (&json!(true), &json!(""), &json!(7))
    );
    let r = desk
        .request(json!({"op":"fs_read","path":"~/app/big.txt"}))
        .await
        .unwrap();
    assert_eq!(r["truncated"], true);
    assert_eq!(r["size"], 1024 * 1024 + 10);
    assert_eq!(r["text"].as_str().unwrap().len(), 1024 * 1024);
    let r = desk
        .request(json!({"op":"fs_read","path":"~/app/src"}))
        .await
        .unwrap();
    assert_eq!(error_text(&r), "fs_read: ~/app/src is not a file");
    let r = desk
        .request(json!({"op":"fs_list","path":"~/app/README.md"}))
        .await
        .unwrap();
    assert_eq!(
        error_text(&r),
        "fs_list: ~/app/README.md is not a directory"
    );
    // Inside `.git` the listing is not of a work tree.
    let r = desk
        .request(json!({"op":"fs_list","path":"~/app/.git"}))
        .await
        .unwrap();
    assert_eq!(r["git"], false, "{r}");
}

#[tokio::test]
async fn folders_anywhere_under_home_can_be_browsed_but_not_read() {
    let env = TestHome::new();
    let elsewhere = env.project("elsewhere");
    std::fs::create_dir_all(elsewhere.join("deeper")).unwrap();
    std::fs::write(elsewhere.join("secret.txt"), "s").unwrap();
    std::fs::create_dir_all(env.root().join(".ssh")).unwrap();
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();
    for client in [&mut desk, &mut phone] {
        let r = client
            .request(json!({"op":"fs_list","path":"~","dirs_only":true}))
            .await
            .unwrap();
        assert_eq!(r["type"], "fs_list", "{r}");
        assert_eq!(r["path"], env.root().display().to_string());
        let got = names(&r);
        assert!(got.contains(&"elsewhere".to_string()), "{got:?}");
        // Credential folders are not offered.
        assert!(!got.contains(&".ssh".to_string()), "{got:?}");
        let r = client
            .request(json!({"op":"fs_list","path":"~/elsewhere","dirs_only":true}))
            .await
            .unwrap();
        assert_eq!(r["entries"], json!([{"name":"deeper","dir":true,"size":0}]));
        // Without `dirs_only` the folder is not known; above home nothing is browsed.
        let r = client
            .request(json!({"op":"fs_list","path":"~/elsewhere"}))
            .await
            .unwrap();
        assert!(error_text(&r).contains("outside the directories"));
        let r = client
            .request(json!({"op":"fs_list","path":"/","dirs_only":true}))
            .await
            .unwrap();
        assert_eq!(error_text(&r), "fs_list: / is outside the home directory");
        let r = client
            .request(json!({"op":"fs_list","path":"~/.ssh","dirs_only":true}))
            .await
            .unwrap();
        assert_eq!(
            error_text(&r),
            "fs_list: ~/.ssh holds credentials and is never read"
        );
        let r = client
            .request(json!({"op":"fs_read","path":"~/elsewhere/secret.txt"}))
            .await
            .unwrap();
        assert!(error_text(&r).contains("outside the directories"));
    }
}

#[tokio::test]
async fn every_escape_is_refused() {
    let env = TestHome::new();
    let project = env.project("app");
    let outside = env.project("outside");
    std::fs::write(outside.join("x.txt"), "outside").unwrap();
    let ssh = env.root().join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("id_ed25519"), "KEY").unwrap();
    std::fs::write(project.join("ok.txt"), "ok").unwrap();
    std::fs::write(project.join("new\nline.txt"), "nl").unwrap();
    std::os::unix::fs::symlink(outside.join("x.txt"), project.join("out.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, project.join("outdir")).unwrap();
    std::os::unix::fs::symlink(&ssh, project.join("keys")).unwrap();
    std::fs::hard_link(ssh.join("id_ed25519"), project.join("copy.txt")).unwrap();
    {
        use std::os::unix::ffi::OsStrExt as _;
        let odd = std::ffi::OsStr::from_bytes(b"odd\xff.txt");
        std::fs::write(project.join(odd), "odd").unwrap();
    }
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    desk.start_session(&project).await.unwrap();
    let token = env.home().join("daemon/token").display().to_string();
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();
    for client in [&mut desk, &mut phone] {
        for (path, want) in [
            ("~/app/../outside/x.txt", "outside the directories"),
            ("~/app/out.txt", "outside the directories"),
            ("~/app/outdir/x.txt", "outside the directories"),
            ("~/app/keys/id_ed25519", "holds credentials"),
            ("~/app/copy.txt", "holds credentials"),
            ("~/.ssh/id_ed25519", "holds credentials"),
            (token.as_str(), "holds credentials"),
            ("app/ok.txt", "is not an absolute path"),
            ("~nobody/ok.txt", "is not an absolute path"),
            ("~/app/ok.txt\u{0}", "NUL byte"),
            ("~/app/odd\u{fffd}.txt", "does not exist"),
        ] {
            let r = client
                .request(json!({"op":"fs_read","path":path}))
                .await
                .unwrap();
            let text = error_text(&r);
            assert!(text.contains(want), "{path:?}: {text}");
            assert!(
                !text.contains("KEY") && !text.contains("outside\""),
                "{text}"
            );
        }
        let r = client
            .request(json!({"op":"fs_read","path":"~/app/new\nline.txt"}))
            .await
            .unwrap();
        assert_eq!(r["text"], "nl", "{r}");
        // The listing shows links by their target and leaves the odd name out.
        let r = client
            .request(json!({"op":"fs_list","path":"~/app"}))
            .await
            .unwrap();
        let got = names(&r);
        assert!(!got.iter().any(|n| n.starts_with("odd")), "{got:?}");
        assert!(got.contains(&"new\nline.txt".to_string()), "{got:?}");
        assert_eq!(r["git"], false);
    }
    let r = desk.request(json!({"op":"fs_read"})).await.unwrap();
    assert!(error_text(&r).starts_with("fs_read: "), "{r}");
    let r = desk
        .request(json!({"op":"fs_list","path":"~/app","dirs_only":"yes"}))
        .await
        .unwrap();
    assert!(error_text(&r).starts_with("fs_list: "), "{r}");
}

#[tokio::test]
async fn a_huge_folder_is_listed_up_to_the_cap() {
    let env = TestHome::new();
    let project = env.project("many");
    for i in 0..5010 {
        std::fs::write(project.join(format!("f{i:05}")), "").unwrap();
    }
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    desk.start_session(&project).await.unwrap();
    let r = desk
        .request(json!({"op":"fs_list","path":"~/many"}))
        .await
        .unwrap();
    assert_eq!(r["type"], "fs_list", "{}", r["type"]);
    assert_eq!(r["truncated"], true);
    assert_eq!(r["entries"].as_array().unwrap().len(), 5000);
    // Sorted before the cut: the first files by name are kept.
    let first = r["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["dir"] == false)
        .unwrap();
    assert_eq!(first["name"], "f00000");
}
