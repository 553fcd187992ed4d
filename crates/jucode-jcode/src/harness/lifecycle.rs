//! The live connection's lifecycle: the event pump, bring-up, the recovery window, startup turns
//! and readiness.

use super::*;

impl Shared {
    /// The pump of one connection: events in order; the close is reported once.
    pub(super) fn spawn_pump(
        self: &Arc<Self>,
        mut rx: mpsc::UnboundedReceiver<Value>,
        generation: u64,
    ) {
        let me = self.clone();
        self.active.store(false, Ordering::SeqCst);
        self.pumped.store(0, Ordering::SeqCst);
        tokio::spawn(async move {
            while let Some(frame) = rx.recv().await {
                me.on_event(&frame);
                me.pumped.fetch_add(1, Ordering::SeqCst);
                me.pumped_changed.notify_waiters();
            }
            if me.route(TurnEv::Closed) {
                *lock(&me.last_turn_error) =
                    Some("the Harness connection closed during the turn".into());
            }
            let _ = me.closed_tx.send(generation);
        });
    }

    /// Launch, connect and attach the planned session.
    async fn bring_up(self: &Arc<Self>) -> Result<(Instance, Arc<Client>)> {
        let inst = Instance::launch(&self.plan.spec).await?;
        let res = async {
            let label = self.generation.load(Ordering::SeqCst) + 1;
            let (client, rx) = Client::connect_logged(
                &self.plan.spec.home.api_socket(),
                "jucode-cotal-jcode/0.1",
                self.frames.as_ref().map(|f| f.for_conn(label.to_string())),
            )
            .await?;
            client.attach_session(&self.plan.session_id).await?;
            Ok::<_, Error>((client, rx))
        }
        .await;
        match res {
            Ok((client, rx)) => {
                let g = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
                self.spawn_pump(rx, g);
                Ok((inst, Arc::new(client)))
            }
            Err(e) => {
                inst.stop().await?;
                Err(e)
            }
        }
    }

