//! The CLI's process: its flags, its start and restart, the loop that feeds it ops and reads
//! its frames, and its stop.

use super::*;

impl ClaudeAgent {
    /// Writes the MCP configuration and the prompt for `session`'s next start; returns the
    /// flags naming them.
    fn flags(&self, session: &str) -> Result<Vec<String>, EngineError> {
        let unwritable = |path: &Path, e: std::io::Error| {
            EngineError::Unavailable(format!("{}: {e}", path.display()))
        };
        let config = self.files.join(format!("{session}.mcp.json"));
        let body = agent_tools::claude_mcp_config(&self.tools.mcp).to_string();
        agent_tools::write_private(&config, body.as_bytes()).map_err(|e| unwritable(&config, e))?;
        let mut flags = vec![format!("--mcp-config={}", config.display())];
        let prompt = self.tools.prompt();
        if !prompt.trim().is_empty() {
            let file = self.files.join(format!("{session}.prompt.md"));
            agent_tools::write_private(&file, prompt.as_bytes())
                .map_err(|e| unwritable(&file, e))?;
            flags.push(format!("--append-system-prompt-file={}", file.display()));
            // Claude Code would keep the prompt of the conversation's first request on every
            // resume; the agent's brief changes, so it is rendered from this start's file.
            flags.push("--system-prompt-snapshot=off".into());
        }
        Ok(flags)
    }

    /// Removes the files (the capability in them is revoked once the CLI is gone anyway).
    fn remove(&self, session: &str) {
        for name in [
            format!("{session}.mcp.json"),
            format!("{session}.prompt.md"),
        ] {
            let _ = std::fs::remove_file(self.files.join(name));
        }
    }
}

impl Claude {
    fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "--print",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
            "--permission-prompt-tool",
            "stdio",
            "--permission-mode",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(permission_mode(self.mode).to_string());
        if self.mode == ApprovalMode::FullAccess {
            args.push("--dangerously-skip-permissions".into());
        }
        // The `=` form keeps an id that starts with `-` from being read as a flag.
        if self.conversation_saved {
            args.push(format!("--resume={}", self.session));
            if let Some(at) = &self.options.resume_at {
                args.push(format!("--resume-session-at={at}"));
            }
        } else {
            args.push(format!("--session-id={}", self.session));
        }
        if let Some(model) = &self.model {
            args.push("--model".into());
            args.push(model.clone());
        }
        if let Some(effort) = &self.options.effort {
            args.push("--effort".into());
            args.push(effort.clone());
        }
        for dir in &self.extra_dirs {
            args.push("--add-dir".into());
            args.push(dir.display().to_string());
        }
        args
    }

    /// Starts the CLI (again) and sends `initialize`.
    pub(super) fn spawn(&mut self) -> Result<(), EngineError> {
        self.generation += 1;
        let mut args = self.args();
        if let Some(agent) = &self.agent {
            args.extend(agent.flags(&self.session)?);
        }
        args.extend(self.gateway.flag()?);
        let child = ChildProc::spawn(
            Spawn {
                program: &self.program,
                args,
                cwd: &self.cwd,
                env: &self.options.env,
                // Claude Code refuses to start inside another Claude Code session.
                env_remove: &["CLAUDECODE"],
                generation: self.generation,
                label: "claude".into(),
            },
            self.input_tx.clone(),
        )?;
        self.child = Some(child);
        Ok(())
    }

    pub(super) async fn run(
        mut self,
        mut ops: mpsc::UnboundedReceiver<Object>,
        mut input: mpsc::UnboundedReceiver<Input>,
    ) {
        if !self.open().await {
            self.shutdown(&mut input).await;
            return;
        }
        loop {
            tokio::select! {
                op = ops.recv() => {
                    let Some(op) = op else { break };
                    if !self.on_op(op, &mut input).await {
                        break;
                    }
                }
                got = input.recv() => match got {
                    Some(Input::Frame(generation, frame)) if generation == self.generation => {
                        if !self.on_frame(frame, &mut input).await {
                            break;
                        }
                    }
                    Some(Input::Exited(generation, how)) if generation == self.generation => {
                        self.child = None;
                        self.remove_agent_files();
                        self.sink.exited(Some(how)).await;
                        return;
                    }
                    Some(_) => {}
                    None => break,
                },
            }
        }
        self.shutdown(&mut input).await;
    }

    /// The session's first events and the CLI's `initialize`; `false` ends the session.
    pub(super) async fn open(&mut self) -> bool {
        self.emit_start().await && {
            self.control(Request::Initialize, initialize_request())
                .await;
            true
        }
    }

    /// Stops the CLI, waits for it, and reports a requested stop.
    async fn shutdown(&mut self, input: &mut mpsc::UnboundedReceiver<Input>) {
        if let Some(child) = self.child.take() {
            let generation = child.generation;
            child.stop();
            wait_exit(input, generation).await;
        }
        self.remove_agent_files();
        self.sink.exited(None).await;
    }

    fn remove_agent_files(&self) {
        self.gateway.remove();
        if let Some(agent) = &self.agent {
            agent.remove(&self.session);
        }
    }

    async fn emit_start(&mut self) -> bool {
        let startup = self.startup_event();
        let mode = event("approval_mode", json!({ "mode": self.mode.as_str() }));
        let model = self.model_status();
        if !(self.sink.state(startup).await
            && self.sink.state(model).await
            && self.sink.state(mode).await)
        {
            return false;
        }
        // A reopened session starts from the conversation Claude Code saved.
        match crate::history::claude_transcript_path(&self.config_dir, &self.session) {
            Some(path) if self.conversation_saved => {
                let items = crate::history::claude_transcript(&path);
                if !self
                    .emit(event("transcript", json!({ "items": items })))
                    .await
                {
                    return false;
                }
                if self.runs.load_saved(&self.config_dir, &self.session) {
                    return self.runs_changed().await;
                }
                true
            }
            _ => true,
        }
    }
}
