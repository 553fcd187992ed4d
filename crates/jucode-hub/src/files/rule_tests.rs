//! The escape matrix of the files rule: `..`, links in and out, a link swapped between the
//! check and the open, hard links, credential paths, `~` forms and odd bytes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::symlink;
use std::path::PathBuf;

use super::rule::{Rule, Scope};
use super::{FilesError, credentials};

struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    rule: Rule,
}

/// A home with a project `p`, a folder `other` nobody named, `~/.ssh` and a jucode home.
fn world(project_is_home: bool) -> World {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let jucode = root.join(".jucode");
    for d in [
        root.join("p/sub"),
        root.join("other"),
        root.join(".ssh"),
        jucode.join("daemon"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(root.join("p/a.txt"), "a").unwrap();
    std::fs::write(root.join("p/sub/f.txt"), "inside").unwrap();
    std::fs::write(root.join("other/f.txt"), "outside").unwrap();
    std::fs::write(root.join(".ssh/id_ed25519"), "KEY").unwrap();
    std::fs::write(jucode.join("auth.json"), "{}").unwrap();
    std::fs::write(jucode.join("daemon/token"), "t").unwrap();
    let known = if project_is_home {
        vec![root.clone()]
    } else {
        vec![root.join("p"), root.join("gone")]
    };
    let rule = Rule::new(&root, &known, &credentials(&jucode, &root));
    World {
        _tmp: tmp,
        root,
        rule,
    }
}

impl World {
    fn read(&self, path: &str) -> Result<PathBuf, FilesError> {
        self.open(path, Scope::Known)
    }

    fn open(&self, path: &str, scope: Scope) -> Result<PathBuf, FilesError> {
        let real = self.rule.check("fs_read", path, scope)?;
        self.rule.open("fs_read", path, &real, scope)?;
        Ok(real)
    }

    fn at(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }
}

fn outside(r: Result<PathBuf, FilesError>) -> bool {
    matches!(r, Err(FilesError::Outside { .. }))
}

fn secret(r: Result<PathBuf, FilesError>) -> bool {
    matches!(r, Err(FilesError::Credentials { .. }))
}

#[test]
fn dot_dot_and_home_forms() {
    let w = world(false);
    assert_eq!(w.read("~/p/a.txt").unwrap(), w.root.join("p/a.txt"));
    assert_eq!(
        w.read(&w.at("p/sub/../a.txt")).unwrap(),
        w.root.join("p/a.txt")
    );
    assert!(outside(w.read("~/p/../other/f.txt")));
    assert!(outside(w.read(&w.at("p/sub/../../other/f.txt"))));
    assert!(outside(w.read("~/p/../../../../../../etc/passwd")));
    assert!(outside(w.read("~")));
    assert!(outside(w.read("~/")));
    // `~user` is not expanded: it is a relative path.
    assert!(matches!(w.read("~root/x"), Err(FilesError::Path(_))));
    assert!(matches!(w.read("p/a.txt"), Err(FilesError::Path(_))));
    assert!(matches!(w.read(""), Err(FilesError::Path(_))));
    // Browsing folders reaches all of home, and no further.
    assert!(w.open("~", Scope::Home).is_ok());
    assert!(w.open("~/other", Scope::Home).is_ok());
    assert!(outside(w.open("/", Scope::Home)));
    assert!(outside(w.open("~/..", Scope::Home)));
    let e = w.open("/", Scope::Home).unwrap_err().to_string();
    assert_eq!(e, "fs_read: / is outside the home directory");
}

#[test]
fn links_are_judged_by_where_they_lead() {
    let w = world(false);
    symlink(w.root.join("other/f.txt"), w.root.join("p/out.txt")).unwrap();
    symlink(w.root.join("other"), w.root.join("p/outdir")).unwrap();
    symlink(w.root.join(".ssh"), w.root.join("p/keys")).unwrap();
    symlink(w.root.join(".jucode/auth.json"), w.root.join("p/auth")).unwrap();
    symlink(w.root.join("p/sub/f.txt"), w.root.join("other/in.txt")).unwrap();
    symlink("a.txt", w.root.join("p/rel.txt")).unwrap();
    symlink("nowhere", w.root.join("p/dangling")).unwrap();
    assert!(outside(w.read("~/p/out.txt")));
    assert!(outside(w.read("~/p/outdir/f.txt")));
    assert!(secret(w.read("~/p/keys/id_ed25519")));
    assert!(secret(w.read("~/p/keys")));
    assert!(secret(w.read("~/p/auth")));
    // A link from outside into the project leads inside: allowed.
    assert_eq!(
        w.read("~/other/in.txt").unwrap(),
        w.root.join("p/sub/f.txt")
    );
    assert_eq!(w.read("~/p/rel.txt").unwrap(), w.root.join("p/a.txt"));
    assert!(matches!(
        w.read("~/p/dangling"),
        Err(FilesError::Missing { .. })
    ));
}

#[test]
fn a_link_swapped_in_between_the_check_and_the_open_is_caught() {
    let w = world(false);
    let path = w.at("p/sub/f.txt");
    let real = w.rule.check("fs_read", &path, Scope::Known).unwrap();
    // The folder is swapped for a link to a folder outside, where a file of the same name is.
    std::fs::rename(w.root.join("p/sub"), w.root.join("p/sub.old")).unwrap();
    symlink(w.root.join("other"), w.root.join("p/sub")).unwrap();
    let e = w
        .rule
        .open("fs_read", &path, &real, Scope::Known)
        .unwrap_err();
    assert!(matches!(e, FilesError::Outside { .. }), "{e}");
    // Swapped for a link to the credentials: refused as credentials.
    std::fs::remove_file(w.root.join("p/sub")).unwrap();
    symlink(w.root.join(".ssh"), w.root.join("p/sub")).unwrap();
    std::fs::write(w.root.join(".ssh/f.txt"), "x").unwrap();
    assert!(secret(
        w.rule
            .open("fs_read", &path, &real, Scope::Known)
            .map(|_| real.clone())
    ));
}

#[test]
fn a_hard_link_to_a_credential_file_is_refused() {
    let w = world(false);
    std::fs::hard_link(
        w.root.join(".ssh/id_ed25519"),
        w.root.join("p/innocent.txt"),
    )
    .unwrap();
    std::fs::hard_link(
        w.root.join(".jucode/daemon/token"),
        w.root.join("p/sub/t.txt"),
    )
    .unwrap();
    // A hard link to an ordinary file is an ordinary file.
    std::fs::hard_link(w.root.join("other/f.txt"), w.root.join("p/twin.txt")).unwrap();
    let e = w.read("~/p/innocent.txt").unwrap_err();
    assert_eq!(
        e.to_string(),
        "fs_read: ~/p/innocent.txt holds credentials and is never read"
    );
    assert!(secret(w.read("~/p/sub/t.txt")));
    assert!(w.read("~/p/twin.txt").is_ok());
}

#[test]
fn credentials_are_refused_even_when_home_is_a_project() {
    let w = world(true);
    assert!(w.read("~/other/f.txt").is_ok());
    for p in [
        "~/.ssh",
        "~/.ssh/id_ed25519",
        "~/.ssh/../.ssh/id_ed25519",
        "~/.jucode/auth.json",
        "~/.jucode/daemon",
        "~/.jucode/daemon/token",
    ] {
        assert!(secret(w.read(p)), "{p}");
        assert!(secret(w.open(p, Scope::Home)), "{p}");
    }
    assert!(w.read("~/.jucode").is_ok());
}

#[test]
fn odd_bytes_in_names() {
    let w = world(false);
    std::fs::write(w.root.join("p/new\nline.txt"), "n").unwrap();
    std::fs::write(w.root.join("p/sp ace & <b>.txt"), "s").unwrap();
    assert!(w.read("~/p/new\nline.txt").is_ok());
    assert!(w.read("~/p/sp ace & <b>.txt").is_ok());
    assert!(matches!(w.read("~/p/a.txt\0"), Err(FilesError::Path(_))));
    assert!(matches!(
        w.read("~/p/\0/../a.txt"),
        Err(FilesError::Path(_))
    ));
    // A name the client cannot spell (not UTF-8) does not exist under any spelling it sends.
    use std::os::unix::ffi::OsStrExt as _;
    let odd = std::ffi::OsStr::from_bytes(b"bad\xff.txt");
    std::fs::write(w.root.join("p").join(odd), "b").unwrap();
    assert!(matches!(
        w.read("~/p/bad\u{fffd}.txt"),
        Err(FilesError::Missing { .. })
    ));
}
