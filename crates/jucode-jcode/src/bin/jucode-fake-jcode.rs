//! `jucode-fake-jcode`: a test double of the `jcode` binary for the fast
//! suite. It speaks the Harness API v1 frames recorded from jcode 0.67.1 over
//! the API socket, keeps jcode-shaped session snapshots under `JCODE_HOME`,
//! and runs a detached "daemon" process recorded in `servers.json`, so launch,
//! attach, refusals, a bridge closing mid-turn, a pre-MCP tool snapshot and a
//! daemon ignoring SIGTERM can be injected. Never used by a production seat.
//!
//! Knobs (environment): `FAKE_JCODE_LOG` (request log), `FAKE_JCODE_DIE_ON_LIST` (the
//! bridge exits on `list_sessions`), `FAKE_JCODE_REFUSE_MODEL`,
//! `FAKE_JCODE_EFFORT` (`unsupported`|`refuse`|`refuse-ladder`), `FAKE_JCODE_ROUTES` (JSON),
//! `FAKE_JCODE_PRE_MCP_TURNS`, `FAKE_JCODE_MCP_DELAY_MS` (MCP up that long after launch), `FAKE_JCODE_BUSY_AFTER_TURN` (the first message after a turn is acked, then refused), `FAKE_JCODE_CLOSE_ON` (+ `FAKE_JCODE_CLOSE_MARKER`),
//! `FAKE_JCODE_FAIL_ON`, `FAKE_JCODE_IGNORE_TERM`, `FAKE_JCODE_ATTACH_OTHER`,
//! `FAKE_JCODE_ATTACH_OTHER_IF=<file>`, `FAKE_JCODE_EXIT_AT_START`, `FAKE_JCODE_TURN_DELAY_MS`, `FAKE_JCODE_SOFT_REPLY_DELAY_MS`, `FAKE_JCODE_INJECT=never` (soft interrupts miss the turn),
//! `FAKE_JCODE_TUI_TURN_AFTER=<text>` (the turn whose message contains it waits for a soft
//! interrupt request, and as it ends a TUI turn begins; that request is answered only then and
//! is injected into the TUI turn, which ends once it took it), `FAKE_JCODE_TUI_TURN_FAIL` (that
//! TUI turn fails).
//!
//! Versions: `FAKE_JCODE_VERSION` (default `0.67.1`) is what `version --json` reports; from 0.78.1
//! on `model_info`/`runtime_info` carry the applied `reasoning_effort` (`FAKE_JCODE_EFFORT=misapply`
//! accepts a tier but applies `low`), and `FAKE_JCODE_STOP_ON=<text>` ends the turn whose message
//! contains it with `turn_stopped{reason: FAKE_JCODE_STOP_REASON}` as newer builds do.
//! `FAKE_JCODE_FAIL_CODE` is the code of the `FAKE_JCODE_FAIL_ON` error frame (default `internal`),
//! `FAKE_JCODE_FAIL_MESSAGE` its text.
//! Startup: `FAKE_JCODE_BUSY_IF=<file>` (while it exists, every message is refused as busy);
//! `FAKE_JCODE_EXIT_AT_START_IF=<file>` / `FAKE_JCODE_HANG_AT_START_IF=<file>` (a launch that finds
//! the file removes it, then exits, or never binds the socket after writing `<file>.hanging`);
//! `FAKE_JCODE_SERVERS_CORRUPT_IF=<file>` (a launch that finds it writes a `servers.json` nobody
//! can read, so its teardown cannot be proven).
//! A scripted TUI: `FAKE_JCODE_TUI_SCRIPT=<dir>` (turn N begins on the attached session when
//! `<dir>/start-N` appears and ends, taking what jcode queued, when `<dir>/end-N` appears; the
//! session refuses messages meanwhile); `FAKE_JCODE_SOFT_REPLY_WAIT=<file>` (a soft interrupt is
//! answered only once the file is gone); `FAKE_JCODE_REFUSE_NO_REPLY=<text>` (no-reply appends
//! containing it refused).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

