//! `git_status` and `git_diff` on the real daemon, from a local client and a paired device:
//! porcelain codes with renames, a diff with untracked files, one file's diff; a hostile
//! repository's config runs nothing; credentials hard-linked into a repository never show.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use jucode_testsupport::TestHome;
use serde_json::{Value, json};

fn git(dir: &Path, args: &[&str]) {
    jucode_testsupport::git(dir, args).unwrap();
}

fn error_text(reply: &Value) -> &str {
    assert_eq!(reply["type"], "error", "{reply}");
    reply["message"].as_str().unwrap()
}

/// A repository with a commit, then: `a.txt` modified, `added.txt` staged, `old.txt` renamed
/// to `new.txt`, `u.txt` untracked.
fn repo(dir: &Path) {
    std::fs::write(dir.join("a.txt"), "one\ntwo\n").unwrap();
    std::fs::write(dir.join("old.txt"), "moved content\nline two\nline three\n").unwrap();
    std::fs::write(dir.join(".gitignore"), ".jucode-fake/\n").unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "first"]);
    std::fs::write(dir.join("a.txt"), "one\nTWO\n").unwrap();
    std::fs::write(dir.join("added.txt"), "fresh\n").unwrap();
    git(dir, &["add", "added.txt"]);
    git(dir, &["mv", "old.txt", "new.txt"]);
    std::fs::write(dir.join("u.txt"), "untracked <script>\n").unwrap();
}

#[tokio::test]
async fn status_and_diff_of_a_repository_from_a_desk_and_a_phone() {
    let env = TestHome::new();
    let project = env.project("app");
    repo(&project);
    let plain = env.project("plain");
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    let r = desk
        .request(json!({"op":"git_status","path":"~/app"}))
        .await
        .unwrap();
    assert!(error_text(&r).contains("outside the directories"), "{r}");
    desk.start_session(&project).await.unwrap();
    desk.start_session(&plain).await.unwrap();
    let app = project.display().to_string();
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();
    for client in [&mut desk, &mut phone] {
        let r = client
            .request(json!({"op":"git_status","path":"~/app"}))
            .await
            .unwrap();
        assert_eq!(r["type"], "git_status", "{r}");
        assert_eq!(r["repo"], true);
        assert_eq!(r["root"], app);
        assert_eq!(r["branch"], "main");
        assert_eq!(r["truncated"], false);
        let mut files = r["files"].as_array().unwrap().clone();
        files.sort_by_key(|f| f["path"].as_str().unwrap().to_string());
        assert_eq!(
            Value::Array(files),
            json!([
                {"path":"a.txt","status":" M"},
                {"path":"added.txt","status":"A "},
                {"path":"new.txt","status":"R ","from":"old.txt"},
                {"path":"u.txt","status":"??"},
            ])
        );

        let r = client
            .request(json!({"op":"git_diff","path":app}))
            .await
            .unwrap();
        assert_eq!(r["type"], "git_diff", "{r}");
        assert_eq!(r["truncated"], false);
        let diff = r["diff"].as_str().unwrap();
        for want in [
            "diff --git a/a.txt b/a.txt",
            "-two\n+TWO\n",
            "diff --git a/added.txt b/added.txt\nnew file mode 100644",
            "+fresh\n",
            "rename from old.txt\nrename to new.txt",
            "diff --git a/u.txt b/u.txt\nnew file mode 100644\n--- /dev/null\n+++ b/u.txt\n@@ -0,0 +1 @@\n+untracked <script>\n",
        ] {
            assert!(diff.contains(want), "{want:?} missing from\n{diff}");
        }

        let r = client
            .request(json!({"op":"git_diff","path":app,"file":"a.txt"}))
            .await
            .unwrap();
        let one = r["diff"].as_str().unwrap();
        assert_eq!(r["file"], "a.txt");
        assert!(one.starts_with("diff --git a/a.txt b/a.txt\n"), "{one}");
        assert!(!one.contains("added.txt"), "{one}");
        let r = client
            .request(json!({"op":"git_diff","path":app,"file":"u.txt"}))
            .await
            .unwrap();
        assert!(r["diff"].as_str().unwrap().contains("+untracked"), "{r}");

        let r = client
            .request(json!({"op":"git_status","path":"~/plain"}))
            .await
            .unwrap();
        assert_eq!(
            r,
            json!({"type":"git_status","path":plain.display().to_string(),"repo":false,"files":[],"truncated":false,"id":r["id"]})
        );
        let r = client
            .request(json!({"op":"git_diff","path":"~/plain"}))
            .await
            .unwrap();
        assert!(
            error_text(&r).ends_with("is not in a git repository"),
            "{r}"
        );
        for file in ["../plain/x", "/etc/passwd", "", "./a.txt"] {
            let r = client
                .request(json!({"op":"git_diff","path":app,"file":file}))
                .await
                .unwrap();
            assert!(
                error_text(&r).contains("is not a path inside"),
                "{file}: {r}"
            );
        }
    }
}

