//! The crate's error type. Every startup failure maps to one public code
//! ([`Error::code`]); details stay in the owner-only connector log.

use std::path::PathBuf;

/// What went wrong between the connector and its private jcode.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The workspace holds a project MCP file jcode would merge in.
    #[error("the workspace holds {0}, which jcode would merge into the seat's MCP configuration")]
    ProjectMcpConfig(PathBuf),
    /// The private home, its credential mirror or its socket alias could not be prepared.
    #[error("private state: {0}")]
    PrivateState(String),
    /// `sessions/` exists but does not take a write.
    #[error("{path} does not take a write ({errno}); fix its permissions and start again")]
    SessionsUnwritable { path: PathBuf, errno: String },
    /// Listing the home's sessions killed the harness.
    #[error("listing stored sessions failed: {0}")]
    SessionsEnumeration(String),
    /// The jcode binary was not found.
    #[error("jcode binary not found: {0}")]
    NotFound(String),
    /// The bridge exited or never bound its socket.
    #[error("jcode api-bridge failed to start: {0}")]
    StartupFailed(String),
    /// The bridge did not accept a connection in time.
    #[error("jcode api-bridge did not come up in time")]
    StartupTimeout,
    /// Connecting to the Harness API socket failed.
    #[error("cannot connect to the Harness API: {0}")]
    Connect(String),
    /// The Harness API socket refused this user (its permissions).
    #[error("the Harness API socket denies access: {0}")]
    ConnectDenied(String),
    /// The recovery window closed while a replacement launched; that launch's
    /// tree was proven stopped.
    #[error("the recovery window expired during a replacement launch")]
    WindowExpired,
    /// The bridge speaks another API version.
    #[error("unsupported Harness API version: {0}")]
    UnsupportedVersion(String),
    /// The handshake failed otherwise.
    #[error("Harness API handshake failed: {0}")]
    Handshake(String),
    /// The bridge answered a request with an error frame.
    #[error("Harness API refused {req}: {code}: {message}")]
    Api {
        req: String,
        code: String,
        message: String,
    },
    /// The Harness API connection closed.
    #[error("Harness API connection closed")]
    Closed,
    /// A reply or event did not follow the wire contract.
    #[error("Harness API protocol: {0}")]
    Protocol(String),
    /// An attach returned another session than the one asked for.
    #[error("attach asked for {asked} but jcode attached {got}")]
    AttachMismatch { asked: String, got: String },
    /// A `provider/model` value where a bare id is needed.
    #[error("model ids are bare; {0:?} names a provider")]
    ModelPrefixRejected(String),
    /// jcode refused the bare model id.
    #[error("jcode refused model {0:?}")]
    ModelRefused(String),
    /// The variant cannot be tied to one active provider route.
    #[error("model {0:?} has no single active provider route for a variant")]
    ModelMismatch(String),
    /// The route has no reasoning-effort surface.
    #[error("reasoning effort is not supported on this route")]
    EffortUnsupported,
    /// The provider refused the effort tier; `accepted` is the ladder jcode
    /// named in its refusal (empty when it named none).
    #[error("reasoning effort {effort:?} refused{}", ladder_suffix(accepted))]
    EffortRefused {
        effort: String,
        accepted: Vec<String>,
    },
    /// jcode (0.78.1 on) read back another effort than the one it accepted.
    #[error("reasoning effort {requested:?} accepted but jcode reports {applied:?}")]
    EffortMismatch { requested: String, applied: String },
    /// The orientation proof never showed the cotal tools.
    #[error("readiness: {0}")]
    Readiness(String),
    /// The provider rejected the readiness turn: only its code and, for a
    /// model id or effort value it named, that value are public.
    #[error("provider refusal: {code}{}", rejected.as_ref().map(|r| format!("; rejected {r}")).unwrap_or_default())]
    ProviderRefused {
        code: String,
        rejected: Option<String>,
    },
    /// The orientation proof did not arrive within its bound.
    #[error("readiness timeout (orientation call observed: {observed})")]
    ReadinessTimeout { observed: bool },
    /// `--resume` cannot fork the source session.
    #[error("resume: {0}")]
    Resume(String),
    /// A launch setting is outside what the connector supports.
    #[error("configuration: {0}")]
    Config(String),
    /// The private tree could not be proven stopped.
    #[error("teardown: {0}")]
    Teardown(String),
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// The allow-listed public code of a startup failure.
    pub fn code(&self) -> &'static str {
        match self {
            Error::ProjectMcpConfig(_) => "project_mcp_config",
            Error::PrivateState(_) | Error::Io { .. } => "private_state",
            Error::SessionsUnwritable { .. } => "sessions_unwritable",
            Error::SessionsEnumeration(_) => "sessions_enumeration_failed",
            Error::NotFound(_) => "jcode_not_found",
            Error::StartupFailed(_) => "startup_failed",
            Error::StartupTimeout => "startup_timeout",
            Error::Connect(_) | Error::ConnectDenied(_) | Error::Closed => "connect_failed",
            Error::WindowExpired => "recovery_window_expired",
            Error::UnsupportedVersion(_) => "unsupported_version",
            Error::Handshake(_) | Error::Protocol(_) => "handshake_failed",
            Error::AttachMismatch { .. } => "attach_mismatch",
            Error::ModelPrefixRejected(_) => "model_prefix_rejected",
            Error::ModelRefused(_) => "model_refused",
            Error::ModelMismatch(_) => "model_mismatch",
            Error::EffortUnsupported => "effort_unsupported",
            Error::EffortRefused { .. } => "effort_refused",
            Error::EffortMismatch { .. } => "effort_mismatch",
            Error::Readiness(_) => "readiness_failed",
            Error::ReadinessTimeout { .. } => "readiness_timeout",
            Error::ProviderRefused { .. } => "provider_refused",
            Error::Resume(_) => "resume_refused",
            Error::Config(_) => "invalid_config",
            Error::Teardown(_) => "teardown_failed",
            Error::Api { .. } => "unknown",
        }
    }

    /// A refusal another launch cannot change (ends the seat at once, no
    /// relaunch). Anything else, an unrecognised Harness code included, is
    /// transient and retried inside the recovery window. A new permanent code
    /// goes here and into the exact-count test below.
    pub fn is_permanent(&self) -> bool {
        match self {
            Error::Api { code, .. } => PERMANENT_API_CODES.contains(&code.as_str()),
            Error::ConnectDenied(_)
            | Error::UnsupportedVersion(_)
            | Error::NotFound(_)
            | Error::AttachMismatch { .. }
            | Error::ProjectMcpConfig(_)
            | Error::SessionsUnwritable { .. }
            | Error::Teardown(_) => true,
            _ => false,
        }
    }
}

