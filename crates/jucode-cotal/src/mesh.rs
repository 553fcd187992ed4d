//! The mesh client on async-nats: connect in open, static-creds or user-auth
//! mode, refuse brokers older than 2.12, provision (open mode) or bind
//! (authed modes) the space's streams, buckets and durables, and publish
//! through JetStream with `Nats-Msg-Id`.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv, stream};
use bytes::Bytes;
use tokio::sync::watch;

use crate::config::{Auth, LaunchConfig};
use crate::envelope::CotalMessage;
use crate::{Error, Result};

/// Oldest broker we accept (message schedules and per-message TTLs).
pub const MIN_SERVER: (u64, u64) = (2, 12);
/// Presence records expire after this long without a heartbeat.
pub const PRESENCE_TTL: Duration = Duration::from_millis(6000);
/// Redelivery delay of directed mail that was not acked.
pub const ACK_WAIT: Duration = Duration::from_secs(60);

/// Names of the space's JetStream objects (SPEC §8).
#[derive(Debug, Clone)]
pub struct Names {
    pub chat_stream: String,
    pub dm_stream: String,
    pub task_stream: String,
    pub presence_bucket: String,
    pub channels_bucket: String,
    pub membership_bucket: String,
}

impl Names {
    pub fn new(space: &str) -> Self {
        Names {
            chat_stream: format!("CHAT_{space}"),
            dm_stream: format!("DM_{space}"),
            task_stream: format!("TASK_{space}"),
            presence_bucket: format!("cotal_presence_{space}"),
            channels_bucket: format!("cotal_channels_{space}"),
            membership_bucket: format!("cotal_membership_{space}"),
        }
    }
}

/// Parse `major.minor` out of a server version like `2.15.1` or `v2.12.0-beta`.
pub fn parse_version(v: &str) -> Option<(u64, u64)> {
    let v = v.trim().trim_start_matches('v');
    let mut it = v.split(['.', '-']);
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// Run the bearer command and return its trimmed stdout (never logged).
async fn bearer(cmd: &[String]) -> Result<String> {
    let (prog, args) = cmd
        .split_first()
        .ok_or_else(|| Error::Launch("empty bearer command".into()))?;
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(prog)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .output(),
    )
    .await
    .map_err(|_| Error::Launch("the bearer command did not finish within 30 s".into()))?
    .map_err(|e| Error::Launch(format!("cannot run the bearer command {prog}: {e}")))?;
    if !out.status.success() {
        return Err(Error::Launch(format!(
            "the bearer command exited with {}",
            out.status
        )));
    }
    let token = String::from_utf8(out.stdout)
        .map_err(|_| Error::Launch("the bearer command printed non-UTF-8".into()))?
        .trim()
        .to_string();
    if token.is_empty() {
        return Err(Error::Launch("the bearer command printed nothing".into()));
    }
    Ok(token)
}

/// The deny-all sentinel credential of user auth: its JWT and the nkey that
/// signs the server's nonce.
struct Sentinel {
    jwt: String,
    key: nkeys::KeyPair,
}

impl Sentinel {
    /// Read a `.creds` file (JWT block and seed block).
    fn load(path: &std::path::Path) -> Result<Sentinel> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let block = |marker: &str| {
            let mut lines = text.lines();
            lines.find(|l| l.contains(marker))?;
            lines
                .map(str::trim)
                .find(|l| !l.is_empty())
                .filter(|l| !l.starts_with("---"))
                .map(str::to_string)
        };
        let bad = |what: &str| {
            Error::Launch(format!(
                "{}: the sentinel credential has no {what}",
                path.display()
            ))
        };
        let jwt = block("BEGIN NATS USER JWT").ok_or_else(|| bad("user JWT"))?;
        let seed = block("BEGIN USER NKEY SEED").ok_or_else(|| bad("nkey seed"))?;
        let key = nkeys::KeyPair::from_seed(&seed).map_err(|_| bad("valid nkey seed"))?;
        Ok(Sentinel { jwt, key })
    }
}

