//! `cargo xtask crashloop`: SIGKILL the real daemon at random moments while a client makes
//! acknowledged changes to every kind of state it can reach, and check after every restart that nothing
//! acknowledged is lost, nothing deleted comes back and nothing is delivered twice.
//!
//! Each round starts the daemon (built-in engine on the fake model, so agents run `CALL`
//! scripts), runs a seeded random mix of ops on one desktop connection (`ops/`), records each
//! op whose acknowledgement arrived (`model.rs`), and kills the daemon after a random delay
//! (so kills land mid-write). The next start is checked against the record (`verify.rs`,
//! `checks.rs`) before its round runs.

mod checks;
mod decided;
mod model;
mod ops;
mod repeats;
mod verify;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use jucode_testsupport::fake_model::FakeModel;
use jucode_testsupport::{Daemon, Engine, TestHome};
use serde_json::{Value, json};
use tokio::signal::unix::{SignalKind, signal};

use model::{KINDS, Model};
use verify::{World, lock, verify};

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
pub struct Rng(u64);

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

/// Wall time, unix milliseconds: tasks come due by the real clock here.
#[allow(
    clippy::disallowed_methods,
    reason = "the crash loop runs the daemon in real time"
)]
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Runs the loop until done, or until this process gets SIGTERM or SIGINT: then the loop is
/// dropped where it stands, which SIGKILLs the daemon child it holds (`Daemon` kills its
/// child when dropped), and the run fails.
pub fn run(options: Options) -> Result<bool> {
    let runtime = tokio::runtime::Runtime::new().context("starting tokio")?;
    runtime.block_on(async {
        let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("SIGINT handler")?;
        let work = async {
            if options.build {
                crate::daemon::build(false).await?;
            }
            run_loop(options).await
        };
        let stopped_by = tokio::select! {
            done = work => return done,
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        println!("crashloop: stopped by {stopped_by}; its daemon was killed");
        bail!("stopped by {stopped_by}")
    })
}

/// The daemon on the loop's home: built-in engine, fake model, UTC (the tasks due by the
/// clock are saved in UTC).
async fn start(env: &TestHome, config: &Value) -> Result<Daemon> {
    Daemon::builder(&env.home())
        .engine(Engine::Builtin)
        .config(config)
        .env("TZ", "UTC")
        .start()
        .await
}

#[allow(
    clippy::disallowed_methods,
    reason = "the run's wall time is reported, and kills are timed in real time"
)]
async fn run_loop(options: Options) -> Result<bool> {
    let seed = options.seed.unwrap_or_else(|| wall_ms() | 1);
    println!(
        "crashloop: seed {seed} ({} kills; replay with --seed {seed})",
        options.kills
    );
    let begun = Instant::now();
    let env = TestHome::new();
    let fake = FakeModel::start().await?;
    // No sandbox: what is checked is the state, and a machine without bubblewrap runs it too.
    for id in ["a", "b"] {
        env.agent(
            id,
            &json!({"name": id, "cwd": env.project(id), "sandbox": "full-access"}),
        );
    }
    // Its escalated commands wait for a person, who never watches: they are deferred.
    env.agent(
        "d",
        &json!({"name": "d", "cwd": env.project("d"), "sandbox": "full-access",
            "approval_mode": "manual"}),
    );
    let projects: Vec<String> = (0..4)
        .map(|i| env.project(&format!("p{i}")).display().to_string())
        .collect();
    let config = fake.config("chat");
    let world = World {
        runs_file: env.root().join("runs.txt"),
        env,
        fake,
    };
    let model = Arc::new(Mutex::new(Model::default()));
    let mut rng = Rng(seed);
    let mut problems: Vec<String> = Vec::new();
    // When each daemon was down: from its kill until the next one listened (unix ms).
    let mut down: Vec<(u64, u64)> = Vec::new();
    let mut killed_at = None;
    for round in 0..options.kills {
        let mut daemon = start(&world.env, &config).await?;
        if let Some(at) = killed_at.take() {
            down.push((at, wall_ms()));
        }
        let mut desk = daemon.client().await?;
        if round > 0 {
            let found = verify(&model, &world, &daemon, &mut desk, &mut rng).await?;
            for p in found {
                problems.push(format!("round {round}: {p}"));
            }
        }
        let driver = tokio::spawn(ops::drive(ops::Round {
            c: desk,
            addr: daemon.addr,
            rng: Rng(rng.next() | 1),
            model: model.clone(),
            projects: projects.clone(),
            runs_file: world.runs_file.clone(),
            round,
        }));
        // One round in eight lives up to 2 s more, long enough for a dispatcher to plan and
        // its tasks to start (a kill while planning fails the dispatch, as designed).
        let longer = if rng.below(8) == 0 {
            rng.below(2000)
        } else {
            0
        };
        let alive = Duration::from_millis(5 + rng.below(250) + longer);
        tokio::time::sleep(alive).await;
        daemon.kill9_and_wait().await?;
        killed_at = Some(wall_ms());
        let _ = driver.await;
        world.after_kill(&model);
        // Half the time a task comes due within 2 s (one repeating every minute is due at
        // every minute's start), stay down across its time: the next start must run it once
        // (the missed-run path).
        let now = wall_ms();
        let soon = {
            let m = lock(&model);
            let minute = (!m.repeating.is_empty()).then(|| now.div_ceil(60_000) * 60_000);
            m.due
                .values()
                .map(|at| at * 1000)
                .chain(minute)
                .filter(|at| (now..now + 2000).contains(at))
                .min()
        };
        if let Some(at) = soon
            && rng.below(2) == 0
        {
            tokio::time::sleep(Duration::from_millis(at + 500 - now)).await;
        }
        if (round + 1) % 50 == 0 {
            println!(
                "crashloop: {} kills, {:.0?}, {} problems",
                round + 1,
                begun.elapsed(),
                problems.len()
            );
        }
    }
    // A last clean start: every acknowledged message, timer, task, decision is delivered,
    // each once.
    let mut daemon = start(&world.env, &config).await?;
    if let Some(at) = killed_at.take() {
        down.push((at, wall_ms()));
    }
    let mut desk = daemon.client().await?;
    problems.extend(verify(&model, &world, &daemon, &mut desk, &mut rng).await?);
    // No client reads during the drain: one that stops to reread the conversations falls
    // behind the backlog's frames and is dropped as too slow. Done when nothing is waiting;
    // failed when a minute passes with no new delivery and no task still to come due.
    drop(desk);
    let drain = async {
        let mut fewest = usize::MAX;
        let mut progress = Instant::now();
        loop {
            let waiting = world.waiting_deliveries(&model)?;
            if waiting.is_empty() {
                return anyhow::Ok(());
            }
            let now_s = wall_ms() / 1000;
            let to_come = lock(&model).due.values().any(|at| *at + 1 >= now_s);
            if waiting.len() < fewest || to_come {
                fewest = fewest.min(waiting.len());
                progress = Instant::now();
            } else if progress.elapsed() > Duration::from_secs(60) {
                anyhow::bail!("never delivered: {waiting:?}");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    if let Err(e) = drain.await {
        problems.push(format!("{e:#}"));
        // What the daemon said about it, without the repeats.
        let mut said: Vec<String> = daemon.logs();
        said.dedup_by(|a, b| a.get(40..) == b.get(40..));
        for line in said.iter().rev().take(20).rev() {
            println!("crashloop: daemon: {line}");
        }
    }
    if let Err(e) = told_deferrals_listed(&daemon, &model).await {
        problems.push(format!("{e:#}"));
    }
    // How the dispatches ended, for the figures.
    let mut ended: std::collections::BTreeMap<String, usize> = Default::default();
    let listed = daemon
        .client()
        .await?
        .request(json!({"op":"dispatch_list"}))
        .await?;
    for d in listed["dispatches"].as_array().into_iter().flatten() {
        *ended
            .entry(format!("dispatch {}", d["status"].as_str().unwrap_or("?")))
            .or_default() += 1;
    }
    daemon.stop().await?;
    if let Err(e) = world.waiting_deliveries(&model) {
        problems.push(format!("{e:#}"));
    }
    let tools = world.tool_acks(&model);
    let m = lock(&model);
    let every = repeats::read(&world.env.home(), &m.repeating);
    let every_runs: usize = every.values().map(Vec::len).sum();
    // Runs recorded over 1.5 s after their minute (the daemon ticks every second): minutes
    // whose start no daemon saw, run by the next start.
    let every_late = every
        .values()
        .flatten()
        .filter(|r| r.at_ms >= r.due * 1000 + 1500)
        .count();
    println!(
        "crashloop: {} kills in {:.1?}, seed {seed}",
        options.kills,
        begun.elapsed()
    );
    println!("  {:<20} acknowledged", "kind");
    for kind in KINDS {
        println!("  {kind:<20} {}", m.acked.get(kind).copied().unwrap_or(0));
    }
    // Due while no daemon ran: the missed-run path (fired once at the next start).
    let missed = m
        .due
        .values()
        .filter(|at| {
            down.iter()
                .any(|(from, to)| (*from..*to).contains(&(*at * 1000)))
        })
        .count();
    let decided = |allow: bool| {
        m.actions
            .values()
            .filter(|a| a.state == model::Action::Decided(allow))
            .count()
    };
    for (what, n) in [
        ("agent→agent (tool)", tools.messages.len()),
        ("timer set (tool)", tools.timers.len()),
        ("question (tool)", tools.questions.len()),
        ("report (tool)", tools.reports.len()),
        ("deferred (engine)", tools.deferred.len()),
        ("allowed (acked)", decided(true)),
        ("denied (acked)", decided(false)),
        ("dispatch tasks", m.task_sessions.len()),
        (
            "  asking approval",
            m.task_sessions
                .keys()
                .filter(|(d, n)| {
                    m.dispatches
                        .get(d)
                        .and_then(|d| d.tasks.get(n.saturating_sub(1) as usize))
                        .is_some_and(|t| t.starts_with("CALL bash"))
                })
                .count(),
        ),
        ("due while down", missed),
        ("every-minute runs", every_runs),
        ("  run late (down)", every_late),
        ("proposed (tool)", tools.proposed.len()),
    ] {
        println!("  {what:<20} {n}");
    }
    for (what, n) in ended {
        println!("  {what:<20} {n}");
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
            .arg(world.env.root())
            .arg(&kept)
            .status();
        if copied.is_ok_and(|s| s.success()) {
            println!("crashloop: the state is kept in {}", kept.display());
        }
        Ok(false)
    }
}

/// Every deferral a killed daemon told the model of is listed once its session has started
/// again: agent `d`'s sessions are opened (as a person looking at them would), and the list
/// is read until it has them all, a minute at most.
#[allow(
    clippy::disallowed_methods,
    reason = "the wait for the sessions to start is in real time"
)]
async fn told_deferrals_listed(daemon: &Daemon, model: &Arc<Mutex<Model>>) -> Result<()> {
    let mut c = daemon.client().await?;
    let sessions: Vec<String> = c
        .connect_batch
        .iter()
        .filter(|f| f["type"] == "sessions")
        .flat_map(|f| f["sessions"].as_array().cloned().unwrap_or_default())
        .filter(|s| s["agent"] == "d")
        .filter_map(|s| s["session"].as_str().map(String::from))
        .collect();
    for session in sessions {
        c.request(json!({"op":"session_open","session":session}))
            .await?;
    }
    let begun = Instant::now();
    loop {
        let listed = c.request(json!({"op":"actions_list"})).await?;
        let missing = checks::unlisted_told(&lock(model), &listed);
        if missing.is_empty() {
            return Ok(());
        }
        if begun.elapsed() > Duration::from_secs(60) {
            bail!("deferred actions the model was told of, never listed: {missing:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
