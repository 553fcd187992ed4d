//! A long-lived agent's session as the jucode engine runs it: a real session (the engine's
//! own actor, model client and tools) against the fake model server, with a test
//! [`AgentHost`] that records what reaches it. Covers the seat (prompt every turn, agent
//! tools), the agent's sandbox settings under bubblewrap (install it with
//! `scripts/install-sandbox.sh`; these tests fail without it) and its command rules.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jucode_agent::JucodeEngine;
use jucode_engine::agent::{AgentHost, AgentSeat, McpLaunch, ToolDef, ToolFuture};
use jucode_engine::{EngineFactory, EngineHandle, EngineOutput, StartSpec};
use jucode_sandbox::Sandbox;
use jucode_testsupport::fake_model::FakeModel;
use serde_json::{Value, json};

/// Guards against a hung session; never a measure of anything.
const GUARD: Duration = Duration::from_secs(60);

/// The agent side of the tests: a prompt the test changes between turns, two tools, and
/// every call it got.
#[derive(Default)]
struct Host {
    prompt: Mutex<String>,
    calls: Mutex<Vec<(String, Value)>>,
}

impl Host {
    fn set_prompt(&self, text: &str) {
        *self.prompt.lock().unwrap() = text.to_string();
    }

    fn calls(&self) -> Vec<(String, Value)> {
        self.calls.lock().unwrap().clone()
    }
}

impl AgentHost for Host {
    fn prompt(&self) -> String {
        self.prompt.lock().unwrap().clone()
    }

    fn tools(&self) -> Vec<ToolDef> {
        vec![
            ToolDef {
                name: "note".into(),
                description: "Keeps a note.".into(),
                parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
            },
            ToolDef {
                name: "fail".into(),
                description: "Always fails.".into(),
                parameters: json!({"type": "object"}),
            },
            // A built-in name: the engine keeps its own tool.
            ToolDef {
                name: "bash".into(),
                description: "Not the real bash.".into(),
                parameters: json!({"type": "object"}),
            },
        ]
    }

    fn call(&self, name: &str, args: Value) -> ToolFuture {
        self.calls
            .lock()
            .unwrap()
            .push((name.to_string(), args.clone()));
        let name = name.to_string();
        Box::pin(async move {
            match name.as_str() {
                "note" => Ok(json!({"kept": args["text"]})),
                _ => Err(format!("{name} cannot do that")),
            }
        })
    }

    fn mcp_server(&self) -> Option<McpLaunch> {
        None
    }
}

/// A temporary jucode home (config pointing at the fake model), user home and project.
struct Env {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    user_home: PathBuf,
    cwd: PathBuf,
}

impl Env {
    fn new(fake: &FakeModel, protocol: &str) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let user_home = root.join("user");
        let home = user_home.join(".jucode");
        let cwd = root.join("project");
        for d in [&home, &cwd] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(home.join("config.json"), fake.config(protocol).to_string()).unwrap();
        Env {
            _dir: dir,
            root,
            home,
            user_home,
            cwd,
        }
    }

    /// A directory under the test's root, created.
    fn dir(&self, name: &str) -> PathBuf {
        let path = self.root.join(name);
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    fn engine(&self) -> JucodeEngine {
        JucodeEngine::new(self.home.clone(), self.user_home.clone())
    }
}

/// One running session and what it said so far.
struct Session {
    handle: EngineHandle,
}

impl Session {
    fn start(engine: &JucodeEngine, env: &Env, options: Value, host: Option<Arc<Host>>) -> Self {
        let agent = host.map(|host| AgentSeat {
            agent: "scout".into(),
            host,
        });
        let handle = engine
            .start(StartSpec {
                session: "s-1".into(),
                cwd: env.cwd.clone(),
                extra_dirs: Vec::new(),
                options: options.as_object().cloned().unwrap(),
                resume: false,
                agent,
            })
            .unwrap();
        Session { handle }
    }

