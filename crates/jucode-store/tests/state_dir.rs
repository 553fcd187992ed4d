//! State directory: layout, lock, token.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::Path;

use jucode_store::{StateDir, StoreError};

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[cfg(unix)]
fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn open_creates_home_and_a_private_daemon_dir() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("nested").join(".jucode");
    let state = StateDir::open(&home).unwrap();
    assert_eq!(state.home(), home);
    assert_eq!(state.daemon_dir(), home.join("daemon"));
    assert_eq!(
        state.path("runs.jsonl"),
        home.join("daemon").join("runs.jsonl")
    );
    assert_eq!(state.token_path(), home.join("daemon").join("token"));
    assert!(state.daemon_dir().is_dir());
    #[cfg(unix)]
    assert_eq!(mode(state.daemon_dir()), 0o700);
}

#[test]
fn second_open_is_locked_until_the_first_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let first = StateDir::open(dir.path()).unwrap();

    let err = StateDir::open(dir.path()).unwrap_err();
    let lock_path = dir.path().join("daemon").join("lock");
    match &err {
        StoreError::Locked { path } => assert_eq!(path, &lock_path),
        other => panic!("expected Locked, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        format!("another jucode daemon is using {}", lock_path.display())
    );

    drop(first);
    let again = StateDir::open(dir.path()).unwrap();
    assert!(matches!(
        StateDir::open(dir.path()),
        Err(StoreError::Locked { .. })
    ));
    drop(again);
}

#[test]
fn token_is_created_once_private_and_stable() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open(dir.path()).unwrap();
    assert!(!state.token_path().exists());

    let token = state.load_or_create_token().unwrap();
    assert_eq!(token.len(), 64);
    assert!(
        token
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "not lowercase hex"
    );
    #[cfg(unix)]
    assert_eq!(mode(&state.token_path()), 0o600);
    assert_eq!(
        fs::read_to_string(state.token_path()).unwrap(),
        format!("{token}\n")
    );

    assert_eq!(state.load_or_create_token().unwrap(), token);
    drop(state);
    let state = StateDir::open(dir.path()).unwrap();
    assert_eq!(state.load_or_create_token().unwrap(), token);

    // No temporary files left next to it.
    let names: Vec<_> = fs::read_dir(state.daemon_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, ["lock", "token"], "{names:?}");
}

#[test]
fn two_homes_get_different_tokens() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let ta = StateDir::open(a.path())
        .unwrap()
        .load_or_create_token()
        .unwrap();
    let tb = StateDir::open(b.path())
        .unwrap()
        .load_or_create_token()
        .unwrap();
    assert_ne!(ta, tb);
}

#[cfg(unix)]
#[test]
fn readable_token_is_refused_without_revealing_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open(dir.path()).unwrap();
    let token = state.load_or_create_token().unwrap();
    let path = state.token_path();

    for bad in [0o644, 0o640, 0o604, 0o660] {
        chmod(&path, bad);
        let err = state.load_or_create_token().unwrap_err();
        match &err {
            StoreError::InsecurePermissions { path: p, mode } => {
                assert_eq!(p, &path);
                assert_eq!(*mode, bad);
            }
            other => panic!("expected InsecurePermissions, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains(&format!("{bad:04o}")), "{msg}");
        assert!(!msg.contains(&token), "message leaks the token");
        assert!(
            !format!("{err:?}").contains(&token),
            "Debug leaks the token"
        );
    }
    assert_eq!(
        StoreError::InsecurePermissions {
            path: path.clone(),
            mode: 0o644
        }
        .to_string(),
        format!(
            "{} is readable by others (mode 0644); run chmod 600 {}",
            path.display(),
            path.display()
        )
    );

    chmod(&path, 0o400);
    assert_eq!(state.load_or_create_token().unwrap(), token);
}

#[cfg(unix)]
#[test]
fn token_file_whitespace_is_trimmed_and_bad_contents_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open(dir.path()).unwrap();
    let path = state.token_path();
    let good = "0123456789abcdef".repeat(4);

    let write = |contents: &str| {
        fs::write(&path, contents).unwrap();
        chmod(&path, 0o600);
    };

    write(&format!("{good}\n\n  \t\r\n"));
    assert_eq!(state.load_or_create_token().unwrap(), good);

    let secretish = "zz".repeat(32);
    for bad in ["", "\n", "   \n", &secretish, "abc123\n"] {
        write(bad);
        let err = state.load_or_create_token().unwrap_err();
        assert!(
            matches!(&err, StoreError::InvalidToken { path: p, .. } if p == &path),
            "{bad:?}: {err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        if !bad.trim().is_empty() {
            assert!(!msg.contains(bad.trim()), "message quotes the file: {msg}");
        }
        // A bad file is reported, never silently replaced.
        assert_eq!(fs::read_to_string(&path).unwrap(), bad);
    }
}

#[test]
fn open_log_lives_in_the_daemon_dir() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open(dir.path()).unwrap();
    {
        let (mut log, existing) = state.open_log::<u32>("numbers.jsonl").unwrap();
        assert!(existing.is_empty());
        assert_eq!(log.path(), state.path("numbers.jsonl"));
        log.append_all(&[1u32, 2, 3]).unwrap();
    }
    let (_log, got) = state.open_log::<u32>("numbers.jsonl").unwrap();
    assert_eq!(got, [1, 2, 3]);
}

#[test]
fn temporary_files_left_by_interrupted_writes_are_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open(dir.path()).unwrap();
    jucode_store::write_json_atomic(&state.path("settings.json"), &"kept").unwrap();
    drop(state);
    let daemon = dir.path().join("daemon");
    // What a SIGKILL between create and rename leaves: tempfile's `.tmp` + random name.
    fs::write(daemon.join(".tmpA1b2C3"), b"{\"half\":").unwrap();
    fs::write(daemon.join(".tmpzzzzzz"), b"").unwrap();
    // Not ours to remove: a directory and a symlink of that shape, and other names.
    fs::create_dir(daemon.join(".tmpdir0")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(daemon.join("settings.json"), daemon.join(".tmplink")).unwrap();
    fs::write(daemon.join("notes.tmp"), b"x").unwrap();

    let state = StateDir::open(dir.path()).unwrap();
    let mut names: Vec<_> = fs::read_dir(state.daemon_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut expected = vec![".tmpdir0", "lock", "notes.tmp", "settings.json"];
    #[cfg(unix)]
    expected.insert(1, ".tmplink");
    assert_eq!(names, expected);
    let kept: Option<String> = jucode_store::read_json(&state.path("settings.json")).unwrap();
    assert_eq!(kept.as_deref(), Some("kept"));
}
