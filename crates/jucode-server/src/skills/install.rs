//! Installing one skill: everything is written into a temporary directory beside the target
//! and checked (sizes, sha256, paths), and only then swapped in, so a failed or tampered
//! download leaves the old install as it was.

use std::io::Read as _;
use std::path::{Component, Path, PathBuf};

use futures_util::StreamExt as _;
use ring::digest;

use super::{IndexSkill, MarketSkill, inside, reason};

/// The most a package may be, compressed or unpacked.
const MAX_PACKAGE_BYTES: u64 = 64 * 1024 * 1024;
/// The most entries a package may have.
const MAX_ENTRIES: usize = 2000;

pub(super) async fn jucode(
    http: &reqwest::Client,
    market_url: &str,
    skill: MarketSkill,
    target: &Path,
) -> Result<(), String> {
    let staged = stage(target)?;
    if let Some(package) = &skill.package {
        let url = reqwest::Url::parse(market_url)
            .and_then(|base| base.join(&package.url))
            .map_err(|e| format!("{}: bad package URL ({e})", skill.id))?;
        let bytes = download(http, url.as_str(), MAX_PACKAGE_BYTES)
            .await
            .map_err(|e| format!("{}: the package: {e}", skill.id))?;
        let got = hex(digest::digest(&digest::SHA256, &bytes).as_ref());
        if !got.eq_ignore_ascii_case(&package.sha256) {
            return Err(format!(
                "{}: the package's checksum does not match (sha256 {got}, the marketplace says {}); nothing was installed",
                skill.id, package.sha256
            ));
        }
        let dir = staged.path().to_path_buf();
        let id = skill.id.clone();
        tokio::task::spawn_blocking(move || unpack(&bytes, &dir))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("{id}: {e}; nothing was installed"))?;
    } else if let Some(content) = &skill.content {
        write(&staged.path().join("SKILL.md"), content.as_bytes(), false)?;
    } else {
        return Err(format!(
            "{}: the marketplace gives neither content nor a package",
            skill.id
        ));
    }
    if !staged.path().join("SKILL.md").is_file() {
        return Err(format!("{}: the package has no SKILL.md", skill.id));
    }
    swap(staged, target)
}

pub(super) async fn anthropic(
    http: &reqwest::Client,
    base: &str,
    skill: &IndexSkill,
    target: &Path,
) -> Result<(), String> {
    let staged = stage(target)?;
    for file in &skill.files {
        if !inside(Path::new(&file.path)) {
            return Err(format!(
                "{}: the index names a path outside the skill ({})",
                skill.id, file.path
            ));
        }
        let bytes = download(http, &format!("{base}/{}", file.path), file.size)
            .await
            .map_err(|e| format!("{}: {}: {e}; nothing was installed", skill.id, file.path))?;
        let got = hex(digest::digest(&digest::SHA256, &bytes).as_ref());
        if bytes.len() as u64 != file.size || !got.eq_ignore_ascii_case(&file.sha256) {
            return Err(format!(
                "{}: {} does not match the index's checksum; nothing was installed",
                skill.id, file.path
            ));
        }
        write(&staged.path().join(&file.path), &bytes, file.executable)?;
    }
    swap(staged, target)
}

/// A fresh temporary directory beside `target` (same file system, so the swap is a rename).
fn stage(target: &Path) -> Result<tempfile::TempDir, String> {
    stage_named(target, "new")
}

fn stage_named(target: &Path, kind: &str) -> Result<tempfile::TempDir, String> {
    let parent = target
        .parent()
        .ok_or("the install directory has no parent")?;
    std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    tempfile::Builder::new()
        .prefix(&format!(".{name}.{kind}-"))
        .tempdir_in(parent)
        .map_err(|e| format!("{}: {e}", parent.display()))
}

