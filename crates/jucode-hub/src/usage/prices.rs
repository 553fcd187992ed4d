//! The reference price table (`prices.json`, embedded at build time). A turn is priced once,
//! when it is recorded, with the table of that build; a model the table does not name stays
//! unpriced.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Deserialize;

/// USD per million tokens of one model.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Price {
    input: f64,
    cached_input: f64,
    cache_write_input: f64,
    output: f64,
}

#[derive(Deserialize)]
struct Table {
    models: HashMap<String, Price>,
}

fn table() -> &'static HashMap<String, Price> {
    static TABLE: OnceLock<HashMap<String, Price>> = OnceLock::new();
    TABLE.get_or_init(|| {
        serde_json::from_str::<Table>(include_str!("prices.json"))
            .map(|t| t.models)
            .unwrap_or_else(|e| {
                tracing::error!("the embedded price table does not parse: {e}");
                HashMap::new()
            })
    })
}

/// The price of `model`: an exact name, else the longest table name it starts with
/// (`claude-sonnet-4-20250514` is `claude-sonnet-4`).
pub(crate) fn price_of(model: &str) -> Option<&'static Price> {
    let table = table();
    table.get(model).or_else(|| {
        table
            .iter()
            .filter(|(name, _)| model.starts_with(name.as_str()))
            .max_by_key(|(name, _)| name.len())
            .map(|(_, p)| p)
    })
}

/// Token counts of a turn, as the ledger keeps them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tokens {
    pub(crate) input: u64,
    pub(crate) cached_input: u64,
    pub(crate) cache_write_input: u64,
    pub(crate) output: u64,
}

/// The reference USD cost of `tokens` on `model`, or `None` when the model has no price.
pub(crate) fn estimate(model: Option<&str>, tokens: Tokens) -> Option<f64> {
    let price = price_of(model?)?;
    // Cached reads and cache writes are part of input, each at its own rate.
    let plain = tokens
        .input
        .saturating_sub(tokens.cached_input)
        .saturating_sub(tokens.cache_write_input);
    let cost = plain as f64 * price.input
        + tokens.cached_input as f64 * price.cached_input
        + tokens.cache_write_input as f64 * price.cache_write_input
        + tokens.output as f64 * price.output;
    Some(cost / 1_000_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_model_is_priced_by_its_rates_and_a_dated_variant_by_its_family() {
        let tokens = Tokens {
            input: 1_000_000,
            cached_input: 200_000,
            cache_write_input: 0,
            output: 100_000,
        };
        let cost = estimate(Some("claude-sonnet-4-20250514"), tokens).unwrap();
        // 0.8M at 3, 0.2M at 0.3, 0.1M at 15.
        assert!((cost - (2.4 + 0.06 + 1.5)).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn an_unknown_model_or_none_is_unpriced_not_free() {
        assert_eq!(estimate(Some("my-local-llama"), Tokens::default()), None);
        assert_eq!(estimate(None, Tokens::default()), None);
    }

    #[test]
    fn every_entry_names_its_source_and_date() {
        let raw: serde_json::Value = serde_json::from_str(include_str!("prices.json")).unwrap();
        for (name, entry) in raw["models"].as_object().unwrap() {
            assert!(
                entry["source"].as_str().is_some_and(|s| !s.is_empty()),
                "{name}"
            );
            assert!(
                entry["date"].as_str().is_some_and(|s| s.len() == 10),
                "{name}"
            );
        }
        assert!(!table().is_empty());
    }
}
