//! A minimal daemon client: connect with the token, list the sessions, watch one and print its
//! events as JSON lines on stdout (progress goes to stderr).
//!
//! ```text
//! cargo run -p jucode-examples --example client -- \
//!     --url ws://127.0.0.1:7788 --token-file ~/.jucode/daemon/token --events 20 --timeout 30
//! ```
//!
//! It watches `--session`, else the first listed session; with `--create DIR` it creates a
//! session in DIR when none is listed, and `--say TEXT` sends TEXT as a user message once it
//! watches (`--until-ready` then stops at the end of that turn). It exits 0 after `--events`
//! session events, and 1 on a refusal, an error reply or when `--timeout` seconds pass first.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{WebSocketStream, client_async};

#[derive(Parser)]
#[command(about = "Watch one session of a running jucode daemon and print its events")]
struct Args {
    /// The daemon's WebSocket address.
    #[arg(long, env = "JUCODE_URL", default_value = "ws://127.0.0.1:7788")]
    url: String,
    /// The file holding the daemon token (default: $JUCODE_HOME/daemon/token, else
    /// ~/.jucode/daemon/token). JUCODE_TOKEN, when set, wins over the file.
    #[arg(long, env = "JUCODE_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// The session to watch (default: the first one `session_list` gives).
    #[arg(long)]
    session: Option<String>,
    /// Create a session in this directory when the daemon lists none.
    #[arg(long)]
    create: Option<String>,
    /// Send this as a user message once the session is watched.
    #[arg(long)]
    say: Option<String>,
    /// Exit after this many events of the session.
    #[arg(long, default_value_t = 20)]
    events: usize,
    /// With --say: exit as soon as that message's turn ends (`status: ready`), even before
    /// --events events.
    #[arg(long)]
    until_ready: bool,
    /// Give up (exit 1) after this many seconds.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
}

type Socket = WebSocketStream<TcpStream>;

/// The connection and the next request id (replies are matched by the id they echo).
struct Client {
    ws: Socket,
    next_id: u64,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    let limit = Duration::from_secs(args.timeout);
    let outcome = match tokio::time::timeout(limit, run(&args)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(anyhow!(
            "timed out after {} s before {} events",
            args.timeout,
            args.events
        )),
    };
    if let Err(e) = outcome {
        eprintln!("client: {e:#}");
        std::process::exit(1);
    }
}

async fn run(args: &Args) -> Result<()> {
    let token = read_token(args)?;
    let mut client = Client::connect(&args.url, &token).await?;

    let list = client.request(json!({"op": "session_list"})).await?;
    let sessions = list["sessions"].as_array().cloned().unwrap_or_default();
    eprintln!("client: {} session(s)", sessions.len());
    for s in &sessions {
        eprintln!(
            "  {} {} open={} {:?}",
            s["session"].as_str().unwrap_or("?"),
            s["engine"].as_str().unwrap_or("?"),
            s["open"],
            s["title"].as_str().unwrap_or("")
        );
    }

    let listed = |id: &str| sessions.iter().find(|s| s["session"] == id);
    let session = match (&args.session, sessions.first(), &args.create) {
        (Some(id), _, _) => id.clone(),
        (None, Some(first), _) => first["session"]
            .as_str()
            .context("a listed session has no id")?
            .to_string(),
        (None, None, Some(dir)) => {
            let created = client
                .request(json!({"op": "session_create", "cwd": dir}))
                .await?;
            let id = created["session"]
                .as_str()
                .context("session_created carries no session")?
                .to_string();
            eprintln!("client: created {id} in {dir}");
            id
        }
        (None, None, None) => bail!("the daemon lists no session; pass --create DIR"),
    };
    // A session from before a restart is listed closed: open it so it has events to show.
    if listed(&session).is_some_and(|s| s["open"] == false) {
        client
            .request(json!({"op": "session_open", "session": session}))
            .await?;
        eprintln!("client: opened {session}");
    }
    client
        .request(json!({"op": "watch", "session": session}))
        .await?;
    eprintln!("client: watching {session}");
    if let Some(text) = &args.say {
        // No id: a session op's answer is the session's own events.
        client
            .send(json!({"op": "user_message", "session": session, "content": text}))
            .await?;
    }

    let mut seen = 0;
    let mut turn_started = false;
    while seen < args.events {
        let frame = client.next_frame().await?;
        if frame["session"] != session.as_str() {
            continue;
        }
        println!("{frame}");
        seen += 1;
        // The turn of --say begins with the session echoing the message as `user_message`.
        turn_started |= args.say.is_some() && frame["type"] == "user_message";
        let ready = frame["type"] == "status" && frame["message"] == "ready";
        if frame["type"] == "session_closed" || (args.until_ready && turn_started && ready) {
            break;
        }
    }
    eprintln!("client: {seen} event(s) of {session}");
    client.ws.close(None).await.ok();
    Ok(())
}

