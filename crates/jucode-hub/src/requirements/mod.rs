//! Requirements (`requirement_*`): what the user means to get done, kept in
//! `requirements.jsonl` (`store.rs`), with the images moved under
//! `uploads/requirements/<id>/`. Every change is broadcast as the whole `requirements` list,
//! whose `status` is derived from the linked sessions (`status.rs`).

mod gate;
mod prompts;
mod status;
mod store;
pub(crate) mod titles;
#[cfg(test)]
mod titles_tests;
pub(crate) mod tool;
#[cfg(test)]
mod tool_tests;

use std::path::{Path, PathBuf};

use jucode_clock::SharedClock;
use jucode_protocol::daemon::files::FS_IMAGE_MAX_BYTES;
use jucode_protocol::daemon::requirements::REQUIREMENT_IMAGES;
use jucode_protocol::daemon::{
    DaemonEvent, Progress, Reply, RequirementInfo, RequirementState, RequirementsOp,
};
use jucode_store::{StateDir, StoreError};
use serde_json::Value;

use crate::cx::OpCx;
use crate::error::{IoError, OpError};
use crate::sessions::Sessions;
use crate::workspaces::Workspaces;
use crate::{HubError, Inner, to_value};

pub(crate) use gate::read_only;
pub(crate) use store::Stored;

/// Titles up to this many characters are the words themselves.
const TITLE_CHARS: usize = 40;

/// Why a requirement op failed; the texts are the protocol's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequirementError {
    #[error("could not save the requirement: {0}")]
    Save(#[from] StoreError),
    #[error("unknown requirement {0}")]
    Unknown(String),
    #[error("{0}: text must not be empty")]
    EmptyText(&'static str),
    #[error("unknown project {0}")]
    UnknownProject(String),
    #[error("project must be a project id or null")]
    ProjectType,
    #[error("unknown session {0}")]
    UnknownSession(String),
    #[error("source must be desktop, phone or session")]
    Source,
    #[error("a requirement holds at most {REQUIREMENT_IMAGES} images")]
    TooManyImages,
    #[error("{0} is not an uploaded image")]
    NotAnUpload(String),
    #[error("session {session} is not linked to {requirement}")]
    NotLinked {
        requirement: String,
        session: String,
    },
    #[error("{requirement} has no image {index}")]
    NoImage { requirement: String, index: usize },
    #[error("{0} has no proposal to decide")]
    NoProposal(String),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("{0} is not a png, jpeg, gif or webp image")]
    NotImage(String),
    #[error("{0} is larger than {max} MiB", max = FS_IMAGE_MAX_BYTES / (1024 * 1024))]
    TooLarge(String),
    #[error("lang must be zh or en")]
    Lang,
    #[error("unknown mode {0:?} (expected ask, plan, auto, edits or all)")]
    Mode(String),
    #[error("session {0} is running a turn: wait for it to end or interrupt it first")]
    SessionBusy(String),
    #[error("{0} has no start gate to confirm")]
    NoGate(String),
    #[error("{0}: its session is still working; confirm once it has stopped")]
    GateBusy(String),
    #[error("{0} has no session and no project directory to start one in: give cwd")]
    NoDirectory(String),
}

pub(crate) struct Requirements {
    clock: SharedClock,
    store: store::Store,
}

impl Requirements {
    pub(crate) fn open(store: &StateDir, clock: SharedClock) -> Result<Requirements, HubError> {
        Ok(Requirements {
            clock,
            store: store::Store::open(store)?,
        })
    }

    /// Replaces the `projects: ["/path"]` of requirements saved before projects had ids with
    /// the project whose main directory is the first path (or none), once there are projects.
    pub(crate) fn migrate(&mut self, workspaces: &Workspaces) -> Result<(), StoreError> {
        if !workspaces.has_projects() {
            return Ok(());
        }
        let migrated: Vec<Stored> = self
            .store
            .map
            .values()
            .filter_map(|r| {
                let dirs = r.projects.as_ref()?;
                let mut r = r.clone();
                if r.project.is_none() {
                    r.project = dirs
                        .first()
                        .and_then(|d| workspaces.project_at(Path::new(d)));
                }
                r.projects = None;
                Some(r)
            })
            .collect();
        self.store.save_all(migrated)
    }

    /// Whether requirement `id` exists.
    pub(crate) fn exists(&self, id: &str) -> bool {
        self.store.get(id).is_some()
    }

    /// Whether `session` works on a requirement.
    pub(crate) fn is_linked(&self, session: &str) -> bool {
        self.store
            .map
            .values()
            .any(|r| r.sessions.iter().any(|s| s == session))
    }

