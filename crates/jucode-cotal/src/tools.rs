//! The `cotal_*` tool surface: closed argument schemas, strict validation, and
//! the host-side execution of each call.
//!
//! `specs` holds the surface and its validation; this file executes the calls.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::envelope;
use crate::inbox::{Attention, ChannelMode};
use crate::presence::Status;
use crate::relay::ToolResult;
use crate::seat::Seat;
use crate::subject::{self, Principal};
use crate::util::now_ms;

mod specs;

pub use specs::{JCODE_EXTRAS, SPECS, ToolGate, ToolSpec, spec};

fn ok(text: impl Into<String>) -> ToolResult {
    ToolResult {
        text: text.into(),
        is_error: false,
    }
}

fn err(text: impl Into<String>) -> ToolResult {
    ToolResult {
        text: text.into(),
        is_error: true,
    }
}

fn s<'a>(args: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    args.get(k).and_then(Value::as_str)
}

/// One row of the roster.
#[derive(Debug, Clone)]
pub struct Peer {
    pub id: String,
    pub name: String,
    pub role: Option<String>,
    pub status: String,
    pub age_ms: u64,
}

/// Execute one call on the host (after the relay checked the token).
pub async fn dispatch(seat: &Arc<Seat>, name: &str, args: Map<String, Value>) -> ToolResult {
    let Some(spec) = spec(name) else {
        return err(format!("unknown tool {name}"));
    };
    let gate = ToolGate::from_config(&seat.cfg);
    if !gate.allows(name) {
        return err(format!(
            "{name} needs a capability this seat was not granted"
        ));
    }
    let args = match spec.validate(args) {
        Ok(a) => a,
        Err(e) => return err(e),
    };
    match name {
        "cotal_orientation" => orientation(seat).await,
        "cotal_connection_status" => ok(seat.connection_summary().to_string()),
        "cotal_docs" => docs(s(&args, "page"), s(&args, "query")),
        "cotal_roster" => match roster(seat).await {
            Ok(peers) => ok(format_roster(&peers)),
            Err(e) => err(e),
        },
        "cotal_inbox" => {
            let peek = args.get("peek").and_then(Value::as_bool).unwrap_or(false);
            let (items, acks) = seat.state().inbox.pull(peek, now_ms());
            for a in acks {
                let _ = a.ack().await;
            }
            seat.touch_presence();
            if items.is_empty() {
                ok("No held messages.")
            } else {
                ok(crate::inbox::format_injection(&items))
            }
        }
        "cotal_send" => send(seat, &args).await,
        "cotal_dm" => dm(seat, &args).await,
        "cotal_anycast" => anycast(seat, &args).await,
        "cotal_status" => status(seat, &args),
        "cotal_channel_info" => channel_info(seat, s(&args, "channel").unwrap_or_default()).await,
        "cotal_channels" => channels(seat).await,
        "cotal_channel_mode" => {
            let ch = subject::sanitize_channel(s(&args, "channel").unwrap_or_default());
            let mode = match s(&args, "mode") {
                Some("quiet") => ChannelMode::Quiet,
                Some("muted") => ChannelMode::Muted,
                _ => ChannelMode::Normal,
            };
            {
                let mut st = seat.state();
                if mode == ChannelMode::Normal {
                    st.inbox.modes.remove(&ch);
                    st.presence.channel_modes.remove(&ch);
                } else {
                    st.inbox.modes.insert(ch.clone(), mode);
                    st.presence.channel_modes.insert(ch.clone(), mode);
                }
            }
            seat.touch_presence();
            ok(format!(
                "#{ch} is now {}",
                s(&args, "mode").unwrap_or("normal")
            ))
        }
        "cotal_join" => {
            let ch = s(&args, "channel").unwrap_or_default();
            match seat.join(ch).await {
                Ok(()) => {
                    seat.touch_presence();
                    ok(format!("joined #{}", subject::sanitize_channel(ch)))
                }
                Err(e) => err(e.to_string()),
            }
        }
        "cotal_leave" => {
            let ch = s(&args, "channel").unwrap_or_default();
            if seat.leave(ch) {
                if let Err(e) = seat.sync_backstop().await {
                    tracing::warn!(error = %e, "backstop not narrowed after leave");
                }
                ok(format!("left #{}", subject::sanitize_channel(ch)))
            } else {
                err(format!("not in #{}", subject::sanitize_channel(ch)))
            }
        }
        "cotal_reconnect" => match seat.mesh.client.force_reconnect().await {
            Ok(()) => ok("reconnecting"),
            Err(e) => err(format!("reconnect failed: {e}")),
        },
        "cotal_spawn" => manager_tool(seat, "spawn", args).await,
        "cotal_despawn" => {
            let mut args = args;
            if !args.contains_key("name") {
                args.insert("name".into(), json!(seat.cfg.name));
            }
            manager_tool(seat, "despawn", args).await
        }
        "cotal_persona" => manager_tool(seat, "define-persona", args).await,
        "cotal_personas" => manager_tool(seat, "personas", args).await,
        "cotal_yield" => yield_turn(seat, args).await,
        "cotal_run" => manager_tool(seat, "run", args).await,
        "cotal_feedback" => manager_tool(seat, "feedback", args).await,
        _ => err(format!("unknown tool {name}")),
    }
}

