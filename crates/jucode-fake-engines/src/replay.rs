//! Replaying a recording as the engine.
//!
//! A recording is JSON lines `{"dir":"in"|"out"|"meta", "t":…, "frame"|"meta":…}` (the format
//! of `fixtures/engines/*.jsonl`): `out` frames are what the engine wrote, `in` frames what its
//! client wrote. The fake writes the `out` frames in order; at an `in` frame it reads the
//! adapter's next frame and checks it.
//!
//! Ids are mapped: a request the adapter sends gets the answer recorded for the recorded
//! request, under the adapter's own id. The recorded working directory and (Claude) session id
//! are replaced by the real ones. One rule is not recorded but comes from the protocols
//! (engines.md §1.7, §2.6, §3.2): an interrupt (`control_request` `interrupt`, `turn/interrupt`,
//! `session/cancel`) is answered, the rest of the running turn is skipped, and the turn's end
//! frame is sent marked as interrupted (`terminal_reason:"aborted_streaming"`,
//! `status:"interrupted"`, `stopReason:"cancelled"`).

use std::collections::HashSet;
use std::io::{BufRead, Write};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// A recorded user text that matches whatever the adapter sends: for hand-made recordings
/// of texts the test cannot know (a delivery's header names its message id).
pub const ANY_TEXT: &str = "*";

/// Which engine's protocol the fake speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// Claude Code stream-json with the control protocol.
    Claude,
    /// `codex app-server` JSON-RPC (no `jsonrpc` field).
    Codex,
    /// ACP JSON-RPC 2.0.
    Acp,
}

/// One line of a recording.
#[derive(Debug, Clone)]
pub struct Step {
    pub outgoing: bool,
    pub frame: Value,
}

/// A recording: its steps and the argv it was made with.
#[derive(Debug, Clone, Default)]
pub struct Script {
    pub steps: Vec<Step>,
    pub argv: Vec<String>,
    pub cwd: Option<String>,
}

impl Script {
    pub fn parse(text: &str) -> Result<Script> {
        let mut script = Script::default();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(line).with_context(|| format!("line {}", n + 1))?;
            match v.get("dir").and_then(Value::as_str) {
                Some("meta") => {
                    let meta = &v["meta"];
                    if let Some(argv) = meta.get("argv").and_then(Value::as_array) {
                        script.argv = argv
                            .iter()
                            .filter_map(|a| a.as_str().map(str::to_string))
                            .collect();
                    }
                    if let Some(cwd) = meta.get("cwd").and_then(Value::as_str) {
                        script.cwd = Some(cwd.to_string());
                    }
                }
                Some(dir @ ("in" | "out")) => {
                    if let Some(frame) = v.get("frame") {
                        script.steps.push(Step {
                            outgoing: dir == "out",
                            frame: frame.clone(),
                        });
                    }
                }
                _ => {}
            }
        }
        Ok(script)
    }

    /// The Claude session id the recording used (the first real `session_id` written).
    fn claude_session(&self) -> Option<String> {
        self.steps.iter().filter(|s| s.outgoing).find_map(|s| {
            s.frame
                .get("session_id")
                .and_then(Value::as_str)
                .filter(|id| *id != "default")
                .map(str::to_string)
        })
    }
}

/// The value of `--flag value` or `--flag=value` in `args`.
pub fn flag(args: &[String], name: &str) -> Option<String> {
    let eq = format!("{name}=");
    args.iter().enumerate().find_map(|(i, a)| {
        if a == name {
            args.get(i + 1).cloned()
        } else {
            a.strip_prefix(&eq).map(str::to_string)
        }
    })
}

/// The fake's state while replaying.
pub struct Replay<W: Write> {
    flavor: Flavor,
    steps: Vec<Step>,
    /// Text replacements applied to every frame written: (recorded, real).
    subs: Vec<(String, String)>,
    /// Recorded request id → the adapter's id for the same request.
    ids: Vec<(Value, Value)>,
    /// Requests the fake made whose answers no longer matter (skipped by an interrupt).
    abandoned: HashSet<String>,
    /// The conversation saved where the real CLI saves it (`FAKE_ENGINE_SAVE`).
    saver: Option<crate::saved::Saver>,
    out: W,
}

