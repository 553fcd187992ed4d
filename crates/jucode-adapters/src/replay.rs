//! An adapter session with no engine process: stdout lines are handed to it one at a time and
//! the events it sends back are returned. The seam the fuzz targets use (`fuzz/`), and a way
//! for tests to drive the line translation without a CLI.
//!
//! Each line goes the way the child's stdout reader sends it (`child::frame_of`), then to
//! the adapter's own frame handling, so what runs is what runs under a real CLI. What the
//! adapter writes to the engine is kept ([`Replay::written`]); nothing is ever started (an ACP session's terminals have no
//! directory to run in, and the program paths cannot exist). The session's own files (Codex's
//! thread map, ACP `fs/write_text_file`) go under the directory given to [`Replay::new`].

use std::path::Path;

use jucode_engine::{EVENT_BUFFER, EngineError, EngineOutput, StartSpec};
use jucode_protocol::Object;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

use crate::AdapterConfig;
use crate::acp::{Acp, AcpEngine};
use crate::child::{Driven, Input, Written, frame_of};
use crate::claude::{Claude, ClaudeEngine};
use crate::codex::{Codex, CodexEngine};

/// Whose stdout the lines are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// Claude Code's stream-json and control protocol.
    Claude,
    /// `codex app-server` JSON-RPC.
    Codex,
    /// An ACP agent's JSON-RPC.
    Acp,
}

/// Why a replay could not start.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("no async runtime for the replay: {0}")]
    Runtime(#[from] std::io::Error),
    #[error("the session did not start: {0}")]
    Start(#[from] EngineError),
}

enum Session {
    Claude(Box<Claude>),
    Codex(Box<Codex>),
    Acp(Box<Acp>),
}

/// The async runtime a replay runs on. A caller that runs many replays in a row (the fuzz
/// targets) keeps one instead of making and dropping one for each: [`Replay::on`] takes it
/// and [`Replay::into_runtime`] gives it back.
pub struct ReplayRuntime(Runtime);

impl ReplayRuntime {
    /// A runtime as a replay needs it: the current thread, timers on.
    pub fn new() -> Result<ReplayRuntime, ReplayError> {
        Ok(ReplayRuntime(
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()?,
        ))
    }
}

impl std::fmt::Debug for ReplayRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayRuntime")
            .field("tasks", &self.0.metrics().num_alive_tasks())
            .finish()
    }
}