/// `cotal_yield` naming a run turn: only one the seat was shown (the send
/// carrying it accepted) and has not settled; the manager's answer settles it.
async fn yield_turn(seat: &Arc<Seat>, args: Map<String, Value>) -> ToolResult {
    let turn = args.get("turn").and_then(Value::as_str).map(str::to_string);
    if let Some(t) = &turn
        && let Some(why) = seat.state().runturns.yield_refusal(t)
    {
        return err(format!("{why}; nothing was sent to the manager"));
    }
    let res = manager_tool(seat, "turn-yield", args).await;
    if let Some(t) = &turn
        && !res.is_error
    {
        seat.state().runturns.settle(t);
    }
    res
}

async fn manager_tool(seat: &Arc<Seat>, command: &str, args: Map<String, Value>) -> ToolResult {
    match seat
        .manager
        .call(&seat.mesh, &seat.cfg, command, Value::Object(args))
        .await
    {
        Ok(data) => ok(format!("manager: {data}")),
        Err(e) => err(format!("manager: {e}")),
    }
}

async fn orientation(seat: &Arc<Seat>) -> ToolResult {
    let gate = ToolGate::from_config(&seat.cfg);
    let tools: Vec<&str> = SPECS
        .iter()
        .filter(|t| gate.allows(t.name))
        .map(|t| t.name)
        .collect();
    let roster = roster(seat).await.unwrap_or_default();
    let (auto, pull, attention, joined, status) = {
        let st = seat.state();
        let (a, p, _) = st.inbox.counts();
        (
            a,
            p,
            st.inbox.attention.as_str(),
            st.joined.iter().cloned().collect::<Vec<_>>(),
            st.presence.status.as_str(),
        )
    };
    let model = seat
        .harness()
        .and_then(|h| h.model_label())
        .map(|(m, _)| m)
        .or_else(|| seat.cfg.model.clone())
        .unwrap_or_else(|| "default".into());
    let cfg = &seat.cfg;
    ok(format!(
        "You are {name} ({id}), role {role}, in space {space}; model {model}.\n\
         Channels joined: {joined}. May subscribe: {asub}. May publish: {apub}. Capabilities: {caps}.\n\
         Status {status}, attention {attention}; unread: {auto} queued, {pull} held for cotal_inbox.\n\
         Tools: {tools}.\nRoster:\n{roster}",
        name = cfg.name,
        id = cfg.principal.dot(),
        role = cfg.role.as_deref().unwrap_or("none"),
        space = cfg.space,
        joined = if joined.is_empty() {
            "none".into()
        } else {
            joined.join(", ")
        },
        asub = if cfg.allow_subscribe.is_empty() {
            "(broker decides)".into()
        } else {
            cfg.allow_subscribe.join(", ")
        },
        apub = if cfg.allow_publish.is_empty() {
            "(broker decides)".into()
        } else {
            cfg.allow_publish.join(", ")
        },
        caps = if cfg.capabilities.is_empty() {
            "none".into()
        } else {
            cfg.capabilities.join(", ")
        },
        tools = tools.join(", "),
        roster = format_roster(&roster),
    ))
}