static ORIENTATION_TURNS: AtomicU64 = AtomicU64::new(0);
/// Whether the one refusal of `FAKE_JCODE_BUSY_AFTER_TURN` was sent.
static REFUSED_ONCE: AtomicBool = AtomicBool::new(false);
/// The connection last attached to a session (where a scripted TUI turn's events go).
static ATTACHED: Mutex<Option<(Conn, Arc<AtomicBool>)>> = Mutex::new(None);
/// A scripted TUI turn holds the session.
static TUI_BUSY: AtomicBool = AtomicBool::new(false);
/// The tier `set_reasoning_effort` applied (reported from 0.78.1 on).
static EFFORT: Mutex<Option<String>> = Mutex::new(None);
/// Whether the (pretend) MCP server is up (`FAKE_JCODE_MCP_DELAY_MS`).
static MCP_UP: AtomicBool = AtomicBool::new(false);
/// Soft interrupts queued in this bridge (jcode keeps them per session).
static QUEUE: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// `FAKE_JCODE_TUI_TURN_AFTER`: a soft interrupt request arrived.
static SOFT_SEEN: AtomicBool = AtomicBool::new(false);
/// `FAKE_JCODE_TUI_TURN_AFTER`: the TUI turn runs, with the interrupts it took.
static TUI_TURN: Mutex<Option<Vec<String>>> = Mutex::new(None);
/// The TUI turn ran (it starts once).
static TUI_DONE: AtomicBool = AtomicBool::new(false);

/// Poll `cond` until it holds; a deadlock guard ends the fake instead of hanging.
fn wait_for(what: &str, cond: impl Fn() -> bool) {
    use jucode_clock::Clock as _;
    let clock = jucode_clock::SystemClock::new();
    while !cond() {
        assert!(
            clock.elapsed() < Duration::from_secs(30),
            "fake jcode: no {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

/// The version this fake poses as.
fn version() -> String {
    env("FAKE_JCODE_VERSION").unwrap_or_else(|| "0.67.1".into())
}

fn semver() -> (u64, u64, u64) {
    let v = version();
    let mut it = v.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    (
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
    )
}

/// 0.78.1 and later report the applied effort.
fn reports_effort() -> bool {
    semver() >= (0, 78, 1)
}

/// A launch knob naming a file: true (once) when the file exists, which it removes.
fn once_if(var: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env(var)?);
    std::fs::remove_file(&p).ok().map(|_| p)
}

fn home() -> PathBuf {
    PathBuf::from(env("JCODE_HOME").expect("JCODE_HOME"))
}

fn now_ms() -> u128 {
    use jucode_clock::Clock as _;
    u128::from(jucode_clock::SystemClock::new().now_ms())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    let mut api_socket = None;
    let mut resume = None;
    let mut sub = None;
    while i < args.len() {
        match args[i].as_str() {
            "--no-update" | "--quiet" => {}
            "--provider-profile" | "--provider" | "--model" | "--socket" => i += 1,
            "--resume" => {
                resume = args.get(i + 1).cloned();
                i += 1;
            }
            "--api-socket" => {
                api_socket = args.get(i + 1).cloned();
                i += 1;
            }
            s if sub.is_none() => sub = Some(s.to_string()),
            _ => {}
        }
        i += 1;
    }
    match sub.as_deref() {
        Some("version") => {
            let v = version();
            // Pretty-printed over several lines, as real builds print it.
            println!(
                "{}",
                serde_json::to_string_pretty(&json!({"version": format!("v{v} (fakehash)"), "semver": v, "base_semver": v,
                    "update_semver": v, "git_hash": "fakehash", "git_tag": format!("v{v}"), "release_build": true}))
                .unwrap()
            )
        }
        Some("api-bridge") | Some("api") => {
            if let Some(ms) = env("FAKE_JCODE_MCP_DELAY_MS").and_then(|v| v.parse::<u64>().ok()) {
                // The MCP server comes up this long after launch, whatever the turns do.
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(ms));
                    MCP_UP.store(true, Ordering::SeqCst);
                    log_mcp_connected();
                });
            } else {
                MCP_UP.store(true, Ordering::SeqCst);
            }
            bridge(PathBuf::from(
                api_socket
                    .or_else(|| env("JCODE_API_SOCKET"))
                    .expect("api socket"),
            ))
        }
        None if resume.is_some() => loop {
            // The "TUI": stays until signalled.
            std::thread::sleep(Duration::from_secs(3600));
        },
        other => {
            eprintln!("fake jcode: unsupported invocation {other:?}");
            std::process::exit(2);
        }
    }
}

