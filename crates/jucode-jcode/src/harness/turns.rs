//! Running turns: one turn to its end, soft interrupts joined to it or settled after it.

use super::*;

impl Shared {
    /// Run one turn to its end, handing tool events to `on_tool`. Returns
    /// early (leaving the rest of the turn to a drain task that keeps the turn
    /// lock) when `on_tool` says so. Soft interrupts jcode accepted but did not
    /// inject before the turn ended run as a follow-up turn under the same lock.
    pub(super) async fn turn(
        self: &Arc<Self>,
        text: &str,
        on_tool: impl FnMut(&TurnEv) -> bool + Send,
    ) -> std::result::Result<bool, TurnFailure> {
        self.turn_accepted(text, on_tool, None).await
    }

    /// [`Shared::turn`], firing `accepted` on jcode's `message_accepted` for
    /// this message (dropped unfired when jcode never accepted it).
    pub(super) async fn turn_accepted(
        self: &Arc<Self>,
        text: &str,
        mut on_tool: impl FnMut(&TurnEv) -> bool + Send,
        mut accepted: Option<tokio::sync::oneshot::Sender<()>>,
    ) -> std::result::Result<bool, TurnFailure> {
        let guard = self.turn_lock.clone().lock_owned().await;
        let Some(client) = self.client().await else {
            return Err(TurnFailure {
                code: None,
                message: "the private jcode is reconnecting".into(),
            });
        };
        let mut carried = Vec::new();
        let res = match self
            .run_one(&client, text, &mut on_tool, &mut accepted)
            .await
        {
            Ok(RunEnd::Early(mut rx)) => {
                let me = self.clone();
                tokio::spawn(async move {
                    let _guard = guard;
                    while let Some(ev) = rx.recv().await {
                        if matches!(ev, TurnEv::Done(_) | TurnEv::Failed(_) | TurnEv::Closed) {
                            break;
                        }
                    }
                    lock(&me.slot).take();
                    let mut g = lock(&me.steering);
                    if g.pending.is_empty() && g.in_flight == 0 {
                        g.open = false;
                    }
                });
                return Ok(true);
            }
            Ok(RunEnd::Done(mark)) => self
                .settle(&client, mark, &mut carried)
                .await
                .map(|()| false),
            Err(f) => {
                self.fail_steering(&f).await;
                Err(f)
            }
        };
        // Interrupts this turn (or its follow-up) carried end with it.
        tell(carried, &res.clone().map(drop));
        drop(guard);
        match &res {
            Ok(_) => *lock(&self.last_turn_error) = None,
            Err(f) => *lock(&self.last_turn_error) = Some(f.message.clone()),
        }
        res
    }

