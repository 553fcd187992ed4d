//! The JuCode gateway as the daemon's host reaches it: the groups `gateway_catalog` lists
//! (`GET <api>/v1/gateway/groups` with the login's bearer token) and the endpoint Claude Code
//! and Codex gateway sessions get. The JuCode API base URL is config.json's `jucode_api_url`,
//! else the login's own `url`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jucode_hub::{Gateway, GroupsFuture};
use jucode_protocol::daemon::GatewayGroup;
use serde::Deserialize;

use crate::billing::GatewayAccount;

/// A catalog read may not hold its reply longer than this.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The JuCode API base URL: `jucode_api_url` in `<home>/config.json`, else the account's.
pub fn api_url(home: &Path, account: &GatewayAccount) -> String {
    #[derive(Deserialize)]
    struct Keys {
        jucode_api_url: Option<String>,
    }
    std::fs::read_to_string(home.join("config.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<Keys>(&text).ok())
        .and_then(|k| k.jucode_api_url)
        .unwrap_or_else(|| account.url.clone())
}

/// The endpoint gateway sessions' engines get.
pub fn endpoint(
    home: &Path,
    account: &GatewayAccount,
) -> jucode_adapters::gateway::GatewayEndpoint {
    jucode_adapters::gateway::GatewayEndpoint {
        api_url: api_url(home, account),
        key: account.token.clone(),
    }
}

#[derive(Deserialize)]
struct GroupsReply {
    groups: Vec<GatewayGroup>,
}

/// `GET <api>/v1/gateway/groups`.
pub struct GatewayGroups {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl GatewayGroups {
    pub fn new(home: &Path, account: &GatewayAccount) -> Result<Arc<GatewayGroups>, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(GatewayGroups {
            http,
            url: format!(
                "{}/v1/gateway/groups",
                api_url(home, account).trim_end_matches('/')
            ),
            token: account.token.clone(),
        }))
    }
}

impl Gateway for GatewayGroups {
    fn groups(&self) -> GroupsFuture {
        let request = self.http.get(&self.url).bearer_auth(&self.token);
        Box::pin(async move {
            let response = request.send().await.map_err(|e| {
                format!(
                    "the gateway could not be reached ({})",
                    crate::skills::reason(&e)
                )
            })?;
            if !response.status().is_success() {
                return Err(format!("the gateway answered {}", response.status()));
            }
            let reply: GroupsReply = response.json().await.map_err(|e| {
                format!(
                    "the gateway's answer is not a groups list ({})",
                    crate::skills::reason(&e)
                )
            })?;
            Ok(reply.groups)
        })
    }
}
