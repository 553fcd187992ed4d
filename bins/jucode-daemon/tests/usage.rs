//! The usage ledger on the real daemon binary: `session_usage` and `schedule_usage`, the live
//! `usage` event's ledger key, follow-up turns, a running turn, bad input, the device gate and
//! a torn ledger tail repaired at start, Claude Code, Codex and ACP turns (the fake engines)
//! with their counters or, when the engine reports none, without, and the `turns` cap.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::{Client, Daemon, TestHome};
use serde_json::{Value, json};

/// Sends a message and returns the turn's `usage` event (read before its `ready`).
async fn turn(c: &mut Client, session: &str, text: &str) -> Value {
    c.send(json!({"op":"user_message","session":session,"content":text}))
        .await
        .unwrap();
    let usage = c.recv_type("usage", Some(session)).await.unwrap();
    c.recv_until(|f| f["session"] == session && f["type"] == "status" && f["message"] == "ready")
        .await
        .unwrap();
    usage
}

/// The built-in engine's turns reach the ledger: each live `usage` event carries the key its
/// row has in `session_usage`, a follow-up turn adds to the same session row, the priced
/// model is estimated and no gateway amount is made up.
#[tokio::test]
async fn jucode_turns_are_in_the_ledger_once_each_with_their_keys() {
    let env = TestHome::new();
    let fake = FakeModel::start().await.unwrap();
    let mut config = fake.config("chat");
    config["model"] = json!("fake-priced");
    let daemon = Daemon::start_builtin(&env.home(), &config).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let id = c.start_session(&env.project("app")).await.unwrap();
    let first = turn(&mut c, &id, "one").await;
    let second = turn(&mut c, &id, "two").await;
    let keys = [
        first["billing_turn"].clone(),
        second["billing_turn"].clone(),
    ];
    assert!(
        keys[0].is_string() && keys[0] != keys[1],
        "{first} {second}"
    );
    assert_eq!(first["billing_gateway"], Value::Null);

    let reply = c
        .request(json!({"op":"session_usage","session":id}))
        .await
        .unwrap();
    assert_eq!(reply["type"], "session_usage", "{reply}");
    let totals = &reply["totals"];
    assert_eq!(totals["turns"], 2, "{reply}");
    let input = first["input_tokens"].as_u64().unwrap() + second["input_tokens"].as_u64().unwrap();
    assert!(input > 0);
    assert_eq!(totals["input_tokens"], input);
    assert_eq!(totals["running"], 0);
    assert_eq!(totals["unpriced_requests"], 0);
    assert!(
        totals["estimated_cost_usd"].as_f64().unwrap() > 0.0,
        "{reply}"
    );
    assert_eq!(totals["gateway_cost"], Value::Null);
    let sessions = reply["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["session"], id.as_str());
    assert!(sessions[0]["started_at"].is_u64());
    let turns: Vec<&Value> = reply["turns"].as_array().unwrap().iter().collect();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0]["turn_id"], keys[0]);
    assert_eq!(turns[1]["turn_id"], keys[1]);

    // The ledger survives a restart.
    drop(c);
    let mut daemon = daemon;
    daemon.stop().await.unwrap();
    let daemon = Daemon::start_builtin(&env.home(), &config).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let again = c
        .request(json!({"op":"session_usage","session":id}))
        .await
        .unwrap();
    assert_eq!(again["totals"], reply["totals"]);
}

/// An unpriced model's turns are counted as unpriced and their estimate stays null.
#[tokio::test]
async fn an_unpriced_model_is_null_not_zero() {
    let env = TestHome::new();
    let fake = FakeModel::start().await.unwrap();
    let daemon = Daemon::start_builtin(&env.home(), &fake.config("chat"))
        .await
        .unwrap();
    let mut c = daemon.client().await.unwrap();
    let id = c.start_session(&env.project("app")).await.unwrap();
    turn(&mut c, &id, "hello").await;
    let reply = c
        .request(json!({"op":"session_usage","session":id}))
        .await
        .unwrap();
    assert_eq!(reply["totals"]["unpriced_requests"], 1, "{reply}");
    assert_eq!(reply["totals"]["estimated_cost_usd"], Value::Null);
}

