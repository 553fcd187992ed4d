//! A child process that prints "listening on http://ADDR" when it is ready: the daemon and the
//! relay server are both started this way.

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

const START_TIMEOUT: Duration = Duration::from_secs(30);
const LISTEN_MARKER: &str = "listening on http://";

pub(crate) type Logs = Arc<Mutex<Vec<String>>>;

pub(crate) fn snapshot(logs: &Logs) -> Vec<String> {
    // A panicking drain task cannot leave the Vec half-written, so poison is harmless.
    logs.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone()
}

fn push_log(logs: &Logs, line: String) {
    logs.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(line);
}

/// Reads a pipe to its end so the child never blocks on a full pipe.
async fn drain<R: AsyncRead + Unpin>(mut lines: tokio::io::Lines<BufReader<R>>, logs: Logs) {
    while let Ok(Some(line)) = lines.next_line().await {
        push_log(&logs, line);
    }
}

/// `jucode daemon listening on http://127.0.0.1:PORT` → the address.
fn parse_listen_line(line: &str) -> Option<Result<SocketAddr>> {
    let (_, rest) = line.split_once(LISTEN_MARKER)?;
    let addr = rest
        .split(|c: char| c.is_whitespace() || c == '/')
        .next()
        .unwrap_or_default();
    Some(
        addr.parse()
            .with_context(|| format!("cannot parse the listen address in {line:?}")),
    )
}

/// A started child that has printed its listen address.
pub(crate) struct Listening {
    pub child: Child,
    pub addr: SocketAddr,
    /// Every line it printed, stdout and stderr interleaved as read.
    pub logs: Logs,
}

/// Spawns `command` with piped output and waits (30 s at most) for its "listening on
/// http://" line; `what` names the program in errors.
pub(crate) async fn spawn_listening(mut command: Command, what: &str) -> Result<Listening> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("spawn {what}"))?;
    let logs: Logs = Arc::default();
    let stdout = child.stdout.take().context("stdout is not piped")?;
    let stderr = child.stderr.take().context("stderr is not piped")?;
    let stderr_done = tokio::spawn(drain(BufReader::new(stderr).lines(), logs.clone()));

    let mut lines = BufReader::new(stdout).lines();
    let wait_for_listen = async {
        while let Some(line) = lines.next_line().await.context("read stdout")? {
            let parsed = parse_listen_line(&line);
            push_log(&logs, line);
            if let Some(addr) = parsed {
                return addr.map(Some);
            }
        }
        Ok(None)
    };
    let addr = match tokio::time::timeout(START_TIMEOUT, wait_for_listen).await {
        Ok(Ok(Some(addr))) => addr,
        Ok(Ok(None)) => {
            let status = child
                .wait()
                .await
                .with_context(|| format!("wait for {what}"))?;
            // Its last words are on stderr: read them all before reporting.
            let _ = tokio::time::timeout(Duration::from_secs(5), stderr_done).await;
            bail!(
                "{what} exited ({status}) before listening; output:\n{}",
                snapshot(&logs).join("\n")
            );
        }
        Ok(Err(err)) => {
            let _ = child.start_kill();
            return Err(err.context(format!("{what} output:\n{}", snapshot(&logs).join("\n"))));
        }
        Err(_) => {
            let _ = child.start_kill();
            bail!(
                "{what} printed no {LISTEN_MARKER:?} line within 30 s; output:\n{}",
                snapshot(&logs).join("\n")
            );
        }
    };
    tokio::spawn(drain(lines, logs.clone()));
    Ok(Listening { child, addr, logs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listen_line_gives_the_address() -> Result<()> {
        let line = "jucode daemon listening on http://127.0.0.1:45123";
        let addr = parse_listen_line(line).context("marker not found")??;
        assert_eq!(addr, "127.0.0.1:45123".parse::<SocketAddr>()?);
        let addr = parse_listen_line("x listening on http://[::1]:80/ now")
            .context("marker not found")??;
        assert_eq!(addr.port(), 80);
        let relay = "jucode-relay listening on http://127.0.0.1:9/relay/v1";
        let addr = parse_listen_line(relay).context("marker not found")??;
        assert_eq!(addr.port(), 9);
        assert!(parse_listen_line("starting up").is_none());
        assert!(
            parse_listen_line("listening on http://nowhere")
                .context("marker not found")?
                .is_err()
        );
        Ok(())
    }
}
