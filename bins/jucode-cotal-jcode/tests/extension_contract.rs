//! The manager extension (`extension/cotal-jcode`) and the connector agree on
//! what they share: where a seat's private home is, what its resume record
//! holds, and how run turns ride a Cotal-owned turn. Each side replays the
//! same fixtures under `extension/cotal-jcode/test/fixtures/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use jucode_cotal::runturn::{Ledger, RunTurn};
use jucode_jcode::fork::ResumeRecord;
use jucode_jcode::home::PrivateHome;
use serde_json::Value;

fn fixture(name: &str) -> Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../extension/cotal-jcode/test/fixtures")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

#[test]
fn the_extension_derives_the_private_home_the_connector_makes() {
    let vectors = fixture("seat-homes.json");
    for v in vectors.as_array().unwrap() {
        let ws = tempfile::tempdir().unwrap();
        let (space, name) = (v["space"].as_str().unwrap(), v["name"].as_str().unwrap());
        let home = PrivateHome::prepare(ws.path(), space, name).unwrap();
        let want = ws
            .path()
            .join(".cotal/jcode")
            .join(v["leaf"].as_str().unwrap());
        assert_eq!(home.root, want, "{space}/{name}");
        assert_eq!(home.resume_record(), want.join("cotal-resume.json"));
    }
}

#[test]
fn the_resume_record_has_the_fields_the_extension_declares() {
    let sample = fixture("resume-record.json");
    let rec: ResumeRecord = serde_json::from_value(sample.clone()).unwrap();
    // What the connector writes is exactly the sample's shape, field for field.
    assert_eq!(serde_json::to_value(&rec).unwrap(), sample);
    let untitled = ResumeRecord { title: None, ..rec };
    assert_eq!(
        serde_json::to_value(&untitled).unwrap()["title"],
        Value::Null
    );
}

#[test]
fn run_turns_replay_the_extensions_scenario() {
    let steps = fixture("run-turns.json")["steps"]
        .as_array()
        .unwrap()
        .clone();
    let mut l = Ledger::default();
    let ids = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    for (i, s) in steps.iter().enumerate() {
        let at = format!("step {i} ({})", s["op"]);
        let send = || s["send"].as_u64().unwrap();
        match s["op"].as_str().unwrap() {
            "offer" => {
                let t: RunTurn = serde_json::from_value(s["turn"].clone()).unwrap();
                assert_eq!(l.offer(t), s["expect"].as_bool().unwrap(), "{at}");
            }
            "carry" => assert_eq!(l.carry(send()).as_deref(), s["text"].as_str(), "{at}"),
            "accepted" => assert_eq!(l.accepted(send()), ids(&s["turns"]), "{at}"),
            "notAccepted" => l.not_accepted(send()),
            "yield" => assert_eq!(
                l.yield_refusal(s["turn"].as_str().unwrap()).as_deref(),
                s["refusal"].as_str(),
                "{at}"
            ),
            "settle" => l.settle(s["turn"].as_str().unwrap()),
            "openShown" => assert_eq!(l.open_shown(), ids(&s["turns"]), "{at}"),
            "unshown" => assert_eq!(l.unshown(), ids(&s["turns"]), "{at}"),
            other => panic!("unknown step {other}"),
        }
    }
}

#[tokio::test]
async fn the_seat_takes_the_run_turn_frame_the_extension_builds() {
    let f = fixture("run-turn-frame.json");
    let dir = tempfile::tempdir().unwrap();
    let cfg = jucode_cotal::config::ControlConfig {
        socket: dir.path().join("c.sock"),
        token: f["token"].as_str().unwrap().to_string(),
    };
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let (turns_tx, mut turns) = tokio::sync::mpsc::unbounded_channel();
    let task = jucode_cotal::control::serve(&cfg, tx, turns_tx).unwrap();
    let reply = jucode_cotal::control::request(&cfg.socket, &f["frame"])
        .await
        .unwrap();
    assert_eq!(reply.as_ref(), Some(&f["reply"]));
    let want: RunTurn = serde_json::from_value(f["turn"].clone()).unwrap();
    assert_eq!(turns.recv().await.unwrap(), want);
    task.abort();
}
