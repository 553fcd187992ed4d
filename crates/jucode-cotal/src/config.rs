//! The launch contract: what Cotal's manager hands a connector process.
//!
//! Identity and grants come from `COTAL_*` variables; secrets come either from
//! direct variables (a hand-driven session) or from the launch-material file
//! (0600, read once, unlinked) — never both. The agent the seat drives gets
//! [`LaunchConfig::agent_env`]: the environment with every `COTAL_*` variable removed.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::subject::{Principal, sanitize};
use crate::{Error, Result};

/// How the seat authenticates to the broker.
#[derive(Clone, PartialEq, Eq)]
pub enum Auth {
    /// `--open`: no credentials; the endpoint creates its own buckets and streams.
    Open,
    /// A static `.creds` file (JWT + nkey seed).
    Creds(PathBuf),
    /// A plain token.
    Token(String),
    /// Auth callout: a deny-all sentinel credential plus a bearer from a command.
    User {
        sentinel_creds: PathBuf,
        bearer_cmd: Vec<String>,
    },
}

impl std::fmt::Debug for Auth {
    // Never print a token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::Open => f.write_str("Open"),
            Auth::Creds(p) => write!(f, "Creds({})", p.display()),
            Auth::Token(_) => f.write_str("Token(<redacted>)"),
            Auth::User { sentinel_creds, .. } => {
                write!(f, "User {{ sentinel: {} }}", sentinel_creds.display())
            }
        }
    }
}

/// The control endpoint the manager may use for `{"op":"shutdown"}`.
#[derive(Clone)]
pub struct ControlConfig {
    pub socket: PathBuf,
    pub token: String,
}

impl std::fmt::Debug for ControlConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ControlConfig {{ socket: {} }}", self.socket.display())
    }
}

/// Everything the seat needs from its launch.
#[derive(Debug, Clone)]
pub struct LaunchConfig {
    pub space: String,
    pub name: String,
    pub role: Option<String>,
    pub principal: Principal,
    pub lifecycle_uid: String,
    pub servers: Vec<String>,
    pub auth: Auth,
    /// The transport connection id (`COTAL_ID`, an nkey under static auth); keys `_INBOX_<id>`.
    pub conn_id: Option<String>,
    pub subscribe: Vec<String>,
    pub allow_subscribe: Vec<String>,
    pub allow_publish: Vec<String>,
    pub capabilities: Vec<String>,
    pub quiet: Vec<String>,
    pub muted: Vec<String>,
    pub model: Option<String>,
    pub variant: Option<String>,
    /// `COTAL_AGENT_FILE`: the persona the seat was spawned with.
    pub agent_file: Option<PathBuf>,
    pub manager_instance: Option<String>,
    pub control: Option<ControlConfig>,
    pub events: bool,
    pub events_required: bool,
    pub workspace_root: Option<PathBuf>,
    /// `COTAL_JCODE_*` values for the jcode side (issue 5); never given to jcode itself.
    pub jcode: BTreeMap<String, String>,
    /// The environment the agent process gets: no `COTAL_*` value, no material pointer.
    pub agent_env: Vec<(String, String)>,
}

/// Variables that are the direct alternative to launch material.
const DIRECT_SECRETS: &[&str] = &[
    "COTAL_CREDS",
    "COTAL_SERVERS",
    "COTAL_TOKEN",
    "COTAL_CONTROL_TOKEN",
    "COTAL_OWNER",
    "COTAL_ACTOR",
    "COTAL_SENTINEL_CREDS",
    "COTAL_BEARER_CMD",
    "COTAL_EVENTS_REQUIRED",
];

/// The launch-material document (`launch-material.ts`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Material {
    servers: Option<Vec<String>>,
    creds: Option<PathBuf>,
    token: Option<String>,
    control_token: Option<String>,
    user_auth: Option<MaterialUser>,
    events_required: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MaterialUser {
    owner: String,
    actor: String,
    sentinel_creds_path: PathBuf,
    bearer_cmd: Vec<String>,
}

/// Biggest launch-material file we read.
const MAX_MATERIAL: u64 = 1 << 20;

