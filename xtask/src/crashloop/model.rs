//! What the clients saw acknowledged: the record every restarted daemon is checked against
//! (`checks.rs`).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

/// The kinds of state the loop changes, each one op of the mix; the table at the end counts
/// acknowledgements per kind.
pub const KINDS: &[&str] = &[
    "session_create",
    "session_rename",
    "session_close",
    "workspace",
    "requirement",
    "schedule_save",
    "schedule_delete",
    "schedule_run",
    "schedule_due",
    "schedule_repeat",
    "device_pair",
    "device_revoke",
    "upload",
    "agent_message",
    "agent_timer",
    "agent_question",
    "question_answer",
    "agent_report",
    "report_read",
    "action_ask",
    "action_listed",
    "action_decide",
    "item_close",
    "item_reopen",
    "dispatch_send",
    "dispatch_confirm",
    "agent_requirement",
    "proposal_decide",
];

/// The reason every `item_close` gives, so a closed item's `closed_reason` tells it from a
/// decision.
pub const CLOSE_REASON: &str = "shut by the crash loop";

#[derive(Default)]
pub struct Session {
    /// The last title acknowledged (after a `ping` that followed it on the same connection).
    pub title: Option<String>,
    /// Titles sent since, not acknowledged before a kill: each may or may not have landed.
    pub unsure_titles: Vec<String>,
    pub closed: bool,
}

/// A deferred action as the client last knew it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Listed by the daemon (so recorded), not decided by the client.
    Listed,
    /// `decide_action` sent (allow?) without its acknowledgement: decided that way or still
    /// open.
    Deciding(bool),
    /// The decision (allow?) was acknowledged.
    Decided(bool),
    /// Closed or being closed, or being reopened, by the client (`item_close`, `item_reopen`):
    /// never decided meanwhile. A reopen acknowledged makes it `Listed` again.
    Shut(Shut),
}

impl Action {
    /// The decision sent, acknowledged or not.
    pub fn decision(self) -> Option<bool> {
        match self {
            Action::Listed | Action::Shut(_) => None,
            Action::Deciding(allow) | Action::Decided(allow) => Some(allow),
        }
    }
}

/// An item (a deferred action, a question) the client closed without an answer or reopened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shut {
    /// `item_close` sent without its acknowledgement: closed with [`CLOSE_REASON`] or open.
    Closing,
    /// `item_close` acknowledged: closed with [`CLOSE_REASON`].
    Closed,
    /// `item_reopen` sent without its acknowledgement: open, or still closed.
    Reopening,
    /// `item_reopen` acknowledged: open.
    Reopened,
}

impl Shut {
    /// Whether the item may be listed open (`open`) or as closed by the client; `None` when
    /// either is right.
    pub fn must_be_open(self) -> Option<bool> {
        match self {
            Shut::Closing | Shut::Reopening => None,
            Shut::Closed => Some(false),
            Shut::Reopened => Some(true),
        }
    }
}

/// A deferred action the daemon listed: its state and the tag its command writes.
#[derive(Debug, Clone)]
pub struct ActionSeen {
    pub state: Action,
    /// The session that deferred it.
    pub session: String,
    /// `ran-<tag>`: the line the command appends to the runs file when it runs.
    pub mark: String,
}

/// An acknowledged dispatch: its text and its tasks' texts, in order.
#[derive(Debug, Clone)]
pub struct DispatchSeen {
    pub text: String,
    pub tasks: Vec<String>,
    /// Sent with `plan: true`: no task may start before an approving `dispatch_confirm`.
    pub plan: bool,
    /// The `dispatch_confirm` sent (approve?) and whether its reply arrived.
    pub confirm: Option<(bool, bool)>,
}

impl DispatchSeen {
    /// Whether its tasks may have started: no plan to confirm, or an approval was sent.
    pub fn may_start(&self) -> bool {
        !self.plan || matches!(self.confirm, Some((true, _)))
    }
}

/// A scheduled task that repeats every minute, saved and acknowledged.
#[derive(Debug, Clone)]
pub struct Repeating {
    pub name: String,
    /// Its first `next_run_at` (unix seconds), from the save's reply.
    pub first: u64,
}

