//! The seat's bounded inbox: dedupe by id, attention and channel modes deciding
//! what wakes the agent, and the batch a turn carries (acked only after success).
//!
//! Pure state, generic over the ack handle `A`, so the rules are unit tested
//! without a broker.

use std::collections::{HashMap, HashSet, VecDeque};

/// How a message was addressed to us (from the subject kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Dm,
    Anycast,
}

/// Global attention mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attention {
    Open,
    Dnd,
    Focus,
}

impl Attention {
    pub fn as_str(self) -> &'static str {
        match self {
            Attention::Open => "open",
            Attention::Dnd => "dnd",
            Attention::Focus => "focus",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "open" => Some(Attention::Open),
            "dnd" => Some(Attention::Dnd),
            "focus" => Some(Attention::Focus),
            _ => None,
        }
    }
}

/// Per-channel override.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelMode {
    Normal,
    Quiet,
    Muted,
}

/// One received message, as the agent will see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub id: String,
    pub ts: f64,
    pub from_id: String,
    pub from_name: String,
    pub from_role: Option<String>,
    pub kind: Kind,
    pub channel: Option<String>,
    pub service: Option<String>,
    pub mentions_me: bool,
    pub historical: bool,
    pub text: String,
}

impl Item {
    pub fn directed(&self) -> bool {
        self.kind != Kind::Channel
    }
}

/// An item with its ack handle (`None` for live channel copies, which have nothing to ack).
#[derive(Debug)]
pub struct Entry<A> {
    pub item: Item,
    pub ack: Option<A>,
}

/// Where an accepted item went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Enters the agent's context with the next turn.
    Automatic { wakes: bool },
    /// Held for `cotal_inbox`; `mention_wake` starts a turn that tells the agent to pull.
    PullOnly { mention_wake: bool },
}

/// The result of offering a delivery.
#[derive(Debug)]
pub enum Offer<A> {
    Accepted(Placement),
    /// Seen before. When the id was already handled the caller acks this handle.
    Duplicate {
        ack_now: Option<A>,
    },
    /// Muted channel: dropped on receive; the caller acks the handle.
    Dropped {
        ack_now: Option<A>,
    },
}

/// Most items held at once (`MAX_INBOX`).
pub const MAX_INBOX: usize = 200;
/// How many handled ids are remembered for dedupe.
const SEEN_CAP: usize = 8192;

/// The inbox.
pub struct Inbox<A> {
    automatic: VecDeque<Entry<A>>,
    pull: VecDeque<Entry<A>>,
    in_flight: Vec<Entry<A>>,
    /// Carried by a soft interrupt whose turn is not known yet: outside
    /// `finish_turn` until the interrupt's outcome decides them.
    steering: Vec<Entry<A>>,
    held: HashSet<String>,
    handled: HashSet<String>,
    handled_order: VecDeque<String>,
    wake: bool,
    mention_wake: bool,
    cap: usize,
    pub attention: Attention,
    pub modes: HashMap<String, ChannelMode>,
    pub last_drained_ms: Option<u64>,
}

impl<A> Default for Inbox<A> {
    fn default() -> Self {
        Self::new(MAX_INBOX)
    }
}

impl<A> Inbox<A> {
    pub fn new(cap: usize) -> Self {
        Inbox {
            automatic: VecDeque::new(),
            pull: VecDeque::new(),
            in_flight: Vec::new(),
            steering: Vec::new(),
            held: HashSet::new(),
            handled: HashSet::new(),
            handled_order: VecDeque::new(),
            wake: false,
            mention_wake: false,
            cap: cap.max(1),
            attention: Attention::Open,
            modes: HashMap::new(),
            last_drained_ms: None,
        }
    }

    pub fn mode(&self, channel: &str) -> ChannelMode {
        self.modes
            .get(channel)
            .copied()
            .unwrap_or(ChannelMode::Normal)
    }

    /// Decide where an item goes under the current attention and channel modes.
    pub fn place(&self, item: &Item) -> Option<Placement> {
        if item.kind != Kind::Channel {
            return Some(Placement::Automatic { wakes: true });
        }
        let mode = item
            .channel
            .as_deref()
            .map_or(ChannelMode::Normal, |c| self.mode(c));
        if mode == ChannelMode::Muted {
            return None;
        }
        if item.mentions_me {
            return Some(if self.attention == Attention::Focus {
                Placement::PullOnly { mention_wake: true }
            } else {
                Placement::Automatic { wakes: true }
            });
        }
        if item.historical || mode == ChannelMode::Quiet || self.attention == Attention::Focus {
            return Some(Placement::PullOnly {
                mention_wake: false,
            });
        }
        Some(Placement::Automatic {
            wakes: self.attention == Attention::Open,
        })
    }

