//! The test-only clock override of the daemon, compiled into debug builds only (`main.rs`
//! includes this module under `cfg(debug_assertions)`).
//!
//! `JUCODE_DEBUG_CLOCK=<RFC 3339 instant>[@<speed>]` starts the hub's wall time at that
//! instant and runs it `speed` times as fast as real time (default 1). Wire tests of
//! scheduled tasks use it to have local times come due, across restarts and kills, without
//! waiting for them.

use anyhow::{Context, Result};
use jucode_clock::{DebugClock, SharedClock};

/// The variable's name.
pub const VAR: &str = "JUCODE_DEBUG_CLOCK";

/// The override, when the variable is set; an unreadable value stops the start.
pub fn from_env() -> Result<Option<SharedClock>> {
    let Some(value) = std::env::var_os(VAR) else {
        return Ok(None);
    };
    let value = value
        .into_string()
        .map_err(|_| anyhow::anyhow!("{VAR} is not UTF-8"))?;
    let (start, speed) = parse(&value)?;
    eprintln!("{VAR}: wall time starts at {start} and runs {speed}x (a debug build's test clock)");
    Ok(Some(std::sync::Arc::new(DebugClock::new(start, speed))))
}

fn parse(value: &str) -> Result<(jiff::Timestamp, u32)> {
    let (start, speed) = match value.split_once('@') {
        Some((start, speed)) => (
            start,
            speed
                .parse()
                .with_context(|| format!("{VAR}: speed {speed:?} is not a whole number"))?,
        ),
        None => (value, 1),
    };
    let start = start
        .parse()
        .with_context(|| format!("{VAR}: {start:?} is not an RFC 3339 instant"))?;
    Ok((start, speed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_value_is_an_instant_and_a_speed() {
        let (start, speed) = parse("2040-01-01T00:00:00Z@60").unwrap();
        assert_eq!(start.to_string(), "2040-01-01T00:00:00Z");
        assert_eq!(speed, 60);
        assert_eq!(parse("2040-01-01T00:00:00Z").unwrap().1, 1);
        assert!(parse("tomorrow").is_err());
        assert!(parse("2040-01-01T00:00:00Z@fast").is_err());
    }
}