#[derive(Default)]
pub struct Model {
    pub sessions: HashMap<String, Session>,
    pub requirements: HashMap<String, String>,
    pub projects: HashSet<String>,
    pub schedules: HashSet<String>,
    pub deleted_schedules: HashSet<String>,
    /// Paired devices not revoked: (device id, token).
    pub devices: Vec<(String, String)>,
    /// Tokens of devices whose revoke was acknowledged.
    pub revoked: Vec<String>,
    /// Finished uploads: (path, the bytes sent).
    pub uploads: Vec<(String, Vec<u8>)>,
    /// Scheduled tasks (`id name`) whose `schedule_run` was sent, answered or not.
    pub runs_tried: HashSet<String>,
    /// Prompts of the tasks whose `schedule_run` was answered `schedule_started`.
    pub runs: HashSet<String>,
    /// `once` tasks saved to come due by the clock: prompt (`due-<tag>`) → due, unix seconds.
    /// Never run by hand nor deleted, so each must run exactly once.
    pub due: HashMap<String, u64>,
    /// Tasks repeating every minute, by id: never deleted nor run by hand.
    pub repeating: HashMap<String, Repeating>,
    /// Bodies of `message_send`s answered `message_accepted`.
    pub messages: HashSet<String>,
    /// Answers acknowledged by `question_answered`, by question id.
    pub answers: HashMap<String, String>,
    /// Questions a `question_answer` was sent for, acknowledged or not.
    pub answers_sent: HashSet<String>,
    /// Questions the client closed or reopened (`item_close`, `item_reopen`), by id.
    pub questions_shut: HashMap<String, Shut>,
    /// The agents' proposed requirements the client decided (`requirement_proposal`), by id:
    /// (accept?, acknowledged?).
    pub proposals: HashMap<String, (bool, bool)>,
    /// Reports whose `report_read` was acknowledged.
    pub reports_read: HashSet<String>,
    /// Deferred actions the daemon listed, by id.
    pub actions: HashMap<String, ActionSeen>,
    /// Deferred actions the model was told of by a daemon since killed (so whatever it
    /// recorded is on disk), by id.
    pub told_deferred: HashSet<String>,
    /// Dispatches answered `dispatch_started`, by id.
    pub dispatches: HashMap<String, DispatchSeen>,
    /// The session each dispatch task was first seen with: `(dispatch, task)` → session.
    pub task_sessions: HashMap<(String, u64), String>,
    pub acked: BTreeMap<&'static str, u64>,
    /// What the agents' tools returned so far (read from the fake model's requests as they
    /// are taken).
    pub tools: ToolAcks,
}

impl Model {
    pub fn ack(&mut self, kind: &'static str) {
        *self.acked.entry(kind).or_default() += 1;
    }
}

/// What the agents' tools returned, read from the tool results in the model's recorded
/// requests: message ids from `message_agent`, timer ids from `timer`, question and report
/// ids from `question` and `report`, requirement ids from `requirements`' `propose_create`,
/// and the deferred actions a call was turned into.
#[derive(Default, Clone)]
pub struct ToolAcks {
    pub messages: HashSet<String>,
    pub timers: HashSet<String>,
    pub questions: HashSet<String>,
    pub reports: HashSet<String>,
    pub proposed: HashSet<String>,
    pub deferred: HashSet<String>,
}

/// What the engine tells the model in place of a deferred call's result, before the id.
const DEFERRED: &str = "Submitted for confirmation as deferred action ";

impl ToolAcks {
    /// Adds what the tool results in `requests` name.
    pub fn absorb(&mut self, requests: &[(String, Value)]) {
        let acks = self;
        for (_, body) in requests {
            for m in body["messages"].as_array().into_iter().flatten() {
                if m["role"] != "tool" {
                    continue;
                }
                let Some(content) = m["content"].as_str() else {
                    continue;
                };
                if let Some(rest) = content.strip_prefix(DEFERRED) {
                    let id: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                        .collect();
                    acks.deferred.insert(id);
                    continue;
                }
                let Ok(v) = serde_json::from_str::<Value>(content) else {
                    continue;
                };
                if v["state"] == "proposed"
                    && let Some(id) = v["requirement"].as_str()
                {
                    acks.proposed.insert(id.to_string());
                    continue;
                }
                for (field, set) in [
                    ("message", &mut acks.messages),
                    ("timer", &mut acks.timers),
                    ("question", &mut acks.questions),
                    ("report", &mut acks.reports),
                ] {
                    if let Some(id) = v[field].as_str() {
                        set.insert(id.to_string());
                    }
                }
            }
        }
    }
}
