//! The `upload` op's chunks from a few connections, parsed as the server parses a frame and
//! handed to the hub's decoding and reassembly (`UploadDesk`) in a folder of their own, against
//! a model of what each upload received. The input is a list of records
//! `[ctl][len: u8][payload]`: ctl bits 0-1 the connection (3 is one that has gone), bit 2 a
//! later chunk (else a first one), bit 3 `last`, bits 4-5 the offset (right, one past, one
//! short, none), bit 6 data sent as given instead of base64. A first chunk's payload is
//! `[name len][name][data]`, a later one's `[which upload][data]`.
//!
//! Asserted: a chunk is taken only for an upload its own connection started and still holds,
//! at exactly the bytes received so far; the sizes reported and the files written hold exactly
//! the bytes taken, in order; nothing is written outside the uploads folder.
#![no_main]

use std::collections::HashMap;
use std::path::Path;

use base64::Engine as _;
use jucode_hub::{ClientId, UploadDesk};
use jucode_protocol::ClientFrame;
use jucode_protocol::daemon::{DaemonEvent, DaemonOp};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

#[path = "common/scratch.rs"]
mod scratch;

/// What the model knows of one upload.
struct Up {
    client: u64,
    bytes: Vec<u8>,
    /// Finished, abandoned or failed: every later chunk must be refused.
    over: bool,
}

/// The hub's sweep at a start: gone connections' uploads, and the starter's oldest beyond 7.
fn sweep(ups: &mut HashMap<String, Up>, order: &[String], client: u64) {
    for up in ups.values_mut() {
        if up.client == 3 {
            up.over = true;
        }
    }
    let mine: Vec<&String> = order
        .iter()
        .filter(|id| ups.get(*id).is_some_and(|u| !u.over && u.client == client))
        .collect();
    let drop = mine.len().saturating_sub(7);
    let gone: Vec<String> = mine.into_iter().take(drop).cloned().collect();
    for id in gone {
        if let Some(up) = ups.get_mut(&id) {
            up.over = true;
        }
    }
}

/// The finished file holds exactly what was taken, inside the uploads folder.
fn check_file(dir: &Path, path: &str, bytes: &[u8]) {
    let path = Path::new(path);
    assert_eq!(
        path.parent().and_then(Path::parent),
        Some(dir),
        "an upload outside its folder: {path:?}"
    );
    assert_eq!(std::fs::read(path).ok().as_deref(), Some(bytes));
}

/// Everything on disk is `uploads/<date>/<file>`; each is removed once checked, so the next
/// input starts in an empty folder without a second walk over the tree.
fn check_and_clear(root: &Path) {
    let Ok(top) = std::fs::read_dir(root) else {
        return;
    };
    for entry in top.flatten() {
        assert_eq!(entry.file_name(), "uploads", "written outside: {entry:?}");
        for day in std::fs::read_dir(entry.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            assert!(
                day.path().is_dir() && day.file_name().len() == 10,
                "{day:?}"
            );
            for file in std::fs::read_dir(day.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let kind = file.file_type().ok();
                assert!(
                    kind.is_some_and(|k| k.is_file()),
                    "not a plain file: {file:?}"
                );
                let _ = std::fs::remove_file(file.path());
            }
            let _ = std::fs::remove_dir(day.path());
        }
        let _ = std::fs::remove_dir(entry.path());
    }
}

/// Whether `dir` is there and holds nothing.
fn is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
}

