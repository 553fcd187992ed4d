//! `git_status` and `git_diff`, and the git facts `fs_list` needs, through the `git` binary
//! (see DECISIONS.md, "Files and git"). A repository is hostile input: nothing it configures
//! may run a program. Every call runs without the system config, with no pager, hooks,
//! fsmonitor, external diff or textconv, with the repository's filter drivers replaced by
//! `cat`, with none of the daemon's own `GIT_*` variables, with a time limit and a cap on
//! what is read. The work tree's files are read by git only where the rule allows: changed
//! files that the rule refuses (a hard link to a credential file, credentials under a home
//! that is a repository) are excluded by pathspec, and untracked files are read by the
//! daemon itself through the rule.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use jucode_protocol::daemon::DaemonEvent;
use jucode_protocol::daemon::git::{GIT_DIFF_MAX_BYTES, GIT_STATUS_MAX_FILES, GitFile};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::untracked::new_file_diff;
use super::{FilesError, Rule, Scope};

/// Longest a git call may take; past it the call is killed and the op fails.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Most bytes read from a git call that lists names.
const LIST_MAX_BYTES: usize = 16 * 1024 * 1024;
/// Most bytes of git's error output kept for the message.
const STDERR_MAX_BYTES: u64 = 4096;

/// What a git call printed.
struct Output {
    stdout: Vec<u8>,
    /// The output went past the limit (and the call was stopped there).
    cut: bool,
    stderr: String,
    code: Option<i32>,
}

/// A git call in `dir` with the safety settings and `filters` neutralised.
fn command(dir: &Path, filters: &[String]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("git");
    cmd.current_dir(dir);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_PAGER", "cat")
        .env("PAGER", "cat")
        .env("LC_ALL", "C");
    let mut args: Vec<String> = [
        "core.fsmonitor=false",
        "core.hooksPath=/dev/null",
        "core.pager=cat",
        "core.untrackedCache=false",
        "diff.external=",
        "color.ui=false",
        "core.quotePath=false",
    ]
    .iter()
    .flat_map(|c| ["-c".to_string(), (*c).to_string()])
    .collect();
    for name in filters {
        for key in ["clean=cat", "smudge=cat", "process=", "required=false"] {
            args.push("-c".into());
            args.push(format!("filter.{name}.{key}"));
        }
    }
    args.push("--no-pager".into());
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Runs one git call, reading at most `limit` bytes of its output.
async fn run(
    dir: &Path,
    filters: &[String],
    args: &[OsString],
    input: Option<Vec<u8>>,
    limit: usize,
) -> Result<Output, String> {
    let mut cmd = command(dir, filters);
    cmd.args(args);
    if input.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.spawn().map_err(|e| format!("cannot run git: {e}"))?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        // Written on its own task: git may answer before it has read everything.
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
    }
    let (Some(mut stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err("cannot read git's output".into());
    };
    let work = async {
        let read_out = async {
            let mut buf = Vec::new();
            (&mut stdout)
                .take(limit as u64 + 1)
                .read_to_end(&mut buf)
                .await
                .map(|_| buf)
        };
        let read_err = async {
            let mut buf = Vec::new();
            let mut stderr = stderr.take(STDERR_MAX_BYTES);
            let _ = stderr.read_to_end(&mut buf).await;
            // Drain the rest so git never blocks on a full pipe.
            let _ = tokio::io::copy(&mut stderr.into_inner(), &mut tokio::io::sink()).await;
            buf
        };
        let (out, err) = tokio::join!(read_out, read_err);
        let mut out = out.map_err(|e| format!("cannot read git's output: {e}"))?;
        let cut = out.len() > limit;
        if cut {
            out.truncate(limit);
            let _ = child.start_kill();
        }
        let status = child
            .wait()
            .await
            .map_err(|e| format!("git did not finish: {e}"))?;
        Ok::<_, String>(Output {
            stdout: out,
            cut,
            stderr: String::from_utf8_lossy(&err).trim().to_string(),
            code: if cut { Some(0) } else { status.code() },
        })
    };
    match tokio::time::timeout(GIT_TIMEOUT, work).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "git took longer than {} s and was stopped",
            GIT_TIMEOUT.as_secs()
        )),
    }
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// Whether `dir` lies in a git work tree (false when git cannot tell).
pub(super) async fn inside_work_tree(dir: &Path) -> bool {
    let args = os(&["rev-parse", "--is-inside-work-tree"]);
    matches!(run(dir, &[], &args, None, 64).await, Ok(o) if o.code == Some(0) && o.stdout.starts_with(b"true"))
}

