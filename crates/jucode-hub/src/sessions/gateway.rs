//! A session's `jucode_gateway` flag: read from `session_create`/`session_open` options (kept
//! as the session last ran when omitted), saved in `sessions.jsonl`, shown in `session_list`,
//! and moved by `set_gateway`. The endpoint and key never pass through the hub: an engine that
//! takes the gateway reads them from its own host configuration.

use jucode_protocol::Object;
use jucode_protocol::daemon::DaemonEvent;
use serde_json::{Value, json};

use super::{Record, SessionError};
use crate::cx::OpCx;
use crate::{Hub, Inner};

/// Refuses `jucode_gateway` that is not a boolean, or `true` for an engine that cannot run
/// through the gateway, before anything is recorded.
pub(super) fn check_option(
    takes: bool,
    engine: &str,
    options: &Object,
) -> Result<(), SessionError> {
    match options.get("jucode_gateway") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(()),
        Some(Value::Bool(true)) if takes => Ok(()),
        Some(Value::Bool(true)) => Err(SessionError::GatewayEngine(engine.to_string())),
        Some(_) => Err(SessionError::GatewayNotBool),
    }
}

impl Hub {
    /// Before an engine starts: records a flag the options give, or puts the saved one back
    /// into them. Refused for an engine that cannot run through the gateway.
    pub(super) fn apply_gateway_flag(
        &self,
        inner: &mut Inner,
        session: &str,
        takes: bool,
        options: &mut Object,
    ) -> Result<(), SessionError> {
        let engine = inner.sessions.get(session)?.engine.clone();
        match options.get("jucode_gateway") {
            None | Some(Value::Null) => {
                if inner.sessions.get(session)?.gateway && takes {
                    options.insert("jucode_gateway".into(), Value::Bool(true));
                }
                Ok(())
            }
            Some(Value::Bool(on)) => {
                let on = *on;
                if on && !takes {
                    return Err(SessionError::GatewayEngine(engine));
                }
                self.save_gateway(inner, session, on)
            }
            Some(_) => Err(SessionError::GatewayNotBool),
        }
    }

    fn save_gateway(&self, inner: &mut Inner, session: &str, on: bool) -> Result<(), SessionError> {
        if inner.sessions.get(session)?.gateway == on {
            return Ok(());
        }
        inner.sessions.append(&Record::Gateway {
            session: session.to_string(),
            gateway: on,
            at: self.config.clock.now_ms(),
        })?;
        inner.sessions.get_mut(session)?.gateway = on;
        Ok(())
    }
}

/// `set_gateway`: saves the flag, tells a running engine (it restarts once its turn ends and
/// resumes the conversation), answers `gateway_set` and sends the list again.
pub(crate) fn set(
    cx: &OpCx<'_>,
    session: String,
    gateway: bool,
    model: Option<String>,
) -> Result<(), SessionError> {
    let hub = cx.hub;
    let mut inner = hub.lock();
    let engine = inner.sessions.get(&session)?.engine.clone();
    if !hub.engine_factory(&engine)?.takes_gateway() {
        return Err(SessionError::GatewayEngine(engine));
    }
    // The host hands the hub a gateway only with a JuCode login.
    if gateway && hub.config.online.gateway.is_none() {
        return Err(SessionError::GatewayNoLogin);
    }
    hub.save_gateway(&mut inner, &session, gateway)?;
    let s = inner.sessions.get(&session)?;
    let mut op = json!({"op": "set_gateway", "gateway": gateway});
    if let Some(model) = model {
        op["model"] = Value::String(model);
    }
    if let Value::Object(op) = op {
        s.send(op);
    }
    cx.reply_locked(&mut inner, DaemonEvent::GatewaySet { session, gateway });
    inner.broadcast_sessions();
    Ok(())
}
