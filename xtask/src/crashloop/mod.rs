//! `cargo xtask crashloop`: SIGKILL the real daemon at random moments while a client makes
//! acknowledged changes to every kind of state it can reach, and check after every restart that nothing
//! acknowledged is lost, nothing deleted comes back and nothing is delivered twice.
//!
//! Each round starts the daemon (built-in engine on the fake model, so agents run `CALL`
//! scripts), runs a seeded random mix of ops on one desktop connection, records each op
//! whose acknowledgement arrived, and kills the daemon after a random delay (so kills land
//! mid-write). The next start is checked against the record before its round runs.

mod model;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use jucode_protocol::daemon::reports::REPORT_LIST_MAX;
use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::{Client, Daemon, TestHome, http};
use serde_json::{Value, json};

use model::{KINDS, Model, Session};

pub struct Options {
    pub kills: usize,
    pub seed: Option<u64>,
    pub build: bool,
}

/// `[--quick] [--kills N] [--seed S] [--no-build]`.
pub fn parse(rest: &[String]) -> Result<Options> {
    let mut options = Options {
        kills: 1000,
        seed: None,
        build: true,
    };
    let mut args = rest.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => options.kills = 50,
            "--no-build" => options.build = false,
            "--kills" => {
                options.kills = args
                    .next()
                    .context("--kills needs a number")?
                    .parse()
                    .context("--kills needs a number")?;
            }
            "--seed" => {
                options.seed = Some(
                    args.next()
                        .context("--seed needs a number")?
                        .parse()
                        .context("--seed needs a number")?,
                );
            }
            other => bail!("unexpected argument {other}"),
        }
    }
    Ok(options)
}

/// xorshift64*: small, seeded, replayable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub fn run(options: Options) -> Result<bool> {
    let runtime = tokio::runtime::Runtime::new().context("starting tokio")?;
    runtime.block_on(async {
        if options.build {
            crate::daemon::build(false).await?;
        }
        run_loop(options).await
    })
}

