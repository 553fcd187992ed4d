//! The TUI hand-off's command lines: Claude Code's and Codex's own terminal interfaces on a
//! session's conversation, with its directories, approval mode and model (DECISIONS.md, "TUI
//! hand-off", says what was checked against the real CLIs).

use std::path::PathBuf;

use jucode_engine::{TuiCommand, TuiSpec};
use jucode_protocol::ApprovalMode;

/// Variables that would make Claude Code take the TUI for a session nested in another one
/// (and then, among other things, not keep its transcript as the user's own).
pub const CLAUDE_NESTED_VARS: &[&str] = &[
    "CLAUDECODE",
    "CLAUDE_CODE_CHILD_SESSION",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_CODE_SSE_PORT",
    "CLAUDE_AGENT_SDK_VERSION",
    "CLAUDE_AGENT_SDK_CLIENT_APP",
];

/// `claude --resume <id>` for a saved conversation, else `claude --session-id <id>`.
pub fn claude(program: PathBuf, spec: &TuiSpec, saved: bool) -> TuiCommand {
    let flag = if saved { "--resume" } else { "--session-id" };
    let mut args = vec![flag.to_string(), spec.session.clone()];
    for dir in &spec.extra_dirs {
        args.push("--add-dir".into());
        args.push(dir.display().to_string());
    }
    if let Some(mode) = spec.approval_mode {
        args.push("--permission-mode".into());
        args.push(crate::claude::permission_mode(mode).into());
    }
    if let Some(model) = &spec.model {
        args.push("--model".into());
        args.push(model.clone());
    }
    TuiCommand {
        program,
        args,
        env: Vec::new(),
        env_remove: CLAUDE_NESTED_VARS.iter().map(|v| v.to_string()).collect(),
    }
}

