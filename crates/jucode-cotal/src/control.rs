//! The manager's control socket: one NDJSON frame per connection,
//! `{"token","op":"shutdown"}` → `{"ok":true}` then a clean stop;
//! `{"token","op":"run-turn","turn":{turn,run,step,text}}` hands the seat a
//! workflow run turn (it rides the seat's next send, see [`crate::runturn`])
//! → `{"ok":true}` once queued for the seat. The token is
//! compared in constant time; a bad token drops the connection; the first frame
//! is capped at 1 MiB and an idle connection is cut after 5 s.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::config::ControlConfig;
use crate::runturn::RunTurn;
use crate::{Error, Result};

pub const MAX_FRAME: u64 = 1 << 20;
pub const IDLE_CUT: Duration = Duration::from_secs(5);

/// Bind the control socket; `shutdown` receives one `()` per accepted
/// shutdown, `run_turns` each run turn the manager hands the seat.
pub fn serve(
    cfg: &ControlConfig,
    shutdown: mpsc::UnboundedSender<()>,
    run_turns: mpsc::UnboundedSender<RunTurn>,
) -> Result<JoinHandle<()>> {
    let path = cfg.socket.clone();
    if path.exists() {
        // A stale socket from a dead seat; only ever a socket file, never anything else.
        let meta = std::fs::symlink_metadata(&path).map_err(|e| Error::io(&path, e))?;
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_socket() {
            return Err(Error::Launch(format!(
                "{} exists and is not a socket",
                path.display()
            )));
        }
        std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
    }
    let listener = UnixListener::bind(&path).map_err(|e| Error::io(&path, e))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| Error::io(&path, e))?;
    let token = cfg.token.clone();
    Ok(tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let token = token.clone();
            let tx = shutdown.clone();
            let turns = run_turns.clone();
            tokio::spawn(async move { one(stream, &token, tx, turns).await });
        }
    }))
}

async fn one(
    stream: UnixStream,
    token: &str,
    tx: mpsc::UnboundedSender<()>,
    turns: mpsc::UnboundedSender<RunTurn>,
) {
    let (rd, mut wr) = stream.into_split();
    let mut reader = BufReader::new(rd.take(MAX_FRAME + 1));
    let mut line = String::new();
    let Ok(Ok(n)) = tokio::time::timeout(IDLE_CUT, reader.read_line(&mut line)).await else {
        return;
    };
    if n == 0 || n as u64 > MAX_FRAME {
        return;
    }
    let Ok(frame) = serde_json::from_str::<Value>(&line) else {
        return;
    };
    let given = frame["token"].as_str().unwrap_or("");
    if !crate::util::token_eq(given, token) {
        return;
    }
    let reply = if frame["op"] == json!("shutdown") {
        let _ = tx.send(());
        json!({"ok": true})
    } else if frame["op"] == json!("run-turn") {
        run_turn(&frame["turn"], &turns)
    } else if frame.get("event").is_some() {
        json!({"ok": false, "error": "jcode has no lifecycle hook relay"})
    } else {
        json!({"ok": false, "error": "unknown control frame"})
    };
    let mut out = reply.to_string();
    out.push('\n');
    let _ = wr.write_all(out.as_bytes()).await;
    let _ = wr.shutdown().await;
}

/// A run turn frame: four non-empty strings, nothing else.
fn run_turn(v: &Value, turns: &mpsc::UnboundedSender<RunTurn>) -> Value {
    let fields = ["turn", "run", "step", "text"];
    let well_formed = v.as_object().is_some_and(|o| {
        o.len() == fields.len()
            && fields.iter().all(|f| {
                o.get(*f)
                    .and_then(Value::as_str)
                    .is_some_and(|s| !s.is_empty())
            })
    });
    let parsed = well_formed
        .then(|| serde_json::from_value::<RunTurn>(v.clone()).ok())
        .flatten();
    match parsed {
        Some(t) => match turns.send(t) {
            Ok(()) => json!({"ok": true}),
            Err(_) => json!({"ok": false, "error": "the seat is stopping"}),
        },
        None => json!({"ok": false,
            "error": "run-turn needs a turn object of exactly turn, run, step and text, each a non-empty string"}),
    }
}

/// Send one frame and read the reply (used by tests and operators).
pub async fn request(socket: &Path, frame: &Value) -> Result<Option<Value>> {
    let mut s = UnixStream::connect(socket)
        .await
        .map_err(|e| Error::io(socket, e))?;
    let mut line = frame.to_string();
    line.push('\n');
    s.write_all(line.as_bytes())
        .await
        .map_err(|e| Error::io(socket, e))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)
        .await
        .map_err(|e| Error::io(socket, e))?;
    if buf.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(&buf)
        .map(Some)
        .map_err(|e| Error::Wire(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shutdown_needs_the_right_token() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = ControlConfig {
            socket: dir.path().join("c.sock"),
            token: "good".into(),
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (ttx, mut trx) = mpsc::unbounded_channel();
        let task = serve(&cfg, tx, ttx).unwrap();
        let turn = json!({"turn": "t1", "run": "r", "step": "s", "text": "do it"});
        let given = request(
            &cfg.socket,
            &json!({"token": "good", "op": "run-turn", "turn": turn}),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(given, json!({"ok": true}));
        assert_eq!(trx.recv().await.unwrap().turn, "t1");
        for bad_turn in [
            json!({"turn": "t2", "run": "r", "step": "s"}),
            json!({"turn": "", "run": "r", "step": "s", "text": "x"}),
            json!({"turn": "t2", "run": "r", "step": "s", "text": "x", "extra": 1}),
            json!("t2"),
        ] {
            let r = request(
                &cfg.socket,
                &json!({"token": "good", "op": "run-turn", "turn": bad_turn}),
            )
            .await
            .unwrap()
            .unwrap();
            assert_eq!(r["ok"], false, "{bad_turn}");
        }
        let unauthorised = request(
            &cfg.socket,
            &json!({"token": "bad", "op": "run-turn", "turn": turn}),
        )
        .await
        .unwrap();
        assert!(unauthorised.is_none());
        assert!(
            trx.try_recv().is_err(),
            "only the one good frame was queued"
        );
        let bad = request(&cfg.socket, &json!({"token": "bad", "op": "shutdown"}))
            .await
            .unwrap();
        assert!(bad.is_none(), "a bad token gets the socket dropped");
        assert!(rx.try_recv().is_err());
        let hook = request(
            &cfg.socket,
            &json!({"token": "good", "event": {"hook_event_name": "x"}}),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(hook["ok"], false);
        let ok = request(&cfg.socket, &json!({"token": "good", "op": "shutdown"}))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ok, json!({"ok": true}));
        assert!(rx.recv().await.is_some());
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn idle_connections_are_cut() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = ControlConfig {
            socket: dir.path().join("c.sock"),
            token: "t".into(),
        };
        let (tx, _rx) = mpsc::unbounded_channel();
        let (ttx, _trx) = mpsc::unbounded_channel();
        let task = serve(&cfg, tx, ttx).unwrap();
        let mut s = UnixStream::connect(&cfg.socket).await.unwrap();
        let mut buf = Vec::new();
        // Paused time auto-advances past the 5 s idle cut; the server closes.
        let n = s.read_to_end(&mut buf).await.unwrap();
        assert_eq!(n, 0);
        task.abort();
    }
}
