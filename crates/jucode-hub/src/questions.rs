//! Questions agents ask the user: asked with the `question` tool, kept in `questions.jsonl`,
//! answered with `question_answer` or, once the deadline passes, answered by the agent's own
//! default ([`Hub::deliver_overdue_questions`]). Either way the asking session gets one
//! message, sent before the question is recorded answered (each with its own dedupe key, so
//! a crash between the two delivers once).
//!
//! `item_close` puts an open question away unanswered (nothing is sent); `item_reopen` brings
//! it back. The `questions` list (open ones, and those closed in the last 7 days) goes to
//! every client on connect and after every change.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use jucode_clock::SharedClock;
use jucode_protocol::daemon::limits::{
    ITEM_TITLE_CHARS, QUESTION_BODY_CHARS, QUESTION_DUE_DEFAULT_SECS, QUESTION_DUE_MAX_SECS,
    QUESTION_NOTE_CHARS,
};
use jucode_protocol::daemon::{
    ClosedQuestion, DaemonEvent, Importance, QuestionInfo, QuestionsOp, Reply,
};
use jucode_store::{JsonlLog, StateDir, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::agents::tools::{Caller, ToolError};
use crate::cx::OpCx;
use crate::error::OpError;
use crate::messages::{Accepted, NewMessage, Origin};
use crate::util::new_id;
use crate::{Hub, HubError, Inner, to_value};

/// Why a question op failed; the texts are the protocol's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum QuestionError {
    #[error("could not save the question: {0}")]
    Save(StoreError),
    #[error("unknown question {0}")]
    Unknown(String),
    #[error("question {0} was already answered")]
    Answered(String),
    #[error("question {0} is closed; reopen it first")]
    Closed(String),
    #[error("question_answer: answer must not be empty")]
    EmptyAnswer,
    #[error("question {0} is not open")]
    NotOpen(String),
    #[error("question {0} is not closed")]
    NotClosed(String),
    #[error("question {0} was answered and cannot be reopened")]
    AnsweredNoReopen(String),
    #[error("the agent of question {0} was deleted")]
    AgentDeleted(String),
}

/// Closed questions stay in the `closed` list this long.
const CLOSED_LIST_MS: u64 = 7 * 24 * 60 * 60 * 1000;

/// Who answered a question (the `by` of an `answered` record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum By {
    User,
    Deadline,
    AgentDeleted,
}

/// One line of `questions.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record {
    Asked {
        id: String,
        agent: String,
        session: String,
        title: String,
        #[serde(default)]
        body: String,
        #[serde(default)]
        assumption: String,
        #[serde(default)]
        default: String,
        #[serde(default)]
        importance: Importance,
        #[serde(default)]
        due_at: Option<u64>,
        at: u64,
    },
    Answered {
        id: String,
        #[serde(default)]
        answer: Option<String>,
        by: By,
        at: u64,
    },
    /// The user's answer, written before it is handed to the agent: should the daemon stop
    /// after the hand-off and before `answered`, the next start finds the message and closes
    /// the question with the text that really went out (see [`Questions::roll_forward`]).
    Answering {
        id: String,
        answer: String,
        at: u64,
    },
    /// `item_close`: put away unanswered.
    Closed {
        id: String,
        #[serde(default)]
        reason: Option<String>,
        at: u64,
    },
    Reopened {
        id: String,
        at: u64,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    Open,
    Answered {
        answer: Option<String>,
        by: By,
        at: u64,
    },
    Closed {
        reason: Option<String>,
        at: u64,
    },
}

struct Question {
    info: QuestionInfo,
    state: State,
    order: u64,
    /// The last answer being handed over (`Answering`), while the question is open.
    answering: Option<String>,
}

pub(crate) struct Questions {
    clock: SharedClock,
    log: JsonlLog,
    map: HashMap<String, Question>,
    /// Open questions with a deadline, by `(due_at, id)`.
    deadlines: BTreeSet<(u64, String)>,
    next_order: u64,
}

impl Questions {
    pub(crate) fn open(store: &StateDir, clock: SharedClock) -> Result<Questions, HubError> {
        let (log, records) = store.open_log::<Record>("questions.jsonl")?;
        let mut questions = Questions {
            clock,
            log,
            map: HashMap::new(),
            deadlines: BTreeSet::new(),
            next_order: 0,
        };
        for record in records {
            questions.apply(record);
        }
        Ok(questions)
    }

