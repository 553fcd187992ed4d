//! Frames between daemon clients (desktop, phone, web page) and the daemon.
//!
//! [`ops::OPS`] is the op table; each area's typed ops and reply payloads live in its own
//! module ([`sessions`], [`agents`], [`actions`], [`workspaces`], [`devices`], [`push`], [`mcp`],
//! [`messages`], [`schedules`], [`timers`], [`questions`], [`reports`], [`requirements`]).
//! [`DaemonOp::from_frame`] reads a frame into its area's op; [`DaemonEvent`] is every frame
//! the daemon itself sends.

pub mod actions;
pub mod agents;
pub mod basics;
pub mod devices;
pub mod dispatch;
pub mod files;
pub mod gateway;
pub mod git;
pub mod limits;
pub mod mcp;
pub mod messages;
pub mod ops;
pub mod push;
pub mod questions;
pub mod reports;
pub mod requirements;
pub mod schedules;
pub mod sessions;
pub mod skills;
pub mod terminals;
pub mod timers;
pub mod uploads;
pub mod usage;
pub mod workspaces;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Object;

pub use actions::ActionsOp;
pub use agents::{AgentDirectory, AgentInfo, AgentsOp, CommandRule};
pub use basics::BasicsOp;
pub use devices::{DeviceInfo, DevicesOp};
pub use dispatch::{DispatchInfo, DispatchOp, DispatchStatus, DispatchTask, TaskStatus};
pub use files::FilesOp;
pub use gateway::{GatewayGroup, GatewayOp};
pub use git::GitOp;
pub use mcp::McpOp;
pub use messages::MessagesOp;
pub use ops::{Area, Gate, OPS, OpSpec, SessionUse};
pub use push::{PushOp, PushResult};
pub use questions::{ClosedQuestion, Importance, QuestionInfo, QuestionsOp};
pub use reports::{ReportInfo, ReportsOp};
pub use requirements::{
    Progress, RequirementGate, RequirementInfo, RequirementState, RequirementsOp,
};
pub use schedules::{ScheduleDraft, ScheduleInfo, SchedulesOp};
pub use sessions::{HistoryRow, SessionInfo, SessionsOp};
pub use skills::{SkillInfo, SkillSource, SkillsOp};
pub use terminals::TerminalsOp;
pub use timers::{TimerInfo, TimersOp};
pub use uploads::UploadsOp;
pub use usage::{SessionUsageRow, TurnUsageRow, UsageOp, UsageTotals};
pub use workspaces::{Project, Workspace, WorkspacesOp};

/// A client frame split into its envelope and the rest.
///
/// `id` is any JSON value and is echoed on the reply; `session` names the hosted session an op
/// belongs to. `fields` is the whole frame object (envelope included), so a session op can be
/// forwarded to its engine as it came.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientFrame {
    pub op: String,
    pub id: Option<Value>,
    pub session: Option<String>,
    pub fields: Object,
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FrameError {
    #[error("{0}")]
    Json(String),
    #[error("a frame must be a JSON object")]
    NotAnObject,
    #[error("a frame needs an op string")]
    NoOp,
    #[error("session must be a string")]
    SessionNotString,
}

/// A frame the daemon cannot read, with the `id` it carried when it was an object with one
/// (so the error reply can still name its request). Displays as the error message sent.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("invalid frame: {reason}")]
pub struct InvalidFrame {
    pub id: Option<Value>,
    pub reason: FrameError,
}

