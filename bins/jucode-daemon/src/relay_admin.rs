//! `jucode-daemon pair` and `jucode-daemon relay on|off|status`, for machines without the
//! desktop: they talk to the running daemon over its WebSocket with the daemon token, or (relay
//! only) change the remembered setting when no daemon runs.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// What `relay` does.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum RelayAction {
    On,
    Off,
    Status,
}

const WAIT: Duration = Duration::from_secs(15);

/// The jucode home: `--home`, else `~/.jucode`.
fn home(home: Option<PathBuf>) -> Result<PathBuf> {
    match home {
        Some(h) => Ok(h),
        None => {
            Ok(PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?).join(".jucode"))
        }
    }
}

/// Sends one op to the daemon at `listen` and returns its reply; `Ok(None)` when nothing
/// listens there.
async fn ask(listen: SocketAddr, home: &Path, op: Value) -> Result<Option<Value>> {
    let token_path = home.join("daemon").join("token");
    let url = format!("ws://{listen}/");
    let tcp = match tokio::net::TcpStream::connect(listen).await {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("connect to {listen}")),
    };
    let token = std::fs::read_to_string(&token_path)
        .with_context(|| format!("read the daemon token {}", token_path.display()))?;
    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
            url.as_str(),
        )?;
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", token.trim())
            .parse()
            .context("the token is not a valid header")?,
    );
    let (mut ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::client_async(request, tcp))
        .await
        .context("the daemon did not answer")?
        .context("the daemon refused the connection (is the token current?)")?;
    let mut op = op;
    op["id"] = json!("cli");
    ws.send(Message::text(op.to_string())).await?;
    let reply = tokio::time::timeout(WAIT, async {
        while let Some(msg) = ws.next().await {
            if let Message::Text(text) = msg? {
                let frame: Value = serde_json::from_str(text.as_str())?;
                if frame["id"] == "cli" {
                    return Ok::<_, anyhow::Error>(Some(frame));
                }
            }
        }
        Ok(None)
    })
    .await
    .context("the daemon did not reply")??;
    let _ = ws.close(None).await;
    let reply = reply.context("the daemon closed the connection")?;
    if reply["type"] == "error" {
        bail!(
            "{}",
            reply["message"].as_str().unwrap_or("the daemon refused")
        );
    }
    Ok(Some(reply))
}

fn print_status(status: &Value) {
    let on = status["enabled"] == true;
    println!("relay: {}", if on { "on" } else { "off" });
    if on {
        let connected = status["connected"] == true;
        println!("connected: {}", if connected { "yes" } else { "no" });
    }
    if let Some(host) = status["host"].as_str() {
        println!("host: {host}");
    }
    match status["url"].as_str() {
        Some(url) => println!("url: {url}"),
        None => println!("url: none (--no-relay)"),
    }
}

/// `jucode-daemon pair`: a pairing link for a phone, from the running daemon.
pub async fn pair(listen: SocketAddr, home_arg: Option<PathBuf>) -> Result<()> {
    let home = home(home_arg)?;
    let Some(reply) = ask(listen, &home, json!({"op": "pair_link"})).await? else {
        bail!(
            "no daemon is running at {listen}; start it (jucode-daemon), turn the relay on (jucode-daemon relay on) and try again"
        );
    };
    println!("{}", reply["link"].as_str().unwrap_or_default());
    println!(
        "code: {} (valid 5 minutes, single use)",
        reply["code"].as_str().unwrap_or_default()
    );
    Ok(())
}

/// `jucode-daemon relay on|off|status`.
pub async fn relay(
    listen: SocketAddr,
    home_arg: Option<PathBuf>,
    action: RelayAction,
) -> Result<()> {
    let home = home(home_arg)?;
    let op = match action {
        RelayAction::On => json!({"op": "relay_set", "enabled": true}),
        RelayAction::Off => json!({"op": "relay_set", "enabled": false}),
        RelayAction::Status => json!({"op": "relay_status"}),
    };
    if let Some(status) = ask(listen, &home, op).await? {
        print_status(&status);
        return Ok(());
    }
    // No daemon here: the setting is a file, changed under the state directory's lock so a
    // daemon starting meanwhile cannot miss it.
    let store = match jucode_store::StateDir::open(&home) {
        Ok(store) => store,
        Err(jucode_store::StoreError::Locked { .. }) => {
            bail!("a daemon is running with this home but not at {listen}; pass its --listen")
        }
        Err(e) => return Err(e.into()),
    };
    let path = store.path("settings.json");
    let mut settings: Value = jucode_store::read_json(&path)?.unwrap_or_else(|| json!({}));
    if !settings.is_object() {
        settings = json!({});
    }
    match action {
        RelayAction::Status => {}
        RelayAction::On | RelayAction::Off => {
            settings["relay"] = json!(matches!(action, RelayAction::On));
            jucode_store::write_json_atomic(&path, &settings)?;
        }
    }
    let on = settings["relay"] == true;
    println!(
        "relay: {} (no daemon running; it {} when the daemon starts)",
        if on { "on" } else { "off" },
        if on { "connects" } else { "stays off" }
    );
    Ok(())
}
