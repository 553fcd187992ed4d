//! Length limits on the free text a client sends, checked when a frame is read.
//!
//! A frame may be up to the transport's size limit, but text the daemon keeps (in its logs,
//! in lists it sends every client) is bounded much lower, so one client cannot make every
//! connect batch huge. Characters are Unicode scalar values; bytes are of the JSON text.

use serde::Serialize;

/// A session title a client sets (`session_meta`); the engine's own titles are cut to it too.
pub const TITLE_CHARS: usize = 200;
/// Workspace and project names (`project_add`, `project_create`, `workspaces_set`).
pub const NAME_CHARS: usize = 200;
/// The reason given when closing an item (`item_close`).
pub const REASON_CHARS: usize = 2000;
/// An answer to a question (`question_answer`).
pub const ANSWER_CHARS: usize = 8000;
/// What a timer says when it fires (the `timer` tool's `body`).
pub const TIMER_BODY_CHARS: usize = 4000;
/// How far ahead a timer may be set, in seconds (366 days).
pub const TIMER_AHEAD_SECS: u64 = 366 * 24 * 60 * 60;
/// A question's or a report's title (the `question` and `report` tools).
pub const ITEM_TITLE_CHARS: usize = 200;
/// A question's `body`.
pub const QUESTION_BODY_CHARS: usize = 8000;
/// A question's `assumption` and `default`.
pub const QUESTION_NOTE_CHARS: usize = 2000;
/// The longest `due_in_seconds` of a question (30 days).
pub const QUESTION_DUE_MAX_SECS: u64 = 30 * 24 * 60 * 60;
/// A question's deadline when the agent gives none (24 hours).
pub const QUESTION_DUE_DEFAULT_SECS: u64 = 24 * 60 * 60;
/// A report's `body`.
pub const REPORT_BODY_CHARS: usize = 32_000;
/// A requirement's words (`requirement_create`, `requirement_update`).
pub const REQUIREMENT_TEXT_CHARS: usize = 20_000;
/// A path a client names (`cwd`, `path`, `parent`).
pub const PATH_BYTES: usize = 4096;
/// A session's `group` (`session_meta`), as JSON.
pub const GROUP_BYTES: usize = 1024;
/// Engine `options` (`session_create`, `session_open`), as JSON.
pub const OPTIONS_BYTES: usize = 64 * 1024;
/// An agent's brief file (`role.md` and the others), whether a client or the agent writes it.
pub const BRIEF_BYTES: usize = 64 * 1024;
/// One of an agent's `memory/<topic>.md` files.
pub const MEMORY_BYTES: usize = 64 * 1024;
/// An agent's `icon`, as JSON (the markup of an SVG icon is held to [`SVG_BYTES`]).
pub const ICON_BYTES: usize = 16 * 1024;
/// The markup of an agent's SVG icon (the spec's bound).
pub const SVG_BYTES: usize = 8192;
/// The value of an agent's slug icon, in UTF-16 units (the spec's bound).
pub const SLUG_UNITS: usize = 32;

/// A message to an agent (`message_send`, the `message_agent` tool), in bytes of UTF-8.
pub const MESSAGE_BODY_BYTES: usize = 256 * 1024;
/// An id or key a client names in a message (`agent`, `session`, `reply_to`, `dedupe_key`).
pub const ID_CHARS: usize = 200;
/// A scheduled task's name.
pub const SCHEDULE_NAME_CHARS: usize = 200;
/// A scheduled task's cron expression.
pub const CRON_CHARS: usize = 200;
/// One MCP server entry (`mcp_set`), as JSON.
pub const MCP_SERVER_BYTES: usize = 64 * 1024;

/// The most an `upload` chunk may hold, decoded.
pub const UPLOAD_CHUNK_BYTES: u64 = 4 * 1024 * 1024;
/// The most one uploaded file may hold.
pub const UPLOAD_FILE_BYTES: u64 = 100 * 1024 * 1024;
/// The `name` a client gives an upload, as sent (before it is cleaned).
pub const UPLOAD_NAME_BYTES: usize = 1024;
/// The longest name an uploaded file keeps once cleaned (the extension is kept).
pub const UPLOAD_KEPT_NAME_BYTES: usize = 120;
/// How many days an uploaded file is kept: older ones are removed when the daemon starts.
pub const UPLOAD_KEEP_DAYS: i64 = 30;

/// A field over its limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} is longer than {max} {unit}")]
pub struct TooLong {
    pub field: &'static str,
    pub max: usize,
    pub unit: &'static str,
}

/// Checks a text field against a limit in characters.
pub fn chars(field: &'static str, text: Option<&str>, max: usize) -> Result<(), TooLong> {
    match text {
        Some(text) if text.chars().count() > max => Err(TooLong {
            field,
            max,
            unit: "characters",
        }),
        _ => Ok(()),
    }
}

/// Checks a field against a limit in bytes of UTF-8 text.
pub fn bytes(field: &'static str, text: Option<&str>, max: usize) -> Result<(), TooLong> {
    match text {
        Some(text) if text.len() > max => Err(TooLong {
            field,
            max,
            unit: "bytes",
        }),
        _ => Ok(()),
    }
}

/// Checks a JSON value against a limit in bytes of its JSON text.
pub fn json<T: Serialize>(
    field: &'static str,
    value: Option<&T>,
    max: usize,
) -> Result<(), TooLong> {
    let len = value
        .and_then(|v| serde_json::to_string(v).ok())
        .map_or(0, |t| t.len());
    if len > max {
        return Err(TooLong {
            field,
            max,
            unit: "bytes",
        });
    }
    Ok(())
}