/// Read the launch material once: refuse anything but an owner-only regular file
/// of ours, then unlink it so no later process can read it.
fn take_material(path: &Path) -> Result<Material> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(Error::Launch(format!(
            "launch material {} is not a regular file",
            path.display()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(Error::Launch(format!(
            "launch material {} is readable by group or others (mode {:o}); refusing it",
            path.display(),
            meta.mode() & 0o777
        )));
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(Error::Launch(format!(
            "launch material {} belongs to another user",
            path.display()
        )));
    }
    if meta.len() > MAX_MATERIAL {
        return Err(Error::Launch("launch material is larger than 1 MiB".into()));
    }
    let mut raw = String::new();
    file.by_ref()
        .take(MAX_MATERIAL)
        .read_to_string(&mut raw)
        .map_err(|e| Error::io(path, e))?;
    std::fs::remove_file(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_str(&raw)
        .map_err(|e| Error::Launch(format!("launch material is not valid JSON: {e}")))
}

fn list(v: Option<&String>) -> Vec<String> {
    v.map(|s| {
        s.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}

fn truthy(v: Option<&String>) -> Result<bool> {
    match v.map(String::as_str) {
        None | Some("") | Some("0") | Some("false") => Ok(false),
        Some("1") | Some("true") => Ok(true),
        Some(other) => Err(Error::Launch(format!(
            "expected 1/0 or true/false, got {other:?}"
        ))),
    }
}

/// Parse `cotal://token@host[:port]/space?channel=a,b`.
fn parse_link(link: &str) -> Result<(String, Option<String>, String, Vec<String>)> {
    let rest = link
        .strip_prefix("cotal://")
        .ok_or_else(|| Error::Launch("COTAL_LINK must start with cotal://".into()))?;
    let (auth_host, path) = rest
        .split_once('/')
        .ok_or_else(|| Error::Launch("COTAL_LINK has no space".into()))?;
    let (token, host) = match auth_host.rsplit_once('@') {
        Some((t, h)) => (Some(t.to_string()), h),
        None => (None, auth_host),
    };
    let (space, query) = path.split_once('?').unwrap_or((path, ""));
    let channels = query
        .split('&')
        .filter_map(|kv| kv.strip_prefix("channel="))
        .flat_map(|v| v.split(','))
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if host.is_empty() || space.is_empty() {
        return Err(Error::Launch("COTAL_LINK needs a host and a space".into()));
    }
    let server = if host.contains(':') {
        format!("nats://{host}")
    } else {
        format!("nats://{host}:4222")
    };
    Ok((server, token, space.to_string(), channels))
}

impl LaunchConfig {
    /// Read the contract from `vars` (normally `std::env::vars()`). `no_events`
    /// is the `--no-events` flag. Unlinks the launch material when there is one.
    pub fn from_env(
        vars: impl IntoIterator<Item = (String, String)>,
        no_events: bool,
    ) -> Result<Self> {
        let all: Vec<(String, String)> = vars.into_iter().collect();
        let env: BTreeMap<String, String> = all
            .iter()
            .filter(|(k, _)| k.starts_with("COTAL_"))
            .cloned()
            .collect();
        let agent_env = all
            .iter()
            .filter(|(k, _)| !k.starts_with("COTAL_"))
            .cloned()
            .collect();
        let get = |k: &str| env.get(k).filter(|v| !v.is_empty());

        let material = match get("COTAL_LAUNCH_MATERIAL") {
            Some(path) => {
                let direct: Vec<&str> = DIRECT_SECRETS
                    .iter()
                    .copied()
                    .filter(|k| env.contains_key(*k))
                    .collect();
                if !direct.is_empty() {
                    return Err(Error::Launch(format!(
                        "COTAL_LAUNCH_MATERIAL and direct variables ({}) given together",
                        direct.join(", ")
                    )));
                }
                Some(take_material(Path::new(path))?)
            }
            None => None,
        };

        let mut space = get("COTAL_SPACE").cloned();
        let mut servers = list(get("COTAL_SERVERS"));
        let mut token = get("COTAL_TOKEN").cloned();
        let mut subscribe = list(get("COTAL_SUBSCRIBE"));
        if let Some(link) = get("COTAL_LINK") {
            let (server, link_token, link_space, channels) = parse_link(link)?;
            if servers.is_empty() {
                servers.push(server);
            }
            if token.is_none() {
                token = link_token;
            }
            if space.is_none() {
                space = Some(link_space);
            }
            if subscribe.is_empty() {
                subscribe = channels;
            }
        }
        let space = space.ok_or_else(|| Error::Launch("COTAL_SPACE is required".into()))?;
        let name = get("COTAL_NAME")
            .cloned()
            .ok_or_else(|| Error::Launch("COTAL_NAME is required".into()))?;
        if name.chars().count() > 128 {
            return Err(Error::Launch(
                "COTAL_NAME is longer than 128 characters".into(),
            ));
        }

        let user_vars = [
            "COTAL_OWNER",
            "COTAL_ACTOR",
            "COTAL_SENTINEL_CREDS",
            "COTAL_BEARER_CMD",
        ];
        let present = user_vars.iter().filter(|k| get(k).is_some()).count();
        let mut user = None;
        if present == 4 {
            let argv: Vec<String> = serde_json::from_str(get("COTAL_BEARER_CMD").map_or("", |s| s))
                .map_err(|e| Error::Launch(format!("COTAL_BEARER_CMD is not a JSON argv: {e}")))?;
            user = Some(MaterialUser {
                owner: get("COTAL_OWNER").cloned().unwrap_or_default(),
                actor: get("COTAL_ACTOR").cloned().unwrap_or_default(),
                sentinel_creds_path: PathBuf::from(get("COTAL_SENTINEL_CREDS").map_or("", |s| s)),
                bearer_cmd: argv,
            });
        } else if present != 0 {
            return Err(Error::Launch(
                "user mode needs all of COTAL_OWNER, COTAL_ACTOR, COTAL_SENTINEL_CREDS and COTAL_BEARER_CMD, or none".into(),
            ));
        }

        let mut creds = get("COTAL_CREDS").map(PathBuf::from);
        let mut control_token = get("COTAL_CONTROL_TOKEN").cloned();
        let mut events_required = truthy(get("COTAL_EVENTS_REQUIRED"))?;
        if let Some(m) = material {
            if let Some(s) = m.servers {
                servers = s;
            }
            creds = m.creds;
            token = m.token;
            control_token = m.control_token;
            user = m.user_auth;
            events_required = m.events_required.unwrap_or(false);
        }
        if servers.is_empty() {
            servers.push("nats://127.0.0.1:4222".into());
        }

        let user_principal = user.as_ref().map(|u| (u.owner.clone(), u.actor.clone()));
        let auth = match (user, creds, token) {
            (Some(u), None, _) => {
                if u.bearer_cmd.is_empty() {
                    return Err(Error::Launch("the bearer command is empty".into()));
                }
                Auth::User {
                    sentinel_creds: u.sentinel_creds_path,
                    bearer_cmd: u.bearer_cmd,
                }
            }
            (Some(_), Some(_), _) => {
                return Err(Error::Launch(
                    "a .creds file and user auth are given together".into(),
                ));
            }
            (None, Some(c), _) => Auth::Creds(c),
            (None, None, Some(t)) => Auth::Token(t),
            (None, None, None) => Auth::Open,
        };

        let (owner, actor) = match (get("COTAL_OWNER"), get("COTAL_ACTOR"), user_principal) {
            (_, _, Some((o, a))) => (o, a),
            (Some(o), Some(a), None) => (o.clone(), a.clone()),
            _ => (
                "local".to_string(),
                get("COTAL_ACTOR")
                    .cloned()
                    .unwrap_or_else(|| sanitize(&name)),
            ),
        };
        let principal = Principal::new(&owner, &actor);

        let authed = matches!(auth, Auth::Creds(_) | Auth::User { .. });
        let lifecycle_uid = match get("COTAL_LIFECYCLE_UID") {
            Some(uid) => {
                if !(26..=32).contains(&uid.len())
                    || !uid
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                {
                    return Err(Error::Launch(
                        "COTAL_LIFECYCLE_UID must match [a-z0-9]{26,32}".into(),
                    ));
                }
                uid.clone()
            }
            None if authed => {
                return Err(Error::Launch(
                    "COTAL_LIFECYCLE_UID is required for an authenticated launch".into(),
                ));
            }
            None => crate::util::lifecycle_uid(),
        };

        let control = match (get("COTAL_CONTROL_SOCKET"), control_token) {
            (Some(sock), Some(tok)) => Some(ControlConfig {
                socket: PathBuf::from(sock),
                token: tok,
            }),
            (None, None) => None,
            _ => {
                return Err(Error::Launch(
                    "the control socket and its token must be given together".into(),
                ));
            }
        };

        let events = truthy(get("COTAL_EVENTS"))? && !no_events;
        let workspace_root = get("COTAL_WORKSPACE_ROOT").map(PathBuf::from);
        if events && workspace_root.is_none() {
            return Err(Error::Launch(
                "COTAL_EVENTS=1 needs COTAL_WORKSPACE_ROOT (the event WAL lives there)".into(),
            ));
        }
        if let Some(root) = &workspace_root
            && !root.is_absolute()
        {
            return Err(Error::Launch(
                "COTAL_WORKSPACE_ROOT must be absolute".into(),
            ));
        }

        let jcode = env
            .iter()
            .filter(|(k, _)| k.starts_with("COTAL_JCODE_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();

        Ok(LaunchConfig {
            space: sanitize(&space),
            name,
            role: get("COTAL_ROLE").cloned(),
            principal,
            lifecycle_uid,
            servers,
            auth,
            conn_id: get("COTAL_ID").cloned(),
            subscribe,
            allow_subscribe: list(get("COTAL_ALLOW_SUBSCRIBE")),
            allow_publish: list(get("COTAL_ALLOW_PUBLISH")),
            capabilities: list(get("COTAL_CAPABILITIES")),
            quiet: list(get("COTAL_QUIET")),
            muted: list(get("COTAL_MUTED")),
            model: get("COTAL_MODEL").cloned(),
            variant: get("COTAL_VARIANT").cloned(),
            agent_file: get("COTAL_AGENT_FILE").map(PathBuf::from),
            manager_instance: get("COTAL_MANAGER_INSTANCE").cloned(),
            control,
            events,
            events_required,
            workspace_root,
            jcode,
            agent_env,
        })
    }

    /// Open mode: no credentials, the endpoint provisions its own objects.
    pub fn is_open(&self) -> bool {
        matches!(self.auth, Auth::Open | Auth::Token(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn base() -> Vec<(String, String)> {
        vec![
            ("COTAL_SPACE".into(), "dev".into()),
            ("COTAL_NAME".into(), "alice".into()),
            ("PATH".into(), "/usr/bin".into()),
        ]
    }

    fn with(mut v: Vec<(String, String)>, k: &str, val: &str) -> Vec<(String, String)> {
        v.push((k.into(), val.into()));
        v
    }

    #[test]
    fn open_mode_from_direct_variables() {
        let env = with(
            with(base(), "COTAL_SERVERS", "nats://127.0.0.1:1"),
            "COTAL_QUIET",
            "a,b",
        );
        let c = LaunchConfig::from_env(env, false).unwrap();
        assert_eq!(c.principal.dot(), "local.alice");
        assert_eq!(c.quiet, vec!["a", "b"]);
        assert!(c.is_open());
        assert_eq!(
            c.agent_env,
            vec![("PATH".to_string(), "/usr/bin".to_string())]
        );
        assert_eq!(c.lifecycle_uid.len(), 26);
    }

    #[test]
    fn material_is_read_once_unlinked_and_exclusive() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        std::fs::write(
            &path,
            r#"{"servers":["nats://h:1"],"token":"sekrit","controlToken":"ct"}"#,
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let env = with(
            with(base(), "COTAL_LAUNCH_MATERIAL", path.to_str().unwrap()),
            "COTAL_CONTROL_SOCKET",
            "/tmp/x.sock",
        );
        let c = LaunchConfig::from_env(env.clone(), false).unwrap();
        assert!(!path.exists(), "material must be unlinked");
        assert_eq!(c.auth, Auth::Token("sekrit".into()));
        assert_eq!(c.control.unwrap().token, "ct");
        assert!(c.agent_env.iter().all(|(k, _)| !k.starts_with("COTAL_")));
        // Second read: the file is gone.
        assert!(LaunchConfig::from_env(env, false).is_err());

        std::fs::write(&path, "{}").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let both = with(
            with(base(), "COTAL_LAUNCH_MATERIAL", path.to_str().unwrap()),
            "COTAL_TOKEN",
            "x",
        );
        let err = LaunchConfig::from_env(both, false).unwrap_err().to_string();
        assert!(err.contains("together"), "{err}");
    }

    #[test]
    fn material_with_group_bits_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        std::fs::write(&path, "{}").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let env = with(base(), "COTAL_LAUNCH_MATERIAL", path.to_str().unwrap());
        let err = LaunchConfig::from_env(env, false).unwrap_err().to_string();
        assert!(err.contains("group or others"), "{err}");
        assert!(path.exists(), "a refused file is not consumed");
    }

    #[test]
    fn half_pairs_and_partial_user_mode_are_refused() {
        assert!(LaunchConfig::from_env(with(base(), "COTAL_CONTROL_SOCKET", "/s"), false).is_err());
        assert!(LaunchConfig::from_env(with(base(), "COTAL_OWNER", "local"), false).is_err());
        assert!(
            LaunchConfig::from_env(with(base(), "COTAL_CREDS", "/c.creds"), false).is_err(),
            "authed launch without a lifecycle uid"
        );
        let ev = with(base(), "COTAL_EVENTS", "1");
        assert!(LaunchConfig::from_env(ev.clone(), false).is_err());
        assert!(
            !LaunchConfig::from_env(ev, true).unwrap().events,
            "--no-events wins"
        );
        assert!(LaunchConfig::from_env(with(base(), "COTAL_EVENTS", "yes"), false).is_err());
    }

    #[test]
    fn link_fills_servers_space_and_channels() {
        let env = vec![
            ("COTAL_NAME".to_string(), "a".to_string()),
            (
                "COTAL_LINK".to_string(),
                "cotal://tok@h:4223/dev?channel=x,y".to_string(),
            ),
        ];
        let c = LaunchConfig::from_env(env, false).unwrap();
        assert_eq!(c.servers, vec!["nats://h:4223"]);
        assert_eq!(c.space, "dev");
        assert_eq!(c.subscribe, vec!["x", "y"]);
        assert_eq!(c.auth, Auth::Token("tok".into()));
    }
}
