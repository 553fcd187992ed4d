//! The usage ledger: every engine's finished turn recorded (fsynced) with its token counts and
//! a reference price, and the `session_usage` / `schedule_usage` replies summed from it.
//!
//! A turn is recorded where its `usage` event passes the hub (`sessions/engine.rs`), before
//! the event reaches clients with `billing_turn`, the turn's ledger key. The replies are
//! built on a spawned task and sent by request id, so they never hold up the connection's
//! next op.

mod billing;
mod ledger;
mod prices;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use jucode_protocol::daemon::usage::MAX_TURN_ROWS;
use jucode_protocol::daemon::{
    DaemonEvent, Reply, SessionUsageRow, TurnUsageRow, UsageOp, UsageTotals,
};
use jucode_protocol::serve::Event;
use jucode_store::{StateDir, StoreError};
use serde_json::{Value, json};

use crate::cx::OpCx;
use crate::error::OpError;
use crate::{ClientId, Hub, Inner, to_value};

pub use billing::{Billing, Charge, ChargesFuture};
pub(crate) use ledger::Ledger;
use ledger::TurnRecord;

/// Why a usage op failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UsageError {
    #[error("unknown session {0}")]
    UnknownSession(String),
    #[error("unknown scheduled task {0}")]
    UnknownSchedule(String),
}

pub(crate) fn open(store: &StateDir) -> Result<Ledger, StoreError> {
    Ledger::open(store)
}

/// Whether `id` is a scheduled task this daemon knows: one that exists, or a deleted one whose
/// runs were delivered (its history stays readable).
pub(crate) fn schedule_known(inner: &Inner, id: &str) -> bool {
    inner.schedule_exists(id)
        || !inner
            .messages
            .deliveries_from(&format!("schedule:{id}"))
            .is_empty()
}

impl Hub {
    /// Records a finished turn's `usage` event (fsynced) and returns the event as clients get
    /// it, with `billing_turn` and `billing_gateway`. A turn that cannot be written is still
    /// forwarded, without a ledger key.
    pub(crate) fn usage_passes(
        &self,
        inner: &mut Inner,
        session: &str,
        engine: &str,
        model: Option<String>,
        mut event: Event,
    ) -> Event {
        let n = |k: &str| event.0.get(k).and_then(Value::as_u64);
        let [input, cached_input, cache_write_input, output, reasoning] = [
            "input_tokens",
            "cached_input_tokens",
            "cache_write_input_tokens",
            "output_tokens",
            "reasoning_tokens",
        ]
        .map(n);
        let tokens = prices::Tokens {
            input: input.unwrap_or(0),
            cached_input: cached_input.unwrap_or(0),
            cache_write_input: cache_write_input.unwrap_or(0),
            output: output.unwrap_or(0),
        };
        let reported = input.is_some() || output.is_some();
        let model = event.str("model").map(str::to_string).or(model);
        let now = self.config.clock.now_ms();
        let turn = TurnRecord {
            session: session.to_string(),
            turn_id: crate::util::new_id("turn", now),
            channel_kind: engine.to_string(),
            // A turn whose engine reported no usage is unpriced, not free.
            estimated_cost_usd: reported
                .then(|| prices::estimate(model.as_deref(), tokens))
                .flatten(),
            model,
            input_tokens: input,
            cached_input_tokens: cached_input,
            cache_write_input_tokens: cache_write_input,
            output_tokens: output,
            reasoning_tokens: reasoning,
            requests: event.0.get("requests").and_then(Value::as_u64).unwrap_or(1),
            ended_at: now,
        };
        let key = turn.turn_id.clone();
        match inner.usage.append(turn) {
            Ok(()) => {
                event.0.insert("billing_turn".into(), json!(key));
            }
            Err(e) => tracing::error!("{e}"),
        }
        // No gateway account: its charge is unknown, not zero.
        event.0.insert("billing_gateway".into(), Value::Null);
        event
    }
}

