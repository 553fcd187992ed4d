//! A relay client: what the phone's page does, in Rust. It opens one stream to a host through
//! the relay, runs the Noise IK initiator (with a pairing code the first time), then sends and
//! receives daemon JSON frames. Tests and benchmarks use it as the phone.

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use snow::HandshakeState;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{self, Bytes, Message};
use zeroize::Zeroizing;

use crate::connect::{ConnectError, IoBox, open_socket};
use crate::identity::unb64;
use crate::limits::MAX_MESSAGE;
use crate::noise::{self, Channel, NoiseError};

/// Why a client stream failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("websocket: {0}")]
    Ws(#[from] tungstenite::Error),
    #[error(transparent)]
    Noise(#[from] NoiseError),
    #[error("the host refused the device: {0}")]
    Refused(String),
    #[error("the stream closed ({0}: {1})")]
    Closed(u16, String),
    #[error("protocol: {0}")]
    Protocol(String),
}

/// A device's X25519 static keypair (the page keeps it in localStorage).
pub struct DeviceKeys {
    private: Zeroizing<Vec<u8>>,
    public: Vec<u8>,
}

impl DeviceKeys {
    pub fn generate() -> Result<DeviceKeys, NoiseError> {
        let (private, public) = noise::generate_keypair()?;
        Ok(DeviceKeys { private, public })
    }

    pub fn public(&self) -> &[u8] {
        &self.public
    }
}

/// What a pairing link carries: `<origin>/remote#pair=<host>.<static>.<code>`.
#[derive(Debug, Clone, PartialEq)]
pub struct PairLink {
    pub origin: String,
    pub host: String,
    pub host_static: Vec<u8>,
    pub code: String,
}

/// Reads a pairing link as the page does (host id 22 characters, key 43, code alphanumeric).
pub fn parse_pair_link(link: &str) -> Option<PairLink> {
    let (origin, fragment) = link.split_once("/remote#pair=")?;
    let mut parts = fragment.split('.');
    let (host, key, code) = (parts.next()?, parts.next()?, parts.next()?);
    let b64ish = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if parts.next().is_some()
        || host.len() != 22
        || key.len() != 43
        || !b64ish(host)
        || !b64ish(key)
        || code.is_empty()
        || !code.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return None;
    }
    Some(PairLink {
        origin: origin.to_string(),
        host: host.to_string(),
        host_static: unb64(key).filter(|k| k.len() == 32)?,
        code: code.to_string(),
    })
}

/// A WebSocket to the relay's client endpoint for `host`.
pub type ClientWs = WebSocketStream<Box<dyn IoBox>>;

/// Opens `GET <relay>/connect?host=<host>` (`relay_url` is the relay's base, `…/relay/v1`).
pub async fn connect_stream(relay_url: &str, host: &str) -> Result<ClientWs, ClientError> {
    let url = format!("{}/connect?host={host}", relay_url.trim_end_matches('/'));
    Ok(open_socket(&url, MAX_MESSAGE).await?)
}

/// The initiator's state and first message: `{"name", "pair"?}` encrypted to the host.
pub fn first_message(
    keys: &DeviceKeys,
    host_static: &[u8],
    name: &str,
    code: Option<&str>,
) -> Result<(HandshakeState, Vec<u8>), ClientError> {
    let mut hs = noise::initiator(&keys.private, host_static)?;
    let mut payload = json!({"name": name});
    if let Some(code) = code {
        payload["pair"] = json!(code);
    }
    let body = payload.to_string();
    let mut msg = vec![0u8; body.len() + 160];
    let n = hs
        .write_message(body.as_bytes(), &mut msg)
        .map_err(NoiseError::from)?;
    msg.truncate(n);
    Ok((hs, msg))
}

/// An established stream to the daemon.
pub struct Phone {
    ws: ClientWs,
    channel: Channel,
    /// The device id the host gave this key.
    pub device: String,
    /// The device's name as the host keeps it.
    pub name: String,
}

impl Phone {
    /// Connects, handshakes and is ready for the daemon's `hello`.
    pub async fn open(
        relay_url: &str,
        host: &str,
        host_static: &[u8],
        keys: &DeviceKeys,
        name: &str,
        code: Option<&str>,
    ) -> Result<Phone, ClientError> {
        let ws = connect_stream(relay_url, host).await?;
        let (hs, msg1) = first_message(keys, host_static, name, code)?;
        Phone::finish(ws, hs, msg1).await
    }

