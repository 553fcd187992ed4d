//! Host-link writers that flush once per burst. A host link carries every stream of its host,
//! and its writer (the relay's, the daemon's) takes encoded frames from a queue; writing and
//! flushing each on its own costs a socket write, and on the far side a read and a wake-up,
//! per frame. [`send_batch`] writes a frame together with the frames already queued behind
//! it, then flushes once.
//!
//! Only host links batch. A relay's writer to one phone sends each message as it comes: with
//! its frames batched too, one stream's frames crossed every hop in trains, and the phone and
//! the host took turns instead of working at once (relay bench, one stream on two cores).

use futures_util::{Sink, SinkExt};
use tokio_tungstenite::tungstenite::Message;

/// A batch stops taking queued frames once it holds this many bytes: tungstenite writes its
/// buffer out past 128 KiB anyway, and a batch stays small next to the writers' time limits.
pub const BATCH_BYTES: usize = 128 * 1024;

/// Writes the encoded frame `first`, then each frame `more` hands over without waiting (it
/// returns `None` when its queue is empty or the batch must end), up to [`BATCH_BYTES`], and
/// flushes once.
pub async fn send_batch<S>(
    sink: &mut S,
    first: Vec<u8>,
    mut more: impl FnMut() -> Option<Vec<u8>>,
) -> Result<(), S::Error>
where
    S: Sink<Message> + Unpin,
{
    let mut bytes = first.len();
    sink.feed(Message::binary(first)).await?;
    while bytes < BATCH_BYTES {
        let Some(next) = more() else { break };
        bytes += next.len();
        sink.feed(Message::binary(next)).await?;
    }
    sink.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// Records the sizes of what was fed and where the flushes fell.
    #[derive(Default)]
    struct Recorder {
        log: Vec<String>,
    }

    impl Sink<Message> for Recorder {
        type Error = std::convert::Infallible;
        fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }
        fn start_send(mut self: Pin<&mut Self>, item: Message) -> Result<(), Self::Error> {
            self.log.push(item.len().to_string());
            Ok(())
        }
        fn poll_flush(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Result<(), Self::Error>> {
            self.log.push("flush".into());
            Poll::Ready(Ok(()))
        }
        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn queued_frames_share_one_flush() {
        let mut sink = Recorder::default();
        let mut queue = vec![vec![0u8; 2], vec![0u8; 3]].into_iter();
        send_batch(&mut sink, vec![0u8; 1], || queue.next())
            .await
            .unwrap();
        assert_eq!(sink.log, ["1", "2", "3", "flush"]);
    }

    #[tokio::test]
    async fn a_full_batch_leaves_the_rest_queued() {
        let mut sink = Recorder::default();
        let mut queue = vec![vec![0u8; BATCH_BYTES], vec![0u8; 7]].into_iter();
        send_batch(&mut sink, vec![0u8; 1], || queue.next())
            .await
            .unwrap();
        assert_eq!(sink.log, ["1", &BATCH_BYTES.to_string(), "flush"]);
        assert_eq!(queue.next().map(|f| f.len()), Some(7));
    }
}
