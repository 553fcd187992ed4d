//! `install` / `uninstall` on the real binary, with `systemctl` and `loginctl` doubles first in
//! `PATH` that record how they were called; the unit written is checked by the real
//! `systemd-analyze verify`. And `--log-file`: the daemon's log lands there, without its token.
//!
//! Build first: `cargo build -p jucode-daemon -p jucode-testsupport`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use jucode_testsupport::TestHome;

/// A directory of stand-ins for the service manager's commands. Each appends its name and
/// arguments to `calls`; `systemctl` fails when `fail` exists.
struct FakeManager {
    dir: tempfile::TempDir,
}

impl FakeManager {
    fn new() -> FakeManager {
        let dir = tempfile::tempdir().unwrap();
        let calls = dir.path().join("calls");
        let fail = dir.path().join("fail");
        for (name, out) in [("systemctl", ""), ("loginctl", "no"), ("launchctl", "")] {
            let script = format!(
                "#!/bin/sh\necho \"{name} $*\" >> '{calls}'\n\
                 if [ {name} = systemctl ] && [ -e '{fail}' ]; then echo 'Failed to connect to bus' >&2; exit 1; fi\n\
                 echo '{out}'\n",
                calls = calls.display(),
                fail = fail.display(),
            );
            let path = dir.path().join(name);
            std::fs::write(&path, script).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        FakeManager { dir }
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn path_var(&self) -> String {
        format!(
            "{}:{}",
            self.dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }
}

fn daemon(env: &TestHome, fake: &FakeManager, args: &[&str]) -> Output {
    let home = env.root().to_path_buf();
    Command::new(jucode_testsupport::daemon_bin().unwrap())
        .args(args)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("cfg"))
        .env("PATH", fake.path_var())
        .env_remove("JUCODE_HOME")
        .output()
        .unwrap()
}

fn unit_path(env: &TestHome) -> PathBuf {
    env.root().join("cfg/systemd/user/jucode-daemon.service")
}

/// `systemd-analyze verify` must accept the unit without a single warning about it.
fn verify(unit: &Path) {
    let runtime = tempfile::tempdir().unwrap();
    std::fs::set_permissions(runtime.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["--user", "verify"])
        .arg(unit)
        .env("XDG_RUNTIME_DIR", runtime.path())
        .output()
        .expect("systemd-analyze runs (install the systemd package: .ci/run does)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "verify failed: {stderr}");
    let about_us: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("jucode-daemon"))
        .collect();
    assert!(about_us.is_empty(), "verify warned: {about_us:?}");
}

#[test]
fn install_writes_a_valid_unit_with_this_shells_path_and_starts_it_and_uninstall_removes_it() {
    let env = TestHome::new();
    let fake = FakeManager::new();
    let jhome = env.home();
    let out = daemon(
        &env,
        &fake,
        &[
            "--listen",
            "127.0.0.1:7999",
            "--home",
            jhome.to_str().unwrap(),
            "--no-relay",
            "install",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let unit = std::fs::read_to_string(unit_path(&env)).unwrap();
    let exe = jucode_testsupport::daemon_bin()
        .unwrap()
        .canonicalize()
        .unwrap();
    let log = jhome.join("daemon/daemon.log");
    assert!(
        unit.contains(&format!(
            "ExecStart=\"{}\" \"--listen\" \"127.0.0.1:7999\" \"--home\" \"{}\" \"--no-relay\" \"--log-file\" \"{}\"",
            exe.display(),
            jhome.display(),
            log.display()
        )),
        "{unit}"
    );
    assert!(
        unit.contains(&format!("Environment=\"PATH={}\"", fake.path_var())),
        "{unit}"
    );
    assert!(unit.contains("Restart=always"), "{unit}");
    verify(&unit_path(&env));
    assert_eq!(
        fake.calls()
            .into_iter()
            .filter(|c| c.starts_with("systemctl"))
            .collect::<Vec<_>>(),
        [
            "systemctl --user daemon-reload",
            "systemctl --user enable jucode-daemon.service",
            "systemctl --user restart jucode-daemon.service",
        ]
    );
    // loginctl says the user does not linger: the service would only start at login.
    assert!(stdout.contains("loginctl enable-linger"), "{stdout}");

    let out = daemon(&env, &fake, &["uninstall"]);
    assert!(out.status.success());
    assert!(!unit_path(&env).exists());
    assert!(
        fake.calls()
            .contains(&"systemctl --user disable --now jucode-daemon.service".to_string()),
        "{:?}",
        fake.calls()
    );
    let again = daemon(&env, &fake, &["uninstall"]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("no jucode service is installed"));
}

#[test]
fn a_failing_service_manager_is_reported_with_what_to_run_by_hand() {
    let env = TestHome::new();
    let fake = FakeManager::new();
    std::fs::write(fake.dir.path().join("fail"), "").unwrap();
    let out = daemon(&env, &fake, &["install"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("systemctl --user daemon-reload failed"),
        "{stderr}"
    );
    assert!(stderr.contains("Failed to connect to bus"), "{stderr}");
    assert!(
        stderr.contains("systemctl --user enable --now jucode-daemon.service"),
        "{stderr}"
    );
    // The unit is there to start by hand, and it is valid.
    verify(&unit_path(&env));
}

#[tokio::test]
async fn with_log_file_the_daemon_logs_there_and_never_its_token() {
    let env = TestHome::new();
    let log = env.root().join("logs/daemon.log");
    let mut daemon = jucode_testsupport::Daemon::builder(&env.home())
        .args(["--log-file", log.to_str().unwrap()])
        .start()
        .await
        .unwrap();
    let token = daemon.token().unwrap();
    let mut desk = daemon.client().await.unwrap();
    desk.request(serde_json::json!({"op":"ping"}))
        .await
        .unwrap();
    daemon.stop().await.unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.is_empty());
    assert!(!text.contains(&token), "the token is in the log");
    // Plain text: no colour escapes in a file.
    assert!(!text.contains('\u{1b}'), "{text}");
}
