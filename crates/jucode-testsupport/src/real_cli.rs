//! What the real Claude Code and Codex CLIs need to start straight into a conversation against
//! the fake model server (no login, onboarding, trust or update screen), for the tests that
//! drive them. DECISIONS.md ("TUI hand-off") says how each was found.

// Test support: a test that cannot write its CLI's config should fail at once, naming why.
#![allow(clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use serde_json::json;

/// An installed CLI: `$var`, else the one `scripts/install-engines.sh` put under the target
/// directory. Panics naming both when neither exists.
pub fn cli(name: &str, var: &str) -> PathBuf {
    if let Some(bin) = std::env::var_os(var) {
        return PathBuf::from(bin);
    }
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/peers/npm/node_modules/.bin")
        .join(name);
    assert!(
        bin.exists(),
        "{name} is not installed: run scripts/install-engines.sh or set {var}"
    );
    bin
}

/// The API key the Claude Code tests use with the fake model server.
pub const CLAUDE_KEY: &str = "sk-ant-test-key-for-the-fake";

/// `<config dir>/.claude.json` as a signed-in user's says: onboarding done, `project` trusted,
/// [`CLAUDE_KEY`] approved (Claude Code keeps a key's last 20 characters).
pub fn write_claude_state(config_dir: &Path, project: &Path) {
    let state = json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [&CLAUDE_KEY[CLAUDE_KEY.len() - 20..]], "rejected": []},
        "projects": {project.display().to_string(): {"hasTrustDialogAccepted": true}},
    });
    std::fs::create_dir_all(config_dir).expect("the Claude Code config directory");
    std::fs::write(config_dir.join(".claude.json"), state.to_string())
        .expect("the Claude Code state file");
}

/// `<codex home>/config.toml` naming the fake model server (`model_base`, its base URL) as
/// the provider `fake` (key in `FAKE_API_KEY`), `project` trusted, nothing phoned home.
pub fn write_codex_config(codex_home: &Path, model_base: &str, project: &Path) {
    let config = format!(
        r#"model = "fake-model"
model_provider = "fake"
approval_policy = "on-request"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake local provider"
base_url = "{model_base}/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[projects."{}"]
trust_level = "trusted"

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
"#,
        project.display()
    );
    std::fs::create_dir_all(codex_home).expect("the Codex home");
    std::fs::write(codex_home.join("config.toml"), config).expect("the Codex config");
}

/// Whether a TUI's prompt line (`>` for Claude Code, `›` for Codex) on `screen` still holds
/// `text`: typed but not yet taken.
pub fn prompt_holds(screen: &str, text: &str) -> bool {
    screen.lines().any(|line| {
        let line = line.trim_start();
        let rest = line
            .strip_prefix('>')
            .or_else(|| line.strip_prefix('›'))
            .unwrap_or("");
        rest.trim() == text
    })
}