    /// Sends `msg1` on `ws` and completes the handshake with the host's answer.
    pub async fn finish(
        mut ws: ClientWs,
        mut hs: HandshakeState,
        msg1: Vec<u8>,
    ) -> Result<Phone, ClientError> {
        ws.send(Message::binary(msg1)).await?;
        let msg2 = next_binary(&mut ws).await?;
        let mut payload = vec![0u8; msg2.len()];
        let n = hs
            .read_message(&msg2, &mut payload)
            .map_err(NoiseError::from)?;
        let answer: Value = serde_json::from_slice(&payload[..n])
            .map_err(|e| ClientError::Protocol(format!("msg2 payload: {e}")))?;
        if answer["ok"] != json!(true) {
            let error = answer["error"].as_str().unwrap_or("refused").to_string();
            return Err(ClientError::Refused(error));
        }
        let field = |k: &str| answer[k].as_str().unwrap_or_default().to_string();
        Ok(Phone {
            device: field("device"),
            name: field("name"),
            channel: Channel::new(hs.into_transport_mode().map_err(NoiseError::from)?),
            ws,
        })
    }

    /// Sends one daemon frame (chunked as needed).
    pub async fn send(&mut self, frame: &Value) -> Result<(), ClientError> {
        self.send_text(&frame.to_string()).await
    }

    pub async fn send_text(&mut self, text: &str) -> Result<(), ClientError> {
        for m in self.channel.seal(text.as_bytes())? {
            self.ws.feed(Message::binary(m)).await?;
        }
        self.ws.flush().await?;
        Ok(())
    }

    /// The Noise messages that would carry `text`, without sending them (fault injection).
    pub fn seal(&mut self, text: &str) -> Result<Vec<Vec<u8>>, ClientError> {
        Ok(self.channel.seal(text.as_bytes())?)
    }

    /// Sends one raw WebSocket binary message.
    pub async fn send_raw(&mut self, message: Vec<u8>) -> Result<(), ClientError> {
        self.ws.send(Message::binary(message)).await?;
        Ok(())
    }

    /// Sends a text WebSocket message (which the relay refuses with 4400).
    pub async fn send_text_frame(&mut self, text: &str) -> Result<(), ClientError> {
        self.ws.send(Message::text(text.to_string())).await?;
        Ok(())
    }

    /// The next daemon frame as JSON.
    pub async fn recv(&mut self) -> Result<Value, ClientError> {
        let frame = self.recv_bytes().await?;
        serde_json::from_slice(&frame).map_err(|e| ClientError::Protocol(format!("frame: {e}")))
    }

    /// The next daemon frame's bytes, reassembled and decrypted but not parsed.
    pub async fn recv_bytes(&mut self) -> Result<Vec<u8>, ClientError> {
        loop {
            let msg = next_bytes(&mut self.ws).await?;
            if let Some(frame) = self.channel.open(&msg)? {
                return Ok(frame);
            }
        }
    }

    /// Reads frames until one has `type` == `kind`.
    pub async fn recv_type(&mut self, kind: &str) -> Result<Value, ClientError> {
        loop {
            let frame = self.recv().await?;
            if frame["type"] == kind {
                return Ok(frame);
            }
        }
    }

    /// Waits for the stream to end: the close code and reason (frames before it are skipped).
    pub async fn closed(&mut self) -> (u16, String) {
        loop {
            match next_binary(&mut self.ws).await {
                Ok(_) => continue,
                Err(ClientError::Closed(code, reason)) => return (code, reason),
                Err(_) => return (1006, String::new()),
            }
        }
    }

    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}

/// The next binary message; a close becomes [`ClientError::Closed`].
pub async fn next_binary(ws: &mut ClientWs) -> Result<Vec<u8>, ClientError> {
    Ok(next_bytes(ws).await?.into())
}

/// [`next_binary`] as a slice of the socket's read buffer. That buffer is shared with the
/// messages read along with this one, so making a `Vec` of it copies the message.
async fn next_bytes(ws: &mut ClientWs) -> Result<Bytes, ClientError> {
    loop {
        match ws.next().await {
            None => return Err(ClientError::Closed(1006, String::new())),
            Some(Err(tungstenite::Error::ConnectionClosed)) => {
                return Err(ClientError::Closed(1006, String::new()));
            }
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(Message::Binary(b))) => return Ok(b),
            Some(Ok(Message::Close(frame))) => {
                let (code, reason) = frame
                    .map(|f| (u16::from(f.code), f.reason.to_string()))
                    .unwrap_or((1005, String::new()));
                return Err(ClientError::Closed(code, reason));
            }
            Some(Ok(Message::Text(_))) => {
                return Err(ClientError::Protocol("a text frame from the relay".into()));
            }
            Some(Ok(_)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_links_parse_like_the_page() {
        let key = crate::identity::b64(&[7u8; 32]);
        let link = format!("https://h.example/remote#pair=Q2xhdWRlSG9zdElkMDAwMA.{key}.K7QW2MZP");
        let parsed = parse_pair_link(&link).unwrap();
        assert_eq!(parsed.origin, "https://h.example");
        assert_eq!(parsed.host, "Q2xhdWRlSG9zdElkMDAwMA");
        assert_eq!(parsed.host_static, vec![7u8; 32]);
        assert_eq!(parsed.code, "K7QW2MZP");
        assert!(parse_pair_link("https://h/remote#pair=short.key.CODE").is_none());
        assert!(parse_pair_link(&format!("{link}.extra")).is_none());
    }
}
