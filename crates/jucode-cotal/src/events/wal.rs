//! The event WAL: the document of published and pending frames, its per-principal lock and its
//! atomic saves.

use super::*;

/// The event WAL document (v3).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WalDoc {
    pub v: u32,
    #[serde(rename = "gen")]
    pub generation: u64,
    pub space: String,
    pub epoch: u64,
    pub thread_id: String,
    pub principal: String,
    pub frontier: Frontier,
    pub pending: Option<Pending>,
    /// The frames after `pending` that came from the same journal record: all of
    /// a record's frames are written here before the first is published, so a
    /// crash between two of them loses none (the cursor only knows whole records).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queued: Vec<Pending>,
    pub brackets: Brackets,
}

impl WalDoc {
    /// `pending` follows the frontier and `queued` follows `pending`, one frame apart.
    fn check_chain(&self) -> Result<()> {
        let chain = self.pending.iter().chain(self.queued.iter());
        if self.pending.is_none() && !self.queued.is_empty() {
            return Err(Error::Wal("queued frames without a pending one".into()));
        }
        for (next, p) in (self.frontier.seq + 1..).zip(chain) {
            if p.seq != next || p.body["seq"] != json!(p.seq) {
                return Err(Error::Wal(format!(
                    "frame {} is out of sequence (expected {next})",
                    p.seq
                )));
            }
            Cursor::decode(&p.source_cursor)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Frontier {
    pub seq: u64,
    pub last_subject_seq: u64,
    pub source_cursor: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    pub state: String,
    pub id: String,
    pub seq: u64,
    pub source_cursor: String,
    pub body: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_seq: Option<u64>,
    pub brackets: Brackets,
}

fn h16(s: &str) -> String {
    sha256_hex(s.as_bytes())[..16].to_string()
}

fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

fn write_atomic(path: &Path, value: &Value) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| Error::io(dir, e))?;
    let data = serde_json::to_vec(value).map_err(|e| Error::Wal(e.to_string()))?;
    tmp.write_all(&data).map_err(|e| Error::io(path, e))?;
    tmp.as_file().sync_all().map_err(|e| Error::io(path, e))?;
    tmp.persist(path).map_err(|e| Error::io(path, e.error))?;
    fsync_dir(dir)
}

/// The WAL with its per-principal lock.
pub struct Wal {
    pub(super) path: PathBuf,
    subject_path: PathBuf,
    lock_path: PathBuf,
    pub doc: WalDoc,
}

impl Wal {
    /// `<root>/.cotal/events/<h(space)>/<h(principal)>/<h(thread)>/wal.json`.
    pub fn open(root: &Path, space: &str, principal: &Principal, thread: &str) -> Result<Wal> {
        let pdir = root
            .join(".cotal/events")
            .join(h16(space))
            .join(h16(&principal.dot()));
        let tdir = pdir.join(h16(thread));
        std::fs::create_dir_all(&tdir).map_err(|e| Error::io(&tdir, e))?;
        let lock_path = pdir.join(".lock");
        take_lock(&lock_path)?;
        let path = tdir.join("wal.json");
        let subject_path = pdir.join("subject.json");
        // A refused WAL must not keep the lock, or this process could never retry.
        let doc = match load_doc(&path, &subject_path, space, principal, thread) {
            Ok(d) => d,
            Err(e) => {
                let _ = std::fs::remove_file(&lock_path);
                return Err(e);
            }
        };
        let mut wal = Wal {
            path,
            subject_path,
            lock_path,
            doc,
        };
        wal.save()?;
        Ok(wal)
    }

    /// Atomic replace guarded by `gen`: a second writer is detected, never overwritten.
    pub fn save(&mut self) -> Result<()> {
        if let Ok(raw) = std::fs::read(&self.path) {
            let on_disk: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
            if on_disk["gen"]
                .as_u64()
                .is_some_and(|g| g != self.doc.generation)
            {
                return Err(Error::Wal(
                    "a stale writer: the WAL changed under us".into(),
                ));
            }
        }
        self.doc.generation += 1;
        let v = serde_json::to_value(&self.doc).map_err(|e| Error::Wal(e.to_string()))?;
        write_atomic(&self.path, &v)?;
        write_atomic(
            &self.subject_path,
            &json!({"lastSubjectSeq": self.doc.frontier.last_subject_seq}),
        )
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.lock_path);
    }
}

/// Read the WAL document (and the subject frontier), or start a fresh one.
fn load_doc(
    path: &Path,
    subject_path: &Path,
    space: &str,
    principal: &Principal,
    thread: &str,
) -> Result<WalDoc> {
    let subject_seq = match std::fs::read(subject_path) {
        Ok(raw) => serde_json::from_slice::<Value>(&raw)
            .ok()
            .and_then(|v| v["lastSubjectSeq"].as_u64())
            .ok_or_else(|| Error::Wal(format!("{} is corrupt", subject_path.display())))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(Error::io(subject_path, e)),
    };
    let doc = match std::fs::read(path) {
        Ok(raw) => {
            let mut d: WalDoc = serde_json::from_slice(&raw)
                .map_err(|e| Error::Wal(format!("{} is corrupt: {e}", path.display())))?;
            if d.v != 3
                || d.thread_id != thread
                || d.principal != principal.dot()
                || d.space != space
            {
                return Err(Error::Wal(format!(
                    "{} belongs to another stream",
                    path.display()
                )));
            }
            Cursor::decode(&d.frontier.source_cursor)?;
            d.check_chain()?;
            d.frontier.last_subject_seq = d.frontier.last_subject_seq.max(subject_seq);
            d.epoch += 1;
            d
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => WalDoc {
            v: 3,
            generation: 0,
            space: space.to_string(),
            epoch: 1,
            thread_id: thread.to_string(),
            principal: principal.dot(),
            frontier: Frontier {
                seq: 0,
                last_subject_seq: subject_seq,
                source_cursor: Cursor::default().encode(),
            },
            pending: None,
            queued: Vec::new(),
            brackets: Brackets::default(),
        },
        Err(e) => return Err(Error::io(path, e)),
    };
    Ok(doc)
}

fn take_lock(path: &Path) -> Result<()> {
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().to_string())
        .unwrap_or_default();
    for _ in 0..2 {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(mut f) => {
                let body = json!({"pid": std::process::id(), "host": host, "token": crate::util::random_token(16), "acquiredAt": now_ms()});
                f.write_all(body.to_string().as_bytes())
                    .and_then(|_| f.sync_all())
                    .map_err(|e| Error::io(path, e))?;
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let owner: Value = std::fs::read(path)
                    .ok()
                    .and_then(|r| serde_json::from_slice(&r).ok())
                    .unwrap_or(Value::Null);
                let pid = owner["pid"].as_i64().unwrap_or(0);
                let same_host = owner["host"].as_str() == Some(host.as_str());
                let dead = pid > 0
                    && pid != i64::from(std::process::id())
                    && matches!(
                        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None),
                        Err(nix::errno::Errno::ESRCH)
                    );
                if same_host && dead {
                    std::fs::remove_file(path).map_err(|e| Error::io(path, e))?;
                    continue;
                }
                return Err(Error::Wal(format!(
                    "another emitter holds {} (pid {pid})",
                    path.display()
                )));
            }
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    Err(Error::Wal("cannot take the emitter lock".into()))
}