/// Read the presence bucket (records past their TTL are gone; older ones read offline).
pub async fn roster(seat: &Arc<Seat>) -> Result<Vec<Peer>, String> {
    use futures_util::StreamExt;
    let kv = &seat.mesh.presence;
    let mut keys = kv.keys().await.map_err(|e| format!("roster: {e}"))?;
    let mut peers = Vec::new();
    let now = now_ms();
    while let Some(k) = keys.next().await {
        let Ok(k) = k else { continue };
        let Ok(Some(raw)) = kv.get(&k).await else {
            continue;
        };
        let Ok(v) = serde_json::from_slice::<Value>(&raw) else {
            continue;
        };
        let ts = v["ts"].as_f64().unwrap_or(0.0) as u64;
        let age = now.saturating_sub(ts);
        let status = if age > crate::mesh::PRESENCE_TTL.as_millis() as u64 {
            "offline".to_string()
        } else {
            v["status"].as_str().unwrap_or("idle").to_string()
        };
        peers.push(Peer {
            id: v["card"]["id"].as_str().unwrap_or(&k).to_string(),
            name: v["card"]["name"].as_str().unwrap_or("?").to_string(),
            role: v["card"]["role"].as_str().map(str::to_string),
            status,
            age_ms: age,
        });
    }
    peers.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(peers)
}

