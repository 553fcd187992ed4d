//! Skills a local client lists and installs: `skills_catalog` and `skill_install`, and the
//! catalog row both sources share.

use serde::{Deserialize, Serialize};

/// Ops of [`crate::daemon::ops::Area::Skills`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum SkillsOp {
    /// Both sources' skills; `backend` picks the directory `installed` is checked in.
    SkillsCatalog {
        #[serde(default)]
        backend: Option<String>,
    },
    /// Installs one catalog skill into the backend's directory.
    SkillInstall {
        source: SkillSource,
        skill: String,
        #[serde(default)]
        backend: Option<String>,
    },
}

/// Where a skill comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SkillSource {
    /// The JuCode marketplace.
    Jucode,
    /// The bundled index of Anthropic's skills repository.
    Anthropic,
}

impl SkillSource {
    pub fn as_str(self) -> &'static str {
        match self {
            SkillSource::Jucode => "jucode",
            SkillSource::Anthropic => "anthropic",
        }
    }
}

/// One row of `skills_catalog`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SkillInfo {
    pub id: String,
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub tags: Vec<String>,
    pub source: SkillSource,
    /// The marketplace recommends it to everyone.
    #[serde(rename = "isDefault")]
    pub is_default: bool,
    /// `<installDir>/<id>/SKILL.md` exists.
    pub installed: bool,
    pub license: Option<String>,
    /// False for source-available skills, which `skill_install` refuses.
    pub redistributable: bool,
    pub homepage: Option<String>,
}

/// The longest skill id accepted.
pub const SKILL_ID_CHARS: usize = 128;

impl SkillsOp {
    pub(crate) fn check_limits(&self) -> Result<(), crate::daemon::limits::TooLong> {
        use crate::daemon::limits;
        match self {
            SkillsOp::SkillsCatalog { backend } => limits::bytes("backend", backend.as_deref(), 64),
            SkillsOp::SkillInstall { skill, backend, .. } => {
                limits::bytes("skill", Some(skill), SKILL_ID_CHARS)?;
                limits::bytes("backend", backend.as_deref(), 64)
            }
        }
    }
}
