//! Whole-file JSON state: atomic replace and read back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use jucode_store::{StoreError, read_json, write_atomic, write_json_atomic};

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn only_file_is(dir: &Path, name: &str) {
    let names: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, [name], "temporary files left behind");
}

#[test]
fn write_then_read_round_trips_and_is_private() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let mut value = BTreeMap::new();
    value.insert("sessions".to_string(), vec![1u32, 2, 3]);

    write_json_atomic(&path, &value).unwrap();
    let back: Option<BTreeMap<String, Vec<u32>>> = read_json(&path).unwrap();
    assert_eq!(back, Some(value.clone()));
    #[cfg(unix)]
    assert_eq!(mode(&path), 0o600);

    // Replacing keeps it private even if the old file was not.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    }
    value.insert("other".to_string(), vec![]);
    write_json_atomic(&path, &value).unwrap();
    assert_eq!(read_json(&path).unwrap(), Some(value));
    #[cfg(unix)]
    assert_eq!(mode(&path), 0o600);
    only_file_is(dir.path(), "state.json");
}

#[test]
fn read_json_of_a_missing_file_is_none() {
    let dir = tempfile::tempdir().unwrap();
    let got: Option<u32> = read_json(&dir.path().join("absent.json")).unwrap();
    assert_eq!(got, None);
}

#[test]
fn read_json_of_bad_json_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    fs::write(&path, b"{\"half\":").unwrap();
    let err = read_json::<serde_json::Value>(&path).unwrap_err();
    assert!(
        matches!(&err, StoreError::Json { path: p, .. } if p == &path),
        "{err:?}"
    );
    assert!(err.to_string().contains(&path.display().to_string()));
}

#[test]
fn write_atomic_sets_the_requested_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    write_atomic(&path, b"first", 0o640).unwrap();
    write_atomic(&path, b"second", 0o640).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"second");
    #[cfg(unix)]
    assert_eq!(mode(&path), 0o640);
    only_file_is(dir.path(), "notes.txt");
}

#[test]
fn write_atomic_into_a_missing_dir_is_an_io_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let err = write_atomic(&missing.join("f"), b"x", 0o600).unwrap_err();
    assert!(
        matches!(&err, StoreError::Io { path, .. } if path == &missing),
        "{err:?}"
    );
    assert!(err.to_string().contains(&missing.display().to_string()));
}
