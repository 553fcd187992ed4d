//! The live connection's lifecycle: the event pump, the teardown of the live tree, and readiness
//! (the recovery window is `recovery`, the post-join startup turn `startup`).

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
        self.live_changed.notify_waiters();
        match live.instance.take() {
            Some(inst) => inst.stop().await,
            None => Ok(()),
        }
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