fn bridge(socket: PathBuf) {
    let home = home();
    let runtime = PathBuf::from(env("JCODE_RUNTIME_DIR").expect("JCODE_RUNTIME_DIR"));
    let daemon_socket = env("JCODE_SOCKET")
        .map(PathBuf::from)
        .unwrap_or_else(|| runtime.join("jcode.sock"));
    // The "daemon": its own process group, the inherited environment, and
    // (on request) SIGTERM ignored across the exec.
    let script = if env("FAKE_JCODE_IGNORE_TERM").is_some() {
        "trap '' TERM; exec sleep 3600"
    } else {
        "exec sleep 3600"
    };
    let mut daemon = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("daemon");
    let servers = json!({"meadow": {
        "id": "server_meadow_1_0000000000000000", "name": "meadow",
        "socket": daemon_socket.display().to_string(), "pid": daemon.id(),
        "version": format!("v{}", version()), "sessions": []}});
    std::fs::write(home.join("servers.json"), servers.to_string()).unwrap();
    if once_if("FAKE_JCODE_SERVERS_CORRUPT_IF").is_some() {
        // The record of this launch's daemon is lost (the daemon itself is
        // ended here, so nothing outlives the test).
        let _ = daemon.kill();
        let _ = daemon.wait();
        std::fs::write(home.join("servers.json"), b"{\"meadow\": {\"pid\": ").unwrap();
    }
    if env("FAKE_JCODE_EXIT_AT_START").is_some() || once_if("FAKE_JCODE_EXIT_AT_START_IF").is_some()
    {
        eprintln!("fake jcode: exiting at start as asked (the daemon stays)");
        std::process::exit(1);
    }
    if let Some(p) = once_if("FAKE_JCODE_HANG_AT_START_IF") {
        // Never binds the socket: only a stop ends this launch.
        let mut marker = p.into_os_string();
        marker.push(".hanging");
        std::fs::write(&marker, b"hanging").unwrap();
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    // Reap the daemon when it is stopped, as long as the bridge lives.
    std::thread::spawn(move || daemon.wait());
    std::fs::write(&daemon_socket, b"").unwrap();
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).expect("bind api socket");
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)).unwrap();
    eprintln!(
        "harness API bridge: listening on {} -> {}",
        socket.display(),
        daemon_socket.display()
    );
    if let Some(dir) = env("FAKE_JCODE_TUI_SCRIPT") {
        std::thread::spawn(move || scripted_tui(PathBuf::from(dir)));
    }
    for conn in listener.incoming().flatten() {
        std::thread::spawn(move || serve(conn));
    }
}

fn log_frame(line: &str) {
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = env("FAKE_JCODE_LOG")
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(p)
    {
        let _ = writeln!(f, "{line}");
    }
}

#[derive(Clone)]
struct Conn {
    out: Arc<Mutex<UnixStream>>,
    attached: Option<String>,
}

impl Conn {
    fn send(&mut self, v: Value) {
        let mut s = v.to_string();
        s.push('\n');
        let _ = self.out.lock().unwrap().write_all(s.as_bytes());
    }
    fn reply(&mut self, id: u64, ev: &str, extra: Value) {
        let mut v = json!({"v": 1, "reply_to": id, "ev": ev});
        if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
            o.extend(e);
        }
        self.send(v);
    }
    fn error(&mut self, id: Option<u64>, code: &str, message: &str) {
        let mut v = json!({"v": 1, "ev": "error", "code": code, "message": message});
        if let Some(id) = id {
            v["reply_to"] = json!(id);
        }
        self.send(v);
    }
    fn event(&mut self, ev: &str, extra: Value) {
        let sid = self.attached.clone().unwrap_or_default();
        let mut v = json!({"v": 1, "ev": ev, "session_id": sid});
        if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
            o.extend(e);
        }
        self.send(v);
    }
}

fn sessions_dir() -> PathBuf {
    home().join("sessions")
}

fn snapshot_path(id: &str) -> PathBuf {
    sessions_dir().join(format!("{id}.json"))
}