/// Which of `names` (entries of `dir`) git ignores.
pub(super) async fn ignored(
    dir: &Path,
    names: &[&str],
) -> Result<std::collections::HashSet<String>, String> {
    let filters = filter_drivers(dir).await?;
    let mut input = Vec::new();
    for name in names {
        input.extend_from_slice(name.as_bytes());
        input.push(0);
    }
    let args = os(&["check-ignore", "-z", "--stdin"]);
    let out = run(dir, &filters, &args, Some(input), LIST_MAX_BYTES).await?;
    match out.code {
        Some(0 | 1) => Ok(split_nul(&out.stdout).collect()),
        _ => Err(git_failed(&out)),
    }
}

/// The repository's filter drivers, to be replaced by `cat` (a driver is a program the
/// repository's config names, run on the work tree's files).
async fn filter_drivers(dir: &Path) -> Result<Vec<String>, String> {
    let args = os(&["config", "-z", "--name-only", "--get-regexp", r"^filter\."]);
    let out = run(dir, &[], &args, None, LIST_MAX_BYTES).await?;
    if out.code == Some(1) {
        return Ok(Vec::new());
    }
    if out.code != Some(0) {
        return Err(git_failed(&out));
    }
    let mut names = Vec::new();
    for key in split_nul(&out.stdout) {
        let Some(name) = key
            .strip_prefix("filter.")
            .and_then(|k| k.rsplit_once('.'))
            .map(|(n, _)| n.to_string())
        else {
            continue;
        };
        if name.contains(['=', '\n', '\0']) {
            return Err(format!(
                "the repository configures a filter driver named {name:?} that the daemon cannot turn off"
            ));
        }
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(names)
}

fn split_nul(bytes: &[u8]) -> impl Iterator<Item = String> + '_ {
    bytes
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
}

fn git_failed(out: &Output) -> String {
    if out.stderr.is_empty() {
        format!("git failed ({:?})", out.code)
    } else {
        out.stderr.clone()
    }
}

/// `path` checked as a directory the rule allows.
async fn checked_dir(
    rule: &Arc<Rule>,
    op: &'static str,
    path: &str,
) -> Result<PathBuf, FilesError> {
    let rule = rule.clone();
    let path = path.to_string();
    tokio::task::spawn_blocking(move || {
        let real = rule.check(op, &path, Scope::Known)?;
        let dir = rule.open(op, &path, &real, Scope::Known)?;
        match dir.metadata() {
            Ok(m) if m.is_dir() => Ok(real),
            _ => Err(FilesError::NotADir { op, path }),
        }
    })
    .await
    .map_err(|e| FilesError::Git {
        op,
        message: e.to_string(),
    })?
}

/// The top of the repository holding `dir`, or `None` outside one.
async fn toplevel(op: &'static str, dir: &Path) -> Result<Option<PathBuf>, FilesError> {
    let args = os(&["rev-parse", "--show-toplevel"]);
    let out = run(dir, &[], &args, None, 64 * 1024)
        .await
        .map_err(|message| FilesError::Git { op, message })?;
    if out.code == Some(0) {
        let top = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
        return Ok(Some(PathBuf::from(top)));
    }
    if out.stderr.contains("not a git repository") {
        return Ok(None);
    }
    Err(FilesError::Git {
        op,
        message: git_failed(&out),
    })
}

/// Pathspecs leaving out the credential paths that lie inside the repository.
fn secret_excludes(rule: &Rule, root: &Path) -> Vec<OsString> {
    rule.secrets()
        .iter()
        .filter_map(|s| s.strip_prefix(root).ok())
        .filter(|rel| !rel.as_os_str().is_empty())
        .map(|rel| exclude(&rel.to_string_lossy()))
        .collect()
}

fn exclude(rel: &str) -> OsString {
    OsString::from(format!(":(top,exclude,literal){rel}"))
}