    async fn next(&mut self) -> EngineOutput {
        tokio::time::timeout(GUARD, self.handle.events.recv())
            .await
            .expect("the session went quiet")
            .expect("the session's events ended without Exited")
    }

    /// The next event; panics when the engine exits.
    async fn event(&mut self) -> Value {
        match self.next().await {
            EngineOutput::Event(e) => Value::Object(e.0),
            EngineOutput::Delta(text) => Value::Object(jucode_engine::delta_event(text).0),
            EngineOutput::Exited { error } => panic!("the session exited: {error:?}"),
        }
    }

    /// Events up to and including the first of `kind`.
    async fn until(&mut self, kind: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let e = self.event().await;
            let done = e["type"] == kind;
            seen.push(e);
            if done {
                return seen;
            }
        }
    }

    /// Waits for the startup batch (it ends with `mcp_servers`).
    async fn started(mut self) -> Self {
        self.until("mcp_servers").await;
        self
    }

    fn send(&self, op: Value) {
        self.handle
            .ops
            .send(op.as_object().cloned().unwrap())
            .unwrap();
    }

    /// Sends a message and returns the turn's events up to `status: ready`.
    async fn turn(&mut self, content: &str) -> Vec<Value> {
        self.send(json!({"op": "user_message", "content": content}));
        self.rest_of_turn().await
    }

    async fn rest_of_turn(&mut self) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let e = self.event().await;
            let done = e["type"] == "status" && e["message"] == "ready";
            seen.push(e);
            if done {
                return seen;
            }
        }
    }
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// The one tool result of a turn.
fn tool_output(events: &[Value]) -> &Value {
    let outputs = of_type(events, "tool_output");
    assert_eq!(outputs.len(), 1, "{events:#?}");
    outputs[0]
}

/// The system prompt of a recorded request, either API.
fn system_of(body: &Value) -> String {
    match body.get("system") {
        Some(Value::String(s)) => s.clone(),
        _ => body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    }
}

/// The tool names a recorded request offered, either API.
fn tools_of(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().or(t["function"]["name"].as_str()))
        .map(str::to_string)
        .collect()
}

/// The turn requests (not titles or safety checks) the fake model got.
fn turn_requests(fake: &FakeModel) -> Vec<Value> {
    fake.requests()
        .into_iter()
        .map(|(_, body)| body)
        .filter(|body| system_of(body).starts_with("You are jucode"))
        .collect()
}

fn call(tool: &str, args: Value) -> String {
    format!("CALL {tool} {args}")
}

fn escalate(command: &str) -> String {
    call(
        "bash",
        json!({"command": command, "escalate": true, "justification": "the test asks"}),
    )
}