fn read_token(args: &Args) -> Result<String> {
    if let Ok(token) = std::env::var("JUCODE_TOKEN") {
        return Ok(token.trim().to_string());
    }
    let path = match &args.token_file {
        Some(path) => path.clone(),
        None => {
            let home = match std::env::var_os("JUCODE_HOME") {
                Some(home) => PathBuf::from(home),
                None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?)
                    .join(".jucode"),
            };
            home.join("daemon").join("token")
        }
    };
    let token = std::fs::read_to_string(&path)
        .with_context(|| format!("reading the token from {}", path.display()))?;
    Ok(token.trim().to_string())
}

impl Client {
    /// Opens the WebSocket with the token as a bearer header (it stays out of URLs and their
    /// logs), then checks that the first frame is a `hello` for protocol 2.
    async fn connect(url: &str, token: &str) -> Result<Client> {
        let mut request = url.into_client_request().context("the daemon URL")?;
        let bearer = HeaderValue::from_str(&format!("Bearer {token}"))
            .context("the token is not a header value")?;
        request.headers_mut().insert("authorization", bearer);
        let host = request.uri().host().context("the URL names no host")?;
        let port = request.uri().port_u16().unwrap_or(80);
        let tcp = TcpStream::connect((host, port))
            .await
            .with_context(|| format!("connecting to {host}:{port}"))?;
        let ws = match client_async(request, tcp).await {
            Ok((ws, _)) => ws,
            Err(WsError::Http(response)) if response.status() == 401 => {
                bail!("the daemon refused the token (HTTP 401)")
            }
            Err(e) => return Err(e).context("the WebSocket handshake"),
        };
        let mut client = Client { ws, next_id: 0 };
        let hello = client.next_frame().await?;
        let protocol = hello["protocol"].as_u64();
        if hello["type"] != "hello" || protocol != Some(jucode_protocol::PROTOCOL_VERSION) {
            client.ws.close(None).await.ok();
            bail!("the daemon does not speak protocol 2: {hello}");
        }
        eprintln!(
            "client: connected to jucode daemon {}",
            hello["version"].as_str().unwrap_or("?")
        );
        Ok(client)
    }

    async fn send(&mut self, frame: Value) -> Result<()> {
        self.ws
            .send(Message::text(frame.to_string()))
            .await
            .context("sending a frame")
    }

    /// Sends `op` with a fresh id and waits for the frame that echoes it. Broadcasts that
    /// arrive meanwhile (lists, other sessions' events) are passed over.
    async fn request(&mut self, mut op: Value) -> Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        op["id"] = json!(id);
        let name = op["op"].as_str().unwrap_or("?").to_string();
        self.send(op).await?;
        loop {
            let frame = self.next_frame().await?;
            if frame["id"] != id {
                continue;
            }
            if frame["type"] == "error" {
                bail!("{name}: {}", frame["message"].as_str().unwrap_or("error"));
            }
            return Ok(frame);
        }
    }

    /// The next JSON frame; a close frame or the end of the connection is an error.
    async fn next_frame(&mut self) -> Result<Value> {
        loop {
            match self.ws.next().await {
                Some(Ok(Message::Text(text))) => {
                    return serde_json::from_str(text.as_str()).context("a frame that is not JSON");
                }
                Some(Ok(Message::Close(close))) => match close {
                    Some(c) => bail!("the daemon closed the connection: {} {}", c.code, c.reason),
                    None => bail!("the daemon closed the connection"),
                },
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(e).context("reading from the daemon"),
                None => bail!("the connection ended"),
            }
        }
    }
}
