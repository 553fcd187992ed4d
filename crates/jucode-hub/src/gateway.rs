//! `gateway_catalog` and `set_gateway`. The catalog's `models` are config.json's
//! `jucode_models`; its `groups` come from the host's [`Gateway`] (the server reads them from
//! the JuCode API with the login's token), answered by request id from a spawned task. A
//! session's gateway flag lives with the session (`sessions/gateway.rs`).

use std::future::Future;
use std::pin::Pin;

use jucode_protocol::daemon::{DaemonEvent, GatewayGroup, GatewayOp, Reply};
use serde_json::Value;

use crate::cx::OpCx;
use crate::error::OpError;
use crate::to_value;

/// The gateway's groups, or why they could not be read.
pub type GroupsFuture = Pin<Box<dyn Future<Output = Result<Vec<GatewayGroup>, String>> + Send>>;

/// The signed-in JuCode account's gateway, as the host reaches it.
pub trait Gateway: Send + Sync {
    fn groups(&self) -> GroupsFuture;
}

pub(crate) fn handle(cx: &OpCx<'_>, op: GatewayOp) -> Result<(), OpError> {
    match op {
        GatewayOp::GatewayCatalog => {
            let hub = cx.hub.clone();
            let client = cx.client;
            let id = cx.id.clone();
            let gateway = hub.config.online.gateway.clone();
            let config = hub.config.home.join("config.json");
            tokio::spawn(async move {
                // Not signed in: nothing to offer. Offline: the user's own models, no groups.
                let (models, groups) = match gateway {
                    None => (Vec::new(), Vec::new()),
                    Some(gateway) => {
                        let models = tokio::task::spawn_blocking(move || jucode_models(&config))
                            .await
                            .unwrap_or_default();
                        let groups = gateway.groups().await.unwrap_or_else(|e| {
                            tracing::warn!("gateway_catalog: {e}");
                            Vec::new()
                        });
                        (models, groups)
                    }
                };
                let reply = Reply::to(id, DaemonEvent::GatewayCatalog { models, groups });
                hub.lock().clients.send(client, &to_value(&reply));
            });
            Ok(())
        }
        GatewayOp::SetGateway {
            session,
            gateway,
            model,
        } => Ok(crate::sessions::gateway::set(cx, session, gateway, model)?),
    }
}

/// `jucode_models` of config.json as written there; nothing when the file or key is missing
/// or not a list.
fn jucode_models(path: &std::path::Path) -> Vec<Value> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(mut config)) => match config.remove("jucode_models") {
            Some(Value::Array(models)) => models,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}
