//! The binary framing on the host⇄relay link (relay-protocol §5).
//!
//! ```text
//! byte 0      kind: 1 = open, 2 = data, 3 = close
//! bytes 1..4  stream id, u32 big-endian, never 0
//! bytes 5..   payload (data frames only)
//! ```

/// One frame on the host link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A client connected; the relay assigned this stream id.
    Open(u32),
    /// Exactly one client WebSocket binary message.
    Data(u32, Vec<u8>),
    /// The stream ended (host → relay: close this client).
    Close(u32),
}

/// A frame read in place: the data payload borrows the wire bytes, so a relay can forward it
/// without copying (it starts at [`PAYLOAD_AT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameRef<'a> {
    Open(u32),
    Data(u32, &'a [u8]),
    Close(u32),
}

/// Where a data frame's payload starts.
pub const PAYLOAD_AT: usize = 5;

/// Why bytes are not a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("a frame needs at least 5 bytes, got {0}")]
    Short(usize),
    #[error("unknown frame kind {0}")]
    Kind(u8),
    #[error("stream id 0 is not allowed")]
    ZeroStream,
    #[error("{0} frames carry no payload")]
    Payload(&'static str),
}

const OPEN: u8 = 1;
const DATA: u8 = 2;
const CLOSE: u8 = 3;

impl Frame {
    /// The stream this frame belongs to.
    pub fn stream(&self) -> u32 {
        match self {
            Frame::Open(s) | Frame::Data(s, _) | Frame::Close(s) => *s,
        }
    }

    /// The wire bytes.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Frame::Open(s) => encode_parts(OPEN, *s, &[]),
            Frame::Data(s, p) => encode_parts(DATA, *s, p),
            Frame::Close(s) => encode_parts(CLOSE, *s, &[]),
        }
    }

    /// The header of a data frame on `stream`: a payload appended to it makes the frame.
    pub fn data_header(stream: u32) -> [u8; PAYLOAD_AT] {
        let id = stream.to_be_bytes();
        [DATA, id[0], id[1], id[2], id[3]]
    }

    /// The wire bytes of a data frame, straight from a borrowed payload (one copy).
    pub fn encode_data(stream: u32, payload: &[u8]) -> Vec<u8> {
        encode_parts(DATA, stream, payload)
    }

    /// Reads a frame; rejects short frames, unknown kinds, stream 0 and payloads on open/close.
    pub fn decode(bytes: &[u8]) -> Result<Frame, FrameError> {
        Ok(match Frame::decode_ref(bytes)? {
            FrameRef::Open(s) => Frame::Open(s),
            FrameRef::Data(s, p) => Frame::Data(s, p.to_vec()),
            FrameRef::Close(s) => Frame::Close(s),
        })
    }

    /// [`Frame::decode`] without copying the payload.
    pub fn decode_ref(bytes: &[u8]) -> Result<FrameRef<'_>, FrameError> {
        let (Some(&kind), Some(id)) = (bytes.first(), bytes.get(1..PAYLOAD_AT)) else {
            return Err(FrameError::Short(bytes.len()));
        };
        let stream = u32::from_be_bytes([id[0], id[1], id[2], id[3]]);
        let payload = &bytes[PAYLOAD_AT..];
        if !(OPEN..=CLOSE).contains(&kind) {
            return Err(FrameError::Kind(kind));
        }
        if stream == 0 {
            return Err(FrameError::ZeroStream);
        }
        match kind {
            OPEN if payload.is_empty() => Ok(FrameRef::Open(stream)),
            OPEN => Err(FrameError::Payload("open")),
            DATA => Ok(FrameRef::Data(stream, payload)),
            _ if payload.is_empty() => Ok(FrameRef::Close(stream)),
            _ => Err(FrameError::Payload("close")),
        }
    }
}

fn encode_parts(kind: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PAYLOAD_AT + payload.len());
    out.push(kind);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_from_the_notes() {
        assert_eq!(Frame::Data(258, vec![9]).encode(), vec![2, 0, 0, 1, 2, 9]);
        assert_eq!(
            Frame::decode(&[2, 0, 0, 1, 2, 9]).unwrap(),
            Frame::Data(258, vec![9])
        );
    }

    #[test]
    fn open_and_close_round_trip() {
        for f in [
            Frame::Open(1),
            Frame::Close(u32::MAX),
            Frame::Data(7, vec![]),
        ] {
            assert_eq!(Frame::decode(&f.encode()).unwrap(), f);
        }
        assert_eq!(Frame::Open(0x01020304).encode(), vec![1, 1, 2, 3, 4]);
    }

    /// Random bytes never panic the decoder, and whatever decodes encodes back to itself.
    #[test]
    fn random_input_round_trips_or_is_refused() {
        use ring::rand::SecureRandom;
        let rng = ring::rand::SystemRandom::new();
        let mut buf = [0u8; 12];
        for i in 0..20_000 {
            rng.fill(&mut buf).unwrap();
            // Bias toward valid kinds so both outcomes are exercised.
            buf[0] %= 5;
            let len = i % buf.len();
            let by_ref = Frame::decode_ref(&buf[..len]);
            match Frame::decode(&buf[..len]) {
                Ok(f) => {
                    assert_eq!(f.encode(), buf[..len].to_vec());
                    if let Frame::Data(s, p) = &f {
                        assert_eq!(by_ref, Ok(FrameRef::Data(*s, p)));
                        assert_eq!(Frame::encode_data(*s, p), buf[..len].to_vec());
                        assert_eq!(Frame::data_header(*s)[..], buf[..PAYLOAD_AT]);
                    }
                }
                Err(e) => assert_eq!(by_ref, Err(e)),
            }
        }
    }

    #[test]
    fn bad_frames_are_refused() {
        assert_eq!(Frame::decode(&[]), Err(FrameError::Short(0)));
        assert_eq!(Frame::decode(&[2, 0, 0, 1]), Err(FrameError::Short(4)));
        assert_eq!(Frame::decode(&[0, 0, 0, 0, 1]), Err(FrameError::Kind(0)));
        assert_eq!(Frame::decode(&[4, 0, 0, 0, 1]), Err(FrameError::Kind(4)));
        assert_eq!(
            Frame::decode(&[255, 0, 0, 0, 1]),
            Err(FrameError::Kind(255))
        );
        assert_eq!(
            Frame::decode(&[2, 0, 0, 0, 0, 1]),
            Err(FrameError::ZeroStream)
        );
        assert_eq!(
            Frame::decode(&[1, 0, 0, 0, 1, 9]),
            Err(FrameError::Payload("open"))
        );
        assert_eq!(
            Frame::decode(&[3, 0, 0, 0, 1, 9]),
            Err(FrameError::Payload("close"))
        );
    }
}
