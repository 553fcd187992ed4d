//! Runs the built `jucode-fake-serve` as a child process and checks what it prints.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const SESSION: &str = "s1";

struct Fake {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Fake {
    async fn spawn(cwd: &Path, resume: bool, options: &str) -> Result<Fake> {
        let mut cmd = Command::new(jucode_testsupport::fake_serve_bin()?);
        cmd.args(["serve", "--session", SESSION, "--cwd"])
            .arg(cwd)
            .args(["--add-dir", "/tmp"])
            .env("JUCODE_ENGINE_OPTIONS", options)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        if resume {
            cmd.arg("--resume");
        }
        let mut child = cmd.spawn().context("spawn the fake engine")?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = child.stdout.take().context("stdout")?;
        Ok(Fake {
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout).lines(),
        })
    }

    /// Spawns a fresh engine and reads the six startup lines.
    async fn start(cwd: &Path) -> Result<Fake> {
        let mut fake = Fake::spawn(cwd, false, "{}").await?;
        fake.startup_batch().await?;
        Ok(fake)
    }

    async fn startup_batch(&mut self) -> Result<Vec<Value>> {
        let mut batch = Vec::new();
        for kind in [
            "hello",
            "startup",
            "model_status",
            "command_list",
            "approval_mode",
            "mcp_servers",
        ] {
            batch.push(self.expect(kind).await?);
        }
        Ok(batch)
    }

    async fn send(&mut self, op: Value) -> Result<()> {
        self.send_line(&op.to_string()).await
    }

    async fn send_line(&mut self, line: &str) -> Result<()> {
        let stdin = self.stdin.as_mut().context("stdin already closed")?;
        stdin.write_all(format!("{line}\n").as_bytes()).await?;
        stdin.flush().await?;
        Ok(())
    }

    async fn next(&mut self) -> Result<Value> {
        let line = tokio::time::timeout(Duration::from_secs(10), self.stdout.next_line())
            .await
            .context("no output from the fake engine within 10 s")??
            .context("the fake engine closed stdout")?;
        let event: Value =
            serde_json::from_str(&line).with_context(|| format!("not JSON: {line}"))?;
        ensure!(
            event.get("session").is_none(),
            "the engine must not add `session`: {event}"
        );
        Ok(event)
    }

    async fn expect(&mut self, kind: &str) -> Result<Value> {
        let event = self.next().await?;
        ensure!(
            event["type"] == kind,
            "expected a {kind:?} event, got {event}"
        );
        Ok(event)
    }

    /// Reads events and checks their types in order.
    async fn expect_seq(&mut self, kinds: &[&str]) -> Result<Vec<Value>> {
        let mut events = Vec::new();
        for kind in kinds {
            events.push(self.expect(kind).await?);
        }
        Ok(events)
    }

    async fn expect_status(&mut self, message: &str) -> Result<()> {
        let event = self.expect("status").await?;
        ensure!(
            event["message"] == message,
            "expected status {message:?}, got {event}"
        );
        Ok(())
    }

    /// usage, context_usage, status ready.
    async fn expect_turn_end(&mut self) -> Result<()> {
        let usage = self.expect("usage").await?;
        ensure!(
            usage["input_tokens"] == 10 && usage["output_tokens"] == 5,
            "{usage}"
        );
        self.expect("context_usage").await?;
        self.expect_status("ready").await
    }

    async fn expect_reply(&mut self, text: &str) -> Result<()> {
        self.expect("assistant_start").await?;
        let delta = self.expect("assistant_delta").await?;
        ensure!(
            delta["delta"] == text,
            "expected delta {text:?}, got {delta}"
        );
        self.expect_turn_end().await
    }

    async fn expect_turn_start(&mut self, content: &str) -> Result<()> {
        let event = self.expect("user_message").await?;
        ensure!(
            event["content"] == content,
            "expected user_message {content:?}, got {event}"
        );
        self.expect("connecting").await?;
        Ok(())
    }

    async fn expect_pending(&mut self, messages: &[&str]) -> Result<()> {
        let event = self.expect("pending_messages").await?;
        ensure!(
            event["messages"] == json!(messages),
            "expected pending {messages:?}, got {event}"
        );
        Ok(())
    }