impl<W: Write> Replay<W> {
    /// Prepares a replay of `script` for a process started with `args` in `cwd`.
    pub fn new(flavor: Flavor, script: Script, args: &[String], cwd: &str, out: W) -> Result<Self> {
        let mut subs = Vec::new();
        let mut session_id = None;
        if let Some(recorded) = &script.cwd
            && recorded != cwd
        {
            subs.push((recorded.clone(), cwd.to_string()));
        }
        match flavor {
            Flavor::Claude => {
                let recorded_resume = flag(&script.argv, "--resume");
                let resume = flag(args, "--resume");
                let session = resume.clone().or_else(|| flag(args, "--session-id"));
                if recorded_resume.is_some() && resume.is_none() {
                    bail!(
                        "the recording resumes a conversation but no --resume was given (args: {args:?})"
                    );
                }
                if recorded_resume.is_none() && resume.is_some() {
                    bail!("the recording starts a new conversation but --resume was given");
                }
                if !args.iter().any(|a| a == "stream-json") {
                    bail!("expected --input-format/--output-format stream-json (args: {args:?})");
                }
                if !args
                    .windows(2)
                    .any(|w| w[0] == "--permission-prompt-tool" && w[1] == "stdio")
                {
                    bail!("expected --permission-prompt-tool stdio (args: {args:?})");
                }
                let Some(session) = session else {
                    bail!("neither --session-id nor --resume was given");
                };
                session_id = Some(session.clone());
                if let Some(recorded) = script.claude_session() {
                    subs.push((recorded, session));
                }
            }
            Flavor::Codex => {
                if args.first().map(String::as_str) != Some("app-server") {
                    bail!("expected `app-server` as the first argument (args: {args:?})");
                }
            }
            Flavor::Acp => {}
        }
        Ok(Replay {
            flavor,
            steps: script.steps,
            subs,
            ids: Vec::new(),
            abandoned: HashSet::new(),
            saver: crate::saved::Saver::from_env(flavor, cwd, session_id),
            out,
        })
    }

    fn write(&mut self, frame: &Value) -> Result<()> {
        let mut text = frame.to_string();
        for (from, to) in &self.subs {
            text = text.replace(from.as_str(), to);
        }
        writeln!(self.out, "{text}")?;
        self.out.flush()?;
        Ok(())
    }

    /// Writes an outgoing step with the adapter's ids put back.
    fn write_step(&mut self, frame: &Value) -> Result<()> {
        if let Some(saver) = self.saver.as_mut() {
            saver.output(frame)?;
        }
        let mut frame = frame.clone();
        match self.flavor {
            Flavor::Claude => {
                if frame.get("type").and_then(Value::as_str) == Some("control_response")
                    && let Some(id) = frame.pointer("/response/request_id").cloned()
                    && let Some(real) = self.mapped(&id)
                {
                    frame["response"]["request_id"] = real;
                }
            }
            Flavor::Codex | Flavor::Acp => {
                if frame.get("method").is_none()
                    && let Some(id) = frame.get("id").cloned()
                    && let Some(real) = self.mapped(&id)
                {
                    frame["id"] = real;
                }
            }
        }
        self.write(&frame)
    }

    fn mapped(&self, recorded: &Value) -> Option<Value> {
        self.ids
            .iter()
            .rev()
            .find(|(r, _)| r == recorded)
            .map(|(_, real)| real.clone())
    }

    /// Runs the whole recording against frames read from `input`.
    pub fn run(mut self, input: impl BufRead) -> Result<()> {
        let mut lines = input.lines();
        let mut i = 0;
        while i < self.steps.len() {
            let step = self.steps[i].clone();
            if step.outgoing {
                self.write_step(&step.frame)?;
                i += 1;
                continue;
            }
            let actual = loop {
                let Some(line) = lines.next() else {
                    bail!(
                        "the adapter closed its output while the recording expected {}",
                        describe(&step.frame)
                    );
                };
                let line = line?;
                if line.trim().is_empty() {
                    continue;
                }
                let actual: Value = serde_json::from_str(&line).with_context(|| {
                    format!("the adapter wrote a line that is not JSON: {line}")
                })?;
                if self.is_abandoned_answer(&actual) {
                    continue;
                }
                break actual;
            };
            if self.is_interrupt(&actual) && !self.is_interrupt(&step.frame) {
                i = self.interrupt(i, &actual)?;
                continue;
            }
            self.check(&step.frame, &actual)?;
            if let Some(saver) = self.saver.as_mut() {
                saver.input(&actual)?;
            }
            self.remember_ids(&step.frame, &actual);
            i += 1;
        }
        // The recording is over: the adapter may only close its side now.
        for line in lines {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let actual: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if self.is_abandoned_answer(&actual) {
                continue;
            }
            bail!(
                "the recording is over but the adapter sent {}",
                describe(&actual)
            );
        }
        Ok(())
    }

