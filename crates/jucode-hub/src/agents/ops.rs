//! The agent ops: list, create, get, update, delete, memory read.
//!
//! Every value is checked before anything is written, so a refused op leaves the agent as it
//! was. A new agent's directory is built under a temporary name and renamed into place, and a
//! deleted one is renamed aside before it is removed: a crash never leaves half an agent
//! under its id (leftovers are cleared at the next start).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jucode_protocol::daemon::{AgentsOp, DaemonEvent};
use serde_json::Value;

use super::brief::{self, AgentFile};
use super::{
    Agent, AgentConfig, AgentError, BRIEF_FILES, CommandRule, Directory, default_command_rules,
    validate,
};
use crate::cx::OpCx;
use crate::error::{IoError, OpError};
use crate::util::{hex, random_bytes};
use crate::{Inner, paths};

/// The name start of a directory under `agents/` that is being created or deleted.
pub(super) const LEFTOVER: &str = ".leftover-";

/// Answers the agent ops.
pub(crate) fn handle(cx: &OpCx<'_>, op: AgentsOp) -> Result<(), OpError> {
    match op {
        AgentsOp::AgentList => {
            let event = cx.hub.lock().agents_event();
            cx.reply(event);
        }
        AgentsOp::AgentCreate {
            agent,
            name,
            cwd,
            role,
            icon,
            color,
            avatar_seed,
            project,
            engine,
        } => create(
            cx,
            Create {
                agent,
                name,
                cwd,
                role,
                icon,
                color,
                avatar_seed,
                project,
                engine,
            },
        )?,
        AgentsOp::AgentGet { agent } => get(cx, &agent)?,
        AgentsOp::AgentUpdate {
            agent,
            name,
            role,
            enabled,
            approval_mode,
            sandbox,
            network,
            directories,
            command_rules,
            icon,
            color,
            avatar_seed,
            project,
            engine,
        } => update(
            cx,
            Update {
                agent,
                name,
                role,
                enabled,
                approval_mode,
                sandbox,
                network,
                directories,
                command_rules,
                icon,
                color,
                avatar_seed,
                project,
                engine,
            },
        )?,
        AgentsOp::AgentDelete { agent } => delete(cx, &agent)?,
        AgentsOp::AgentMemoryRead { agent, file } => memory_read(cx, &agent, &file)?,
    }
    Ok(())
}

struct Create {
    agent: String,
    name: String,
    cwd: Option<String>,
    role: String,
    icon: Option<Value>,
    color: Option<String>,
    avatar_seed: Option<String>,
    project: Option<String>,
    engine: Option<String>,
}

struct Update {
    agent: String,
    name: Option<String>,
    role: Option<String>,
    enabled: Option<bool>,
    approval_mode: Option<String>,
    sandbox: Option<String>,
    network: Option<bool>,
    directories: Option<Vec<Directory>>,
    command_rules: Option<Vec<CommandRule>>,
    icon: Option<Option<Value>>,
    color: Option<Option<String>>,
    avatar_seed: Option<String>,
    project: Option<Option<String>>,
    engine: Option<Option<String>>,
}

/// The main directory of project `id`, which becomes the agent's `cwd`.
fn project_dir(cx: &OpCx<'_>, inner: &Inner, id: &str) -> Result<PathBuf, AgentError> {
    let project = inner
        .workspaces
        .project(id)
        .ok_or_else(|| AgentError::UnknownProject(id.to_string()))?;
    Ok(paths::resolve_dir(&project.path, &cx.hub.config.user_home)?)
}

