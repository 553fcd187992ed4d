//! `jucode-fake-serve`: a scripted engine that speaks serve protocol v2 on stdio, so the
//! daemon's tests can host sessions without a model.
//!
//! The text of a user message picks the script: `sleep <ms>`, `approve <command>`,
//! `flood <n> [<bytes>]`, `flood-timed <n> [<lines per write>]`, `stream <n> <interval-ms>`
//! (`n` stamped deltas, one every interval, as a model streams; other ops are served
//! meanwhile), `crash`, `replay <file>`, `tool <name> <json>` (an agent tool called through
//! the daemon's MCP server, see `agent_tool`); anything else is echoed back.
//!
//! `replay <file>` reads a JSONL file inside the session's directory and emits each line as an
//! event, verbatim, so a test can play any sequence of real serve-protocol events (the remote
//! page's suite draws reasoning, tool calls, diffs and hostile text this way). Three directives
//! are not emitted: `{"type":"_save","item":{…}}` appends a transcript item (what a reopen or a
//! snapshot shows), `{"type":"_sleep","ms":N}` pauses, and `{"type":"_approval","call_id":…,
//! "summary":…, …}` emits an `approval_request` with those fields and waits for `approve` as
//! `approve <command>` does. Without `_approval`, the turn ends after the last line. The conversation is kept in
//! `<cwd>/.jucode-fake/<session>.jsonl`, deferred actions in `<session>.actions.json`.

#[path = "fake_serve/agent_tool.rs"]
mod agent_tool;

use std::collections::VecDeque;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use jucode_clock::{Clock as _, SystemClock};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const VERSION: &str = "fake-0.1";
const DEFAULT_MODEL: &str = "fake-model";
const CONTEXT_WINDOW: u64 = 200_000;
const USAGE: &str =
    "usage: jucode-fake-serve serve --session <id> --cwd <dir> [--resume] [--add-dir <dir>]...";

struct Args {
    session: String,
    cwd: PathBuf,
    resume: bool,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args> {
    match args.next().as_deref() {
        Some("serve") => {}
        other => bail!("expected the `serve` subcommand, got {other:?}\n{USAGE}"),
    }
    let mut session = None;
    let mut cwd = None;
    let mut resume = false;
    while let Some(arg) = args.next() {
        // Accept both `--flag value` and `--flag=value`.
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_string(), Some(value.to_string()))
            }
            _ => (arg, None),
        };
        match flag.as_str() {
            "--session" => session = Some(flag_value(&flag, inline, &mut args)?),
            "--cwd" => cwd = Some(PathBuf::from(flag_value(&flag, inline, &mut args)?)),
            // Extra directories only widen what a real engine may touch; the fake touches nothing.
            "--add-dir" => {
                flag_value(&flag, inline, &mut args)?;
            }
            "--resume" => resume = true,
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let session = session.with_context(|| format!("--session is required\n{USAGE}"))?;
    if session.is_empty() || session.contains(['/', '\\']) || session.starts_with('.') {
        bail!("session id {session:?} cannot name a file");
    }
    let cwd = match cwd {
        Some(cwd) => cwd,
        None => std::env::current_dir().context("read the current directory")?,
    };
    Ok(Args {
        session,
        cwd,
        resume,
    })
}

fn flag_value(
    flag: &str,
    inline: Option<String>,
    args: &mut impl Iterator<Item = String>,
) -> Result<String> {
    match inline {
        Some(value) => Ok(value),
        None => args.next().with_context(|| format!("{flag} needs a value")),
    }
}

/// `JUCODE_ENGINE_OPTIONS` as an object; anything else counts as no options.
fn engine_options() -> Map<String, Value> {
    let Ok(raw) = std::env::var("JUCODE_ENGINE_OPTIONS") else {
        return Map::new();
    };
    match serde_json::from_str::<Value>(&raw) {
        Ok(Value::Object(map)) => map,
        _ if raw.trim().is_empty() => Map::new(),
        _ => {
            eprintln!(
                "jucode-fake-serve: ignoring JUCODE_ENGINE_OPTIONS, not a JSON object: {raw}"
            );
            Map::new()
        }
    }
}

