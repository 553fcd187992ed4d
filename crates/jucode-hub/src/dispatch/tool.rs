//! The dispatcher's side: its system prompt (the user's projects and the engines it may
//! use), its one tool `dispatch` (`plan` the tasks, write the `summary`), and the words it is
//! sent once every task has ended. The dispatcher is a session of the reserved agent
//! `dispatch` on the jucode engine, which calls the tool in process.

use std::sync::{Arc, Weak};

use jucode_engine::agent::{AgentHost, AgentSeat, McpLaunch, ToolDef, ToolFuture};
use jucode_protocol::daemon::{DispatchStatus, DispatchTask, TaskStatus};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Stored;
use crate::agents::tools::ToolError;
use crate::error::OpError;
use crate::{Hub, Inner};

pub(crate) const NAME: &str = "dispatch";
/// The most tasks one plan may hold.
const MAX_TASKS: usize = 20;
/// A task's title is cut to this many characters.
const TITLE_CHARS: usize = 80;

pub(crate) fn def() -> ToolDef {
    ToolDef {
        name: NAME.into(),
        description: "Plan the dispatch's tasks (action plan: each task goes to a new session \
                      in one of the user's projects, on one of the engines listed in your \
                      instructions), or write the dispatch's summary once its tasks have \
                      ended (action summary)."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["plan", "summary"]},
                "tasks": {
                    "type": "array",
                    "description": "With plan: the tasks, in order.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "title": {"type": "string", "description": "A few words."},
                            "project": {"type": "string", "description": "A project's id or its main directory."},
                            "engine": {"type": "string", "description": "An engine's name; jucode when left out."},
                            "text": {"type": "string", "description": "Everything the session needs to do the task: it sees nothing else."}
                        },
                        "required": ["project", "text"]
                    }
                },
                "text": {"type": "string", "description": "With summary: the summary for the user."}
            },
            "required": ["action"]
        }),
    }
}

