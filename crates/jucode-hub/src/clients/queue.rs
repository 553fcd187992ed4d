//! A client's outgoing queue: the hub offers frames one at a time, the front end takes them a
//! batch at a time, and both bounds (frames and bytes) are checked and counted under the same
//! lock as the queue itself.
//!
//! Written here rather than taken from a channel crate because of that batch take and those
//! two bounds: with tokio's unbounded channel each frame cost a push, a pop and four counter
//! updates on every client (about a seventh of the daemon's time on a stream to ten clients),
//! and a bounded channel hands a permit back under a lock for every frame taken. Here a frame
//! costs one uncontended lock to queue, a batch one lock to take, and the writer is woken only
//! when its queue goes from empty to not.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::{CLIENT_QUEUE, CLIENT_QUEUE_BYTES, Outgoing};

/// What became of a frame offered to a client's queue.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Offer {
    Taken,
    /// The front end is gone: forget the client.
    Closed,
    /// Over the queue's frames or bytes: drop the client with `client too slow`.
    TooSlow,
}

/// Why [`Frames::try_recv`] gave nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryRecvError {
    /// Nothing is waiting now.
    Empty,
    /// The hub dropped the client and everything queued has been taken.
    Disconnected,
}

#[derive(Debug, Default)]
struct State {
    frames: VecDeque<Outgoing>,
    /// The bytes of the frames in `frames`.
    bytes: usize,
    /// The hub dropped its end: what is queued is the last.
    closed: bool,
    /// The front end dropped its end: nothing more is queued.
    gone: bool,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the front end when its queue stops being empty, or closes.
    ready: Notify,
}

impl Shared {
    /// The state; a panic elsewhere while it was held leaves nothing half-done in it.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A new queue: the hub's end and the front end's.
pub(super) fn queue() -> (Sender, Frames) {
    let shared = Arc::new(Shared::default());
    (
        Sender {
            shared: shared.clone(),
        },
        Frames { shared },
    )
}

/// The hub's end. Dropping it closes the queue: the front end takes what is left, then ends.
#[derive(Debug)]
pub(super) struct Sender {
    shared: Arc<Shared>,
}

impl Sender {
    /// Queues `frame` unless the client is behind (`bounded`: the byte budget applies; a
    /// frame arriving at an empty queue is always taken, so no frame is too big to send).
    /// The frame bound holds for a connect batch too.
    pub(super) fn offer(&self, frame: Outgoing, bounded: bool) -> Offer {
        let len = frame.len();
        let mut state = self.shared.lock();
        if state.gone {
            return Offer::Closed;
        }
        if bounded && state.bytes > 0 && state.bytes.saturating_add(len) > CLIENT_QUEUE_BYTES {
            return Offer::TooSlow;
        }
        if state.frames.len() >= CLIENT_QUEUE {
            return Offer::TooSlow;
        }
        let was_empty = state.frames.is_empty();
        state.frames.push_back(frame);
        state.bytes += len;
        drop(state);
        // A writer that found its queue empty waits for this; one that did not has not yet
        // taken what is there and will see this frame when it does.
        if was_empty {
            self.shared.ready.notify_one();
        }
        Offer::Taken
    }

    /// Bytes queued and not yet taken.
    pub(super) fn backlog(&self) -> usize {
        self.shared.lock().bytes
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.ready.notify_one();
    }
}

/// A client's queue as the front end reads it; taking a frame frees its place in the budget.
#[derive(Debug)]
pub struct Frames {
    shared: Arc<Shared>,
}

impl Frames {
    /// The next frame; `None` once the hub dropped the client and the queue is empty.
    pub async fn recv(&mut self) -> Option<Outgoing> {
        loop {
            match self.try_recv() {
                Ok(frame) => return Some(frame),
                Err(TryRecvError::Disconnected) => return None,
                // A frame queued between the look and this wait left a wake-up behind (the
                // notification is kept when no one waits), so none is missed.
                Err(TryRecvError::Empty) => self.shared.ready.notified().await,
            }
        }
    }

    /// The next frame if one is waiting.
    pub fn try_recv(&mut self) -> Result<Outgoing, TryRecvError> {
        let mut state = self.shared.lock();
        match state.frames.pop_front() {
            Some(frame) => {
                state.bytes -= frame.len();
                Ok(frame)
            }
            None if state.closed => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// Moves up to `max` waiting frames into `into`, under one lock; how many it moved.
    pub fn take(&mut self, into: &mut Vec<Outgoing>, max: usize) -> usize {
        let mut state = self.shared.lock();
        let n = max.min(state.frames.len());
        let mut bytes = 0;
        into.extend(state.frames.drain(..n).inspect(|f| bytes += f.len()));
        state.bytes -= bytes;
        n
    }
}

impl Drop for Frames {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.gone = true;
        // Nothing will take them: free them now rather than when the hub forgets the client.
        let frames = std::mem::take(&mut state.frames);
        state.bytes = 0;
        drop(state);
        drop(frames);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn frame(text: &str) -> Outgoing {
        Outgoing::Frame(text.into())
    }

    #[tokio::test]
    async fn frames_come_out_in_order_in_batches_and_free_their_bytes() {
        let (tx, mut rx) = queue();
        for f in ["a", "bb", "ccc", "dddd"] {
            assert_eq!(tx.offer(frame(f), true), Offer::Taken);
        }
        assert_eq!(tx.backlog(), 10);
        assert_eq!(rx.recv().await, Some(frame("a")));
        let mut batch = Vec::new();
        assert_eq!(rx.take(&mut batch, 2), 2);
        assert_eq!(batch, vec![frame("bb"), frame("ccc")]);
        assert_eq!(tx.backlog(), 4);
        assert_eq!(rx.take(&mut batch, 64), 1);
        assert_eq!(rx.take(&mut batch, 64), 0);
        assert_eq!(tx.backlog(), 0);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    }

    #[tokio::test]
    async fn a_waiting_reader_is_woken_by_a_frame_and_by_the_close() {
        let (tx, mut rx) = queue();
        let reader = tokio::spawn(async move {
            let first = rx.recv().await;
            let end = rx.recv().await;
            (first, end)
        });
        tokio::task::yield_now().await;
        assert_eq!(tx.offer(frame("x"), true), Offer::Taken);
        drop(tx);
        assert_eq!(reader.await.unwrap(), (Some(frame("x")), None));
    }

    #[tokio::test]
    async fn what_was_queued_before_the_close_is_still_taken() {
        let (tx, mut rx) = queue();
        tx.offer(frame("last"), true);
        drop(tx);
        assert_eq!(rx.recv().await, Some(frame("last")));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
        assert_eq!(rx.recv().await, None);
    }

    #[test]
    fn a_gone_reader_closes_the_queue_and_frees_it() {
        let (tx, rx) = queue();
        tx.offer(frame("x"), true);
        drop(rx);
        assert_eq!(tx.backlog(), 0);
        assert_eq!(tx.offer(frame("y"), true), Offer::Closed);
    }

    #[test]
    fn the_frame_bound_holds_even_for_unbounded_offers() {
        let (tx, _rx) = queue();
        for _ in 0..CLIENT_QUEUE {
            assert_eq!(tx.offer(frame("x"), false), Offer::Taken);
        }
        assert_eq!(tx.offer(frame("x"), false), Offer::TooSlow);
    }
}