/// Maps the v1/Desktop names onto the serve v2 ones; other names pass through.
fn canonical_mode(mode: &str) -> &str {
    match mode {
        "read-only" => "manual",
        "full-auto" => "full-access",
        other => other,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// First 12 bytes of SHA-256(name 0 arguments 0 cwd 0), as the real engine computes it.
fn action_digest(name: &str, arguments: &str, cwd: &str) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [name, arguments, cwd] {
        ctx.update(part.as_bytes());
        ctx.update(&[0]);
    }
    hex(&ctx.finish().as_ref()[..12])
}

fn unix_ms(clock: &SystemClock) -> u64 {
    clock.now_ms()
}

fn random_hex4() -> Result<String> {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 4];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| anyhow!("no system randomness"))?;
    Ok(hex(&bytes))
}

/// The part of a turn that waits on something; instant scripts never leave one behind.
enum Turn {
    /// `until` is on the engine clock's monotonic time.
    Sleeping {
        until: Duration,
        ms: u64,
    },
    Approval {
        call_id: String,
        command: String,
    },
    /// `stream <n> <ms>`: `left` deltas still to send, the next at `next` (monotonic).
    Streaming {
        left: usize,
        sent: usize,
        every: Duration,
        next: Duration,
    },
}

struct Message {
    content: String,
    images: Option<Value>,
}

enum Flow {
    Continue,
    Exit,
}

struct Engine {
    out: std::io::Stdout,
    session: String,
    cwd: String,
    transcript_path: PathBuf,
    actions_path: PathBuf,
    attended: bool,
    call_seq: u64,
    turn: Option<Turn>,
    queue: VecDeque<Message>,
    /// Deferred actions not yet decided, oldest first (mirrors the actions file).
    actions: Vec<Value>,
    /// A process of its own: no hub gives it a clock.
    clock: SystemClock,
}

impl Engine {
    fn open(args: &Args) -> Result<Engine> {
        let state_dir = args.cwd.join(".jucode-fake");
        std::fs::create_dir_all(&state_dir)
            .with_context(|| format!("create {}", state_dir.display()))?;
        let transcript_path = state_dir.join(format!("{}.jsonl", args.session));
        if !args.resume {
            std::fs::write(&transcript_path, b"")
                .with_context(|| format!("truncate {}", transcript_path.display()))?;
        }
        let actions_path = state_dir.join(format!("{}.actions.json", args.session));
        // Loaded even without --resume: the actions belong to the session id, not the run.
        let actions = load_actions(&actions_path)?;
        Ok(Engine {
            out: std::io::stdout(),
            session: args.session.clone(),
            cwd: args.cwd.display().to_string(),
            transcript_path,
            actions_path,
            attended: true,
            call_seq: 0,
            turn: None,
            queue: VecDeque::new(),
            actions,
            clock: SystemClock::new(),
        })
    }

    async fn emit(&mut self, event: Value) -> Result<()> {
        let mut line = serde_json::to_vec(&event).context("serialize event")?;
        line.push(b'\n');
        // A blocking write: tokio's stdout hands each line to a pool thread, ~30x slower
        // for `flood`; blocking on a full pipe is fine since the engine has nothing else to do.
        self.out.write_all(&line).context("write stdout")?;
        self.out.flush().context("flush stdout")
    }

    async fn error(&mut self, message: impl Into<String>) -> Result<()> {
        self.emit(json!({"type": "error", "message": message.into()}))
            .await
    }

    async fn status(&mut self, message: impl Into<String>) -> Result<()> {
        self.emit(json!({"type": "status", "message": message.into()}))
            .await
    }

