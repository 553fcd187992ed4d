//! The op table: every op the daemon answers itself, as data.
//!
//! Each row says which area answers the op, who may send it, what a `session` on the frame
//! means for it and whether this build implements it. Every gate and list the daemon needs is
//! read from [`OPS`]; an op that is not in it and names a session goes to that session's
//! engine. Adding an op is one row here, one variant in its area's enum and one handler.

/// The part of the daemon that answers an op (one module per area in the hub).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Area {
    /// `ping`, `restart_when_idle`: the connection and the daemon itself.
    Basics,
    Sessions,
    /// Deferred actions and the items (`item_close`/`item_reopen`) they share with questions.
    Actions,
    Workspaces,
    /// Pairing, paired devices and the relay.
    Devices,
    /// Notification subscriptions of paired devices.
    Push,
    /// `mcp_servers` in config.json.
    Mcp,
    Gateway,
    Files,
    Git,
    Agents,
    Messages,
    Timers,
    Schedules,
    Usage,
    Questions,
    Reports,
    Skills,
    Dispatch,
    Requirements,
    Uploads,
    Terminals,
}

/// Who may send an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Local clients and paired devices.
    Any,
    /// Only clients holding the daemon token; a paired device is refused with this text.
    LocalOnly(&'static str),
    /// Only paired devices; a local client is refused with this text.
    DeviceOnly(&'static str),
}

/// What a `session` on the frame means for an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionUse {
    /// The op is not about one session.
    No,
    /// The op names the session it acts on (`session` is a required field).
    Required,
    /// With a session the op goes to that session's engine; without one the daemon answers it.
    Optional,
}

/// One row of the op table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpSpec {
    pub name: &'static str,
    pub area: Area,
    pub gate: Gate,
    pub session: SessionUse,
    /// Whether this build answers the op; otherwise it is refused as not available yet.
    pub implemented: bool,
}

const DEVICES: &str = "only the desktop can manage devices";
const MCP: &str = "only the desktop can change MCP servers";
const SKILLS: &str = "only the desktop can install skills";
const NOTIFY: &str = "only a paired device can receive notifications";

const fn op(name: &'static str, area: Area, implemented: bool) -> OpSpec {
    OpSpec {
        name,
        area,
        gate: Gate::Any,
        session: SessionUse::No,
        implemented,
    }
}

const fn local(name: &'static str, area: Area, refusal: &'static str, implemented: bool) -> OpSpec {
    OpSpec {
        gate: Gate::LocalOnly(refusal),
        ..op(name, area, implemented)
    }
}

const fn device(name: &'static str, area: Area, refusal: &'static str) -> OpSpec {
    OpSpec {
        gate: Gate::DeviceOnly(refusal),
        ..op(name, area, true)
    }
}

const fn of_session(name: &'static str, area: Area, implemented: bool) -> OpSpec {
    OpSpec {
        session: SessionUse::Required,
        ..op(name, area, implemented)
    }
}

const fn mcp(name: &'static str) -> OpSpec {
    OpSpec {
        session: SessionUse::Optional,
        ..local(name, Area::Mcp, MCP, true)
    }
}

use Area::*;

/// Every daemon op of the protocol, in the order the spec describes them.
pub static OPS: &[OpSpec] = &[
    op("ping", Basics, true),
    local("restart_when_idle", Basics, DEVICES, true),
    op("gateway_catalog", Gateway, true),
    op("workspaces", Workspaces, true),
    op("workspaces_set", Workspaces, true),
    op("project_add", Workspaces, true),
    op("project_create", Workspaces, true),
    op("project_remove", Workspaces, true),
    op("session_list", Sessions, true),
    op("session_history", Sessions, true),
    of_session("session_meta", Sessions, true),
    op("session_create", Sessions, true),
    of_session("session_open", Sessions, true),
    of_session("session_close", Sessions, true),
    of_session("session_tui", Sessions, true),
    of_session("watch", Sessions, true),
    of_session("unwatch", Sessions, true),
    op("actions_list", Actions, true),
    local("pair_start", Devices, DEVICES, true),
    local("pair_link", Devices, DEVICES, true),
    local("device_list", Devices, DEVICES, true),
    local("device_revoke", Devices, DEVICES, true),
    local("relay_status", Devices, DEVICES, true),
    local("relay_set", Devices, DEVICES, true),
    op("fs_list", Files, true),
    op("fs_read", Files, true),
    op("fs_image", Files, true),
    op("git_status", Git, true),
    op("git_diff", Git, true),
    op("agent_list", Agents, true),
    op("agent_create", Agents, true),
    op("agent_get", Agents, true),
    op("agent_update", Agents, true),
    op("agent_delete", Agents, true),
    op("agent_memory_read", Agents, true),
    op("message_send", Messages, true),
    op("timer_list", Timers, true),
    op("timer_cancel", Timers, true),
    op("schedule_list", Schedules, true),
    op("schedule_save", Schedules, true),
    op("schedule_delete", Schedules, true),
    op("schedule_run", Schedules, true),
    op("session_usage", Usage, true),
    op("schedule_usage", Usage, true),
    op("question_list", Questions, true),
    op("question_answer", Questions, true),
    op("item_close", Actions, true),
    op("item_reopen", Actions, true),
    op("report_list", Reports, true),
    op("report_read", Reports, true),
    local("skills_catalog", Skills, SKILLS, true),
    local("skill_install", Skills, SKILLS, true),
    op("dispatch_send", Dispatch, true),
    op("dispatch_confirm", Dispatch, true),
    op("dispatch_list", Dispatch, true),
    op("requirement_list", Requirements, true),
    op("requirement_create", Requirements, true),
    op("requirement_update", Requirements, true),
    op("requirement_delete", Requirements, true),
    of_session("requirement_link", Requirements, true),
    of_session("requirement_unlink", Requirements, true),
    op("requirement_image", Requirements, true),
    of_session("requirement_begin", Requirements, true),
    op("requirement_confirm", Requirements, true),
    op("requirement_reply", Requirements, true),
    op("requirement_proposal", Requirements, true),
    op("upload", Uploads, true),
    device("push_subscribe", Push, NOTIFY),
    device("push_unsubscribe", Push, NOTIFY),
    device("push_test", Push, NOTIFY),
    op("term_open", Terminals, true),
    op("term_input", Terminals, true),
    op("term_resize", Terminals, true),
    op("term_close", Terminals, true),
    mcp("mcp_set"),
    mcp("mcp_remove"),
    mcp("mcp_toggle"),
    of_session("set_gateway", Gateway, true),
];

/// The row of `name`, if it is a daemon op at all.
pub fn spec(name: &str) -> Option<&'static OpSpec> {
    OPS.iter().find(|s| s.name == name)
}

/// The row of `name` when the daemon answers it for a frame with (or without) a session;
/// `None` means the frame goes to the session's engine.
pub fn daemon_spec(name: &str, has_session: bool) -> Option<&'static OpSpec> {
    spec(name).filter(|s| !(has_session && s.session == SessionUse::Optional))
}

impl OpSpec {
    /// The refusal text when a client of this kind may not send the op.
    pub fn refusal(&self, is_device: bool) -> Option<&'static str> {
        match self.gate {
            Gate::LocalOnly(text) if is_device => Some(text),
            Gate::DeviceOnly(text) if !is_device => Some(text),
            _ => None,
        }
    }
}
