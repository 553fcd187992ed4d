//! Reports agents post for the user (the `report` tool), kept in `reports.jsonl`: listed
//! newest first with whether they were read, marked read with `report_read`. Posting wakes
//! nobody; every client gets `report_posted`.

use std::collections::HashMap;
use std::sync::Arc;

use jucode_clock::SharedClock;
use jucode_protocol::daemon::limits::{ITEM_TITLE_CHARS, REPORT_BODY_CHARS};
use jucode_protocol::daemon::reports::{REPORT_LIST_DEFAULT, REPORT_LIST_MAX};
use jucode_protocol::daemon::{DaemonEvent, Reply, ReportInfo, ReportsOp};
use jucode_store::{JsonlLog, StateDir, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::agents::tools::{Caller, ToolError};
use crate::cx::OpCx;
use crate::error::OpError;
use crate::util::new_id;
use crate::{Hub, HubError, to_value};

/// Why a report op failed; the texts are the protocol's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReportError {
    #[error("could not save the report: {0}")]
    Save(StoreError),
    #[error("unknown report {0}")]
    Unknown(String),
}

/// One line of `reports.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record {
    Posted {
        id: String,
        agent: String,
        session: String,
        title: String,
        #[serde(default)]
        body: String,
        at: u64,
    },
    Read {
        id: String,
        at: u64,
    },
    #[serde(other)]
    Unknown,
}

pub(crate) struct Reports {
    clock: SharedClock,
    log: JsonlLog,
    /// In the order posted.
    list: Vec<ReportInfo>,
    index: HashMap<String, usize>,
}

impl Reports {
    pub(crate) fn open(store: &StateDir, clock: SharedClock) -> Result<Reports, HubError> {
        let (log, records) = store.open_log::<Record>("reports.jsonl")?;
        let mut reports = Reports {
            clock,
            log,
            list: Vec::new(),
            index: HashMap::new(),
        };
        for record in records {
            reports.apply(record);
        }
        Ok(reports)
    }

    fn apply(&mut self, record: Record) {
        match record {
            Record::Posted {
                id,
                agent,
                session,
                title,
                body,
                at,
            } => {
                if self.index.contains_key(&id) {
                    return;
                }
                self.index.insert(id.clone(), self.list.len());
                self.list.push(ReportInfo {
                    id,
                    agent,
                    session,
                    title,
                    body,
                    at,
                    read: false,
                });
            }
            Record::Read { id, .. } => {
                if let Some(&i) = self.index.get(&id) {
                    self.list[i].read = true;
                }
            }
            Record::Unknown => {}
        }
    }

    fn write(&mut self, record: Record) -> Result<(), ReportError> {
        self.log.append(&record).map_err(ReportError::Save)?;
        self.apply(record);
        Ok(())
    }

    /// Records a new report and returns it.
    pub(crate) fn post(
        &mut self,
        caller: &Caller,
        title: String,
        body: String,
    ) -> Result<ReportInfo, ReportError> {
        let at = self.clock.now_ms();
        let id = new_id("r", at);
        self.write(Record::Posted {
            id: id.clone(),
            agent: caller.agent.clone(),
            session: caller.session.clone(),
            title,
            body,
            at,
        })?;
        let i = self.index.get(&id).copied().unwrap_or_default();
        Ok(self.list[i].clone())
    }

    /// Marks a report read. Returns whether it was unread (a record was written).
    pub(crate) fn read(&mut self, id: &str) -> Result<bool, ReportError> {
        let i = *self
            .index
            .get(id)
            .ok_or_else(|| ReportError::Unknown(id.to_string()))?;
        if self.list[i].read {
            return Ok(false);
        }
        self.write(Record::Read {
            id: id.to_string(),
            at: self.clock.now_ms(),
        })?;
        Ok(true)
    }

    /// The newest `limit` reports, newest first.
    pub(crate) fn newest(&self, limit: u64) -> Vec<ReportInfo> {
        let limit = usize::try_from(limit.min(REPORT_LIST_MAX)).unwrap_or(usize::MAX);
        self.list.iter().rev().take(limit).cloned().collect()
    }
}

/// Answers `report_list` and `report_read`. A report newly read is also sent to every other
/// client as `report_read`.
pub(crate) fn handle(cx: &OpCx<'_>, op: ReportsOp) -> Result<(), OpError> {
    let mut inner = cx.hub.lock();
    match op {
        ReportsOp::ReportList { limit } => {
            let reports = inner.reports.newest(limit.unwrap_or(REPORT_LIST_DEFAULT));
            cx.reply_locked(&mut inner, DaemonEvent::Reports { reports });
        }
        ReportsOp::ReportRead { report } => {
            let newly = inner.reports.read(&report)?;
            let event = DaemonEvent::ReportRead { report };
            cx.reply_locked(&mut inner, event.clone());
            if newly {
                cx.broadcast_to_others(&mut inner, event);
            }
        }
    }
    Ok(())
}

#[derive(Debug, Deserialize)]
struct Args {
    title: String,
    #[serde(default)]
    body: String,
}

/// The `report` tool as a model sees it.
pub(crate) fn tool_def() -> jucode_engine::agent::ToolDef {
    jucode_engine::agent::ToolDef {
        name: "report".into(),
        description: "Post a report for the user to read later (what you did, what you found). \
            It wakes nobody and needs no answer; ask with `question` when you need one."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "title": {"type": "string", "maxLength": ITEM_TITLE_CHARS},
                "body": {"type": "string", "maxLength": REPORT_BODY_CHARS},
            },
            "required": ["title", "body"],
        }),
    }
}

/// Runs the `report` tool for `caller`: records the report and tells every client.
pub(crate) fn tool(hub: &Arc<Hub>, caller: &Caller, args: Value) -> Result<Value, ToolError> {
    let args: Args =
        serde_json::from_value(args).map_err(|e| ToolError::Invalid(format!("report: {e}")))?;
    if args.title.trim().is_empty() {
        return Err(ToolError::Invalid("report: title must not be empty".into()));
    }
    for (field, text, max) in [
        ("title", &args.title, ITEM_TITLE_CHARS),
        ("body", &args.body, REPORT_BODY_CHARS),
    ] {
        if text.chars().count() > max {
            return Err(ToolError::Invalid(format!(
                "report: {field} is longer than {max} characters"
            )));
        }
    }
    let mut inner = hub.lock();
    let report = inner
        .reports
        .post(caller, args.title, args.body)
        .map_err(OpError::from)?;
    let id = report.id.clone();
    let frame = to_value(&Reply::to(None, DaemonEvent::ReportPosted { report }));
    inner.broadcast(&frame);
    Ok(json!({"report": id}))
}
