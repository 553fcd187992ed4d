//! `skills_catalog` and `skill_install`: the hub picks the install directory from `backend`
//! and answers by request id from a spawned task; the sources themselves (HTTP, archives,
//! checksums) are its host's [`Skills`], so the hub stays free of HTTP.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use jucode_protocol::daemon::{DaemonEvent, Reply, SkillInfo, SkillSource, SkillsOp};

use crate::cx::OpCx;
use crate::error::OpError;
use crate::to_value;

/// What a source lookup returns: the skills both sources listed (`installed` still unset) and
/// a warning per source that could not be read.
pub struct SkillCatalog {
    pub skills: Vec<SkillInfo>,
    pub warnings: Vec<String>,
}

pub type CatalogFuture = Pin<Box<dyn Future<Output = SkillCatalog> + Send>>;
/// An install's outcome: the skill's directory, or why it was refused (the error text).
pub type InstallFuture = Pin<Box<dyn Future<Output = Result<PathBuf, String>> + Send>>;

/// The skill sources, as the daemon's host reaches them.
pub trait Skills: Send + Sync {
    fn catalog(&self) -> CatalogFuture;
    /// Looks `skill` up again in `source`, downloads and verifies it beside
    /// `<install_dir>/<skill>`, then swaps it in.
    fn install(&self, source: SkillSource, skill: String, install_dir: PathBuf) -> InstallFuture;
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SkillError {
    #[error("skills are not available in this daemon")]
    NoSources,
    #[error("bad skill id {0:?}: letters, digits, '.', '_' and '-' only")]
    BadId(String),
}

/// `~/.claude/skills` for the `claude` backend, `~/.jucode/skills` for any other.
pub(crate) fn install_dir(user_home: &Path, home: &Path, backend: Option<&str>) -> PathBuf {
    match backend {
        Some("claude") => user_home.join(".claude").join("skills"),
        _ => home.join("skills"),
    }
}

/// A skill id names one directory: no separators, no dot-only names.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= jucode_protocol::daemon::skills::SKILL_ID_CHARS
        && !id.chars().all(|c| c == '.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

pub(crate) fn handle(cx: &OpCx<'_>, op: SkillsOp) -> Result<(), OpError> {
    let sources = cx
        .hub
        .config
        .online
        .skills
        .clone()
        .ok_or(SkillError::NoSources)?;
    let config = &cx.hub.config;
    let hub = cx.hub.clone();
    let client = cx.client;
    let id = cx.id.clone();
    match op {
        SkillsOp::SkillsCatalog { backend } => {
            let dir = install_dir(&config.user_home, &config.home, backend.as_deref());
            tokio::spawn(async move {
                let catalog = sources.catalog().await;
                let event = catalog_event(catalog, &dir);
                hub.lock()
                    .clients
                    .send(client, &to_value(&Reply::to(id, event)));
            });
        }
        SkillsOp::SkillInstall {
            source,
            skill,
            backend,
        } => {
            if !valid_id(&skill) {
                return Err(SkillError::BadId(skill).into());
            }
            let dir = install_dir(&config.user_home, &config.home, backend.as_deref());
            tokio::spawn(async move {
                let reply = match sources.install(source, skill, dir).await {
                    Ok(path) => Reply::to(
                        id,
                        DaemonEvent::SkillInstalled {
                            path: path.display().to_string(),
                        },
                    ),
                    Err(message) => Reply::error(id, message),
                };
                hub.lock().clients.send(client, &to_value(&reply));
            });
        }
    }
    Ok(())
}

fn catalog_event(catalog: SkillCatalog, dir: &Path) -> DaemonEvent {
    let skills = catalog
        .skills
        .into_iter()
        .map(|mut s| {
            s.installed = valid_id(&s.id) && dir.join(&s.id).join("SKILL.md").is_file();
            s
        })
        .collect();
    DaemonEvent::SkillsCatalog {
        skills,
        warnings: catalog.warnings,
        install_dir: dir.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_one_directory() {
        for good in ["pdf", "skill-creator", "a.b_c", "X1"] {
            assert!(valid_id(good), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a\\b",
            "../x",
            "a b",
            "é",
            &"x".repeat(129),
        ] {
            assert!(!valid_id(bad), "{bad}");
        }
    }

    #[test]
    fn the_claude_backend_installs_under_claude() {
        let (u, h) = (Path::new("/u"), Path::new("/u/.jucode"));
        assert_eq!(
            install_dir(u, h, Some("claude")),
            Path::new("/u/.claude/skills")
        );
        assert_eq!(
            install_dir(u, h, Some("jucode")),
            Path::new("/u/.jucode/skills")
        );
        assert_eq!(install_dir(u, h, None), Path::new("/u/.jucode/skills"));
    }
}
