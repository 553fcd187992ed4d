//! The daemon's agent endpoint as this server calls it: one HTTP/1.1 request per connection
//! to a loopback address, the capability as a bearer credential.

use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use crate::{Config, Error};

/// The largest answer read from the daemon.
const ANSWER_MAX: usize = 16 * 1024 * 1024;

/// How long connecting to the daemon may take (it is on this machine: a stall means trouble).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One tool as the daemon lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolListing {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// A tool call's outcome: its result, or the error text the model is shown.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolAnswer {
    Ok(Value),
    Failed(String),
}

/// The daemon's agent endpoint.
#[derive(Debug)]
pub struct Daemon {
    addr: SocketAddr,
    /// The `Host` header: the URL's authority.
    host: String,
    capability: String,
}

/// The address of `http://<ip>:<port>` (`localhost` allowed), or `None`.
fn parse_url(url: &str) -> Option<(SocketAddr, String)> {
    let authority = url.strip_prefix("http://")?.trim_end_matches('/');
    if authority.contains('/') || authority.contains('@') {
        return None;
    }
    let addr = match authority.strip_prefix("localhost:") {
        Some(port) => SocketAddr::from(([127, 0, 0, 1], port.parse::<u16>().ok()?)),
        None => authority.parse().ok()?,
    };
    Some((addr, authority.to_string()))
}

impl Daemon {
    /// Checks the URL names an address on this machine's loopback (or one the daemon bound).
    pub fn new(config: Config) -> Result<Daemon, Error> {
        let (addr, host) = parse_url(&config.url).ok_or(Error::BadUrl(config.url.clone()))?;
        Ok(Daemon {
            addr,
            host,
            capability: config.capability,
        })
    }

    /// The session's tools.
    pub async fn tools(&self) -> Result<Vec<ToolListing>, Error> {
        let answer = self.post("/api/agent/tools", json!({})).await?;
        let tools = answer
            .get("tools")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::BadAnswer("no tools list".into()))?;
        tools
            .iter()
            .map(|t| {
                let name = t["name"]
                    .as_str()
                    .ok_or_else(|| Error::BadAnswer("a tool without a name".into()))?;
                Ok(ToolListing {
                    name: name.to_string(),
                    description: t["description"].as_str().unwrap_or("").to_string(),
                    input_schema: t["input_schema"].clone(),
                })
            })
            .collect()
    }

    /// Runs tool `name` with `arguments` (a JSON object).
    pub async fn call(&self, name: &str, arguments: Value) -> Result<ToolAnswer, Error> {
        let answer = self
            .post(
                "/api/agent/call",
                json!({"name": name, "arguments": arguments}),
            )
            .await?;
        match answer.get("ok").and_then(Value::as_bool) {
            Some(true) => Ok(ToolAnswer::Ok(answer["result"].clone())),
            Some(false) => Ok(ToolAnswer::Failed(
                answer["error"]
                    .as_str()
                    .unwrap_or("the tool failed")
                    .to_string(),
            )),
            None => Err(Error::BadAnswer("no ok field".into())),
        }
    }

    /// POSTs `body` to `path`; a non-200 answer is its `error` text.
    async fn post(&self, path: &str, body: Value) -> Result<Value, Error> {
        let unreachable =
            |e: &dyn std::fmt::Display| Error::Unreachable(format!("{}: {e}", self.host));
        let stream =
            tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(self.addr))
                .await
                .map_err(|_| unreachable(&"timed out"))?
                .map_err(|e| unreachable(&e))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| unreachable(&e))?;
        tokio::spawn(async move {
            // Ends with the one request; its error shows in the request's result.
            let _ = conn.await;
        });
        let request = Request::post(path)
            .header(header::HOST, &self.host)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.capability))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| Error::Unreachable(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| unreachable(&e))?;
        let status = response.status();
        let bytes = Limited::new(response.into_body(), ANSWER_MAX)
            .collect()
            .await
            .map_err(|e| unreachable(&e))?
            .to_bytes();
        let answer: Value = serde_json::from_slice(&bytes)
            .map_err(|e| Error::BadAnswer(format!("{status}: {e}")))?;
        if status != StatusCode::OK {
            let text = answer["error"].as_str().unwrap_or("no reason given");
            return Err(Error::Refused(format!("{text} ({status})")));
        }
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_an_address_and_port() {
        let (addr, host) = parse_url("http://127.0.0.1:7788").unwrap_or_else(|| panic!("parsed"));
        assert_eq!(addr, SocketAddr::from(([127, 0, 0, 1], 7788)));
        assert_eq!(host, "127.0.0.1:7788");
        assert!(parse_url("http://[::1]:7788/").is_some());
        assert!(parse_url("http://localhost:7788").is_some());
        assert!(parse_url("https://127.0.0.1:7788").is_none());
        assert!(parse_url("http://127.0.0.1").is_none());
        assert!(parse_url("http://example.com:80").is_none());
        assert!(parse_url("http://u@127.0.0.1:1").is_none());
        assert!(parse_url("http://127.0.0.1:1/api").is_none());
    }
}