fn new_session(working_dir: &str) -> String {
    let id = format!("session_fake_{}_{:016x}", now_ms(), rand_u64());
    std::fs::create_dir_all(sessions_dir()).unwrap();
    let ts = "2026-11-29T21:24:53.287084084Z";
    let snap = json!({"id": id, "parent_id": null, "title": null, "created_at": ts, "updated_at": ts,
        "messages": [{"id": format!("message_{}_1", now_ms()), "role": "user",
            "content": [{"type": "text", "text": format!("<system-reminder>\n# Session Context\nWorking directory: {working_dir}\n</system-reminder>")}],
            "display_role": "system", "timestamp": ts}],
        "provider_key": "fake", "model": "fake-model", "is_canary": false, "working_dir": working_dir,
        "short_name": "fake", "status": "Active", "is_debug": false, "saved": false});
    std::fs::write(snapshot_path(&id), snap.to_string()).unwrap();
    id
}

fn rand_u64() -> u64 {
    let mut b = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    u64::from_le_bytes(b)
}

/// One writer of a snapshot at a time (jcode's session holds its own lock).
static SNAPSHOT_WRITE: Mutex<()> = Mutex::new(());

fn append_messages(id: &str, msgs: Vec<Value>) {
    let _one = SNAPSHOT_WRITE.lock().unwrap_or_else(|e| e.into_inner());
    let p = snapshot_path(id);
    let mut snap: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    snap["messages"].as_array_mut().unwrap().extend(msgs);
    // As jcode: write a temp file and rename it over the snapshot.
    let tmp = p.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, snap.to_string()).unwrap();
    std::fs::rename(&tmp, &p).unwrap();
}

/// jcode's own log line for a connected MCP server, in its log file.
fn log_mcp_connected() {
    use std::io::Write as _;
    let dir = home().join("logs");
    let _ = std::fs::create_dir_all(&dir);
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("jcode-2026-11-30.log"))
    {
        let _ = writeln!(
            f,
            "[2026-11-30 00:00:00.000] [INFO] MCP: Connected to 'cotal' with 22 tools"
        );
    }
}

fn has_cotal_mcp() -> bool {
    let Ok(raw) = std::fs::read(home().join("mcp.json")) else {
        return false;
    };
    let Ok(v) = serde_json::from_slice::<Value>(&raw) else {
        return false;
    };
    v["mcpServers"]["cotal"]["command"]
        .as_str()
        .is_some_and(|c| !c.is_empty())
}

fn list_sessions() -> Vec<Value> {
    let archived: Value = std::fs::read(home().join("sdk-archive.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(json!({}));
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(sessions_dir()) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Some(id) = name.strip_suffix(".json") else {
                continue;
            };
            if id.contains('.') {
                continue;
            }
            let Ok(raw) = std::fs::read(e.path()) else {
                continue;
            };
            let Ok(snap) = serde_json::from_slice::<Value>(&raw) else {
                continue;
            };
            let mut s = json!({"session_id": id, "working_dir": snap["working_dir"],
                "status": "idle", "transcript_bytes": raw.len()});
            if archived["sessions"].get(id).is_some() {
                s["archived"] = json!(true);
            }
            out.push(s);
        }
    }
    out
}

