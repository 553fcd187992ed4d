//! Model and effort selection before the first turn, and the effort ladder a refusal names.

use super::*;

/// jcode's reasoning-effort vocabulary, lowest first (its `swarm` sentinels
/// are UI modes, not provider tiers).
pub const EFFORT_VOCABULARY: [&str; 7] =
    ["none", "minimal", "low", "medium", "high", "xhigh", "max"];

/// The accepted ladder a tier refusal names, parsed safely: the longest run
/// of vocabulary words joined only by separators (spaces, `,` `|` `/` `;`,
/// quotes, brackets, "or", "and"; a full stop or any other word ends it), at
/// least two long, without the rejected tier, in ladder order. Nothing else of the refusal text survives, so the
/// result is safe to print; a refusal naming no such run yields none.
pub fn accepted_ladder(message: &str, rejected: &str) -> Vec<String> {
    const SEPARATORS: &str = " \t\n,|/;'\"`[](){}";
    let mut best: Vec<&str> = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    let mut rest = message;
    while !rest.is_empty() {
        let word_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(rest.len());
        let (word, tail) = rest.split_at(word_end);
        let gap_end = tail
            .find(|c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            .unwrap_or(tail.len());
        let (gap, tail) = tail.split_at(gap_end);
        rest = tail;
        let lw = word.to_ascii_lowercase();
        let joins = !word.is_empty() && gap.chars().all(|c| SEPARATORS.contains(c));
        match EFFORT_VOCABULARY.iter().find(|v| **v == lw) {
            Some(v) => {
                if !run.contains(v) {
                    run.push(v);
                }
                if joins {
                    continue;
                }
            }
            None if (lw == "or" || lw == "and") && joins => continue,
            None => {}
        }
        // Any other word or punctuation ends the run.
        if run.len() > best.len() {
            best = std::mem::take(&mut run);
        }
        run.clear();
    }
    if run.len() > best.len() {
        best = run;
    }
    if best.len() < 2 {
        return Vec::new();
    }
    EFFORT_VOCABULARY
        .iter()
        .filter(|v| best.contains(v) && !v.eq_ignore_ascii_case(rejected))
        .map(|v| v.to_string())
        .collect()
}

/// `--model` then `--variant`, before the first turn; returns the presence label.
pub async fn select_model(
    client: &Client,
    sid: &str,
    model: Option<&str>,
    variant: Option<&str>,
    version: Option<&crate::version::JcodeVersion>,
    log: &ConnectorLog,
) -> Result<Option<(String, Option<String>)>> {
    if let Some(m) = model {
        if m.contains('/') {
            return Err(Error::ModelPrefixRejected(m.to_string()));
        }
        if let Err(e) = client.set_model(sid, m).await {
            log.private(&format!("set_model {m}: {e}"));
            return Err(match e {
                Error::Api { .. } => Error::ModelRefused(m.to_string()),
                other => other,
            });
        }
    }
    let info: RuntimeInfo = client.runtime_info(sid).await?;
    // RuntimeInfo.model may still name the previous model right after set_model.
    let pin = model.map(str::to_string).or_else(|| info.model.clone());
    let routes: Vec<_> = info
        .routes
        .iter()
        .filter(|r| r.available && Some(&r.model) == pin.as_ref())
        .collect();
    let mut providers: Vec<&str> = routes.iter().map(|r| r.provider.as_str()).collect();
    providers.sort_unstable();
    providers.dedup();
    let provider = match providers.as_slice() {
        [one] => Some(one.to_string()),
        _ => info.provider.clone(),
    };
    if let Some(v) = variant {
        if providers.len() != 1 {
            return Err(Error::ModelMismatch(pin.unwrap_or_default()));
        }
        if let Err(e) = client.set_reasoning_effort(sid, v).await {
            log.private(&format!("set_reasoning_effort {v}: {e}"));
            return Err(match e {
                Error::Api { message, .. } if message.contains("not supported") => {
                    Error::EffortUnsupported
                }
                Error::Api { message, .. } => {
                    let accepted = accepted_ladder(&message, v);
                    // Only vocabulary words survive the parse: safe for the terminal.
                    if !accepted.is_empty() {
                        log.line(&format!(
                            "reasoning effort {v:?} refused; accepted ladder: {}",
                            accepted.join(", ")
                        ));
                    }
                    Error::EffortRefused {
                        effort: v.to_string(),
                        accepted,
                    }
                }
                other => other,
            });
        }
        effort_read_back(client, sid, v, version, log).await?;
    }
    if let Some(r) = routes.first() {
        log.line(&format!(
            "route: provider {} serves {} via {}",
            r.provider,
            r.model,
            r.api_method.as_deref().unwrap_or("?")
        ));
    }
    Ok(pin.map(|p| (p, provider)))
}

/// After an accepted `set_reasoning_effort`: a build that reports the applied
/// tier (0.78.1 on) must report the one requested; an older build cannot, so
/// only the accepted request is recorded.
async fn effort_read_back(
    client: &Client,
    sid: &str,
    requested: &str,
    version: Option<&crate::version::JcodeVersion>,
    log: &ConnectorLog,
) -> Result<()> {
    if !version.is_some_and(|v| v.reads_effort_back()) {
        log.line(&format!(
            "reasoning effort {requested:?} accepted (this jcode does not report the applied tier)"
        ));
        return Ok(());
    }
    match client.runtime_info(sid).await?.reasoning_effort {
        Some(applied) if applied.eq_ignore_ascii_case(requested) => {
            log.line(&format!(
                "reasoning effort {requested:?} applied (read back)"
            ));
            Ok(())
        }
        Some(applied) => Err(Error::EffortMismatch {
            requested: requested.to_string(),
            applied,
        }),
        None => {
            log.line(&format!(
                "reasoning effort {requested:?} accepted; jcode reported no applied tier"
            ));
            Ok(())
        }
    }
}
