//! One load client: sends its ops at a fixed rate, matches every reply by `id`, and counts
//! the sessions' stamped deltas it receives.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

pub type Ws = WebSocketStream<TcpStream>;

/// Where the run is; clients read it when they send, so each op is filed under its phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Warmup,
    Baseline,
    Stall,
    /// No new ops; outstanding replies and the streams' ends are awaited.
    Drain,
    /// Stop now: whatever is still pending counts as missing.
    Done,
}

/// Cheap ops that each get a reply of their own, none of which grows state.
pub const MIX: &[&str] = &[
    "ping",
    "session_list",
    "agent_list",
    "timer_list",
    "workspaces",
    "question_list",
    "actions_list",
    "schedule_list",
    "requirement_list",
    "dispatch_list",
];

/// What the desk client does besides reading: it owns the sessions' streams and renames one
/// session a second (a write whose answer is the `sessions` broadcast).
pub struct Desk {
    pub sessions: Vec<String>,
    pub stream: String,
}

#[derive(Default)]
pub struct Stats {
    /// Op latencies in microseconds, in the baseline and the stall phase.
    pub baseline: Vec<u32>,
    pub stall: Vec<u32>,
    /// Stamp-to-arrival of session deltas, microseconds (baseline and stall phases).
    pub delta_baseline: Vec<u32>,
    pub delta_stall: Vec<u32>,
    pub renames: Vec<u32>,
    pub sent: u64,
    pub errors: u64,
    pub missing: u64,
    pub first_errors: Vec<String>,
    pub deltas: u64,
    pub ended: Option<String>,
}

#[allow(clippy::disallowed_methods, reason = "a load test measures real time")]
fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// The stamp of an `assistant_delta`, found without a parse (deltas are most of the traffic).
fn stamp_of(text: &str) -> Option<u64> {
    const KEY: &str = "\"delta\":\"t";
    let start = text.find(KEY)? + KEY.len();
    let rest = &text[start..];
    rest[..rest.find('"')?].parse().ok()
}

/// Runs one client until the run is drained (every reply in, every stream ended) or `Done`.
#[allow(clippy::disallowed_methods, reason = "a load test measures real time")]
pub async fn run(
    ws: Ws,
    rate: f64,
    offset: Duration,
    desk: Option<Desk>,
    sessions: usize,
    mut phase: watch::Receiver<Phase>,
) -> Stats {
    let (mut sink, mut stream) = ws.split();
    let mut stats = Stats::default();
    let mut pending: HashMap<u64, (Instant, Phase)> = HashMap::new();
    let mut renames: HashMap<String, Instant> = HashMap::new();
    let period = if desk.is_some() {
        Duration::from_secs(1)
    } else {
        Duration::from_secs_f64(1.0 / rate.max(0.001))
    };
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + offset, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seq: u64 = 0;
    let mut ended_streams = 0usize;
    let mut interrupted = false;
    if let Some(desk) = &desk {
        for s in &desk.sessions {
            let op = json!({"op": "user_message", "session": s, "content": desk.stream});
            if sink.send(Message::text(op.to_string())).await.is_err() {
                stats.ended = Some("could not start the streams".into());
                return stats;
            }
        }
    }
    let note = |stats: &mut Stats, why: String| {
        stats.errors += 1;
        if stats.first_errors.len() < 3 {
            stats.first_errors.push(why);
        }
    };
    loop {
        let now_phase = *phase.borrow();
        if now_phase == Phase::Done {
            break;
        }
        if now_phase == Phase::Drain {
            if let (Some(desk), false) = (&desk, interrupted) {
                interrupted = true;
                for s in &desk.sessions {
                    let op = json!({"op": "interrupt", "session": s});
                    let _ = sink.send(Message::text(op.to_string())).await;
                }
            }
            if pending.is_empty() && renames.is_empty() && ended_streams >= sessions {
                break;
            }
        }
        tokio::select! {
            _ = tick.tick(), if now_phase < Phase::Drain => {
                seq += 1;
                let text = match &desk {
                    Some(desk) => {
                        let Some(s) = desk.sessions.get(seq as usize % desk.sessions.len().max(1)) else { continue };
                        let title = format!("load {seq}");
                        renames.insert(title.clone(), Instant::now());
                        json!({"op": "session_meta", "session": s, "title": title, "id": seq}).to_string()
                    }
                    None => {
                        let op = MIX[seq as usize % MIX.len()];
                        pending.insert(seq, (Instant::now(), now_phase));
                        json!({"op": op, "id": seq}).to_string()
                    }
                };
                stats.sent += 1;
                if let Err(e) = sink.send(Message::text(text)).await {
                    stats.ended = Some(format!("send failed: {e}"));
                    break;
                }
            }
            changed = phase.changed() => {
                if changed.is_err() {
                    break;
                }
            }
            frame = stream.next() => {
                let text = match frame {
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(Message::Close(f))) => {
                        stats.ended = Some(format!("closed by the daemon: {f:?}"));
                        break;
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => {
                        stats.ended = Some(e.to_string());
                        break;
                    }
                    None => {
                        stats.ended = Some("end of stream".into());
                        break;
                    }
                };
                let text = text.as_str();
                if text.contains("\"type\":\"assistant_delta\"") {
                    stats.deltas += 1;
                    if let Some(stamp) = stamp_of(text) {
                        let lat = micros(Duration::from_nanos(now_ns().saturating_sub(stamp)));
                        match now_phase {
                            Phase::Baseline => stats.delta_baseline.push(lat),
                            Phase::Stall => stats.delta_stall.push(lat),
                            _ => {}
                        }
                    }
                    continue;
                }
                let Ok(frame) = serde_json::from_str::<Value>(text) else {
                    note(&mut stats, format!("not JSON: {text:.80}"));
                    continue;
                };
                let kind = frame.get("type").and_then(Value::as_str).unwrap_or_default();
                if kind == "status" && frame.get("message").and_then(Value::as_str) == Some("interrupted") {
                    ended_streams += 1;
                }
                if kind == "sessions" && !renames.is_empty() {
                    for s in frame.get("sessions").and_then(Value::as_array).into_iter().flatten() {
                        if let Some(sent) = s.get("title").and_then(Value::as_str).and_then(|t| renames.remove(t)) {
                            stats.renames.push(micros(sent.elapsed()));
                        }
                    }
                }
                let Some(id) = frame.get("id").and_then(Value::as_u64) else { continue };
                if kind == "error" {
                    note(&mut stats, format!("op {id}: {frame}"));
                    pending.remove(&id);
                    renames.retain(|t, _| t != &format!("load {id}"));
                    continue;
                }
                if let Some((sent, tagged)) = pending.remove(&id) {
                    let lat = micros(sent.elapsed());
                    match tagged {
                        Phase::Baseline => stats.baseline.push(lat),
                        Phase::Stall => stats.stall.push(lat),
                        _ => {}
                    }
                }
            }
        }
    }
    stats.missing = (pending.len() + renames.len()) as u64;
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_read() {
        assert_eq!(
            stamp_of(r#"{"type":"assistant_delta","delta":"t42","session":"s"}"#),
            Some(42)
        );
        assert_eq!(stamp_of(r#"{"type":"assistant_delta","delta":"x"}"#), None);
    }
}
