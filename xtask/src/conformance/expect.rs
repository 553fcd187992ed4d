//! Steps that check what the daemon answers: frame expectations (`expect`, `expect_set`,
//! `expect_silence`, `expect_close`) and `http` requests with their expected status, headers
//! and body.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::client::{self, Incoming};
use super::pattern;
use super::{Runner, Skip, Step, StepResult};

impl Runner {
    /// The next frame of `name` that `skip` does not pass over, or `None` at the deadline.
    /// Passed-over frames are described in `skipped`.
    async fn next_relevant(
        &mut self,
        name: &str,
        skip: &[String],
        want_type: Option<&str>,
        deadline: Instant,
        skipped: &mut Vec<String>,
    ) -> Result<Option<(Incoming, Value)>, String> {
        loop {
            let Some(item) = self.recv(name, deadline).await? else {
                return Ok(None);
            };
            let value = match &item {
                Incoming::Text(t) => {
                    serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.clone()))
                }
                _ => Value::Null,
            };
            let kind = value.get("type").and_then(Value::as_str);
            // A type the expectation asks for is never skipped.
            if let Some(kind) = kind
                && Some(kind) != want_type
                && skip.iter().any(|s| s == kind)
            {
                skipped.push(item.describe());
                continue;
            }
            return Ok(Some((item, value)));
        }
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "deadlines for a real daemon run in real time"
    )]
    pub(super) async fn expect(&mut self, step: &Step) -> StepResult {
        let name = Self::client_name(step)?;
        let pattern = self.field(step, "expect", true)?.unwrap_or_default();
        let want_type = pattern
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_string);
        let skip = self.skip_of(step)?;
        let deadline = Instant::now() + Self::timeout_of(step);
        let mut skipped = Vec::new();
        let types = match &skip {
            Skip::Types(t) => t.clone(),
            Skip::All => Vec::new(),
        };
        loop {
            let next = self
                .next_relevant(&name, &types, want_type.as_deref(), deadline, &mut skipped)
                .await?;
            let Some((item, value)) = next else {
                return Err(format!(
                    "{name}: expected {} within {} ms, got nothing{}",
                    compact(&pattern),
                    Self::timeout_of(step).as_millis(),
                    describe_skipped(&skipped)
                ));
            };
            if !matches!(item, Incoming::Text(_)) {
                return Err(format!(
                    "{name}: expected {}, got {}{}",
                    compact(&pattern),
                    item.describe(),
                    describe_skipped(&skipped)
                ));
            }
            match self.commit(&pattern, &value) {
                Ok(()) => return Ok(()),
                Err(_) if matches!(skip, Skip::All) => skipped.push(item.describe()),
                Err(why) => {
                    return Err(format!(
                        "{name}: expected {}\n    got {}\n    {why}{}",
                        compact(&pattern),
                        item.describe(),
                        describe_skipped(&skipped)
                    ));
                }
            }
        }
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "deadlines for a real daemon run in real time"
    )]
    pub(super) async fn expect_set(&mut self, step: &Step) -> StepResult {
        let name = Self::client_name(step)?;
        let Some(Value::Array(mut pending)) = self.field(step, "expect_set", true)? else {
            return Err("expect_set takes a list of patterns".into());
        };
        let Skip::Types(types) = self.skip_of(step)? else {
            return Err("expect_set takes a list of types to skip, not \"all\"".into());
        };
        let deadline = Instant::now() + Self::timeout_of(step);
        let mut skipped = Vec::new();
        while !pending.is_empty() {
            let next = self
                .next_relevant(&name, &types, None, deadline, &mut skipped)
                .await?;
            let Some((item, value)) = next else {
                let left: Vec<String> = pending.iter().map(compact).collect();
                return Err(format!(
                    "{name}: still expecting {} after {} ms{}",
                    left.join(", "),
                    Self::timeout_of(step).as_millis(),
                    describe_skipped(&skipped)
                ));
            };
            let hit = pending.iter().position(|p| {
                let mut caps = Vec::new();
                pattern::matches(p, &value, &mut caps).is_ok()
            });
            match hit {
                Some(i) => {
                    let p = pending.remove(i);
                    self.commit(&p, &value)?;
                }
                None => {
                    let left: Vec<String> = pending.iter().map(compact).collect();
                    return Err(format!(
                        "{name}: got {}, which matches none of {}",
                        item.describe(),
                        left.join(", ")
                    ));
                }
            }
        }
        Ok(())
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "deadlines for a real daemon run in real time"
    )]
    pub(super) async fn expect_silence(&mut self, step: &Step) -> StepResult {
        let name = Self::client_name(step)?;
        let ms = step.value["expect_silence"]
            .as_u64()
            .ok_or("expect_silence takes milliseconds")?;
        let Skip::Types(types) = self.skip_of(step)? else {
            return Err("expect_silence cannot skip \"all\"".into());
        };
        let deadline = Instant::now() + Duration::from_millis(ms);
        let mut skipped = Vec::new();
        match self
            .next_relevant(&name, &types, None, deadline, &mut skipped)
            .await?
        {
            None => Ok(()),
            Some((item, _)) => Err(format!(
                "{name}: expected nothing for {ms} ms, got {}",
                item.describe()
            )),
        }
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "deadlines for a real daemon run in real time"
    )]
    pub(super) async fn expect_close(&mut self, step: &Step) -> StepResult {
        let name = Self::client_name(step)?;
        let want = &step.value["expect_close"];
        let Skip::Types(types) = self.skip_of(step)? else {
            return Err("expect_close cannot skip \"all\"".into());
        };
        let deadline = Instant::now() + Self::timeout_of(step);
        let mut skipped = Vec::new();
        let next = self
            .next_relevant(&name, &types, None, deadline, &mut skipped)
            .await?;
        let outcome = match next {
            None => Err(format!(
                "{name}: expected a close within {} ms, got nothing{}",
                Self::timeout_of(step).as_millis(),
                describe_skipped(&skipped)
            )),
            Some((Incoming::Close(code, reason), _)) => {
                let code_ok = match want {
                    Value::Bool(true) => true,
                    Value::Number(n) => code.map(u64::from) == n.as_u64(),
                    other => return Err(format!("expect_close takes a code or true, not {other}")),
                };
                if !code_ok {
                    Err(format!(
                        "{name}: expected close {want}, got close {code:?} {reason:?}"
                    ))
                } else if let Some(p) = self.field(step, "reason", true)? {
                    self.commit(&p, &Value::String(reason))
                        .map_err(|e| format!("{name}: close reason: {e}"))
                } else {
                    Ok(())
                }
            }
            Some((Incoming::Gone(why), _)) if *want == Value::Bool(true) => {
                let _ = why;
                Ok(())
            }
            Some((item, _)) => Err(format!(
                "{name}: expected close {want}, got {}{}",
                item.describe(),
                describe_skipped(&skipped)
            )),
        };
        if let Some(conn) = self.clients.get_mut(&name) {
            conn.client = None;
        }
        outcome
    }

    pub(super) async fn http(&mut self, step: &Step) -> StepResult {
        let Some(Value::Object(req)) = self.field(step, "http", false)? else {
            return Err("http takes an object".into());
        };
        let method = req.get("method").and_then(Value::as_str).unwrap_or("GET");
        let path = req.get("path").and_then(Value::as_str).unwrap_or("/");
        let mut headers: Vec<(String, String)> = Vec::new();
        if let Some(Value::Object(h)) = req.get("headers") {
            for (k, v) in h {
                headers.push((
                    k.clone(),
                    v.as_str().map_or_else(|| v.to_string(), str::to_string),
                ));
            }
        }
        let body = match (req.get("body"), req.get("raw_body")) {
            (Some(json), _) => {
                headers.push(("Content-Type".into(), "application/json".into()));
                Some(json.to_string().into_bytes())
            }
            (None, Some(raw)) => Some(
                raw.as_str()
                    .ok_or("raw_body is a string")?
                    .as_bytes()
                    .to_vec(),
            ),
            (None, None) => None,
        };
        let response = client::http(self.daemon.addr, method, path, &headers, body.as_deref())
            .await
            .map_err(|e| format!("{method} {path}: {e:#}"))?;
        let shown = || {
            format!(
                "HTTP {} {:?}",
                response.status,
                client::shorten(&response.body, 300)
            )
        };
        if let Some(want) = step.value.get("expect_status").and_then(Value::as_u64)
            && u64::from(response.status) != want
        {
            return Err(format!(
                "{method} {path}: expected status {want}, got {}",
                shown()
            ));
        }
        if let Some(Value::Object(want)) = self.field(step, "expect_headers", true)? {
            for (name, p) in want {
                let got = response
                    .headers
                    .iter()
                    .find(|(n, _)| *n == name.to_ascii_lowercase())
                    .map(|(_, v)| Value::String(v.clone()))
                    .unwrap_or(Value::Null);
                self.commit(&p, &got)
                    .map_err(|e| format!("{method} {path}: header {name}: {e}"))?;
            }
        }
        if let Some(p) = self.field(step, "expect_body", true)? {
            let body: Value = serde_json::from_str(&response.body)
                .map_err(|_| format!("{method} {path}: expected a JSON body, got {}", shown()))?;
            self.commit(&p, &body)
                .map_err(|e| format!("{method} {path}: body {}: {e}", compact(&body)))?;
        }
        if let Some(p) = self.field(step, "expect_text", true)? {
            self.commit(&p, &Value::String(response.body.clone()))
                .map_err(|e| format!("{method} {path}: body: {e}"))?;
        }
        Ok(())
    }
}

fn compact(v: &Value) -> String {
    client::shorten(&v.to_string(), 400)
}

fn describe_skipped(skipped: &[String]) -> String {
    if skipped.is_empty() {
        return String::new();
    }
    let shown: Vec<&String> = skipped.iter().rev().take(6).rev().collect();
    let more = skipped.len() - shown.len();
    let mut out = format!("\n    passed over {} frame(s):", skipped.len());
    if more > 0 {
        out.push_str(&format!(" ({more} earlier not shown)"));
    }
    for s in shown {
        out.push_str("\n      ");
        out.push_str(s);
    }
    out
}