    fn save(&self, item: &Value) -> Result<()> {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.transcript_path)
            .with_context(|| format!("open {}", self.transcript_path.display()))?;
        writeln!(file, "{item}")
            .with_context(|| format!("append to {}", self.transcript_path.display()))
    }

    fn save_actions(&self) -> Result<()> {
        let text = serde_json::to_string_pretty(&self.actions).context("serialize actions")?;
        let tmp = self.actions_path.with_extension("json.tmp");
        std::fs::write(&tmp, text).with_context(|| format!("write {}", tmp.display()))?;
        std::fs::rename(&tmp, &self.actions_path)
            .with_context(|| format!("replace {}", self.actions_path.display()))
    }

    async fn startup(&mut self, options: &Map<String, Value>, resume: bool) -> Result<()> {
        let model = options
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_MODEL)
            .to_string();
        let mode = canonical_mode(
            options
                .get("approval_mode")
                .and_then(Value::as_str)
                .unwrap_or("manual"),
        )
        .to_string();
        let state_dir = Path::new(&self.cwd).join(".jucode-fake");
        self.emit(json!({"type": "hello", "protocol": 2, "version": VERSION}))
            .await?;
        self.emit(json!({
            "type": "startup",
            "version": VERSION,
            "session_id": self.session,
            "profile_dir": state_dir.display().to_string(),
            "config_path": state_dir.join("config.json").display().to_string(),
            "cwd": self.cwd,
            "model": model,
            "context_window": CONTEXT_WINDOW,
        }))
        .await?;
        self.emit(json!({
            "type": "model_status",
            "provider": "fake",
            "model": model,
            "reasoning_effort": null,
            "context_window": CONTEXT_WINDOW,
            "context_limit": 180_000,
            "max_output_tokens": 8192,
            "reasoning_efforts": [],
            "state": "ready",
        }))
        .await?;
        self.emit(json!({
            "type": "command_list",
            "commands": [{"command": "/model", "marker": "", "args": "", "description": "switch model"}],
        }))
        .await?;
        self.emit(json!({"type": "approval_mode", "mode": mode}))
            .await?;
        self.emit(json!({"type": "mcp_servers", "servers": []}))
            .await?;
        if resume {
            let items = load_transcript(&self.transcript_path)?;
            self.emit(json!({"type": "transcript", "items": items}))
                .await?;
        }
        Ok(())
    }

    fn sleep_deadline(&self) -> Option<Duration> {
        match self.turn {
            Some(Turn::Sleeping { until, .. }) => Some(until),
            Some(Turn::Streaming { next, .. }) => Some(next),
            _ => None,
        }
    }

    async fn handle_line(&mut self, line: &[u8]) -> Result<Flow> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(Flow::Continue);
        }
        let op: Value = match serde_json::from_slice(line) {
            Ok(op) => op,
            Err(err) => {
                self.error(format!("invalid command: {err}")).await?;
                return Ok(Flow::Continue);
            }
        };
        let Some(name) = op.get("op").and_then(Value::as_str) else {
            self.error("invalid command: missing field `op`").await?;
            return Ok(Flow::Continue);
        };
        match name {
            "user_message" => self.op_user_message(&op).await?,
            "interrupt" => self.op_interrupt().await?,
            "steer" => self.op_steer().await?,
            "approve" => self.op_approve(&op).await?,
            "set_approval_mode" => self.op_set_approval_mode(&op).await?,
            "set_attended" => self.op_set_attended(&op).await?,
            "decide_action" => self.op_decide_action(&op).await?,
            "command" => {
                let input = op
                    .get("input")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .trim();
                if input == "/quit" || input == "/exit" {
                    return Ok(Flow::Exit);
                }
                let message = format!("command: {input}");
                self.emit(json!({"type": "info", "message": message}))
                    .await?;
            }
            "mcp_list" => {
                self.emit(json!({"type": "mcp_servers", "servers": []}))
                    .await?
            }
            "shutdown" => return Ok(Flow::Exit),
            other => {
                let message = format!("unknown op: {other}");
                self.error(message).await?;
            }
        }
        self.drain_queue().await?;
        Ok(Flow::Continue)
    }

    async fn op_user_message(&mut self, op: &Value) -> Result<()> {
        let Some(content) = op.get("content").and_then(Value::as_str) else {
            return self
                .error("invalid command: user_message requires content")
                .await;
        };
        let images = op.get("images").filter(|v| !v.is_null()).cloned();
        self.submit(Message {
            content: content.to_string(),
            images,
        })
        .await
    }

    /// Starts a turn, or queues the message behind the running one.
    async fn submit(&mut self, message: Message) -> Result<()> {
        if self.turn.is_none() {
            return self.start_turn(message).await;
        }
        self.queue.push_back(message);
        self.emit_pending().await?;
        let queued = format!("queued: {}", self.queue.len());
        self.status(queued).await
    }

    async fn emit_pending(&mut self) -> Result<()> {
        let messages: Vec<&str> = self.queue.iter().map(|m| m.content.as_str()).collect();
        let event = json!({"type": "pending_messages", "messages": messages});
        self.emit(event).await
    }

    /// Starts queued messages while no turn waits on anything.
    async fn drain_queue(&mut self) -> Result<()> {
        while self.turn.is_none() {
            let Some(next) = self.queue.pop_front() else {
                break;
            };
            self.emit_pending().await?;
            self.start_turn(next).await?;
        }
        Ok(())
    }

    async fn start_turn(&mut self, message: Message) -> Result<()> {
        let content = message.content;
        self.save(&json!({"role": "user", "content": content}))?;
        let mut event = json!({"type": "user_message", "content": content});
        if let (Some(images), Some(obj)) = (message.images, event.as_object_mut()) {
            obj.insert("images".into(), images);
        }
        self.emit(event).await?;
        self.emit(json!({"type": "connecting"})).await?;

        if let Some(ms) = content
            .strip_prefix("sleep ")
            .and_then(|s| s.trim().parse::<u64>().ok())
        {
            self.turn = Some(Turn::Sleeping {
                until: self.clock.elapsed() + Duration::from_millis(ms),
                ms,
            });
            return Ok(());
        }
        if let Some(command) = content.strip_prefix("approve ") {
            self.call_seq += 1;
            let call_id = format!("call_{}", self.call_seq);
            if self.attended {
                self.emit(json!({
                    "type": "approval_request",
                    "call_id": call_id,
                    "name": "bash",
                    "summary": command,
                    "subagent_id": null,
                    "hunks": null,
                }))
                .await?;
                self.turn = Some(Turn::Approval {
                    call_id,
                    command: command.to_string(),
                });
                return Ok(());
            }
            self.defer(&call_id, command).await?;
            return self.finish_deferred(&call_id).await;
        }
        if let Some((n, size)) = content.strip_prefix("flood ").and_then(|rest| {
            let mut words = rest.split_whitespace();
            let n = words.next()?.parse::<usize>().ok()?;
            let size = match words.next() {
                Some(size) => size.parse::<usize>().ok()?,
                None => 1,
            };
            Some((n, size))
        }) {
            // `flood <n> [<bytes>]`: n deltas of that many bytes each, as fast as they go.
            self.emit(json!({"type": "assistant_start"})).await?;
            let delta = "x".repeat(size);
            for _ in 0..n {
                self.emit(json!({"type": "assistant_delta", "delta": delta}))
                    .await?;
            }
            return self.finish(&delta.repeat(n)).await;
        }
        if let Some((n, batch)) = content.strip_prefix("flood-timed ").and_then(|rest| {
            let mut words = rest.split_whitespace();
            let n = words.next()?.parse::<usize>().ok()?;
            let batch = match words.next() {
                Some(batch) => batch.parse::<usize>().ok()?.max(1),
                None => 1,
            };
            Some((n, batch))
        }) {
            // For the fan-out bench: each delta carries its emission time (taken as its line
            // is formatted, so time spent waiting for the batch's write counts as latency).
            self.emit(json!({"type": "assistant_start"})).await?;
            // Lines written as text, not built as maps and serialized, and `batch` lines per
            // write: the bench measures the daemon, so its producer should cost about what
            // the bare broadcaster's does.
            let mut lines = Vec::with_capacity(64 * batch);
            let mut out = self.out.lock();
            for i in 0..n {
                let nanos = self.clock.now().as_nanosecond().max(0);
                writeln!(lines, r#"{{"type":"assistant_delta","delta":"t{nanos}"}}"#)
                    .context("format delta")?;
                if (i + 1) % batch == 0 || i + 1 == n {
                    out.write_all(&lines).context("write stdout")?;
                    out.flush().context("flush stdout")?;
                    lines.clear();
                }
            }
            drop(out);
            return self.finish(&format!("flooded {n}")).await;
        }
        if let Some((n, ms)) = content.strip_prefix("stream ").and_then(|rest| {
            let (n, ms) = rest.trim().split_once(' ')?;
            Some((n.parse::<usize>().ok()?, ms.trim().parse::<u64>().ok()?))
        }) {
            // For the load test: a paced stream that leaves the engine free to serve ops
            // between deltas, each delta stamped like flood-timed's.
            self.emit(json!({"type": "assistant_start"})).await?;
            self.turn = Some(Turn::Streaming {
                left: n,
                sent: 0,
                every: Duration::from_millis(ms),
                next: self.clock.elapsed(),
            });
            return Ok(());
        }
        if let Some(file) = content.strip_prefix("replay ") {
            return self.replay(file.trim()).await;
        }
        if let Some(call) = content.strip_prefix("tool ") {
            return self.agent_tool(call.trim()).await;
        }
        if content == "crash" {
            // Simulates an engine dying mid-turn: no further output, no cleanup.
            std::process::exit(3);
        }
        self.reply(&format!("echo: {content}")).await
    }

    /// The `tool <name> <json>` script: the call and its output as tool events, then the
    /// output as the reply.
    async fn agent_tool(&mut self, call: &str) -> Result<()> {
        let (name, args) = call.split_once(' ').unwrap_or((call, "{}"));
        let args: Value = match serde_json::from_str(args) {
            Ok(args) => args,
            Err(e) => {
                return self
                    .reply(&format!("tool: arguments are not JSON: {e}"))
                    .await;
            }
        };
        self.call_seq += 1;
        let call_id = format!("call_{}", self.call_seq);
        self.emit(json!({"type": "tool_start", "call_id": call_id, "name": name}))
            .await?;
        let (output, is_error) = match agent_tool::call(name, args).await {
            Ok(called) => (called.text, called.is_error),
            Err(e) => (format!("{e:#}"), true),
        };
        self.emit(
            json!({"type": "tool_output", "call_id": call_id, "name": name,
                         "output": output, "is_error": is_error}),
        )
        .await?;
        self.reply(&format!("tool said: {output}")).await
    }

    /// The `replay <file>` script (see the top of this file).
    async fn replay(&mut self, file: &str) -> Result<()> {
        let path = Path::new(&self.cwd).join(file);
        let inside = Path::new(file)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        let text = match std::fs::read_to_string(&path) {
            Ok(text) if inside => text,
            Ok(_) => {
                return self
                    .reply("replay: the file must be inside the session's directory")
                    .await;
            }
            Err(e) => {
                return self
                    .reply(&format!("replay: cannot read {file}: {e}"))
                    .await;
            }
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let event: Value =
                serde_json::from_str(line).with_context(|| format!("replay: not JSON: {line}"))?;
            match event.get("type").and_then(Value::as_str) {
                Some("_save") => self.save(event.get("item").unwrap_or(&Value::Null))?,
                Some("_sleep") => {
                    let ms = event.get("ms").and_then(Value::as_u64).unwrap_or(0);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                Some("_approval") => {
                    let mut request = event.clone();
                    if let Some(obj) = request.as_object_mut() {
                        obj.insert("type".into(), json!("approval_request"));
                    }
                    let call_id = event
                        .get("call_id")
                        .and_then(Value::as_str)
                        .unwrap_or("call_replay")
                        .to_string();
                    let command = event
                        .get("summary")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    self.emit(request).await?;
                    self.turn = Some(Turn::Approval { call_id, command });
                    return Ok(());
                }
                _ => self.emit(event).await?,
            }
        }
        self.finish("").await
    }

    async fn reply(&mut self, text: &str) -> Result<()> {
        self.emit(json!({"type": "assistant_start"})).await?;
        self.emit(json!({"type": "assistant_delta", "delta": text}))
            .await?;
        self.finish(text).await
    }

    /// Ends the turn: saves the assistant text and emits the end-of-turn events.
    async fn finish(&mut self, text: &str) -> Result<()> {
        self.turn = None;
        if !text.is_empty() {
            self.save(&json!({"role": "assistant", "content": text}))?;
        }
        self.emit(json!({
            "type": "usage",
            "input_tokens": 10,
            "cached_input_tokens": 0,
            "output_tokens": 5,
            "reasoning_tokens": 0,
        }))
        .await?;
        self.emit(json!({"type": "context_usage", "tokens": 15, "tokenizer": "fake", "cost": 0.0}))
            .await?;
        self.status("ready").await
    }

    /// The turn's deadline passed: a sleep ends, a stream sends its next delta.
    async fn finish_sleep(&mut self) -> Result<()> {
        match self.turn {
            Some(Turn::Sleeping { ms, .. }) => self.reply(&format!("slept {ms}")).await?,
            Some(Turn::Streaming {
                left,
                sent,
                every,
                next,
            }) => {
                if left == 0 {
                    self.finish(&format!("streamed {sent}")).await?;
                } else {
                    let nanos = self.clock.now().as_nanosecond().max(0);
                    self.emit(json!({"type": "assistant_delta", "delta": format!("t{nanos}")}))
                        .await?;
                    // Paced from the schedule, not from now, so a late wake does not slow
                    // the stream; a wake far behind catches up one delta at a time.
                    self.turn = Some(Turn::Streaming {
                        left: left - 1,
                        sent: sent + 1,
                        every,
                        next: next + every,
                    });
                    return Ok(());
                }
            }
            _ => {}
        }
        self.drain_queue().await
    }

    async fn tool_output(&mut self, call_id: &str, output: &str, is_error: bool) -> Result<()> {
        self.emit(json!({
            "type": "tool_output",
            "call_id": call_id,
            "name": "bash",
            "output": output,
            "is_error": is_error,
        }))
        .await?;
        self.save(&json!({"role": "tool", "name": "bash", "output": output}))
    }

    /// The model is told the call was submitted and the turn goes on.
    async fn finish_deferred(&mut self, call_id: &str) -> Result<()> {
        self.tool_output(call_id, "submitted for confirmation", false)
            .await?;
        self.reply("done").await
    }

    async fn defer(&mut self, call_id: &str, command: &str) -> Result<()> {
        let arguments = json!({"command": command}).to_string();
        let digest = action_digest("bash", &arguments, &self.cwd);
        let created_at = unix_ms(&self.clock);
        let id = format!("act-{created_at}-{}", random_hex4()?);
        let record = json!({
            "id": id,
            "session_id": self.session,
            "cwd": self.cwd,
            "call_id": call_id,
            "name": "bash",
            "arguments": arguments,
            "summary": command,
            "subagent_id": null,
            "digest": digest,
            "created_at": created_at,
        });
        self.actions.push(record.clone());
        self.save_actions()?;
        let mut event = Map::new();
        event.insert("type".into(), "action_deferred".into());
        if let Value::Object(fields) = record {
            event.extend(fields);
        }
        self.emit(Value::Object(event)).await
    }

    async fn op_interrupt(&mut self) -> Result<()> {
        if self.turn.take().is_none() {
            return Ok(());
        }
        self.emit(json!({"type": "info", "message": "request interrupted"}))
            .await?;
        self.status("interrupted").await?;
        self.status("ready").await
    }

    async fn op_steer(&mut self) -> Result<()> {
        if self.turn.is_none() || self.queue.is_empty() {
            return Ok(());
        }
        self.status("steering").await?;
        // drain_queue (run after every op) emits the updated queue and starts the next message.
        self.turn = None;
        Ok(())
    }

    async fn op_approve(&mut self, op: &Value) -> Result<()> {
        let Some(call_id) = op
            .get("call_id")
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
        else {
            return self.error("approve requires call_id").await;
        };
        let allow = match op.get("decision").and_then(Value::as_str) {
            Some("allow") => true,
            Some("deny") => false,
            _ => return self.error("approve requires decision: allow or deny").await,
        };
        match op.get("hunks") {
            None | Some(Value::Null) => {}
            Some(Value::Array(ids)) if ids.iter().all(Value::is_string) => {}
            Some(_) => {
                return self
                    .error("hunks must be an array of hunk id strings")
                    .await;
            }
        }
        let command = match &self.turn {
            Some(Turn::Approval {
                call_id: waiting,
                command,
            }) if waiting == call_id => command.clone(),
            _ => {
                let message = format!("no approval is waiting for {call_id}");
                return self.error(message).await;
            }
        };
        if allow {
            self.emit(json!({"type": "tool_start", "call_id": call_id, "name": "bash"}))
                .await?;
            self.tool_output(call_id, &format!("ran {command}\n"), false)
                .await?;
        } else {
            self.tool_output(call_id, "denied by the user", true)
                .await?;
        }
        self.reply("done").await
    }

    async fn op_set_approval_mode(&mut self, op: &Value) -> Result<()> {
        let Some(mode) = op.get("mode").and_then(Value::as_str) else {
            return self.error("set_approval_mode requires mode").await;
        };
        // Echoed as given so tests can see what the daemon forwarded.
        let mode = mode.to_string();
        self.status(format!("approval mode: {mode}")).await?;
        self.emit(json!({"type": "approval_mode", "mode": mode}))
            .await
    }

    async fn op_set_attended(&mut self, op: &Value) -> Result<()> {
        let Some(attended) = op.get("attended").and_then(Value::as_bool) else {
            return self
                .error("set_attended requires attended: true or false")
                .await;
        };
        self.attended = attended;
        let waiting = match self.turn.take() {
            Some(Turn::Approval { call_id, command }) if !attended => Some((call_id, command)),
            other => {
                self.turn = other;
                None
            }
        };
        match waiting {
            Some((call_id, command)) => {
                // Order as the real engine: the deferral, then the attended change, then the turn goes on.
                self.defer(&call_id, &command).await?;
                self.emit(json!({"type": "attended", "attended": false}))
                    .await?;
                self.finish_deferred(&call_id).await
            }
            None => {
                self.emit(json!({"type": "attended", "attended": attended}))
                    .await
            }
        }
    }

    async fn op_decide_action(&mut self, op: &Value) -> Result<()> {
        let id = op
            .get("action")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let decision = op
            .get("decision")
            .and_then(Value::as_str)
            .filter(|d| *d == "allow" || *d == "deny");
        let (Some(id), Some(decision)) = (id, decision) else {
            return self
                .error("decide_action requires action and decision: allow or deny")
                .await;
        };
        let Some(pos) = self
            .actions
            .iter()
            .position(|a| a.get("id").and_then(Value::as_str) == Some(id))
        else {
            let message = format!("unknown action: {id}");
            return self.error(message).await;
        };
        let record = self.actions.remove(pos);
        self.save_actions()?;
        let name = record.get("name").and_then(Value::as_str).unwrap_or("bash");
        let summary = record
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (output, content) = if decision == "allow" {
            let output = format!("ran {summary}\n");
            let content = format!(
                "[deferred action {id} approved and executed]\n`{name}` ({summary})\nresult:\n{output}"
            );
            (Value::from(output), content)
        } else {
            let content = format!(
                "[deferred action {id} declined]\nThe user declined `{name}` ({summary}). Do not retry it; ask the user if it is still needed."
            );
            (Value::Null, content)
        };
        self.emit(json!({
            "type": "action_decided",
            "id": id,
            "decision": decision,
            "output": output,
            "is_error": false,
        }))
        .await?;
        self.submit(Message {
            content,
            images: None,
        })
        .await
    }
}

fn load_transcript(path: &Path) -> Result<Vec<Value>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err).with_context(|| format!("read {}", path.display())),
    };
    // A torn last line (the engine was killed mid-write) is skipped, not fatal.
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect())
}