/// One session of `engine`, fed stdout lines by [`Replay::line`].
pub struct Replay {
    runtime: Runtime,
    session: Session,
    events: mpsc::Receiver<EngineOutput>,
    /// The adapter's input stream besides frames: handed to the frame handling that takes it
    /// (it waits there for an old process's exit on a restart).
    input: mpsc::UnboundedReceiver<Input>,
    /// The adapter said the session ends: later lines are not handed over.
    ended: bool,
    /// What the session sent while opening (`startup`, `model_status`, …).
    opening: Vec<EngineOutput>,
    written: Written,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay")
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Replay {
    /// Opens a session of `engine` working in `dir` (which must exist), with its homes
    /// under it too, as a new session (Claude Code's id a fixed UUID).
    pub fn new(engine: Engine, dir: &Path) -> Result<Replay, ReplayError> {
        Replay::on(ReplayRuntime::new()?, engine, dir)
    }

    /// [`Replay::new`] on a runtime the caller kept from an earlier replay.
    pub fn on(runtime: ReplayRuntime, engine: Engine, dir: &Path) -> Result<Replay, ReplayError> {
        let ReplayRuntime(runtime) = runtime;
        let config = AdapterConfig {
            jucode_home: dir.join("jucode-home"),
            user_home: dir.join("user-home"),
            gateway: None,
        };
        let mut options = Object::new();
        if engine == Engine::Acp {
            options.insert("command".into(), "acp".into());
        }
        let spec = StartSpec {
            session: "00000000-0000-4000-8000-000000000001".into(),
            cwd: dir.to_path_buf(),
            extra_dirs: Vec::new(),
            options,
            resume: false,
            agent: None,
        };
        let (events_tx, mut events) = mpsc::channel(EVENT_BUFFER);
        let (input_tx, input) = mpsc::unbounded_channel();
        let written = Written::default();
        let kept = written.clone();
        let session = runtime.block_on(async {
            Ok::<_, EngineError>(match engine {
                Engine::Claude => Session::Claude(Box::new(
                    ClaudeEngine::new(config)
                        .replay(spec, events_tx, input_tx, kept)
                        .await?,
                )),
                Engine::Codex => Session::Codex(Box::new(
                    CodexEngine::new(config)
                        .replay(spec, events_tx, input_tx, kept)
                        .await?,
                )),
                Engine::Acp => Session::Acp(Box::new(
                    AcpEngine::new(config)
                        .replay(spec, events_tx, input_tx, kept)
                        .await?,
                )),
            })
        })?;
        let mut opening = Vec::new();
        while let Ok(out) = events.try_recv() {
            opening.push(out);
        }
        Ok(Replay {
            runtime,
            session,
            events,
            input,
            ended: false,
            opening,
            written,
        })
    }

    /// Ends the session and gives its runtime back for another replay, but only with no task
    /// left on it (none is started today; should a session leave one, it would run during the
    /// next replay), so a replay on a kept runtime runs as on a new one. `None` otherwise.
    pub fn into_runtime(self) -> Option<ReplayRuntime> {
        let Replay {
            runtime,
            session,
            events,
            input,
            ..
        } = self;
        {
            // Inside the runtime: a drop that spawned would show below, not panic.
            let _inside = runtime.enter();
            drop((session, events, input));
        }
        (runtime.metrics().num_alive_tasks() == 0).then_some(ReplayRuntime(runtime))
    }

    /// What the session sent while it opened.
    pub fn opening(&self) -> &[EngineOutput] {
        &self.opening
    }

    /// The frames the adapter wrote to the engine since the last call, in order.
    pub fn written(&mut self) -> Vec<serde_json::Value> {
        let bytes = self.written.take();
        bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect()
    }

    /// Whether the adapter ended the session (after which lines are ignored).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Hands over one stdout line (without its newline) and returns what the session sent
    /// for it. Lines that are not JSON objects send nothing, as from a real CLI.
    pub fn line(&mut self, line: &str) -> Vec<EngineOutput> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        let Some(frame) = frame_of(line, "replay") else {
            return out;
        };
        let Replay {
            runtime,
            session,
            events,
            input,
            ended,
            ..
        } = self;
        runtime.block_on(async {
            let handled = async {
                // As `Claude::run` and `child::drive` do: the frame, then (for the driven
                // adapters) the work due between inputs.
                match session {
                    Session::Claude(claude) => claude.frame(frame, input).await,
                    Session::Codex(codex) => {
                        codex.on_frame(frame).await && codex.between(input).await
                    }
                    Session::Acp(acp) => acp.on_frame(frame).await && acp.between(input).await,
                }
            };
            tokio::pin!(handled);
            // Read events while the frame is handled: the channel is bounded, so a frame that
            // sends more than it holds would otherwise wait forever.
            let keep = loop {
                tokio::select! {
                    biased;
                    Some(got) = events.recv() => out.push(got),
                    keep = &mut handled => break keep,
                }
            };
            while let Ok(got) = events.try_recv() {
                out.push(got);
            }
            *ended = !keep || out.iter().any(|o| matches!(o, EngineOutput::Exited { .. }));
        });
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn kinds(out: &[EngineOutput]) -> Vec<String> {
        out.iter()
            .map(|o| match o {
                EngineOutput::Event(e) => e.kind().to_string(),
                EngineOutput::Delta(_) => "assistant_delta".into(),
                EngineOutput::Exited { .. } => "exited".into(),
            })
            .collect()
    }

    fn event<'a>(out: &'a [EngineOutput], kind: &str) -> &'a jucode_protocol::serve::Event {
        out.iter()
            .find_map(|o| match o {
                EngineOutput::Event(e) if e.kind() == kind => Some(e),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no {kind} in {:?}", kinds(out)))
    }

    #[test]
    fn claude_text_deltas_become_assistant_events() {
        let dir = tempfile::tempdir().unwrap();
        let mut replay = Replay::new(Engine::Claude, dir.path()).unwrap();
        assert!(kinds(replay.opening()).contains(&"startup".to_string()));
        let init = replay.written();
        assert_eq!(init[0]["request"]["subtype"], "initialize");
        assert_eq!(init[0]["request_id"], "req_1_jucode");
        let start = json!({"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}});
        replay.line(&start.to_string());
        let delta = json!({"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"tool said: hi"}}});
        let out = replay.line(&delta.to_string());
        let text: Vec<&Value> = out
            .iter()
            .filter_map(|o| match o {
                EngineOutput::Event(e) => e.0.get("delta").or(e.0.get("text")),
                _ => None,
            })
            .collect();
        assert_eq!(text, vec![&json!("tool said: hi")], "{:?}", kinds(&out));
        // Not JSON objects: nothing, as from a real CLI's diagnostics.
        assert!(replay.line("warming up").is_empty());
        assert!(replay.line("{not json").is_empty());
        assert!(!replay.ended());
    }

    #[test]
    fn a_kept_runtime_replays_as_a_new_one_and_only_an_empty_one_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let ask = json!({"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"},"tool_use_id":"toolu_1"}}).to_string();
        let mut fresh = Replay::new(Engine::Claude, dir.path()).unwrap();
        let want = (
            kinds(fresh.opening()),
            fresh.written(),
            kinds(&fresh.line(&ask)),
        );
        let mut runtime = fresh.into_runtime().unwrap();
        for _ in 0..3 {
            let mut again = Replay::on(runtime, Engine::Claude, dir.path()).unwrap();
            let got = (
                kinds(again.opening()),
                again.written(),
                kinds(&again.line(&ask)),
            );
            assert_eq!(got, want);
            runtime = again.into_runtime().unwrap();
        }
        // A task left on the runtime would run in the next replay: that runtime is not kept.
        runtime.0.spawn(std::future::pending::<()>());
        let busy = Replay::on(runtime, Engine::Codex, dir.path()).unwrap();
        assert!(busy.into_runtime().is_none());
    }

    #[test]
    fn claude_permission_requests_become_cards() {
        let dir = tempfile::tempdir().unwrap();
        let mut replay = Replay::new(Engine::Claude, dir.path()).unwrap();
        let ask = json!({"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls -la"},"tool_use_id":"toolu_1"}});
        let out = replay.line(&ask.to_string());
        let card = event(&out, "approval_request");
        assert_eq!(card.0["call_id"], "toolu_1");
        assert_eq!(card.0["summary"], "ls -la");
    }