/// Answers `session_usage` and `schedule_usage` from a spawned task, by request id.
pub(crate) fn handle(cx: &OpCx<'_>, op: UsageOp) -> Result<(), OpError> {
    let hub = cx.hub.clone();
    let client = cx.client;
    let id = cx.id.clone();
    tokio::spawn(async move {
        answer(&hub, client, id, op).await;
    });
    Ok(())
}

async fn answer(hub: &Arc<Hub>, client: ClientId, id: Option<Value>, op: UsageOp) {
    // Local sums first; with an account, the turns' charges are read without the lock and
    // the reply summed again with them.
    let first = reply_for(&hub.lock(), &op, None);
    // Charges are read for every turn (the totals need them all); only the list is capped.
    let reply = match (first, hub.config.billing.clone()) {
        (Err(e), _) => Reply::error(id, e.to_string()),
        (Ok(event), None) => Reply::to(id, capped(event)),
        (Ok(event), Some(billing)) => {
            let turn_ids = turn_ids(&event);
            match billing.charges(turn_ids).await {
                Ok(charges) => {
                    let charges = charges
                        .into_iter()
                        .map(|c| (c.turn_id.clone(), c))
                        .collect();
                    match reply_for(&hub.lock(), &op, Some(&charges)) {
                        Ok(event) => Reply::to(id, capped(event)),
                        Err(e) => Reply::error(id, e.to_string()),
                    }
                }
                Err(e) => Reply::to(id, capped(with_billing_error(event, e))),
            }
        }
    };
    hub.lock().clients.send(client, &to_value(&reply));
}

fn turn_ids(event: &DaemonEvent) -> Vec<String> {
    match event {
        DaemonEvent::SessionUsage { turns, .. } | DaemonEvent::ScheduleUsage { turns, .. } => {
            turns.iter().map(|t| t.turn_id.clone()).collect()
        }
        _ => Vec::new(),
    }
}

/// Keeps the newest [`MAX_TURN_ROWS`] turn rows and says how many older ones were left out.
fn capped(mut event: DaemonEvent) -> DaemonEvent {
    if let DaemonEvent::SessionUsage {
        turns,
        turns_omitted,
        ..
    }
    | DaemonEvent::ScheduleUsage {
        turns,
        turns_omitted,
        ..
    } = &mut event
    {
        // Newest last: across a task's sessions the rows follow delivery order, so sort.
        turns.sort_by_key(|t| t.ended_at);
        let over = turns.len().saturating_sub(MAX_TURN_ROWS);
        turns.drain(..over);
        *turns_omitted = u64::try_from(over).unwrap_or(u64::MAX);
    }
    event
}

fn with_billing_error(mut event: DaemonEvent, message: String) -> DaemonEvent {
    if let DaemonEvent::SessionUsage { billing_error, .. }
    | DaemonEvent::ScheduleUsage { billing_error, .. } = &mut event
    {
        *billing_error = Some(format!("gateway billing lookup failed: {message}"));
    }
    event
}

type Charges = HashMap<String, Charge>;

fn reply_for(
    inner: &Inner,
    op: &UsageOp,
    charges: Option<&Charges>,
) -> Result<DaemonEvent, UsageError> {
    match op {
        UsageOp::SessionUsage { session } => {
            let session = session.clone();
            if inner.sessions.usage_facts(&session).is_none() && !inner.usage.has_session(&session)
            {
                return Err(UsageError::UnknownSession(session));
            }
            let (totals, sessions, turns) = sum(inner, std::iter::once(session.clone()), charges);
            Ok(DaemonEvent::SessionUsage {
                session,
                totals,
                sessions,
                turns,
                turns_omitted: 0,
                billing_error: None,
            })
        }
        UsageOp::ScheduleUsage { schedule } => {
            let schedule = schedule.clone();
            if !schedule_known(inner, &schedule) {
                return Err(UsageError::UnknownSchedule(schedule));
            }
            let from = format!("schedule:{schedule}");
            let runs = inner
                .messages
                .deliveries_from(&from)
                .iter()
                .map(|d| d.session.clone());
            let (totals, sessions, turns) = sum(inner, runs, charges);
            Ok(DaemonEvent::ScheduleUsage {
                schedule,
                totals,
                sessions,
                turns,
                turns_omitted: 0,
                billing_error: None,
            })
        }
    }
}