    fn remember_ids(&mut self, expected: &Value, actual: &Value) {
        match self.flavor {
            Flavor::Claude => {
                if let (Some(r), Some(a)) = (expected.get("request_id"), actual.get("request_id")) {
                    self.ids.push((r.clone(), a.clone()));
                }
            }
            Flavor::Codex | Flavor::Acp => {
                if expected.get("method").is_some()
                    && let (Some(r), Some(a)) = (expected.get("id"), actual.get("id"))
                {
                    self.ids.push((r.clone(), a.clone()));
                }
            }
        }
    }

    fn is_interrupt(&self, frame: &Value) -> bool {
        match self.flavor {
            Flavor::Claude => {
                frame.get("type").and_then(Value::as_str) == Some("control_request")
                    && frame.pointer("/request/subtype").and_then(Value::as_str)
                        == Some("interrupt")
            }
            Flavor::Codex => frame.get("method").and_then(Value::as_str) == Some("turn/interrupt"),
            Flavor::Acp => frame.get("method").and_then(Value::as_str) == Some("session/cancel"),
        }
    }

    /// An answer to a request of ours that an interrupt made moot.
    fn is_abandoned_answer(&self, frame: &Value) -> bool {
        let id = match self.flavor {
            Flavor::Claude => {
                if frame.get("type").and_then(Value::as_str) != Some("control_response") {
                    return false;
                }
                frame.pointer("/response/request_id")
            }
            Flavor::Codex | Flavor::Acp => {
                if frame.get("method").is_some() {
                    return false;
                }
                frame.get("id")
            }
        };
        id.is_some_and(|id| self.abandoned.contains(&id.to_string()))
    }

    /// Answers an interrupt, skips the rest of the turn and sends its end frame marked
    /// interrupted. Returns the index of the step after the turn's end.
    fn interrupt(&mut self, at: usize, actual: &Value) -> Result<usize> {
        match self.flavor {
            Flavor::Claude => {
                let id = actual.get("request_id").cloned().unwrap_or(Value::Null);
                self.write(&json!({"type":"control_response","response":{"subtype":"success","request_id":id,"response":{}}}))?;
            }
            Flavor::Codex => {
                let id = actual.get("id").cloned().unwrap_or(Value::Null);
                self.write(&json!({"id": id, "result": {}}))?;
            }
            Flavor::Acp => {}
        }
        // Requests of ours already written but not answered yet are abandoned.
        for step in &self.steps[..at] {
            if let Some(id) = own_request_id(self.flavor, &step.frame) {
                self.abandoned.insert(id);
            }
        }
        let mut i = at;
        while i < self.steps.len() {
            let step = self.steps[i].clone();
            i += 1;
            if !step.outgoing {
                continue;
            }
            if let Some(id) = own_request_id(self.flavor, &step.frame) {
                self.abandoned.insert(id);
            }
            let mut frame = step.frame.clone();
            match self.flavor {
                Flavor::Claude if frame.get("type").and_then(Value::as_str) == Some("result") => {
                    frame["terminal_reason"] = json!("aborted_streaming");
                    frame["subtype"] = json!("error_during_execution");
                    frame["is_error"] = json!(false);
                    frame["result"] = json!("");
                    self.write_step(&frame)?;
                    return Ok(i);
                }
                Flavor::Codex
                    if frame.get("method").and_then(Value::as_str) == Some("turn/completed") =>
                {
                    frame["params"]["turn"]["status"] = json!("interrupted");
                    self.write_step(&frame)?;
                    return Ok(i);
                }
                Flavor::Acp
                    if frame.get("method").is_none()
                        && frame.pointer("/result/stopReason").is_some() =>
                {
                    frame["result"]["stopReason"] = json!("cancelled");
                    self.write_step(&frame)?;
                    return Ok(i);
                }
                _ => {}
            }
        }
        bail!("an interrupt arrived but the recording has no end of turn after it")
    }