/// Moves the old install aside (into a fresh directory beside it), the new one in, then
/// removes the old one; if the second rename fails the old one is put back.
fn swap(staged: tempfile::TempDir, target: &Path) -> Result<(), String> {
    let staged = staged.keep();
    let fail = |e: std::io::Error| {
        let _ = std::fs::remove_dir_all(&staged);
        format!("{}: {e}", target.display())
    };
    let aside = if target.exists() {
        let dir = stage_named(target, "old").inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&staged);
        })?;
        let old = dir.path().join("old");
        std::fs::rename(target, &old).map_err(fail)?;
        Some((dir, old))
    } else {
        None
    };
    if let Err(e) = std::fs::rename(&staged, target) {
        if let Some((_, old)) = &aside {
            let _ = std::fs::rename(old, target);
        }
        return Err(fail(e));
    }
    // Dropping the aside directory removes the old install.
    drop(aside);
    Ok(())
}

async fn download(http: &reqwest::Client, url: &str, max: u64) -> Result<Vec<u8>, String> {
    let response = http
        .get(url)
        .timeout(super::DOWNLOAD_TIMEOUT)
        .send()
        .await
        .map_err(|e| format!("download failed: {}", reason(&e)))?;
    if !response.status().is_success() {
        return Err(format!(
            "download failed: the source answered {}",
            response.status()
        ));
    }
    let mut bytes = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| format!("download failed: {}", reason(&e)))?;
        bytes.extend_from_slice(&chunk);
        if bytes.len() as u64 > max {
            return Err(format!(
                "download failed: more than the {max} bytes expected"
            ));
        }
    }
    Ok(bytes)
}

/// Unpacks a tar.gz whose root is the skill's directory: regular files and directories only,
/// every path plain and relative, bounded in count and size.
fn unpack(bytes: &[u8], dir: &Path) -> Result<(), String> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let entries = archive
        .entries()
        .map_err(|e| format!("not a tar.gz package ({e})"))?;
    let mut total = 0u64;
    for (n, entry) in entries.enumerate() {
        if n >= MAX_ENTRIES {
            return Err(format!("the package has more than {MAX_ENTRIES} entries"));
        }
        let mut entry = entry.map_err(|e| format!("not a tar.gz package ({e})"))?;
        let raw = entry
            .path()
            .map_err(|e| format!("a bad path in the package ({e})"))?
            .into_owned();
        // `tar -C dir .` writes `./a`; the `.` entry itself is the skill directory.
        let path: PathBuf = raw
            .components()
            .filter(|c| *c != Component::CurDir)
            .collect();
        let kind = entry.header().entry_type();
        if path.as_os_str().is_empty() && kind.is_dir() {
            continue;
        }
        if !inside(&path) {
            return Err(format!(
                "the package has a path outside the skill ({})",
                raw.display()
            ));
        }
        if kind.is_dir() {
            std::fs::create_dir_all(dir.join(&path)).map_err(|e| e.to_string())?;
            continue;
        }
        if !kind.is_file() {
            return Err(format!(
                "the package has an entry that is not a file or a directory ({})",
                raw.display()
            ));
        }
        total += entry.size();
        if total > MAX_PACKAGE_BYTES {
            return Err(format!(
                "the package unpacks to more than {MAX_PACKAGE_BYTES} bytes"
            ));
        }
        let executable = entry
            .header()
            .mode()
            .map(|m| m & 0o111 != 0)
            .unwrap_or(false);
        let mut data = Vec::new();
        entry
            .by_ref()
            .take(MAX_PACKAGE_BYTES)
            .read_to_end(&mut data)
            .map_err(|e| format!("not a tar.gz package ({e})"))?;
        write(&dir.join(&path), &data, executable)?;
    }
    Ok(())
}

fn write(path: &Path, data: &[u8], executable: bool) -> Result<(), String> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let mode = if executable { 0o755 } else { 0o644 };
    // create_new: a path named twice in a package is refused rather than overwritten.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.write_all(data)
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
