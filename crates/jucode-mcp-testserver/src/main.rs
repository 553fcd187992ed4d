//! jucode-mcp-echo: a tiny MCP server for tests (not shipped).
//!
//! Tools: `echo {text}` returns the text; `add {a, b}` returns the sum; `fail {}` returns an
//! error result; with `--ask`, also `ask {question}`, which asks the user through MCP
//! elicitation (a form with one required `answer` field, as an `input_required` result) and
//! returns `answered: <answer>`, `declined` or `cancelled`. Over stdio by default; `--http 127.0.0.1:0` serves streamable HTTP on `/mcp`
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
use rmcp::ErrorData;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::{InputResponses, RequestState};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, ElicitRequest, ElicitRequestParams,
    ElicitationSchema, InputRequest, InputRequests, InputRequiredResult, ServerCapabilities,
    ServerConfig,
};
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

/// The `requestState` of `ask`'s second round.
const ASK_STATE: &str = "ask-answered";

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct AskArgs {
    /// The question to put to the user.
    question: String,
}

#[derive(Debug, Clone)]
struct Echo {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Echo {
    fn new(with_ask: bool) -> Self {
        let mut tool_router = Self::tool_router();
        if !with_ask {
            tool_router.remove_route("ask");
        }
        Self { tool_router }
    }

    #[tool(description = "Returns the text it is given")]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(description = "Adds two numbers")]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        (a + b).to_string()
    }

    /// Clients on MCP 2026-07-28 take no server-to-client requests: the question goes back as
    /// an `input_required` result and the client calls again with the answer.
    #[tool(description = "Asks the user a question and returns the answer")]
    async fn ask(
        &self,
        Parameters(AskArgs { question }): Parameters<AskArgs>,
        RequestState(state): RequestState,
        InputResponses(responses): InputResponses,
    ) -> Result<CallToolResponse, ErrorData> {
        if state.as_deref() != Some(ASK_STATE) {
            let schema = serde_json::json!({
                "type": "object",
                "properties": {"answer": {"type": "string", "title": "Answer"}},
                "required": ["answer"],
            });
            let schema = serde_json::from_value::<ElicitationSchema>(schema)
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            let mut requests = InputRequests::new();
            requests.insert(
                "answer".to_string(),
                InputRequest::Elicitation(ElicitRequest::new(
                    ElicitRequestParams::FormElicitationParams {
                        meta: None,
                        message: question,
                        requested_schema: schema,
                    },
                )),
            );
            return Ok(InputRequiredResult::new(Some(requests), Some(ASK_STATE.into())).into());
        }
        let response = responses
            .as_ref()
            .and_then(|r| r.get("answer"))
            .cloned()
            .unwrap_or_default();
        let text = match response["action"].as_str() {
            Some("accept") => format!(
                "answered: {}",
                response["content"]["answer"].as_str().unwrap_or("")
            ),
            Some("decline") => "declined".into(),
            Some("cancel") => "cancelled".into(),
            _ => format!("no answer: {response}"),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
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
    let with_ask = args.iter().any(|a| a == "--ask");
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
            serve_http(addr, Arc::new(required), with_ask).await
        }
        None => {
            let service = Echo::new(with_ask).serve(rmcp::transport::stdio()).await?;
            service.waiting().await?;
            Ok(())
        }
    }
}

async fn serve_http(
    addr: &str,
    required: Arc<Vec<(String, String)>>,
    with_ask: bool,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    let service = Arc::new(StreamableHttpService::new(
        move || Ok(Echo::new(with_ask)),
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
