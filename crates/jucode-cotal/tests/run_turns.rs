//! Workflow run turns end to end on a seat (real nats-server, the strict fake
//! manager, the scripted harness): the manager hands a run turn over the
//! control socket, it rides the seat's next send, a send the harness never
//! accepted leaves it unshown and the next turn carries it again, `cotal_yield`
//! may settle it only once shown, and a shown turn the agent left open is
//! yielded `done` as its turn ends. Run:
//! `cargo nextest run -p jucode-cotal --features testkit`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use jucode_cotal::config::LaunchConfig;
use jucode_cotal::relay::ToolResult;
use jucode_cotal::testkit::{
    self, FakeManager, NatsServer, Scripted, SeatProc, Step, fast_seat_options as opts,
    seat_env as env,
};
use serde_json::{Map, Value, json};

const GUARD: Duration = Duration::from_secs(60);
const TOKEN: &str = "control-token";

async fn until<F, Fut>(what: &str, f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    testkit::until(what, GUARD, f).await
}

async fn tool(h: &Scripted, name: &str, args: Value) -> ToolResult {
    let ctx = h.context.lock().unwrap().clone().unwrap();
    let args: Map<String, Value> = args.as_object().unwrap().clone();
    jucode_cotal::relay::call(&ctx.mcp.socket, &ctx.mcp.token, name, &args)
        .await
        .unwrap()
}

async fn hand(socket: &Path, id: &str, text: &str) -> Value {
    let frame = json!({"token": TOKEN, "op": "run-turn",
        "turn": {"turn": id, "run": "run_a", "step": "review", "text": text}});
    jucode_cotal::control::request(socket, &frame)
        .await
        .unwrap()
        .unwrap()
}

fn carrying(h: &Scripted, id: &str) -> usize {
    let needle = format!("workflow run turn {id} ");
    h.turns().iter().filter(|t| t.contains(&needle)).count()
}

fn yields(m: &FakeManager) -> usize {
    m.served().iter().filter(|c| *c == "turn-yield").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_turn_rides_the_next_send_and_is_shown_only_once_the_harness_accepts_it() {
    let server = match NatsServer::start().await {
        Ok(s) => s,
        Err(e) => panic!("{e} (install it with scripts/install-nats.sh)"),
    };
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let cfg = LaunchConfig::from_env(
        env(
            &server.url,
            &[
                ("COTAL_CONTROL_SOCKET", socket.to_str().unwrap()),
                ("COTAL_CONTROL_TOKEN", TOKEN),
            ],
        ),
        false,
    )
    .unwrap();
    let peer = async_nats::connect(&server.url).await.unwrap();
    let manager = FakeManager::start(peer.clone(), "dev").await.unwrap();
    let h = Scripted::new();
    // The first send is refused by the harness itself; the second is held open.
    h.push(Step::Refuse {
        code: Some("overloaded".into()),
        message: "refused before it was accepted".into(),
    });
    h.push(Step::Hold);
    let seat = SeatProc::start(cfg, h.clone(), opts());
    until("the control socket", || async { socket.exists() }).await;
    until("presence bound", || async { h.bound() == 1 }).await;

    // No mail is waiting: the run turn alone starts a Cotal-owned turn.
    assert_eq!(
        hand(&socket, "turn_1", "Review the diff.").await,
        json!({"ok": true})
    );
    until("the refused send", || async { carrying(&h, "turn_1") == 1 }).await;
    let r = tool(
        &h,
        "cotal_yield",
        json!({"status": "done", "turn": "turn_1"}),
    )
    .await;
    assert!(r.is_error, "{}", r.text);
    assert!(r.text.contains("has not been shown yet"), "{}", r.text);
    assert_eq!(
        yields(&manager),
        0,
        "a refused yield never reaches the manager"
    );

    // Carried again by the retried send, which the harness accepts and holds open.
    until("carried again", || async { carrying(&h, "turn_1") == 2 }).await;
    until("the held turn runs", || async { h.running() }).await;
    let last = h.turns().last().cloned().unwrap();
    assert!(
        last.contains("Review the diff.") && last.contains("cotal_yield"),
        "{last}"
    );
    // Shown during the turn that carries it (from the harness's acceptance on):
    // the agent may settle it now. Refusals until then never reach the manager.
    until("the yield is taken", || async {
        let r = tool(
            &h,
            "cotal_yield",
            json!({"status": "handoff", "to": "bob", "turn": "turn_1"}),
        )
        .await;
        assert!(
            !r.is_error || r.text.contains("has not been shown yet"),
            "{}",
            r.text
        );
        !r.is_error
    })
    .await;
    assert!(h.running(), "settled while the carrying turn is still open");
    assert_eq!(yields(&manager), 1);
    let again = tool(
        &h,
        "cotal_yield",
        json!({"status": "done", "turn": "turn_1"}),
    )
    .await;
    assert!(again.text.contains("already settled"), "{}", again.text);
    // A repeat of a settled run turn is not offered again.
    hand(&socket, "turn_1", "Review the diff.").await;

    // A second run turn arrives while the turn is busy: it waits for the next send.
    hand(&socket, "turn_2", "Fix what the review found.").await;
    h.release();
    until("turn_2 carried", || async { carrying(&h, "turn_2") == 1 }).await;
    // Its turn ended well and the agent did not yield it: yielded done for it.
    until("automatic yield", || async { yields(&manager) == 2 }).await;
    let r = tool(
        &h,
        "cotal_yield",
        json!({"status": "done", "turn": "turn_2"}),
    )
    .await;
    assert!(r.text.contains("already settled"), "{}", r.text);
    assert_eq!(
        carrying(&h, "turn_1"),
        2,
        "a settled run turn rides nothing more"
    );
    let r = tool(
        &h,
        "cotal_yield",
        json!({"status": "done", "turn": "turn_9"}),
    )
    .await;
    assert!(r.text.contains("never given to this seat"), "{}", r.text);

    manager.stop();
    seat.shutdown().unwrap();
    assert!(!socket.exists(), "the control socket is removed at stop");
    server.stop().await;
}
