//! The real Claude Code and Codex TUIs on a pty against the fake model server: what they need
//! to start straight into a conversation (no login, onboarding, trust or update screen), a
//! prompt typed and answered on screen, and the conversation saved where their adapters
//! resume it. What the daemon's `session_tui` relies on; see DECISIONS.md (TUI hand-off).
//!
//! Slow and needing the real CLIs, so ignored: `bash scripts/install-engines.sh`, then
//!   cargo nextest run -p jucode-tui --run-ignored only -E 'binary(real_tuis)'
//! The CLIs come from `CLAUDE_BIN` / `CODEX_BIN` or `target/peers/npm/node_modules/.bin`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::real_cli::{
    CLAUDE_KEY, cli, prompt_holds, write_claude_state, write_codex_config,
};
use portable_pty::{CommandBuilder, PtySize, native_pty_system};

/// How often the screen is looked at, and how many times before giving up (a guard against a
/// hung CLI of about 90 s, never a measure of anything).
const POLL: Duration = Duration::from_millis(100);
const POLLS: u32 = 900;
/// Polls between presses of Enter while typed text still waits in the prompt.
const RETRY_ENTER: u32 = 50;

/// A CLI on an 120×40 pty, its screen kept by a vt100 parser.
struct Screen {
    parser: Arc<Mutex<vt100::Parser>>,
    writer: Box<dyn std::io::Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Screen {
    fn spawn(cmd: CommandBuilder) -> Screen {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: 40,
                cols: 120,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let child = pty.slave.spawn_command(cmd).unwrap();
        drop(pty.slave);
        let mut reader = pty.master.try_clone_reader().unwrap();
        let writer = pty.master.take_writer().unwrap();
        let parser = Arc::new(Mutex::new(vt100::Parser::new(
            std::num::NonZero::new(40).unwrap(),
            std::num::NonZero::new(120).unwrap(),
            0,
        )));
        let feed = parser.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                feed.lock().unwrap().process(&buf[..n]);
            }
        });
        Screen {
            parser,
            writer,
            child,
            _master: pty.master,
        }
    }

    fn contents(&self) -> String {
        self.parser.lock().unwrap().screen().contents()
    }

    fn wait_for(&self, text: &str) -> String {
        for _ in 0..POLLS {
            let screen = self.contents();
            if screen.contains(text) {
                return screen;
            }
            std::thread::sleep(POLL);
        }
        panic!(
            "the screen never showed {text:?}; it shows:\n{}",
            self.contents()
        );
    }

    fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
        self.writer.flush().unwrap();
    }

    /// Types `text` a few characters at a time (a paste-sized burst is taken as a paste by
    /// some TUIs), waits until the prompt line shows it, then presses Enter until `done`
    /// holds. A TUI still starting up can show typed text yet drop the Enter (Codex did on a
    /// loaded CI machine), so Enter is pressed again while the text still waits in the
    /// prompt; once it is taken the prompt is empty and another Enter sends nothing.
    fn submit(&mut self, text: &str, done: impl Fn(&mut Self) -> bool) {
        for chunk in text.as_bytes().chunks(4) {
            self.send(chunk);
            std::thread::sleep(Duration::from_millis(30));
        }
        self.wait_for(text);
        std::thread::sleep(Duration::from_millis(300));
        self.send(b"\r");
        for poll in 1..=POLLS {
            if done(self) {
                return;
            }
            if poll % RETRY_ENTER == 0 && self.prompt_holds(text) {
                self.send(b"\r");
            }
            std::thread::sleep(POLL);
        }
        panic!(
            "{text:?} was typed but never taken; the screen shows:\n{}",
            self.contents()
        );
    }

    fn prompt_holds(&self, text: &str) -> bool {
        prompt_holds(&self.contents(), text)
    }

    fn shows(&self, text: &str) -> bool {
        self.contents().contains(text)
    }

    fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    fn wait_exit(&mut self) -> portable_pty::ExitStatus {
        for _ in 0..POLLS {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(POLL);
        }
        let screen = self.contents();
        let _ = self.child.kill();
        panic!("the CLI did not exit; it shows:\n{screen}");
    }
}