    fn remember_handled(&mut self, id: &str) {
        if self.handled.insert(id.to_string()) {
            self.handled_order.push_back(id.to_string());
            if self.handled_order.len() > SEEN_CAP
                && let Some(old) = self.handled_order.pop_front()
            {
                self.handled.remove(&old);
            }
        }
    }

    fn find_held(&mut self, id: &str) -> Option<&mut Entry<A>> {
        self.automatic
            .iter_mut()
            .chain(self.pull.iter_mut())
            .chain(self.in_flight.iter_mut())
            .chain(self.steering.iter_mut())
            .find(|e| e.item.id == id)
    }

    /// Offer a delivery. Returns entries evicted to make room: directed ones are
    /// dropped un-acked (the broker redelivers them after `ack_wait`).
    pub fn offer(&mut self, item: Item, ack: Option<A>) -> (Offer<A>, Vec<Entry<A>>) {
        if self.handled.contains(&item.id) {
            return (Offer::Duplicate { ack_now: ack }, Vec::new());
        }
        if self.held.contains(&item.id) {
            // A second copy (live + durable, or a redelivery): keep the freshest ack handle.
            if let Some(entry) = self.find_held(&item.id)
                && ack.is_some()
            {
                entry.ack = ack;
            }
            return (Offer::Duplicate { ack_now: None }, Vec::new());
        }
        let Some(placement) = self.place(&item) else {
            self.remember_handled(&item.id);
            return (Offer::Dropped { ack_now: ack }, Vec::new());
        };
        let mut evicted = Vec::new();
        while self.automatic.len() + self.pull.len() >= self.cap {
            match self.evict_one() {
                Some(e) => evicted.push(e),
                None => break,
            }
        }
        self.held.insert(item.id.clone());
        let entry = Entry { item, ack };
        match placement {
            Placement::Automatic { wakes } => {
                self.automatic.push_back(entry);
                self.wake |= wakes;
            }
            Placement::PullOnly { mention_wake } => {
                self.pull.push_back(entry);
                self.mention_wake |= mention_wake;
            }
        }
        (Offer::Accepted(placement), evicted)
    }

    /// Oldest ambient first (pull-only, then automatic), then the oldest directed item.
    fn evict_one(&mut self) -> Option<Entry<A>> {
        let e = if let Some(i) = self.pull.iter().position(|e| !e.item.directed()) {
            self.pull.remove(i)
        } else if let Some(i) = self.automatic.iter().position(|e| !e.item.directed()) {
            self.automatic.remove(i)
        } else {
            self.automatic.pop_front().or_else(|| self.pull.pop_front())
        }?;
        self.held.remove(&e.item.id);
        Some(e)
    }

    /// Should a turn start now (if the agent is idle)?
    pub fn wants_turn(&self) -> bool {
        (self.wake && !self.automatic.is_empty()) || self.mention_wake
    }

    /// Is a directed item waiting (a candidate for a soft interrupt)?
    pub fn has_directed(&self) -> bool {
        self.automatic.iter().any(|e| e.item.directed())
    }

    /// Move every automatic item into the turn that starts now. Returns the
    /// items and whether the turn was woken by a pull-only mention.
    pub fn begin_turn(&mut self) -> (Vec<Item>, bool) {
        let mention = std::mem::take(&mut self.mention_wake);
        self.wake = false;
        let items: Vec<Item> = self.automatic.iter().map(|e| e.item.clone()).collect();
        self.in_flight.extend(self.automatic.drain(..));
        (items, mention)
    }

    /// Hand directed items to a soft interrupt. They stay out of the running
    /// turn's batch until [`Inbox::join_turn`] or [`Inbox::settle_steered`].
    pub fn take_directed(&mut self) -> Vec<Item> {
        let mut taken = Vec::new();
        let mut keep = VecDeque::new();
        for e in self.automatic.drain(..) {
            if e.item.directed() {
                taken.push(e.item.clone());
                self.steering.push(e);
            } else {
                keep.push_back(e);
            }
        }
        self.automatic = keep;
        taken
    }

