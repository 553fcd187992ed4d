//! Turns that end without succeeding: an unsolicited `error` frame (every
//! build) or `turn_stopped{reason}` (newer builds). Both are read by meaning:
//! a failed or interrupted turn is never acknowledged as a success, and the
//! presence condition is the Harness's own code, never a guess from its text.

use super::*;

/// Why a turn stopped without success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stop {
    /// The native code relayed as the presence condition (`None`: no condition,
    /// e.g. an interrupt someone asked for).
    pub condition: Option<String>,
    /// The code the turn's failure carries.
    pub code: String,
    pub message: String,
}

/// `turn_stopped` reasons newer builds send, and whether one is a failure
/// condition for presence (an interrupt is not: someone asked for it).
pub(crate) const STOP_REASONS: [(&str, bool); 6] = [
    ("interrupted", false),
    ("failure", true),
    ("crash", true),
    ("provider_guardrail", true),
    ("limit_reached", true),
    ("unknown", true),
];

impl Stop {
    /// An `error` frame: its code is the condition.
    pub(crate) fn error(code: String, message: String) -> Stop {
        Stop {
            condition: Some(code.clone()),
            code,
            message,
        }
    }

    /// `turn_stopped`: any reason, known or not, ends the turn unsuccessfully.
    pub(crate) fn stopped(reason: &str, message: String) -> Stop {
        let reason = if reason.is_empty() { "unknown" } else { reason };
        let condition = STOP_REASONS
            .iter()
            .find(|(r, _)| *r == reason)
            .is_none_or(|(_, c)| *c);
        let message = if message.is_empty() {
            format!("the turn stopped ({reason})")
        } else {
            message
        };
        Stop {
            condition: condition.then(|| reason.to_string()),
            code: reason.to_string(),
            message,
        }
    }

    /// jcode's refusal of a message sent while it still processes another.
    pub(crate) fn is_busy(&self) -> bool {
        self.message.contains("Already processing")
    }

    pub(crate) fn failure(&self) -> TurnFailure {
        TurnFailure {
            code: Some(self.code.clone()),
            message: self.message.clone(),
        }
    }
}

impl Shared {
    /// A turn ended without success: ours fails, a TUI turn ends `ok: false`.
    pub(super) fn turn_failed(self: &Arc<Self>, ours: bool, stop: Stop) {
        self.active.store(false, Ordering::SeqCst);
        self.log.private(&format!(
            "turn ended without success ({}): {}",
            stop.code, stop.message
        ));
        // A send refused in the gap after turn_done is re-sent, not a condition.
        if !(ours && stop.is_busy()) {
            *lock(&self.last_turn_error) = Some(stop.message.clone());
            if let Some(code) = &stop.condition {
                self.signal(HarnessSignal::Condition {
                    code: code.clone(),
                    message: None,
                });
            }
        }
        if ours {
            self.route_end(TurnEv::Failed(stop));
        } else if self.foreign.swap(false, Ordering::SeqCst) {
            let settled = {
                let mut g = lock(&self.steering);
                let settled = g.idle();
                if settled {
                    g.open = false;
                }
                settled
            };
            if settled {
                self.signal(HarnessSignal::TurnEnded { ok: false });
            } else {
                // Interrupts this failed TUI turn may have carried fail with it.
                let me = self.clone();
                let failure = stop.failure();
                tokio::spawn(async move {
                    let _guard = me.turn_lock.clone().lock_owned().await;
                    me.fail_steering(&failure).await;
                    me.signal(HarnessSignal::TurnEnded { ok: false });
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stop_reason_is_a_failure_and_only_an_interrupt_has_no_condition() {
        for (reason, cond) in STOP_REASONS {
            let s = Stop::stopped(reason, String::new());
            assert_eq!(s.code, reason);
            assert_eq!(s.condition.is_some(), cond, "{reason}");
            assert!(s.failure().code.is_some());
        }
        // A reason a later build adds still fails the turn, relayed as itself.
        let s = Stop::stopped("quota_exhausted", "out of quota".into());
        assert_eq!(s.condition.as_deref(), Some("quota_exhausted"));
        assert_eq!(s.message, "out of quota");
        assert_eq!(Stop::stopped("", String::new()).code, "unknown");
    }

    #[test]
    fn an_error_frame_relays_its_own_code_whatever_its_text_says() {
        let s = Stop::error("internal".into(), "provider error: rate limit (429)".into());
        assert_eq!(s.condition.as_deref(), Some("internal"));
        assert_eq!(s.failure().code.as_deref(), Some("internal"));
        assert!(!s.is_busy());
        assert!(Stop::error("internal".into(), "Already processing a message".into()).is_busy());
    }
}