/// A private HOME and work directory under the target dir (Codex refuses /tmp).
fn world() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let home = std::fs::canonicalize(dir.path()).unwrap().join("home");
    let cwd = home.parent().unwrap().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    (dir, home, cwd)
}

fn base(cmd: &mut CommandBuilder, home: &Path, cwd: &Path) {
    cmd.env_clear();
    cmd.env("PATH", std::env::var("PATH").unwrap_or_default());
    cmd.env("HOME", home);
    cmd.env("TERM", "xterm-256color");
    cmd.env("LANG", "C.UTF-8");
    cmd.env("SHELL", "/bin/bash");
    cmd.env("NO_PROXY", "127.0.0.1,localhost");
    cmd.cwd(cwd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "drives the real Claude Code TUI"]
async fn claude_tui_answers_a_prompt_and_saves_it_under_the_session_id() {
    let fake = FakeModel::start().await.unwrap();
    let (_dir, home, cwd) = world();
    let config_dir = home.join(".claude");
    write_claude_state(&config_dir, &cwd);
    let session = "3b2d7c9e-1f4a-4c5b-8e6d-0a1b2c3d4e5f";
    let mut cmd = CommandBuilder::new(cli("claude", "CLAUDE_BIN"));
    base(&mut cmd, &home, &cwd);
    cmd.env("CLAUDE_CONFIG_DIR", &config_dir);
    cmd.env("ANTHROPIC_BASE_URL", fake.base_url());
    cmd.env("ANTHROPIC_API_KEY", CLAUDE_KEY);
    cmd.env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    cmd.args(["--session-id", session, "--model", "claude-fake"]);
    let task = tokio::task::spawn_blocking(move || {
        let mut screen = Screen::spawn(cmd);
        std::thread::sleep(Duration::from_secs(3));
        eprintln!("--- at start:\n{}", screen.contents());
        screen.submit("hello from the pty", |s| {
            s.shows("user said: hello from the pty")
        });
        eprintln!("--- answered:\n{}", screen.contents());
        screen.submit("/exit", Screen::exited);
        let status = screen.wait_exit();
        eprintln!("--- exit {status:?}:\n{}", screen.contents());
    });
    task.await.unwrap();
    let saved = config_dir
        .join("projects")
        .join(cwd.display().to_string().replace(['/', '.'], "-"))
        .join(format!("{session}.jsonl"));
    let text =
        std::fs::read_to_string(&saved).unwrap_or_else(|e| panic!("{}: {e}", saved.display()));
    assert!(text.contains("hello from the pty"), "{text}");
    assert!(text.contains("user said: hello from the pty"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "drives the real Codex TUI"]
async fn codex_tui_answers_a_prompt_and_saves_a_thread() {
    let fake = FakeModel::start().await.unwrap();
    let (_dir, home, cwd) = world();
    let codex_home = home.join(".codex");
    write_codex_config(&codex_home, &fake.base_url(), &cwd);
    let mut cmd = CommandBuilder::new(cli("codex", "CODEX_BIN"));
    base(&mut cmd, &home, &cwd);
    cmd.env("CODEX_HOME", &codex_home);
    cmd.env("FAKE_API_KEY", "test");
    let task = tokio::task::spawn_blocking(move || {
        let mut screen = Screen::spawn(cmd);
        std::thread::sleep(Duration::from_secs(4));
        eprintln!("--- at start:\n{}", screen.contents());
        screen.submit("hello from the pty", |s| {
            s.shows("user said: hello from the pty")
        });
        eprintln!("--- answered:\n{}", screen.contents());
        screen.submit("/quit", Screen::exited);
        let status = screen.wait_exit();
        eprintln!("--- exit {status:?}:\n{}", screen.contents());
    });
    task.await.unwrap();
    let sessions = codex_home.join("sessions");
    let mut found = Vec::new();
    let mut stack = vec![sessions.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                found.push(path);
            }
        }
    }
    assert_eq!(
        found.len(),
        1,
        "one thread saved under {}",
        sessions.display()
    );
    let text = std::fs::read_to_string(&found[0]).unwrap();
    assert!(text.contains("user said: hello from the pty"), "{text}");
}
