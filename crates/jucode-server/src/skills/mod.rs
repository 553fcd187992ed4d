//! The skill sources behind `skills_catalog` and `skill_install`: the JuCode marketplace
//! (`GET <api>/v1/skills/marketplace`, with the login's bearer token when there is one) and
//! the bundled index of Anthropic's skills repository at a pinned commit, whose files are
//! fetched from a configurable base URL and checked against the index's sha256.
//!
//! Both URLs are read from `config.json` on every op, so an edit needs no restart. The hub
//! only sees [`SkillSources`] as its `Skills`.

mod install;

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use jucode_hub::{CatalogFuture, InstallFuture, SkillCatalog, Skills};
use jucode_protocol::daemon::{SkillInfo, SkillSource};
use serde::Deserialize;

use crate::billing::GatewayAccount;

/// The index shipped in the binary (regenerate with `scripts/anthropic-skills-index.py`).
const BUNDLED_INDEX: &str = include_str!("anthropic-index.json");
/// Where the pinned commit's files are read by default: `<base>/<commit>/skills/<id>/<path>`.
const ANTHROPIC_BASE: &str = "https://raw.githubusercontent.com/anthropics/skills";
/// A marketplace that does not answer within this is a warning, not a stalled catalog.
const CATALOG_TIMEOUT: Duration = Duration::from_secs(10);
/// One download (a package or an index file) may take this long.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// The Anthropic index: the repository, its pinned commit and every skill's files.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Index {
    pub(crate) commit: String,
    pub(crate) skills: Vec<IndexSkill>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct IndexSkill {
    pub(crate) id: String,
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) description: String,
    #[serde(default)]
    pub(crate) license: Option<String>,
    #[serde(default = "yes")]
    pub(crate) redistributable: bool,
    #[serde(default)]
    pub(crate) homepage: Option<String>,
    pub(crate) files: Vec<IndexFile>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct IndexFile {
    pub(crate) path: String,
    pub(crate) size: u64,
    pub(crate) sha256: String,
    #[serde(default)]
    pub(crate) executable: bool,
}

fn yes() -> bool {
    true
}

/// One marketplace row as the JuCode API sends it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MarketSkill {
    pub(crate) id: String,
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) description: String,
    #[serde(default)]
    pub(crate) tags: Vec<String>,
    #[serde(default, rename = "isDefault")]
    pub(crate) is_default: bool,
    #[serde(default)]
    pub(crate) license: Option<String>,
    #[serde(default)]
    pub(crate) homepage: Option<String>,
    /// The whole skill as one `SKILL.md`.
    #[serde(default)]
    pub(crate) content: Option<String>,
    /// Or a tar.gz of the skill's directory, with its sha256.
    #[serde(default)]
    pub(crate) package: Option<Package>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Package {
    /// Absolute, or relative to the marketplace URL.
    pub(crate) url: String,
    pub(crate) sha256: String,
}

#[derive(Deserialize)]
struct Marketplace {
    skills: Vec<MarketSkill>,
}

/// The keys of `config.json` the sources read.
#[derive(Debug, Default, Deserialize)]
struct ConfigKeys {
    #[serde(default)]
    jucode_api_url: Option<String>,
    #[serde(default)]
    skills_marketplace_url: Option<String>,
    #[serde(default)]
    anthropic_skills_url: Option<String>,
    #[serde(default)]
    anthropic_skills_index: Option<PathBuf>,
}

/// Both sources, with the account read at start; cheap to clone into an op's task.
#[derive(Clone)]
pub struct SkillSources(Arc<Sources>);

struct Sources {
    home: PathBuf,
    account: Option<GatewayAccount>,
    http: reqwest::Client,
}

impl SkillSources {
    pub fn new(home: PathBuf, account: Option<GatewayAccount>) -> Result<SkillSources, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(CATALOG_TIMEOUT)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(SkillSources(Arc::new(Sources {
            home,
            account,
            http,
        })))
    }
}

impl Sources {
    fn keys(&self) -> ConfigKeys {
        let path = self.home.join("config.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            return ConfigKeys::default();
        };
        serde_json::from_str(&text).unwrap_or_else(|e| {
            tracing::warn!("{}: skill sources use their defaults ({e})", path.display());
            ConfigKeys::default()
        })
    }

    /// The marketplace URL: configured, else under the JuCode API (configured, else the
    /// account's). `None` when neither is known.
    fn marketplace_url(&self, keys: &ConfigKeys) -> Option<String> {
        if let Some(url) = &keys.skills_marketplace_url {
            return Some(url.clone());
        }
        let api = keys
            .jucode_api_url
            .clone()
            .or_else(|| self.account.as_ref().map(|a| a.url.clone()))?;
        Some(format!(
            "{}/v1/skills/marketplace",
            api.trim_end_matches('/')
        ))
    }

