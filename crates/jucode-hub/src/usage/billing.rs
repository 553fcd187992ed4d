//! The gateway account's charges, as the hub sees them: a lookup its host provides (the
//! server reads the account and speaks HTTP; the hub stays transport-free).

use std::future::Future;
use std::pin::Pin;

/// One turn's charge as the gateway reported it.
#[derive(Debug, Clone, PartialEq)]
pub struct Charge {
    /// The ledger key (`billing_turn`).
    pub turn_id: String,
    /// Settled points, group multipliers included; `None` while the charge is pending.
    pub points: Option<f64>,
    /// Requests the charge covers.
    pub requests: u64,
}

/// What a lookup returns: the charges known, or why the lookup failed (shown to the client
/// as `billing_error`).
pub type ChargesFuture = Pin<Box<dyn Future<Output = Result<Vec<Charge>, String>> + Send>>;

/// Reads charges by turn id from the signed-in gateway account.
pub trait Billing: Send + Sync {
    fn charges(&self, turn_ids: Vec<String>) -> ChargesFuture;
}