    pub(crate) fn event(&self, sessions: &Sessions) -> DaemonEvent {
        DaemonEvent::Requirements {
            requirements: self.list(sessions),
        }
    }

    fn list(&self, sessions: &Sessions) -> Vec<RequirementInfo> {
        self.store
            .map
            .values()
            .map(|r| status::info(r, sessions))
            .collect()
    }

    fn get(&self, id: &str) -> Result<Stored, RequirementError> {
        self.store
            .get(id)
            .cloned()
            .ok_or_else(|| RequirementError::Unknown(id.to_string()))
    }

    fn save(&mut self, mut r: Stored) -> Result<(), RequirementError> {
        r.updated_at = self.clock.now_ms();
        Ok(self.store.save(r)?)
    }
}

/// A title for `text`: the words themselves when short, else their first line cut to
/// [`TITLE_CHARS`] until the title model's answer replaces it (`titles.rs`).
fn title_for(text: &str) -> String {
    let first = text.trim().lines().next().unwrap_or_default().trim();
    first.chars().take(TITLE_CHARS).collect()
}

impl Inner {
    pub(crate) fn broadcast_requirements(&mut self) {
        let event = self.requirements.event(&self.sessions);
        self.notifications.requirements_seen(&event);
        let frame = to_value(&Reply::to(None, event));
        self.broadcast(&frame);
    }

    /// A project id a client sent (`null` for none), checked against the workspaces.
    fn project_field(&self, value: Value) -> Result<Option<String>, RequirementError> {
        match value {
            Value::Null => Ok(None),
            Value::String(id) if self.workspaces.project(&id).is_some() => Ok(Some(id)),
            Value::String(id) => Err(RequirementError::UnknownProject(id)),
            _ => Err(RequirementError::ProjectType),
        }
    }

    fn known_session(&self, session: &str) -> Result<String, RequirementError> {
        if self.sessions.cwd_of(session).is_none() {
            return Err(RequirementError::UnknownSession(session.to_string()));
        }
        Ok(self.sessions.current_id(session).to_string())
    }

    /// Links a session the hub started (a dispatch's task) to requirement `id`, and tells
    /// every client.
    pub(crate) fn link_session(&mut self, id: &str, session: &str) -> Result<(), RequirementError> {
        self.link(id, session)?;
        self.broadcast_requirements();
        Ok(())
    }

    /// Links `session` to `id` (it leaves any other requirement and that one's gate).
    fn link(&mut self, id: &str, session: &str) -> Result<(), RequirementError> {
        let mut target = self.requirements.get(id)?;
        let others: Vec<Stored> = self
            .requirements
            .store
            .map
            .values()
            .filter(|r| r.id != id && r.sessions.iter().any(|s| s == session))
            .cloned()
            .collect();
        for mut other in others {
            other.sessions.retain(|s| s != session);
            if other.gate.as_ref().is_some_and(|g| g.session == session) {
                other.gate = None;
            }
            self.requirements.save(other)?;
        }
        if !target.sessions.iter().any(|s| s == session) {
            target.sessions.push(session.to_string());
        }
        target.state = RequirementState::Open;
        self.requirements.save(target)
    }
}

/// Moves uploaded images into `dir`; a path outside the uploads (or not an image) is
/// refused before anything moves.
fn take_images(
    uploads: &Path,
    dir: &Path,
    images: &[String],
) -> Result<Vec<String>, RequirementError> {
    if images.len() > REQUIREMENT_IMAGES {
        return Err(RequirementError::TooManyImages);
    }
    let uploads = std::fs::canonicalize(uploads).ok();
    let kept = uploads.as_ref().map(|u| u.join("requirements"));
    let mut sources = Vec::new();
    for image in images {
        let not = || RequirementError::NotAnUpload(image.clone());
        let real = std::fs::canonicalize(image).map_err(|_| not())?;
        let inside = uploads.as_ref().is_some_and(|u| real.starts_with(u))
            && !kept.as_ref().is_some_and(|k| real.starts_with(k));
        if !inside || !real.is_file() || !is_image(&real) {
            return Err(not());
        }
        sources.push(real);
    }
    if sources.is_empty() {
        return Ok(Vec::new());
    }
    std::fs::create_dir_all(dir).map_err(IoError::at(dir))?;
    let mut moved = Vec::new();
    for (i, source) in sources.iter().enumerate() {
        let name = source
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let to: PathBuf = dir.join(format!("{}-{name}", i + 1));
        std::fs::rename(source, &to).map_err(IoError::at(source))?;
        moved.push(to.display().to_string());
    }
    Ok(moved)
}