#[tokio::test]
async fn a_hostile_repository_runs_nothing_and_credentials_never_show() {
    let env = TestHome::new();
    let project = env.project("evil");
    repo(&project);
    let marks = env.root().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let mark = |n: &str| format!("touch {}/{n}", marks.display());
    let config = format!(
        "[core]\n\tfsmonitor = \"{}\"\n\tpager = \"{}\"\n[filter \"evil\"]\n\tclean = \"{}\"\n\tsmudge = \"{}\"\n[diff]\n\texternal = \"{}\"\n[diff \"evil\"]\n\ttextconv = \"{}\"\n",
        mark("fsmonitor"),
        mark("pager"),
        mark("clean"),
        mark("smudge"),
        mark("external"),
        mark("textconv"),
    );
    let mut existing = std::fs::read_to_string(project.join(".git/config")).unwrap();
    existing.push_str(&config);
    std::fs::write(project.join(".git/config"), existing).unwrap();
    std::fs::write(project.join(".gitattributes"), "* filter=evil diff=evil\n").unwrap();
    let ssh = env.root().join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE KEY BYTES\n").unwrap();
    std::fs::hard_link(ssh.join("id_ed25519"), project.join("stolen.txt")).unwrap();
    std::os::unix::fs::symlink(ssh.join("id_ed25519"), project.join("key-link")).unwrap();

    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    desk.start_session(&project).await.unwrap();
    let r = desk
        .request(json!({"op":"git_status","path":"~/evil"}))
        .await
        .unwrap();
    assert_eq!(r["type"], "git_status", "{r}");
    let paths: Vec<&str> = r["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"stolen.txt"), "{paths:?}");
    let r = desk
        .request(json!({"op":"git_diff","path":"~/evil"}))
        .await
        .unwrap();
    assert_eq!(r["type"], "git_diff", "{r}");
    let diff = r["diff"].as_str().unwrap();
    assert!(diff.contains("diff --git a/a.txt b/a.txt"), "{diff}");
    assert!(!diff.contains("PRIVATE KEY"), "{diff}");
    // A link is shown as the path it holds, never as the file it points at.
    assert!(diff.contains("new file mode 120000"), "{diff}");
    let r = desk
        .request(json!({"op":"git_diff","path":"~/evil","file":"stolen.txt"}))
        .await
        .unwrap();
    assert!(!r["diff"].as_str().unwrap().contains("PRIVATE"), "{r}");
    let r = desk
        .request(json!({"op":"fs_list","path":"~/evil"}))
        .await
        .unwrap();
    assert_eq!(r["type"], "fs_list", "{r}");
    let ran: Vec<_> = std::fs::read_dir(&marks)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(ran.is_empty(), "the repository ran {ran:?}");
}

#[tokio::test]
async fn a_diff_past_one_mebibyte_is_cut_at_a_line_end() {
    let env = TestHome::new();
    let project = env.project("big");
    repo(&project);
    let line = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";
    std::fs::write(project.join("huge.txt"), line.repeat(20_000)).unwrap();
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    desk.start_session(&project).await.unwrap();
    let r = desk
        .request(json!({"op":"git_diff","path":"~/big"}))
        .await
        .unwrap();
    assert_eq!(r["type"], "git_diff", "{}", r["type"]);
    assert_eq!(r["truncated"], true);
    let diff = r["diff"].as_str().unwrap();
    assert!(diff.len() <= 1024 * 1024, "{}", diff.len());
    assert!(diff.len() > 1000 * 1024, "{}", diff.len());
    assert!(diff.ends_with('\n'));
    assert!(diff.contains("diff --git a/a.txt b/a.txt"));
}

#[tokio::test]
async fn a_home_that_is_a_repository_never_shows_its_credentials() {
    let env = TestHome::new();
    let home = env.root().to_path_buf();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "OLD SECRET\n").unwrap();
    std::fs::write(home.join(".profile"), "export A=1\n").unwrap();
    std::fs::write(home.join(".gitignore"), ".jucode/\n.jucode-fake/\n").unwrap();
    git(&home, &["init", "-q", "-b", "main"]);
    git(&home, &["add", "."]);
    git(&home, &["commit", "-q", "-m", "dotfiles"]);
    std::fs::write(home.join(".ssh/id_ed25519"), "NEW SECRET\n").unwrap();
    std::fs::write(home.join(".aws/credentials"), "AWS SECRET\n").unwrap();
    std::fs::write(home.join(".profile"), "export A=2\n").unwrap();
    let daemon = env.daemon().await;
    let mut desk = daemon.client().await.unwrap();
    desk.start_session(&home).await.unwrap();
    let r = desk
        .request(json!({"op":"git_status","path":"~"}))
        .await
        .unwrap();
    assert_eq!(r["type"], "git_status", "{r}");
    let text = r.to_string();
    assert!(text.contains(".profile"), "{text}");
    assert!(!text.contains(".ssh") && !text.contains(".aws"), "{text}");
    let r = desk
        .request(json!({"op":"git_diff","path":"~"}))
        .await
        .unwrap();
    let diff = r["diff"].as_str().unwrap();
    assert!(diff.contains("+export A=2"), "{diff}");
    assert!(!diff.contains("SECRET"), "{diff}");
    let r = desk
        .request(json!({"op":"git_diff","path":"~","file":".ssh/id_ed25519"}))
        .await
        .unwrap();
    assert!(!r.to_string().contains("SECRET"), "{r}");
}
