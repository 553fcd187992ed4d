//! The gateway account (`~/.jucode/auth.json`, `{"gateway":{"url":…,"token":…}}`) and its
//! charges lookup over HTTP. The token is sent as a bearer token and never logged.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jucode_hub::{Billing, Charge, ChargesFuture};
use serde::Deserialize;

/// A lookup may not hold a usage reply up longer than this.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The signed-in gateway account.
#[derive(Clone, Deserialize)]
pub struct GatewayAccount {
    pub url: String,
    pub token: String,
}

impl std::fmt::Debug for GatewayAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayAccount")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct AuthFile {
    gateway: Option<GatewayAccount>,
}

/// Reads the account from `<home>/auth.json`: a missing file or `gateway` key means none; a
/// file that cannot be read or parsed is logged (without its contents) and means none.
pub fn load_account(home: &Path) -> Option<GatewayAccount> {
    let path = home.join("auth.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!("{}: {e}; no gateway account", path.display());
            return None;
        }
    };
    match serde_json::from_str::<AuthFile>(&text) {
        Ok(file) => file.gateway,
        Err(e) => {
            tracing::warn!(
                "{}: not a valid auth file (line {}); no gateway account",
                path.display(),
                e.line()
            );
            None
        }
    }
}

#[derive(Deserialize)]
struct ChargesReply {
    charges: Vec<ChargeRow>,
}

#[derive(Deserialize)]
struct ChargeRow {
    turn_id: String,
    status: ChargeStatus,
    #[serde(default)]
    points: Option<f64>,
    #[serde(default = "one")]
    requests: u64,
}

fn one() -> u64 {
    1
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
enum ChargeStatus {
    Settled,
    Pending,
}

/// The account's `POST /v1/oauth/agent-usage/charges`.
pub struct GatewayBilling {
    http: reqwest::Client,
    endpoint: String,
    token: String,
}

impl GatewayBilling {
    pub fn new(account: GatewayAccount) -> Result<Arc<GatewayBilling>, String> {
        // reqwest is built without a crypto provider; ring is the workspace's. A second
        // install is refused harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(GatewayBilling {
            http,
            endpoint: format!(
                "{}/v1/oauth/agent-usage/charges",
                account.url.trim_end_matches('/')
            ),
            token: account.token,
        }))
    }
}

impl Billing for GatewayBilling {
    fn charges(&self, turn_ids: Vec<String>) -> ChargesFuture {
        let request = self
            .http
            .post(&self.endpoint)
            .bearer_auth(&self.token)
            .json(&serde_json::json!({ "turn_ids": turn_ids }));
        Box::pin(async move {
            let response = request.send().await.map_err(|e| {
                if e.is_timeout() {
                    "the gateway did not answer in time".to_string()
                } else {
                    format!("the gateway could not be reached ({})", without_url(&e))
                }
            })?;
            let status = response.status();
            if !status.is_success() {
                return Err(format!("the gateway answered {status}"));
            }
            let reply: ChargesReply = response.json().await.map_err(|e| {
                format!(
                    "the gateway's answer is not a charges list ({})",
                    without_url(&e)
                )
            })?;
            Ok(reply
                .charges
                .into_iter()
                .map(|c| Charge {
                    turn_id: c.turn_id,
                    points: if c.status == ChargeStatus::Settled {
                        Some(c.points.unwrap_or(0.0))
                    } else {
                        None
                    },
                    requests: c.requests,
                })
                .collect())
        })
    }
}

fn without_url(e: &reqwest::Error) -> String {
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut last = e.to_string();
    while let Some(s) = source {
        last = s.to_string();
        source = s.source();
    }
    last
}