async fn seat_turns(protocol: &str) {
    let fake = FakeModel::start().await.unwrap();
    let env = Env::new(&fake, protocol);
    let host = Arc::new(Host::default());
    host.set_prompt("# Agent scout\nBrief one.");
    // Manual: every tool that asks would show an approval request; agent tools must not.
    let options = json!({"approval_mode": "manual"});
    let mut s = Session::start(&env.engine(), &env, options, Some(host.clone()))
        .started()
        .await;

    let events = s.turn("hello").await;
    assert!(of_type(&events, "approval_request").is_empty());
    let first = turn_requests(&fake);
    assert_eq!(first.len(), 1);
    assert!(system_of(&first[0]).ends_with("# Agent scout\nBrief one.\n"));
    let offered = tools_of(&first[0]);
    for name in [
        "bash",
        "read",
        "write",
        "str_replace",
        "ripgrep",
        "note",
        "fail",
    ] {
        assert!(offered.contains(&name.to_string()), "{name}: {offered:?}");
    }
    assert_eq!(offered.iter().filter(|n| *n == "bash").count(), 1);

    // The brief changed: the next turn's requests carry the new one.
    host.set_prompt("# Agent scout\nBrief two.");
    let events = s.turn(&call("note", json!({"text": "remember"}))).await;
    assert!(
        of_type(&events, "approval_request").is_empty(),
        "{events:#?}"
    );
    let starts = of_type(&events, "tool_start");
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0]["name"], "note");
    let out = tool_output(&events);
    assert_eq!(out["name"], "note");
    assert_eq!(out["is_error"], false);
    assert_eq!(out["output"], r#"{"kept":"remember"}"#);
    assert_eq!(
        host.calls(),
        vec![("note".to_string(), json!({"text": "remember"}))]
    );
    let requests = turn_requests(&fake);
    assert_eq!(requests.len(), 3);
    for r in &requests[1..] {
        let system = system_of(r);
        assert!(system.contains("Brief two.") && !system.contains("Brief one."));
    }
    let last = of_type(&events, "assistant_delta")
        .iter()
        .filter_map(|e| e["delta"].as_str())
        .collect::<String>();
    assert_eq!(last, r#"tool said: {"kept":"remember"}"#);

    // A failing agent tool: its error text is the model's tool result, marked an error.
    let events = s.turn(&call("fail", json!({}))).await;
    let out = tool_output(&events);
    assert_eq!(out["is_error"], true);
    assert_eq!(out["output"], "fail cannot do that");
    let requests = turn_requests(&fake);
    let body = requests.last().unwrap().to_string();
    assert!(body.contains("fail cannot do that"), "{body}");
}

#[tokio::test]
async fn the_agent_prompt_and_tools_reach_the_model_over_chat_completions() {
    seat_turns("chat").await;
}

#[tokio::test]
async fn the_agent_prompt_and_tools_reach_the_model_over_anthropic_messages() {
    seat_turns("anthropic").await;
}

#[tokio::test]
async fn a_session_without_a_seat_has_no_agent_tools() {
    let fake = FakeModel::start().await.unwrap();
    let env = Env::new(&fake, "chat");
    let mut s = Session::start(&env.engine(), &env, json!({}), None)
        .started()
        .await;
    let events = s.turn(&call("note", json!({"text": "x"}))).await;
    let out = tool_output(&events);
    assert_eq!(out["is_error"], true);
    assert!(
        out["output"]
            .as_str()
            .unwrap()
            .starts_with("unknown tool note")
    );
    let offered = tools_of(&turn_requests(&fake)[0]);
    assert_eq!(offered, ["bash", "read", "write", "str_replace", "ripgrep"]);
}

/// Runs `command` in the sandbox in one turn and returns its output.
async fn run(s: &mut Session, command: &str) -> (String, bool) {
    let events = s.turn(&format!("RUN: {command}")).await;
    assert!(
        of_type(&events, "approval_request").is_empty(),
        "{events:#?}"
    );
    let out = tool_output(&events);
    (
        out["output"].as_str().unwrap().to_string(),
        out["is_error"].as_bool().unwrap(),
    )
}

/// A shell line that tries to create each path and prints `ok <path>` or `no <path>`.
fn touch_each(paths: &[&Path]) -> String {
    let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    format!(
        "for f in {}; do if touch \"$f\" 2>/dev/null; then echo \"ok $f\"; else echo \"no $f\"; fi; done",
        list.join(" ")
    )
}

#[tokio::test]
async fn ro_directories_stay_unwritable_and_rw_ones_are_writable_in_bwrap() {
    let fake = FakeModel::start().await.unwrap();
    let env = Env::new(&fake, "chat");
    let rw = env.dir("shared-rw");
    let ro = env.dir("docs-ro");
    std::fs::write(ro.join("guide.md"), "read me").unwrap();
    let vendor = env.cwd.join("vendor");
    std::fs::create_dir_all(&vendor).unwrap();
    let options = json!({
        "approval_mode": "auto",
        "sandbox": "workspace-write",
        "directories": [
            {"path": rw.display().to_string(), "mode": "rw"},
            {"path": ro.display().to_string(), "mode": "ro"},
            {"path": vendor.display().to_string(), "mode": "ro"},
        ],
    });
    let host = Arc::new(Host::default());
    let mut s = Session::start(&env.engine(), &env, options, Some(host))
        .started()
        .await;
    let (cwd_file, rw_file) = (env.cwd.join("a"), rw.join("b"));
    let (ro_file, vendor_file) = (ro.join("c"), vendor.join("d"));
    let elsewhere = env.user_home.join("e");
    let tmp = Path::new("/tmp/jucode-seat-test");
    let paths = [
        cwd_file.as_path(),
        &rw_file,
        &ro_file,
        &vendor_file,
        &elsewhere,
        tmp,
    ];
    let (out, _) = run(&mut s, &touch_each(&paths)).await;
    let said: Vec<&str> = out.lines().collect();
    let want = [
        format!("ok {}", cwd_file.display()),
        format!("ok {}", rw_file.display()),
        format!("no {}", ro_file.display()),
        format!("no {}", vendor_file.display()),
        format!("no {}", elsewhere.display()),
        format!("ok {}", tmp.display()),
    ];
    assert_eq!(said, want, "{out}");
    assert!(rw_file.exists() && !ro_file.exists() && !vendor_file.exists());

    // The file tools keep the same rules, and read the ro directories.
    let write = |path: &Path| {
        call(
            "write",
            json!({"path": path.display().to_string(), "content": "x"}),
        )
    };
    for (path, ok) in [
        (&rw.join("w"), true),
        (&ro.join("w"), false),
        (&vendor.join("w"), false),
    ] {
        let events = s.turn(&write(path)).await;
        let out = tool_output(&events);
        assert_eq!(out["is_error"], !ok, "{path:?}: {out}");
        assert_eq!(path.exists(), ok);
    }
    let read = call(
        "read",
        json!({"path": ro.join("guide.md").display().to_string()}),
    );
    let events = s.turn(&read).await;
    let out = tool_output(&events);
    assert_eq!(out["is_error"], false, "{out}");
    assert!(out["output"].as_str().unwrap().contains("read me"));
}

#[tokio::test]
async fn read_only_writes_nothing_but_tmp_even_under_full_access_approvals() {
    let fake = FakeModel::start().await.unwrap();
    let env = Env::new(&fake, "chat");
    let options = json!({"approval_mode": "full-access", "sandbox": "read-only"});
    let mut s = Session::start(
        &env.engine(),
        &env,
        options,
        Some(Arc::new(Host::default())),
    )
    .started()
    .await;
    let cwd_file = env.cwd.join("a");
    let tmp = Path::new("/tmp/jucode-seat-ro");
    let (out, _) = run(&mut s, &touch_each(&[&cwd_file, tmp])).await;
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            format!("no {}", cwd_file.display()),
            format!("ok {}", tmp.display())
        ],
        "{out}"
    );
    let events = s
        .turn(&call("write", json!({"path": "new.txt", "content": "x"})))
        .await;
    let out = tool_output(&events);
    assert_eq!(out["is_error"], true);
    assert!(
        out["output"].as_str().unwrap().contains("read-only"),
        "{out}"
    );
    assert!(!env.cwd.join("new.txt").exists() && !cwd_file.exists());
}

