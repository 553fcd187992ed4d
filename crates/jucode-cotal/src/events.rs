//! The AG-UI event plane: frames built from the agent's append-only session
//! journal, published on `events.<owner>.<actor>` with an expected last subject
//! sequence, through a write-ahead log so a restarted seat neither loses nor
//! republishes a record.
//!
//! The journal is polled (a few ms of latency; no inotify dependency, and the
//! same code sees checkpoints that replace the file).

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_nats::jetstream::context::PublishErrorKind;
use base64::Engine;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::config::LaunchConfig;
use crate::harness::JournalSource;
use crate::mesh::Mesh;
use crate::subject::{self, Principal};
use crate::util::{now_ms, sha256_hex};
use crate::{Error, Result};

pub const PROTOCOL: &str = "ag-ui/0.0.57";
/// The only message a published RUN_ERROR carries; internal codes stay in the seat's log.
pub const RUN_FAILED: &str = "run failed";
/// Most journal bytes read per poll.
const READ_CHUNK: u64 = 4 << 20;

/// Turn boundaries the seat tells the emitter about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunHint {
    TurnStarted,
    TurnEnded { ok: bool },
}

/// Open observations across the whole stream (`AguiBrackets`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Brackets {
    pub run: Option<String>,
    pub messages: BTreeSet<String>,
    pub tools: BTreeSet<String>,
    pub ended_tools: BTreeSet<String>,
}

impl Brackets {
    pub fn is_open(&self) -> bool {
        self.run.is_some()
    }

    /// Apply one event, refusing anything that breaks the brackets.
    pub fn apply(&mut self, ev: &Value) -> Result<()> {
        let ty = ev["type"].as_str().unwrap_or("");
        let id = |k: &str| ev[k].as_str().map(str::to_string);
        let bad = |why: &str| Err(Error::Events(format!("bracket violation: {ty}: {why}")));
        if ev.get("timestamp").and_then(Value::as_f64).is_none() {
            return bad("no timestamp");
        }
        match ty {
            "RUN_STARTED" => {
                if self.run.is_some() {
                    return bad("a run is already open");
                }
                self.run = id("runId");
                self.ended_tools.clear();
            }
            "RUN_FINISHED" => {
                if self.run != id("runId") || self.run.is_none() {
                    return bad("not the open run");
                }
                if !self.messages.is_empty() || !self.tools.is_empty() {
                    return bad("something is still open");
                }
                self.run = None;
            }
            "RUN_ERROR" => {
                if !self.messages.is_empty() || !self.tools.is_empty() {
                    return bad("something is still open");
                }
                self.run = None;
            }
            "TEXT_MESSAGE_START" | "REASONING_MESSAGE_START" => {
                let Some(m) = id("messageId") else {
                    return bad("no messageId");
                };
                if self.run.is_none() || !self.messages.insert(m) {
                    return bad("no run, or message already open");
                }
            }
            "TEXT_MESSAGE_CONTENT" | "REASONING_MESSAGE_CONTENT" => {
                if !id("messageId").is_some_and(|m| self.messages.contains(&m)) {
                    return bad("message not open");
                }
            }
            "TEXT_MESSAGE_END" | "REASONING_MESSAGE_END" => {
                if !id("messageId").is_some_and(|m| self.messages.remove(&m)) {
                    return bad("message not open");
                }
            }
            "TOOL_CALL_START" => {
                let Some(t) = id("toolCallId") else {
                    return bad("no toolCallId");
                };
                if self.run.is_none() || self.tools.contains(&t) || self.ended_tools.contains(&t) {
                    return bad("no run, or tool call seen before");
                }
                self.tools.insert(t);
            }
            "TOOL_CALL_ARGS" => {
                if !id("toolCallId").is_some_and(|t| self.tools.contains(&t)) {
                    return bad("tool call not open");
                }
            }
            "TOOL_CALL_END" => {
                let Some(t) = id("toolCallId") else {
                    return bad("no toolCallId");
                };
                if !self.tools.remove(&t) {
                    return bad("tool call not open");
                }
                self.ended_tools.insert(t);
            }
            "TOOL_CALL_RESULT" => {
                if !id("toolCallId").is_some_and(|t| self.ended_tools.contains(&t)) {
                    return bad("result before the call's end");
                }
            }
            "CUSTOM" => {}
            _ => return bad("unknown event type"),
        }
        Ok(())
    }
}

/// A byte cursor into one journal file: `dev:ino:offset:seal` (seal = the file was folded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    pub dev: u64,
    pub ino: u64,
    pub offset: u64,
    pub seal: bool,
}