/// Bad input gets a clear error and writes nothing; a paired device may read usage too.
#[tokio::test]
async fn bad_input_is_refused_and_a_device_may_ask() {
    let env = TestHome::new();
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let unknown = c
        .request(json!({"op":"session_usage","session":"nope"}))
        .await
        .unwrap();
    assert_eq!(unknown["message"], "unknown session nope");
    let missing = c.request(json!({"op":"session_usage"})).await.unwrap();
    assert_eq!(missing["type"], "error");
    assert!(
        missing["message"]
            .as_str()
            .unwrap()
            .contains("missing field `session`"),
        "{missing}"
    );
    let task = c
        .request(json!({"op":"schedule_usage","schedule":"sch-0"}))
        .await
        .unwrap();
    assert_eq!(task["message"], "unknown scheduled task sch-0");
    let missing = c.request(json!({"op":"schedule_usage"})).await.unwrap();
    assert!(
        missing["message"]
            .as_str()
            .unwrap()
            .contains("missing field `schedule`"),
        "{missing}"
    );
    let ledger = env.home().join("daemon").join("usage.jsonl");
    assert_eq!(std::fs::read_to_string(&ledger).unwrap(), "");

    let mut phone = daemon.paired_device(&mut c).await.unwrap();
    let reply = phone
        .request(json!({"op":"session_usage","session":"nope"}))
        .await
        .unwrap();
    assert_eq!(reply["message"], "unknown session nope");
}

/// A ledger cut short by a crash: the torn last line is dropped (and the file cut back) at
/// start, the whole lines are counted, and a session only the ledger remembers is known.
#[tokio::test]
async fn a_torn_ledger_tail_is_repaired_at_start() {
    let env = TestHome::new();
    let row = |turn: &str| {
        json!({"session":"s-old","turn_id":turn,"channel_kind":"claude","model":"claude-sonnet-4",
               "input_tokens":100,"cached_input_tokens":20,"output_tokens":10,"reasoning_tokens":0,
               "requests":1,"estimated_cost_usd":0.0005,"ended_at":1000})
    };
    env.seed_log("usage.jsonl", &[row("t-1"), row("t-2")]);
    let ledger = env.home().join("daemon").join("usage.jsonl");
    let whole = std::fs::read_to_string(&ledger).unwrap();
    let torn = format!("{whole}{}", &row("t-3").to_string()[..40]);
    std::fs::write(&ledger, &torn).unwrap();

    let daemon = Daemon::start(&env.home()).await.unwrap();
    assert_eq!(std::fs::read_to_string(&ledger).unwrap(), whole);
    let mut c = daemon.client().await.unwrap();
    let reply = c
        .request(json!({"op":"session_usage","session":"s-old"}))
        .await
        .unwrap();
    assert_eq!(reply["totals"]["turns"], 2, "{reply}");
    assert_eq!(reply["totals"]["input_tokens"], 200);
    assert_eq!(reply["totals"]["cached_input_tokens"], 40);
    assert_eq!(reply["totals"]["estimated_cost_usd"], 0.001);
    assert_eq!(reply["sessions"][0]["started_at"], Value::Null);
}

fn fake_engine(name: &str) -> std::path::PathBuf {
    jucode_testsupport::build_bin(name, "jucode-fake-engines").unwrap()
}

fn engine_fixture(name: &str) -> String {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/engines");
    root.join(name).display().to_string()
}

/// Claude Code's `result.usage` reaches the ledger through its adapter, and a turn still in
/// progress (waiting on an approval) is counted as running, not as a turn.
#[tokio::test]
async fn a_claude_turn_reaches_the_ledger_and_a_running_turn_counts_as_running() {
    let env = TestHome::new();
    let root = env.root().to_path_buf();
    let cwd = env.project("work");
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let options = json!({
        "bin": fake_engine("fake-claude").display().to_string(),
        "env": {
            "FAKE_ENGINE_SCRIPT": engine_fixture("claude-code-2.1.332-print-3turns.jsonl"),
            "CLAUDE_CONFIG_DIR": root.join("claude-config").display().to_string(),
        },
    });
    let created = c
        .request(json!({"op":"session_create","cwd":cwd.display().to_string(),"engine":"claude","options":options}))
        .await
        .unwrap();
    let id = created["session"].as_str().unwrap().to_string();
    let usage = turn(&mut c, &id, "RUN: echo hi").await;
    assert_eq!(usage["input_tokens"], 20, "{usage}");
    assert!(usage["billing_turn"].is_string());

    c.send(json!({"op":"user_message","session":id,"content":"RUN: touch hi.txt && echo hi"}))
        .await
        .unwrap();
    c.recv_type("approval_request", Some(&id)).await.unwrap();
    let reply = c
        .request(json!({"op":"session_usage","session":id}))
        .await
        .unwrap();
    let totals = &reply["totals"];
    assert_eq!(totals["turns"], 1, "{reply}");
    assert_eq!(totals["running"], 1, "{reply}");
    assert_eq!(totals["input_tokens"], 20);
    assert_eq!(totals["output_tokens"], 10);
    assert_eq!(reply["turns"][0]["turn_id"], usage["billing_turn"]);
}

