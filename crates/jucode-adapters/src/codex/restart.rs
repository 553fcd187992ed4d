//! `set_gateway`: the model provider is a start flag of `codex app-server`, so a switch starts a
//! new process (with or without the gateway's `-c` overrides and key) that continues the
//! conversation with `thread/fork`: Codex refuses to resume a thread on another provider than
//! the one it was started on, and a fork takes the new process's provider with the whole
//! history (the session then maps to the fork). At once when idle, once the running turn ends
//! when busy; messages sent meanwhile wait in the queue and go to the new process once its
//! thread is open.

use std::path::{Path, PathBuf};

use super::*;
use crate::gateway::GatewayEndpoint;

/// Everything a start of the app-server needs but the gateway's part.
pub(super) struct Launch {
    pub(super) program: PathBuf,
    /// `app-server` and the agent's overrides.
    pub(super) args: Vec<String>,
    pub(super) env: Vec<(String, String)>,
    pub(super) endpoint: Option<GatewayEndpoint>,
    pub(super) input: mpsc::UnboundedSender<Input>,
}

impl Launch {
    pub(super) fn spawn(
        &self,
        cwd: &Path,
        gateway: bool,
        generation: u64,
    ) -> Result<ChildProc, EngineError> {
        let mut args = self.args.clone();
        let mut env = self.env.clone();
        if gateway {
            let endpoint = self.endpoint.as_ref().ok_or_else(|| {
                EngineError::Unavailable("jucode_gateway: not signed in to JuCode".into())
            })?;
            let (overrides, key) = crate::gateway::codex_overrides(endpoint);
            args.extend(overrides);
            env.retain(|(name, _)| *name != key.0);
            env.push(key);
        }
        ChildProc::spawn(
            crate::child::Spawn {
                program: &self.program,
                args,
                cwd,
                env: &env,
                env_remove: &[],
                generation,
                label: "codex".into(),
            },
            self.input.clone(),
        )
    }
}

/// What `initialize` tells Codex about its client.
pub(super) fn initialize_params() -> Value {
    json!({
        "clientInfo": {"name": "jucode", "title": "jucode daemon", "version": env!("CARGO_PKG_VERSION")},
        "capabilities": {"experimentalApi": false},
    })
}

/// A restart asked for and not done yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Restart {
    None,
    /// Once the running turn ends.
    AfterTurn,
    /// Before the next op or frame is handled.
    Now,
}

impl Codex {
    /// `set_gateway {gateway, model?}`.
    pub(super) async fn set_gateway(&mut self, op: &Object) -> bool {
        let Some(on) = op.get("gateway").and_then(Value::as_bool) else {
            return self
                .emit(error("set_gateway: gateway must be true or false"))
                .await;
        };
        if on && self.launch.endpoint.is_none() {
            return self
                .emit(error(
                    "set_gateway: not signed in to JuCode (no gateway login in ~/.jucode/auth.json)",
                ))
                .await;
        }
        if let Some(model) = op.get("model").and_then(Value::as_str) {
            self.model = Some(model.to_string());
        }
        if on == self.gateway && self.restart == Restart::None {
            return true;
        }
        self.gateway = on;
        self.restart = if self.busy || self.thread.is_none() && self.child.is_some() {
            // A thread still opening is waited for like a turn: `thread_open` checks again.
            Restart::AfterTurn
        } else {
            Restart::Now
        };
        true
    }

    /// A turn ended (or the thread opened): a restart waiting for it is due now.
    pub(super) fn turn_over(&mut self) {
        if self.restart == Restart::AfterTurn {
            self.restart = Restart::Now;
        }
    }

    /// Stops the process, waits for it to finish writing the thread, starts the next one and
    /// resumes the thread there; queued messages follow once it is open.
    pub(super) async fn restart_if_due(
        &mut self,
        input: &mut mpsc::UnboundedReceiver<Input>,
    ) -> bool {
        if self.restart != Restart::Now {
            return true;
        }
        self.restart = Restart::None;
        let mut generation = 1;
        if let Some(child) = self.child.take() {
            generation = child.generation + 1;
            let old = child.generation;
            child.stop();
            crate::child::wait_exit(input, old).await;
        }
        if let Some(thread) = self.thread.take() {
            self.resume_thread = Some(thread);
        }
        self.reopening = true;
        self.requests.clear();
        self.approvals.take_all();
        self.busy = false;
        self.turn = None;
        match self.launch.spawn(&self.cwd, self.gateway, generation) {
            Ok(child) => self.child = Some(child),
            Err(e) => {
                self.sink
                    .exited(Some(format!("could not restart Codex: {e}")))
                    .await;
                return false;
            }
        }
        let init = initialize_params();
        let what = if self.gateway {
            "Codex restarted on the JuCode gateway"
        } else {
            "Codex restarted off the JuCode gateway"
        };
        self.emit(status(what)).await && self.request(Request::Initialize, "initialize", init).await
    }
}