/// `codex resume <thread>` for a saved thread, else plain `codex` (a new thread), with the
/// approval policy and sandbox the adapter gives the same mode.
pub fn codex(program: PathBuf, spec: &TuiSpec, thread: Option<&str>) -> TuiCommand {
    let mut args = Vec::new();
    if let Some(thread) = thread {
        args.push("resume".to_string());
        args.push(thread.to_string());
    }
    args.push("--cd".into());
    args.push(spec.cwd.display().to_string());
    for dir in &spec.extra_dirs {
        args.push("--add-dir".into());
        args.push(dir.display().to_string());
    }
    if let Some(mode) = spec.approval_mode {
        let (approval, sandbox) = match mode {
            ApprovalMode::Manual | ApprovalMode::Plan => ("on-request", "read-only"),
            ApprovalMode::AutoEdit | ApprovalMode::Auto => ("on-request", "workspace-write"),
            ApprovalMode::FullAccess => ("never", "danger-full-access"),
        };
        args.extend(["--ask-for-approval", approval, "--sandbox", sandbox].map(String::from));
    }
    if let Some(model) = &spec.model {
        args.push("--model".into());
        args.push(model.clone());
    }
    TuiCommand {
        program,
        args,
        env: Vec::new(),
        env_remove: Vec::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn spec(mode: Option<ApprovalMode>) -> TuiSpec {
        TuiSpec {
            session: "3b2d7c9e-1f4a-4c5b-8e6d-0a1b2c3d4e5f".into(),
            cwd: PathBuf::from("/w"),
            extra_dirs: vec![PathBuf::from("/x")],
            approval_mode: mode,
            model: Some("m".into()),
            gateway: false,
        }
    }

    #[test]
    fn claude_resumes_a_saved_conversation_and_names_a_new_one() {
        let s = spec(Some(ApprovalMode::AutoEdit));
        let cmd = claude(PathBuf::from("claude"), &s, true);
        assert_eq!(
            cmd.args,
            [
                "--resume",
                &s.session,
                "--add-dir",
                "/x",
                "--permission-mode",
                "acceptEdits",
                "--model",
                "m"
            ]
        );
        assert!(cmd.env_remove.iter().any(|v| v == "CLAUDECODE"));
        assert!(cmd.env_remove.iter().any(|v| v == "CLAUDE_CODE_ENTRYPOINT"));
        let cmd = claude(PathBuf::from("claude"), &spec(None), false);
        assert_eq!(
            cmd.args[..2],
            ["--session-id".to_string(), s.session.clone()]
        );
        assert!(!cmd.args.iter().any(|a| a == "--permission-mode"));
    }

    #[test]
    fn a_thread_a_plain_codex_began_becomes_the_sessions() {
        use jucode_engine::EngineFactory as _;
        let dir = tempfile::tempdir().unwrap();
        let config = crate::AdapterConfig {
            jucode_home: dir.path().join("jucode"),
            user_home: dir.path().join("home"),
            gateway: None,
        };
        let engine = crate::codex::CodexEngine::new(config);
        let cwd = "/srv/w/t";
        let write = |thread: &str| {
            let file = dir.path().join(format!(
                "home/.codex/sessions/2026/12/02/rollout-2026-12-02T05-00-00-{thread}.jsonl"
            ));
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            let meta = serde_json::json!({"type":"session_meta","payload":{"id":thread,"cwd":cwd}});
            std::fs::write(&file, format!("{meta}\n")).unwrap();
        };
        write("01old");
        let spec = TuiSpec {
            session: "s-new".into(),
            cwd: PathBuf::from(cwd),
            extra_dirs: Vec::new(),
            approval_mode: None,
            model: None,
            gateway: false,
        };
        let before = engine.saved_conversations(&spec.cwd);
        assert_eq!(before.len(), 1);
        // Nothing new: the session keeps its own id.
        engine.tui_finished(&spec, &before);
        assert_eq!(engine.thread_for("s-new"), "s-new");
        write("01new");
        engine.tui_finished(&spec, &before);
        assert_eq!(engine.thread_for("s-new"), "01new");
        // Saved now: resumed next time, not searched again.
        engine.tui_finished(&spec, &[]);
        assert_eq!(engine.thread_for("s-new"), "01new");
    }

    #[test]
    fn codex_resumes_its_thread_or_starts_plain() {
        let cmd = codex(
            PathBuf::from("codex"),
            &spec(Some(ApprovalMode::FullAccess)),
            Some("t1"),
        );
        assert_eq!(
            cmd.args,
            [
                "resume",
                "t1",
                "--cd",
                "/w",
                "--add-dir",
                "/x",
                "--ask-for-approval",
                "never",
                "--sandbox",
                "danger-full-access",
                "--model",
                "m"
            ]
        );
        let cmd = codex(
            PathBuf::from("codex"),
            &spec(Some(ApprovalMode::Manual)),
            None,
        );
        assert_eq!(cmd.args[..2], ["--cd".to_string(), "/w".to_string()]);
        assert!(cmd.args.windows(2).any(|w| w == ["--sandbox", "read-only"]));
    }

    /// A gateway session's TUI runs through the gateway as its engine does: Claude Code with
    /// the session's private settings file, Codex with the provider overrides ahead of
    /// `resume` and the key only in its environment.
    #[test]
    fn a_gateway_sessions_tuis_get_the_endpoint_and_the_key_out_of_their_arguments() {
        use jucode_engine::EngineFactory as _;
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let bin = home.join(".local/bin");
        std::fs::create_dir_all(&bin).unwrap();
        for name in ["claude", "codex"] {
            std::fs::write(bin.join(name), "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        let config = crate::AdapterConfig {
            jucode_home: dir.path().join("jucode"),
            user_home: home,
            gateway: Some(crate::gateway::GatewayEndpoint {
                api_url: "http://127.0.0.1:9".into(),
                key: "gw-secret".into(),
            }),
        };
        let mut on = spec(None);
        on.gateway = true;

        let claude = crate::claude::ClaudeEngine::new(config.clone());
        let cmd = claude.tui_command(&on).unwrap().unwrap();
        let settings = config
            .jucode_home
            .join(format!("daemon/claude-gateway-{}.json", on.session));
        assert!(
            cmd.args
                .contains(&format!("--settings={}", settings.display())),
            "{:?}",
            cmd.args
        );
        let written: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
        assert_eq!(
            written["env"]["ANTHROPIC_BASE_URL"],
            "http://127.0.0.1:9/v1/gateway/anthropic"
        );
        assert_eq!(written["env"]["ANTHROPIC_AUTH_TOKEN"], "gw-secret");
        assert_eq!(
            std::fs::metadata(&settings).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let off = claude.tui_command(&spec(None)).unwrap().unwrap();
        assert!(!off.args.iter().any(|a| a.starts_with("--settings")));

        let codex = crate::codex::CodexEngine::new(config.clone());
        let cmd = codex.tui_command(&on).unwrap().unwrap();
        assert_eq!(cmd.args[0], "-c", "{:?}", cmd.args);
        assert!(cmd.args.contains(&"model_provider=\"jucode\"".to_string()));
        assert!(!cmd.args.iter().any(|a| a.contains("gw-secret")));
        assert!(
            cmd.env
                .contains(&("JUCODE_GATEWAY_KEY".into(), "gw-secret".into()))
        );

        // Signed out since: the TUI is refused rather than started without credentials.
        let signed_out = crate::AdapterConfig {
            gateway: None,
            ..config
        };
        let codex = crate::codex::CodexEngine::new(signed_out);
        assert!(codex.tui_command(&on).unwrap().is_err());
    }
}