impl ClientFrame {
    /// Parses one WebSocket text message.
    pub fn parse(text: &str) -> Result<ClientFrame, InvalidFrame> {
        let value: Value = serde_json::from_str(text).map_err(|e| InvalidFrame {
            id: None,
            reason: FrameError::Json(e.to_string()),
        })?;
        let Value::Object(fields) = value else {
            return Err(InvalidFrame {
                id: None,
                reason: FrameError::NotAnObject,
            });
        };
        let id = fields.get("id").filter(|v| !v.is_null()).cloned();
        let fail = |reason| InvalidFrame {
            id: id.clone(),
            reason,
        };
        let op = match fields.get("op") {
            Some(Value::String(op)) if !op.is_empty() => op.clone(),
            _ => return Err(fail(FrameError::NoOp)),
        };
        let session = match fields.get("session") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(fail(FrameError::SessionNotString)),
        };
        Ok(ClientFrame {
            op,
            id,
            session,
            fields,
        })
    }

    /// The op table's row for this frame's op, whether or not the daemon answers it here.
    pub fn spec(&self) -> Option<&'static OpSpec> {
        ops::spec(&self.op)
    }

    /// Whether the daemon answers this op itself rather than forwarding it to a session.
    pub fn is_daemon_op(&self) -> bool {
        ops::daemon_spec(&self.op, self.session.is_some()).is_some()
    }

    /// The frame as it goes to the session's engine: the envelope fields the engine does not
    /// know (`id`, `session`) removed.
    pub fn engine_op(&self) -> Object {
        let mut op = self.fields.clone();
        op.remove("id");
        op.remove("session");
        op
    }
}

/// Whether `op` is answered by the daemon itself.
pub fn is_daemon_op(op: &str, has_session: bool) -> bool {
    ops::daemon_spec(op, has_session).is_some()
}

/// Distinguishes an absent field (`None`) from an explicit `null` (`Some(Value::Null)`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A daemon op read from a frame: the typed op of its area.
#[derive(Debug, Clone, PartialEq)]
pub enum DaemonOp {
    Basics(BasicsOp),
    Sessions(SessionsOp),
    Actions(ActionsOp),
    Agents(AgentsOp),
    Workspaces(WorkspacesOp),
    Devices(DevicesOp),
    Push(PushOp),
    Mcp(McpOp),
    Timers(TimersOp),
    Questions(QuestionsOp),
    Reports(ReportsOp),
    Requirements(RequirementsOp),
    Dispatch(DispatchOp),
    Messages(MessagesOp),
    Schedules(SchedulesOp),
    Usage(UsageOp),
    Files(FilesOp),
    Git(GitOp),
    Uploads(UploadsOp),
    Terminals(TerminalsOp),
    Skills(SkillsOp),
    Gateway(GatewayOp),
}

/// Why a daemon op's fields could not be read: `<op>: <what is wrong>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{op}: {message}")]
pub struct OpParseError {
    pub op: String,
    pub message: String,
}

impl DaemonOp {
    /// Reads the typed op from a frame. `None` when the op table has no implemented row for
    /// `frame.op` in an area with typed ops (the daemon then answers that the feature is not
    /// available); `Some(Err)` names what is wrong with the fields, or which is too long.
    pub fn from_frame(frame: &ClientFrame) -> Option<Result<DaemonOp, OpParseError>> {
        DaemonOp::from_fields(&frame.op, frame.fields.clone())
    }

    /// [`DaemonOp::from_frame`] on a frame's `op` and `fields` taken apart: the fields are
    /// moved into the op, not copied (an upload chunk's data is megabytes).
    pub fn from_fields(op: &str, fields: Object) -> Option<Result<DaemonOp, OpParseError>> {
        let spec = ops::spec(op).filter(|s| s.implemented)?;
        let fields = Value::Object(fields);
        let fail = |message: String| OpParseError {
            op: op.to_string(),
            message,
        };
        fn read<T: serde::de::DeserializeOwned>(fields: Value) -> Result<T, String> {
            serde_json::from_value(fields).map_err(|e| e.to_string())
        }
        let parsed = match spec.area {
            Area::Basics => read(fields).map(DaemonOp::Basics),
            Area::Sessions => read(fields).map(DaemonOp::Sessions),
            Area::Actions => read(fields).map(DaemonOp::Actions),
            Area::Agents => read(fields).map(DaemonOp::Agents),
            Area::Workspaces => read(fields).map(DaemonOp::Workspaces),
            Area::Devices => read(fields).map(DaemonOp::Devices),
            Area::Push => read(fields).map(DaemonOp::Push),
            Area::Mcp => read(fields).map(DaemonOp::Mcp),
            Area::Timers => read(fields).map(DaemonOp::Timers),
            Area::Questions => read(fields).map(DaemonOp::Questions),
            Area::Reports => read(fields).map(DaemonOp::Reports),
            Area::Requirements => read(fields).map(DaemonOp::Requirements),
            Area::Dispatch => read(fields).map(DaemonOp::Dispatch),
            Area::Messages => read(fields).map(DaemonOp::Messages),
            Area::Schedules => read(fields).map(DaemonOp::Schedules),
            Area::Usage => read(fields).map(DaemonOp::Usage),
            Area::Files => read(fields).map(DaemonOp::Files),
            Area::Git => read(fields).map(DaemonOp::Git),
            Area::Uploads => read(fields).map(DaemonOp::Uploads),
            Area::Terminals => read(fields).map(DaemonOp::Terminals),
            Area::Skills => read(fields).map(DaemonOp::Skills),
            Area::Gateway => read(fields).map(DaemonOp::Gateway),
        };
        Some(parsed.map_err(fail).and_then(|op| {
            op.check_limits()
                .map(|()| op)
                .map_err(|e| fail(e.to_string()))
        }))
    }