#[tokio::test]
async fn network_off_cannot_connect_out_and_on_can() {
    let fake = FakeModel::start().await.unwrap();
    let env = Env::new(&fake, "chat");
    // The fake model's own port is something to connect to.
    let connect = format!(
        "if (echo > /dev/tcp/127.0.0.1/{}) 2>/dev/null; then echo connected; else echo refused; fi",
        fake.addr.port()
    );
    for (network, want) in [(false, "refused"), (true, "connected")] {
        let options = json!({"approval_mode": "auto", "network": network});
        let mut s = Session::start(
            &env.engine(),
            &env,
            options,
            Some(Arc::new(Host::default())),
        )
        .started()
        .await;
        let (out, _) = run(&mut s, &connect).await;
        assert_eq!(out.trim(), want, "network {network}");
    }
}

#[tokio::test]
async fn a_missing_sandbox_stops_an_agent_session_at_start() {
    let fake = FakeModel::start().await.unwrap();
    let env = Env::new(&fake, "chat");
    let missing = env.root.join("no-such-bwrap");
    let engine = || {
        env.engine()
            .with_sandbox(Sandbox::with_bwrap(missing.clone()).map_err(|e| e.to_string()))
    };
    for mode in ["workspace-write", "read-only"] {
        let options = json!({"sandbox": mode});
        let mut s = Session::start(&engine(), &env, options, Some(Arc::new(Host::default())));
        match s.next().await {
            EngineOutput::Exited { error: Some(error) } => {
                assert!(
                    error.starts_with(&format!("this agent's sandbox ({mode}) is not available:")),
                    "{error}"
                );
                assert!(error.contains("no-such-bwrap"), "{error}");
            }
            other => panic!("{mode}: the session started: {other:?}"),
        }
    }
    // Full access needs no sandbox, and a session without an agent starts as before.
    let full = json!({"sandbox": "full-access"});
    Session::start(&engine(), &env, full, Some(Arc::new(Host::default())))
        .started()
        .await;
    let mut plain = Session::start(&engine(), &env, json!({"approval_mode": "auto-edit"}), None)
        .started()
        .await;
    let (out, is_error) = run(&mut plain, "echo hi").await;
    assert!(is_error && out.starts_with("no sandbox available"), "{out}");
}

