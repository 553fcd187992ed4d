//! What the real-CLI suites share: finding the pinned CLIs and the MCP test server, and a temp
//! world (HOME, work dir, jucode home, a running fake model) each CLI runs in.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use jucode_adapters::AdapterConfig;
use jucode_engine::EngineHandle;
use jucode_testsupport::fake_model::FakeModel;
use serde_json::{Value, json};

pub const INSTALL: &str = "bash scripts/install-engines.sh";

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The pinned versions, from the one file that holds them.
fn versions() -> HashMap<String, String> {
    let text = std::fs::read_to_string(root().join("scripts/engine-versions.env")).unwrap();
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// One real CLI: where it is and what it is called in recordings.
pub struct Cli {
    pub bin: PathBuf,
    /// `claude-code-2.1.332` and the like: the prefix of recording names.
    pub label: String,
}

/// Finds a CLI from its variable or the peers install; panics (fails the test) when missing.
fn cli(var: &str, program: &str, package_key: &str, version_key: &str, label: &str) -> Cli {
    let versions = versions();
    let package = &versions[package_key];
    let version = &versions[version_key];
    let label = format!("{label}-{version}");
    if let Some(bin) = std::env::var_os(var).filter(|b| !b.is_empty()) {
        let bin = PathBuf::from(bin);
        assert!(
            bin.is_file(),
            "{var}={} is not a file; unset it to use the pinned install from `{INSTALL}`",
            bin.display()
        );
        return Cli { bin, label };
    }
    let modules = root().join("target/peers/npm/node_modules");
    let bin = modules.join(".bin").join(program);
    assert!(
        bin.exists(),
        "{program} is not installed at {}: run `{INSTALL}` (or set {var})",
        bin.display()
    );
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(modules.join(package).join("package.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest["version"].as_str(),
        Some(version.as_str()),
        "{package} is not the pinned {version}: run `{INSTALL}`"
    );
    Cli { bin, label }
}

pub fn claude_cli() -> Cli {
    cli(
        "CLAUDE_BIN",
        "claude",
        "CLAUDE_CODE_PACKAGE",
        "CLAUDE_CODE_VERSION",
        "claude-code",
    )
}

pub fn codex_cli() -> Cli {
    cli(
        "CODEX_BIN",
        "codex",
        "CODEX_PACKAGE",
        "CODEX_VERSION",
        "codex",
    )
}

pub fn acp_cli() -> Cli {
    cli(
        "CLAUDE_ACP_BIN",
        "claude-agent-acp",
        "CLAUDE_ACP_PACKAGE",
        "CLAUDE_ACP_VERSION",
        "claude-agent-acp",
    )
}

/// `jucode-mcp-echo`, built into the same target dir as this test on first use.
pub fn mcp_echo() -> PathBuf {
    jucode_testsupport::build_bin("jucode-mcp-echo", "jucode-mcp-testserver").unwrap()
}

/// The start options of a real CLI at `bin` with `env`, asking before each tool call.
pub fn manual(bin: &Path, env: Value) -> Value {
    json!({"bin": bin.display().to_string(), "env": env, "approval_mode": "manual"})
}

/// A temp world for one test: HOME, a work dir, the jucode home, a running fake model.
pub struct World {
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    pub cwd: PathBuf,
    pub model: FakeModel,
}

impl World {
    pub async fn new() -> World {
        // Under the target dir, not /tmp: Codex refuses to set up its helpers under /tmp.
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let home = dir.path().join("home");
        let cwd = dir.path().join("work");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&cwd).unwrap();
        let model = FakeModel::start().await.unwrap();
        World {
            dir,
            home,
            cwd,
            model,
        }
    }

    pub fn config(&self) -> AdapterConfig {
        AdapterConfig {
            jucode_home: self.dir.path().join("jucode"),
            user_home: self.home.clone(),
            gateway: None,
        }
    }

    /// Variables every CLI gets: a private HOME and no way to the outside.
    pub fn base_env(&self) -> Value {
        json!({
            "HOME": self.home.display().to_string(),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "SHELL": "/bin/bash",
            "NO_PROXY": "127.0.0.1,localhost",
        })
    }

    /// Claude Code and claude-agent-acp: the Anthropic API on the fake, no side traffic.
    pub fn anthropic_env(&self) -> Value {
        let mut env = self.base_env();
        env["ANTHROPIC_BASE_URL"] = json!(self.model.base_url());
        env["ANTHROPIC_API_KEY"] = json!("test");
        env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = json!("1");
        env["CLAUDE_CONFIG_DIR"] = json!(self.claude_config().display().to_string());
        env
    }

    /// Claude Code's config dir in this world.
    pub fn claude_config(&self) -> PathBuf {
        self.home.join(".claude")
    }

    /// The config.toml table naming the fake model server as the Codex provider `fake`.
    pub fn codex_provider(&self) -> String {
        format!(
            r#"[model_providers.fake]
name = "Fake local provider"
base_url = "{}/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0
"#,
            self.model.base_url()
        )
    }

    /// Codex: a CODEX_HOME whose config.toml is `config` (naming the fake as the provider).
    pub fn codex_env(&self, config: &str) -> Value {
        let codex_home = self.home.join(".codex");
        std::fs::create_dir_all(&codex_home).unwrap();
        std::fs::write(codex_home.join("config.toml"), config).unwrap();
        let mut env = self.base_env();
        env["CODEX_HOME"] = json!(codex_home.display().to_string());
        env["FAKE_API_KEY"] = json!("test");
        env["RUST_LOG"] = json!("warn");
        env
    }
}

/// The first event of `kind`, failing on an error event before it.
pub async fn answer(h: &mut EngineHandle, kind: &str) -> Value {
    let events = crate::common::until(h, kind).await;
    for e in &events {
        assert_ne!(e["type"], "error", "{e}");
    }
    events.last().cloned().unwrap()
}
