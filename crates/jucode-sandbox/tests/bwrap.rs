//! Real bubblewrap runs. Fast, so not ignored; they need `bwrap` (scripts/install-sandbox.sh).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use jucode_sandbox::{Mode, Policy, Sandbox};

/// Deadlock guard only.
const GUARD: Duration = Duration::from_secs(60);

fn sandbox() -> Sandbox {
    match Sandbox::detect() {
        Ok(s) => s,
        Err(e) => panic!("{e}\nInstall bubblewrap with scripts/install-sandbox.sh"),
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    policy: Policy,
}

/// Where fixtures live: a directory outside /tmp, because the sandbox mounts a private /tmp
/// over the real one and a fixture under it would be replaced by that empty tmpfs (a write
/// "outside" would then land in the tmpfs and succeed). What the tests check is the read-only
/// bind of the real tree, so the fixture must be on it. The target directory is outside /tmp
/// in most checkouts; when it is not (a clone under /tmp), /var/tmp is, by the FHS.
fn fixture_base() -> PathBuf {
    let candidates = [
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        PathBuf::from("/var/tmp"),
    ];
    let looked = candidates.clone();
    candidates
        .into_iter()
        .filter_map(|dir| std::fs::canonicalize(dir).ok())
        .find(|dir| !dir.starts_with("/tmp"))
        .unwrap_or_else(|| panic!("no fixture directory outside /tmp among {looked:?}"))
}

/// A fake home (not /root) with a project as cwd, outside /tmp (see [`fixture_base`]).
fn fixture(mode: Mode) -> Fixture {
    let dir = tempfile::Builder::new()
        .prefix("sbx")
        .tempdir_in(fixture_base())
        .unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let home = root.join("home");
    for d in ["home/proj/.git", "home/.ssh", "home/.jucode/daemon"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(home.join("proj/.git/HEAD"), b"ref: refs/heads/main\n").unwrap();
    std::fs::write(home.join(".ssh/id"), b"PRIVATE KEY\n").unwrap();
    std::fs::write(home.join(".jucode/auth.json"), b"{\"token\":\"t\"}\n").unwrap();
    std::fs::write(home.join(".jucode/daemon/token"), b"daemon-token\n").unwrap();
    let policy = Policy {
        mode,
        cwd: home.join("proj"),
        writable: vec![],
        readable: vec![],
        network: false,
        user_home: home.clone(),
        jucode_home: home.join(".jucode"),
    };
    Fixture {
        _dir: dir,
        root,
        policy,
    }
}

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn sh(sbx: &Sandbox, policy: &Policy, script: &str) -> Run {
    let args = [OsString::from("-c"), OsString::from(script)];
    let mut cmd = sbx.command(policy, OsStr::new("sh"), &args).unwrap();
    // As if the daemon had its token in its environment: the child must not see it.
    cmd.env("JUCODE_TOKEN", "daemon-secret");
    cmd.stdin(Stdio::null());
    let out = tokio::time::timeout(GUARD, cmd.output())
        .await
        .expect("deadlock guard")
        .unwrap();
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test]
async fn a_write_inside_cwd_works_and_outside_fails() {
    let sbx = sandbox();
    let f = fixture(Mode::WorkspaceWrite);
    let outside = f.policy.user_home.join("outside");
    let script = format!(
        "echo inside > new.txt && mkdir -p sub && echo deep > sub/f; echo no > '{}'",
        outside.display()
    );
    let run = sh(&sbx, &f.policy, &script).await;
    assert!(!run.ok, "the write outside must fail: {}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(f.policy.cwd.join("new.txt")).unwrap(),
        "inside\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.policy.cwd.join("sub/f")).unwrap(),
        "deep\n"
    );
    assert!(!outside.exists());
    // /tmp is private and writable.
    let run = sh(&sbx, &f.policy, "echo t > /tmp/x && cat /tmp/x").await;
    assert!(run.ok, "{}", run.stderr);
}

#[tokio::test]
async fn writable_roots_are_writable_and_read_only_dirs_are_not() {
    let sbx = sandbox();
    let mut f = fixture(Mode::WorkspaceWrite);
    let extra = f.root.join("extra");
    let ro = f.policy.cwd.join("vendor");
    std::fs::create_dir_all(&extra).unwrap();
    std::fs::create_dir_all(&ro).unwrap();
    f.policy.writable = vec![extra.clone()];
    f.policy.readable = vec![ro.clone()];
    let run = sh(
        &sbx,
        &f.policy,
        &format!("echo e > '{}/f'", extra.display()),
    )
    .await;
    assert!(run.ok, "{}", run.stderr);
    let run = sh(&sbx, &f.policy, "echo v > vendor/f").await;
    assert!(!run.ok);
    assert!(!ro.join("f").exists());
}

#[tokio::test]
async fn git_stays_read_only() {
    let sbx = sandbox();
    let f = fixture(Mode::WorkspaceWrite);
    let run = sh(&sbx, &f.policy, "cat .git/HEAD && echo evil > .git/HEAD").await;
    assert!(!run.ok);
    assert!(
        run.stdout.contains("refs/heads/main"),
        "readable: {}",
        run.stdout
    );
    assert_eq!(
        std::fs::read_to_string(f.policy.cwd.join(".git/HEAD")).unwrap(),
        "ref: refs/heads/main\n"
    );
    let run = sh(&sbx, &f.policy, "mkdir .git/hooks2").await;
    assert!(!run.ok);
}

#[tokio::test]
async fn read_only_mode_writes_nothing_but_tmp() {
    let sbx = sandbox();
    let f = fixture(Mode::ReadOnly);
    let run = sh(&sbx, &f.policy, "echo x > new.txt").await;
    assert!(!run.ok);
    assert!(!f.policy.cwd.join("new.txt").exists());
    let run = sh(&sbx, &f.policy, "ls . >/dev/null && echo t > /tmp/t").await;
    assert!(run.ok, "{}", run.stderr);
}

#[tokio::test]
async fn credentials_are_unreadable_even_when_cwd_is_home() {
    let sbx = sandbox();
    let mut f = fixture(Mode::WorkspaceWrite);
    f.policy.cwd = f.policy.user_home.clone();
    let run = sh(&sbx, &f.policy, "echo mine > notes.txt && cat notes.txt").await;
    assert!(run.ok, "home is the writable cwd: {}", run.stderr);
    for secret in [".ssh/id", ".jucode/auth.json", ".jucode/daemon/token"] {
        let run = sh(&sbx, &f.policy, &format!("cat {secret}")).await;
        assert!(
            !run.stdout.contains("PRIVATE") && !run.stdout.contains("token"),
            "{secret} leaked: {}",
            run.stdout
        );
    }
    // Nor can the hidden directory be written to plant a key.
    let run = sh(&sbx, &f.policy, "echo k >> .ssh/authorized_keys").await;
    assert!(!run.ok);
    assert!(!f.policy.user_home.join(".ssh/authorized_keys").exists());
}

#[tokio::test]
async fn a_symlink_to_ssh_does_not_reveal_it() {
    let sbx = sandbox();
    let f = fixture(Mode::WorkspaceWrite);
    std::os::unix::fs::symlink(f.policy.user_home.join(".ssh"), f.policy.cwd.join("keys")).unwrap();
    let run = sh(&sbx, &f.policy, "cat keys/id").await;
    assert!(!run.stdout.contains("PRIVATE"), "{}", run.stdout);
}

#[tokio::test]
async fn network_is_unreachable_when_forbidden() {
    let sbx = sandbox();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut f = fixture(Mode::WorkspaceWrite);
    // bash's /dev/tcp: no dependency on curl or nc.
    let probe = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let args = [OsString::from("-c"), OsString::from(&probe)];

    let run_bash = |policy: &Policy| {
        let mut cmd = sbx.command(policy, OsStr::new("bash"), &args).unwrap();
        cmd.stdin(Stdio::null());
        async move {
            tokio::time::timeout(GUARD, cmd.output())
                .await
                .expect("deadlock guard")
                .unwrap()
        }
    };
    let out = run_bash(&f.policy).await;
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("connected"));

    // The same probe connects when the network is allowed: the test can fail.
    f.policy.network = true;
    let out = run_bash(&f.policy).await;
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("connected"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn the_environment_is_an_allowlist() {
    let sbx = sandbox();
    let f = fixture(Mode::WorkspaceWrite);
    let run = sh(&sbx, &f.policy, "env").await;
    assert!(run.ok, "{}", run.stderr);
    assert!(!run.stdout.contains("JUCODE_"), "{}", run.stdout);
    assert!(!run.stdout.contains("daemon-secret"), "{}", run.stdout);
    let home = format!("HOME={}", f.policy.user_home.display());
    assert!(run.stdout.lines().any(|l| l == home), "{}", run.stdout);
    assert!(run.stdout.lines().any(|l| l.starts_with("PATH=")));
}

#[tokio::test]
async fn other_processes_are_invisible() {
    let sbx = sandbox();
    let f = fixture(Mode::WorkspaceWrite);
    let me = std::process::id();
    let run = sh(
        &sbx,
        &f.policy,
        &format!("test -e /proc/{me} && echo visible; true"),
    )
    .await;
    assert!(run.ok, "{}", run.stderr);
    assert!(!run.stdout.contains("visible"));
}

/// The pid of the sandboxed shell whose script holds `marker`, if it runs.
fn find_process(marker: &str) -> Option<u32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        // Only the sandboxed `sh -c "sleep …; : marker"` itself, not bwrap or the wrapper
        // whose arguments also carry the marker.
        let argv: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_target = argv.first() == Some(&&b"sh"[..])
            && argv
                .get(2)
                .is_some_and(|a| String::from_utf8_lossy(a).contains(marker));
        if is_target && !is_zombie(pid) {
            return Some(pid);
        }
    }
    None
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// Polls `cond`; false if it still does not hold after the deadlock guard.
async fn wait_until(mut cond: impl FnMut() -> bool) -> bool {
    tokio::time::timeout(GUARD, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .is_ok()
}

#[tokio::test]
async fn the_child_dies_with_its_parent() {
    let sbx = sandbox();
    let f = fixture(Mode::WorkspaceWrite);
    let marker = format!("jucode-sbx-orphan-{}", std::process::id());
    let args = [
        OsString::from("-c"),
        OsString::from(format!("sleep 600; : {marker}")),
    ];
    let cmd = sbx.command(&f.policy, OsStr::new("sh"), &args).unwrap();
    let std_cmd = cmd.as_std();
    // An intermediate parent (standing in for the daemon) that we can kill outright.
    let mut wrapper = tokio::process::Command::new("sh");
    wrapper
        .arg("-c")
        .arg("\"$@\" & wait")
        .arg("sh")
        .arg(std_cmd.get_program())
        .args(std_cmd.get_args())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let mut wrapper = wrapper.spawn().unwrap();
    assert!(wait_until(|| find_process(&marker).is_some()).await);
    wrapper.start_kill().unwrap();
    wrapper.wait().await.unwrap();
    let gone = wait_until(|| find_process(&marker).is_none()).await;
    assert!(gone, "the sandboxed process outlived its parent");
}

#[tokio::test]
async fn full_access_runs_the_bare_command() {
    let sbx = sandbox();
    let f = fixture(Mode::FullAccess);
    let outside = f.root.join("outside");
    let run = sh(
        &sbx,
        &f.policy,
        &format!("echo yes > '{}'", outside.display()),
    )
    .await;
    assert!(run.ok, "{}", run.stderr);
    assert!(outside.exists());
}