/// The agent's rules of the command-rule tests.
fn rules() -> Value {
    json!([
        {"prefix": "echo allowed", "action": "allow"},
        {"prefix": "echo asked", "action": "ask"},
        {"prefix": "echo forbidden", "action": "forbid"},
        {"prefix": "echo", "action": "ask"},
        {"prefix": "echo free", "action": "allow"},
        {"prefix": "touch", "action": "allow"},
    ])
}

async fn rules_session(env: &Env, mode: &str) -> Session {
    let options = json!({"approval_mode": mode, "command_rules": rules()});
    Session::start(&env.engine(), env, options, Some(Arc::new(Host::default())))
        .started()
        .await
}

#[tokio::test]
async fn forbid_never_runs_and_allow_runs_an_escalation_without_asking() {
    let fake = FakeModel::start().await.unwrap();
    let env = Env::new(&fake, "chat");
    let mut s = rules_session(&env, "manual").await;
    let marker = env.root.join("forbidden-ran");
    for message in [
        escalate(&format!("echo forbidden && touch {}", marker.display())),
        format!("RUN: echo forbidden; touch {}", marker.display()),
    ] {
        let events = s.turn(&message).await;
        assert!(of_type(&events, "approval_request").is_empty());
        let out = tool_output(&events);
        assert_eq!(out["is_error"], true);
        let text = out["output"].as_str().unwrap();
        assert!(
            text.starts_with(
                "This command was not run: the agent's command rules forbid `echo forbidden`"
            ),
            "{text}"
        );
        assert!(!marker.exists());
        let request = turn_requests(&fake).last().unwrap().to_string();
        assert!(request.contains("This command was not run"), "{request}");
    }
    // Manual would ask for any escalation; allow runs it, outside the sandbox (the user's
    // home is not writable inside it).
    let outside = env.user_home.join("allowed-wrote-here");
    let events = s
        .turn(&escalate(&format!("touch {}", outside.display())))
        .await;
    assert!(
        of_type(&events, "approval_request").is_empty(),
        "{events:#?}"
    );
    assert_eq!(tool_output(&events)["is_error"], false);
    assert!(outside.exists());
    let events = s.turn(&escalate("echo free to go")).await;
    assert!(
        of_type(&events, "approval_request").is_empty(),
        "{events:#?}"
    );
    assert_eq!(tool_output(&events)["output"], "free to go\n");
    // More than one plain command (here a redirection) is not what allow names: the approval
    // mode decides, and manual asks.
    let redirected = env.user_home.join("redirected");
    let command = format!("echo free > {}", redirected.display());
    s.send(json!({"op": "user_message", "content": escalate(&command)}));
    let card = s.until("approval_request").await.last().unwrap().clone();
    s.send(json!({"op": "approve", "call_id": card["call_id"], "decision": "deny"}));
    let events = s.rest_of_turn().await;
    assert_eq!(tool_output(&events)["is_error"], true);
    assert!(!redirected.exists());
}