    /// Closes stdin and returns the exit code.
    async fn finish(mut self) -> Result<Option<i32>> {
        drop(self.stdin.take());
        let status = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .context("the fake engine did not exit")??;
        Ok(status.code())
    }
}

fn user(content: &str) -> Value {
    json!({"op": "user_message", "content": content})
}

#[tokio::test]
async fn startup_batch_and_a_plain_turn() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut fake = Fake::spawn(dir.path(), false, r#"{"approval_mode":"full-auto"}"#).await?;
    let batch = fake.startup_batch().await?;
    assert_eq!(
        batch[0],
        json!({"type": "hello", "protocol": 2, "version": "fake-0.1"})
    );
    assert_eq!(batch[1]["session_id"], SESSION);
    assert_eq!(batch[1]["cwd"], dir.path().display().to_string());
    assert_eq!(batch[1]["model"], "fake-model");
    assert_eq!(batch[1]["context_window"], 200_000);
    assert_eq!(batch[2]["state"], "ready");
    assert_eq!(batch[2]["context_limit"], 180_000);
    assert_eq!(batch[3]["commands"][0]["command"], "/model");
    assert_eq!(batch[4]["mode"], "full-access");
    assert_eq!(batch[5]["servers"], json!([]));

    fake.send(json!({"op": "user_message", "content": "hi", "session": "ignored", "id": 7}))
        .await?;
    fake.expect_turn_start("hi").await?;
    fake.expect_reply("echo: hi").await?;

    fake.send(json!({"op": "user_message", "content": "flood 3"}))
        .await?;
    fake.expect_turn_start("flood 3").await?;
    let events = fake
        .expect_seq(&[
            "assistant_start",
            "assistant_delta",
            "assistant_delta",
            "assistant_delta",
        ])
        .await?;
    assert!(events[1..].iter().all(|e| e["delta"] == "x"));
    fake.expect_turn_end().await?;
    assert_eq!(fake.finish().await?, Some(0), "stdin EOF exits 0");
    Ok(())
}

#[tokio::test]
async fn bad_input_is_reported_and_survived() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut fake = Fake::start(dir.path()).await?;
    fake.send_line("").await?;
    fake.send_line("{not json").await?;
    let error = fake.expect("error").await?;
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("invalid command: "),
        "{error}"
    );
    fake.send(json!({"op": "frobnicate"})).await?;
    assert_eq!(
        fake.expect("error").await?["message"],
        "unknown op: frobnicate"
    );
    fake.send(json!({"op": "approve", "call_id": " ", "decision": "allow"}))
        .await?;
    assert_eq!(
        fake.expect("error").await?["message"],
        "approve requires call_id"
    );
    fake.send(json!({"op": "approve", "call_id": "call_1", "decision": "maybe"}))
        .await?;
    assert_eq!(
        fake.expect("error").await?["message"],
        "approve requires decision: allow or deny"
    );
    fake.send(json!({"op": "approve", "call_id": "call_9", "decision": "allow"}))
        .await?;
    assert_eq!(
        fake.expect("error").await?["message"],
        "no approval is waiting for call_9"
    );
    fake.send(json!({"op": "set_attended", "attended": "no"}))
        .await?;
    assert_eq!(
        fake.expect("error").await?["message"],
        "set_attended requires attended: true or false"
    );
    fake.send(json!({"op": "decide_action", "action": "act-1-00000000", "decision": "allow"}))
        .await?;
    fake.expect("error").await?;
    fake.send(json!({"op": "interrupt"})).await?;
    fake.send(json!({"op": "mcp_list"})).await?;
    // The idle interrupt printed nothing, so the next line answers mcp_list.
    fake.expect("mcp_servers").await?;
    fake.send(json!({"op": "set_approval_mode", "mode": "auto-edit"}))
        .await?;
    fake.expect_status("approval mode: auto-edit").await?;
    assert_eq!(fake.expect("approval_mode").await?["mode"], "auto-edit");
    fake.send(json!({"op": "command", "input": "/model"}))
        .await?;
    assert_eq!(fake.expect("info").await?["message"], "command: /model");
    fake.send(json!({"op": "command", "input": "/quit"}))
        .await?;
    assert_eq!(fake.finish().await?, Some(0));
    Ok(())
}