fn create(cx: &OpCx<'_>, req: Create) -> Result<(), AgentError> {
    validate::new_id(&req.agent)?;
    validate::name(&req.name)?;
    if let Some(icon) = &req.icon {
        validate::icon(icon)?;
    }
    if let Some(color) = &req.color {
        validate::color(color)?;
    }
    if let Some(seed) = &req.avatar_seed {
        validate::avatar_seed(seed)?;
    }
    if let Some(engine) = &req.engine {
        validate::engine(engine)?;
    }
    let hub = cx.hub;
    let mut inner = hub.lock();
    if inner.agents.map.contains_key(&req.agent) {
        return Err(AgentError::Exists(req.agent));
    }
    let cwd = match (&req.project, &req.cwd) {
        (Some(project), _) => project_dir(cx, &inner, project)?,
        (None, Some(cwd)) => paths::resolve_dir(cwd, &hub.config.user_home)?,
        (None, None) => return Err(AgentError::NeedsCwd),
    };
    let avatar_seed = match req.avatar_seed {
        Some(seed) => seed,
        None => hex(&random_bytes::<8>()?),
    };
    let config = AgentConfig {
        name: req.name,
        cwd,
        enabled: true,
        approval_mode: "auto".into(),
        sandbox: "workspace-write".into(),
        network: true,
        directories: Vec::new(),
        command_rules: default_command_rules(),
        icon: req.icon,
        color: req.color,
        avatar_seed: Some(avatar_seed),
        project: req.project,
        workspace: None,
        engine: req.engine,
        created_at: hub.config.clock.now_ms(),
        extra: Default::default(),
    };
    let root = inner.agents.root.clone();
    let dir = root.join(&req.agent);
    if dir.symlink_metadata().is_ok() {
        return Err(AgentError::InTheWay(dir));
    }
    build_dir(&root, &dir, &req.agent, &config, &req.role)?;
    let id = req.agent;
    inner
        .agents
        .map
        .insert(id.clone(), Agent::new(id.clone(), dir, config));
    cx.reply_locked(&mut inner, DaemonEvent::AgentCreated { agent: id });
    inner.broadcast_agents();
    Ok(())
}

/// Writes the agent's files under a temporary name in `root`, then renames it to `dir`.
fn build_dir(
    root: &Path,
    dir: &Path,
    id: &str,
    config: &AgentConfig,
    role: &str,
) -> Result<(), AgentError> {
    std::fs::create_dir_all(root).map_err(IoError::at(root))?;
    let tmp = root.join(format!("{LEFTOVER}{id}-{}", hex(&random_bytes::<4>()?)));
    let built = (|| {
        let memory = tmp.join("memory");
        std::fs::create_dir_all(&memory).map_err(IoError::at(&memory))?;
        for file in BRIEF_FILES {
            let text = if file == "role.md" { role } else { "" };
            jucode_store::write_atomic(&tmp.join(file), text.as_bytes(), 0o644)?;
        }
        jucode_store::write_json_atomic(&tmp.join("agent.json"), config)?;
        std::fs::rename(&tmp, dir).map_err(IoError::at(dir))?;
        sync_dir(root);
        Ok(())
    })();
    if built.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    built
}

/// Makes a rename in `dir` durable; a failure only weakens that, so it is logged.
fn sync_dir(dir: &Path) {
    if let Err(e) = std::fs::File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!("syncing {}: {e}", dir.display());
    }
}

fn get(cx: &OpCx<'_>, id: &str) -> Result<(), AgentError> {
    let (info, dir, sessions) = {
        let inner = cx.hub.lock();
        let agent = inner.agents.known(id)?;
        let sessions = inner.agent_run_sessions(Some(id));
        let refs: Vec<_> = sessions.iter().collect();
        (agent.info(&refs), agent.dir.clone(), sessions)
    };
    // The files are the agent's to rewrite at any time: read them now, outside the lock.
    let mut brief_texts = BTreeMap::new();
    for file in BRIEF_FILES {
        let text = brief::read(&dir, &AgentFile::Brief(file))?.unwrap_or_default();
        brief_texts.insert(file.to_string(), text);
    }
    cx.reply(DaemonEvent::Agent {
        agent: Box::new(info),
        brief: brief_texts,
        memory: brief::memory_files(&dir),
        sessions,
    });
    Ok(())
}