    fn index(&self, keys: &ConfigKeys) -> Result<Index, String> {
        let text = match &keys.anthropic_skills_index {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|e| format!("the Anthropic skills index {}: {e}", path.display()))?,
            None => BUNDLED_INDEX.to_string(),
        };
        serde_json::from_str(&text).map_err(|e| format!("the Anthropic skills index: {e}"))
    }

    async fn marketplace(&self, keys: &ConfigKeys) -> Result<(String, Vec<MarketSkill>), String> {
        let url = self.marketplace_url(keys).ok_or_else(|| {
            "the JuCode marketplace is not configured: sign in to JuCode or set jucode_api_url in config.json"
                .to_string()
        })?;
        let mut request = self.http.get(&url).timeout(CATALOG_TIMEOUT);
        if let Some(account) = &self.account {
            request = request.bearer_auth(&account.token);
        }
        let fail = |why: String| format!("the JuCode marketplace could not be read: {why}");
        let response = request.send().await.map_err(|e| fail(reason(&e)))?;
        if !response.status().is_success() {
            return Err(fail(format!("it answered {}", response.status())));
        }
        let market: Marketplace = response
            .json()
            .await
            .map_err(|e| fail(format!("not a skills list ({})", reason(&e))))?;
        Ok((url, market.skills))
    }
}

impl Skills for SkillSources {
    fn catalog(&self) -> CatalogFuture {
        let this = self.0.clone();
        Box::pin(async move {
            let keys = this.keys();
            let mut skills = Vec::new();
            let mut warnings = Vec::new();
            match this.marketplace(&keys).await {
                Ok((_, market)) => skills.extend(
                    market
                        .into_iter()
                        .filter(|s| jucode_hub::valid_skill_id(&s.id))
                        .map(market_info),
                ),
                Err(warning) => warnings.push(warning),
            }
            match this.index(&keys) {
                Ok(index) => skills.extend(index.skills.into_iter().map(anthropic_info)),
                Err(warning) => warnings.push(warning),
            }
            SkillCatalog { skills, warnings }
        })
    }

    fn install(&self, source: SkillSource, skill: String, install_dir: PathBuf) -> InstallFuture {
        let this = self.0.clone();
        Box::pin(async move {
            let keys = this.keys();
            let target = install_dir.join(&skill);
            match source {
                SkillSource::Jucode => {
                    let (url, market) = this.marketplace(&keys).await?;
                    let found = market
                        .into_iter()
                        .find(|s| s.id == skill)
                        .ok_or_else(|| format!("no skill {skill} in the JuCode marketplace"))?;
                    install::jucode(&this.http, &url, found, &target).await?;
                }
                SkillSource::Anthropic => {
                    let index = this.index(&keys)?;
                    let found =
                        index.skills.iter().find(|s| s.id == skill).ok_or_else(|| {
                            format!("no skill {skill} in the Anthropic skills index")
                        })?;
                    if !found.redistributable {
                        return Err(format!(
                            "{skill} is source-available: its license does not allow installing a copy"
                        ));
                    }
                    let base = keys
                        .anthropic_skills_url
                        .clone()
                        .unwrap_or_else(|| ANTHROPIC_BASE.to_string());
                    let base = format!(
                        "{}/{}/skills/{}",
                        base.trim_end_matches('/'),
                        index.commit,
                        found.id
                    );
                    install::anthropic(&this.http, &base, found, &target).await?;
                }
            }
            Ok(target)
        })
    }
}

fn market_info(s: MarketSkill) -> SkillInfo {
    SkillInfo {
        id: s.id,
        name: s.name,
        description: s.description,
        tags: s.tags,
        source: SkillSource::Jucode,
        is_default: s.is_default,
        installed: false,
        license: s.license,
        redistributable: true,
        homepage: s.homepage,
    }
}

fn anthropic_info(s: IndexSkill) -> SkillInfo {
    SkillInfo {
        id: s.id,
        name: s.name,
        description: s.description,
        tags: Vec::new(),
        source: SkillSource::Anthropic,
        is_default: false,
        installed: false,
        license: s.license,
        redistributable: s.redistributable,
        homepage: s.homepage,
    }
}

/// A path inside a skill's directory: relative, only plain components.
pub(crate) fn inside(path: &Path) -> bool {
    path.components().next().is_some()
        && path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// The innermost cause of a request error, without the URL.
pub(crate) fn reason(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "no answer in time".into();
    }
    let mut last = match e.url() {
        Some(url) => e.to_string().replace(url.as_str(), "…"),
        None => e.to_string(),
    };
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = source {
        last = s.to_string();
        source = s.source();
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_index_reads_and_pins_a_commit() {
        let index: Index = serde_json::from_str(BUNDLED_INDEX).unwrap();
        assert_eq!(index.commit.len(), 40);
        assert!(
            index
                .skills
                .iter()
                .any(|s| s.id == "skill-creator" && s.redistributable)
        );
        assert!(
            index
                .skills
                .iter()
                .any(|s| s.id == "pdf" && !s.redistributable)
        );
        for s in &index.skills {
            assert!(jucode_hub::valid_skill_id(&s.id), "{}", s.id);
            assert!(s.files.iter().any(|f| f.path == "SKILL.md"), "{}", s.id);
            assert!(
                s.files.iter().all(|f| inside(Path::new(&f.path))),
                "{}",
                s.id
            );
        }
    }

    #[test]
    fn only_plain_relative_paths_are_inside() {
        assert!(inside(Path::new("SKILL.md")));
        assert!(inside(Path::new("scripts/run.py")));
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "./a"] {
            assert!(!inside(Path::new(bad)), "{bad}");
        }
    }
}
