//! Skills on the real daemon binary against fake sources on loopback: the catalog of both
//! sources, an unreachable marketplace (a warning, Anthropic skills still listed), installs of
//! inline, packaged and Anthropic skills, a tampered package and an escaping one refused with
//! the old install kept, the `claude` backend's directory, bad ids and the device gate.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use jucode_testsupport::fake_skills::{Entry, FakeSkills, sha256_hex, tar_gz};
use jucode_testsupport::{Daemon, TestHome};
use serde_json::{Value, json};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const TOKEN: &str = "skills-test-token";

/// An Anthropic index of one open skill (`tidy`, two files served by `fake`) and one
/// source-available skill (`docs`), written into the test's home; returns its path.
fn anthropic_index(env: &TestHome, fake: &FakeSkills, skill_md: &[u8]) -> std::path::PathBuf {
    let script = b"#!/bin/sh\necho tidy\n";
    fake.serve(
        &format!("/anthropic/{COMMIT}/skills/tidy/SKILL.md"),
        skill_md.to_vec(),
    );
    fake.serve(
        &format!("/anthropic/{COMMIT}/skills/tidy/scripts/tidy.sh"),
        script.to_vec(),
    );
    let good = b"---\nname: tidy\n---\nTidy up.\n";
    let index = json!({
        "repository": "anthropics/skills",
        "commit": COMMIT,
        "skills": [
            {"id": "tidy", "name": "tidy", "description": "Tidies", "license": "Apache-2.0",
             "redistributable": true, "homepage": "https://example.invalid/tidy",
             "files": [
                {"path": "SKILL.md", "size": good.len(), "sha256": sha256_hex(good)},
                {"path": "scripts/tidy.sh", "size": script.len(), "sha256": sha256_hex(script),
                 "executable": true}
             ]},
            {"id": "docs", "name": "docs", "description": "Documents", "license": "Proprietary",
             "redistributable": false, "files": []}
        ]
    });
    let path = env.root().join("anthropic-index.json");
    std::fs::write(&path, index.to_string()).unwrap();
    path
}

/// Signs in to `fake` (as the JuCode API) and points both sources at it.
async fn daemon(env: &TestHome, fake: &FakeSkills, index: Option<&Path>) -> Daemon {
    std::fs::create_dir_all(env.home()).unwrap();
    std::fs::write(
        env.home().join("auth.json"),
        json!({"gateway": {"url": fake.url(), "token": TOKEN}}).to_string(),
    )
    .unwrap();
    let mut config = json!({"anthropic_skills_url": fake.anthropic_url()});
    if let Some(index) = index {
        config["anthropic_skills_index"] = json!(index);
    }
    Daemon::builder(&env.home())
        .config(&config)
        .start()
        .await
        .unwrap()
}

fn row<'a>(catalog: &'a Value, id: &str) -> &'a Value {
    catalog["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("{id} not in {catalog}"))
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_catalog_lists_both_sources_with_the_login_and_marks_installed() {
    let env = TestHome::new();
    let fake = FakeSkills::start().await.unwrap();
    fake.marketplace(json!([
        {"id": "review", "name": "Review", "description": "Reviews code", "tags": ["code"],
         "isDefault": true, "license": "MIT", "homepage": "https://example.invalid/review",
         "content": "---\nname: review\n---\n"},
        {"id": "../evil", "name": "Evil", "content": "x"}
    ]));
    let index = anthropic_index(&env, &fake, b"");
    let installed = env.home().join("skills").join("review");
    std::fs::create_dir_all(&installed).unwrap();
    std::fs::write(installed.join("SKILL.md"), "old").unwrap();
    let d = daemon(&env, &fake, Some(&index)).await;
    let mut c = d.client().await.unwrap();
    let catalog = c.request(json!({"op": "skills_catalog"})).await.unwrap();
    assert_eq!(catalog["type"], "skills_catalog", "{catalog}");
    assert_eq!(catalog["warnings"], json!([]), "{catalog}");
    assert_eq!(
        catalog["installDir"],
        env.home().join("skills").display().to_string()
    );
    assert_eq!(
        row(&catalog, "review"),
        &json!({"id": "review", "name": "Review", "description": "Reviews code",
                "tags": ["code"], "source": "jucode", "isDefault": true, "installed": true,
                "license": "MIT", "redistributable": true,
                "homepage": "https://example.invalid/review"})
    );
    let tidy = row(&catalog, "tidy");
    assert_eq!(tidy["source"], "anthropic");
    assert_eq!(tidy["installed"], false);
    assert_eq!(row(&catalog, "docs")["redistributable"], false);
    // A marketplace row whose id names a path is not listed.
    assert_eq!(catalog["skills"].as_array().unwrap().len(), 3, "{catalog}");
    let market: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|(p, _)| p == "/v1/skills/marketplace")
        .collect();
    assert_eq!(
        market,
        vec![(
            "/v1/skills/marketplace".to_string(),
            Some(format!("Bearer {TOKEN}"))
        )]
    );
    // The claude backend looks in ~/.claude/skills.
    let claude = c
        .request(json!({"op": "skills_catalog", "backend": "claude"}))
        .await
        .unwrap();
    assert_eq!(
        claude["installDir"],
        env.root().join(".claude/skills").display().to_string()
    );
    assert_eq!(row(&claude, "review")["installed"], false);
}