/// What one (re)connect presents in user mode: the sentinel JWT, the nonce
/// signed with its key and a fresh bearer. Errors name no secret.
async fn user_auth(
    sentinel: &Sentinel,
    cmd: Arc<Vec<String>>,
    nonce: &[u8],
) -> std::result::Result<async_nats::Auth, async_nats::AuthError> {
    // The command runs on its own task so this future stays Sync.
    let token = tokio::spawn(async move { bearer(&cmd).await })
        .await
        .map_err(|e| async_nats::AuthError::new(format!("bearer command task failed: {e}")))?
        .map_err(async_nats::AuthError::new)?;
    let signature = sentinel
        .key
        .sign(nonce)
        .map_err(|_| async_nats::AuthError::new("cannot sign the server nonce"))?;
    tracing::info!("user auth: minted a fresh bearer for this connect");
    let mut auth = async_nats::Auth::new();
    auth.jwt = Some(sentinel.jwt.clone());
    auth.signature = Some(signature);
    auth.token = Some(token);
    Ok(auth)
}

/// A connected mesh client.
#[derive(Clone)]
pub struct Mesh {
    pub client: async_nats::Client,
    pub js: jetstream::Context,
    pub names: Names,
    pub presence: kv::Store,
    pub channels: kv::Store,
    pub space: String,
    connected: watch::Receiver<bool>,
}

impl Mesh {
    /// Connect, check the broker version and provision or bind the space's objects.
    pub async fn connect(cfg: &LaunchConfig) -> Result<Mesh> {
        let (tx, rx) = watch::channel(false);
        // User auth: the bearer is minted by the callback on every (re)connect,
        // so a reconnect never presents an expired bearer.
        let mut opts = match &cfg.auth {
            Auth::User {
                sentinel_creds,
                bearer_cmd,
            } => {
                let sentinel = Arc::new(Sentinel::load(sentinel_creds)?);
                let cmd = Arc::new(bearer_cmd.clone());
                // Fail the launch early and clearly when the command cannot mint a bearer.
                drop(bearer(&cmd).await?);
                async_nats::ConnectOptions::with_auth_callback(move |nonce: Vec<u8>| {
                    let sentinel = sentinel.clone();
                    let cmd = cmd.clone();
                    async move { user_auth(&sentinel, cmd, &nonce).await }
                })
                .custom_inbox_prefix(format!(
                    "_INBOX_{}",
                    crate::util::random_token(16).replace('-', "_")
                ))
            }
            _ => async_nats::ConnectOptions::new(),
        };
        opts = opts
            .name(format!("cotal-jcode {}", cfg.principal.dot()))
            .max_reconnects(None)
            .connection_timeout(Duration::from_secs(10))
            .event_callback(move |ev| {
                let tx = tx.clone();
                async move {
                    match ev {
                        async_nats::Event::Connected => {
                            let _ = tx.send(true);
                        }
                        async_nats::Event::Disconnected | async_nats::Event::Closed => {
                            let _ = tx.send(false);
                        }
                        other => tracing::debug!(event = %other, "mesh event"),
                    }
                }
            });
        // The reply inbox is keyed by the connection id (`_INBOX_<connId>`) in authed modes.
        match &cfg.auth {
            Auth::Open | Auth::User { .. } => {}
            Auth::Token(t) => opts = opts.token(t.clone()),
            Auth::Creds(path) => {
                opts = opts
                    .credentials_file(path)
                    .await
                    .map_err(|e| Error::io(path, e))?;
                if let Some(id) = &cfg.conn_id {
                    opts = opts
                        .custom_inbox_prefix(format!("_INBOX_{}", crate::subject::sanitize(id)));
                }
            }
        }
        let client = opts.connect(cfg.servers.clone()).await.map_err(|e| {
            Error::Mesh(format!("cannot connect to {}: {e}", cfg.servers.join(",")))
        })?;
        let info = client.server_info();
        match parse_version(&info.version) {
            Some(v) if v >= MIN_SERVER => {}
            _ => {
                return Err(Error::Mesh(format!(
                    "nats-server {} is older than {}.{}; Cotal needs message schedules and per-message TTLs",
                    info.version, MIN_SERVER.0, MIN_SERVER.1
                )));
            }
        }
        let js = jetstream::new(client.clone());
        let names = Names::new(&cfg.space);
        let open = cfg.is_open();
        if open {
            provision(&js, &cfg.space, &names).await?;
        }
        let presence = bind_kv(&js, &names.presence_bucket, open, Some(PRESENCE_TTL)).await?;
        let channels = bind_kv(&js, &names.channels_bucket, open, None).await?;
        Ok(Mesh {
            client,
            js,
            names,
            presence,
            channels,
            space: cfg.space.clone(),
            connected: rx,
        })
    }