    #[test]
    fn codex_opens_its_thread_and_streams_deltas() {
        let dir = tempfile::tempdir().unwrap();
        let mut replay = Replay::new(Engine::Codex, dir.path()).unwrap();
        assert_eq!(replay.written()[0]["method"], "initialize");
        replay.line(r#"{"id":1,"result":{"userAgent":"x","codexHome":"/nonexistent/codex-home"}}"#);
        let asked: Vec<Value> = replay.written();
        let open = asked
            .iter()
            .find(|f| f["method"] == "thread/start")
            .unwrap_or_else(|| panic!("no thread/start in {asked:?}"));
        let id = open["id"].clone();
        let answer = json!({"id": id, "result": {"thread": {"id": "th-1"}, "model": "m"}});
        replay.line(&answer.to_string());
        let delta = json!({"method":"item/agentMessage/delta","params":{"threadId":"th-1","turnId":"t1","itemId":"i1","delta":"hello"}});
        let out = replay.line(&delta.to_string());
        assert_eq!(event(&out, "assistant_delta").0["delta"], "hello");
    }

    #[test]
    fn acp_terminals_never_run_and_files_stay_inside() {
        let dir = tempfile::tempdir().unwrap();
        let mut replay = Replay::new(Engine::Acp, dir.path()).unwrap();
        assert_eq!(replay.written()[0]["method"], "initialize");
        let create = json!({"jsonrpc":"2.0","id":100,"method":"terminal/create","params":{"command":"sh","args":["-c","touch ran"]}});
        replay.line(&create.to_string());
        let answer = replay.written();
        assert_eq!(answer[0]["id"], 100);
        assert!(answer[0]["error"]["message"].is_string(), "{answer:?}");
        assert!(!dir.path().join("ran").exists());

        let inside = dir.path().join("a.txt");
        let write = json!({"jsonrpc":"2.0","id":101,"method":"fs/write_text_file","params":{"path":inside,"content":"x"}});
        replay.line(&write.to_string());
        assert_eq!(std::fs::read_to_string(&inside).unwrap(), "x");
        let outside = dir.path().join("../jucode-replay-outside.txt");
        let write = json!({"jsonrpc":"2.0","id":102,"method":"fs/write_text_file","params":{"path":outside,"content":"x"}});
        replay.line(&write.to_string());
        let answer = replay.written();
        assert!(
            answer
                .iter()
                .any(|a| a["id"] == 102 && a["error"].is_object())
        );
        assert!(!outside.exists());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod recorded {
    use super::*;

    /// Every recorded session's engine output, replayed line by line: the translation takes
    /// all of it and the session opens and sends events (the fuzz targets start from these).
    #[test]
    fn recorded_output_replays() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/engines");
        let mut replayed = 0;
        for entry in std::fs::read_dir(&fixtures).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            let engine = if name.contains("acp") {
                Engine::Acp
            } else if name.starts_with("claude") {
                Engine::Claude
            } else if name.starts_with("codex") {
                Engine::Codex
            } else {
                continue;
            };
            let dir = tempfile::tempdir().unwrap();
            let mut replay = Replay::new(engine, dir.path()).unwrap();
            let mut events = 0;
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let record: serde_json::Value = serde_json::from_str(line).unwrap();
                if record["dir"] == "out" {
                    events += replay.line(&record["frame"].to_string()).len();
                }
            }
            assert!(events + replay.opening().len() > 0, "{name} sent nothing");
            replayed += 1;
        }
        assert!(replayed >= 10, "only {replayed} recordings found");
    }
}