fn format_roster(peers: &[Peer]) -> String {
    if peers.is_empty() {
        return "(nobody present)".into();
    }
    peers
        .iter()
        .map(|p| {
            format!(
                "- {} ({}){}: {}",
                p.name,
                p.id,
                p.role
                    .as_ref()
                    .map(|r| format!(" role {r}"))
                    .unwrap_or_default(),
                p.status
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn resolve(seat: &Arc<Seat>, to: &str) -> Result<Peer, String> {
    let peers = roster(seat).await?;
    if let Some(p) = Principal::parse_dot(to) {
        return Ok(peers.into_iter().find(|x| x.id == p.dot()).unwrap_or(Peer {
            id: p.dot(),
            name: to.to_string(),
            role: None,
            status: "not in roster".into(),
            age_ms: 0,
        }));
    }
    let matches: Vec<Peer> = peers
        .into_iter()
        .filter(|x| x.name.eq_ignore_ascii_case(to) && x.status != "offline")
        .collect();
    match matches.len() {
        1 => matches
            .into_iter()
            .next()
            .ok_or_else(|| "no peer".to_string()),
        0 => Err(format!(
            "no peer named {to:?} is present; use its id (owner.actor)"
        )),
        _ => Err(format!("{to:?} is ambiguous; use the id (owner.actor)")),
    }
}

fn me_msg(seat: &Seat, text: &str) -> envelope::CotalMessage {
    envelope::text_message(
        &seat.cfg.space,
        &seat.cfg.principal,
        &seat.cfg.name,
        seat.cfg.role.as_deref(),
        text,
    )
}

async fn send(seat: &Arc<Seat>, args: &Map<String, Value>) -> ToolResult {
    let text = s(args, "text").unwrap_or_default();
    let channel = match s(args, "channel") {
        Some(c) => subject::sanitize_channel(c),
        None => match seat.state().joined.iter().next().cloned() {
            Some(c) => c,
            None => return err("no channel given and none joined"),
        },
    };
    if channel.is_empty() {
        return err("empty channel");
    }
    let mut msg = me_msg(seat, text);
    msg.channel = Some(channel.clone());
    if let Some(m) = args.get("mentions").and_then(Value::as_array) {
        let names: Vec<String> = m
            .iter()
            .filter_map(Value::as_str)
            .map(|n| n.trim_start_matches('@').to_lowercase())
            .filter(|n| !n.is_empty())
            .collect();
        if !names.is_empty() {
            msg.mentions = Some(names);
        }
    }
    let subj = subject::chat(&seat.cfg.space, &seat.cfg.principal, &channel);
    match seat.mesh.publish(&subj, &msg).await {
        Ok(seq) => ok(format!("sent to #{channel}: stored seq {seq}")),
        Err(e) => err(format!("send failed: {e}")),
    }
}

async fn dm(seat: &Arc<Seat>, args: &Map<String, Value>) -> ToolResult {
    let to = s(args, "to").unwrap_or_default();
    let peer = match resolve(seat, to).await {
        Ok(p) => p,
        Err(e) => return err(e),
    };
    let Some(target) = Principal::parse_dot(&peer.id) else {
        return err(format!("peer id {:?} is not a principal", peer.id));
    };
    let mut msg = me_msg(seat, s(args, "text").unwrap_or_default());
    msg.to = Some(target.dot());
    let subj = subject::inst(&seat.cfg.space, &target, &seat.cfg.principal);
    match seat.mesh.publish(&subj, &msg).await {
        Ok(seq) => ok(format!(
            "DM to {} ({}): stored seq {seq}; recipient status at send: {}",
            peer.name, peer.id, peer.status
        )),
        Err(e) => err(format!("dm failed: {e}")),
    }
}

async fn anycast(seat: &Arc<Seat>, args: &Map<String, Value>) -> ToolResult {
    let role = subject::sanitize(s(args, "role").unwrap_or_default());
    if role.is_empty() {
        return err("empty role");
    }
    let mut msg = me_msg(seat, s(args, "text").unwrap_or_default());
    msg.to_service = Some(role.clone());
    let subj = subject::svc(&seat.cfg.space, &role, &seat.cfg.principal);
    match seat.mesh.publish(&subj, &msg).await {
        Ok(seq) => ok(format!("anycast to @{role}: stored seq {seq}")),
        Err(e) => err(format!("anycast failed: {e}")),
    }
}

fn status(seat: &Arc<Seat>, args: &Map<String, Value>) -> ToolResult {
    let now = now_ms();
    let mut changed = Vec::new();
    {
        let mut st = seat.state();
        if let Some(v) = s(args, "status").and_then(Status::parse) {
            st.presence.set_status(v, now);
            changed.push(format!("status {}", v.as_str()));
        }
        if let Some(a) = s(args, "attention").and_then(Attention::parse) {
            st.inbox.attention = a;
            st.presence.attention = a;
            changed.push(format!("attention {}", a.as_str()));
        }
        if let Some(act) = args.get("activity").and_then(Value::as_str) {
            let act = if act.is_empty() {
                None
            } else {
                Some(act.to_string())
            };
            st.presence.set_activity(act, now);
            changed.push("activity".into());
        }
    }
    seat.touch_presence();
    seat.kick();
    if changed.is_empty() {
        ok("nothing changed")
    } else {
        ok(format!("set {}", changed.join(", ")))
    }
}

async fn registry(seat: &Arc<Seat>) -> Vec<(String, Value)> {
    use futures_util::StreamExt;
    let mut out = Vec::new();
    if let Ok(mut keys) = seat.mesh.channels.keys().await {
        while let Some(Ok(k)) = keys.next().await {
            let v = match seat.mesh.channels.get(&k).await {
                Ok(Some(raw)) => serde_json::from_slice(&raw).unwrap_or(Value::Null),
                _ => Value::Null,
            };
            out.push((k, v));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

async fn channels(seat: &Arc<Seat>) -> ToolResult {
    let reg = registry(seat).await;
    let st_view = {
        let st = seat.state();
        (st.joined.clone(), st.inbox.modes.clone())
    };
    let mut names: std::collections::BTreeSet<String> =
        reg.iter().map(|(k, _)| k.clone()).collect();
    names.extend(st_view.0.iter().cloned());
    let lines: Vec<String> = names
        .iter()
        .map(|n| {
            let joined = if st_view.0.contains(n) {
                " (joined)"
            } else {
                ""
            };
            let mode = match st_view.1.get(n) {
                Some(ChannelMode::Quiet) => " quiet",
                Some(ChannelMode::Muted) => " muted",
                _ => "",
            };
            format!("#{n}{joined}{mode}")
        })
        .collect();
    ok(if lines.is_empty() {
        "no channels".into()
    } else {
        lines.join("\n")
    })
}

async fn channel_info(seat: &Arc<Seat>, channel: &str) -> ToolResult {
    let ch = subject::sanitize_channel(channel);
    let entry = match seat.mesh.channels.get(&ch).await {
        Ok(Some(raw)) => serde_json::from_slice::<Value>(&raw).unwrap_or(Value::Null),
        _ => Value::Null,
    };
    let (joined, mode) = {
        let st = seat.state();
        (st.joined.contains(&ch), st.inbox.mode(&ch))
    };
    let class = entry
        .get("deliveryClass")
        .and_then(Value::as_str)
        .unwrap_or("durable");
    ok(format!(
        "#{ch}: delivery {class}; joined: {joined}; mode: {}; registry: {}",
        match mode {
            ChannelMode::Normal => "normal",
            ChannelMode::Quiet => "quiet",
            ChannelMode::Muted => "muted",
        },
        entry
    ))
}

/// The built-in documentation pages.
const DOCS: &[(&str, &str)] = &[
    (
        "overview",
        "Cotal connects agents as lateral peers in a shared space. Channels are multicast (#name), DMs reach one peer, anycast reaches any one peer holding a role. Peers see only what you send with the cotal_* tools.",
    ),
    (
        "delivery",
        "DMs and anycast are at least once: they are acknowledged only after the turn that carried them succeeded. Channel delivery is live (at most once) or durable (backstopped per member). Send results report the stored sequence, never delivery.",
    ),
    (
        "attention",
        "Attention open: everything wakes you. dnd: untagged channel chatter waits for your next turn. focus: only DMs and anycast enter your context; @mentions wake you to call cotal_inbox. A quiet channel is pull-only (mentions still wake you); a muted channel is dropped, mentions included.",
    ),
    (
        "tools",
        "cotal_send, cotal_dm, cotal_anycast talk; cotal_inbox pulls held messages (peek keeps them); cotal_status sets status, attention and activity; cotal_channel_mode sets quiet or muted; cotal_join/cotal_leave change channels; cotal_roster lists peers; cotal_spawn, cotal_despawn, cotal_persona(s), cotal_yield and cotal_run ask the manager.",
    ),
    (
        "events",
        "This seat publishes its runs as AG-UI frames on events.<owner>.<actor>: run boundaries, assistant text, reasoning and tool starts and ends. Prompts, tool arguments and results are not published.",
    ),
];

fn docs(page: Option<&str>, query: Option<&str>) -> ToolResult {
    if let Some(p) = page {
        return match DOCS.iter().find(|(n, _)| *n == p) {
            Some((n, t)) => ok(format!("# {n}\n{t}")),
            None => err(format!(
                "no page {p:?}; pages: {}",
                DOCS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            )),
        };
    }
    if let Some(q) = query {
        let q = q.to_lowercase();
        let hits: Vec<String> = DOCS
            .iter()
            .filter(|(n, t)| n.contains(&q) || t.to_lowercase().contains(&q))
            .map(|(n, t)| format!("# {n}\n{t}"))
            .collect();
        return ok(if hits.is_empty() {
            format!("nothing matches {q:?}")
        } else {
            hits.join("\n\n")
        });
    }
    ok(format!(
        "Pages: {}. Call cotal_docs with page or query.",
        DOCS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    ))
}