#[allow(
    clippy::disallowed_methods,
    reason = "the run's wall time is reported, and kills are timed in real time"
)]
async fn run_loop(options: Options) -> Result<bool> {
    let seed = options.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            | 1
    });
    println!(
        "crashloop: seed {seed} ({} kills; replay with --seed {seed})",
        options.kills
    );
    let begun = Instant::now();
    let env = TestHome::new();
    let fake = FakeModel::start().await?;
    for id in ["a", "b"] {
        env.agent(id, &json!({"name": id, "cwd": env.project(id)}));
    }
    let projects: Vec<String> = (0..4)
        .map(|i| env.project(&format!("p{i}")).display().to_string())
        .collect();
    let config = fake.config("chat");
    let model = Arc::new(Mutex::new(Model::default()));
    let mut rng = Rng(seed);
    let mut problems: Vec<String> = Vec::new();
    for round in 0..options.kills {
        let mut daemon = Daemon::start_builtin(&env.home(), &config).await?;
        let mut desk = daemon.client().await?;
        if round > 0 {
            let found = verify(&model, &env, &fake, &daemon, &mut desk, &mut rng).await?;
            for p in found {
                problems.push(format!("round {round}: {p}"));
            }
        }
        let driver = tokio::spawn(drive(
            desk,
            daemon.addr,
            Rng(rng.next() | 1),
            model.clone(),
            projects.clone(),
            round,
        ));
        let alive = Duration::from_millis(5 + rng.below(250));
        tokio::time::sleep(alive).await;
        daemon.kill9_and_wait().await?;
        let _ = driver.await;
        if (round + 1) % 50 == 0 {
            println!(
                "crashloop: {} kills, {:.0?}, {} problems",
                round + 1,
                begun.elapsed(),
                problems.len()
            );
        }
    }
    // A last clean start: every acknowledged message and timer is delivered, each once.
    let mut daemon = Daemon::start_builtin(&env.home(), &config).await?;
    let mut desk = daemon.client().await?;
    problems.extend(verify(&model, &env, &fake, &daemon, &mut desk, &mut rng).await?);
    // No client reads during the drain: one that stops to reread the conversations falls
    // behind the backlog's frames and is dropped as too slow. Done when nothing is waiting;
    // failed when a minute passes with no new delivery.
    drop(desk);
    let drain = async {
        let mut fewest = usize::MAX;
        let mut progress = Instant::now();
        loop {
            let waiting = waiting_deliveries(&model, &env, &fake)?;
            if waiting.is_empty() {
                return anyhow::Ok(());
            }
            if waiting.len() < fewest {
                fewest = waiting.len();
                progress = Instant::now();
            } else if progress.elapsed() > Duration::from_secs(60) {
                anyhow::bail!("never delivered: {waiting:?}");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    if let Err(e) = drain.await {
        problems.push(format!("{e:#}"));
    }
    daemon.stop().await?;
    if let Err(e) = waiting_deliveries(&model, &env, &fake) {
        problems.push(format!("{e:#}"));
    }
    let tools = tool_acks(&model, &fake);
    let m = lock(&model);
    println!(
        "crashloop: {} kills in {:.1?}, seed {seed}",
        options.kills,
        begun.elapsed()
    );
    println!("  {:<18} acknowledged", "kind");
    for kind in KINDS {
        println!("  {kind:<18} {}", m.acked.get(kind).copied().unwrap_or(0));
    }
    for (what, n) in [
        ("agent→agent (tool)", tools.messages.len()),
        ("timer set (tool)", tools.timers.len()),
        ("question (tool)", tools.questions.len()),
        ("report (tool)", tools.reports.len()),
    ] {
        println!("  {what:<18} {n}");
    }
    let unused: Vec<&&str> = KINDS
        .iter()
        .filter(|k| !m.acked.contains_key(**k))
        .collect();
    if !unused.is_empty() {
        problems.push(format!("kinds never acknowledged: {unused:?}"));
    }
    if problems.is_empty() {
        println!("crashloop: nothing lost, nothing duplicated");
        Ok(true)
    } else {
        for p in problems.iter().take(50) {
            println!("crashloop: PROBLEM {p}");
        }
        println!(
            "crashloop: FAILED with {} problems (seed {seed})",
            problems.len()
        );
        // The home goes with the run's temporary directory: keep a copy to look into.
        let kept = std::env::temp_dir().join(format!("jucode-crashloop-{seed}"));
        let copied = std::process::Command::new("cp")
            .arg("-a")
            .arg(env.root())
            .arg(&kept)
            .status();
        if copied.is_ok_and(|s| s.success()) {
            println!("crashloop: the state is kept in {}", kept.display());
        }
        Ok(false)
    }
}

fn lock(model: &Arc<Mutex<Model>>) -> std::sync::MutexGuard<'_, Model> {
    model.lock().unwrap_or_else(|p| p.into_inner())
}

fn waiting_deliveries(
    model: &Arc<Mutex<Model>>,
    env: &TestHome,
    fake: &FakeModel,
) -> Result<Vec<String>> {
    let held = env.saved_user_messages()?;
    let tools = tool_acks(model, fake);
    model::check_deliveries(&lock(model), &held, &tools)
}

/// Every tool acknowledgement so far: the fake model's new requests are read once and
/// dropped (each holds its whole conversation, so keeping them all grows quadratically).
fn tool_acks(model: &Arc<Mutex<Model>>, fake: &FakeModel) -> model::ToolAcks {
    let new = fake.take_requests();
    let mut m = lock(model);
    m.tools.absorb(&new);
    m.tools.clone()
}

/// The checks of a fresh start: the connect batch and the question and report lists against
/// the model, deliveries at most once, uploads whole and no part left over, a few paired
/// devices' tokens still let them in and revoked ones do not.
async fn verify(
    model: &Arc<Mutex<Model>>,
    env: &TestHome,
    fake: &FakeModel,
    daemon: &Daemon,
    desk: &mut Client,
    rng: &mut Rng,
) -> Result<Vec<String>> {
    let mut problems = model::check_batch(&lock(model), &desk.connect_batch)?;
    if let Err(e) = waiting_deliveries(model, env, fake) {
        problems.push(format!("{e:#}"));
    }
    let questions = desk.request(json!({"op":"question_list"})).await?;
    let reports = desk
        .request(json!({"op":"report_list","limit":REPORT_LIST_MAX}))
        .await?;
    let tools = tool_acks(model, fake);
    problems.extend(model::check_items(
        &lock(model),
        &tools,
        &questions,
        &reports,
    ));
    problems.extend(check_uploads(&lock(model), &env.home().join("uploads")));
    let (tokens, revoked) = {
        let m = lock(model);
        let pick = |all: &[String], rng: &mut Rng| -> Vec<String> {
            let n = all.len() as u64;
            (0..n.min(2))
                .map(|_| all[rng.below(n) as usize].clone())
                .collect()
        };
        let live: Vec<String> = m.devices.iter().map(|(_, t)| t.clone()).collect();
        (pick(&live, rng), pick(&m.revoked, rng))
    };
    for token in tokens {
        if let Err(e) = Client::connect_and_greet(&daemon.url(&token)).await {
            problems.push(format!("a paired device is refused: {e:#}"));
        }
    }
    for token in revoked {
        if Client::connect_and_greet(&daemon.url(&token)).await.is_ok() {
            problems.push("a revoked device is let in".into());
        }
    }
    Ok(problems)
}

/// Every acknowledged upload is there with its bytes, and the start removed every `.part`.
fn check_uploads(model: &Model, dir: &std::path::Path) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, bytes) in &model.uploads {
        match std::fs::read(path) {
            Ok(have) if &have == bytes => {}
            Ok(have) => problems.push(format!(
                "upload {path}: {} bytes, {} were sent",
                have.len(),
                bytes.len()
            )),
            Err(e) => problems.push(format!("acknowledged upload {path} lost: {e}")),
        }
    }
    for day in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(day.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if file.file_name().to_string_lossy().ends_with(".part") {
                problems.push(format!("{} left over after a start", file.path().display()));
            }
        }
    }
    problems
}