/// The ledger's lines for `session`.
fn ledger_rows(env: &TestHome, session: &str) -> Vec<Value> {
    let ledger = env.home().join("daemon").join("usage.jsonl");
    std::fs::read_to_string(ledger)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["session"] == session)
        .collect()
}

/// Creates a session on `engine` with `options` and returns its id (a Codex session's is its
/// thread's).
async fn create(c: &mut Client, cwd: &std::path::Path, engine: &str, options: Value) -> String {
    let created = c
        .request(json!({"op":"session_create","cwd":cwd.display().to_string(),"engine":engine,"options":options}))
        .await
        .unwrap();
    assert_eq!(created["type"], "session_created", "{created}");
    created["session"].as_str().unwrap().to_string()
}

/// A Codex turn (`thread/tokenUsage/updated`, the fake replaying Codex 0.171.0) is one ledger
/// line with all five counters, and `session_usage` sums it.
#[tokio::test]
async fn a_codex_turn_reaches_the_ledger_with_its_five_counters() {
    let env = TestHome::new();
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let options = json!({
        "bin": fake_engine("fake-codex").display().to_string(),
        "env": {"FAKE_ENGINE_SCRIPT": engine_fixture("codex-0.171.0-interop-resume-first.jsonl")},
    });
    let id = create(&mut c, &env.project("work"), "codex", options).await;
    let usage = turn(&mut c, &id, "remember pineapple").await;
    assert!(usage["billing_turn"].is_string(), "{usage}");

    let rows = ledger_rows(&env, &id);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["channel_kind"], "codex");
    assert_eq!(row["turn_id"], usage["billing_turn"]);
    for (counter, want) in [
        ("input_tokens", 10),
        ("cached_input_tokens", 0),
        ("cache_write_input_tokens", 0),
        ("output_tokens", 5),
        ("reasoning_tokens", 0),
    ] {
        assert_eq!(row[counter], want, "{counter} in {row}");
    }
    let reply = c
        .request(json!({"op":"session_usage","session":id}))
        .await
        .unwrap();
    assert_eq!(reply["totals"]["turns"], 1, "{reply}");
    assert_eq!(reply["totals"]["input_tokens"], 10);
    assert_eq!(reply["totals"]["output_tokens"], 5);
    assert_eq!(reply["turns"][0]["turn_id"], usage["billing_turn"]);
}

/// An ACP turn whose `session/prompt` result carries `usage` (claude-agent-acp 0.101.0) is one
/// ledger line with all five counters (`cachedReadTokens`, `cachedWriteTokens`,
/// `thoughtTokens` mapped), shown by `session_usage`.
#[tokio::test]
async fn an_acp_turn_reaches_the_ledger_with_its_five_counters() {
    let env = TestHome::new();
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let options = json!({
        "command": fake_engine("fake-acp").display().to_string(),
        "env": {"FAKE_ENGINE_SCRIPT": engine_fixture("claude-agent-acp-0.101.0-interop-reopen-first.jsonl")},
    });
    let id = create(&mut c, &env.project("work"), "acp", options).await;
    let usage = turn(&mut c, &id, "remember pineapple").await;
    let rows = ledger_rows(&env, &id);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["turn_id"], usage["billing_turn"]);
    for (counter, want) in [
        ("input_tokens", 10),
        ("cached_input_tokens", 0),
        ("cache_write_input_tokens", 0),
        ("output_tokens", 5),
        ("reasoning_tokens", 0),
    ] {
        assert_eq!(row[counter], want, "{counter} in {row}");
    }
    let reply = c
        .request(json!({"op":"session_usage","session":id}))
        .await
        .unwrap();
    assert_eq!(reply["totals"]["turns"], 1, "{reply}");
    assert_eq!(reply["totals"]["input_tokens"], 10);
    assert_eq!(reply["totals"]["output_tokens"], 5);
}

