//! Why an op failed. Every error's `Display` is the exact `message` of the error frame the
//! client gets (fixtures and wire tests check these texts), so a variant's text never changes
//! without a fixture changing with it.

use std::path::PathBuf;

use jucode_protocol::daemon::OpParseError;

use crate::actions::ActionError;
use crate::agents::AgentError;
use crate::devices::DeviceError;
use crate::mcp::McpError;
use crate::messages::MessageError;
use crate::paths::PathError;
use crate::questions::QuestionError;
use crate::reports::ReportError;
use crate::schedules::ScheduleError;
use crate::sessions::SessionError;
use crate::timers::TimerError;
use crate::usage::UsageError;
use crate::workspaces::WorkspaceError;

/// An op's failure: the router answers it as an error frame carrying the request's id.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpError {
    /// The op table's gate for this kind of client.
    #[error("{0}")]
    Refused(&'static str),
    #[error("{0} is not available in this daemon yet")]
    NotBuilt(String),
    #[error("{0} requires session")]
    RequiresSession(String),
    #[error(transparent)]
    Parse(#[from] OpParseError),
    #[error(transparent)]
    Sessions(#[from] SessionError),
    #[error(transparent)]
    Actions(#[from] ActionError),
    #[error(transparent)]
    Agents(#[from] AgentError),
    #[error(transparent)]
    Workspaces(#[from] WorkspaceError),
    #[error(transparent)]
    Devices(#[from] DeviceError),
    #[error(transparent)]
    Mcp(#[from] McpError),
    #[error(transparent)]
    Paths(#[from] PathError),
    #[error(transparent)]
    Files(#[from] crate::files::FilesError),
    #[error(transparent)]
    Terminals(#[from] crate::terminals::TermError),
    #[error(transparent)]
    Timers(#[from] TimerError),
    #[error(transparent)]
    Questions(#[from] QuestionError),
    #[error(transparent)]
    Reports(#[from] ReportError),
    #[error(transparent)]
    Requirements(#[from] crate::requirements::RequirementError),
    #[error(transparent)]
    Dispatch(#[from] crate::dispatch::DispatchError),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Messages(#[from] MessageError),
    #[error(transparent)]
    Schedules(#[from] ScheduleError),
    #[error(transparent)]
    Usage(#[from] UsageError),
    #[error(transparent)]
    Skills(#[from] crate::skills::SkillError),
}

/// A file the hub could not read or write, named.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub(crate) struct IoError {
    pub(crate) path: PathBuf,
    pub(crate) source: std::io::Error,
}

impl IoError {
    pub(crate) fn at(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> IoError {
        let path = path.into();
        move |source| IoError { path, source }
    }
}