#[tokio::test]
#[allow(
    clippy::disallowed_methods,
    reason = "checks that a real-time sleep lasted"
)]
async fn messages_sent_during_a_sleep_queue_and_run_in_order() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut fake = Fake::start(dir.path()).await?;
    let started = Instant::now();
    fake.send(user("sleep 300")).await?;
    fake.expect_turn_start("sleep 300").await?;
    fake.send(user("second")).await?;
    fake.expect_pending(&["second"]).await?;
    fake.expect_status("queued: 1").await?;
    fake.send(user("third")).await?;
    fake.expect_pending(&["second", "third"]).await?;
    fake.expect_status("queued: 2").await?;
    fake.expect_reply("slept 300").await?;
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "the sleep ended early"
    );
    fake.expect_pending(&["third"]).await?;
    fake.expect_turn_start("second").await?;
    fake.expect_reply("echo: second").await?;
    fake.expect_pending(&[]).await?;
    fake.expect_turn_start("third").await?;
    fake.expect_reply("echo: third").await?;
    fake.send(json!({"op": "shutdown"})).await?;
    assert_eq!(fake.finish().await?, Some(0));
    Ok(())
}

#[tokio::test]
#[allow(
    clippy::disallowed_methods,
    reason = "checks that a real-time sleep lasted"
)]
async fn interrupt_stops_a_sleep_and_the_queue_goes_on() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut fake = Fake::start(dir.path()).await?;
    let started = Instant::now();
    fake.send(user("sleep 5000")).await?;
    fake.expect_turn_start("sleep 5000").await?;
    fake.send(user("after")).await?;
    fake.expect_pending(&["after"]).await?;
    fake.expect_status("queued: 1").await?;
    fake.send(json!({"op": "interrupt"})).await?;
    assert_eq!(fake.expect("info").await?["message"], "request interrupted");
    fake.expect_status("interrupted").await?;
    fake.expect_status("ready").await?;
    fake.expect_pending(&[]).await?;
    fake.expect_turn_start("after").await?;
    fake.expect_reply("echo: after").await?;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "interrupt waited for the sleep"
    );

    // steer: the running turn stops and the queued message starts, without a ready in between.
    fake.send(user("sleep 5000")).await?;
    fake.expect_turn_start("sleep 5000").await?;
    fake.send(user("steered")).await?;
    fake.expect_pending(&["steered"]).await?;
    fake.expect_status("queued: 1").await?;
    fake.send(json!({"op": "steer"})).await?;
    fake.expect_status("steering").await?;
    fake.expect_pending(&[]).await?;
    fake.expect_turn_start("steered").await?;
    fake.expect_reply("echo: steered").await?;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "steer waited for the sleep"
    );
    Ok(())
}

#[tokio::test]
async fn approvals_allowed_and_denied() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut fake = Fake::start(dir.path()).await?;
    fake.send(user("approve ls -la")).await?;
    fake.expect_turn_start("approve ls -la").await?;
    let request = fake.expect("approval_request").await?;
    assert_eq!(
        request,
        json!({"type": "approval_request", "call_id": "call_1", "name": "bash", "summary": "ls -la",
               "subagent_id": null, "hunks": null})
    );
    fake.send(json!({"op": "approve", "call_id": "call_1", "decision": "allow"}))
        .await?;
    assert_eq!(
        fake.expect("tool_start").await?,
        json!({"type": "tool_start", "call_id": "call_1", "name": "bash"})
    );
    let output = fake.expect("tool_output").await?;
    assert_eq!(output["output"], "ran ls -la\n");
    assert_eq!(output["is_error"], false);
    fake.expect_reply("done").await?;

    fake.send(user("approve rm -rf build")).await?;
    fake.expect_turn_start("approve rm -rf build").await?;
    assert_eq!(fake.expect("approval_request").await?["call_id"], "call_2");
    fake.send(json!({"op": "approve", "call_id": "call_1", "decision": "allow"}))
        .await?;
    assert_eq!(
        fake.expect("error").await?["message"],
        "no approval is waiting for call_1"
    );
    fake.send(json!({"op": "approve", "call_id": "call_2", "decision": "deny"}))
        .await?;
    let output = fake.expect("tool_output").await?;
    assert_eq!(output["output"], "denied by the user");
    assert_eq!(output["is_error"], true);
    fake.expect_reply("done").await?;
    Ok(())
}