    /// Is the connection up right now?
    pub fn is_connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    /// Wait until the connection is up (returns at once when it is).
    pub async fn wait_connected(&self) {
        let mut rx = self.connected.clone();
        while !self.is_connected() {
            if rx.changed().await.is_err() {
                // The callback is gone; poll instead.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }

    /// Publish a Cotal message through JetStream with `Nats-Msg-Id`; returns the stored sequence.
    pub async fn publish(&self, subject: &str, msg: &CotalMessage) -> Result<u64> {
        let payload = serde_json::to_vec(msg).map_err(|e| Error::Wire(e.to_string()))?;
        let ack = self
            .js
            .send_publish(
                subject.to_string(),
                jetstream::message::PublishMessage::build()
                    .payload(Bytes::from(payload))
                    .message_id(&msg.id),
            )
            .await
            .map_err(Error::mesh)?
            .await
            .map_err(Error::mesh)?;
        Ok(ack.sequence)
    }

    /// Bind a provisioned durable (authed modes) or create it (open mode).
    pub async fn durable(
        &self,
        stream_name: &str,
        config: consumer::pull::Config,
        create: bool,
    ) -> Result<consumer::Consumer<consumer::pull::Config>> {
        let name = config.durable_name.clone().unwrap_or_default();
        let stream = self
            .js
            .get_stream(stream_name)
            .await
            .map_err(|e| Error::Mesh(format!("stream {stream_name} is not there: {e}")))?;
        if create {
            stream
                .get_or_create_consumer(&name, config)
                .await
                .map_err(|e| Error::Mesh(format!("cannot create durable {name}: {e}")))
        } else {
            stream.get_consumer(&name).await.map_err(|e| {
                Error::Mesh(format!(
                    "durable {name} is not provisioned (connectors bind, never create, in authed modes): {e}"
                ))
            })
        }
    }
}

async fn bind_kv(
    js: &jetstream::Context,
    bucket: &str,
    create: bool,
    ttl: Option<Duration>,
) -> Result<kv::Store> {
    match js.get_key_value(bucket).await {
        Ok(store) => Ok(store),
        Err(_) if create => js
            .create_key_value(kv::Config {
                bucket: bucket.to_string(),
                history: 1,
                max_age: ttl.unwrap_or_default(),
                ..Default::default()
            })
            .await
            .map_err(|e| Error::Mesh(format!("cannot create bucket {bucket}: {e}"))),
        Err(e) => Err(Error::Mesh(format!("bucket {bucket} is not there: {e}"))),
    }
}

/// Open mode only: create the space's streams and buckets if missing.
pub async fn provision(js: &jetstream::Context, space: &str, names: &Names) -> Result<()> {
    let streams = [
        (
            &names.chat_stream,
            format!("cotal.{space}.chat.>"),
            stream::RetentionPolicy::Limits,
        ),
        (
            &names.dm_stream,
            format!("cotal.{space}.inst.>"),
            stream::RetentionPolicy::Limits,
        ),
        (
            &names.task_stream,
            format!("cotal.{space}.svc.>"),
            stream::RetentionPolicy::WorkQueue,
        ),
    ];
    for (name, subject, retention) in streams {
        js.get_or_create_stream(stream::Config {
            name: name.to_string(),
            subjects: vec![subject],
            retention,
            allow_direct: true,
            ..Default::default()
        })
        .await
        .map_err(|e| Error::Mesh(format!("cannot create stream {name}: {e}")))?;
    }
    bind_kv(js, &names.presence_bucket, true, Some(PRESENCE_TTL)).await?;
    bind_kv(js, &names.channels_bucket, true, None).await?;
    bind_kv(js, &names.membership_bucket, true, None).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_floor() {
        assert!(parse_version("2.15.1").unwrap() >= MIN_SERVER);
        assert!(parse_version("v2.12.0-beta.1").unwrap() >= MIN_SERVER);
        assert!(parse_version("2.11.9").unwrap() < MIN_SERVER);
        assert!(parse_version("2.9.10").unwrap() < MIN_SERVER);
        assert!(parse_version("garbage").is_none());
    }
}