pub(super) async fn git_status(rule: Arc<Rule>, path: String) -> Result<DaemonEvent, FilesError> {
    let op = "git_status";
    let real = checked_dir(&rule, op, &path).await?;
    let shown = real.display().to_string();
    let Some(root) = toplevel(op, &real).await? else {
        return Ok(DaemonEvent::GitStatus {
            path: shown,
            repo: false,
            root: None,
            branch: None,
            files: Vec::new(),
            truncated: false,
        });
    };
    let fail = |message| FilesError::Git { op, message };
    let filters = filter_drivers(&real).await.map_err(fail)?;
    let mut args = os(&[
        "status",
        "--porcelain=v1",
        "-z",
        "--branch",
        "--untracked-files=all",
        "--",
        ".",
    ]);
    args.extend(secret_excludes(&rule, &root));
    let out = run(&real, &filters, &args, None, LIST_MAX_BYTES)
        .await
        .map_err(fail)?;
    if out.code != Some(0) {
        return Err(fail(git_failed(&out)));
    }
    let (branch, mut files) = parse_status(&out.stdout);
    let truncated = out.cut || files.len() > GIT_STATUS_MAX_FILES;
    files.truncate(GIT_STATUS_MAX_FILES);
    Ok(DaemonEvent::GitStatus {
        path: shown,
        repo: true,
        root: Some(root.display().to_string()),
        branch,
        files,
        truncated,
    })
}

/// Reads `git status --porcelain=v1 -z --branch`.
fn parse_status(bytes: &[u8]) -> (Option<String>, Vec<GitFile>) {
    let mut fields = bytes.split(|b| *b == 0).filter(|s| !s.is_empty());
    let mut branch = None;
    let mut files = Vec::new();
    while let Some(field) = fields.next() {
        let text = String::from_utf8_lossy(field);
        if let Some(head) = text.strip_prefix("## ") {
            branch = parse_branch(head);
            continue;
        }
        if text.len() < 4 || !text.is_char_boundary(3) {
            continue;
        }
        let status = text[..2].to_string();
        let path = text[3..].to_string();
        // A rename or copy is followed by its old path.
        let from = if status.contains(['R', 'C']) {
            fields
                .next()
                .map(|f| String::from_utf8_lossy(f).into_owned())
        } else {
            None
        };
        files.push(GitFile { path, status, from });
    }
    (branch, files)
}

fn parse_branch(head: &str) -> Option<String> {
    let head = head
        .strip_prefix("No commits yet on ")
        .or_else(|| head.strip_prefix("Initial commit on "))
        .unwrap_or(head);
    if head.starts_with("HEAD (no branch)") {
        return None;
    }
    let name = head.split("...").next().unwrap_or(head);
    let name = name.split(" [").next().unwrap_or(name);
    Some(name.to_string())
}

/// `file` as a literal pathspec, when it names a path inside `real` (relative to `root`).
fn file_spec(root: &Path, real: &Path, file: &str) -> Option<OsString> {
    let rel = Path::new(file);
    let plain = !file.is_empty()
        && !file.contains('\0')
        && rel.components().all(|c| matches!(c, Component::Normal(_)));
    (plain && root.join(rel).starts_with(real))
        .then(|| OsString::from(format!(":(top,literal){file}")))
}

