//! Launch options the connector refuses (the spec's "fail loud" list), named
//! the way Cotal's launcher spells them. The manager extension
//! (`extension/cotal-jcode`) refuses the same requests with the same text
//! before a seat is provisioned; this is the backstop for any other launcher.
//! Both are checked against `extension/cotal-jcode/test/fixtures/refusals.json`.

/// Exit code of a refused launch (a usage error, as for unknown arguments).
pub const EXIT_CODE: i32 = 2;

/// One refused request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Reopening a session another owner may still hold.
    ExactSession,
    /// Merging operator MCP servers into the seat's private configuration.
    ShareTools,
    /// Arbitrary connector options, which the Harness API has no place for.
    LaunchOptions,
}

impl Refusal {
    /// The refusal text (identical in the extension).
    pub fn message(self) -> &'static str {
        match self {
            Refusal::ExactSession => {
                "jcode connector: exact-session continuation is not supported: a seat owns a new private jcode instance, so attaching it to a session another owner may still hold would cross that boundary; use --resume, which forks the session into the seat"
            }
            Refusal::ShareTools => {
                "jcode connector: --share-tools is not supported: the seat's private jcode configuration holds only the cotal MCP server, and merging other servers into it cannot be proven safe"
            }
            Refusal::LaunchOptions => {
                "jcode connector: --opt launch options are not supported: the Harness API has no place for arbitrary connector flags or configuration, and an option that is not applied must not look honoured"
            }
        }
    }

    /// What the process prints on stderr.
    pub fn line(self) -> String {
        format!("[cotal-jcode] refused: {}", self.message())
    }
}

/// `--flag` or `--flag=value`.
fn is_flag(arg: &str, flag: &str) -> bool {
    arg == flag
        || arg
            .strip_prefix(flag)
            .is_some_and(|rest| rest.starts_with('='))
}

/// The first refused request among `args`, in argument order.
pub fn find(args: &[String]) -> Option<Refusal> {
    args.iter().find_map(|a| {
        if ["--continue", "--continue-session"]
            .iter()
            .any(|f| is_flag(a, f))
        {
            Some(Refusal::ExactSession)
        } else if is_flag(a, "--share-tools") {
            Some(Refusal::ShareTools)
        } else if is_flag(a, "--opt") {
            Some(Refusal::LaunchOptions)
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_spelling_is_refused_and_nothing_else() {
        for (a, want) in [
            ("--continue-session=abc", Refusal::ExactSession),
            ("--continue-session", Refusal::ExactSession),
            ("--continue", Refusal::ExactSession),
            ("--share-tools", Refusal::ShareTools),
            ("--share-tools=fs", Refusal::ShareTools),
            ("--opt", Refusal::LaunchOptions),
            ("--opt=effort=high", Refusal::LaunchOptions),
        ] {
            assert_eq!(find(&args(&["--no-events", a])), Some(want), "{a}");
        }
        for a in [
            "--no-events",
            "--optional",
            "--share-toolsx",
            "--continued",
            "mcp-bridge",
        ] {
            assert_eq!(find(&args(&[a])), None, "{a}");
        }
        // The first one named wins.
        assert_eq!(
            find(&args(&["--opt=x=1", "--share-tools"])),
            Some(Refusal::LaunchOptions)
        );
    }
}