    fn check_limits(&self) -> Result<(), limits::TooLong> {
        match self {
            DaemonOp::Sessions(op) => op.check_limits(),
            DaemonOp::Actions(op) => op.check_limits(),
            DaemonOp::Agents(op) => op.check_limits(),
            DaemonOp::Workspaces(op) => op.check_limits(),
            DaemonOp::Mcp(op) => op.check_limits(),
            DaemonOp::Questions(op) => op.check_limits(),
            DaemonOp::Requirements(op) => op.check_limits(),
            DaemonOp::Dispatch(op) => op.check_limits(),
            DaemonOp::Messages(op) => op.check_limits(),
            DaemonOp::Schedules(op) => op.check_limits(),
            DaemonOp::Files(op) => op.check_limits(),
            DaemonOp::Git(op) => op.check_limits(),
            DaemonOp::Uploads(op) => op.check_limits(),
            DaemonOp::Terminals(op) => op.check_limits(),
            DaemonOp::Skills(op) => op.check_limits(),
            DaemonOp::Gateway(op) => op.check_limits(),
            DaemonOp::Basics(_)
            | DaemonOp::Devices(_)
            | DaemonOp::Push(_)
            | DaemonOp::Timers(_)
            | DaemonOp::Reports(_)
            | DaemonOp::Usage(_) => Ok(()),
        }
    }
}