    fn take_steered(&mut self, ids: &[String]) -> Vec<Entry<A>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.steering.len() {
            if ids.contains(&self.steering[i].item.id) {
                out.push(self.steering.remove(i));
            } else {
                i += 1;
            }
        }
        out
    }

    /// The soft interrupt joined the running turn: its items end with that turn.
    pub fn join_turn(&mut self, ids: &[String]) {
        let joined = self.take_steered(ids);
        self.in_flight.extend(joined);
    }

    /// The turn that carried a soft interrupt ended: on success its items are
    /// handled and their ack handles returned; otherwise they wait, un-acked,
    /// at the front of the queue.
    pub fn settle_steered(&mut self, ids: &[String], ok: bool, now_ms: u64) -> Vec<A> {
        let done = self.take_steered(ids);
        if ok {
            let mut acks = Vec::new();
            for e in done {
                self.held.remove(&e.item.id);
                self.remember_handled(&e.item.id);
                acks.extend(e.ack);
            }
            if !acks.is_empty() {
                self.last_drained_ms = Some(now_ms);
            }
            acks
        } else {
            for e in done.into_iter().rev() {
                self.automatic.push_front(e);
            }
            self.wake = !self.automatic.is_empty();
            Vec::new()
        }
    }

    /// A soft interrupt was not accepted: its items wait for the next turn.
    pub fn return_to_queue(&mut self, ids: &[String]) {
        let back = self.take_steered(ids);
        for e in back.into_iter().rev() {
            self.automatic.push_front(e);
        }
        self.wake = true;
    }

    /// The turn ended. On success every carried item is handled and its ack
    /// handle returned; on failure they go back to the front of the queue, un-acked.
    pub fn finish_turn(&mut self, ok: bool, now_ms: u64) -> Vec<A> {
        let flight = std::mem::take(&mut self.in_flight);
        if ok {
            let mut acks = Vec::new();
            for e in flight {
                self.held.remove(&e.item.id);
                self.remember_handled(&e.item.id);
                acks.extend(e.ack);
            }
            if !acks.is_empty() || self.last_drained_ms.is_none() {
                self.last_drained_ms = Some(now_ms);
            }
            acks
        } else {
            for e in flight.into_iter().rev() {
                self.automatic.push_front(e);
            }
            self.wake = !self.automatic.is_empty();
            Vec::new()
        }
    }

    /// Give up on the queued batch: drop it un-acked so the broker redelivers it.
    pub fn abandon_queue(&mut self) -> usize {
        let dropped: Vec<Entry<A>> = self.automatic.drain(..).collect();
        for e in &dropped {
            self.held.remove(&e.item.id);
        }
        self.wake = false;
        dropped.len()
    }

    /// `cotal_inbox`: the pull-only items; unless `peek`, they are handled and
    /// their ack handles returned.
    pub fn pull(&mut self, peek: bool, now_ms: u64) -> (Vec<Item>, Vec<A>) {
        let items: Vec<Item> = self.pull.iter().map(|e| e.item.clone()).collect();
        if peek {
            return (items, Vec::new());
        }
        let mut acks = Vec::new();
        for e in std::mem::take(&mut self.pull) {
            self.held.remove(&e.item.id);
            self.remember_handled(&e.item.id);
            acks.extend(e.ack);
        }
        self.mention_wake = false;
        self.last_drained_ms = Some(now_ms);
        (items, acks)
    }

    /// Items held now: (automatic, pull-only, in the running turn).
    pub fn counts(&self) -> (usize, usize, usize) {
        (
            self.automatic.len(),
            self.pull.len(),
            self.in_flight.len() + self.steering.len(),
        )
    }

    /// Arrival time of the oldest automatic item (queue age for presence activity).
    pub fn oldest_automatic_ts(&self) -> Option<f64> {
        self.automatic.front().map(|e| e.item.ts)
    }
}

/// Format the block injected into the agent's turn (Cotal's framing).
pub fn format_injection(items: &[Item]) -> String {
    let mut out = format!(
        "📨 Cotal — {} new message{} from peers:\n",
        items.len(),
        if items.len() == 1 { "" } else { "s" }
    );
    for item in items {
        let who = match &item.from_role {
            Some(r) => format!("{}/{}", item.from_name, r),
            None => item.from_name.clone(),
        };
        let hist = if item.historical { " (history)" } else { "" };
        let head = match item.kind {
            Kind::Dm => format!("DM from {who}{hist}"),
            Kind::Anycast => format!(
                "@{} (from {who}){hist}",
                item.service.as_deref().unwrap_or("?")
            ),
            Kind::Channel => format!("#{} {who}{hist}", item.channel.as_deref().unwrap_or("?")),
        };
        let body = item.text.replace('\n', "\n  ");
        out.push_str(&format!("• {head}: {body}\n"));
    }
    out.push_str(
        "Reply with cotal_dm / cotal_send / cotal_anycast; plain output is not seen by peers.",
    );
    out
}

