//! The AG-UI event plane: frames built from the agent's append-only session
//! journal, published on `events.<owner>.<actor>` with an expected last subject
//! sequence, through a write-ahead log so a restarted seat neither loses nor
//! republishes a record.
//!
//! The journal is polled (a few ms of latency; no inotify dependency, and the
//! same code sees checkpoints that replace the file).
//!
//! This file maps journal records to AG-UI frames ([`Mapper`], [`Brackets`], [`Cursor`]);
//! `wal` keeps what was published, `emitter` runs the loop.

mod emitter;
mod wal;

pub use emitter::{CrashPoint, Emitter};
pub use wal::{Frontier, Pending, Wal, WalDoc};

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
