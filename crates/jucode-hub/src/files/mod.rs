//! Files and git a client reads through the daemon, inside known directories only: the
//! projects of the workspaces (with their extra directories), every session's directory,
//! every agent's directory and working directory, and the uploads folder. `fs_list` with
//! `dirs_only` may browse folders anywhere under the home directory. Credentials (`~/.ssh`,
//! `~/.gnupg`, `~/.aws`, the jucode home's `auth.json` and `daemon/`) are never read, even
//! when a known directory contains them. [`rule`] holds the one rule; every answer is worked
//! out off the hub's lock and off the connection's task.

mod git;
mod image;
mod list;
mod read;
pub(crate) mod rule;
#[cfg(test)]
mod rule_tests;
mod untracked;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jucode_protocol::daemon::files::FS_IMAGE_MAX_BYTES;
use jucode_protocol::daemon::{DaemonEvent, FilesOp, GitOp, Reply};
use serde_json::Value;

use crate::clients::ClientId;
use crate::cx::OpCx;
use crate::error::OpError;
use crate::paths::PathError;
use crate::{Hub, Inner, to_value};
pub(crate) use image::image_type;
pub(crate) use rule::{Rule, Scope};

/// Why a file, folder or repository cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FilesError {
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("{op}: {path} does not exist")]
    Missing { op: &'static str, path: String },
    #[error("{op}: {path} is outside {}", match scope {
        Scope::Known => "the directories the daemon reads (projects, session and agent directories, uploads)",
        Scope::Home => "the home directory",
    })]
    Outside {
        op: &'static str,
        path: String,
        scope: Scope,
    },
    #[error("{op}: {path} holds credentials and is never read")]
    Credentials { op: &'static str, path: String },
    #[error("{op}: {path} is not a file")]
    NotAFile { op: &'static str, path: String },
    #[error("{op}: {path} is not a directory")]
    NotADir { op: &'static str, path: String },
    #[error("fs_image: {path} is larger than {} MiB", FS_IMAGE_MAX_BYTES / (1024 * 1024))]
    TooLarge { path: String },
    #[error("fs_image: {path} is not a png, jpeg, gif or webp image")]
    NotAnImage { path: String },
    #[error("{op}: {file} is not a path inside {path}")]
    BadFile {
        op: &'static str,
        path: String,
        file: String,
    },
    #[error("{op}: {message}")]
    Git { op: &'static str, message: String },
    #[error("{op}: cannot read {path}: {message}")]
    Io {
        op: &'static str,
        path: String,
        message: String,
    },
}

/// The directories a client may read inside, as named in the state (not yet resolved).
pub(crate) fn known_dirs(inner: &Inner, home: &Path) -> Vec<PathBuf> {
    let mut dirs = inner.workspaces.project_dirs();
    dirs.extend(inner.sessions.cwds());
    for agent in inner.agents.map.values() {
        dirs.push(agent.dir.clone());
        dirs.push(agent.config.cwd.clone());
    }
    dirs.push(home.join("uploads"));
    // Many sessions share a directory: resolve each once.
    dirs.sort();
    dirs.dedup();
    dirs
}

/// What is never read, under whichever known directory.
pub(crate) fn credentials(home: &Path, user_home: &Path) -> Vec<PathBuf> {
    vec![
        user_home.join(".ssh"),
        user_home.join(".gnupg"),
        user_home.join(".aws"),
        home.join("auth.json"),
        home.join("daemon"),
    ]
}

/// One request's answer, worked out on its own task and sent to the client that asked.
struct Job {
    hub: Arc<Hub>,
    client: ClientId,
    id: Option<Value>,
    known: Vec<PathBuf>,
    secret: Vec<PathBuf>,
    user_home: PathBuf,
}

impl Job {
    fn new(cx: &OpCx<'_>) -> Job {
        let known = known_dirs(&cx.hub.lock(), &cx.hub.config.home);
        Job {
            hub: cx.hub.clone(),
            client: cx.client,
            id: cx.id.clone(),
            known,
            secret: credentials(&cx.hub.config.home, &cx.hub.config.user_home),
            user_home: cx.hub.config.user_home.clone(),
        }
    }

    /// Resolves the rule off the runtime's threads, runs `work`, replies.
    fn spawn<F, Fut>(self, work: F)
    where
        F: FnOnce(Arc<Rule>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<DaemonEvent, FilesError>> + Send + 'static,
    {
        let Job {
            hub,
            client,
            id,
            known,
            secret,
            user_home,
        } = self;
        tokio::spawn(async move {
            let rule =
                tokio::task::spawn_blocking(move || Rule::new(&user_home, &known, &secret)).await;
            let result = match rule {
                Ok(rule) => work(Arc::new(rule)).await,
                Err(e) => Err(FilesError::Git {
                    op: "files",
                    message: e.to_string(),
                }),
            };
            let reply = result.map_or_else(
                |e| Reply::error(id.clone(), e.to_string()),
                |event| Reply::to(id.clone(), event),
            );
            hub.lock().clients.send(client, &to_value(&reply));
        });
    }

    /// As [`Job::spawn`] for work that only touches the file system.
    fn blocking<F>(self, work: F)
    where
        F: FnOnce(&Rule) -> Result<DaemonEvent, FilesError> + Send + 'static,
    {
        self.spawn(move |rule| async move {
            tokio::task::spawn_blocking(move || work(&rule))
                .await
                .unwrap_or_else(|e| {
                    Err(FilesError::Git {
                        op: "files",
                        message: e.to_string(),
                    })
                })
        });
    }
}

pub(crate) fn handle(cx: &OpCx<'_>, op: FilesOp) -> Result<(), OpError> {
    let job = Job::new(cx);
    match op {
        FilesOp::FsImage { path } => job.blocking(move |rule| image::fs_image(rule, path)),
        FilesOp::FsRead { path } => job.blocking(move |rule| read::fs_read(rule, path)),
        FilesOp::FsList { path, dirs_only } => {
            job.spawn(move |rule| list::fs_list(rule, path, dirs_only));
        }
    }
    Ok(())
}

pub(crate) fn handle_git(cx: &OpCx<'_>, op: GitOp) -> Result<(), OpError> {
    let job = Job::new(cx);
    match op {
        GitOp::GitStatus { path } => job.spawn(move |rule| git::git_status(rule, path)),
        GitOp::GitDiff { path, file } => job.spawn(move |rule| git::git_diff(rule, path, file)),
    }
    Ok(())
}