/// Sums the ledger over `sessions`, each counted once however often it appears.
fn sum(
    inner: &Inner,
    sessions: impl Iterator<Item = String>,
    charges: Option<&Charges>,
) -> (UsageTotals, Vec<SessionUsageRow>, Vec<TurnUsageRow>) {
    let mut seen = HashSet::new();
    let mut totals = UsageTotals::default();
    let mut rows = Vec::new();
    let mut turns = Vec::new();
    for session in sessions {
        if !seen.insert(session.clone()) {
            continue;
        }
        let facts = inner.sessions.usage_facts(&session);
        let mut row = UsageTotals {
            running: u64::from(facts.is_some_and(|(_, busy)| busy)),
            ..UsageTotals::default()
        };
        for turn in inner.usage.of_session(&session) {
            let one = turn_totals(turn, charges);
            add(&mut row, &one);
            turns.push(TurnUsageRow {
                turn_id: turn.turn_id.clone(),
                session: turn.session.clone(),
                ended_at: turn.ended_at,
                model: turn.model.clone(),
                totals: one,
            });
        }
        add(&mut totals, &row);
        rows.push(SessionUsageRow {
            session,
            started_at: facts.map(|(at, _)| at),
            totals: row,
        });
    }
    (totals, rows, turns)
}

/// A turn's sums; with charges read, a settled one has its points and a missing or pending
/// one counts its requests as pending.
fn turn_totals(turn: &TurnRecord, charges: Option<&Charges>) -> UsageTotals {
    let charge = charges.map(|c| c.get(&turn.turn_id));
    let (gateway_cost, gateway_requests, pending_requests) = match charge {
        None => (None, 0, 0),
        Some(Some(Charge {
            points: Some(points),
            requests,
            ..
        })) => (Some(*points), *requests, 0),
        Some(Some(Charge {
            points: None,
            requests,
            ..
        })) => (None, 0, *requests),
        Some(None) => (None, 0, turn.requests),
    };
    UsageTotals {
        input_tokens: turn.input_tokens.unwrap_or(0),
        cached_input_tokens: turn.cached_input_tokens.unwrap_or(0),
        cache_write_input_tokens: turn.cache_write_input_tokens.unwrap_or(0),
        output_tokens: turn.output_tokens.unwrap_or(0),
        reasoning_tokens: turn.reasoning_tokens.unwrap_or(0),
        turns: 1,
        gateway_cost,
        estimated_cost_usd: turn.estimated_cost_usd,
        pending_requests,
        unpriced_requests: u64::from(turn.estimated_cost_usd.is_none()),
        running: 0,
        gateway_requests,
    }
}

/// Adds `b` into `a`; an amount stays `null` until some part of it is known.
fn add(a: &mut UsageTotals, b: &UsageTotals) {
    fn amount(x: Option<f64>, y: Option<f64>) -> Option<f64> {
        match (x, y) {
            (None, None) => None,
            (x, y) => Some(x.unwrap_or(0.0) + y.unwrap_or(0.0)),
        }
    }
    a.input_tokens += b.input_tokens;
    a.cached_input_tokens += b.cached_input_tokens;
    a.cache_write_input_tokens += b.cache_write_input_tokens;
    a.output_tokens += b.output_tokens;
    a.reasoning_tokens += b.reasoning_tokens;
    a.turns += b.turns;
    a.gateway_cost = amount(a.gateway_cost, b.gateway_cost);
    a.estimated_cost_usd = amount(a.estimated_cost_usd, b.estimated_cost_usd);
    a.pending_requests += b.pending_requests;
    a.unpriced_requests += b.unpriced_requests;
    a.running += b.running;
    a.gateway_requests += b.gateway_requests;
}