fn serve(stream: UnixStream) {
    let mut conn = Conn {
        out: Arc::new(Mutex::new(stream.try_clone().unwrap())),
        attached: None,
    };
    let busy = Arc::new(AtomicBool::new(false));
    let mut lines = BufReader::new(stream).lines();
    let mut first = true;
    while let Some(Ok(line)) = lines.next() {
        if line.trim().is_empty() {
            continue;
        }
        log_frame(&line);
        let Ok(f) = serde_json::from_str::<Value>(&line) else {
            conn.error(
                None,
                "invalid_request",
                "first frame must be a JSON `hello`",
            );
            return;
        };
        let id = f["id"].as_u64().unwrap_or(0);
        let req = f["req"].as_str().unwrap_or_default().to_string();
        if first {
            first = false;
            if req != "hello" {
                conn.error(
                    None,
                    "invalid_request",
                    "first frame must be a JSON `hello`",
                );
                return;
            }
            let (lo, hi) = (f["min_version"].as_u64(), f["max_version"].as_u64());
            if !(lo.unwrap_or(9) <= 1 && 1 <= hi.unwrap_or(0)) {
                conn.error(Some(id), "unsupported_version", "bridge speaks API v1");
                return;
            }
            let mut caps = vec![
                "sessions",
                "streaming",
                "persisted_session_discovery",
                "runtime_info",
            ];
            if semver() >= (0, 80, 0) {
                caps.push("turn_stop_reasons");
            }
            conn.reply(
                id,
                "hello_ok",
                json!({"version": 1, "server": format!("jcode-fake-bridge/{}", version()),
                "capabilities": caps}),
            );
            continue;
        }
        let sid = f["session_id"].as_str().unwrap_or_default().to_string();
        let needs_attach = !matches!(
            req.as_str(),
            "list_sessions" | "create_session" | "attach_session" | "ping" | "detach_session"
        );
        if needs_attach && conn.attached.as_deref() != Some(sid.as_str()) {
            conn.error(
                Some(id),
                "unknown_session",
                &format!("not attached to session `{sid}`; call attach_session first"),
            );
            continue;
        }
        match req.as_str() {
            "ping" => conn.reply(id, "pong", json!({})),
            // Listing kills the harness, as a corrupt session store can.
            "list_sessions" if env("FAKE_JCODE_DIE_ON_LIST").is_some() => std::process::exit(3),
            "list_sessions" => conn.reply(id, "sessions", json!({"sessions": list_sessions()})),
            "create_session" => {
                let wd = f["working_dir"].as_str().unwrap_or("/").to_string();
                let new = new_session(&wd);
                conn.attached = Some(new.clone());
                *ATTACHED.lock().unwrap() = Some((conn.clone(), busy.clone()));
                conn.reply(id, "attached", json!({"session": {"session_id": new, "status": "idle"}}));
                conn.event("session_status", json!({"status": "attached"}));
                conn.event("model_info", json!({"provider": "fake", "model": "fake-model"}));
            }
            "attach_session" => {
                let other = env("FAKE_JCODE_ATTACH_OTHER").is_some()
                    || env("FAKE_JCODE_ATTACH_OTHER_IF").is_some_and(|m| Path::new(&m).exists());
                let target = if snapshot_path(&sid).exists() && !other {
                    sid.clone()
                } else {
                    // As jcode ≤ 0.79.1: an unknown id silently gets a new session.
                    new_session("/")
                };
                conn.attached = Some(target.clone());
                *ATTACHED.lock().unwrap() = Some((conn.clone(), busy.clone()));
                conn.reply(id, "attached", json!({"session": {"session_id": target, "status": "idle"}}));
                conn.event("model_info", json!({"provider": "fake", "model": "fake-model"}));
                conn.event("session_status", json!({"status": "attached"}));
            }
            "detach_session" => conn.reply(id, "ok", json!({})),
            "list_models" => conn.reply(id, "models", json!({"session_id": sid, "models": ["fake-model", "fake-model-2"], "current": "fake-model"})),
            "get_runtime_info" => {
                let routes: Value = env("FAKE_JCODE_ROUTES")
                    .and_then(|r| serde_json::from_str(&r).ok())
                    .unwrap_or(json!([{"model": "fake-model", "provider": "fake", "api_method": "openai-compatible:fake", "available": true, "detail": "fake"}]));
                let mut info = json!({"session_id": sid, "provider": "fake", "model": "fake-model", "routes": routes});
                if reports_effort()
                    && let Some(e) = EFFORT.lock().unwrap().clone()
                {
                    info["reasoning_effort"] = json!(e);
                }
                conn.reply(id, "runtime_info", info);
            }
            "set_model" => {
                let m = f["model"].as_str().unwrap_or_default();
                if env("FAKE_JCODE_REFUSE_MODEL").as_deref() == Some(m) {
                    conn.error(Some(id), "invalid_request", "Model switching is not available for this provider.");
                } else {
                    conn.reply(id, "ok", json!({}));
                    conn.event("model_info", json!({"provider": "fake", "model": m}));
                }
            }
            "set_reasoning_effort" => match env("FAKE_JCODE_EFFORT").as_deref() {
                Some("unsupported") => conn.error(Some(id), "invalid_request", "Reasoning effort is not supported by the current model/profile. It works for OpenRouter, DeepSeek-family and GPT-family reasoning models, and profiles with supports_reasoning_effort = true."),
                Some("refuse") => conn.error(Some(id), "invalid_request", "provider rejected reasoning effort"),
                // A refusal that names the accepted ladder among provider text.
                Some("refuse-ladder") => conn.error(Some(id), "invalid_request", "Unsupported reasoning effort 'ultra' for fake-model (request req_PRIVATE42); supported values: none, low, medium, high."),
                other => {
                    let asked = f["effort"].as_str().unwrap_or_default().to_string();
                    let applied = if other == Some("misapply") { "low".to_string() } else { asked };
                    *EFFORT.lock().unwrap() = Some(applied.clone());
                    conn.reply(id, "ok", json!({}));
                    let mut info = json!({"provider": "fake", "model": "fake-model"});
                    if reports_effort() {
                        info["reasoning_effort"] = json!(applied);
                    }
                    conn.event("model_info", info);
                }
            },
            "soft_interrupt" => {
                // The daemon answers late: the turn may end before it queues the text.
                if let Some(ms) = env("FAKE_JCODE_SOFT_REPLY_DELAY_MS").and_then(|v| v.parse::<u64>().ok()) {
                    std::thread::sleep(Duration::from_millis(ms));
                }
                if let Some(p) = env("FAKE_JCODE_SOFT_REPLY_WAIT") {
                    while Path::new(&p).exists() {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
                let content = f["content"].as_str().unwrap_or_default().to_string();
                if env("FAKE_JCODE_TUI_TURN_AFTER").is_some() && !TUI_DONE.load(Ordering::SeqCst) {
                    // The request meets the turn's end: it is answered once the
                    // TUI turn began, and jcode injects it into that running turn.
                    SOFT_SEEN.store(true, Ordering::SeqCst);
                    wait_for("TUI turn", || TUI_TURN.lock().unwrap().is_some());
                    if let Some(taken) = TUI_TURN.lock().unwrap().as_mut() {
                        taken.push(content);
                    }
                } else {
                    QUEUE.lock().unwrap().push(content);
                }
                conn.reply(id, "ok", json!({}));
            }
            "cancel_soft_interrupts" => {
                QUEUE.lock().unwrap().clear();
                conn.reply(id, "ok", json!({}));
            }
            "get_history" => {
                let snap: Value = serde_json::from_slice(&std::fs::read(snapshot_path(&sid)).unwrap()).unwrap();
                let rows: Vec<Value> = snap["messages"].as_array().unwrap().iter()
                    .filter(|m| m["display_role"].is_null())
                    .map(|m| {
                        let text: String = m["content"].as_array().unwrap().iter()
                            .map(|b| b["text"].as_str().or(b["content"].as_str()).unwrap_or_default().to_string())
                            .collect();
                        json!({"role": m["role"], "content": text})
                    })
                    .collect();
                conn.reply(id, "history", json!({"session_id": sid, "messages": rows}));
            }
            "send_message" => {
                let content = f["content"].as_str().unwrap_or_default().to_string();
                let user = json!({"id": format!("message_{}_{}", now_ms(), rand_u64()), "role": "user", "content": [{"type": "text", "text": content}]});
                if f["no_reply"].as_bool() == Some(true) {
                    if TUI_BUSY.load(Ordering::SeqCst)
                        || env("FAKE_JCODE_REFUSE_NO_REPLY").is_some_and(|t| content.contains(&t))
                    {
                        conn.error(Some(id), "internal", "Cannot handle context_message while the session is busy");
                        continue;
                    }
                    append_messages(&sid, vec![user]);
                    conn.reply(id, "ok", json!({}));
                    continue;
                }
                if busy.swap(true, Ordering::SeqCst) {
                    conn.error(None, "internal", "Already processing a message");
                    continue;
                }
                // A TUI turn holds the session: refused, never run.
                if TUI_BUSY.load(Ordering::SeqCst)
                    || env("FAKE_JCODE_BUSY_IF").is_some_and(|p| Path::new(&p).exists())
                {
                    busy.store(false, Ordering::SeqCst);
                    conn.error(None, "internal", "Already processing a message");
                    continue;
                }
                // jcode 0.67.1 acks a message right after a turn_done, then refuses
                // it: its previous processing task had not let go yet.
                if env("FAKE_JCODE_BUSY_AFTER_TURN").is_some()
                    && ORIENTATION_TURNS.load(Ordering::SeqCst) > 0
                    && !REFUSED_ONCE.swap(true, Ordering::SeqCst)
                {
                    conn.event("message_accepted", json!({}));
                    conn.error(None, "internal", "Already processing a message");
                    busy.store(false, Ordering::SeqCst);
                    continue;
                }
                // The turn runs beside the request loop, so soft interrupts
                // arrive while it is busy, as with the real daemon.
                let (mut c, b) = (conn.clone(), busy.clone());
                std::thread::spawn(move || turn(&mut c, &sid, &content, user, &b));
            }
            other => conn.error(Some(id), "unknown_request", &format!("unknown request: {other}")),
        }
    }
}

/// One turn; `busy` clears before the last frame, as the daemon is idle
/// again by the time a client reads `turn_done`.
fn turn(conn: &mut Conn, sid: &str, content: &str, user: Value, busy: &AtomicBool) {
    conn.event("message_accepted", json!({}));
    if let Some(ms) = env("FAKE_JCODE_TURN_DELAY_MS").and_then(|v| v.parse::<u64>().ok()) {
        std::thread::sleep(Duration::from_millis(ms));
    }
    if let Some(pat) = env("FAKE_JCODE_CLOSE_ON")
        && content.contains(&pat)
    {
        let marker = env("FAKE_JCODE_CLOSE_MARKER").map(PathBuf::from);
        let already = marker.as_deref().is_some_and(Path::exists);
        if !already {
            if let Some(m) = marker {
                std::fs::write(m, b"closed").unwrap();
            }
            // The bridge dies mid-turn: the connection closes without turn_done.
            std::process::exit(3);
        }
    }
    if let Some(pat) = env("FAKE_JCODE_FAIL_ON")
        && content.contains(&pat)
    {
        let code = env("FAKE_JCODE_FAIL_CODE").unwrap_or_else(|| "internal".into());
        let message = env("FAKE_JCODE_FAIL_MESSAGE")
            .unwrap_or_else(|| "provider error: rate limit exceeded (429)".into());
        busy.store(false, Ordering::SeqCst);
        conn.error(None, &code, &message);
        return;
    }
    if let Some(pat) = env("FAKE_JCODE_STOP_ON")
        && content.contains(&pat)
    {
        let reason = env("FAKE_JCODE_STOP_REASON").unwrap_or_else(|| "interrupted".into());
        conn.event("text_delta", json!({"text": "Partial "}));
        append_messages(sid, vec![user]);
        busy.store(false, Ordering::SeqCst);
        conn.event(
            "turn_stopped",
            json!({"reason": reason, "message": format!("turn stopped: {reason}")}),
        );
        return;
    }
    let mut msgs = vec![user];
    let orientation = content.contains("cotal_orientation");
    let pre_mcp: u64 = env("FAKE_JCODE_PRE_MCP_TURNS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let tool = if orientation {
        let n = ORIENTATION_TURNS.fetch_add(1, Ordering::SeqCst);
        if n + 1 == pre_mcp && has_cotal_mcp() {
            // The MCP server comes up during this turn, too late for its snapshot.
            log_mcp_connected();
        }
        (n >= pre_mcp && MCP_UP.load(Ordering::SeqCst) && has_cotal_mcp()).then_some((
            "call_fake_orientation",
            "mcp__cotal__cotal_orientation",
            "You are seated.",
        ))
    } else if content.contains("USE_TOOL") {
        Some(("call_fake_1", "bash", "fake-tool-output\n"))
    } else {
        None
    };
    if let Some((call, name, output)) = tool {
        conn.event("tool_start", json!({"call_id": call, "name": name}));
        conn.event("tool_input_delta", json!({"call_id": "", "delta": "{}"}));
        conn.event("tool_exec", json!({"call_id": call, "name": name}));
        conn.event("token_usage", json!({"input": 123, "output": 7}));
        conn.event(
            "tool_done",
            json!({"call_id": call, "name": name, "output": output}),
        );
        msgs.push(json!({"id": format!("message_{}_{}", now_ms(), rand_u64()), "role": "assistant", "content": [{"type": "tool_use", "id": call, "name": name, "input": {}}]}));
        msgs.push(json!({"id": format!("message_{}_{}", now_ms(), rand_u64()), "role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": output}]}));
    }
    for w in ["Hello ", "from ", "the ", "fake ", "model."] {
        conn.event("text_delta", json!({"text": w}));
    }
    msgs.push(json!({"id": format!("message_{}_{}", now_ms(), rand_u64()), "role": "assistant", "content": [{"type": "text", "text": "Hello from the fake model."}], "token_usage": {"input_tokens": 123, "output_tokens": 7}}));
    conn.event("token_usage", json!({"input": 123, "output": 7}));
    // Point B: queued interrupts become user messages before the turn ends,
    // unless the test says they arrived too late (`FAKE_JCODE_INJECT=never`).
    if env("FAKE_JCODE_INJECT").as_deref() != Some("never") {
        for text in std::mem::take(&mut *QUEUE.lock().unwrap()) {
            msgs.push(json!({"id": format!("message_{}_{}", now_ms(), rand_u64()), "role": "user", "content": [{"type": "text", "text": text}]}));
            msgs.push(json!({"id": format!("message_{}_{}", now_ms(), rand_u64()), "role": "assistant", "content": [{"type": "text", "text": "Noted."}]}));
        }
    }
    let tui_next = env("FAKE_JCODE_TUI_TURN_AFTER").is_some_and(|p| content.contains(&p))
        && !TUI_DONE.load(Ordering::SeqCst);
    if tui_next {
        wait_for("soft interrupt", || SOFT_SEEN.load(Ordering::SeqCst));
    }
    append_messages(sid, msgs);
    busy.store(false, Ordering::SeqCst);
    conn.event("turn_done", json!({}));
    if tui_next {
        tui_turn(conn, sid, busy);
    }
}