    /// The supervisor: a closed connection opens one bounded recovery window.
    pub(super) async fn supervise(self: Arc<Self>, mut closed: mpsc::UnboundedReceiver<u64>) {
        while let Some(generation) = closed.recv().await {
            if self.shutting_down.load(Ordering::SeqCst)
                || generation != self.generation.load(Ordering::SeqCst)
            {
                continue;
            }
            // The window is measured from here.
            let clock = SystemClock::new();
            self.log
                .line("the private Harness connection closed; opening the recovery window");
            if self.recovered_once.swap(true, Ordering::SeqCst) {
                let mut line =
                    self.ending_line("a second disconnect after a successful replacement");
                if let Err(e) = self.stop_live().await {
                    line =
                        self.ending_line(&format!("second disconnect; unprovable teardown: {e}"));
                }
                self.end_seat(line);
                return;
            }
            self.signal(HarnessSignal::Reconnecting);
            let mut recovery_error;
            // Stopping the broken tree counts against the window.
            if let Err(e) = self.stop_live().await {
                let line = self.ending_line(&format!("unprovable teardown: {e}"));
                self.end_seat(line);
                return;
            }
            let mut attempt = 0u32;
            loop {
                attempt += 1;
                let remaining = self.recovery_window.saturating_sub(clock.elapsed());
                if remaining.is_zero() {
                    recovery_error = "the recovery window expired".to_string();
                    break;
                }
                match tokio::time::timeout(remaining, self.bring_up()).await {
                    Ok(Ok((inst, client))) => {
                        if self.shutting_down.load(Ordering::SeqCst) {
                            let _ = inst.stop().await;
                            return;
                        }
                        *self.live.lock().await = Some(Live {
                            client,
                            instance: Some(inst),
                            tui: None,
                        });
                        self.log.line(&format!(
                            "private Harness connection replaced (attempt {attempt}); session {} reattached",
                            self.plan.session_id
                        ));
                        self.signal(HarnessSignal::Reconnected);
                        recovery_error = String::new();
                        break;
                    }
                    Ok(Err(e)) => {
                        recovery_error = format!("{} ({})", e.code(), e);
                        self.log
                            .private(&format!("replacement attempt {attempt} failed: {e}"));
                        if e.is_permanent() {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    Err(_) => {
                        recovery_error = "the recovery window expired".to_string();
                        break;
                    }
                }
            }
            if !recovery_error.is_empty() {
                let line = self.ending_line(&recovery_error);
                self.end_seat(line);
                return;
            }
        }
    }

    /// The ending line: `last turn error:` first, then `recovery error:`, within 240 chars.
    fn ending_line(&self, recovery: &str) -> String {
        let mut line = String::from("private jcode lost");
        if let Some(e) = lock(&self.last_turn_error).as_ref() {
            let e: String = e.chars().take(120).collect();
            line.push_str(&format!("; last turn error: {e}"));
        }
        line.push_str(&format!("; recovery error: {recovery}"));
        line.chars().take(REAP_LINE_CHARS).collect()
    }

    pub(super) async fn stop_live(&self) -> Result<()> {
        let live = self.live.lock().await.take();
        let Some(mut live) = live else { return Ok(()) };
        if let Some(mut tui) = live.tui.take() {
            if let Some(pid) = tui.id() {
                let _ = crate::instance::stop_pids(&[pid]).await;
            }
            let _ = tui.wait().await;
        }
        drop(live.client);
        match live.instance.take() {
            Some(inst) => inst.stop().await,
            None => Ok(()),
        }
    }

    /// After the seat joined: the notice, and the spawn `--prompt` if any.
    pub(super) async fn startup_turns(self: Arc<Self>) {
        let sid = self.plan.session_id.clone();
        let prompt = self.plan.prompt.clone();
        let first = match &prompt {
            Some(p) => {
                if let Some(c) = self.client().await
                    && let Err(e) = c.send_no_reply(&sid, JOIN_NOTICE).await
                {
                    self.log
                        .line(&format!("post-join notice refused: {}", e.code()));
                    self.log.private(&format!("post-join notice: {e}"));
                }
                self.log.line("submitting the spawn --prompt");
                p.clone()
            }
            None => JOIN_NOTICE.to_string(),
        };
        // Driven as a turn the seat sees as busy; consumed once, never retried.
        self.signal(HarnessSignal::TurnStarted);
        let res = self.turn(&first, |_| false).await;
        // send_replace: `send` drops the value while no receiver exists, and a
        // turn that comes later would then wait on the gate forever.
        self.startup_gate.send_replace(true);
        if let Err(f) = &res {
            self.log.line("the startup turn failed; it is not retried");
            self.log.private(&format!("startup turn: {}", f.message));
        }
        self.signal(HarnessSignal::TurnEnded { ok: res.is_ok() });
    }

    /// Wait (bounded) until jcode's log shows the cotal MCP server connected.
    async fn wait_for_mcp_hint(&self) -> bool {
        let clock = SystemClock::new();
        loop {
            if self.jcode_logs.appended_contains(MCP_READY_HINT) {
                return true;
            }
            if clock.elapsed() >= self.mcp_hint_wait {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The readiness proof: call cotal_orientation; once more if jcode's first
    /// turn used its pre-MCP tool snapshot; the bound covers both.
    pub(super) async fn readiness(self: &Arc<Self>, bound: Duration) -> Result<()> {
        self.log.line(&format!(
            "pre-join readiness: orientation proof in flight (bound {}s)",
            bound.as_secs()
        ));
        let observed = Arc::new(AtomicBool::new(false));
        let proof = async {
            for attempt in 1..=2 {
                let obs = observed.clone();
                let res = self
                    .turn(ORIENTATION_PROMPT, |ev| match ev {
                        TurnEv::ToolStart(n) if is_orientation(n) => {
                            obs.store(true, Ordering::SeqCst);
                            false
                        }
                        TurnEv::ToolDone(n) => is_orientation(n),
                        _ => false,
                    })
                    .await;
                match res {
                    Ok(true) => return Ok(()),
                    Ok(false) => {
                        self.log.private(&format!(
                            "orientation attempt {attempt}: the turn ended without cotal_orientation (tool snapshot predates MCP?)"
                        ));
                        if attempt == 1 {
                            // On a loaded host the MCP server can come up after the
                            // second turn too: pace the one repeat on jcode saying so.
                            let seen = self.wait_for_mcp_hint().await;
                            self.log.private(&format!(
                                "repeating the proof; jcode {} the cotal MCP server connected",
                                if seen {
                                    "reported"
                                } else {
                                    "did not report (within the wait)"
                                }
                            ));
                        }
                    }
                    Err(f) => {
                        self.log
                            .private(&format!("readiness turn failed: {}", f.message));
                        let code = f.code.unwrap_or_else(|| "internal".into());
                        let rejected = self.rejected_value(&code, &f.message);
                        return Err(Error::ProviderRefused { code, rejected });
                    }
                }
            }
            Err(Error::Readiness(
                "cotal_orientation was absent from two readiness turns; the cotal MCP bridge never came up"
                    .into(),
            ))
        };
        let res = match tokio::time::timeout(bound, proof).await {
            Ok(r) => r,
            Err(_) => Err(Error::ReadinessTimeout {
                observed: observed.load(Ordering::SeqCst),
            }),
        };
        match &res {
            Ok(()) => self.log.line(if self.plan.prompt.is_some() {
                "readiness: orientation proved; joining, then submitting the spawn --prompt"
            } else {
                "readiness: orientation proved; joining with no spawn --prompt"
            }),
            Err(Error::ProviderRefused { code, rejected }) => self.log.line(&match rejected {
                Some(r) => format!("readiness: provider refusal ({code}; rejected {r})"),
                None => format!("readiness: provider refusal ({code})"),
            }),
            Err(Error::ReadinessTimeout { observed }) => self.log.line(&format!(
                "readiness: timeout after {}s (orientation call observed: {observed})",
                bound.as_secs()
            )),
            Err(e) => self.log.line(&format!("readiness: failed ({})", e.code())),
        }
        res
    }

    /// Which connector-visible input an `invalid_request` refusal of the
    /// readiness turn rejected: the requested model id or effort value when
    /// the refusal names it. Nothing else of the provider's text is kept.
    fn rejected_value(&self, code: &str, message: &str) -> Option<String> {
        if code != "invalid_request" {
            return None;
        }
        let named = |v: &Option<String>| {
            v.as_deref()
                .filter(|v| !v.is_empty() && message.contains(v))
                .map(str::to_string)
        };
        if let Some(m) = named(&self.plan.model) {
            return Some(format!("model {m:?}"));
        }
        named(&self.plan.variant).map(|v| format!("reasoning effort {v:?}"))
    }
}