    /// Checks the adapter's frame against the recorded one where it matters.
    fn check(&self, expected: &Value, actual: &Value) -> Result<()> {
        let mismatch = |what: &str| -> Result<()> {
            bail!(
                "{what}: the recording expected {} but the adapter sent {}",
                describe(expected),
                describe(actual)
            )
        };
        match self.flavor {
            Flavor::Claude => {
                let kind = expected.get("type");
                if actual.get("type") != kind {
                    return mismatch("wrong frame type");
                }
                match kind.and_then(Value::as_str) {
                    Some("control_request")
                        if actual.pointer("/request/subtype")
                            != expected.pointer("/request/subtype") =>
                    {
                        return mismatch("wrong control request");
                    }
                    // The arguments that name what a request is about, where recorded.
                    Some("control_request")
                        if [
                            "settings",
                            "task_id",
                            "question",
                            "title",
                            "promptSuggestions",
                        ]
                        .iter()
                        .any(|k| {
                            let key = format!("/request/{k}");
                            expected.pointer(&key).is_some()
                                && actual.pointer(&key) != expected.pointer(&key)
                        }) =>
                    {
                        return mismatch("wrong control request arguments");
                    }
                    Some("user") => {
                        let want = content_text(expected.pointer("/message/content"));
                        let got = content_text(actual.pointer("/message/content"));
                        if want != ANY_TEXT && want != got {
                            return mismatch("wrong user text");
                        }
                    }
                    Some("control_response") => {
                        if actual.pointer("/response/request_id")
                            != expected.pointer("/response/request_id")
                        {
                            return mismatch("answer to the wrong request");
                        }
                        let behavior = "/response/response/behavior";
                        if actual.pointer(behavior) != expected.pointer(behavior) {
                            return mismatch("wrong permission decision");
                        }
                        // An elicitation's answer: its action and the form's content.
                        for key in ["/response/response/action", "/response/response/content"] {
                            if actual.pointer(key) != expected.pointer(key) {
                                return mismatch("wrong elicitation answer");
                            }
                        }
                    }
                    _ => {}
                }
            }
            Flavor::Codex | Flavor::Acp => {
                if let Some(method) = expected.get("method") {
                    if actual.get("method") != Some(method) {
                        return mismatch("wrong method");
                    }
                    let text_of_request = |v: &Value| match method.as_str() {
                        Some("turn/start") => content_text(v.pointer("/params/input")),
                        Some("session/prompt") => content_text(v.pointer("/params/prompt")),
                        Some("thread/resume") => v
                            .pointer("/params/threadId")
                            .map(Value::to_string)
                            .unwrap_or_default(),
                        Some("thread/read") => v
                            .pointer("/params/threadId")
                            .map(Value::to_string)
                            .unwrap_or_default(),
                        Some("mcpServer/oauth/login") => v
                            .pointer("/params/name")
                            .map(Value::to_string)
                            .unwrap_or_default(),
                        Some("account/login/start") => v
                            .pointer("/params/type")
                            .map(Value::to_string)
                            .unwrap_or_default(),
                        _ => String::new(),
                    };
                    let prompt = matches!(method.as_str(), Some("turn/start" | "session/prompt"));
                    let want = text_of_request(expected);
                    if !(prompt && want == ANY_TEXT) && want != text_of_request(actual) {
                        return mismatch("wrong request content");
                    }
                    // Per-turn settings (Codex service tier, reasoning summary), where recorded.
                    for field in ["serviceTier", "summary"] {
                        let pointer = format!("/params/{field}");
                        if let Some(want) = expected.pointer(&pointer)
                            && actual.pointer(&pointer) != Some(want)
                        {
                            return mismatch("wrong turn setting");
                        }
                    }
                    if expected.get("id").is_some() != actual.get("id").is_some() {
                        return mismatch("request/notification mix-up");
                    }
                } else {
                    if actual.get("id") != expected.get("id") {
                        return mismatch("answer to the wrong request");
                    }
                    let decision = match self.flavor {
                        Flavor::Codex => "/result/decision",
                        _ => "/result/outcome",
                    };
                    if actual.pointer(decision) != expected.pointer(decision) {
                        return mismatch("wrong decision");
                    }
                    if expected.get("error").is_some() != actual.get("error").is_some() {
                        return mismatch("an error where a result was expected, or the reverse");
                    }
                    // What a client-side tool (ACP terminal) answered, where recorded.
                    for field in RESULT_FIELDS {
                        let pointer = format!("/result/{field}");
                        if let Some(want) = expected.pointer(&pointer)
                            && actual.pointer(&pointer) != Some(want)
                        {
                            return mismatch("wrong result");
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Result fields of a client's answer checked when the recording has them (the ACP client's
/// terminals and files: what the command printed and how it ended).
const RESULT_FIELDS: &[&str] = &[
    "output",
    "truncated",
    "exitStatus",
    "exitCode",
    "signal",
    "content",
    "terminalId",
];

/// The id of a request the engine itself sent (one its client must answer).
fn own_request_id(flavor: Flavor, frame: &Value) -> Option<String> {
    match flavor {
        Flavor::Claude => (frame.get("type").and_then(Value::as_str) == Some("control_request"))
            .then(|| frame.get("request_id").map(Value::to_string))
            .flatten(),
        Flavor::Codex | Flavor::Acp => frame
            .get("method")
            .and(frame.get("id"))
            .map(Value::to_string),
    }
}

/// The text of a message's content: a string, or its text blocks joined.
/// The text of a message's blocks, without the notes naming an attached image's path
/// (`[image: /…]`, written by the Claude adapter before each image): images are compared by
/// the tests that send them, not by the recordings, which carry none.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .filter(|t| !(t.starts_with("[image: /") && t.ends_with(']')))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn describe(frame: &Value) -> String {
    let text = frame.to_string();
    if text.len() > 300 {
        let mut end = 300;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &text[..end])
    } else {
        text
    }
}

/// The fakes' `main`: replays `FAKE_ENGINE_SCRIPT` on stdio (a Claude Code started with
/// `--resume` replays `FAKE_ENGINE_SCRIPT_RESUME` when set); a mismatch exits 3. With
/// `FAKE_ENGINE_LOG` set, what it was started with and read is logged there.
pub fn main_for(flavor: Flavor) -> ! {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = match flavor {
        Flavor::Claude => "fake-claude",
        Flavor::Codex => "fake-codex",
        Flavor::Acp => "fake-acp",
    };
    if args.iter().any(|a| a == "-v" || a == "--version") {
        println!("2.0.0 (fake {name})");
        std::process::exit(0);
    }
    let result = (|| -> Result<()> {
        // A restarted Claude Code resumes its conversation: it may replay a second recording.
        let resumed = flag(&args, "--resume").is_some();
        let path = match std::env::var("FAKE_ENGINE_SCRIPT_RESUME") {
            Ok(path) if resumed && flavor == Flavor::Claude => path,
            _ => std::env::var("FAKE_ENGINE_SCRIPT")
                .context("FAKE_ENGINE_SCRIPT must name a recording")?,
        };
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        let script = Script::parse(&text)?;
        let cwd = std::env::current_dir()?.display().to_string();
        let stdout = std::io::stdout();
        let replay = Replay::new(flavor, script, &args, &cwd, stdout.lock())?;
        match std::env::var_os("FAKE_ENGINE_LOG") {
            Some(log) => {
                let log = start_log(std::path::Path::new(&log), &args)?;
                let stdin = std::io::stdin().lock();
                replay.run(std::io::BufReader::new(Tee { inner: stdin, log }))
            }
            None => replay.run(std::io::stdin().lock()),
        }
    })();
    match result {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("{name}: {e:#}");
            std::process::exit(3)
        }
    }
}

/// `FAKE_ENGINE_LOG`: a first line `{"argv", "env"}` (the arguments and the `JUCODE_*`
/// variables the fake was started with), then every byte the adapter writes to it.
fn start_log(path: &std::path::Path, args: &[String]) -> Result<std::fs::File> {
    let env: serde_json::Map<String, Value> = std::env::vars()
        .filter(|(k, _)| k.starts_with("JUCODE_"))
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let mut log = std::fs::File::create(path).with_context(|| format!("{}", path.display()))?;
    writeln!(log, "{}", json!({"argv": args, "env": env}))?;
    Ok(log)
}

/// A reader that copies what it reads to a log.
struct Tee<R> {
    inner: R,
    log: std::fs::File,
}

impl<R: std::io::Read> std::io::Read for Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.log.write_all(&buf[..n])?;
        Ok(n)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn script(lines: &[Value]) -> Script {
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        Script::parse(&text.join("\n")).unwrap()
    }

    #[test]
    fn a_codex_replay_maps_ids_and_checks_decisions() {
        let s = script(&[
            json!({"dir":"meta","meta":{"argv":["codex","app-server"],"cwd":"/rec"}}),
            json!({"dir":"in","frame":{"id":1,"method":"initialize","params":{}}}),
            json!({"dir":"out","frame":{"id":1,"result":{"codexHome":"/rec/h"}}}),
            json!({"dir":"out","frame":{"id":0,"method":"item/commandExecution/requestApproval","params":{}}}),
            json!({"dir":"in","frame":{"id":0,"result":{"decision":"accept"}}}),
        ]);
        let mut out = Vec::new();
        let replay = Replay::new(
            Flavor::Codex,
            s.clone(),
            &["app-server".into()],
            "/real",
            &mut out,
        )
        .unwrap();
        let input = "{\"id\":7,\"method\":\"initialize\"}\n{\"id\":0,\"result\":{\"decision\":\"accept\"}}\n";
        replay.run(input.as_bytes()).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("{\"id\":7,\"result\":{\"codexHome\":\"/real/h\"}}"),
            "{text}"
        );

        let mut out = Vec::new();
        let replay =
            Replay::new(Flavor::Codex, s, &["app-server".into()], "/real", &mut out).unwrap();
        let input = "{\"id\":7,\"method\":\"initialize\"}\n{\"id\":0,\"result\":{\"decision\":\"decline\"}}\n";
        let err = replay.run(input.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("wrong decision"), "{err}");
    }

    #[test]
    fn an_interrupt_ends_the_turn_as_interrupted() {
        let s = script(&[
            json!({"dir":"meta","meta":{"argv":["claude","--input-format","stream-json","--permission-prompt-tool","stdio"],"cwd":"/rec"}}),
            json!({"dir":"in","frame":{"type":"user","message":{"content":"go"}}}),
            json!({"dir":"out","frame":{"type":"control_request","request_id":"p1","request":{"subtype":"can_use_tool"},"session_id":"S"}}),
            json!({"dir":"in","frame":{"type":"control_response","response":{"request_id":"p1","response":{"behavior":"allow"}}}}),
            json!({"dir":"out","frame":{"type":"result","subtype":"success","session_id":"S"}}),
        ]);
        let args: Vec<String> = [
            "--input-format",
            "stream-json",
            "--permission-prompt-tool",
            "stdio",
            "--session-id=N",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut out = Vec::new();
        let replay = Replay::new(Flavor::Claude, s, &args, "/real", &mut out).unwrap();
        let input = concat!(
            "{\"type\":\"user\",\"message\":{\"content\":\"go\"}}\n",
            "{\"type\":\"control_request\",\"request_id\":\"r9\",\"request\":{\"subtype\":\"interrupt\"}}\n",
            "{\"type\":\"control_response\",\"response\":{\"request_id\":\"p1\",\"response\":{\"behavior\":\"deny\"}}}\n",
        );
        replay.run(input.as_bytes()).unwrap();
        let text = String::from_utf8(out).unwrap();
        let frames: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(frames[1]["response"]["request_id"], "r9");
        assert_eq!(frames[2]["terminal_reason"], "aborted_streaming");
        assert_eq!(frames[2]["session_id"], "N");
    }

    #[test]
    fn claude_resume_recordings_need_resume() {
        let s =
            script(&[json!({"dir":"meta","meta":{"argv":["claude","--resume","S"],"cwd":"/rec"}})]);
        let args: Vec<String> = [
            "--input-format",
            "stream-json",
            "--permission-prompt-tool",
            "stdio",
            "--session-id=N",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert!(Replay::new(Flavor::Claude, s, &args, "/r", Vec::new()).is_err());
    }
}