    fn apply(&mut self, record: Record) {
        match record {
            Record::Asked {
                id,
                agent,
                session,
                title,
                body,
                assumption,
                default,
                importance,
                due_at,
                at,
            } => {
                if self.map.contains_key(&id) {
                    return;
                }
                self.next_order += 1;
                if let Some(due) = due_at {
                    self.deadlines.insert((due, id.clone()));
                }
                let info = QuestionInfo {
                    id: id.clone(),
                    agent,
                    session,
                    title,
                    body,
                    assumption,
                    default,
                    importance,
                    due_at,
                    asked_at: at,
                };
                self.map.insert(
                    id,
                    Question {
                        info,
                        state: State::Open,
                        order: self.next_order,
                        answering: None,
                    },
                );
            }
            Record::Answered { id, answer, by, at } => {
                self.set_state(&id, State::Answered { answer, by, at });
            }
            Record::Answering { id, answer, .. } => {
                if let Some(q) = self.map.get_mut(&id) {
                    q.answering = Some(answer);
                }
            }
            Record::Closed { id, reason, at } => {
                self.set_state(&id, State::Closed { reason, at });
            }
            Record::Reopened { id, at } => {
                if let Some(q) = self.map.get_mut(&id) {
                    // A deadline that passed while it was put away is dropped: the user
                    // brought it back to answer it.
                    if q.info.due_at.is_some_and(|due| due <= at) {
                        q.info.due_at = None;
                    }
                    q.state = State::Open;
                    if let Some(due) = q.info.due_at {
                        self.deadlines.insert((due, id));
                    }
                }
            }
            Record::Unknown => {}
        }
    }

    fn set_state(&mut self, id: &str, state: State) {
        if let Some(q) = self.map.get_mut(id) {
            if let Some(due) = q.info.due_at {
                self.deadlines.remove(&(due, id.to_string()));
            }
            q.state = state;
            q.answering = None;
        }
    }

    /// Closes every open question whose answer or default was handed to its agent by a run
    /// that stopped before recording it (`delivered` says whether a message with that dedupe
    /// key exists). Without this, a second answer would be deduplicated away while the
    /// question recorded it, and the agent would have acted on the first. Returns how many.
    pub(crate) fn roll_forward(
        &mut self,
        delivered: impl Fn(&str) -> bool,
    ) -> Result<usize, QuestionError> {
        let mut done = Vec::new();
        for (id, q) in &self.map {
            if q.state != State::Open {
                continue;
            }
            if delivered(&answer_key(id)) {
                // A log from before `answering` existed gives no text: answered all the same.
                done.push((id.clone(), q.answering.clone(), By::User));
            } else if delivered(&deadline_key(id)) {
                done.push((id.clone(), Some(q.info.default.clone()), By::Deadline));
            }
        }
        let n = done.len();
        for (id, answer, by) in done {
            self.answered(&id, answer, by)?;
        }
        Ok(n)
    }

    fn answering(&mut self, id: &str, answer: &str) -> Result<(), QuestionError> {
        self.write(Record::Answering {
            id: id.to_string(),
            answer: answer.to_string(),
            at: self.clock.now_ms(),
        })
    }

    fn write(&mut self, record: Record) -> Result<(), QuestionError> {
        self.log.append(&record).map_err(QuestionError::Save)?;
        self.apply(record);
        Ok(())
    }

    /// Records a new question; returns it as listed.
    pub(crate) fn ask(&mut self, mut info: QuestionInfo) -> Result<QuestionInfo, QuestionError> {
        let at = self.clock.now_ms();
        info.id = new_id("q", at);
        info.asked_at = at;
        self.write(Record::Asked {
            id: info.id.clone(),
            agent: info.agent.clone(),
            session: info.session.clone(),
            title: info.title.clone(),
            body: info.body.clone(),
            assumption: info.assumption.clone(),
            default: info.default.clone(),
            importance: info.importance,
            due_at: info.due_at,
            at,
        })?;
        Ok(info)
    }

    /// An open question, or why it cannot be answered.
    fn open_one(&self, id: &str) -> Result<&QuestionInfo, QuestionError> {
        let q = self
            .map
            .get(id)
            .ok_or_else(|| QuestionError::Unknown(id.to_string()))?;
        match q.state {
            State::Open => Ok(&q.info),
            State::Answered { .. } => Err(QuestionError::Answered(id.to_string())),
            State::Closed { .. } => Err(QuestionError::Closed(id.to_string())),
        }
    }

