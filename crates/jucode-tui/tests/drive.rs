//! The TUI's loop with a real jucode session against the fake model server, driven by key
//! events and read off ratatui's test backend: a turn typed and answered, an approval
//! answered with `y`, Ctrl-C interrupting a turn, and the conversation saved so that
//! `--resume` (and the daemon) load it again.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use jucode_protocol::Object;
use jucode_protocol::serve::TranscriptItem;
use jucode_testsupport::fake_model::FakeModel;
use jucode_tui::{App, TuiArgs, TuiError, drive, start};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// Guards against a hung session; never a measure of anything.
const GUARD: Duration = Duration::from_secs(60);

struct Env {
    _dir: tempfile::TempDir,
    home: PathBuf,
    user_home: PathBuf,
    cwd: PathBuf,
}

impl Env {
    fn new(fake: &FakeModel) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let user_home = root.join("user");
        let home = user_home.join(".jucode");
        let cwd = root.join("project");
        for d in [&home, &cwd] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(home.join("config.json"), fake.config("chat").to_string()).unwrap();
        Env {
            _dir: dir,
            home,
            user_home,
            cwd,
        }
    }

    fn args(&self, session: &str, options: Value) -> TuiArgs {
        TuiArgs {
            session: session.into(),
            resume: true,
            cwd: self.cwd.clone(),
            extra_dirs: Vec::new(),
            home: self.home.clone(),
            user_home: self.user_home.clone(),
            options: options.as_object().cloned().unwrap_or_else(Object::new),
        }
    }
}

/// A TUI running on an 80×30 test backend: keys in, every drawn screen out.
struct Tui {
    keys: mpsc::UnboundedSender<std::io::Result<TermEvent>>,
    screen: watch::Receiver<String>,
    task: JoinHandle<(Result<(), TuiError>, App)>,
}

impl Tui {
    fn start(args: &TuiArgs) -> Tui {
        let engine = start(args).unwrap();
        let (keys, rx) = mpsc::unbounded_channel();
        let input = Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|e| (e, rx))
        }));
        let (screen_tx, screen) = watch::channel(String::new());
        let session = args.session.clone();
        let task = tokio::spawn(async move {
            let mut terminal = Terminal::new(TestBackend::new(80, 30)).unwrap();
            let mut app = App::new(&session);
            let result = drive(&mut terminal, &mut app, input, engine, |t| {
                screen_tx.send_replace(t.backend().to_string());
            })
            .await;
            (result, app)
        });
        Tui { keys, screen, task }
    }

    fn key(&self, code: KeyCode, modifiers: KeyModifiers) {
        self.keys
            .send(Ok(TermEvent::Key(KeyEvent::new(code, modifiers))))
            .unwrap();
    }

    fn type_line(&self, text: &str) {
        for c in text.chars() {
            self.key(KeyCode::Char(c), KeyModifiers::NONE);
        }
        self.key(KeyCode::Enter, KeyModifiers::NONE);
    }

    /// Waits until the screen shows `text`; returns that screen.
    async fn shows(&mut self, text: &str) -> String {
        let found = tokio::time::timeout(GUARD, self.screen.wait_for(|s| s.contains(text)))
            .await
            .ok()
            .and_then(Result::ok)
            .map(|screen| screen.clone());
        match found {
            Some(screen) => screen,
            None => panic!(
                "the screen never showed {text:?}; last:\n{}",
                self.screen.borrow().as_str()
            ),
        }
    }

    async fn quit(self) -> App {
        self.key(KeyCode::Char('d'), KeyModifiers::CONTROL);
        let (result, app) = tokio::time::timeout(GUARD, self.task)
            .await
            .expect("the TUI did not leave")
            .unwrap();
        result.unwrap();
        app
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_typed_in_the_tui_is_answered_saved_and_resumed() {
    let fake = FakeModel::start().await.unwrap();
    let env = Env::new(&fake);
    let args = env.args("tui-turns", json!({"approval_mode": "manual"}));

    let mut tui = Tui::start(&args);
    tui.shows("fake-model").await;
    tui.type_line("hello there");
    tui.shows("user said: hello there").await;
    tui.shows("ready · Enter sends").await;

    // A command in manual mode waits for the person: `y` runs it.
    tui.type_line("RUN: echo tui-ran");
    let card = tui.shows("bash wants to run").await;
    assert!(
        card.contains("y allow  n deny  a always allow bash"),
        "{card}"
    );
    tui.key(KeyCode::Char('y'), KeyModifiers::NONE);
    tui.shows("tool said: tui-ran").await;
    tui.shows("ready · Enter sends").await;
    let app = tui.quit().await;
    assert!(app.approvals.is_empty());

    // Saved where the daemon reads it.
    let saved = jucode_agent::log::saved_transcript(&env.home.join("sessions"), "tui-turns")
        .expect("the conversation was saved");
    assert!(
        saved.contains(&TranscriptItem::User {
            content: "hello there".into(),
            images: Vec::new()
        }),
        "{saved:?}"
    );
    assert!(
        saved.contains(&TranscriptItem::Assistant {
            content: "user said: hello there".into()
        }),
        "{saved:?}"
    );
    assert!(
        saved.iter().any(
            |i| matches!(i, TranscriptItem::Tool { output, .. } if output.contains("tui-ran"))
        ),
        "{saved:?}"
    );

    // --resume shows it again, and the next turn goes on from it.
    let mut tui = Tui::start(&args);
    tui.shows("user said: hello there").await;
    tui.type_line("and again");
    tui.shows("user said: and again").await;
    tui.shows("ready · Enter sends").await;
    tui.quit().await;
    let last_request = fake.requests().last().cloned().unwrap().1;
    let sent = last_request.to_string();
    assert!(
        sent.contains("hello there") && sent.contains("and again"),
        "the resumed turn carries the earlier one: {sent}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_interrupts_a_turn_and_a_denied_call_does_not_run() {
    let fake = FakeModel::start().await.unwrap();
    let env = Env::new(&fake);
    let args = env.args("tui-interrupt", json!({"approval_mode": "manual"}));
    let mut tui = Tui::start(&args);
    tui.shows("fake-model").await;
    tui.type_line("SLEEP 30000 slow");
    tui.shows("Ctrl-C interrupts").await;
    tui.key(KeyCode::Char('c'), KeyModifiers::CONTROL);
    tui.shows("· interrupted").await;
    tui.shows("ready · Enter sends").await;

    tui.type_line("RUN: touch denied.txt");
    tui.shows("bash wants to run").await;
    tui.key(KeyCode::Char('n'), KeyModifiers::NONE);
    tui.shows("ready · Enter sends").await;
    tui.quit().await;
    assert!(!env.cwd.join("denied.txt").exists());
}
