use super::*;

fn date(s: &str) -> jiff::civil::Date {
    s.parse().unwrap()
}

#[test]
fn the_purge_takes_parts_and_old_days_and_leaves_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let write = |rel: &str| {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"x").unwrap();
        path
    };
    let old = write("2026-01-30/u-1-1-old.txt");
    let edge = write("2026-01-31/u-2-1-edge.txt");
    let recent = write("2026-03-01/u-3-1-new.png");
    let part = write("2026-03-01/u-3-2-half.png.part");
    let requirement = write("requirements/R-1/1.png");
    let odd = write("notes/keep.part");
    // 2026-03-02 is 31 days after 2026-01-30 and 30 after 2026-01-31.
    assert_eq!(purge(dir, date("2026-03-02")), 2);
    assert!(!old.exists() && !old.parent().unwrap().exists());
    assert!(edge.exists(), "30 days old is kept");
    assert!(recent.exists());
    assert!(!part.exists());
    assert!(
        requirement.exists() && odd.exists(),
        "only date folders are swept"
    );
    assert_eq!(purge(&dir.join("none"), date("2026-03-02")), 0);
}

#[test]
fn chunks_are_decoded_within_the_limit() {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    assert_eq!(decode(&b64.encode(b"hello")).unwrap(), b"hello");
    let full = vec![7u8; UPLOAD_CHUNK_BYTES as usize];
    assert_eq!(decode(&b64.encode(&full)).unwrap().len(), full.len());
    let over = vec![7u8; UPLOAD_CHUNK_BYTES as usize + 1];
    assert!(matches!(
        decode(&b64.encode(&over)),
        Err(UploadError::ChunkTooLarge)
    ));
    assert!(matches!(
        decode("not base64!"),
        Err(UploadError::NotBase64(_))
    ));
}

fn op(
    name: Option<&str>,
    upload: Option<&str>,
    offset: Option<u64>,
    data: &[u8],
    last: bool,
) -> UploadsOp {
    use base64::Engine as _;
    UploadsOp::Upload {
        name: name.map(str::to_string),
        upload: upload.map(str::to_string),
        offset,
        data: base64::engine::general_purpose::STANDARD.encode(data),
        last,
    }
}

#[test]
fn the_desk_reassembles_in_order_and_refuses_gaps_overlaps_and_strangers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("uploads");
    let desk = UploadDesk::default();
    let now = jiff::Timestamp::from_second(1_780_000_000).unwrap();
    let alive = |_: ClientId| true;
    let me = ClientId(1);
    let first = desk
        .chunk(
            &dir,
            now,
            me,
            op(Some("a.txt"), None, None, b"hel", false),
            &alive,
        )
        .unwrap();
    let DaemonEvent::UploadPart { upload, size: 3 } = first else {
        panic!("{first:?}");
    };
    let id = Some(upload.as_str());
    // A gap, an overlap and another connection are refused, and change nothing.
    for (client, offset) in [(me, 4), (me, 2), (ClientId(2), 3)] {
        let refused = desk.chunk(
            &dir,
            now,
            client,
            op(None, id, Some(offset), b"lo", false),
            &alive,
        );
        assert!(
            refused.is_err(),
            "offset {offset} from {client:?}: {refused:?}"
        );
    }
    let done = desk
        .chunk(&dir, now, me, op(None, id, Some(3), b"lo", true), &alive)
        .unwrap();
    let DaemonEvent::Uploaded { path, size: 5, .. } = done else {
        panic!("{done:?}");
    };
    assert!(Path::new(&path).starts_with(&dir));
    assert_eq!(std::fs::read(&path).unwrap(), b"hello");
    // Finished: nothing more goes to it.
    assert!(
        desk.chunk(&dir, now, me, op(None, id, Some(5), b"!", true), &alive)
            .is_err()
    );
}