    fn answered(&mut self, id: &str, answer: Option<String>, by: By) -> Result<(), QuestionError> {
        self.write(Record::Answered {
            id: id.to_string(),
            answer,
            by,
            at: self.clock.now_ms(),
        })
    }

    /// `item_close` for a question: put away unanswered; nothing is sent to the agent.
    pub(crate) fn close(&mut self, id: &str, reason: Option<String>) -> Result<(), QuestionError> {
        match self.map.get(id).map(|q| &q.state) {
            None => Err(QuestionError::Unknown(id.to_string())),
            Some(State::Open) => self.write(Record::Closed {
                id: id.to_string(),
                reason,
                at: self.clock.now_ms(),
            }),
            Some(_) => Err(QuestionError::NotOpen(id.to_string())),
        }
    }

    /// `item_reopen` for a question closed with `item_close`. Returns its session.
    pub(crate) fn reopen(&mut self, id: &str) -> Result<String, QuestionError> {
        let q = self
            .map
            .get(id)
            .ok_or_else(|| QuestionError::Unknown(id.to_string()))?;
        match &q.state {
            State::Closed { .. } => {}
            State::Open => return Err(QuestionError::NotClosed(id.to_string())),
            State::Answered {
                by: By::AgentDeleted,
                ..
            } => return Err(QuestionError::AgentDeleted(id.to_string())),
            State::Answered { .. } => return Err(QuestionError::AnsweredNoReopen(id.to_string())),
        }
        let session = q.info.session.clone();
        self.write(Record::Reopened {
            id: id.to_string(),
            at: self.clock.now_ms(),
        })?;
        Ok(session)
    }

    /// Closes every open question of `agent` (it was deleted). Returns how many.
    pub(crate) fn close_agent(&mut self, agent: &str) -> Result<usize, QuestionError> {
        let ids: Vec<String> = self
            .map
            .iter()
            .filter(|(_, q)| q.state == State::Open && q.info.agent == agent)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ids {
            self.answered(id, None, By::AgentDeleted)?;
        }
        Ok(ids.len())
    }

    /// Open questions whose deadline is at or before `now_ms`, soonest first.
    fn overdue(&self, now_ms: u64) -> Vec<String> {
        self.deadlines
            .range(..(now_ms.saturating_add(1), String::new()))
            .map(|(_, id)| id.clone())
            .collect()
    }

    /// The `questions` frame: open questions oldest first, and those closed in the last
    /// 7 days newest first.
    pub(crate) fn event(&self) -> DaemonEvent {
        let now = self.clock.now_ms();
        let mut open: Vec<&Question> = Vec::new();
        let mut closed: Vec<(u64, &Question, ClosedQuestion)> = Vec::new();
        for q in self.map.values() {
            let (closed_by, reason, at, answer) = match &q.state {
                State::Open => {
                    open.push(q);
                    continue;
                }
                State::Answered { answer, by, at } => {
                    let (by, reason) = match by {
                        By::User => ("user", "answered"),
                        By::Deadline => ("deadline", "no answer by the deadline"),
                        By::AgentDeleted => ("agent_deleted", "its agent was deleted"),
                    };
                    (by, Some(reason.to_string()), *at, answer.clone())
                }
                State::Closed { reason, at } => ("user", reason.clone(), *at, None),
            };
            if now.saturating_sub(at) >= CLOSED_LIST_MS {
                continue;
            }
            closed.push((
                at,
                q,
                ClosedQuestion {
                    question: q.info.clone(),
                    closed_by: closed_by.to_string(),
                    closed_reason: reason,
                    closed_at: at,
                    answer,
                },
            ));
        }
        open.sort_by_key(|q| q.order);
        closed.sort_by_key(|(at, q, _)| std::cmp::Reverse((*at, q.order)));
        DaemonEvent::Questions {
            questions: open.into_iter().map(|q| q.info.clone()).collect(),
            closed: closed.into_iter().map(|(_, _, c)| c).collect(),
        }
    }
}

impl Inner {
    pub(crate) fn broadcast_questions(&mut self) {
        let frame = to_value(&Reply::to(None, self.questions.event()));
        self.broadcast(&frame);
    }