fn digest(name: &str, arguments: &str, cwd: &str) -> String {
    let mut bytes = Vec::new();
    for part in [name, arguments, cwd] {
        bytes.extend_from_slice(part.as_bytes());
        bytes.push(0);
    }
    let sum = ring::digest::digest(&ring::digest::SHA256, &bytes);
    sum.as_ref()[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn check_deferred(event: &Value, cwd: &str, call_id: &str, command: &str) -> Result<String> {
    let id = event["id"].as_str().context("id")?;
    let parts: Vec<&str> = id.split('-').collect();
    ensure!(
        parts.len() == 3
            && parts[0] == "act"
            && parts[1].parse::<u64>().ok() == event["created_at"].as_u64()
            && parts[2].len() == 8,
        "bad action id {id}"
    );
    ensure!(
        parts[2]
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
        "bad action id {id}"
    );
    let arguments = event["arguments"]
        .as_str()
        .context("arguments must be a string")?;
    let parsed: Value = serde_json::from_str(arguments)?;
    ensure!(
        parsed == json!({"command": command}),
        "arguments {arguments}"
    );
    ensure!(
        event["digest"] == digest("bash", arguments, cwd),
        "digest of {event}"
    );
    ensure!(
        event["session_id"] == SESSION && event["cwd"] == cwd,
        "{event}"
    );
    ensure!(
        event["call_id"] == call_id && event["name"] == "bash" && event["summary"] == command,
        "{event}"
    );
    ensure!(
        event["subagent_id"].is_null() && event["created_at"].is_u64(),
        "{event}"
    );
    Ok(id.to_string())
}

#[tokio::test]
async fn unattended_calls_are_deferred_and_decided() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let cwd = dir.path().display().to_string();
    let mut fake = Fake::start(dir.path()).await?;

    // A request already waiting turns into a deferred action when the session goes unattended.
    fake.send(user("approve make deploy")).await?;
    fake.expect_turn_start("approve make deploy").await?;
    fake.expect("approval_request").await?;
    fake.send(json!({"op": "set_attended", "attended": false}))
        .await?;
    let first = check_deferred(
        &fake.expect("action_deferred").await?,
        &cwd,
        "call_1",
        "make deploy",
    )?;
    assert_eq!(fake.expect("attended").await?["attended"], false);
    assert_eq!(
        fake.expect("tool_output").await?["output"],
        "submitted for confirmation"
    );
    fake.expect_reply("done").await?;

    // A new call while unattended is deferred straight away.
    fake.send(user("approve make clean")).await?;
    fake.expect_turn_start("approve make clean").await?;
    let second = check_deferred(
        &fake.expect("action_deferred").await?,
        &cwd,
        "call_2",
        "make clean",
    )?;
    assert_eq!(
        fake.expect("tool_output").await?["output"],
        "submitted for confirmation"
    );
    fake.expect_reply("done").await?;

    fake.send(json!({"op": "decide_action", "action": first, "decision": "allow"}))
        .await?;
    assert_eq!(
        fake.expect("action_decided").await?,
        json!({"type": "action_decided", "id": first, "decision": "allow", "output": "ran make deploy\n", "is_error": false})
    );
    let content = format!(
        "[deferred action {first} approved and executed]\n`bash` (make deploy)\nresult:\nran make deploy\n"
    );
    fake.expect_turn_start(&content).await?;
    fake.expect_reply(&format!("echo: {content}")).await?;
    fake.send(json!({"op": "decide_action", "action": first, "decision": "allow"}))
        .await?;
    fake.expect("error").await?;

    fake.send(json!({"op": "set_attended", "attended": true}))
        .await?;
    assert_eq!(fake.expect("attended").await?["attended"], true);
    assert_eq!(fake.finish().await?, Some(0));

    // The second action survives a restart and can be declined by the resumed engine.
    let mut fake = Fake::spawn(dir.path(), true, "").await?;
    fake.startup_batch().await?;
    fake.expect("transcript").await?;
    fake.send(json!({"op": "decide_action", "action": second, "decision": "deny"}))
        .await?;
    let decided = fake.expect("action_decided").await?;
    assert_eq!(decided["decision"], "deny");
    assert!(decided["output"].is_null(), "{decided}");
    let content = format!(
        "[deferred action {second} declined]\nThe user declined `bash` (make clean). Do not retry it; ask the user if it is still needed."
    );
    fake.expect_turn_start(&content).await?;
    Ok(())
}

#[tokio::test]
async fn resume_replays_the_saved_transcript() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut fake = Fake::start(dir.path()).await?;
    fake.send(user("hi")).await?;
    fake.expect_turn_start("hi").await?;
    fake.expect_reply("echo: hi").await?;
    fake.send(user("approve ls")).await?;
    fake.expect_turn_start("approve ls").await?;
    fake.expect("approval_request").await?;
    fake.send(json!({"op": "approve", "call_id": "call_1", "decision": "allow"}))
        .await?;
    fake.expect_seq(&["tool_start", "tool_output"]).await?;
    fake.expect_reply("done").await?;
    fake.send(user("crash")).await?;
    fake.expect_turn_start("crash").await?;
    assert_eq!(fake.finish().await?, Some(3), "crash exits with code 3");

    let mut fake = Fake::spawn(dir.path(), true, "{}").await?;
    fake.startup_batch().await?;
    let transcript = fake.expect("transcript").await?;
    assert_eq!(
        transcript["items"],
        json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "echo: hi"},
            {"role": "user", "content": "approve ls"},
            {"role": "tool", "name": "bash", "output": "ran ls\n"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "crash"},
        ])
    );
    assert_eq!(fake.finish().await?, Some(0));

    // Without --resume the conversation starts over, so a later resume finds it empty.
    let fake = Fake::start(dir.path()).await?;
    assert_eq!(fake.finish().await?, Some(0));
    let mut fake = Fake::spawn(dir.path(), true, "{}").await?;
    fake.startup_batch().await?;
    let transcript = fake.expect("transcript").await?;
    if transcript["items"] != json!([]) {
        bail!("expected an empty transcript, got {transcript}");
    }
    Ok(())
}