fuzz_target!(|data: &[u8]| {
    // An empty folder for every input: the last one's check cleared it, and what an input
    // left otherwise (it stopped early) goes here.
    let root = scratch::scratch("upload");
    if !is_empty(root) {
        let _ = std::fs::remove_dir_all(root);
        if std::fs::create_dir_all(root).is_err() {
            return;
        }
    }
    let dir = root.join("uploads");
    let desk = UploadDesk::default();
    let alive = |c: ClientId| c.0 != 3;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut ups: HashMap<String, Up> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut step = 0i64;
    let mut rest = data;
    while let [ctl, len, tail @ ..] = rest {
        let len = usize::from(*len).min(tail.len());
        let (payload, next) = tail.split_at(len);
        rest = next;
        step += 1;
        let client = u64::from(ctl & 3);
        let later = ctl & 4 != 0;
        let last = ctl & 8 != 0;
        let offset_mode = (ctl >> 4) & 3;
        let raw = ctl & 0x40 != 0;
        // Hours apart, so a sequence crosses date folders.
        let Ok(now) = jiff::Timestamp::from_second(1_780_000_000 + step * 3600) else {
            return;
        };
        let (head, body) = match payload.split_first() {
            Some((k, body)) => (*k, body),
            None => (0, payload),
        };
        let mut fields = json!({"op": "upload", "id": step, "last": last});
        let (target, bytes) = if later {
            let id = order
                .get(usize::from(head))
                .cloned()
                .unwrap_or_else(|| format!("u-0-{head}"));
            let size = ups.get(&id).map_or(0, |u| u.bytes.len() as u64);
            let offset = match offset_mode {
                0 => Some(size),
                1 => Some(size + 1),
                2 => size.checked_sub(1),
                _ => None,
            };
            fields["upload"] = json!(id);
            if let Some(offset) = offset {
                fields["offset"] = json!(offset);
            }
            (Some((id, offset)), body)
        } else {
            let k = usize::from(head).min(body.len());
            let (name, bytes) = body.split_at(k);
            fields["name"] = json!(String::from_utf8_lossy(name));
            match offset_mode {
                1 => fields["offset"] = json!(0),
                2 => fields["offset"] = json!(1),
                _ => {}
            }
            (None, bytes)
        };
        let (text, taken) = if raw {
            let text = String::from_utf8_lossy(bytes).into_owned();
            let decoded = b64.decode(&text).ok();
            (text, decoded)
        } else {
            (b64.encode(bytes), Some(bytes.to_vec()))
        };
        fields["data"] = json!(text);
        let Ok(frame) = ClientFrame::parse(&fields.to_string()) else {
            continue;
        };
        let Some(Ok(DaemonOp::Uploads(op))) = DaemonOp::from_frame(&frame) else {
            continue;
        };
        let result = desk.chunk(&dir, now, ClientId(client), op, &alive);
        match (target, result) {
            (None, Ok(event)) => {
                sweep(&mut ups, &order, client);
                let taken = taken.unwrap_or_else(|| panic!("took data that is not base64"));
                let (id, over) = match event {
                    DaemonEvent::UploadPart { upload, size } => {
                        assert!(!last, "a last chunk left {upload} open");
                        assert_eq!(size, taken.len() as u64);
                        (upload, false)
                    }
                    DaemonEvent::Uploaded {
                        upload, path, size, ..
                    } => {
                        assert!(last, "{upload} finished without its last chunk");
                        assert_eq!(size, taken.len() as u64);
                        check_file(&dir, &path, &taken);
                        (upload, true)
                    }
                    other => panic!("a first chunk answered {other:?}"),
                };
                assert!(!ups.contains_key(&id), "upload id {id} given twice");
                order.push(id.clone());
                let up = Up {
                    client,
                    bytes: taken,
                    over,
                };
                ups.insert(id, up);
            }
            (None, Err(message)) => {
                if message.contains("cannot write") {
                    sweep(&mut ups, &order, client);
                }
            }
            (Some((id, offset)), Ok(event)) => {
                let Some(up) = ups.get_mut(&id) else {
                    panic!("took a chunk for {id}, never started");
                };
                assert!(!up.over, "took a chunk for {id}, which is over");
                assert_eq!(
                    up.client, client,
                    "took another connection's chunk for {id}"
                );
                assert_eq!(
                    offset,
                    Some(up.bytes.len() as u64),
                    "took a chunk for {id} off the bytes received"
                );
                let taken = taken.unwrap_or_else(|| panic!("took data that is not base64"));
                up.bytes.extend_from_slice(&taken);
                match event {
                    DaemonEvent::UploadPart { size, .. } => {
                        assert!(!last, "a last chunk left {id} open");
                        assert_eq!(size, up.bytes.len() as u64);
                    }
                    DaemonEvent::Uploaded { path, size, .. } => {
                        assert!(last, "{id} finished without its last chunk");
                        assert_eq!(size, up.bytes.len() as u64);
                        check_file(&dir, &path, &up.bytes);
                        up.over = true;
                    }
                    other => panic!("a later chunk answered {other:?}"),
                }
            }
            (Some((id, _)), Err(message)) => {
                if message.contains("cannot write")
                    && let Some(up) = ups.get_mut(&id)
                {
                    up.over = true;
                }
            }
        }
    }
    check_and_clear(root);
});