    /// Wait (deadlock-guarded) until no interrupt request is on the wire.
    /// Returns with the steering lock's view at that moment via `decide`.
    async fn when_answered<T>(&self, mut decide: impl FnMut(&mut Steering) -> T) -> T {
        loop {
            let changed = self.steering_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut g = lock(&self.steering);
                if g.in_flight == 0 {
                    return decide(&mut g);
                }
            }
            // Each request is bounded by REQUEST_TIMEOUT; this is a deadlock guard.
            let _ = tokio::time::timeout(crate::api::REQUEST_TIMEOUT, changed).await;
        }
    }

    /// The turn that would carry the accepted interrupts failed: they fail
    /// with it, and jcode's queue, which may still hold them, is cleared
    /// because the seat carries them again.
    pub(super) async fn fail_steering(&self, failure: &TurnFailure) {
        let (left, clear) = self
            .when_answered(|g| {
                g.open = false;
                let clear = g.abandoned || !g.pending.is_empty();
                g.abandoned = false;
                (std::mem::take(&mut g.pending), clear)
            })
            .await;
        if clear && let Some(c) = self.client().await {
            // Best effort: the connection may be what failed.
            let _ = c.cancel_soft_interrupts(&self.plan.session_id).await;
        }
        tell(
            left.into_iter().map(|a| a.carried).collect(),
            &Err(failure.clone()),
        );
    }

    /// Decide the interrupts accepted while the turn that ended (with
    /// `mark`, see [`TurnEv::Done`]) was open. Those in the transcript were
    /// injected into it; those absent are still queued in jcode (≤ 0.79.1
    /// injects only inside a running turn): that queue is cancelled and they
    /// run as a follow-up turn. Either way they go to `carried`, to be told
    /// the turn's outcome. When a turn the seat did not start (the TUI) began
    /// since, it may have taken them from jcode's queue, so they are left for
    /// that turn's end to decide.
    pub(super) async fn settle(
        self: &Arc<Self>,
        client: &Client,
        mut mark: u64,
        carried: &mut Vec<tokio::sync::oneshot::Sender<Outcome>>,
    ) -> std::result::Result<(), TurnFailure> {
        let sid = &self.plan.session_id;
        let fail = |e: Error| TurnFailure {
            code: None,
            message: e.to_string(),
        };
        enum Next {
            Done,
            Clear,
            Decide(Vec<Accepted>),
        }
        loop {
            // An interrupt still on the wire joins this turn: wait for its answer.
            let next = self
                .when_answered(|g| {
                    if g.abandoned {
                        g.abandoned = false;
                        Next::Clear
                    } else if g.pending.is_empty() {
                        g.open = false;
                        Next::Done
                    } else if g.foreign_starts != mark {
                        // Left pending (and the turn open) for the TUI turn's end.
                        Next::Done
                    } else {
                        g.deciding = true;
                        Next::Decide(std::mem::take(&mut g.pending))
                    }
                })
                .await;
            let taken = match next {
                Next::Done => return Ok(()),
                Next::Clear => {
                    client.cancel_soft_interrupts(sid).await.map_err(fail)?;
                    continue;
                }
                Next::Decide(taken) => taken,
            };
            let _deciding = Deciding(&self.steering);
            let history = client.history(sid).await.map_err(fail)?;
            {
                // A TUI turn that began while the transcript was read may
                // have taken them: its end decides instead.
                let mut g = lock(&self.steering);
                if g.foreign_starts != mark {
                    let later = std::mem::take(&mut g.pending);
                    g.pending = taken;
                    g.pending.extend(later);
                    return Ok(());
                }
            }
            let (present, missing): (Vec<Accepted>, Vec<Accepted>) =
                taken.into_iter().partition(|a| {
                    history
                        .iter()
                        .any(|(r, c)| r == "user" && c.contains(a.text.as_str()))
                });
            carried.extend(present.into_iter().map(|a| a.carried));
            if missing.is_empty() {
                continue;
            }
            client.cancel_soft_interrupts(sid).await.map_err(fail)?;
            self.log.line(&format!(
                "{} soft interrupt(s) arrived as the turn ended; running them as a follow-up turn",
                missing.len()
            ));
            let text = missing
                .iter()
                .map(|a| a.text.as_str())
                .collect::<Vec<_>>()
                .join("\n\n");
            carried.extend(missing.into_iter().map(|a| a.carried));
            match self.run_one(client, &text, &mut |_| false, &mut None).await {
                Ok(RunEnd::Done(m)) => mark = m,
                Ok(RunEnd::Early(_)) => return Ok(()),
                Err(f) => {
                    drop(_deciding);
                    self.fail_steering(&f).await;
                    return Err(f);
                }
            }
        }
    }

    /// Send one message and follow its events to the end of the turn.
    pub(super) async fn run_one(
        self: &Arc<Self>,
        client: &Client,
        text: &str,
        on_tool: &mut (dyn FnMut(&TurnEv) -> bool + Send),
        accepted: &mut Option<tokio::sync::oneshot::Sender<()>>,
    ) -> std::result::Result<RunEnd, TurnFailure> {
        lock(&self.steering).open = true;
        self.foreign.store(false, Ordering::SeqCst);
        // When jcode first refused this message as busy: the deferral window
        // (`COTAL_JCODE_DEFERRAL_MAX_MS`) is measured from there on the seat's clock.
        let mut busy_since: Option<Duration> = None;
        let res = 'send: loop {
            // The pump lets go of the slot at the turn's end (or refusal).
            let (tx, mut rx) = mpsc::unbounded_channel();
            *lock(&self.slot) = Some(tx);
            let refusal = client
                .send_message(&self.plan.session_id, text)
                .await
                .map_err(|e| TurnFailure {
                    code: None,
                    message: e.to_string(),
                });
            let mut refusal = match refusal {
                Ok(r) => r,
                Err(f) => break Err(f),
            };
            // Written to jcode: from here the message may run (see `startup`).
            self.invoked.fetch_add(1, Ordering::SeqCst);
            let mut refusal_open = true;
            let mut progressed = false;
            break loop {
                tokio::select! {
                    ev = rx.recv() => match ev {
                        Some(TurnEv::Done(mark)) => break Ok(RunEnd::Done(mark)),
                        Some(TurnEv::Failed(stop)) => {
                            // A message refused as busy was not run and can be sent
                            // again: in the gap after turn_done (jcode acks, then
                            // refuses), or while a TUI turn runs. Once the turn
                            // streamed tools it is running, and an error is real.
                            if !progressed && stop.is_busy() {
                                let now = self.clock.elapsed();
                                let since = *busy_since.get_or_insert(now);
                                if now.saturating_sub(since) < self.plan.deferral_max {
                                    self.until_not_busy().await;
                                    continue 'send;
                                }
                                self.log.line("a message stayed refused as busy for the whole deferral window");
                            }
                            break Err(stop.failure());
                        }
                        Some(TurnEv::Closed) | None => break Err(TurnFailure { code: None, message: "the Harness connection closed during the turn".into() }),
                        Some(TurnEv::Accepted) => {
                            if let Some(a) = accepted.take() {
                                let _ = a.send(());
                            }
                        }
                        Some(ev) => {
                            progressed = true;
                            if on_tool(&ev) {
                                return Ok(RunEnd::Early(rx));
                            }
                        }
                    },
                    r = &mut refusal, if refusal_open => match r {
                        Ok(reply) => {
                            refusal_open = false;
                            if let Err(e) = crate::api::check_reply("send_message", reply.frame) {
                                break Err(TurnFailure { code: None, message: e.to_string() });
                            }
                        }
                        // The reply channel closes with the connection; the event side reports it.
                        Err(_) => refusal_open = false,
                    },
                }
            };
        };
        lock(&self.slot).take();
        res
    }

    /// Before re-sending a message jcode refused as busy: wait for a TUI turn
    /// the pump sees to end, else pace the retry (jcode's own gap after a
    /// turn_done lasts milliseconds).
    async fn until_not_busy(&self) {
        loop {
            let changed = self.pumped_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if !self.foreign.load(Ordering::SeqCst) {
                break;
            }
            if tokio::time::timeout(BUSY_PACE * 10, changed).await.is_err() {
                break;
            }
        }
        tokio::time::sleep(BUSY_PACE).await;
    }
}