pub(super) async fn git_diff(
    rule: Arc<Rule>,
    path: String,
    file: Option<String>,
) -> Result<DaemonEvent, FilesError> {
    let op = "git_diff";
    let real = checked_dir(&rule, op, &path).await?;
    let fail = |message| FilesError::Git { op, message };
    let Some(root) = toplevel(op, &real).await? else {
        return Err(fail(format!(
            "{} is not in a git repository",
            real.display()
        )));
    };
    let filters = filter_drivers(&real).await.map_err(fail)?;
    let mut specs = match &file {
        Some(f) => vec![
            file_spec(&root, &real, f).ok_or_else(|| FilesError::BadFile {
                op,
                path: real.display().to_string(),
                file: f.clone(),
            })?,
        ],
        None => os(&["."]),
    };
    specs.extend(secret_excludes(&rule, &root));
    let head = os(&["rev-parse", "--verify", "-q", "HEAD^{commit}"]);
    let base = if run(&real, &[], &head, None, 256)
        .await
        .is_ok_and(|o| o.code == Some(0))
    {
        "HEAD".to_string()
    } else {
        empty_tree(&real).await.map_err(fail)?
    };

    // Changed files git would read that the rule refuses are left out.
    let mut names_args = os(&["diff", "--name-only", "-z", "--no-renames", &base, "--"]);
    names_args.extend(specs.iter().cloned());
    let names = run(&real, &filters, &names_args, None, LIST_MAX_BYTES)
        .await
        .map_err(fail)?;
    if names.code != Some(0) {
        return Err(fail(git_failed(&names)));
    }
    let changed: Vec<String> = split_nul(&names.stdout).collect();
    let refused = {
        let (rule, root) = (rule.clone(), root.clone());
        tokio::task::spawn_blocking(move || refused_files(&rule, &root, changed))
            .await
            .map_err(|e| fail(e.to_string()))?
    };
    specs.extend(refused.iter().map(|r| exclude(r)));

    let mut diff_args = os(&[
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "-M",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        &base,
        "--",
    ]);
    diff_args.extend(specs.iter().cloned());
    let out = run(&real, &filters, &diff_args, None, GIT_DIFF_MAX_BYTES)
        .await
        .map_err(fail)?;
    if out.code != Some(0) {
        return Err(fail(git_failed(&out)));
    }
    let mut diff = out.stdout;
    let mut truncated = out.cut;

    if !truncated {
        let mut others = os(&[
            "ls-files",
            "-z",
            "--others",
            "--exclude-standard",
            "--full-name",
            "--",
        ]);
        others.extend(specs.iter().cloned());
        let out = run(&real, &filters, &others, None, LIST_MAX_BYTES)
            .await
            .map_err(fail)?;
        if out.code != Some(0) {
            return Err(fail(git_failed(&out)));
        }
        let untracked: Vec<String> = split_nul(&out.stdout).collect();
        let rule = rule.clone();
        let used = diff.len();
        let (more, cut) = tokio::task::spawn_blocking(move || {
            let mut more = Vec::new();
            let mut cut = false;
            for name in untracked {
                let budget = GIT_DIFF_MAX_BYTES.saturating_sub(used + more.len());
                if budget == 0 {
                    cut = true;
                    break;
                }
                // Refused files (links out, credentials) are left out, as in the tracked diff.
                if let Some(part) = new_file_diff(&rule, &root, &name) {
                    if part.len() > budget {
                        more.extend_from_slice(&part[..budget]);
                        cut = true;
                        break;
                    }
                    more.extend(part);
                }
            }
            (more, cut)
        })
        .await
        .map_err(|e| fail(e.to_string()))?;
        diff.extend(more);
        truncated = cut;
    }
    let mut text = String::from_utf8_lossy(&diff).into_owned();
    if truncated && !text.ends_with('\n') {
        // A diff cut mid-line still ends on a line.
        if let Some(at) = text.rfind('\n') {
            text.truncate(at + 1);
        }
    }
    Ok(DaemonEvent::GitDiff {
        path: real.display().to_string(),
        file,
        diff: text,
        truncated,
    })
}

/// The empty tree's id in this repository's hash (a repository without commits diffs
/// against it).
async fn empty_tree(dir: &Path) -> Result<String, String> {
    let args = os(&["hash-object", "-t", "tree", "/dev/null"]);
    let out = run(dir, &[], &args, None, 256).await?;
    if out.code != Some(0) {
        return Err(git_failed(&out));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The changed files whose content the rule refuses (followed links are git's own business:
/// it shows a link's target path, never the file it points at).
fn refused_files(rule: &Rule, root: &Path, names: Vec<String>) -> Vec<String> {
    names
        .into_iter()
        .filter(|name| {
            let full = root.join(name);
            match std::fs::symlink_metadata(&full) {
                Ok(m) if m.is_file() => {
                    let shown = full.display().to_string();
                    rule.check("git_diff", &shown, Scope::Known)
                        .and_then(|real| rule.open("git_diff", &shown, &real, Scope::Known))
                        .is_err()
                }
                _ => false,
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_status_is_read_with_renames_and_the_branch() {
        let out = b"## main...origin/main [ahead 1]\0 M src/a.rs\0R  new.txt\0old.txt\0A  added.txt\0?? notes/x.md\0";
        let (branch, files) = parse_status(out);
        assert_eq!(branch.as_deref(), Some("main"));
        let got: Vec<_> = files
            .iter()
            .map(|f| (f.status.as_str(), f.path.as_str(), f.from.as_deref()))
            .collect();
        assert_eq!(
            got,
            vec![
                (" M", "src/a.rs", None),
                ("R ", "new.txt", Some("old.txt")),
                ("A ", "added.txt", None),
                ("??", "notes/x.md", None),
            ]
        );
        assert_eq!(
            parse_branch("No commits yet on trunk"),
            Some("trunk".into())
        );
        assert_eq!(parse_branch("HEAD (no branch)"), None);
    }

    #[test]
    fn a_diff_file_must_be_a_plain_path_inside_the_directory() {
        let root = Path::new("/r");
        let real = Path::new("/r/sub");
        assert!(file_spec(root, real, "sub/a.rs").is_some());
        assert!(file_spec(root, real, "other/a.rs").is_none());
        assert!(file_spec(root, real, "sub/../other/a.rs").is_none());
        assert!(file_spec(root, real, "/etc/passwd").is_none());
        assert!(file_spec(root, real, "").is_none());
        assert!(file_spec(root, Path::new("/r"), "./a").is_none());
    }
}