#[tokio::test]
async fn ask_always_asks_a_person_even_under_full_access() {
    let fake = FakeModel::start().await.unwrap();
    let env = Env::new(&fake, "chat");
    let mut s = rules_session(&env, "full-access").await;
    s.send(json!({"op": "user_message", "content": escalate("echo asked nicely")}));
    let seen = s.until("approval_request").await;
    let card = seen.last().unwrap().clone();
    assert_eq!(card["name"], "bash");
    // Switching modes answers waiting calls the new mode lets through: not a rule's.
    s.send(json!({"op": "set_approval_mode", "mode": "full-access"}));
    s.until("approval_mode").await;
    s.send(json!({"op": "approve", "call_id": card["call_id"], "decision": "allow"}));
    let mut events = s.rest_of_turn().await;
    assert_eq!(tool_output(&events)["output"], "asked nicely\n");
    // Ops are answered in order: an approve that found nothing waiting would have said so
    // before this op's answer.
    s.send(json!({"op": "mcp_list"}));
    events.extend(s.until("mcp_servers").await);
    assert!(of_type(&events, "error").is_empty(), "{events:#?}");

    // The longer `echo free` allows; the shorter `echo` asks for anything else.
    let events = s.turn(&escalate("echo free")).await;
    assert!(of_type(&events, "approval_request").is_empty());
    s.send(json!({"op": "user_message", "content": escalate("echo other")}));
    let card = s.until("approval_request").await.last().unwrap().clone();
    s.send(json!({"op": "approve", "call_id": card["call_id"], "decision": "deny"}));
    let events = s.rest_of_turn().await;
    assert_eq!(tool_output(&events)["is_error"], true);
}

#[tokio::test]
async fn without_a_matching_rule_the_approval_mode_decides() {
    let fake = FakeModel::start().await.unwrap();
    let env = Env::new(&fake, "chat");
    // Auto: the safety model (the fake allows) decides, nobody is asked.
    let mut s = rules_session(&env, "auto").await;
    let events = s.turn(&escalate("printf unmatched")).await;
    assert!(of_type(&events, "approval_request").is_empty());
    assert_eq!(tool_output(&events)["output"], "unmatched");
    let safety = fake
        .requests()
        .iter()
        .filter(|(_, b)| system_of(b).contains("safety check"))
        .count();
    assert_eq!(safety, 1);
    // Auto-edit asks a person.
    let mut s = rules_session(&env, "auto-edit").await;
    s.send(json!({"op": "user_message", "content": escalate("printf unmatched")}));
    s.until("approval_request").await;
}

#[tokio::test]
async fn an_unattended_session_defers_what_would_ask_a_person() {
    let fake = FakeModel::start().await.unwrap();
    let env = Env::new(&fake, "chat");
    let mut s = rules_session(&env, "full-access").await;
    s.send(json!({"op": "set_attended", "attended": false}));
    s.until("attended").await;
    let events = s.turn(&escalate("echo asked later")).await;
    assert!(of_type(&events, "approval_request").is_empty());
    let deferred = of_type(&events, "action_deferred");
    assert_eq!(deferred.len(), 1, "{events:#?}");
    assert_eq!(
        deferred[0]["summary"],
        "echo asked later (outside the sandbox: the test asks)"
    );
    let out = tool_output(&events);
    assert_eq!(out["is_error"], false);
    assert!(
        out["output"]
            .as_str()
            .unwrap()
            .starts_with("Submitted for confirmation")
    );
    // Allow and forbid need nobody, attended or not.
    let events = s.turn(&escalate("echo allowed")).await;
    assert_eq!(tool_output(&events)["output"], "allowed\n");
    let events = s.turn(&escalate("echo forbidden")).await;
    assert!(of_type(&events, "action_deferred").is_empty());
    assert_eq!(tool_output(&events)["is_error"], true);
}