#[derive(Deserialize)]
struct Args {
    action: String,
    #[serde(default)]
    tasks: Vec<TaskArg>,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct TaskArg {
    #[serde(default)]
    title: Option<String>,
    project: String,
    #[serde(default)]
    engine: Option<String>,
    text: String,
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::Invalid(message.into())
}

/// Runs the tool for the dispatcher in session `dispatch`.
pub(crate) fn call(hub: &Arc<Hub>, dispatch: &str, args: Value) -> Result<Value, ToolError> {
    let args: Args = serde_json::from_value(args).map_err(|e| invalid(e.to_string()))?;
    let mut inner = hub.lock();
    let inner = &mut *inner;
    let Some(mut s) = inner.dispatches.get(dispatch).cloned() else {
        return Err(invalid("this session is not a dispatch's dispatcher"));
    };
    match args.action.as_str() {
        "plan" => {
            if s.info.status != DispatchStatus::Planning {
                return Err(invalid("the dispatch is planned already"));
            }
            if args.tasks.is_empty() {
                return Err(invalid("a plan needs at least one task"));
            }
            if args.tasks.len() > MAX_TASKS {
                return Err(invalid(format!("a plan holds at most {MAX_TASKS} tasks")));
            }
            let mut tasks = Vec::new();
            let mut texts = Vec::new();
            for (i, t) in args.tasks.into_iter().enumerate() {
                let n = i as u64 + 1;
                let project = project_dir(inner, &t.project).ok_or_else(|| {
                    invalid(format!(
                        "task {n}: unknown project {:?}: name one listed in your instructions",
                        t.project
                    ))
                })?;
                let engine = t.engine.unwrap_or_else(|| super::DISPATCHER_ENGINE.into());
                if !hub.config.engines.contains_key(&engine) {
                    return Err(invalid(format!(
                        "task {n}: engine {engine:?} is not available here (available: {})",
                        engine_names(hub).join(", ")
                    )));
                }
                if t.text.trim().is_empty() {
                    return Err(invalid(format!("task {n}: text must not be empty")));
                }
                let title = t
                    .title
                    .filter(|t| !t.trim().is_empty())
                    .unwrap_or_else(|| first_line(&t.text));
                texts.push(t.text);
                tasks.push(DispatchTask {
                    id: n,
                    title: title.chars().take(TITLE_CHARS).collect(),
                    project,
                    session: None,
                    engine,
                    status: TaskStatus::Planned,
                    reply: String::new(),
                });
            }
            let count = tasks.len();
            s.info.tasks = tasks;
            s.texts = texts;
            s.info.status = if s.info.plan {
                DispatchStatus::Awaiting
            } else {
                DispatchStatus::Running
            };
            let awaiting = s.info.plan;
            inner
                .dispatches
                .save(s)
                .map_err(|e| OpError::from(super::DispatchError::Save(e)))?;
            if !awaiting {
                hub.send_tasks(inner, dispatch);
            }
            inner.broadcast_dispatches();
            Ok(Value::String(if awaiting {
                format!("{count} tasks planned; they wait for the user's go-ahead.")
            } else {
                format!("{count} tasks planned and sent; you hear back once they have ended.")
            }))
        }
        "summary" => {
            let text = args.text.unwrap_or_default();
            if text.trim().is_empty() {
                return Err(invalid("summary: text must not be empty"));
            }
            if s.info.status.is_final() {
                return Err(invalid("the dispatch has ended"));
            }
            s.info.summary = text;
            inner
                .dispatches
                .save(s)
                .map_err(|e| OpError::from(super::DispatchError::Save(e)))?;
            inner.broadcast_dispatches();
            Ok(Value::String("summary saved".into()))
        }
        other => Err(invalid(format!(
            "unknown action {other:?} (expected plan or summary)"
        ))),
    }
}

/// The main directory of the project a plan names by id or by that directory.
fn project_dir(inner: &Inner, name: &str) -> Option<String> {
    inner
        .workspaces
        .projects()
        .into_iter()
        .find(|p| p.id == name || p.path == name)
        .map(|p| p.path.clone())
}

fn engine_names(hub: &Hub) -> Vec<String> {
    let mut names: Vec<String> = hub.config.engines.keys().cloned().collect();
    names.sort();
    names
}

fn first_line(text: &str) -> String {
    text.trim()
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// What task `task` of `s` is sent: its text as the dispatcher wrote it.
pub(crate) fn task_text(s: &Stored, task: u64) -> String {
    let at = usize::try_from(task.saturating_sub(1)).unwrap_or(usize::MAX);
    s.texts.get(at).cloned().unwrap_or_default()
}

/// The words the dispatcher gets once every task has ended.
pub(super) fn results_text(s: &Stored) -> String {
    let mut out = String::from(
        "Every task of this dispatch has ended. Write the summary for the user with the \
         dispatch tool (action summary).\n",
    );
    for t in &s.info.tasks {
        let status = if t.status == TaskStatus::Done {
            "done"
        } else {
            "failed"
        };
        out.push_str(&format!(
            "\nTask {} ({}) in {} on {}: {status}\n{}\n",
            t.id, t.title, t.project, t.engine, t.reply
        ));
    }
    out
}

/// The dispatcher's system prompt: what it does, the projects, the engines.
fn prompt(hub: &Hub, inner: &Inner) -> String {
    let mut out = String::from(
        "You are the dispatcher. The user's message is a batch of requests. Split it into \
         tasks and call the dispatch tool once with action plan: each task goes to a new \
         session in one of the projects below, on one of the engines below, and its text is \
         all that session sees. If nothing in the message is a task, answer without a plan. \
         Once the tasks have ended you get their results: write the summary with action \
         summary.\n\nProjects (id, name, main directory):\n",
    );
    let projects = inner.workspaces.projects();
    if projects.is_empty() {
        out.push_str("(none)\n");
    }
    for p in projects {
        out.push_str(&format!("- {} | {} | {}\n", p.id, p.name, p.path));
    }
    out.push_str("\nEngines: ");
    out.push_str(&engine_names(hub).join(", "));
    out.push('\n');
    out
}

/// The seat of a dispatcher's session.
pub(crate) fn seat(hub: &Arc<Hub>, inner: &Inner, session: &str) -> AgentSeat {
    AgentSeat {
        agent: crate::agents::DISPATCH.into(),
        host: Arc::new(DispatcherHost {
            hub: Arc::downgrade(hub),
            session: session.to_string(),
            start_prompt: prompt(hub, inner),
        }),
    }
}

/// The [`AgentHost`] of a dispatcher: its prompt and its one tool.
struct DispatcherHost {
    hub: Weak<Hub>,
    session: String,
    /// What a call made under the hub's lock (from the engine's start) gets.
    start_prompt: String,
}

impl AgentHost for DispatcherHost {
    fn prompt(&self) -> String {
        if Hub::lock_held_here() {
            return self.start_prompt.clone();
        }
        let Some(hub) = self.hub.upgrade() else {
            return String::new();
        };
        let inner = hub.lock();
        prompt(&hub, &inner)
    }

    fn tools(&self) -> Vec<ToolDef> {
        vec![def()]
    }

    fn call(&self, name: &str, args: Value) -> ToolFuture {
        let hub = self.hub.clone();
        let session = self.session.clone();
        let name = name.to_string();
        Box::pin(async move {
            let hub = hub.upgrade().ok_or("the daemon is stopping")?;
            if name != NAME {
                return Err(ToolError::Unknown(name).to_string());
            }
            call(&hub, &session, args).map_err(|e| e.to_string())
        })
    }

    fn mcp_server(&self) -> Option<McpLaunch> {
        // Only the jucode engine runs dispatchers; it calls in process.
        None
    }
}
