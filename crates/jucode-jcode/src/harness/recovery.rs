//! The recovery window: when the private Harness connection closes, one
//! bounded window (60 s from the close, on the seat's clock) for a private
//! replacement on the same session. Stopping the broken tree counts against
//! it; a transient failure is retried inside it; every failed or cut-off
//! replacement is proven stopped (explicitly, awaited) before the next
//! launch or the end; a permanent refusal, an unprovable teardown, the
//! window expiring or a second disconnect after a successful replacement
//! ends the seat with the line naming `last turn error:` and `recovery error:`.

use super::*;

/// The pause between two replacement attempts (inside the window).
pub const RETRY_PACE: Duration = Duration::from_millis(500);

impl Shared {
    /// Launch, connect and attach the planned session, cut off by `deadline`.
    /// Whatever was launched is stopped (and proven gone) before an error
    /// returns; a cut-off launch returns [`Error::WindowExpired`].
    async fn bring_up(
        self: &Arc<Self>,
        mut deadline: jucode_clock::Sleep,
    ) -> Result<(Instance, Arc<Client>)> {
        let inst = Instance::launch_until(&self.plan.spec, &mut deadline).await?;
        let label = self.generation.load(Ordering::SeqCst) + 1;
        let connect = async {
            let (client, rx) = Client::connect_logged(
                &self.plan.spec.home.api_socket(),
                "jucode-cotal-jcode/0.1",
                self.frames.as_ref().map(|f| f.for_conn(label.to_string())),
            )
            .await?;
            client.attach_session(&self.plan.session_id).await?;
            Ok::<_, Error>((client, rx))
        };
        let res = tokio::select! {
            r = connect => r,
            _ = &mut deadline => Err(Error::WindowExpired),
        };
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
            let opened = self.clock.elapsed();
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
            // A seat stopping meanwhile waits for this window's trees to be proven gone.
            let _recovering = self.recovery_lock.lock().await;
            if self.shutting_down.load(Ordering::SeqCst) {
                return;
            }
            self.reconnecting.store(true, Ordering::SeqCst);
            self.signal(HarnessSignal::Reconnecting);
            // Stopping the broken tree counts against the window.
            if let Err(e) = self.stop_live().await {
                let line = self.ending_line(&format!("unprovable teardown: {e}"));
                self.end_seat(line);
                return;
            }
            match self.recover(opened).await {
                Ok(()) => {}
                Err(None) => return,
                Err(Some(recovery_error)) => {
                    let line = self.ending_line(&recovery_error);
                    self.end_seat(line);
                    return;
                }
            }
        }
    }

    /// Replacement attempts until one attaches, the window closes or a refusal
    /// is permanent. `Err(None)`: the seat is stopping.
    async fn recover(
        self: &Arc<Self>,
        opened: Duration,
    ) -> std::result::Result<(), Option<String>> {
        let expired = || Some("the recovery window expired".to_string());
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let used = self.clock.elapsed().saturating_sub(opened);
            let remaining = self.recovery_window.saturating_sub(used);
            if remaining.is_zero() {
                return Err(expired());
            }
            // The launch is cut off by the window's end or by the seat stopping.
            let sleep = self.clock.sleep(remaining);
            let me = self.clone();
            let deadline: jucode_clock::Sleep = Box::pin(async move {
                tokio::select! {
                    _ = sleep => {}
                    _ = me.until_stopping() => {}
                }
            });
            match self.bring_up(deadline).await {
                Ok((inst, client)) => {
                    if self.shutting_down.load(Ordering::SeqCst) {
                        if let Err(e) = inst.stop().await {
                            self.log.line(&format!("teardown at stop failed: {e}"));
                        }
                        return Err(None);
                    }
                    *self.live.lock().await = Some(Live {
                        client,
                        instance: Some(inst),
                        tui: None,
                    });
                    self.reconnecting.store(false, Ordering::SeqCst);
                    self.live_changed.notify_waiters();
                    self.log.line(&format!(
                        "private Harness connection replaced (attempt {attempt}); session {} reattached",
                        self.plan.session_id
                    ));
                    self.signal(HarnessSignal::Reconnected);
                    return Ok(());
                }
                Err(Error::WindowExpired) if self.shutting_down.load(Ordering::SeqCst) => {
                    return Err(None);
                }
                Err(Error::WindowExpired) => {
                    self.log.line(
                        "the recovery window closed during a replacement launch; its tree was proven stopped",
                    );
                    return Err(expired());
                }
                Err(e) => {
                    self.log
                        .private(&format!("replacement attempt {attempt} failed: {e}"));
                    if e.is_permanent() {
                        return Err(Some(format!("{} ({})", e.code(), e)));
                    }
                    self.log.line(&format!(
                        "replacement attempt {attempt} failed ({}); retrying inside the window",
                        e.code()
                    ));
                    let used = self.clock.elapsed().saturating_sub(opened);
                    let left = self.recovery_window.saturating_sub(used);
                    tokio::select! {
                        _ = self.clock.sleep(RETRY_PACE.min(left)) => {}
                        _ = self.until_stopping() => return Err(None),
                    }
                }
            }
        }
    }

    /// Resolves once the seat is stopping.
    pub(super) async fn until_stopping(&self) {
        loop {
            let n = self.stopping.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if self.shutting_down.load(Ordering::SeqCst) {
                return;
            }
            n.await;
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
}