fn update(cx: &OpCx<'_>, req: Update) -> Result<(), AgentError> {
    let hub = cx.hub;
    let mut inner = hub.lock();
    let agent = inner.agents.known(&req.agent)?;
    let dir = agent.dir.clone();
    let mut c = agent.config.clone();
    if let Some(name) = req.name {
        validate::name(&name)?;
        c.name = name;
    }
    if let Some(enabled) = req.enabled {
        c.enabled = enabled;
    }
    if let Some(mode) = req.approval_mode {
        validate::approval_mode(&mode)?;
        c.approval_mode = mode;
    }
    if let Some(sandbox) = req.sandbox {
        validate::sandbox(&sandbox)?;
        c.sandbox = sandbox;
    }
    if let Some(network) = req.network {
        c.network = network;
    }
    if let Some(dirs) = req.directories {
        validate::directories(&dirs)?;
        c.directories = dirs;
    }
    if let Some(rules) = req.command_rules {
        validate::command_rules(&rules)?;
        c.command_rules = rules;
    }
    if let Some(icon) = req.icon {
        if let Some(icon) = &icon {
            validate::icon(icon)?;
        }
        c.icon = icon;
    }
    if let Some(color) = req.color {
        if let Some(color) = &color {
            validate::color(color)?;
        }
        c.color = color;
    }
    if let Some(seed) = req.avatar_seed {
        validate::avatar_seed(&seed)?;
        c.avatar_seed = Some(seed);
    }
    if let Some(engine) = req.engine {
        if let Some(engine) = &engine {
            validate::engine(engine)?;
        }
        c.engine = engine;
    }
    match req.project {
        // Out of its project, the agent stays where it works.
        Some(None) => c.project = None,
        Some(Some(project)) => {
            c.cwd = project_dir(cx, &inner, &project)?;
            c.project = Some(project);
        }
        None => {}
    }
    if let Some(role) = &req.role {
        brief::write(&dir, &AgentFile::Brief("role.md"), role)?;
    }
    jucode_store::write_json_atomic(&dir.join("agent.json"), &c)?;
    if let Some(agent) = inner.agents.map.get_mut(&req.agent) {
        agent.config = c;
        if let Some(role) = &req.role {
            agent.summary = brief::first_line(role);
        }
    }
    cx.reply_locked(&mut inner, DaemonEvent::AgentUpdated { agent: req.agent });
    inner.broadcast_agents();
    // Enabled again: its tasks that came due while it was off fire now, once.
    hub.run_due_schedules(&mut inner);
    Ok(())
}

fn delete(cx: &OpCx<'_>, id: &str) -> Result<(), AgentError> {
    let mut inner = cx.hub.lock();
    let dir = inner.agents.known(id)?.dir.clone();
    if inner.sessions.agent_in_turn(id) {
        return Err(AgentError::Running(id.to_string()));
    }
    // One rename takes the agent away whole; removing the files can then fail harmlessly.
    let root = inner.agents.root.clone();
    let grave = root.join(format!("{LEFTOVER}{id}-{}", hex(&random_bytes::<4>()?)));
    match std::fs::rename(&dir, &grave) {
        Ok(()) => sync_dir(&root),
        // Removed by hand already: forgetting it is all that is left.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(IoError::at(&dir)(e).into()),
    }
    inner.agents.map.remove(id);
    inner.sessions.close_agent_sessions(id);
    // The agent is gone already; a timer or question this fails to close is closed when it
    // comes due (its agent is unknown then).
    if let Err(e) = inner.agent_deleted_items(id) {
        tracing::warn!("closing the timers and questions of agent {id}: {e}");
    }
    if let Err(e) = std::fs::remove_dir_all(&grave)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!("removing {}: {e}", grave.display());
    }
    cx.reply_locked(
        &mut inner,
        DaemonEvent::AgentDeleted {
            agent: id.to_string(),
        },
    );
    inner.broadcast_agents();
    broadcast_lists_after_delete(&mut inner, id);
    Ok(())
}

/// The spec has every client receive the schedules and questions lists after a delete; the
/// agent's tasks went with its directory.
fn broadcast_lists_after_delete(inner: &mut Inner, id: &str) {
    inner.schedules.forget_agent(id);
    inner.broadcast_schedules();
    inner.broadcast_questions();
}

fn memory_read(cx: &OpCx<'_>, id: &str, file: &str) -> Result<(), AgentError> {
    let dir = cx.hub.lock().agents.known(id)?.dir.clone();
    let file = AgentFile::Memory(validate::memory_name(file)?);
    let content = brief::read(&dir, &file)?.ok_or_else(|| AgentError::NoMemory {
        agent: id.to_string(),
        file: file.name(),
    })?;
    cx.reply(DaemonEvent::AgentMemory {
        agent: id.to_string(),
        file: file.name(),
        content,
    });
    Ok(())
}