/// A requirement's image as a data URL.
fn data_url(path: &str) -> Result<String, RequirementError> {
    use base64::Engine as _;
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(IoError::at(path))?;
    let mut bytes = Vec::new();
    file.take(FS_IMAGE_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(IoError::at(path))?;
    if bytes.len() as u64 > FS_IMAGE_MAX_BYTES {
        return Err(RequirementError::TooLarge(path.to_string()));
    }
    let media = crate::files::image_type(&bytes)
        .ok_or_else(|| RequirementError::NotImage(path.to_string()))?;
    let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(format!("data:{media};base64,{encoded}"))
}

fn is_image(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 16];
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let n = file.read(&mut head).unwrap_or(0);
    crate::files::image_type(&head[..n]).is_some()
}

/// Answers the requirement ops; every change is broadcast as the whole list.
pub(crate) fn handle(cx: &OpCx<'_>, op: RequirementsOp) -> Result<(), OpError> {
    let uploads = cx.hub.uploads_dir();
    let mut inner = cx.hub.lock();
    let inner = &mut *inner;
    let now = inner.requirements.clock.now_ms();
    // A requirement whose words want a title from the title model, asked once it is saved.
    let mut titled: Option<(String, String)> = None;
    let reply = match op {
        RequirementsOp::RequirementList => {
            let list = inner.requirements.event(&inner.sessions);
            cx.reply_locked(inner, list);
            return Ok(());
        }
        RequirementsOp::RequirementCreate {
            text,
            project,
            images,
            source,
            session,
        } => {
            if text.trim().is_empty() {
                return Err(RequirementError::EmptyText("requirement_create").into());
            }
            let session = session.map(|s| inner.known_session(&s)).transpose()?;
            let project = match project {
                Some(value) => inner.project_field(value)?,
                None => session
                    .as_deref()
                    .and_then(|s| inner.sessions.cwd_of(s))
                    .and_then(|cwd| inner.workspaces.project_at(cwd)),
            };
            let source = match source.as_deref() {
                Some(s @ ("desktop" | "phone" | "session")) => s.to_string(),
                Some(_) => return Err(RequirementError::Source.into()),
                None if session.is_some() => "session".into(),
                None if cx.is_device() => "phone".into(),
                None => "desktop".into(),
            };
            let id = inner.requirements.store.next_id();
            let dir = uploads.join("requirements").join(&id);
            let images = take_images(&uploads, &dir, &images)?;
            titled = Some((id.clone(), text.clone()));
            let r = Stored {
                id: id.clone(),
                title: title_for(&text),
                title_auto: false,
                text,
                images,
                project,
                projects: None,
                state: RequirementState::Idea,
                sessions: Vec::new(),
                progress: Progress::default(),
                progress_at: 0,
                source,
                source_session: session,
                gate: None,
                proposal: None,
                created_at: now,
                updated_at: now,
            };
            inner.requirements.save(r)?;
            DaemonEvent::RequirementCreated { requirement: id }
        }
        RequirementsOp::RequirementUpdate {
            requirement,
            text,
            project,
            state,
        } => {
            let mut r = inner.requirements.get(&requirement)?;
            if let Some(text) = text {
                if text.trim().is_empty() {
                    return Err(RequirementError::EmptyText("requirement_update").into());
                }
                if text != r.text {
                    // A title the user chose stays; the cut and the model's follow the words.
                    if !titles::is_users_title(&r.title, r.title_auto, &r.text) {
                        r.title = title_for(&text);
                        r.title_auto = false;
                        titled = Some((requirement.clone(), text.clone()));
                    }
                    r.text = text;
                }
            }
            if let Some(value) = project {
                r.project = inner.project_field(value)?;
                r.projects = None;
            }
            if let Some(state) = state {
                r.state = state;
                // Done or parked, nothing is left to confirm.
                if matches!(state, RequirementState::Done | RequirementState::Parked) {
                    r.gate = None;
                }
            }
            inner.requirements.save(r)?;
            DaemonEvent::RequirementSaved { requirement }
        }
        RequirementsOp::RequirementDelete { requirement } => {
            inner.requirements.get(&requirement)?;
            inner
                .requirements
                .store
                .delete(&requirement, now)
                .map_err(RequirementError::from)?;
            let dir = uploads.join("requirements").join(&requirement);
            if dir.is_dir()
                && let Err(e) = std::fs::remove_dir_all(&dir)
            {
                tracing::warn!("{}: {e}", dir.display());
            }
            DaemonEvent::RequirementDeleted { requirement }
        }
        RequirementsOp::RequirementLink {
            requirement,
            session,
        } => {
            let session = inner.known_session(&session)?;
            inner.link(&requirement, &session)?;
            DaemonEvent::RequirementLinked {
                requirement,
                session,
            }
        }
        RequirementsOp::RequirementUnlink {
            requirement,
            session,
        } => {
            let mut r = inner.requirements.get(&requirement)?;
            let session = inner.sessions.current_id(&session).to_string();
            if !r.sessions.contains(&session) {
                return Err(RequirementError::NotLinked {
                    requirement,
                    session,
                }
                .into());
            }
            r.sessions.retain(|s| *s != session);
            if r.gate.as_ref().is_some_and(|g| g.session == session) {
                r.gate = None;
            }
            inner.requirements.save(r)?;
            DaemonEvent::RequirementUnlinked {
                requirement,
                session,
            }
        }
        RequirementsOp::RequirementImage { requirement, index } => {
            let r = inner.requirements.get(&requirement)?;
            let Some(path) = r.images.get(index) else {
                return Err(RequirementError::NoImage { requirement, index }.into());
            };
            let data = data_url(path)?;
            let event = DaemonEvent::RequirementImage {
                requirement,
                index,
                data,
            };
            cx.reply_locked(inner, event);
            return Ok(());
        }
        RequirementsOp::RequirementProposal {
            requirement,
            accept,
        } => {
            let mut r = inner.requirements.get(&requirement)?;
            let kind = r
                .proposal
                .as_ref()
                .and_then(|p| p.get("kind"))
                .and_then(Value::as_str)
                .map(str::to_string);
            match (r.state, kind.as_deref(), accept) {
                (RequirementState::Proposed, _, true) => {
                    r.state = RequirementState::Idea;
                    r.proposal = None;
                    inner.requirements.save(r)?;
                }
                (RequirementState::Proposed, _, false) => {
                    inner
                        .requirements
                        .store
                        .delete(&requirement, now)
                        .map_err(RequirementError::from)?;
                }
                (RequirementState::Idea | RequirementState::Open, Some("close"), true) => {
                    let outcome = r
                        .proposal
                        .as_ref()
                        .and_then(|p| p.get("outcome"))
                        .and_then(Value::as_str);
                    r.state = match outcome {
                        Some("parked") => RequirementState::Parked,
                        _ => RequirementState::Done,
                    };
                    r.proposal = None;
                    r.gate = None;
                    inner.requirements.save(r)?;
                }
                (RequirementState::Idea | RequirementState::Open, Some("close"), false) => {
                    r.proposal = None;
                    inner.requirements.save(r)?;
                }
                _ => return Err(RequirementError::NoProposal(requirement).into()),
            }
            DaemonEvent::RequirementProposalDecided {
                requirement,
                accept,
            }
        }
        RequirementsOp::RequirementBegin {
            requirement,
            session,
            plan,
            mode,
            text,
            lang,
        } => {
            let begin = gate::Begin {
                requirement: requirement.clone(),
                session,
                plan,
                mode,
                text,
                lang,
            };
            let session = gate::begin(cx.hub, inner, begin)?;
            DaemonEvent::RequirementBegun {
                requirement,
                session,
            }
        }
        RequirementsOp::RequirementConfirm {
            requirement,
            text,
            lang,
        } => {
            let stage = gate::confirm(
                cx.hub,
                inner,
                &requirement,
                text.as_deref(),
                lang.as_deref(),
            )?;
            DaemonEvent::RequirementConfirmed {
                requirement,
                stage: stage.into(),
            }
        }
        RequirementsOp::RequirementReply {
            requirement,
            text,
            new_session,
            cwd,
            engine,
            plan,
            mode,
            lang,
        } => {
            let req = gate::ReplyReq {
                requirement,
                text,
                new_session,
                cwd,
                engine,
                plan,
                mode,
                lang,
            };
            match gate::reply(cx, inner, req)? {
                Some(reply) => reply,
                None => {
                    inner.notifications.caused_by_user();
                    inner.broadcast_requirements();
                    return Ok(());
                }
            }
        }
    };
    cx.reply_locked(inner, reply);
    inner.notifications.caused_by_user();
    inner.broadcast_requirements();
    if let Some((id, text)) = titled {
        titles::ask_title(cx.hub, &id, &text);
    }
    Ok(())
}