/// The turn text when only a pull-only @mention woke the agent.
pub fn mention_notice(count: usize) -> String {
    format!(
        "📨 Cotal — you were @mentioned; {count} message(s) are held for you. Call cotal_inbox to read them."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, kind: Kind, channel: Option<&str>, mention: bool) -> Item {
        Item {
            id: id.into(),
            ts: 1.0,
            from_id: "local.bob".into(),
            from_name: "bob".into(),
            from_role: None,
            kind,
            channel: channel.map(str::to_string),
            service: None,
            mentions_me: mention,
            historical: false,
            text: format!("text {id}"),
        }
    }

    #[test]
    fn acks_only_after_a_successful_turn_and_requeues_on_failure() {
        let mut ib: Inbox<u32> = Inbox::default();
        assert!(matches!(
            ib.offer(item("a", Kind::Dm, None, false), Some(1)).0,
            Offer::Accepted(_)
        ));
        assert!(ib.wants_turn());
        let (items, _) = ib.begin_turn();
        assert_eq!(items.len(), 1);
        assert!(
            ib.finish_turn(false, 10).is_empty(),
            "no ack after a failed turn"
        );
        assert_eq!(ib.counts(), (1, 0, 0));
        let (items, _) = ib.begin_turn();
        assert_eq!(items[0].id, "a");
        assert_eq!(ib.finish_turn(true, 11), vec![1]);
        // A redelivery of a handled id is acked at once and not surfaced again.
        assert!(matches!(
            ib.offer(item("a", Kind::Dm, None, false), Some(2)).0,
            Offer::Duplicate { ack_now: Some(2) }
        ));
    }

    #[test]
    fn live_and_durable_copies_dedupe_keeping_the_ack_handle() {
        let mut ib: Inbox<u32> = Inbox::default();
        ib.offer(item("c", Kind::Channel, Some("general"), false), None);
        let (o, _) = ib.offer(item("c", Kind::Channel, Some("general"), false), Some(7));
        assert!(matches!(o, Offer::Duplicate { ack_now: None }));
        ib.begin_turn();
        assert_eq!(ib.finish_turn(true, 1), vec![7]);
    }

    #[test]
    fn quiet_and_muted_channels() {
        let mut ib: Inbox<u32> = Inbox::default();
        ib.modes.insert("q".into(), ChannelMode::Quiet);
        ib.modes.insert("m".into(), ChannelMode::Muted);
        let (o, _) = ib.offer(item("1", Kind::Channel, Some("q"), false), None);
        assert!(matches!(
            o,
            Offer::Accepted(Placement::PullOnly {
                mention_wake: false
            })
        ));
        assert!(!ib.wants_turn(), "quiet chatter never wakes");
        let (o, _) = ib.offer(item("2", Kind::Channel, Some("m"), true), Some(3));
        assert!(
            matches!(o, Offer::Dropped { ack_now: Some(3) }),
            "muted drops mentions too"
        );
        let (o, _) = ib.offer(item("3", Kind::Channel, Some("q"), true), None);
        assert!(
            matches!(o, Offer::Accepted(Placement::Automatic { wakes: true })),
            "a mention on a quiet channel wakes"
        );
        let (o, _) = ib.offer(item("4", Kind::Dm, None, false), None);
        assert!(matches!(
            o,
            Offer::Accepted(Placement::Automatic { wakes: true })
        ));
        let (pulled, _) = ib.pull(true, 1);
        assert_eq!(pulled.len(), 1);
        let (pulled, _) = ib.pull(false, 1);
        assert_eq!(pulled[0].id, "1");
        assert_eq!(ib.pull(false, 2).0.len(), 0);
    }

    #[test]
    fn attention_modes() {
        let mut ib: Inbox<u32> = Inbox {
            attention: Attention::Dnd,
            ..Inbox::default()
        };
        ib.offer(item("1", Kind::Channel, Some("g"), false), None);
        assert!(!ib.wants_turn(), "dnd chatter waits for the next turn");
        ib.offer(item("2", Kind::Anycast, None, false), None);
        assert!(ib.wants_turn());
        let (items, _) = ib.begin_turn();
        assert_eq!(items.len(), 2, "dnd chatter rides the next turn");
        ib.finish_turn(true, 1);

        ib.attention = Attention::Focus;
        ib.offer(item("3", Kind::Channel, Some("g"), false), None);
        assert!(!ib.wants_turn());
        ib.offer(item("4", Kind::Channel, Some("g"), true), None);
        assert!(
            ib.wants_turn(),
            "a mention in focus wakes the agent to pull"
        );
        let (items, mention) = ib.begin_turn();
        assert!(items.is_empty() && mention);
        assert_eq!(ib.counts().1, 2);
    }

    #[test]
    fn bounded_inbox_evicts_ambient_first_then_oldest_directed_unacked() {
        let mut ib: Inbox<u32> = Inbox::new(2);
        ib.offer(item("d1", Kind::Dm, None, false), Some(1));
        ib.offer(item("c1", Kind::Channel, Some("g"), false), None);
        let (_, ev) = ib.offer(item("d2", Kind::Dm, None, false), Some(2));
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].item.id, "c1");
        let (_, ev) = ib.offer(item("d3", Kind::Dm, None, false), Some(3));
        assert_eq!(ev[0].item.id, "d1");
        assert_eq!(
            ev[0].ack,
            Some(1),
            "evicted directed mail is handed back un-acked"
        );
        // The evicted id is not remembered, so its redelivery is accepted.
        let (o, _) = ib.offer(item("d1", Kind::Dm, None, false), Some(4));
        assert!(matches!(o, Offer::Accepted(_)));
    }

    #[test]
    fn soft_interrupt_items_return_to_queue_when_refused() {
        let mut ib: Inbox<u32> = Inbox::default();
        ib.offer(item("g", Kind::Channel, Some("g"), false), None);
        ib.begin_turn();
        ib.offer(item("d", Kind::Dm, None, false), Some(1));
        ib.offer(item("c", Kind::Channel, Some("g"), false), None);
        assert!(ib.has_directed());
        let taken = ib.take_directed();
        assert_eq!(taken.len(), 1);
        ib.return_to_queue(&["d".to_string()]);
        assert_eq!(ib.counts(), (2, 0, 1));
        let acks = ib.finish_turn(true, 1);
        assert!(acks.is_empty());
    }

    #[test]
    fn soft_interrupt_items_wait_for_the_turn_that_carries_them() {
        let mut ib: Inbox<u32> = Inbox::default();
        ib.offer(item("a", Kind::Dm, None, false), Some(1));
        ib.begin_turn();
        ib.offer(item("d", Kind::Dm, None, false), Some(2));
        assert_eq!(ib.take_directed().len(), 1);
        assert_eq!(ib.counts(), (0, 0, 2));
        // The running turn ends before the interrupt's outcome is known: only its own batch.
        assert_eq!(ib.finish_turn(true, 1), vec![1]);
        // A redelivered copy meanwhile is a duplicate, not a new item.
        let (o, _) = ib.offer(item("d", Kind::Dm, None, false), Some(3));
        assert!(matches!(o, Offer::Duplicate { ack_now: None }));
        // It ran as its own turn, which failed: back at the front, un-acked, with the fresh handle.
        assert!(ib.settle_steered(&["d".to_string()], false, 2).is_empty());
        assert_eq!(ib.counts(), (1, 0, 0));
        assert!(ib.wants_turn());
        let (items, _) = ib.begin_turn();
        assert_eq!(items[0].id, "d");
        assert_eq!(ib.finish_turn(true, 3), vec![3]);

        // Joined a running turn: acked with it.
        ib.begin_turn();
        ib.offer(item("e", Kind::Anycast, None, false), Some(4));
        ib.take_directed();
        ib.join_turn(&["e".to_string()]);
        assert_eq!(ib.finish_turn(true, 4), vec![4]);

        // Its own turn succeeded: acked then, not before.
        ib.offer(item("f", Kind::Dm, None, false), Some(5));
        ib.take_directed();
        assert!(ib.finish_turn(true, 5).is_empty());
        assert_eq!(ib.settle_steered(&["f".to_string()], true, 6), vec![5]);
        assert_eq!(ib.counts(), (0, 0, 0));
    }

    #[test]
    fn injection_block_framing() {
        let mut a = item("1", Kind::Dm, None, false);
        a.from_role = Some("reviewer".into());
        let mut b = item("2", Kind::Anycast, None, false);
        b.service = Some("builder".into());
        let mut c = item("3", Kind::Channel, Some("general"), false);
        c.historical = true;
        c.text = "two\nlines".into();
        let text = format_injection(&[a, b, c]);
        assert!(text.starts_with("📨 Cotal — 3 new messages from peers:\n"));
        assert!(text.contains("• DM from bob/reviewer: text 1\n"));
        assert!(text.contains("• @builder (from bob): text 2\n"));
        assert!(text.contains("• #general bob (history): two\n  lines\n"));
    }
}