#[tokio::test]
async fn stream_paces_stamped_deltas_and_serves_ops_meanwhile() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut fake = Fake::start(dir.path()).await?;
    fake.send(user("stream 3 1")).await?;
    fake.expect_turn_start("stream 3 1").await?;
    fake.expect("assistant_start").await?;
    let mut stamps = Vec::new();
    for delta in fake
        .expect_seq(&["assistant_delta", "assistant_delta", "assistant_delta"])
        .await?
    {
        let text = delta["delta"].as_str().unwrap_or_default().to_string();
        let stamp: u64 = text
            .strip_prefix('t')
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("not a stamp: {text}"))?;
        stamps.push(stamp);
    }
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
    fake.expect_turn_end().await?;

    // A long stream leaves the engine free: an op is answered before the stream ends, and an
    // interrupt ends it.
    fake.send(user("stream 100000 50")).await?;
    fake.expect_turn_start("stream 100000 50").await?;
    fake.expect("assistant_start").await?;
    fake.send(json!({"op": "mcp_list"})).await?;
    loop {
        let event = fake.next().await?;
        match event["type"].as_str() {
            Some("assistant_delta") => continue,
            Some("mcp_servers") => break,
            _ => bail!("unexpected event during the stream: {event}"),
        }
    }
    fake.send(json!({"op": "interrupt"})).await?;
    loop {
        let event = fake.next().await?;
        if event["type"] == "assistant_delta" {
            continue;
        }
        assert_eq!(event["message"], "request interrupted", "{event}");
        break;
    }
    fake.expect_status("interrupted").await?;
    fake.expect_status("ready").await?;
    fake.send(json!({"op": "shutdown"})).await?;
    assert_eq!(fake.finish().await?, Some(0));
    Ok(())
}