fn load_actions(path: &Path) -> Result<Vec<Value>> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(err) => Err(err).with_context(|| format!("read {}", path.display())),
    }
}

/// Waits for the sleep deadline, or forever when no turn sleeps.
async fn sleep_until(clock: &SystemClock, deadline: Option<Duration>) {
    match deadline {
        Some(deadline) => clock.sleep(deadline.saturating_sub(clock.elapsed())).await,
        None => std::future::pending().await,
    }
}

async fn serve(args: Args) -> Result<()> {
    let mut engine = Engine::open(&args)?;
    engine.startup(&engine_options(), args.resume).await?;
    let mut stdin = BufReader::new(tokio::io::stdin());
    // Kept across select! rounds: read_until is cancel-safe and appends partial reads here.
    let mut buf = Vec::new();
    loop {
        let deadline = engine.sleep_deadline();
        let clock = engine.clock.clone();
        tokio::select! {
            read = stdin.read_until(b'\n', &mut buf) => {
                read.context("read stdin")?;
                let eof = !buf.ends_with(b"\n");
                if !buf.is_empty() {
                    let line = std::mem::take(&mut buf);
                    if let Flow::Exit = engine.handle_line(&line).await? {
                        return Ok(());
                    }
                }
                if eof {
                    return Ok(());
                }
            }
            () = sleep_until(&clock, deadline) => engine.finish_sleep().await?,
        }
    }
}

fn main() {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(err) => {
            eprintln!("jucode-fake-serve: {err:#}");
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("jucode-fake-serve: build the tokio runtime: {err}");
            std::process::exit(1);
        }
    };
    // Exit without dropping the runtime: its blocking stdin reader could hold the process open.
    match runtime.block_on(serve(args)) {
        Ok(()) => std::process::exit(0),
        Err(err) => {
            eprintln!("jucode-fake-serve: {err:#}");
            std::process::exit(1);
        }
    }
}
