//! Finding the workspace's built binaries from a test, wherever the target directory is.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use anyhow::{Context, Result, bail};

/// The built `jucode-fake-serve` binary.
pub fn fake_serve_bin() -> Result<PathBuf> {
    find_bin("jucode-fake-serve", "jucode-testsupport")
}

/// The built `jucode-daemon` binary.
pub fn daemon_bin() -> Result<PathBuf> {
    find_bin("jucode-daemon", "jucode-daemon")
}

/// The `jucode-fsync-fault` preload library (`libjucode_fsync_fault.so`), built first when
/// missing (`cargo build --workspace` builds it; `cargo test -p jucode-daemon` does not). One
/// that is there is taken as it is: after changing the library, build it again.
pub fn fsync_fault_lib() -> Result<PathBuf> {
    let file = format!(
        "{}jucode_fsync_fault{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let package = "jucode-fsync-fault";
    build_then_find(package, || find_file(&file, package))
}

/// The built binary `name` of workspace package `package`.
///
/// Looks, in order, at `CARGO_BIN_EXE_<name>` in the environment (cargo and nextest set it for
/// the running package's own binaries), then in the profile directory of the running test
/// (integration tests run from `<target>/<profile>/deps`, binaries land in
/// `<target>/<profile>`; this follows the target directory wherever it is), then under
/// `CARGO_TARGET_DIR`. The error says what to build.
pub fn find_bin(name: &str, package: &str) -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(format!("CARGO_BIN_EXE_{name}")).map(PathBuf::from)
        && path.is_file()
    {
        return Ok(path);
    }
    find_file(&format!("{name}{}", std::env::consts::EXE_SUFFIX), package)
}

/// The built file `file` (a binary or a library) of `package` in the target directory.
fn find_file(file: &str, package: &str) -> Result<PathBuf> {
    let mut looked = Vec::new();
    for dir in candidate_dirs()? {
        let candidate = dir.join(file);
        if candidate.is_file() {
            return Ok(candidate);
        }
        looked.push(candidate.display().to_string());
    }
    bail!(
        "{file} is not built (looked at {}); run `cargo build -p {package}` first",
        looked.join(", ")
    )
}

/// As [`find_bin`], building `package` first with the running cargo into the running test's
/// target directory when the binary is missing (for binaries of another package that a
/// plain `cargo test -p <this>` would not build).
pub fn build_bin(name: &str, package: &str) -> Result<PathBuf> {
    build_then_find(package, || find_bin(name, package))
}

/// `find()`, building `package` first when it finds nothing.
fn build_then_find(package: &str, find: impl Fn() -> Result<PathBuf>) -> Result<PathBuf> {
    if let Ok(path) = find() {
        return Ok(path);
    }
    // One build at a time: tests of one binary run in parallel and would all try.
    static BUILDING: Mutex<()> = Mutex::new(());
    let _one = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    if let Ok(path) = find() {
        return Ok(path);
    }
    let profile_dir = profile_dir()?;
    let target_dir = profile_dir
        .parent()
        .context("the test's profile directory has no parent")?;
    let profile = profile_dir
        .file_name()
        .and_then(|p| p.to_str())
        .unwrap_or("debug");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut command = Command::new(cargo);
    command
        .args(["build", "-p", package])
        .arg("--target-dir")
        .arg(target_dir);
    match profile {
        "debug" => {}
        "release" => {
            command.arg("--release");
        }
        other => {
            command.args(["--profile", other]);
        }
    }
    let status = command
        .status()
        .with_context(|| format!("run cargo build -p {package}"))?;
    if !status.success() {
        bail!("cargo build -p {package} failed ({status})");
    }
    find()
}

/// `<target>/<profile>` of the running test binary: its directory, or the parent of its
/// `deps` directory.
fn profile_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locate the running test binary")?;
    let dir = exe.parent().context("the test binary has no directory")?;
    Ok(match dir.file_name().and_then(|d| d.to_str()) {
        Some("deps" | "examples") => dir.parent().unwrap_or(dir).to_path_buf(),
        _ => dir.to_path_buf(),
    })
}

fn candidate_dirs() -> Result<Vec<PathBuf>> {
    let profile_dir = profile_dir()?;
    let mut dirs = vec![profile_dir.clone()];
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from) {
        let profile = profile_dir
            .file_name()
            .map(Path::new)
            .unwrap_or(Path::new("debug"));
        let dir = target.join(profile);
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_binary_says_how_to_build_it() -> Result<()> {
        let err = find_bin("no-such-binary", "some-package")
            .err()
            .context("found a binary that does not exist")?;
        assert!(
            err.to_string().contains("cargo build -p some-package"),
            "{err}"
        );
        Ok(())
    }

    #[test]
    fn the_profile_directory_is_above_deps() -> Result<()> {
        let dir = profile_dir()?;
        let exe = std::env::current_exe()?;
        assert!(
            exe.starts_with(&dir),
            "{} not under {}",
            exe.display(),
            dir.display()
        );
        assert_ne!(dir.file_name().and_then(|d| d.to_str()), Some("deps"));
        Ok(())
    }
}