impl Cursor {
    pub fn encode(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            self.dev,
            self.ino,
            self.offset,
            u8::from(self.seal)
        )
    }
    pub fn decode(s: &str) -> Result<Cursor> {
        let p: Vec<&str> = s.split(':').collect();
        let num = |x: &str| {
            x.parse::<u64>()
                .map_err(|_| Error::Wal(format!("malformed source cursor {s:?}")))
        };
        if p.len() != 4 || !(p[3] == "0" || p[3] == "1") {
            return Err(Error::Wal(format!("malformed source cursor {s:?}")));
        }
        Ok(Cursor {
            dev: num(p[0])?,
            ino: num(p[1])?,
            offset: num(p[2])?,
            seal: p[3] == "1",
        })
    }
}

/// Parse an RFC 3339 UTC timestamp (`2026-11-29T21:24:53.291Z`) to epoch ms.
pub fn rfc3339_ms(s: &str) -> Option<u64> {
    let s = s.strip_suffix('Z').or_else(|| s.strip_suffix("+00:00"))?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-');
    let y: i64 = d.next()?.parse().ok()?;
    let m: i64 = d.next()?.parse().ok()?;
    let day: i64 = d.next()?.parse().ok()?;
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.split(':');
    let h: i64 = t.next()?.parse().ok()?;
    let mi: i64 = t.next()?.parse().ok()?;
    let sec: i64 = t.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let frac_ms: i64 = format!("{:0<3}", &frac[..frac.len().min(3)]).parse().ok()?;
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = if y2 >= 0 { y2 } else { y2 - 399 } / 400;
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let ms = ((days * 86_400 + h * 3600 + mi * 60 + sec) * 1000) + frac_ms;
    u64::try_from(ms).ok()
}

/// Builds events from journal records; holds the bracket state.
pub struct Mapper {
    pub thread_id: String,
    pub brackets: Brackets,
}

/// One frame's worth of events and the run they belong to.
#[derive(Debug, Clone, Serialize)]
pub struct Batch {
    pub run_id: String,
    pub events: Vec<Value>,
}

impl Mapper {
    fn message_id(&self, cursor: &Cursor, msg: usize, part: usize) -> String {
        let raw = format!("{}\0{msg}\0{part}", cursor.encode());
        let d = ring::digest::digest(&ring::digest::SHA256, raw.as_bytes());
        let b = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(d.as_ref());
        format!("{}:{}", self.thread_id, &b[..22])
    }

    fn push(&mut self, out: &mut Vec<Batch>, ev: Value) -> Result<()> {
        let run = self
            .brackets
            .run
            .clone()
            .or_else(|| ev["runId"].as_str().map(str::to_string))
            .unwrap_or_default();
        self.brackets.apply(&ev)?;
        match out.last_mut() {
            Some(b) if b.run_id == run => b.events.push(ev),
            _ => out.push(Batch {
                run_id: run,
                events: vec![ev],
            }),
        }
        Ok(())
    }

    /// Open a run at block `at` (message, part) of the line at `cursor`, unless one is open.
    fn open_run(
        &mut self,
        out: &mut Vec<Batch>,
        cursor: &Cursor,
        at: (usize, usize),
        ts: Value,
        tss: Option<&str>,
    ) -> Result<()> {
        if self.brackets.is_open() {
            return Ok(());
        }
        // A line can end a run and open another; the block index keeps their ids apart
        // (and the first run of a line keeps the id it always had).
        let key = match at {
            (0, 0) => format!("{}\0{}", self.thread_id, cursor.encode()),
            (m, p) => format!("{}\0{}\0{m}\0{p}", self.thread_id, cursor.encode()),
        };
        let run_id = format!("run_{}", &sha256_hex(key.as_bytes())[..24]);
        let mut cotal = json!({"runIdSource": "connector"});
        if let Some(s) = tss {
            cotal["tsSource"] = json!(s);
        }
        self.push(
            out,
            json!({"type": "RUN_STARTED", "threadId": self.thread_id, "runId": run_id, "timestamp": ts, "cotal": cotal}),
        )
    }

