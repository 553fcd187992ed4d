//! The endpoint the agent tools' MCP server (`jucode-daemon agent-mcp`) calls for a Claude
//! Code or Codex agent session: internal to the daemon, not part of the client protocol.
//!
//! - `POST /api/agent/tools` → `{"tools": [{name, description, input_schema}]}`;
//! - `POST /api/agent/call` with `{"name", "arguments"}` → `{"ok": true, "result": …}`, or
//!   `{"ok": false, "error": "…"}` when the tool failed (the model is shown the text).
//!
//! Both take `Authorization: Bearer <capability>` (the session's, never the daemon token) and
//! answer only connections from this machine. Refusals are JSON `{"error": "…"}` with 401
//! (unknown or revoked capability), 403 (not from this machine), 400, 404, 405 or 413. The
//! capability is never logged.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header;
use hyper::{Method, Request, Response, StatusCode};
use jucode_hub::AgentToolError;
use serde_json::{Value, json};

use crate::Shared;
use crate::http::{Body, Ends, json_response};

/// Every path of this endpoint starts so.
pub(crate) const PREFIX: &str = "/api/agent/";

/// The largest request body read: a tool's arguments (a report, a brief) fit well within.
pub(crate) const BODY_MAX: usize = 1024 * 1024;

/// The URL an MCP server on this machine reaches a listener bound to `addr` at: an unspecified
/// address (all interfaces) is reached on loopback.
pub(crate) fn url_for(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}", SocketAddr::new(ip, addr.port()))
}

/// Whether the connection comes from this machine: loopback, or the very address it reached
/// (a daemon listening on one LAN address is called on that address).
fn from_this_machine(ends: Ends) -> bool {
    let peer = ends.peer.ip().to_canonical();
    peer.is_loopback() || peer == ends.local.ip().to_canonical()
}

fn refuse(status: StatusCode, message: &str) -> Response<Body> {
    json_response(status, json!({ "error": message }))
}

/// The bearer credential of `req`, if it has one.
fn bearer(req: &Request<Incoming>) -> Option<String> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, credential) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| credential.trim().to_string())
}

pub(crate) async fn route(req: Request<Incoming>, shared: &Shared, ends: Ends) -> Response<Body> {
    if !from_this_machine(ends) {
        return refuse(
            StatusCode::FORBIDDEN,
            "the agent endpoint answers only this machine",
        );
    }
    let call = match req.uri().path() {
        "/api/agent/tools" => false,
        "/api/agent/call" => true,
        _ => return refuse(StatusCode::NOT_FOUND, "no such agent endpoint"),
    };
    if req.method() != Method::POST {
        return refuse(StatusCode::METHOD_NOT_ALLOWED, "use POST");
    }
    let Some(capability) = bearer(&req) else {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "an agent capability is needed (Authorization: Bearer)",
        );
    };
    let body = match Limited::new(req.into_body(), BODY_MAX).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the body is larger than {BODY_MAX} bytes"),
            );
        }
    };
    if !call {
        return match shared.hub.agent_tool_defs(&capability) {
            Ok(defs) => {
                let tools: Vec<Value> = defs
                    .into_iter()
                    .map(|d| {
                        json!({"name": d.name, "description": d.description,
                               "input_schema": d.parameters})
                    })
                    .collect();
                json_response(StatusCode::OK, json!({ "tools": tools }))
            }
            Err(e) => refuse(StatusCode::UNAUTHORIZED, &e.to_string()),
        };
    }
    #[derive(serde::Deserialize)]
    struct Call {
        name: String,
        #[serde(default)]
        arguments: Option<serde_json::Map<String, Value>>,
    }
    let request = match serde_json::from_slice::<Call>(&body) {
        Ok(request) => request,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                &format!("expected JSON {{\"name\", \"arguments\"}}: {e}"),
            );
        }
    };
    let args = Value::Object(request.arguments.unwrap_or_default());
    match shared
        .hub
        .agent_tool_call(&capability, &request.name, args)
        .await
    {
        Ok(result) => json_response(StatusCode::OK, json!({"ok": true, "result": result})),
        Err(e @ AgentToolError::Refused) => refuse(StatusCode::UNAUTHORIZED, &e.to_string()),
        Err(AgentToolError::Tool(error)) => {
            json_response(StatusCode::OK, json!({"ok": false, "error": error}))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    #[test]
    fn all_interfaces_are_reached_on_loopback() {
        assert_eq!(url_for(addr("0.0.0.0:7788")), "http://127.0.0.1:7788");
        assert_eq!(url_for(addr("[::]:7788")), "http://[::1]:7788");
        assert_eq!(url_for(addr("127.0.0.1:9")), "http://127.0.0.1:9");
        assert_eq!(url_for(addr("192.168.1.4:9")), "http://192.168.1.4:9");
    }

    #[test]
    fn only_this_machine_is_answered() {
        let ends = |peer: &str, local: &str| Ends {
            peer: addr(peer),
            local: addr(local),
        };
        assert!(from_this_machine(ends("127.0.0.1:5000", "127.0.0.1:7788")));
        assert!(from_this_machine(ends("[::1]:5000", "[::1]:7788")));
        assert!(from_this_machine(ends(
            "[::ffff:127.0.0.1]:5000",
            "[::]:7788"
        )));
        assert!(from_this_machine(ends(
            "192.168.1.4:5000",
            "192.168.1.4:7788"
        )));
        assert!(!from_this_machine(ends(
            "192.168.1.9:5000",
            "192.168.1.4:7788"
        )));
    }
}