    /// What deleting `agent` does to its items: its armed timers are cancelled and its open
    /// questions closed (`closed_by: agent_deleted`), each recorded; every client gets the
    /// new `questions` list when it changed.
    // Called by `agent_delete` (the agents area).
    pub(crate) fn agent_deleted_items(&mut self, agent: &str) -> Result<(), OpError> {
        self.timers.cancel_agent(agent)?;
        if self.questions.close_agent(agent)? > 0 {
            self.broadcast_questions();
        }
        Ok(())
    }
}

/// The dedupe key of the message carrying the user's answer to `id`.
fn answer_key(id: &str) -> String {
    format!("question:{id}:answer")
}

/// The dedupe key of the message carrying `id`'s default at its deadline.
fn deadline_key(id: &str) -> String {
    format!("question:{id}:deadline")
}

/// Delivers the default of every question whose deadline passed by `now_ms` through
/// `deliver`, recording each answered only once its message was accepted.
pub(crate) fn deliver_overdue(
    inner: &mut Inner,
    now_ms: u64,
    mut deliver: impl FnMut(&mut Inner, NewMessage) -> Result<Accepted, OpError>,
) {
    let mut changed = false;
    for id in inner.questions.overdue(now_ms) {
        let Ok(q) = inner.questions.open_one(&id) else {
            continue;
        };
        if !inner.agents.map.contains_key(&q.agent) {
            // Its agent is gone (removed by hand while the daemon was down): nobody to tell.
            tracing::warn!("question {id}: agent {} is gone; closed", q.agent);
            match inner.questions.answered(&id, None, By::AgentDeleted) {
                Ok(()) => changed = true,
                Err(e) => tracing::warn!("question {id}: {e}"),
            }
            continue;
        }
        let default = q.default.clone();
        let msg = NewMessage {
            to: q.agent.clone(),
            from: Origin::Question(id.clone()),
            body: format!(
                "Q: {}\nNo answer by the deadline. Go ahead with your default: {default}",
                q.title
            ),
            session: Some(q.session.clone()),
            reply_to: None,
            dedupe_key: Some(deadline_key(&id)),
            new_session: false,
        };
        match deliver(inner, msg) {
            Ok(_) => match inner.questions.answered(&id, Some(default), By::Deadline) {
                Ok(()) => changed = true,
                Err(e) => tracing::warn!("question {id}: {e}"),
            },
            // Tried again at the next tick; the deadline stays in the index.
            Err(e) => tracing::debug!("question {id}: its default could not be delivered: {e}"),
        }
    }
    if changed {
        inner.broadcast_questions();
    }
}

impl Hub {
    /// Delivers the defaults of questions whose deadline passed (the one-second loop calls
    /// it).
    pub(crate) fn deliver_overdue_questions(self: &Arc<Self>, inner: &mut Inner, now_ms: u64) {
        deliver_overdue(inner, now_ms, |inner, msg| self.enqueue_message(inner, msg));
    }
}

/// `question_answer`: the answer goes to the asking session, then the question is recorded
/// answered. `deliver` is the hub's `enqueue_message` (a test's stand-in).
pub(crate) fn answer(
    inner: &mut Inner,
    id: &str,
    answer: &str,
    deliver: impl FnOnce(&mut Inner, NewMessage) -> Result<Accepted, OpError>,
) -> Result<(), OpError> {
    if answer.trim().is_empty() {
        return Err(QuestionError::EmptyAnswer.into());
    }
    let q = inner.questions.open_one(id)?.clone();
    inner.questions.answering(id, answer)?;
    let msg = NewMessage {
        to: q.agent.clone(),
        from: Origin::Question(id.to_string()),
        body: format!("Q: {}\nA: {answer}", q.title),
        session: Some(q.session.clone()),
        reply_to: None,
        dedupe_key: Some(answer_key(id)),
        new_session: false,
    };
    deliver(inner, msg)?;
    inner
        .questions
        .answered(id, Some(answer.to_string()), By::User)?;
    Ok(())
}

