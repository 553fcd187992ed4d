//! Small unix helpers shared by the modules.

use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::error::{Result, io_err};

/// Sets creation mode on unix; elsewhere a no-op.
pub(crate) fn create_mode(opts: &mut OpenOptions, mode: u32) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = mode;
        opts
    }
}

/// fchmod: the creation mode is filtered by the umask, this is not.
pub(crate) fn set_mode(file: &File, mode: u32, path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io_err(path))
    }
    #[cfg(not(unix))]
    {
        let _ = (file, mode, path);
        Ok(())
    }
}

/// Permission bits (`st_mode & 0o7777`); 0o600 where unix modes do not exist.
pub(crate) fn mode_of(meta: &std::fs::Metadata) -> u32 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o7777
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        0o600
    }
}

/// fsyncs a directory so a name created, renamed or removed in it survives a crash.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(dir))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// The directory holding `path`; `.` for a bare file name.
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}
