//! Workflow run turns on the seat (spec: "A run turn rides the message that
//! starts a Cotal-owned turn"). A run turn the manager hands the seat is not a
//! turn of its own: it rides the text of the next turn the seat starts through
//! the Harness API, counts as shown once the Harness accepts that message, and
//! only then may the agent settle it with `cotal_yield`. A send the Harness
//! never accepts leaves it unshown, and the next Cotal-owned turn carries it
//! again. The manager extension (`extension/cotal-jcode/src/run-turns.ts`)
//! keeps the same rule; both replay
//! `extension/cotal-jcode/test/fixtures/run-turns.json`.

use std::collections::HashSet;

/// One workflow run turn addressed to the seat.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct RunTurn {
    /// The id `cotal_yield` names.
    pub turn: String,
    pub run: String,
    pub step: String,
    /// What the step asks of the agent.
    pub text: String,
}

#[derive(Debug)]
struct Entry {
    turn: RunTurn,
    shown: bool,
    /// The send this turn rides while that send is unanswered.
    riding: Option<u64>,
}

/// Offered, carried, shown, settled: in the order the manager offered them.
#[derive(Debug, Default)]
pub struct Ledger {
    open: Vec<Entry>,
    settled: HashSet<String>,
}

/// The text a run turn adds to the message it rides.
pub fn block(t: &RunTurn) -> String {
    format!(
        "🧭 Cotal — workflow run turn {} (run {}, step {}):\n{}\nSettle it with cotal_yield {{\"turn\": \"{}\", \"status\": \"done\" | \"blocked\" | \"handoff\"}}.",
        t.turn, t.run, t.step, t.text, t.turn
    )
}

impl Ledger {
    /// The manager handed the seat `turn`; a repeat or a settled one is ignored.
    pub fn offer(&mut self, turn: RunTurn) -> bool {
        if self.settled.contains(&turn.turn) || self.open.iter().any(|e| e.turn.turn == turn.turn) {
            return false;
        }
        self.open.push(Entry {
            turn,
            shown: false,
            riding: None,
        });
        true
    }

    /// The seat is about to send the message that starts Cotal-owned turn
    /// `send`: every unshown run turn not riding another send rides this one.
    /// Returns the text to append to that message.
    pub fn carry(&mut self, send: u64) -> Option<String> {
        let blocks: Vec<String> = self
            .open
            .iter_mut()
            .filter(|e| !e.shown && e.riding.is_none())
            .map(|e| {
                e.riding = Some(send);
                block(&e.turn)
            })
            .collect();
        (!blocks.is_empty()).then(|| blocks.join("\n\n"))
    }

    /// An unshown run turn waits for a send to ride: the seat starts a turn
    /// for it even with no mail.
    pub fn wants_send(&self) -> bool {
        self.open.iter().any(|e| !e.shown && e.riding.is_none())
    }

    /// The Harness accepted send `send`: what rode it is shown. Returns those ids.
    pub fn accepted(&mut self, send: u64) -> Vec<String> {
        let mut shown = Vec::new();
        for e in self.open.iter_mut().filter(|e| e.riding == Some(send)) {
            e.shown = true;
            e.riding = None;
            shown.push(e.turn.turn.clone());
        }
        shown
    }

    /// Send `send` was never accepted (refused, or the connection closed
    /// first): what rode it stays unshown, for the next turn to carry.
    pub fn not_accepted(&mut self, send: u64) {
        for e in self.open.iter_mut().filter(|e| e.riding == Some(send)) {
            e.riding = None;
        }
    }

    /// Why the agent may not settle `turn` now, or `None` when it may.
    pub fn yield_refusal(&self, turn: &str) -> Option<String> {
        if self.settled.contains(turn) {
            return Some(format!("run turn {turn} is already settled"));
        }
        match self.open.iter().find(|e| e.turn.turn == turn) {
            None => Some(format!("run turn {turn} was never given to this seat")),
            Some(e) if !e.shown => Some(format!(
                "run turn {turn} has not been shown yet: it rides the next turn"
            )),
            Some(_) => None,
        }
    }

    /// The manager took the yield for `turn`.
    pub fn settle(&mut self, turn: &str) {
        self.open.retain(|e| e.turn.turn != turn);
        self.settled.insert(turn.to_string());
    }

    /// Shown and not settled: what ending the host turn auto-yields `done`.
    pub fn open_shown(&self) -> Vec<String> {
        self.ids(true)
    }

    /// Offered and not yet shown.
    pub fn unshown(&self) -> Vec<String> {
        self.ids(false)
    }

    fn ids(&self, shown: bool) -> Vec<String> {
        self.open
            .iter()
            .filter(|e| e.shown == shown)
            .map(|e| e.turn.turn.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(id: &str) -> RunTurn {
        RunTurn {
            turn: id.into(),
            run: "r".into(),
            step: "s".into(),
            text: "do it".into(),
        }
    }

    #[test]
    fn a_turn_is_yieldable_only_after_the_send_that_carried_it_was_accepted() {
        let mut l = Ledger::default();
        assert!(l.offer(t("a")));
        assert!(l.carry(1).unwrap().contains("run turn a"));
        assert!(l.yield_refusal("a").unwrap().contains("not been shown"));
        // While send 1 is unanswered, a second send does not carry it twice.
        assert_eq!(l.carry(2), None);
        assert!(!l.wants_send());
        l.not_accepted(1);
        assert!(l.wants_send());
        assert!(
            l.carry(3).is_some(),
            "carried again after a send never accepted"
        );
        assert_eq!(l.accepted(3), vec!["a"]);
        assert_eq!(l.yield_refusal("a"), None);
        assert_eq!(l.accepted(3), Vec::<String>::new());
        l.settle("a");
        assert!(!l.offer(t("a")), "a settled turn is not offered again");
    }
}
