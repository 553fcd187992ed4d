#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_protocol::daemon::ops::Area;
use serde_json::json;

use super::*;

const DOC: &str =
    "# Protocol\n\n## Op index\n\n<!-- ops:begin -->\nstale\n<!-- ops:end -->\n\nMore text.\n";

fn spec(name: &'static str, area: Area, gate: Gate, session: SessionUse, built: bool) -> OpSpec {
    OpSpec {
        name,
        area,
        gate,
        session,
        implemented: built,
    }
}

#[test]
fn the_index_has_one_row_per_op_sorted_by_name() {
    let table = [
        spec(
            "watch",
            Area::Sessions,
            Gate::Any,
            SessionUse::Required,
            true,
        ),
        spec(
            "mcp_set",
            Area::Mcp,
            Gate::LocalOnly("no"),
            SessionUse::Optional,
            true,
        ),
        spec(
            "push_test",
            Area::Push,
            Gate::DeviceOnly("no"),
            SessionUse::No,
            true,
        ),
        spec("agent_list", Area::Agents, Gate::Any, SessionUse::No, false),
        // Byte order: `_` (0x5f) sorts before lower-case letters.
        spec("mcpx", Area::Mcp, Gate::Any, SessionUse::No, true),
    ];
    assert_eq!(
        op_index(&table),
        "| op | area | gate | session | available |\n\
         | --- | --- | --- | --- | --- |\n\
         | `agent_list` | agents | any | no | no |\n\
         | `mcp_set` | mcp | local | optional | yes |\n\
         | `mcpx` | mcp | any | no | yes |\n\
         | `push_test` | push | device | no | yes |\n\
         | `watch` | sessions | any | required | yes |\n"
    );
}

#[test]
fn the_index_replaces_only_the_text_between_its_markers() {
    let doc = with_index(DOC, "| new |\n").unwrap();
    assert_eq!(
        doc,
        "# Protocol\n\n## Op index\n\n<!-- ops:begin -->\n| new |\n<!-- ops:end -->\n\nMore text.\n"
    );
    assert_eq!(with_index(&doc, "| new |\n").unwrap(), doc);
    assert!(with_index("no markers", "x").is_err());
    assert!(with_index("<!-- ops:end --> <!-- ops:begin -->", "x").is_err());
}

fn checkout() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join(PROTOCOL_DOC), DOC).unwrap();
    dir
}

#[test]
fn the_check_fails_on_a_drifted_file_and_names_it_and_the_fix() {
    let dir = checkout();
    let root = dir.path();
    let err = check(root).unwrap_err().to_string();
    assert!(
        err.contains(CLIENT_SCHEMA) && err.contains(PROTOCOL_DOC),
        "{err}"
    );
    assert_eq!(write(root).unwrap().len(), 3);
    check(root).unwrap();
    assert!(write(root).unwrap().is_empty());

    // A schema edited by hand.
    let path = root.join(DAEMON_SCHEMA);
    let edited = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"hello\"", "\"hullo\"");
    std::fs::write(&path, edited).unwrap();
    let err = check(root).unwrap_err().to_string();
    assert!(err.contains(DAEMON_SCHEMA), "{err}");
    assert!(!err.contains(CLIENT_SCHEMA), "{err}");
    assert!(err.contains("run `cargo xtask schema`"), "{err}");

    // An index row edited by hand (the area the hand-written index guessed).
    write(root).unwrap();
    let path = root.join(PROTOCOL_DOC);
    let doc = std::fs::read_to_string(&path).unwrap();
    assert!(
        doc.contains("| `item_close` | actions | any | no | yes |"),
        "{doc}"
    );
    let edited = doc.replace("| `item_close` | actions |", "| `item_close` | questions |");
    std::fs::write(&path, edited).unwrap();
    let err = check(root).unwrap_err().to_string();
    assert!(
        err.contains(PROTOCOL_DOC) && !err.contains(DAEMON_SCHEMA),
        "{err}"
    );
}

#[test]
fn the_written_schemas_check_frames_and_say_where_they_are_wrong() {
    let dir = checkout();
    write(dir.path()).unwrap();
    let v = Validators::load(dir.path()).unwrap();
    v.client(&json!({"op": "ping", "id": 1})).unwrap();
    let err = v
        .client(&json!({"op": "session_create", "cwd": 5}))
        .unwrap_err();
    assert!(err.starts_with("/cwd: 5 is not of types"), "{err}");
    let err = v.client(&json!({"id": 1})).unwrap_err();
    assert!(
        err.starts_with("(frame): \"op\" is a required property"),
        "{err}"
    );
    v.daemon(&json!({"type": "pong", "id": 1})).unwrap();
    assert!(
        v.daemon(&json!({"type": "watching", "session": "s"}))
            .is_err()
    );
    assert!(Validators::load(&dir.path().join("nowhere")).is_err());
}
