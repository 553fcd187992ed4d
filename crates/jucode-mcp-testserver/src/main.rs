//! jucode-mcp-echo: a tiny MCP server for tests (not shipped).
//!
//! Tools: `echo {text}` returns the text; `add {a, b}` returns the sum; `fail {}` returns an
//! error result. Over stdio by default; `--http 127.0.0.1:0` serves streamable HTTP on `/mcp`
//! and prints its URL (`http://127.0.0.1:<port>/mcp`) as one stdout line once listening. `--exit-at-start` exits with a message
//! on stderr before speaking, to play a broken server. `--require-header NAME=VALUE`
//! (repeatable, HTTP only) answers 401 to requests without that header.

use std::convert::Infallible;
use std::sync::Arc;

use anyhow::Context;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::Service;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};
use tokio::io::AsyncWriteExt;

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    text: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    a: f64,
    b: f64,
}

#[derive(Debug, Clone)]
struct Echo {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Echo {
    fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Returns the text it is given")]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(description = "Adds two numbers")]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        (a + b).to_string()
    }

    #[tool(description = "Always reports an error")]
    fn fail(&self) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text("this tool always fails")])
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--exit-at-start") {
        eprintln!("jucode-mcp-echo: refusing to start (--exit-at-start)");
        std::process::exit(3);
    }
    match args.iter().position(|a| a == "--http") {
        Some(i) => {
            let addr = args.get(i + 1).context("--http needs an address")?;
            let mut required = Vec::new();
            for (j, arg) in args.iter().enumerate() {
                if arg == "--require-header" {
                    let spec = args
                        .get(j + 1)
                        .context("--require-header needs NAME=VALUE")?;
                    let (name, value) = spec.split_once('=').context("expected NAME=VALUE")?;
                    required.push((name.to_ascii_lowercase(), value.to_string()));
                }
            }
            serve_http(addr, Arc::new(required)).await
        }
        None => {
            let service = Echo::new().serve(rmcp::transport::stdio()).await?;
            service.waiting().await?;
            Ok(())
        }
    }
}

async fn serve_http(addr: &str, required: Arc<Vec<(String, String)>>) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    let service = Arc::new(StreamableHttpService::new(
        || Ok(Echo::new()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    ));
    let mut stdout = tokio::io::stdout();
    stdout
        .write_all(format!("http://{local}/mcp\n").as_bytes())
        .await?;
    stdout.flush().await?;
    loop {
        let (stream, _) = listener.accept().await?;
        let mcp = TowerToHyperService::new((*service).clone());
        let required = required.clone();
        let checked = hyper::service::service_fn(move |req: Request<Incoming>| {
            let present = required.iter().all(|(name, value)| {
                req.headers()
                    .get(name.as_str())
                    .and_then(|v| v.to_str().ok())
                    == Some(value.as_str())
            });
            let call = present.then(|| mcp.call(req));
            async move {
                match call {
                    Some(call) => call.await,
                    None => {
                        let body = Full::new(Bytes::from_static(b"missing required header"));
                        let mut response = Response::new(body.boxed());
                        *response.status_mut() = StatusCode::UNAUTHORIZED;
                        Ok::<_, Infallible>(response)
                    }
                }
            }
        });
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), checked)
                .await;
        });
    }
}
