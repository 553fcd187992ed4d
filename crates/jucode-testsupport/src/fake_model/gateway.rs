//! [`FakeModel::gateway`](super::FakeModel::gateway): the scripted model server behind the paths
//! of the JuCode API's gateway, for the tests that run the real CLIs through it.
//!
//! - `GET /v1/gateway/groups` → `{"groups": …}` as the test gave them;
//! - `/v1/gateway/anthropic/<rest>` → the Anthropic side of the script at `/<rest>` (Claude Code
//!   posts `/v1/gateway/anthropic/v1/messages`); the key is taken from `x-api-key` or
//!   `Authorization: Bearer`;
//! - `/v1/gateway/openai/<rest>` → the Responses side at `/<rest>`; Bearer only, as OpenAI's
//!   API takes it.
//!
//! A gateway request without the gateway key is refused `401` with a JSON error before the
//! script sees it; anything outside `/v1/gateway/` is `404`. Every request is kept with the
//! credentials it carried ([`GatewayRequest`]), so a test can tell which key went where.

use hyper::header::HeaderMap;
use hyper::{Method, StatusCode};
use serde_json::{Value, json};

use super::{Reply, cli};

/// One request the fake gateway received.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayRequest {
    pub method: String,
    /// The path as sent (gateway prefix included).
    pub path: String,
    /// The `x-api-key` header, if any.
    pub api_key: Option<String>,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// Whether it carried the gateway key where its API takes one (and so was served).
    pub admitted: bool,
}

/// What the gateway serves: its key and catalog.
pub(super) struct Gate {
    pub(super) key: String,
    pub(super) groups: Value,
}

/// What to do with a request.
pub(super) enum Admit {
    /// Answered here (the catalog, a refusal, an unknown path).
    Answered(Reply),
    /// Handed to the script at this route.
    Model(String),
}

impl Gate {
    /// Checks `route` and its credentials; `record` gets the request as it arrived.
    pub(super) fn admit(
        &self,
        method: &Method,
        route: &str,
        headers: &HeaderMap,
        record: &mut GatewayRequest,
    ) -> Admit {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        record.api_key = header("x-api-key");
        record.authorization = header("authorization");
        let bearer = record.authorization.as_deref() == Some(&format!("Bearer {}", self.key));
        let api_key = record.api_key.as_deref() == Some(self.key.as_str());
        let (inner, admitted) = if route == "/v1/gateway/groups" {
            (None, bearer)
        } else if let Some(rest) = route.strip_prefix("/v1/gateway/anthropic/") {
            (Some(format!("/{rest}")), bearer || api_key)
        } else if let Some(rest) = route.strip_prefix("/v1/gateway/openai/") {
            (Some(format!("/{rest}")), bearer)
        } else {
            let error = json!({"error": {"type": "not_found", "message": "no such route"}});
            return Admit::Answered(cli::json_response(StatusCode::NOT_FOUND, &error));
        };
        record.admitted = admitted;
        if !admitted {
            let error = json!({"type": "error", "error": {"type": "authentication_error",
                                "message": "missing or wrong JuCode gateway key"}});
            return Admit::Answered(cli::json_response(StatusCode::UNAUTHORIZED, &error));
        }
        match inner {
            Some(inner) => Admit::Model(inner),
            None if method == Method::GET => Admit::Answered(cli::json_response(
                StatusCode::OK,
                &json!({"groups": self.groups}),
            )),
            None => Admit::Answered(cli::json_response(
                StatusCode::METHOD_NOT_ALLOWED,
                &json!({"error": {"message": "GET only"}}),
            )),
        }
    }
}
