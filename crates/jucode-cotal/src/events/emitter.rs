//! The emitter: polls the journal, maps new records, publishes them through the WAL with an
//! expected last sequence.

use super::*;

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