#[tokio::test]
async fn an_unreachable_marketplace_is_a_warning_and_the_bundled_anthropic_skills_are_listed() {
    let env = TestHome::new();
    // A port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let d = Daemon::builder(&env.home())
        .config(&json!({"jucode_api_url": url}))
        .start()
        .await
        .unwrap();
    let mut c = d.client().await.unwrap();
    let catalog = c.request(json!({"op": "skills_catalog"})).await.unwrap();
    let warnings = catalog["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{catalog}");
    assert!(
        warnings[0]
            .as_str()
            .unwrap()
            .starts_with("the JuCode marketplace could not be read"),
        "{catalog}"
    );
    let skills = catalog["skills"].as_array().unwrap();
    assert!(
        skills.iter().all(|s| s["source"] == "anthropic"),
        "{catalog}"
    );
    assert!(row(&catalog, "skill-creator")["redistributable"] == true);
    assert!(row(&catalog, "pdf")["redistributable"] == false);
}

#[tokio::test]
async fn inline_and_packaged_jucode_skills_install_and_replace_the_old_one() {
    let env = TestHome::new();
    let fake = FakeSkills::start().await.unwrap();
    let package = tar_gz(&[
        Entry::Dir("./"),
        Entry::File("./SKILL.md", b"---\nname: pack\n---\nv1\n"),
        Entry::Dir("./scripts"),
        Entry::File("./scripts/run.sh", b"#!/bin/sh\n"),
    ])
    .unwrap();
    fake.serve("/packages/pack-1.tar.gz", package.clone());
    fake.marketplace(json!([
        {"id": "inline", "name": "Inline", "content": "---\nname: inline\n---\nhello\n"},
        {"id": "pack", "name": "Pack",
         "package": {"url": "/packages/pack-1.tar.gz", "sha256": sha256_hex(&package)}}
    ]));
    let d = daemon(&env, &fake, None).await;
    let mut c = d.client().await.unwrap();
    let skills = env.home().join("skills");
    let r = c
        .request(json!({"op": "skill_install", "source": "jucode", "skill": "inline"}))
        .await
        .unwrap();
    assert_eq!(
        r,
        json!({"type": "skill_installed", "id": r["id"],
               "path": skills.join("inline").display().to_string()})
    );
    assert_eq!(
        std::fs::read_to_string(skills.join("inline/SKILL.md")).unwrap(),
        "---\nname: inline\n---\nhello\n"
    );
    std::fs::create_dir_all(skills.join("pack")).unwrap();
    std::fs::write(skills.join("pack/stale.txt"), "from the old install").unwrap();
    let r = c
        .request(json!({"op": "skill_install", "source": "jucode", "skill": "pack"}))
        .await
        .unwrap();
    assert_eq!(r["type"], "skill_installed", "{r}");
    assert!(skills.join("pack/SKILL.md").is_file());
    assert!(skills.join("pack/scripts/run.sh").is_file());
    assert!(
        !skills.join("pack/stale.txt").exists(),
        "the old install is replaced whole"
    );
    assert_eq!(leftovers(&skills), Vec::<String>::new());
    let catalog = c.request(json!({"op": "skills_catalog"})).await.unwrap();
    assert_eq!(row(&catalog, "pack")["installed"], true);
    let r = c
        .request(json!({"op": "skill_install", "source": "jucode", "skill": "nope"}))
        .await
        .unwrap();
    assert_eq!(
        r["message"], "no skill nope in the JuCode marketplace",
        "{r}"
    );
}