    /// End every open tool call, then the run, as finished or failed.
    pub fn close_run(
        &mut self,
        out: &mut Vec<Batch>,
        ok: bool,
        ts: u64,
        internal_code: &str,
    ) -> Result<()> {
        let Some(run) = self.brackets.run.clone() else {
            return Ok(());
        };
        for t in self.brackets.tools.clone() {
            self.push(out, json!({"type": "TOOL_CALL_END", "toolCallId": t, "timestamp": ts, "cotal": {"tsSource": "arrival"}}))?;
        }
        if ok {
            self.push(out, json!({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": run, "timestamp": ts, "outcome": {"type": "success"}, "cotal": {"tsSource": "arrival"}}))
        } else {
            tracing::info!(code = internal_code, run = %run, "run ends with RUN_ERROR");
            self.push(out, json!({"type": "RUN_ERROR", "message": RUN_FAILED, "timestamp": ts, "cotal": {"tsSource": "arrival"}}))
        }
    }

    /// Map one complete journal line that started at `cursor`.
    pub fn map_line(&mut self, cursor: &Cursor, line: &str) -> Result<Vec<Batch>> {
        let entry: Value = serde_json::from_str(line).map_err(|e| {
            Error::Events(format!(
                "invalid journal record at {}: {e}",
                cursor.encode()
            ))
        })?;
        if !entry.get("meta").is_some_and(Value::is_object) {
            return Err(Error::Events(format!(
                "journal record at {} has no meta",
                cursor.encode()
            )));
        }
        let mut out = Vec::new();
        let Some(msgs) = entry.get("append_messages").and_then(Value::as_array) else {
            return Ok(out);
        };
        for (i, msg) in msgs.iter().enumerate() {
            let (ts, tss) = match msg["timestamp"].as_str().and_then(rfc3339_ms) {
                Some(t) => (json!(t), None),
                None => (json!(now_ms()), Some("arrival")),
            };
            let meta = |extra: Value| {
                let mut c = extra;
                if let Some(s) = tss {
                    c["tsSource"] = json!(s);
                }
                c
            };
            let blocks = msg["content"].as_array().cloned().unwrap_or_default();
            match msg["role"].as_str() {
                Some("assistant") => {
                    for (j, b) in blocks.iter().enumerate() {
                        let kind = b["type"].as_str().unwrap_or("");
                        let (start, content, end, text) = match kind {
                            "text" => (
                                "TEXT_MESSAGE_START",
                                "TEXT_MESSAGE_CONTENT",
                                "TEXT_MESSAGE_END",
                                b["text"].as_str(),
                            ),
                            "reasoning" | "reasoning_trace" => (
                                "REASONING_MESSAGE_START",
                                "REASONING_MESSAGE_CONTENT",
                                "REASONING_MESSAGE_END",
                                b["text"].as_str(),
                            ),
                            "tool_use" => {
                                let (Some(id), Some(name)) = (b["id"].as_str(), b["name"].as_str())
                                else {
                                    return Err(Error::Events(
                                        "tool_use without id or name".into(),
                                    ));
                                };
                                self.open_run(&mut out, cursor, (i, j), ts.clone(), tss)?;
                                self.push(&mut out, json!({"type": "TOOL_CALL_START", "toolCallId": id, "toolCallName": name, "timestamp": ts, "cotal": meta(json!({}))}))?;
                                continue;
                            }
                            _ => continue,
                        };
                        let Some(text) = text.filter(|t| !t.is_empty()) else {
                            continue;
                        };
                        self.open_run(&mut out, cursor, (i, j), ts.clone(), tss)?;
                        let mid = self.message_id(cursor, i, j);
                        self.push(&mut out, json!({"type": start, "messageId": mid, "role": "assistant", "timestamp": ts, "cotal": meta(json!({}))}))?;
                        self.push(&mut out, json!({"type": content, "messageId": mid, "delta": text, "timestamp": ts}))?;
                        self.push(
                            &mut out,
                            json!({"type": end, "messageId": mid, "timestamp": ts}),
                        )?;
                    }
                }
                Some("user") => {
                    let mut prompt = false;
                    for (j, b) in blocks.iter().enumerate() {
                        match b["type"].as_str() {
                            Some("tool_result") => {
                                let id = b["tool_use_id"].as_str().unwrap_or("").to_string();
                                self.open_run(&mut out, cursor, (i, j), ts.clone(), tss)?;
                                if self.brackets.tools.contains(&id) {
                                    let err = b["is_error"].as_bool().unwrap_or(false);
                                    self.push(&mut out, json!({"type": "TOOL_CALL_END", "toolCallId": id, "timestamp": ts, "cotal": meta(json!({"isError": err}))}))?;
                                } else {
                                    self.close_run(
                                        &mut out,
                                        false,
                                        now_ms(),
                                        "jcode_tool_start_missing",
                                    )?;
                                }
                            }
                            Some("text") if msg.get("display_role").is_none() => prompt = true,
                            _ => {}
                        }
                    }
                    // A user prompt is a turn boundary; its text is never republished.
                    if prompt && self.brackets.is_open() {
                        let t = ts.as_u64().unwrap_or_else(now_ms);
                        self.close_run(&mut out, true, t, "")?;
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

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
    path: PathBuf,
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

enum ReadOutcome {
    Lines(Vec<(Cursor, Cursor, String)>),
    Missing,
    Replaced,
}

fn read_journal(path: &Path, cur: &Cursor) -> Result<ReadOutcome> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ReadOutcome::Missing),
        Err(e) => return Err(Error::io(path, e)),
    };
    let meta = f.metadata().map_err(|e| Error::io(path, e))?;
    let mut start = *cur;
    if cur.seal || cur.ino == 0 {
        start = Cursor {
            dev: meta.dev(),
            ino: meta.ino(),
            offset: 0,
            seal: false,
        };
    } else if meta.ino() != cur.ino || meta.dev() != cur.dev || meta.len() < cur.offset {
        return Ok(ReadOutcome::Replaced);
    }
    if meta.len() == start.offset {
        return Ok(ReadOutcome::Lines(Vec::new()));
    }
    f.seek(SeekFrom::Start(start.offset))
        .map_err(|e| Error::io(path, e))?;
    let mut buf = Vec::new();
    f.take(READ_CHUNK)
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(path, e))?;
    let mut out = Vec::new();
    let mut pos = 0usize;
    while let Some(nl) = buf[pos..].iter().position(|b| *b == b'\n') {
        let line = &buf[pos..pos + nl];
        let begin = Cursor {
            offset: start.offset + pos as u64,
            ..start
        };
        let end = Cursor {
            offset: start.offset + (pos + nl + 1) as u64,
            ..start
        };
        let text = std::str::from_utf8(line).map_err(|_| {
            Error::Events(format!("journal line at {} is not UTF-8", begin.encode()))
        })?;
        if !text.trim().is_empty() {
            out.push((begin, end, text.to_string()));
        }
        pos += nl + 1;
    }
    Ok(ReadOutcome::Lines(out))
}

fn snapshot_valid(source: &JournalSource) -> bool {
    std::fs::read(source.snapshot_path())
        .ok()
        .and_then(|raw| serde_json::from_slice::<Value>(&raw).ok())
        .is_some_and(|v| v["id"].as_str() == Some(source.session_id.as_str()))
}

/// The emitter: journal in, frames out.
pub struct Emitter {
    mesh: Mesh,
    source: JournalSource,
    subject: String,
    channel: String,
    space: String,
    principal: Principal,
    name: String,
    wal: Wal,
    mapper: Mapper,
    cursor: Cursor,
    poll: Duration,
    stored: Option<watch::Sender<u64>>,
    stop: Option<watch::Receiver<bool>>,
    crash: Option<CrashPoint>,
}

/// A point where a test makes the emitter die as a crash would: nothing more is
/// written to the WAL or published (set only through the testkit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// The broker stored frame `seq`; the WAL does not know it yet.
    Stored(u64),
    /// Frame `seq` is folded into the WAL; the next one is not published yet.
    Folded(u64),
}

impl Emitter {
    /// Open the WAL for this seat and thread; fails when another emitter holds it.
    pub fn open(
        cfg: &LaunchConfig,
        mesh: Mesh,
        source: JournalSource,
        poll: Duration,
    ) -> Result<Emitter> {
        let root = cfg
            .workspace_root
            .clone()
            .ok_or_else(|| Error::Launch("events need COTAL_WORKSPACE_ROOT".into()))?;
        let wal = Wal::open(&root, &cfg.space, &cfg.principal, &source.session_id)?;
        let cursor = Cursor::decode(&wal.doc.frontier.source_cursor)?;
        let channel = subject::event_channel(&cfg.principal);
        Ok(Emitter {
            subject: subject::chat(&cfg.space, &cfg.principal, &channel),
            channel,
            space: cfg.space.clone(),
            principal: cfg.principal.clone(),
            name: cfg.name.clone(),
            mapper: Mapper {
                thread_id: source.session_id.clone(),
                brackets: wal.doc.brackets.clone(),
            },
            mesh,
            source,
            wal,
            cursor,
            poll,
            stored: None,
            stop: None,
            crash: None,
        })
    }

    /// Die at `at` as a crash would (tests of the WAL's recovery).
    #[cfg(feature = "testkit")]
    pub fn crash_at(mut self, at: CrashPoint) -> Self {
        self.crash = Some(at);
        self
    }

    /// Report the stream sequence of every stored frame (benchmark hook).
    pub fn on_stored(&mut self, tx: watch::Sender<u64>) {
        self.stored = Some(tx);
    }

    /// Stop when `stop` turns true, even in the middle of a mesh outage.
    pub fn with_stop(mut self, stop: watch::Receiver<bool>) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Run until the hint channel closes or the stop signal (seat stopping).
    /// A stop may land at any await: every frame of a record is in the WAL
    /// (`pending` then `queued`, `sent_unacked`) before the first is published and
    /// the cursor only moves on a fold, so the next start republishes what was not
    /// stored, in order, under the same ids and expectations.
    pub async fn run(mut self, hints: mpsc::UnboundedReceiver<RunHint>) -> Result<()> {
        let stop = self.stop.take();
        let stopped = async move {
            match stop {
                Some(mut rx) => {
                    let _ = rx.wait_for(|v| *v).await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            r = self.work(hints) => r,
            _ = stopped => {
                if self.wal.doc.pending.is_some() {
                    tracing::info!(
                        queued = self.wal.doc.queued.len(),
                        "AG-UI emitter stopping with a frame not known stored; the next start publishes it"
                    );
                }
                Ok(())
            }
        }
    }

    async fn work(&mut self, mut hints: mpsc::UnboundedReceiver<RunHint>) -> Result<()> {
        if let Some(p) = &self.wal.doc.pending {
            // Frames recorded but not known stored: publish them again (same ids,
            // same expectations), folding whatever the broker says.
            tracing::info!(
                seq = p.seq,
                queued = self.wal.doc.queued.len(),
                "re-publishing the frames the WAL holds"
            );
            self.flush().await?;
            // They covered the journal up to their record's end: read on from there
            // (not from the frontier loaded at open), or the record is mapped twice.
            self.cursor = Cursor::decode(&self.wal.doc.frontier.source_cursor)?;
            self.mapper.brackets = self.wal.doc.brackets.clone();
        }
        loop {
            self.drain().await?;
            let hint = tokio::select! {
                h = hints.recv() => match h {
                    Some(h) => Some(h),
                    None => return Ok(()),
                },
                _ = tokio::time::sleep(self.poll) => None,
            };
            if let Some(RunHint::TurnEnded { ok }) = hint {
                self.drain().await?;
                let mut out = Vec::new();
                self.mapper
                    .close_run(&mut out, ok, now_ms(), "turn_failed")?;
                self.emit(out, self.cursor).await?;
            }
        }
    }

    /// Read and publish everything new in the journal.
    async fn drain(&mut self) -> Result<()> {
        loop {
            match read_journal(&self.source.journal_path(), &self.cursor)? {
                ReadOutcome::Lines(lines) => {
                    if lines.is_empty() {
                        return Ok(());
                    }
                    for (begin, end, line) in lines {
                        let batches = self.mapper.map_line(&begin, &line)?;
                        self.cursor = end;
                        self.emit(batches, end).await?;
                    }
                }
                ReadOutcome::Missing | ReadOutcome::Replaced if self.cursor.seal => {
                    // Folded already; waiting for the next journal to appear.
                    return Ok(());
                }
                ReadOutcome::Missing if self.cursor.ino == 0 => return Ok(()),
                ReadOutcome::Missing | ReadOutcome::Replaced => {
                    if !snapshot_valid(&self.source) {
                        return Err(Error::Events(
                            "the journal is gone and no valid snapshot replaced it".into(),
                        ));
                    }
                    // A checkpoint folded the journal: end what was open.
                    self.cursor.seal = true;
                    let mut out = Vec::new();
                    self.mapper
                        .close_run(&mut out, false, now_ms(), "jcode_journal_fold")?;
                    self.emit(out, self.cursor).await?;
                }
            }
        }
    }

    /// Record every frame of one journal record in the WAL, then publish them in order.
    async fn emit(&mut self, batches: Vec<crate::events::Batch>, cursor: Cursor) -> Result<()> {
        // Each frame carries the bracket state right after it, replayed from the
        // frontier's, so a fold between two frames of a record stays exact.
        let mut brackets = self.wal.doc.brackets.clone();
        let mut frames: Vec<Pending> = Vec::new();
        for b in batches {
            if b.events.is_empty() {
                continue;
            }
            for e in &b.events {
                brackets.apply(e)?;
            }
            let seq = self.wal.doc.frontier.seq + 1 + frames.len() as u64;
            let mut frame = json!({
                "kind": "ag-ui.frame",
                "protocol": PROTOCOL,
                "threadId": self.mapper.thread_id,
                "runId": b.run_id,
                "epoch": self.wal.doc.epoch,
                "seq": seq,
                "events": b.events,
            });
            self.fit(&mut frame);
            frames.push(Pending {
                state: "sent_unacked".into(),
                id: crate::envelope::new_id(),
                seq,
                source_cursor: cursor.encode(),
                body: frame,
                ack_seq: None,
                brackets: brackets.clone(),
            });
        }
        if brackets != self.mapper.brackets {
            return Err(Error::Events(
                "the frames' bracket state diverged from the mapper's".into(),
            ));
        }
        let mut frames = frames.into_iter();
        let Some(first) = frames.next() else {
            return Ok(());
        };
        // The whole record is durable before anything of it is published.
        self.wal.doc.pending = Some(first);
        self.wal.doc.queued = frames.collect();
        self.wal.save()?;
        self.flush().await
    }

    /// Publish the pending frame and every queued one after it, folding each.
    async fn flush(&mut self) -> Result<()> {
        while let Some(p) = self.wal.doc.pending.clone() {
            let stored = self.publish(&p).await?;
            self.crash_check(CrashPoint::Stored(p.seq))?;
            self.fold(&p, stored)?;
            self.crash_check(CrashPoint::Folded(p.seq))?;
        }
        Ok(())
    }

    fn crash_check(&self, at: CrashPoint) -> Result<()> {
        if self.crash == Some(at) {
            return Err(Error::Events(format!("injected crash at {at:?}")));
        }
        Ok(())
    }

    /// Shrink content deltas so the message fits the broker's `max_payload`.
    fn fit(&self, frame: &mut Value) {
        let max = self.mesh.client.server_info().max_payload.max(4096);
        let size = frame.to_string().len() + 1024;
        if size <= max {
            return;
        }
        let Some(events) = frame["events"].as_array_mut() else {
            return;
        };
        let n = events
            .iter()
            .filter(|e| e.get("delta").is_some())
            .count()
            .max(1);
        let budget = (max.saturating_sub(4096)) / n / 2;
        for e in events.iter_mut() {
            if let Some(d) = e.get("delta").and_then(Value::as_str)
                && d.len() > budget
            {
                let cut: String = d.chars().take(budget / 4).collect();
                e["delta"] = json!(cut);
                e["cotal"] = json!({"truncated": true});
            }
        }
    }

    fn message(&self, p: &Pending) -> Value {
        json!({
            "id": p.id,
            "ts": now_ms(),
            "space": self.space,
            "from": {"id": self.principal.dot(), "name": self.name},
            "channel": self.channel,
            "parts": [p.body],
        })
    }

    /// Publish one frame with its expectation; waits out mesh outages.
    async fn publish(&self, p: &Pending) -> Result<u64> {
        let payload = Bytes::from(self.message(p).to_string());
        let expected = self.wal.doc.frontier.last_subject_seq;
        let mut delay = Duration::from_millis(100);
        loop {
            self.mesh.wait_connected().await;
            let sent = self
                .mesh
                .js
                .send_publish(
                    self.subject.clone(),
                    async_nats::jetstream::message::PublishMessage::build()
                        .payload(payload.clone())
                        .message_id(&p.id)
                        .expected_last_subject_sequence(expected),
                )
                .await;
            let res = match sent {
                Ok(fut) => fut.await,
                Err(e) => Err(e),
            };
            match res {
                Ok(ack) => return Ok(ack.sequence),
                Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                    // Stored already (a retry after a lost ack), or a CAS loss.
                    let stream = self
                        .mesh
                        .js
                        .get_stream(&self.mesh.names.chat_stream)
                        .await
                        .map_err(Error::mesh)?;
                    let last = stream
                        .get_last_raw_message_by_subject(&self.subject)
                        .await
                        .map_err(Error::mesh)?;
                    let id = last
                        .headers
                        .get("Nats-Msg-Id")
                        .map(|v| v.as_str().to_string());
                    if id.as_deref() == Some(p.id.as_str()) {
                        return Ok(last.sequence);
                    }
                    return Err(Error::Events(format!(
                        "CAS loss on {}: expected last subject sequence {expected}, another writer published",
                        self.subject
                    )));
                }
                Err(e) => {
                    tracing::info!(error = %e, "event publish waiting for the mesh");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    fn fold(&mut self, p: &Pending, stored: u64) -> Result<()> {
        self.wal.doc.frontier = Frontier {
            seq: p.seq,
            last_subject_seq: stored,
            source_cursor: p.source_cursor.clone(),
        };
        self.wal.doc.brackets = p.brackets.clone();
        // The next frame of the same record (durable already) is pending now, in
        // the same atomic write: no instant where it is known nowhere.
        self.wal.doc.pending = if self.wal.doc.queued.is_empty() {
            None
        } else {
            Some(self.wal.doc.queued.remove(0))
        };
        self.wal.save()?;
        if let Some(tx) = &self.stored {
            let _ = tx.send(stored);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(role: &str, content: Value) -> String {
        json!({"meta": {"status": "Active"}, "append_messages": [{"id": "m", "role": role, "content": content, "timestamp": "2026-11-29T21:24:53.291Z"}]}).to_string()
    }

    #[test]
    fn rfc3339() {
        assert_eq!(rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            rfc3339_ms("2026-11-29T21:24:53.291397195Z"),
            Some(1_795_987_493_291)
        );
        assert_eq!(rfc3339_ms("garbage"), None);
    }

    #[test]
    fn maps_a_tool_turn_and_never_the_prompt() {
        let mut m = Mapper {
            thread_id: "S".into(),
            brackets: Brackets::default(),
        };
        let c = |o| Cursor {
            dev: 1,
            ino: 2,
            offset: o,
            seal: false,
        };
        let b = m
            .map_line(
                &c(0),
                &line("user", json!([{"type": "text", "text": "secret prompt"}])),
            )
            .unwrap();
        assert!(b.is_empty(), "a prompt opens nothing and is not published");
        let b = m
            .map_line(
                &c(10),
                &line(
                    "assistant",
                    json!([
            {"type": "reasoning", "text": "think"},
            {"type": "text", "text": "hello"},
            {"type": "tool_use", "id": "call_1", "name": "bash", "input": {"command": "ls"}}]),
                ),
            )
            .unwrap();
        let types: Vec<&str> = b[0]
            .events
            .iter()
            .map(|e| e["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            [
                "RUN_STARTED",
                "REASONING_MESSAGE_START",
                "REASONING_MESSAGE_CONTENT",
                "REASONING_MESSAGE_END",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "TOOL_CALL_START"
            ]
        );
        assert!(
            !serde_json::to_string(&b).unwrap().contains("\"ls\""),
            "tool arguments are not published"
        );
        let b = m
            .map_line(
                &c(20),
                &line(
                    "user",
                    json!([{"type": "tool_result", "tool_use_id": "call_1", "content": "out"}]),
                ),
            )
            .unwrap();
        assert_eq!(b[0].events[0]["type"], "TOOL_CALL_END");
        assert!(!serde_json::to_string(&b).unwrap().contains("out\""));
        let b = m
            .map_line(
                &c(30),
                &line("user", json!([{"type": "text", "text": "next prompt"}])),
            )
            .unwrap();
        assert_eq!(b[0].events[0]["type"], "RUN_FINISHED");
        assert!(!serde_json::to_string(&b).unwrap().contains("next prompt"));
        assert!(!m.brackets.is_open());
    }

    #[test]
    fn tool_result_without_start_ends_the_run_with_run_error() {
        let mut m = Mapper {
            thread_id: "S".into(),
            brackets: Brackets::default(),
        };
        let c = Cursor {
            dev: 1,
            ino: 2,
            offset: 0,
            seal: false,
        };
        let b = m
            .map_line(
                &c,
                &line(
                    "user",
                    json!([{"type": "tool_result", "tool_use_id": "x", "content": ""}]),
                ),
            )
            .unwrap();
        let types: Vec<&str> = b
            .iter()
            .flat_map(|b| b.events.iter())
            .map(|e| e["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["RUN_STARTED", "RUN_ERROR"]);
        let err = b[0].events.last().unwrap();
        assert_eq!(err["message"], RUN_FAILED);
        assert!(err.get("code").is_none(), "internal codes stay in the seat");
    }

    #[test]
    fn brackets_refuse_violations() {
        let mut br = Brackets::default();
        let ev = |v: Value| {
            let mut v = v;
            v["timestamp"] = json!(1);
            v
        };
        assert!(
            br.apply(&ev(json!({"type": "TEXT_MESSAGE_START", "messageId": "m"})))
                .is_err()
        );
        br.apply(&ev(json!({"type": "RUN_STARTED", "runId": "r"})))
            .unwrap();
        assert!(
            br.apply(&ev(json!({"type": "RUN_STARTED", "runId": "r2"})))
                .is_err()
        );
        br.apply(&ev(json!({"type": "TOOL_CALL_START", "toolCallId": "t"})))
            .unwrap();
        assert!(
            br.apply(&ev(json!({"type": "TOOL_CALL_RESULT", "toolCallId": "t"})))
                .is_err()
        );
        assert!(
            br.apply(&ev(json!({"type": "RUN_FINISHED", "runId": "r"})))
                .is_err()
        );
        br.apply(&ev(json!({"type": "TOOL_CALL_END", "toolCallId": "t"})))
            .unwrap();
        br.apply(&ev(json!({"type": "TOOL_CALL_RESULT", "toolCallId": "t"})))
            .unwrap();
        assert!(
            br.apply(&json!({"type": "RUN_FINISHED", "runId": "r"}))
                .is_err(),
            "timestamp required"
        );
        br.apply(&ev(json!({"type": "RUN_FINISHED", "runId": "r"})))
            .unwrap();
    }

    #[test]
    fn one_record_can_end_a_run_and_open_the_next_as_two_frames() {
        let mut m = Mapper {
            thread_id: "S".into(),
            brackets: Brackets::default(),
        };
        let c = |o| Cursor {
            dev: 1,
            ino: 2,
            offset: o,
            seal: false,
        };
        m.map_line(
            &c(0),
            &line("assistant", json!([{"type": "text", "text": "a"}])),
        )
        .unwrap();
        let first = m.brackets.run.clone().unwrap();
        let rec = json!({"meta": {}, "append_messages": [
            {"role": "user", "content": [{"type": "text", "text": "next"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "b"}]},
            {"role": "user", "content": [{"type": "text", "text": "again"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "c"}]}]});
        let b = m.map_line(&c(10), &rec.to_string()).unwrap();
        let runs: Vec<&str> = b.iter().map(|b| b.run_id.as_str()).collect();
        assert_eq!(runs.len(), 3, "{runs:?}");
        assert_eq!(runs[0], first);
        assert_ne!(runs[1], runs[2], "two runs of one record keep distinct ids");
        assert_eq!(b[0].events[0]["type"], "RUN_FINISHED");
        assert_eq!(b[2].events[0]["type"], "RUN_STARTED");
    }

    #[test]
    fn wal_refuses_a_broken_frame_chain() {
        let dir = tempfile::tempdir().unwrap();
        let p = Principal::new("local", "a");
        let frame = |seq: u64| Pending {
            state: "sent_unacked".into(),
            id: format!("id{seq}"),
            seq,
            source_cursor: Cursor::default().encode(),
            body: json!({"seq": seq}),
            ack_seq: None,
            brackets: Brackets::default(),
        };
        let path = {
            let mut w = Wal::open(dir.path(), "dev", &p, "S").unwrap();
            w.doc.pending = Some(frame(1));
            w.doc.queued = vec![frame(2), frame(3)];
            w.save().unwrap();
            w.path.clone()
        };
        let w = Wal::open(dir.path(), "dev", &p, "S").unwrap();
        assert_eq!(w.doc.queued.len(), 2, "queued frames survive a reopen");
        drop(w);
        let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        doc["queued"][1]["seq"] = json!(4);
        doc["queued"][1]["body"]["seq"] = json!(4);
        std::fs::write(&path, doc.to_string()).unwrap();
        let e = Wal::open(dir.path(), "dev", &p, "S").err().unwrap();
        assert!(e.to_string().contains("out of sequence"), "{e}");
        doc["queued"][1]["seq"] = json!(3);
        doc["queued"][1]["body"]["seq"] = json!(3);
        doc["pending"] = Value::Null;
        std::fs::write(&path, doc.to_string()).unwrap();
        let e = Wal::open(dir.path(), "dev", &p, "S").err().unwrap();
        assert!(e.to_string().contains("without a pending"), "{e}");
    }

    #[test]
    fn cursor_round_trip_and_malformed() {
        let c = Cursor {
            dev: 3,
            ino: 9,
            offset: 120,
            seal: true,
        };
        assert_eq!(Cursor::decode(&c.encode()).unwrap(), c);
        assert!(Cursor::decode("1:2:x:0").is_err());
        assert!(Cursor::decode("1:2:3").is_err());
    }

    #[test]
    fn wal_lock_is_exclusive_and_epoch_grows() {
        let dir = tempfile::tempdir().unwrap();
        let p = Principal::new("local", "a");
        let w = Wal::open(dir.path(), "dev", &p, "S").unwrap();
        assert_eq!(w.doc.epoch, 1);
        assert!(
            Wal::open(dir.path(), "dev", &p, "S").is_err(),
            "one emitter per principal"
        );
        drop(w);
        let w = Wal::open(dir.path(), "dev", &p, "S").unwrap();
        assert_eq!(w.doc.epoch, 2);
    }
}