/// ACP's `usage` is optional: a turn whose result has none is still a ledger line, with the
/// counters absent (not zero) and no estimate (unpriced, not free).
#[tokio::test]
async fn an_acp_turn_without_usage_is_recorded_as_absent_not_zero() {
    let env = TestHome::new();
    let script = env.root().join("acp-no-usage.jsonl");
    let lines = [
        json!({"dir":"meta","t":0,"meta":{"argv":["fake-acp"],"cwd":"/rec/work"}}),
        json!({"dir":"in","t":0,"frame":{"id":1,"method":"initialize","params":{},"jsonrpc":"2.0"}}),
        json!({"dir":"out","t":0,"frame":{"id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":false,"promptCapabilities":{}}},"jsonrpc":"2.0"}}),
        json!({"dir":"in","t":0,"frame":{"id":2,"method":"session/new","params":{"cwd":"/rec/work","mcpServers":[]},"jsonrpc":"2.0"}}),
        json!({"dir":"out","t":0,"frame":{"id":2,"result":{"sessionId":"acp-no-usage"},"jsonrpc":"2.0"}}),
        json!({"dir":"in","t":0,"frame":{"id":3,"method":"session/prompt","params":{"sessionId":"acp-no-usage","prompt":[{"type":"text","text":"hello"}]},"jsonrpc":"2.0"}}),
        json!({"dir":"out","t":0,"frame":{"method":"session/update","params":{"sessionId":"acp-no-usage","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}},"jsonrpc":"2.0"}}),
        json!({"dir":"out","t":0,"frame":{"id":3,"result":{"stopReason":"end_turn"},"jsonrpc":"2.0"}}),
    ];
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&script, text.join("\n")).unwrap();
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let options = json!({
        "command": fake_engine("fake-acp").display().to_string(),
        "env": {"FAKE_ENGINE_SCRIPT": script.display().to_string()},
    });
    let id = create(&mut c, &env.project("work"), "acp", options).await;
    let usage = turn(&mut c, &id, "hello").await;
    assert!(usage.get("input_tokens").is_none(), "{usage}");
    let rows = ledger_rows(&env, &id);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    for counter in [
        "input_tokens",
        "cached_input_tokens",
        "cache_write_input_tokens",
        "output_tokens",
        "reasoning_tokens",
    ] {
        assert!(row.get(counter).is_none(), "{counter} in {row}");
    }
    assert_eq!(row["estimated_cost_usd"], Value::Null);
    let reply = c
        .request(json!({"op":"session_usage","session":id}))
        .await
        .unwrap();
    assert_eq!(reply["totals"]["turns"], 1, "{reply}");
    assert_eq!(reply["totals"]["unpriced_requests"], 1, "{reply}");
}

/// A reply lists at most the newest 500 turns, oldest first, and says how many older ones it
/// left out; the totals still count every turn.
#[tokio::test]
async fn the_turns_list_keeps_the_newest_500_and_counts_the_rest() {
    let env = TestHome::new();
    let rows: Vec<Value> = (0..503u64)
        .map(|n| {
            json!({"session":"s-long","turn_id":format!("t-{n}"),"channel_kind":"claude",
                   "model":"claude-sonnet-4","input_tokens":10,"output_tokens":1,"requests":1,
                   "ended_at":1000 + n})
        })
        .chain(std::iter::once(
            json!({"session":"s-short","turn_id":"t-s","input_tokens":1,"ended_at":900}),
        ))
        .collect();
    env.seed_log("usage.jsonl", &rows);
    let daemon = Daemon::start(&env.home()).await.unwrap();
    let mut c = daemon.client().await.unwrap();
    let reply = c
        .request(json!({"op":"session_usage","session":"s-long"}))
        .await
        .unwrap();
    assert_eq!(reply["totals"]["turns"], 503, "{}", reply["totals"]);
    assert_eq!(reply["totals"]["input_tokens"], 5030);
    assert_eq!(reply["turns_omitted"], 3);
    let turns = reply["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 500);
    assert_eq!(turns[0]["turn_id"], "t-3");
    assert_eq!(turns[499]["turn_id"], "t-502");

    // A short list leaves nothing out.
    let reply = c
        .request(json!({"op":"session_usage","session":"s-short"}))
        .await
        .unwrap();
    assert_eq!(reply["turns_omitted"], 0, "{reply}");
    assert_eq!(reply["turns"].as_array().unwrap().len(), 1);
}