/// Frames the daemon itself sends (replies and broadcasts). Session events are engine frames
/// (see [`crate::serve`]) and are not in this enum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DaemonEvent {
    Hello {
        protocol: u64,
        version: String,
    },
    Pong,
    /// Broadcast after `restart_when_idle`: the daemon exits once no session is in a turn.
    DaemonRestarting,
    Error {
        message: String,
    },
    Sessions {
        sessions: Vec<SessionInfo>,
    },
    SessionHistory {
        cwd: String,
        sessions: Vec<HistoryRow>,
    },
    SessionCreated {
        session: String,
    },
    SessionOpened {
        session: String,
    },
    SessionClosed {
        session: String,
    },
    Watching {
        session: String,
        watching: bool,
    },
    Workspaces {
        rev: u64,
        workspaces: Vec<Workspace>,
    },
    Agents {
        agents: Vec<AgentInfo>,
    },
    AgentCreated {
        agent: String,
    },
    /// `agent_get`: the agent's settings, its brief files by name (a missing one is empty),
    /// its memory files (`memory/<name>.md`, sorted) and its sessions as `session_list` has them.
    Agent {
        agent: Box<AgentInfo>,
        brief: std::collections::BTreeMap<String, String>,
        memory: Vec<String>,
        sessions: Vec<SessionInfo>,
    },
    AgentUpdated {
        agent: String,
    },
    AgentDeleted {
        agent: String,
    },
    AgentMemory {
        agent: String,
        file: String,
        content: String,
    },
    Schedules {
        schedules: Vec<ScheduleInfo>,
    },
    /// `schedule_save`: the task as saved, `next_run_at` computed again.
    ScheduleSaved {
        schedule: ScheduleInfo,
    },
    /// `schedule_delete`; the reply's `id` is the request's, or the task's when it had none.
    ScheduleDeleted {
        schedule: String,
    },
    /// `schedule_run`: the run is recorded; its delivery follows as `message_delivered`.
    ScheduleStarted {
        schedule: String,
    },
    Questions {
        questions: Vec<QuestionInfo>,
        closed: Vec<ClosedQuestion>,
    },
    QuestionAnswered {
        question: String,
    },
    Timers {
        timers: Vec<TimerInfo>,
    },
    TimerCancelled {
        timer: String,
    },
    Reports {
        reports: Vec<ReportInfo>,
    },
    /// The reply to `session_usage`.
    SessionUsage {
        session: String,
        totals: UsageTotals,
        sessions: Vec<SessionUsageRow>,
        /// The newest turns, oldest first, at most [`usage::MAX_TURN_ROWS`].
        turns: Vec<TurnUsageRow>,
        /// How many older turns the cap left out of `turns` (the totals count them all).
        #[serde(default)]
        turns_omitted: u64,
        /// Why the gateway's charges could not be read; the local counts are still here.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        billing_error: Option<String>,
    },
    /// The reply to `schedule_usage`.
    ScheduleUsage {
        schedule: String,
        totals: UsageTotals,
        sessions: Vec<SessionUsageRow>,
        /// As in `SessionUsage`.
        turns: Vec<TurnUsageRow>,
        #[serde(default)]
        turns_omitted: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        billing_error: Option<String>,
    },
    /// The reply to `fs_image`: the image at `path` (as the client sent it) as a
    /// `data:image/<png|jpeg|gif|webp>;base64,…` URL.
    FsImage {
        path: String,
        data: String,
    },
    /// The reply to `fs_list`: `path` resolved, `git` whether it lies in a git work tree,
    /// folders first then by name, git-ignored entries and `.git` left out.
    FsList {
        path: String,
        git: bool,
        entries: Vec<files::FsEntry>,
        truncated: bool,
    },
    /// The reply to `fs_read`: the file's `size`, and its first MiB as `text` unless it is
    /// `binary` (then `text` is empty).
    FsRead {
        path: String,
        size: u64,
        binary: bool,
        text: String,
        truncated: bool,
    },
    /// The reply to `git_status`: `repo` false (and no files) outside a repository; `root`
    /// the repository's top; `branch` absent on a detached head.
    GitStatus {
        path: String,
        repo: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        root: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        branch: Option<String>,
        files: Vec<git::GitFile>,
        truncated: bool,
    },
    /// The reply to `git_diff`.
    GitDiff {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file: Option<String>,
        diff: String,
        truncated: bool,
    },
    /// The reply to `report_read`, and what every other client gets with it.
    ReportRead {
        report: String,
    },
    /// A new report, to every client.
    ReportPosted {
        report: ReportInfo,
    },
    Actions {
        actions: Vec<Value>,
        closed: Vec<Value>,
    },
    Dispatches {
        dispatches: Vec<DispatchInfo>,
    },
    /// `dispatch_send`: the new dispatch's id (its dispatcher's session).
    DispatchStarted {
        dispatch: String,
    },
    /// `dispatch_confirm`: the plan is approved (its tasks start) or turned down.
    DispatchConfirmed {
        dispatch: String,
        approve: bool,
    },
    Requirements {
        requirements: Vec<RequirementInfo>,
    },
    RequirementCreated {
        requirement: String,
    },
    RequirementSaved {
        requirement: String,
    },
    RequirementDeleted {
        requirement: String,
    },
    RequirementLinked {
        requirement: String,
        session: String,
    },
    RequirementUnlinked {
        requirement: String,
        session: String,
    },
    /// The reply to `requirement_image`: the image as a `data:image/…;base64,…` URL.
    RequirementImage {
        requirement: String,
        index: usize,
        data: String,
    },
    RequirementProposalDecided {
        requirement: String,
        accept: bool,
    },
    RequirementBegun {
        requirement: String,
        session: String,
    },
    /// The gate moved on: `stage` is `plan`, or `go` when the work was sent.
    RequirementConfirmed {
        requirement: String,
        stage: String,
    },
    RequirementReplied {
        session: String,
    },
    Pairing {
        code: String,
        expires_at: u64,
    },
    PairLink {
        link: String,
        code: String,
        expires_at: u64,
    },
    Devices {
        devices: Vec<DeviceInfo>,
    },
    DeviceRevoked {
        device: String,
    },
    RelayStatus {
        enabled: bool,
        connected: bool,
        host: Option<String>,
        url: Option<String>,
    },
    ItemClosed {
        item: String,
    },
    ItemReopened {
        item: String,
    },
    /// `mcp_set` / `mcp_remove` / `mcp_toggle` without a session: config.json is saved.
    McpSaved,
    PushSubscribed,
    PushUnsubscribed,
    PushTested {
        results: Vec<PushResult>,
    },
    /// `message_send`: the message's id, and whether an earlier one had its dedupe key (then
    /// nothing new was recorded or sent).
    MessageAccepted {
        message: String,
        duplicate: bool,
    },
    /// A message went to a session (to every client, once its delivery is recorded).
    MessageDelivered {
        id: String,
        agent: String,
        from: String,
        session: String,
    },
    /// `upload`: a chunk is written to the file's `.part`; `size` is what it holds now.
    UploadPart {
        upload: String,
        size: u64,
    },
    /// `upload` with `last`: the file is complete and fsynced at `path` (absolute), under the
    /// cleaned `name`; `image` when its bytes are a png, jpeg, gif or webp.
    Uploaded {
        upload: String,
        path: String,
        name: String,
        size: u64,
        image: bool,
    },
    /// `term_open` (and `session_tui`): the terminal's id.
    TermOpened {
        term: String,
    },
    /// A terminal's output, to the client that opened it only: base64 of at most
    /// [`terminals::TERM_OUTPUT_FRAME_BYTES`] raw bytes, which may end inside a UTF-8
    /// character or an escape sequence.
    TermOutput {
        term: String,
        data: String,
    },
    /// The shell exited and was reaped; `code` is `null` when a signal killed it.
    TermExit {
        term: String,
        code: Option<i32>,
    },
    /// Where a session's conversation is worked on, to every client: `tui` (in the engine's
    /// own terminal interface, on terminal `term` of connection `client`) or `gui` (back in
    /// the daemon's clients).
    Surface {
        session: String,
        surface: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        term: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client: Option<u64>,
    },
    /// The reply to `skills_catalog`: both sources' skills, what could not be listed, and
    /// the directory the op's backend installs into.
    SkillsCatalog {
        skills: Vec<SkillInfo>,
        warnings: Vec<String>,
        #[serde(rename = "installDir")]
        install_dir: String,
    },
    /// The reply to `skill_install`: the skill's directory, complete and verified.
    SkillInstalled {
        path: String,
    },
    /// The reply to `gateway_catalog`: `models` are config.json's `jucode_models` as written
    /// there; `groups` the gateway's (empty when not signed in or offline).
    GatewayCatalog {
        models: Vec<Value>,
        groups: Vec<GatewayGroup>,
    },
    /// The reply to `set_gateway`: the flag as saved; the engine follows once its turn ends.
    GatewaySet {
        session: String,
        gateway: bool,
    },
}

/// A frame on its way to a client: a daemon event, with the request id when it is a reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    #[serde(flatten)]
    pub event: DaemonEvent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
}

impl Reply {
    pub fn to(id: Option<Value>, event: DaemonEvent) -> Reply {
        Reply { event, id }
    }

    pub fn error(id: Option<Value>, message: impl Into<String>) -> Reply {
        Reply {
            event: DaemonEvent::Error {
                message: message.into(),
            },
            id,
        }
    }
}

#[cfg(test)]
mod tests;