/// A turn typed at the TUI, beginning in the instant the last one ended; its
/// events reach every client attached to the session. It takes what jcode had
/// queued, and ends once it took a soft interrupt.
fn tui_turn(conn: &mut Conn, sid: &str, busy: &AtomicBool) {
    busy.store(true, Ordering::SeqCst);
    conn.event("message_accepted", json!({}));
    conn.event(
        "text_delta",
        json!({"text": "Working on the operator's request."}),
    );
    let queued = std::mem::take(&mut *QUEUE.lock().unwrap());
    *TUI_TURN.lock().unwrap() = Some(queued);
    wait_for("interrupt in the TUI turn", || {
        TUI_TURN
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|t| !t.is_empty())
    });
    let taken = TUI_TURN.lock().unwrap().take().unwrap_or_default();
    TUI_DONE.store(true, Ordering::SeqCst);
    let msg = |role: &str, text: &str| json!({"id": format!("message_{}_{}", now_ms(), rand_u64()), "role": role, "content": [{"type": "text", "text": text}]});
    let mut msgs = vec![msg("user", "typed at the TUI")];
    msgs.extend(taken.iter().map(|t| msg("user", t)));
    append_messages(sid, msgs);
    busy.store(false, Ordering::SeqCst);
    if env("FAKE_JCODE_TUI_TURN_FAIL").is_some() {
        conn.error(None, "internal", "provider error: overloaded (529)");
        return;
    }
    append_messages(sid, vec![msg("assistant", "Done at the TUI.")]);
    conn.event("turn_done", json!({}));
}