#[tokio::test]
async fn a_tampered_or_escaping_package_is_refused_and_the_old_install_kept() {
    let env = TestHome::new();
    let fake = FakeSkills::start().await.unwrap();
    let good = tar_gz(&[Entry::File("SKILL.md", b"new")]).unwrap();
    let tampered = tar_gz(&[Entry::File("SKILL.md", b"tampered")]).unwrap();
    let escaping = tar_gz(&[
        Entry::File("SKILL.md", b"x"),
        Entry::File("../escaped.txt", b"out"),
    ])
    .unwrap();
    let linked = tar_gz(&[
        Entry::File("SKILL.md", b"x"),
        Entry::Symlink("keys", "/root/.ssh"),
    ])
    .unwrap();
    fake.serve("/p/tampered.tar.gz", tampered);
    fake.serve("/p/escaping.tar.gz", escaping.clone());
    fake.serve("/p/linked.tar.gz", linked.clone());
    fake.marketplace(json!([
        {"id": "keep", "name": "Keep",
         "package": {"url": "/p/tampered.tar.gz", "sha256": sha256_hex(&good)}},
        {"id": "escape", "name": "Escape",
         "package": {"url": "/p/escaping.tar.gz", "sha256": sha256_hex(&escaping)}},
        {"id": "link", "name": "Link",
         "package": {"url": "/p/linked.tar.gz", "sha256": sha256_hex(&linked)}}
    ]));
    let skills = env.home().join("skills");
    std::fs::create_dir_all(skills.join("keep")).unwrap();
    std::fs::write(skills.join("keep/SKILL.md"), "old").unwrap();
    let d = daemon(&env, &fake, None).await;
    let mut c = d.client().await.unwrap();
    let r = c
        .request(json!({"op": "skill_install", "source": "jucode", "skill": "keep"}))
        .await
        .unwrap();
    assert_eq!(r["type"], "error", "{r}");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("checksum does not match"),
        "{r}"
    );
    assert_eq!(
        std::fs::read_to_string(skills.join("keep/SKILL.md")).unwrap(),
        "old"
    );
    let r = c
        .request(json!({"op": "skill_install", "source": "jucode", "skill": "escape"}))
        .await
        .unwrap();
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("a path outside the skill (../escaped.txt)"),
        "{r}"
    );
    assert!(!skills.join("escaped.txt").exists());
    assert!(!skills.join("escape").exists());
    let r = c
        .request(json!({"op": "skill_install", "source": "jucode", "skill": "link"}))
        .await
        .unwrap();
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("not a file or a directory (keys)"),
        "{r}"
    );
    assert!(!skills.join("link").exists());
    assert_eq!(
        leftovers(&skills),
        Vec::<String>::new(),
        "no staged directory is left"
    );
}

#[tokio::test]
async fn an_anthropic_skill_installs_at_the_pinned_commit_into_the_claude_backend() {
    let env = TestHome::new();
    let fake = FakeSkills::start().await.unwrap();
    let index = anthropic_index(&env, &fake, b"---\nname: tidy\n---\nTidy up.\n");
    let d = daemon(&env, &fake, Some(&index)).await;
    let mut c = d.client().await.unwrap();
    let r = c
        .request(
            json!({"op": "skill_install", "source": "anthropic", "skill": "tidy",
                        "backend": "claude"}),
        )
        .await
        .unwrap();
    let dir = env.root().join(".claude/skills/tidy");
    assert_eq!(r["path"], dir.display().to_string(), "{r}");
    assert_eq!(
        std::fs::read_to_string(dir.join("SKILL.md")).unwrap(),
        "---\nname: tidy\n---\nTidy up.\n"
    );
    let mode = std::fs::metadata(dir.join("scripts/tidy.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "executable as the index says");
    assert!(!env.home().join("skills/tidy").exists());
    let r = c
        .request(json!({"op": "skill_install", "source": "anthropic", "skill": "docs"}))
        .await
        .unwrap();
    assert_eq!(
        r["message"],
        "docs is source-available: its license does not allow installing a copy"
    );
}

#[tokio::test]
async fn an_anthropic_file_that_differs_from_the_index_is_refused() {
    let env = TestHome::new();
    let fake = FakeSkills::start().await.unwrap();
    // Same size, other bytes: only the checksum tells.
    let index = anthropic_index(&env, &fake, b"---\nname: tidy\n---\nTidy UP.\n");
    let d = daemon(&env, &fake, Some(&index)).await;
    let mut c = d.client().await.unwrap();
    let r = c
        .request(json!({"op": "skill_install", "source": "anthropic", "skill": "tidy"}))
        .await
        .unwrap();
    assert_eq!(
        r["message"],
        "tidy: SKILL.md does not match the index's checksum; nothing was installed"
    );
    assert!(!env.home().join("skills/tidy").exists());
    assert_eq!(leftovers(&env.home().join("skills")), Vec::<String>::new());
}

#[tokio::test]
async fn bad_ids_and_paired_devices_are_refused() {
    let env = TestHome::new();
    let fake = FakeSkills::start().await.unwrap();
    let d = daemon(&env, &fake, None).await;
    let mut desk = d.client().await.unwrap();
    for bad in ["../x", "a/b", "..", ""] {
        let r = desk
            .request(json!({"op": "skill_install", "source": "jucode", "skill": bad}))
            .await
            .unwrap();
        assert_eq!(
            r["message"],
            format!("bad skill id {bad:?}: letters, digits, '.', '_' and '-' only"),
            "{r}"
        );
    }
    let r = desk
        .request(json!({"op": "skill_install", "source": "elsewhere", "skill": "x"}))
        .await
        .unwrap();
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .starts_with("skill_install: unknown variant `elsewhere`"),
        "{r}"
    );
    let mut phone = d.paired_device(&mut desk).await.unwrap();
    for op in [
        json!({"op": "skills_catalog"}),
        json!({"op": "skill_install", "source": "jucode", "skill": "x"}),
    ] {
        let r = phone.request(op).await.unwrap();
        assert_eq!(r["message"], "only the desktop can install skills", "{r}");
    }
    assert!(
        fake.requests().is_empty(),
        "nothing was fetched for refused ops"
    );
}
