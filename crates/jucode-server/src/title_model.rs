//! The hub's title model: the built-in engine's `title_model` from `<home>/config.json`,
//! asked through jucode-agent's own client. The config is read at each question, so an edit
//! takes effect without a restart; no config means no title model.

use std::path::PathBuf;

use jucode_agent::config::{Config, ConfigError};
use jucode_hub::{TitleFuture, TitleModel, TitleModelError};

pub struct AgentTitleModel {
    config: PathBuf,
}

impl AgentTitleModel {
    /// The title model of `<home>/config.json`.
    pub fn new(home: &std::path::Path) -> AgentTitleModel {
        AgentTitleModel {
            config: home.join("config.json"),
        }
    }
}

impl TitleModel for AgentTitleModel {
    fn complete(&self, system: &str, user: &str, max_tokens: u64) -> TitleFuture {
        let path = self.config.clone();
        let system = system.to_string();
        let user = user.to_string();
        Box::pin(async move {
            let config = match Config::load(&path, |var| std::env::var(var).ok()) {
                Ok(config) => config,
                Err(ConfigError::Missing { .. }) => return Err(TitleModelError::NotConfigured),
                Err(e) => return Err(TitleModelError::Failed(e.to_string())),
            };
            jucode_agent::model::ask_title_model(&config, &system, &user, max_tokens)
                .await
                .map_err(|e| TitleModelError::Failed(e.to_string()))
        })
    }
}