/// `FAKE_JCODE_TUI_SCRIPT`: TUI turns the test starts and ends with files.
fn scripted_tui(dir: PathBuf) {
    let until = |p: PathBuf| {
        while !p.exists() {
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    for n in 1.. {
        until(dir.join(format!("start-{n}")));
        let Some((mut conn, busy)) = ATTACHED.lock().unwrap().clone() else {
            continue;
        };
        // A TUI turn begins only once the session's running turn ended.
        while busy.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        // That turn's `turn_done` is written just after its busy flag clears.
        std::thread::sleep(Duration::from_millis(50));
        let sid = conn.attached.clone().unwrap_or_default();
        TUI_BUSY.store(true, Ordering::SeqCst);
        conn.event("message_accepted", json!({}));
        conn.event("text_delta", json!({"text": format!("TUI turn {n}")}));
        until(dir.join(format!("end-{n}")));
        let msg = |role: &str, text: &str| json!({"id": format!("message_{}_{}", now_ms(), rand_u64()), "role": role, "content": [{"type": "text", "text": text}]});
        let mut msgs = vec![msg("user", &format!("typed at the TUI {n}"))];
        for text in std::mem::take(&mut *QUEUE.lock().unwrap()) {
            msgs.push(msg("user", &text));
        }
        msgs.push(msg("assistant", "Done at the TUI."));
        append_messages(&sid, msgs);
        TUI_BUSY.store(false, Ordering::SeqCst);
        conn.event("turn_done", json!({}));
    }
}