/// One round's client: random ops until the connection dies with the daemon.
async fn drive(
    mut c: Client,
    addr: std::net::SocketAddr,
    mut rng: Rng,
    model: Arc<Mutex<Model>>,
    projects: Vec<String>,
    round: usize,
) -> Result<()> {
    for i in 0.. {
        let tag = format!("r{round}-{i}");
        let kind = KINDS[rng.below(KINDS.len() as u64) as usize];
        match kind {
            "session_create" => {
                let cwd = &projects[rng.below(projects.len() as u64) as usize];
                let r = c.request(json!({"op":"session_create","cwd":cwd})).await?;
                if r["type"] == "session_created"
                    && let Some(id) = r["session"].as_str()
                {
                    let mut m = lock(&model);
                    m.sessions.insert(id.to_string(), Session::default());
                    m.ack(kind);
                }
            }
            "session_rename" | "session_close" => {
                let target = {
                    let m = lock(&model);
                    let open: Vec<&String> = m
                        .sessions
                        .iter()
                        .filter(|(_, s)| !s.closed)
                        .map(|(id, _)| id)
                        .collect();
                    if open.is_empty() {
                        continue;
                    }
                    open[rng.below(open.len() as u64) as usize].clone()
                };
                if kind == "session_rename" {
                    if let Some(s) = lock(&model).sessions.get_mut(&target) {
                        s.unsure_titles.push(tag.clone());
                    }
                    c.send(json!({"op":"session_meta","session":target,"title":tag}))
                        .await?;
                } else {
                    c.send(json!({"op":"session_close","session":target}))
                        .await?;
                }
                // Ops of one connection are handled in order: the pong acknowledges it.
                let pong = c.request(json!({"op":"ping"})).await?;
                if pong["type"] == "pong" {
                    let mut m = lock(&model);
                    if let Some(s) = m.sessions.get_mut(&target) {
                        if kind == "session_rename" {
                            s.title = Some(tag);
                            s.unsure_titles.clear();
                        } else {
                            s.closed = true;
                        }
                    }
                    m.ack(kind);
                }
            }
            "workspace" => {
                // Mostly a new directory, so the workspace grows; now and then one added before.
                let path = if rng.below(4) == 0 {
                    projects[rng.below(projects.len() as u64) as usize].clone()
                } else {
                    let Some(parent) = std::path::Path::new(&projects[0]).parent() else {
                        continue;
                    };
                    let dir = parent.join("w").join(&tag);
                    std::fs::create_dir_all(&dir)?;
                    dir.display().to_string()
                };
                let r = c.request(json!({"op":"project_add","path":path})).await?;
                if r["type"] == "workspaces" {
                    let mut m = lock(&model);
                    m.projects.insert(path);
                    m.ack(kind);
                }
            }
            "requirement" => {
                let r = c
                    .request(json!({"op":"requirement_create","text":tag}))
                    .await?;
                if r["type"] == "requirement_created"
                    && let Some(id) = r["requirement"].as_str()
                {
                    let mut m = lock(&model);
                    m.requirements.insert(id.to_string(), tag);
                    m.ack(kind);
                }
            }
            "schedule_save" => {
                // Once a year: saved and listed, never due within the run.
                let r = c
                    .request(
                        json!({"op":"schedule_save","schedule":{"agent":"b","name":tag,
                        "prompt":format!("tick-{tag}"),"repeat":"cron","cron":"0 0 1 1 *","new_session":false}}),
                    )
                    .await?;
                if r["type"] == "schedule_saved"
                    && let Some(id) = r["schedule"]["id"].as_str()
                {
                    let mut m = lock(&model);
                    m.schedules.insert(format!("{id} {tag}"));
                    m.ack(kind);
                }
            }
            "schedule_delete" => {
                let Some(entry) = ({
                    let m = lock(&model);
                    let all: Vec<&String> = m.schedules.iter().collect();
                    (!all.is_empty()).then(|| all[rng.below(all.len() as u64) as usize].clone())
                }) else {
                    continue;
                };
                let (id, _) = entry.split_once(' ').unwrap_or((&entry, ""));
                // Until the reply, the task may be deleted or not: checked neither way.
                lock(&model).schedules.remove(&entry);
                let r = c
                    .request(json!({"op":"schedule_delete","schedule":id}))
                    .await?;
                if r["type"] == "schedule_deleted" {
                    let mut m = lock(&model);
                    m.deleted_schedules.insert(entry);
                    m.ack(kind);
                }
            }
            "schedule_run" => {
                // Each task runs at most once, so any second delivery of its prompt is a
                // duplicate, whether or not its run was acknowledged.
                let Some(entry) = ({
                    let m = lock(&model);
                    let all: Vec<&String> = m
                        .schedules
                        .iter()
                        .filter(|e| !m.runs_tried.contains(*e))
                        .collect();
                    (!all.is_empty()).then(|| all[rng.below(all.len() as u64) as usize].clone())
                }) else {
                    continue;
                };
                lock(&model).runs_tried.insert(entry.clone());
                let (id, name) = entry.split_once(' ').unwrap_or((&entry, ""));
                let r = c
                    .request(json!({"op":"schedule_run","schedule":id}))
                    .await?;
                if r["type"] == "schedule_started" {
                    let mut m = lock(&model);
                    m.runs.insert(format!("tick-{name}"));
                    m.ack(kind);
                }
            }
            "device_pair" => {
                let code = c.request(json!({"op":"pair_start"})).await?;
                let body = json!({"code": code["code"], "name": tag}).to_string();
                let r = http(addr, "POST", "/api/pair", Some(body.as_bytes())).await?;
                let paired = if r.status == 200 {
                    r.json()?
                } else {
                    Value::Null
                };
                if let (Some(device), Some(token)) =
                    (paired["device"].as_str(), paired["token"].as_str())
                {
                    let mut m = lock(&model);
                    m.devices.push((device.to_string(), token.to_string()));
                    m.ack(kind);
                }
            }
            "device_revoke" => {
                let (device, token) = {
                    let mut m = lock(&model);
                    if m.devices.is_empty() {
                        continue;
                    }
                    // Until the reply it may be revoked or not: checked neither way.
                    let i = rng.below(m.devices.len() as u64) as usize;
                    m.devices.swap_remove(i)
                };
                let r = c
                    .request(json!({"op":"device_revoke","device":device}))
                    .await?;
                if r["type"] == "device_revoked" {
                    let mut m = lock(&model);
                    m.revoked.push(token);
                    m.ack(kind);
                }
            }
            "upload" => {
                let size = 1 + rng.below(2048) as usize;
                let bytes: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
                let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
                // Half of them in two chunks: a kill between leaves a part for the next start.
                let split = if rng.below(2) == 0 { size / 2 } else { 0 };
                let name = format!("{tag}.bin");
                let r = if split > 0 {
                    let first = c
                        .request(json!({"op":"upload","name":name,"data":b64(&bytes[..split]),"last":false}))
                        .await?;
                    let Some(id) = first["upload"].as_str() else {
                        continue;
                    };
                    c.request(json!({"op":"upload","upload":id,"offset":split,
                        "data":b64(&bytes[split..]),"last":true}))
                        .await?
                } else {
                    c.request(json!({"op":"upload","name":name,"data":b64(&bytes),"last":true}))
                        .await?
                };
                if r["type"] == "uploaded"
                    && let Some(path) = r["path"].as_str()
                {
                    let mut m = lock(&model);
                    m.uploads.push((path.to_string(), bytes));
                    m.ack(kind);
                }
            }
            "question_answer" | "report_read" => {
                let (list_op, field) = if kind == "question_answer" {
                    ("question_list", "questions")
                } else {
                    ("report_list", "reports")
                };
                let listed = c.request(json!({"op":list_op})).await?;
                let ids: Vec<String> = {
                    let m = lock(&model);
                    listed[field]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|i| i["read"] != true)
                        .filter_map(|i| i["id"].as_str())
                        .filter(|id| !m.answers.contains_key(*id) && !m.reports_read.contains(*id))
                        .map(String::from)
                        .collect()
                };
                if ids.is_empty() {
                    continue;
                }
                let id = ids[rng.below(ids.len() as u64) as usize].clone();
                if kind == "question_answer" {
                    let answer = format!("ans-{tag}");
                    let r = c
                        .request(json!({"op":"question_answer","question":id,"answer":answer}))
                        .await?;
                    if r["type"] == "question_answered" {
                        let mut m = lock(&model);
                        m.answers.insert(id, answer);
                        m.ack(kind);
                    }
                } else {
                    let r = c.request(json!({"op":"report_read","report":id})).await?;
                    if r["type"] == "report_read" {
                        let mut m = lock(&model);
                        m.reports_read.insert(id);
                        m.ack(kind);
                    }
                }
            }
            "agent_message" | "agent_timer" | "agent_question" | "agent_report" => {
                // Few of these: each is a model turn of agent `a`.
                if rng.below(3) != 0 {
                    continue;
                }
                let body = match kind {
                    "agent_message" => {
                        format!(r#"CALL message_agent {{"agent":"b","body":"relay-{tag}"}}"#)
                    }
                    "agent_timer" => format!(
                        r#"CALL timer {{"action":"set","in_seconds":1,"body":"wake-{tag}"}}"#
                    ),
                    // A day to answer: no default is delivered within the run.
                    "agent_question" => format!(
                        r#"CALL question {{"title":"q-{tag}","default":"go on","due_in_seconds":86400}}"#
                    ),
                    _ => format!(r#"CALL report {{"title":"rep-{tag}","body":"done"}}"#),
                };
                let r = c
                    .request(json!({"op":"message_send","agent":"a","body":body}))
                    .await?;
                if r["type"] == "message_accepted" {
                    let mut m = lock(&model);
                    m.messages.insert(body);
                    m.ack(kind);
                }
            }
            other => bail!("no driver for {other}"),
        }
    }
    Ok(())
}
