//! Which jcode a seat runs: `jcode version --json`, read once at launch,
//! logged, recorded in the seat's launch record, and asked where builds
//! differ (the Harness API handshake never reports its minor version).
//!
//! Known differences (see the harness notes): `reasoning_effort` is read back
//! on `model_info`/`runtime_info` from 0.78.1 on; newer builds end a stopped
//! turn with `turn_stopped{reason}`, which is handled by its meaning wherever
//! it arrives, so it needs no version gate.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The oldest build the connector spec supports.
pub const SUPPORTED_MIN: Semver = Semver(0, 78, 1);
/// The first build that reports the applied reasoning effort back.
pub const EFFORT_READBACK_MIN: Semver = Semver(0, 78, 1);
/// How long `jcode version --json` may take.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(20);

/// A `major.minor.patch` triple (pre-release and build suffixes dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Semver(pub u64, pub u64, pub u64);

impl Semver {
    /// `0.78.1`, `v0.78.1`, `0.78.1-dev+abc`.
    pub fn parse(s: &str) -> Option<Semver> {
        let s = s.trim().trim_start_matches('v');
        let core = s.split(['-', '+', ' ']).next()?;
        let mut it = core.split('.');
        let a = it.next()?.parse().ok()?;
        let b = it.next()?.parse().ok()?;
        let c = it.next().unwrap_or("0").parse().ok()?;
        if it.next().is_some() {
            return None;
        }
        Some(Semver(a, b, c))
    }
}

impl std::fmt::Display for Semver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// What `jcode version --json` reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JcodeVersion {
    /// The human line (`v0.67.1 (88a19f38e)`).
    pub version: String,
    /// The parsed `semver` field (else the `version` field).
    pub semver: Option<Semver>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_hash: Option<String>,
}

impl JcodeVersion {
    /// Parse the JSON line; a build without `semver` still yields its `version` text.
    pub fn parse(out: &str) -> Result<JcodeVersion> {
        let v: serde_json::Value = serde_json::from_str(out.trim()).map_err(|e| {
            Error::StartupFailed(format!("`jcode version --json` is not JSON: {e}"))
        })?;
        let text = |k: &str| v[k].as_str().map(str::to_string);
        let version = text("version").or_else(|| text("semver")).ok_or_else(|| {
            Error::StartupFailed("`jcode version --json` names no version".into())
        })?;
        let semver = text("semver")
            .as_deref()
            .and_then(Semver::parse)
            .or_else(|| Semver::parse(&version));
        Ok(JcodeVersion {
            version,
            semver,
            git_hash: text("git_hash"),
        })
    }

    /// At least `min` (an unparsed version counts as the newest: capabilities are then asked).
    pub fn at_least(&self, min: Semver) -> bool {
        self.semver.is_none_or(|s| s >= min)
    }

    /// Whether `model_info`/`runtime_info` carry the applied reasoning effort.
    pub fn reads_effort_back(&self) -> bool {
        self.semver.is_some_and(|s| s >= EFFORT_READBACK_MIN)
    }

    /// The log line.
    pub fn describe(&self) -> String {
        let mut s = format!("jcode {}", self.version);
        match self.semver {
            Some(v) if v < SUPPORTED_MIN => s.push_str(&format!(
                " (semver {v}; older than the supported {SUPPORTED_MIN}: the applied reasoning effort is not read back)"
            )),
            Some(v) => s.push_str(&format!(" (semver {v})")),
            None => s.push_str(" (no semver)"),
        }
        s
    }
}

/// Run `<binary> version --json` with the agent environment (no `COTAL_*`).
pub async fn read(binary: &Path, env: &[(String, String)]) -> Result<JcodeVersion> {
    let run = tokio::process::Command::new(binary)
        .arg("version")
        .arg("--json")
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("JCODE_NO_AUTO_UPDATE", "1")
        .env("JCODE_NO_TELEMETRY", "1")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = match tokio::time::timeout(VERSION_TIMEOUT, run).await {
        Ok(Ok(o)) => o,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::NotFound(binary.display().to_string()));
        }
        Ok(Err(e)) => {
            return Err(Error::StartupFailed(format!(
                "{} version --json: {e}",
                binary.display()
            )));
        }
        Err(_) => {
            return Err(Error::StartupFailed(format!(
                "{} version --json did not answer",
                binary.display()
            )));
        }
    };
    if !out.status.success() {
        return Err(Error::StartupFailed(format!(
            "{} version --json exited {}",
            binary.display(),
            out.status
        )));
    }
    JcodeVersion::parse(json_object(&String::from_utf8_lossy(&out.stdout)))
}

/// The first JSON object in `out` (real builds pretty-print it over several
/// lines; a wrapper or a telemetry notice may print around it).
fn json_object(out: &str) -> &str {
    let Some(start) = out.find('{') else {
        return out;
    };
    let rest = &out[start..];
    let mut it = serde_json::Deserializer::from_str(rest).into_iter::<serde_json::Value>();
    match it.next() {
        Some(Ok(_)) => &rest[..it.byte_offset()],
        _ => rest,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_recorded_0_67_1_line_parses_and_predates_effort_readback() {
        let v = JcodeVersion::parse(r#"{"version":"v0.67.1 (88a19f38e)","semver":"0.67.1","base_semver":"0.67.1","update_semver":"0.67.1","git_hash":"88a19f38e","git_tag":"v0.67.1","build_time":"1985-10-26 08:15:00 +0000","git_date":"2026-08-03 15:28:32 -0700","release_build":true}"#).unwrap();
        assert_eq!(v.semver, Some(Semver(0, 67, 1)));
        assert_eq!(v.git_hash.as_deref(), Some("88a19f38e"));
        assert!(!v.reads_effort_back());
        assert!(!v.at_least(SUPPORTED_MIN));
        assert!(v.describe().contains("older than the supported 0.78.1"));
    }

    #[test]
    fn newer_builds_read_effort_back_and_suffixes_are_ignored() {
        for (s, want) in [
            ("0.78.1", true),
            ("v0.79.1", true),
            ("0.78.0", false),
            ("1.0.0-dev+abc", true),
            ("0.78", false),
        ] {
            let v = JcodeVersion::parse(&format!(r#"{{"version":"{s}"}}"#)).unwrap();
            assert_eq!(v.reads_effort_back(), want, "{s}");
        }
        assert_eq!(Semver::parse("0.78"), Some(Semver(0, 78, 0)));
        assert_eq!(Semver::parse("x.1.2"), None);
        assert_eq!(Semver::parse("1.2.3.4"), None);
    }

    #[test]
    fn the_pretty_printed_object_is_found_among_other_output() {
        let out = "notice: telemetry\n{\n  \"version\": \"v0.67.1 (88a19f38e)\",\n  \"semver\": \"0.67.1\"\n}\ntrailing words\n";
        let v = JcodeVersion::parse(json_object(out)).unwrap();
        assert_eq!(v.semver, Some(Semver(0, 67, 1)));
        assert_eq!(v.version, "v0.67.1 (88a19f38e)");
    }

    #[test]
    fn output_without_a_version_is_refused() {
        assert!(JcodeVersion::parse("not json").is_err());
        assert!(JcodeVersion::parse(r#"{"release_build":true}"#).is_err());
        // No parsable semver: kept as text, capabilities decide.
        let v = JcodeVersion::parse(r#"{"version":"nightly"}"#).unwrap();
        assert_eq!(v.semver, None);
        assert!(v.at_least(SUPPORTED_MIN));
        assert!(!v.reads_effort_back());
    }
}
