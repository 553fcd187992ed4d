//! Bringing a seat up: private home, credentials, `mcp.json`, fork or continuation, model, TUI and
//! readiness.

use super::*;

pub(super) async fn start(
    factory: &JcodeFactory,
    ctx: HarnessContext,
) -> std::result::Result<Arc<dyn Harness>, (Error, ConnectorLog)> {
    let early = |e: Error| (e, ConnectorLog::stderr_only());
    let j = |k: &str| ctx.jcode.get(k).cloned().filter(|v| !v.is_empty());
    let working_dir = match &factory.working_dir {
        Some(w) => w.clone(),
        None => std::env::current_dir().map_err(|e| early(Error::io(".", e)))?,
    };
    use std::io::IsTerminal;
    let tui = tui_mode(
        j("COTAL_JCODE_TUI").as_deref(),
        std::io::stdout().is_terminal(),
    )
    .map_err(early)?;
    home::refuse_project_mcp(&working_dir).map_err(early)?;
    let workspace = j("COTAL_JCODE_HOME")
        .map(PathBuf::from)
        .or_else(|| ctx.workspace_root.clone())
        .unwrap_or_else(|| working_dir.clone());
    if workspace != working_dir {
        home::refuse_project_mcp(&workspace).map_err(early)?;
    }
    let home = PrivateHome::prepare(&workspace, &ctx.space, &ctx.name).map_err(early)?;
    let log = ConnectorLog::open(&home);
    macro_rules! tryl {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => return Err((e, log)),
            }
        };
    }
    let bound = match j("COTAL_JCODE_READINESS_TIMEOUT_MS") {
        Some(ms) => Duration::from_millis(tryl!(ms.parse::<u64>().map_err(|_| Error::Config(
            "COTAL_JCODE_READINESS_TIMEOUT_MS is not a number".into()
        )))),
        None => READINESS_TIMEOUT,
    };
    let deferral_max = match j("COTAL_JCODE_DEFERRAL_MAX_MS") {
        Some(ms) => Duration::from_millis(tryl!(
            ms.parse::<u64>()
                .map_err(|_| Error::Config("COTAL_JCODE_DEFERRAL_MAX_MS is not a number".into()))
        )),
        None => DEFERRAL_MAX,
    };
    let frames = if tryl!(frame_log_wanted(j("COTAL_JCODE_FRAME_LOG").as_deref())) {
        let now_ms = i64::try_from(SystemClock::new().now_ms()).unwrap_or(i64::MAX);
        let ts = chrono::DateTime::from_timestamp_millis(now_ms)
            .unwrap_or_default()
            .format("%Y%m%dT%H%M%S%.3fZ");
        let path = home
            .root
            .join("logs")
            .join(format!("harness-frames-{ts}-{}.jsonl", std::process::id()));
        let f = tryl!(crate::api::FrameLog::open(&path));
        log.private(&format!("Harness API frames: {}", path.display()));
        Some(f)
    } else {
        None
    };

    // Credentials: the operator's current logins, refreshed every launch.
    let op_home = fork::operator_home(&ctx.agent_env, None);
    let user_home = env_get(&ctx.agent_env, "HOME").map(PathBuf::from);
    if let Some(op) = &op_home {
        if op == &home.root {
            return Err((
                Error::PrivateState("the operator's jcode home is the private home".into()),
                log,
            ));
        }
        let app_config = env_get(&ctx.agent_env, "XDG_CONFIG_HOME")
            .map(|x| PathBuf::from(x).join("jcode"))
            .or_else(|| user_home.as_ref().map(|h| h.join(".config").join("jcode")));
        let src = creds::Sources {
            jcode_home: op.clone(),
            app_config,
            user_home: user_home.clone(),
        };
        let report = tryl!(creds::mirror(
            &home.root,
            &creds::inventory(&src, &home.root)
        ));
        log.private(&format!(
            "credential mirror: {} copied, {} removed",
            report.copied.len(),
            report.removed.len()
        ));
    }
    // Only the connector's own cotal entry.
    let mcp = tryl!(
        serde_json::to_vec_pretty(&ctx.mcp.mcp_json())
            .map_err(|e| Error::PrivateState(e.to_string()))
    );
    tryl!(home.write_private("mcp.json", &mcp));
    tryl!(home.check_sessions_writable());

    let mut fork_session = None;
    if let Some(src) = j("COTAL_JCODE_RESUME") {
        let src_home = fork::operator_home(&ctx.agent_env, j("COTAL_JCODE_RESUME_HOME").as_deref())
            .ok_or_else(|| Error::Resume("no operator jcode home to fork from".into()));
        let src_home = tryl!(src_home);
        let (rec, fresh) =
            tryl!(fork::fork_or_continue(&home, &src_home, &src, &working_dir).await);
        log.line(&format!(
            "{} {} from {} (title {:?}, sha256 {})",
            if fresh { "forked" } else { "continuing fork" },
            rec.fork_session_id,
            rec.source_session_id,
            rec.title.as_deref().unwrap_or(""),
            rec.sha256
        ));
        fork_session = Some(rec.fork_session_id);
    } else if let Some(rec) = tryl!(fork::recorded_fork(&home))
        && home
            .sessions_dir()
            .join(format!("{}.json", rec.fork_session_id))
            .exists()
    {
        fork_session = Some(rec.fork_session_id);
    }

    // The persona is read before anything launches: an unreadable one fails loud.
    let persona = match &ctx.agent_file {
        Some(p) => Some(tryl!(crate::briefing::read_persona(p))),
        None => None,
    };
    let binary = j("COTAL_JCODE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("jcode"));
    let mut env = ctx.agent_env.clone();
    env.retain(|(k, _)| !k.starts_with("COTAL_") && !k.starts_with("JCODE_"));
    // Which build: logged, recorded with the launch, asked where builds differ.
    let version = tryl!(crate::version::read(&binary, &env).await);
    log.line(&version.describe());
    let spec = LaunchSpec {
        binary,
        home: home.clone(),
        working_dir: working_dir.clone(),
        env,
        version: Some(version),
    };
    let jcode_logs = home::JcodeLogMark::take(&home);
    let inst = tryl!(Instance::launch(&spec).await);
    macro_rules! tryi {
        ($inst:expr, $e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => {
                    match $inst.stop().await {
                        Ok(()) => home.drop_alias(),
                        Err(t) => log.line(&format!("teardown after a failed start: {t}")),
                    }
                    return Err((e, log));
                }
            }
        };
    }
    let conn = Client::connect_logged(
        &home.api_socket(),
        "jucode-cotal-jcode/0.1",
        frames.as_ref().map(|f| f.for_conn("1")),
    )
    .await;
    let (client, rx) = tryi!(inst, conn);
    log.private(&format!(
        "Harness API: {} {:?}",
        client.server, client.capabilities
    ));

    // Which session: the fork, else the largest non-archived one of this cwd, else a new one.
    let wd = working_dir.display().to_string();
    let session = match fork_session {
        Some(id) => tryi!(inst, client.attach_session(&id).await),
        None => {
            let listed = client.list_sessions(false).await.map_err(|e| match e {
                Error::Closed => Error::SessionsEnumeration("the harness closed".into()),
                other => other,
            });
            let listed = tryi!(inst, listed);
            let best = listed
                .into_iter()
                .filter(|s| s.archived != Some(true) && s.working_dir.as_deref() == Some(&wd))
                .max_by_key(|s| s.transcript_bytes.unwrap_or(0));
            match best {
                Some(s) => {
                    log.line(&format!(
                        "continuing session {} of this working directory",
                        s.session_id
                    ));
                    tryi!(inst, client.attach_session(&s.session_id).await)
                }
                None => tryi!(inst, client.create_session(&working_dir).await),
            }
        }
    };
    let sid = session.session_id.clone();
    let model = tryi!(
        inst,
        select_model(
            &client,
            &sid,
            ctx.model.as_deref(),
            ctx.variant.as_deref(),
            spec.version.as_ref(),
            &log
        )
        .await
    );
    // The briefing is in the transcript, once per session, before the proof.
    let text = crate::briefing::compose(
        &ctx.space,
        &ctx.name,
        ctx.role.as_deref(),
        persona.as_deref(),
    );
    tryi!(
        inst,
        crate::briefing::brief(&client, &home, &sid, &text, &log).await
    );

    let (sig_tx, _) = broadcast::channel(256);
    let (closed_tx, closed_rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared {
        plan: Plan {
            spec,
            session_id: sid.clone(),
            tui,
            prompt: j("COTAL_JCODE_PROMPT"),
            model: ctx.model.clone(),
            variant: ctx.variant.clone(),
            deferral_max,
        },
        clock: factory
            .clock
            .clone()
            .unwrap_or_else(jucode_clock::SystemClock::shared),
        log,
        live: tokio::sync::Mutex::new(None),
        turn_lock: Arc::new(tokio::sync::Mutex::new(())),
        slot: Mutex::new(None),
        foreign: AtomicBool::new(false),
        active: AtomicBool::new(false),
        pumped: std::sync::atomic::AtomicU64::new(0),
        pumped_changed: tokio::sync::Notify::new(),
        steering: Mutex::new(Steering::default()),
        steering_changed: tokio::sync::Notify::new(),
        signals: Mutex::new(Some(sig_tx)),
        last_turn_error: Mutex::new(None),
        recovered_once: AtomicBool::new(false),
        shutting_down: AtomicBool::new(false),
        closed_tx,
        generation: std::sync::atomic::AtomicU64::new(1),
        startup_gate: watch::channel(false).0,
        startup_armed: AtomicBool::new(false),
        invoked: std::sync::atomic::AtomicU64::new(0),
        reconnecting: AtomicBool::new(false),
        live_changed: tokio::sync::Notify::new(),
        stopping: tokio::sync::Notify::new(),
        recovery_lock: tokio::sync::Mutex::new(()),
        model,
        fatal: factory.fatal.clone(),
        recovery_window: factory.recovery_window.unwrap_or(RECOVERY_WINDOW),
        frames,
        jcode_logs,
        mcp_hint_wait: factory.mcp_hint_wait.unwrap_or(MCP_HINT_WAIT),
    });
    shared.spawn_pump(rx, 1);
    // The TUI opens on the managed session before the readiness turn.
    let tui_child = if shared.plan.tui {
        match spawn_tui(&shared.plan.spec, &sid) {
            Ok(c) => {
                if let Some(pid) = c.id() {
                    let _ = inst.record_tui(pid);
                }
                Some(c)
            }
            Err(e) => {
                shared.log.line(&format!("cannot open the jcode TUI: {e}"));
                None
            }
        }
    } else {
        None
    };
    *shared.live.lock().await = Some(Live {
        client: Arc::new(client),
        instance: Some(inst),
        tui: tui_child,
    });
    if let Err(e) = shared.readiness(bound).await {
        shared.shutting_down.store(true, Ordering::SeqCst);
        match shared.stop_live().await {
            Ok(()) => home.drop_alias(),
            Err(t) => shared
                .log
                .line(&format!("teardown after a failed start: {t}")),
        }
        return Err((e, shared.log.clone()));
    }
    tokio::spawn(shared.clone().supervise(closed_rx));
    Ok(Arc::new(JcodeHarness { shared }))
}

fn spawn_tui(spec: &LaunchSpec, sid: &str) -> Result<tokio::process::Child> {
    tokio::process::Command::new(&spec.binary)
        .arg("--socket")
        .arg(spec.home.daemon_socket())
        .arg("--resume")
        .arg(sid)
        .current_dir(&spec.working_dir)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .env("JCODE_HOME", &spec.home.root)
        .env("JCODE_RUNTIME_DIR", &spec.home.runtime_dir)
        .env("JCODE_NO_AUTO_UPDATE", "1")
        .spawn()
        .map_err(|e| Error::StartupFailed(format!("TUI: {e}")))
}
