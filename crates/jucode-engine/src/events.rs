//! [`Events`]: the hub's end of an engine's output, read as one ordered sequence whether the
//! engine feeds a channel from tasks of its own or is read where its output is taken.

use std::task::{Context, Poll};

use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;
use tokio::sync::mpsc;

use crate::EngineOutput;

/// An engine's outputs, in order, ending with [`EngineOutput::Exited`].
///
/// A process engine is read where its output is taken ([`Events::reading`]): the hub's pump
/// then parses a line and applies it in one task, with no channel and no other task to wake
/// in between, which for a stream of deltas was a fair part of each one's cost. Engines that
/// produce events from tasks of their own hand over a channel.
pub struct Events {
    inner: Inner,
}

enum Inner {
    Channel(mpsc::Receiver<EngineOutput>),
    Reading(BoxStream<'static, EngineOutput>),
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            Inner::Channel(_) => f.write_str("Events(channel)"),
            Inner::Reading(_) => f.write_str("Events(reading)"),
        }
    }
}

/// Why [`Events::try_recv`] gave nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryRecvError {
    /// Nothing is ready now.
    Empty,
    /// The engine's outputs have ended.
    Disconnected,
}

impl From<mpsc::Receiver<EngineOutput>> for Events {
    fn from(rx: mpsc::Receiver<EngineOutput>) -> Events {
        Events {
            inner: Inner::Channel(rx),
        }
    }
}

impl Events {
    /// Outputs produced by polling `stream`, which must end after [`EngineOutput::Exited`].
    /// A poll that finds nothing ready leaves the stream where it was, so taking outputs may
    /// stop at any point without losing one.
    pub fn reading(stream: BoxStream<'static, EngineOutput>) -> Events {
        Events {
            inner: Inner::Reading(stream),
        }
    }

    /// The next output; `None` once they have ended.
    pub async fn recv(&mut self) -> Option<EngineOutput> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// The next output if one is ready now.
    pub fn try_recv(&mut self) -> Result<EngineOutput, TryRecvError> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match self.poll_recv(&mut cx) {
            Poll::Ready(Some(output)) => Ok(output),
            Poll::Ready(None) => Err(TryRecvError::Disconnected),
            Poll::Pending => Err(TryRecvError::Empty),
        }
    }

    /// Waits for at least one output, then adds what else is ready, up to `limit` in all.
    /// Returns how many were added; 0 once the outputs have ended.
    pub async fn recv_many(&mut self, buf: &mut Vec<EngineOutput>, limit: usize) -> usize {
        if let Inner::Channel(rx) = &mut self.inner {
            return rx.recv_many(buf, limit).await;
        }
        let Some(first) = self.recv().await else {
            return 0;
        };
        buf.push(first);
        let mut n = 1;
        while n < limit {
            let Ok(output) = self.try_recv() else { break };
            buf.push(output);
            n += 1;
        }
        n
    }

    /// Polls for the next output.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<EngineOutput>> {
        match &mut self.inner {
            Inner::Channel(rx) => rx.poll_recv(cx),
            Inner::Reading(stream) => stream.poll_next_unpin(cx),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn delta(n: usize) -> EngineOutput {
        EngineOutput::Delta(n.to_string())
    }

    #[tokio::test]
    async fn a_read_stream_gives_what_is_ready_in_order_and_then_ends() {
        let (tx, rx) = mpsc::channel::<EngineOutput>(16);
        // A stream that is sometimes not ready: the outputs come through a channel fed later.
        let stream =
            futures_util::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|o| (o, rx)) },
            );
        let mut events = Events::reading(stream.boxed());
        assert_eq!(events.try_recv(), Err(TryRecvError::Empty));
        for n in 0..5 {
            tx.send(delta(n)).await.unwrap();
        }
        let mut buf = Vec::new();
        assert_eq!(events.recv_many(&mut buf, 3).await, 3);
        assert_eq!(events.recv_many(&mut buf, 64).await, 2);
        assert_eq!(buf, (0..5).map(delta).collect::<Vec<_>>());
        let reader = tokio::spawn(async move {
            let last = events.recv().await;
            (last, events.recv().await)
        });
        tokio::task::yield_now().await;
        tx.send(EngineOutput::Exited { error: None }).await.unwrap();
        drop(tx);
        assert_eq!(
            reader.await.unwrap(),
            (Some(EngineOutput::Exited { error: None }), None)
        );
    }
}