/// Answers `question_list` and `question_answer`.
pub(crate) fn handle(cx: &OpCx<'_>, op: QuestionsOp) -> Result<(), OpError> {
    let mut inner = cx.hub.lock();
    match op {
        QuestionsOp::QuestionList => {
            let event = inner.questions.event();
            cx.reply_locked(&mut inner, event);
        }
        QuestionsOp::QuestionAnswer {
            question,
            answer: text,
        } => {
            answer(&mut inner, &question, &text, |inner, msg| {
                cx.hub.enqueue_message(inner, msg)
            })?;
            cx.reply_locked(&mut inner, DaemonEvent::QuestionAnswered { question });
            inner.broadcast_questions();
        }
    }
    Ok(())
}

/// The `question` tool's arguments.
#[derive(Debug, Deserialize)]
struct Args {
    title: String,
    #[serde(default)]
    body: String,
    #[serde(default)]
    assumption: String,
    #[serde(default)]
    default: String,
    #[serde(default)]
    due_in_seconds: Option<u64>,
    #[serde(default)]
    importance: Option<String>,
}

/// The `question` tool as a model sees it.
pub(crate) fn tool_def() -> jucode_engine::agent::ToolDef {
    jucode_engine::agent::ToolDef {
        name: "question".into(),
        description: format!(
            "Ask the user a question and go on working: this returns at once with the \
             question's id. The answer comes to this session as a message; if none comes by \
             the deadline (due_in_seconds, default {} hours), you are told to go ahead with \
             your `default`. Say what you assume meanwhile in `assumption`.",
            QUESTION_DUE_DEFAULT_SECS / 3600
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "title": {"type": "string", "maxLength": ITEM_TITLE_CHARS},
                "body": {"type": "string", "maxLength": QUESTION_BODY_CHARS},
                "assumption": {"type": "string", "maxLength": QUESTION_NOTE_CHARS},
                "default": {"type": "string", "maxLength": QUESTION_NOTE_CHARS},
                "due_in_seconds": {"type": "integer", "minimum": 1, "maximum": QUESTION_DUE_MAX_SECS},
                "importance": {"type": "string", "enum": ["low", "normal", "high"]},
            },
            "required": ["title"],
        }),
    }
}

fn too_long(field: &str, text: &str, max: usize) -> Result<(), ToolError> {
    if text.chars().count() > max {
        return Err(ToolError::Invalid(format!(
            "question: {field} is longer than {max} characters"
        )));
    }
    Ok(())
}

/// Runs the `question` tool for `caller`: records the question and returns at once.
pub(crate) fn tool(hub: &Arc<Hub>, caller: &Caller, args: Value) -> Result<Value, ToolError> {
    let args: Args =
        serde_json::from_value(args).map_err(|e| ToolError::Invalid(format!("question: {e}")))?;
    if args.title.trim().is_empty() {
        return Err(ToolError::Invalid(
            "question: title must not be empty".into(),
        ));
    }
    too_long("title", &args.title, ITEM_TITLE_CHARS)?;
    too_long("body", &args.body, QUESTION_BODY_CHARS)?;
    too_long("assumption", &args.assumption, QUESTION_NOTE_CHARS)?;
    too_long("default", &args.default, QUESTION_NOTE_CHARS)?;
    let due_in = args.due_in_seconds.unwrap_or(QUESTION_DUE_DEFAULT_SECS);
    if !(1..=QUESTION_DUE_MAX_SECS).contains(&due_in) {
        return Err(ToolError::Invalid(format!(
            "question: due_in_seconds must be between 1 and {QUESTION_DUE_MAX_SECS} ({} days)",
            QUESTION_DUE_MAX_SECS / 86_400
        )));
    }
    let importance = match args.importance.as_deref() {
        None => Importance::Normal,
        Some(text) => Importance::parse(text).ok_or_else(|| {
            ToolError::Invalid(format!(
                "question: importance {text:?} is not low, normal or high"
            ))
        })?,
    };
    let now = hub.config.clock.now_ms();
    let mut inner = hub.lock();
    let info = inner
        .questions
        .ask(QuestionInfo {
            id: String::new(),
            agent: caller.agent.clone(),
            session: caller.session.clone(),
            title: args.title,
            body: args.body,
            assumption: args.assumption,
            default: args.default,
            importance,
            due_at: Some(now.saturating_add(due_in * 1000)),
            asked_at: now,
        })
        .map_err(OpError::from)?;
    inner.broadcast_questions();
    inner.notifications.question_asked(&info);
    Ok(json!({"question": info.id, "due_at": info.due_at}))
}