/// Harness API error codes no relaunch can change: an invalid request, a
/// missing session, a protocol mismatch, a request the bridge does not know.
pub const PERMANENT_API_CODES: [&str; 4] = [
    "invalid_request",
    "unknown_session",
    "unsupported_version",
    "unknown_request",
];

fn ladder_suffix(accepted: &[String]) -> String {
    if accepted.is_empty() {
        String::new()
    } else {
        format!("; accepted: {}", accepted.join(", "))
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: &str) -> Error {
        Error::Api {
            req: "attach_session".into(),
            code: code.into(),
            message: "m".into(),
        }
    }

    /// No wildcard: a new variant does not compile until it joins the table below.
    #[allow(dead_code)]
    fn every_variant_is_in_the_table(e: &Error) {
        match e {
            Error::ProjectMcpConfig(_)
            | Error::PrivateState(_)
            | Error::SessionsUnwritable { .. }
            | Error::SessionsEnumeration(_)
            | Error::NotFound(_)
            | Error::StartupFailed(_)
            | Error::StartupTimeout
            | Error::Connect(_)
            | Error::ConnectDenied(_)
            | Error::WindowExpired
            | Error::UnsupportedVersion(_)
            | Error::Handshake(_)
            | Error::Api { .. }
            | Error::Closed
            | Error::Protocol(_)
            | Error::AttachMismatch { .. }
            | Error::ModelPrefixRejected(_)
            | Error::ModelRefused(_)
            | Error::ModelMismatch(_)
            | Error::EffortUnsupported
            | Error::EffortRefused { .. }
            | Error::EffortMismatch { .. }
            | Error::Readiness(_)
            | Error::ProviderRefused { .. }
            | Error::ReadinessTimeout { .. }
            | Error::Resume(_)
            | Error::Config(_)
            | Error::Teardown(_)
            | Error::Io { .. } => {}
        }
    }

    /// Every variant once (and every Harness code), with its verdict. The
    /// counts are exact: a new permanent code must be added on purpose.
    #[test]
    fn the_classifier_has_exactly_these_permanent_refusals() {
        let io = || std::io::Error::other("x");
        let table: Vec<(Error, bool)> = vec![
            (Error::ProjectMcpConfig(".mcp.json".into()), true),
            (Error::PrivateState("x".into()), false),
            (
                Error::SessionsUnwritable {
                    path: "s".into(),
                    errno: "EACCES".into(),
                },
                true,
            ),
            (Error::SessionsEnumeration("x".into()), false),
            (Error::NotFound("jcode".into()), true),
            (Error::StartupFailed("x".into()), false),
            (Error::StartupTimeout, false),
            (Error::Connect("ECONNREFUSED".into()), false),
            (Error::ConnectDenied("EACCES".into()), true),
            (Error::WindowExpired, false),
            (Error::UnsupportedVersion("2".into()), true),
            (Error::Handshake("x".into()), false),
            (api("invalid_request"), true),
            (api("unknown_session"), true),
            (api("unsupported_version"), true),
            (api("unknown_request"), true),
            (api("internal"), false),
            // A code no build sends today: transient by default.
            (api("brand_new_code"), false),
            (Error::Closed, false),
            (Error::Protocol("x".into()), false),
            (
                Error::AttachMismatch {
                    asked: "a".into(),
                    got: "b".into(),
                },
                true,
            ),
            (Error::ModelPrefixRejected("p/m".into()), false),
            (Error::ModelRefused("m".into()), false),
            (Error::ModelMismatch("m".into()), false),
            (Error::EffortUnsupported, false),
            (
                Error::EffortRefused {
                    effort: "x".into(),
                    accepted: vec![],
                },
                false,
            ),
            (
                Error::EffortMismatch {
                    requested: "high".into(),
                    applied: "low".into(),
                },
                false,
            ),
            (Error::Readiness("x".into()), false),
            (
                Error::ProviderRefused {
                    code: "c".into(),
                    rejected: None,
                },
                false,
            ),
            (Error::ReadinessTimeout { observed: false }, false),
            (Error::Resume("x".into()), false),
            (Error::Config("x".into()), false),
            (Error::Teardown("x".into()), true),
            (Error::io("p", io()), false),
        ];
        for (e, want) in &table {
            assert_eq!(e.is_permanent(), *want, "{e:?}");
        }
        let permanent = table.iter().filter(|(e, _)| e.is_permanent()).count();
        assert_eq!(permanent, 11);
        assert_eq!(PERMANENT_API_CODES.len(), 4);
        // Permission denial is read from the error kind, not its text.
        assert!(!Error::Connect("Permission denied".into()).is_permanent());
    }
}
