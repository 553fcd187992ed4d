//! Files a client sends in base64 chunks (`upload`), written under
//! `<jucode home>/uploads/<date>/<id>-<name>`, as `<path>.part` until the last chunk.
//!
//! An upload belongs to the connection that started it: only that connection may continue
//! it, and once it is gone the upload is abandoned (its `.part` stays until the next start,
//! or until the next upload any client starts sweeps it). Chunks are decoded and written off
//! the connection's task; the hub's lock is never held while a chunk is written.
//!
//! At start, leftover `.part` files and the files of date folders more than
//! [`UPLOAD_KEEP_DAYS`] old (by the hub's clock) are removed.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use jucode_protocol::daemon::limits::{UPLOAD_CHUNK_BYTES, UPLOAD_FILE_BYTES, UPLOAD_KEEP_DAYS};
use jucode_protocol::daemon::{DaemonEvent, Reply, UploadsOp};

use crate::cx::OpCx;
use crate::error::OpError;
use crate::{ClientId, Hub, to_value};

mod name;

pub(crate) use name::clean_name;

/// How many unfinished uploads one connection may hold; starting one more abandons its
/// oldest (a page that cancels a file simply stops sending it).
const OPEN_PER_CLIENT: usize = 8;

/// Why a chunk was refused. The texts are the error frames' messages.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UploadError {
    #[error("upload: the first chunk needs name; later ones need upload and offset")]
    NoStart,
    #[error("upload: name goes only with the first chunk (this one names upload {0})")]
    NameOnLater(String),
    #[error("upload: offset is required with upload")]
    NoOffset,
    #[error("upload: the first chunk starts at offset 0, not {0}")]
    FirstOffset(u64),
    #[error("upload: {0}")]
    BadName(&'static str),
    #[error("upload: data is not base64 ({0})")]
    NotBase64(String),
    #[error("upload: a chunk holds at most 4 MB ({UPLOAD_CHUNK_BYTES} bytes) decoded")]
    ChunkTooLarge,
    #[error("upload {0}: no such upload in progress (finished, failed, or never started)")]
    Unknown(String),
    #[error("upload {0}: started by another connection; only that one may continue it")]
    OtherClient(String),
    #[error("upload {upload}: offset {offset} is not the {size} bytes received so far")]
    Offset {
        upload: String,
        offset: u64,
        size: u64,
    },
    #[error("upload {0}: a file holds at most 100 MB ({UPLOAD_FILE_BYTES} bytes)")]
    FileTooLarge(String),
    #[error("upload: cannot write {path}: {message}")]
    Io { path: String, message: String },
}

/// An upload between its first and its last chunk.
struct Open {
    id: String,
    client: ClientId,
    part: PathBuf,
    done: PathBuf,
    name: String,
    size: u64,
    /// The first bytes, to tell an image by its magic numbers.
    head: Vec<u8>,
    file: File,
    /// When it started, to abandon a connection's oldest.
    seq: u64,
}

/// The uploads in progress. Its own lock, apart from the hub's: a chunk's write happens under
/// its upload's lock only.
#[derive(Default)]
pub(crate) struct Uploads {
    next: AtomicU64,
    open: Mutex<HashMap<String, Arc<Mutex<Option<Open>>>>>,
}

impl Uploads {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Mutex<Option<Open>>>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets uploads whose connection is gone, and a connection's oldest beyond
    /// [`OPEN_PER_CLIENT`]; their parts are removed.
    fn sweep(&self, client: ClientId, alive: &dyn Fn(ClientId) -> bool) {
        let mut open = self.lock();
        let mut mine = Vec::new();
        open.retain(|_, slot| {
            let guard = slot.try_lock();
            let Ok(guard) = guard else {
                // A chunk is being written: its connection is alive.
                return true;
            };
            let Some(upload) = guard.as_ref() else {
                return false;
            };
            if !alive(upload.client) {
                let _ = std::fs::remove_file(&upload.part);
                return false;
            }
            if upload.client == client {
                mine.push((upload.seq, upload.id.clone(), upload.part.clone()));
            }
            true
        });
        mine.sort();
        while mine.len() >= OPEN_PER_CLIENT {
            let (_, id, part) = mine.remove(0);
            open.remove(&id);
            let _ = std::fs::remove_file(part);
        }
    }
}

/// One chunk, decoded and checked for size.
fn decode(data: &str) -> Result<Vec<u8>, UploadError> {
    // Judge the size before decoding: base64 holds 3 bytes in every 4 characters.
    let most = UPLOAD_CHUNK_BYTES.div_ceil(3) * 4;
    if data.len() as u64 > most {
        return Err(UploadError::ChunkTooLarge);
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| UploadError::NotBase64(e.to_string()))?;
    if bytes.len() as u64 > UPLOAD_CHUNK_BYTES {
        return Err(UploadError::ChunkTooLarge);
    }
    Ok(bytes)
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> UploadError + '_ {
    move |e| UploadError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Writes `bytes` to the upload; with `last`, fsyncs it, renames it from its `.part` and
/// fsyncs the folder, so the reply is sent only for a file that survives a crash.
fn write(upload: &mut Open, bytes: &[u8], last: bool) -> Result<DaemonEvent, UploadError> {
    if upload.size + bytes.len() as u64 > UPLOAD_FILE_BYTES {
        return Err(UploadError::FileTooLarge(upload.id.clone()));
    }
    upload
        .file
        .write_all(bytes)
        .map_err(io_error(&upload.part))?;
    upload.size += bytes.len() as u64;
    if upload.head.len() < 16 {
        let take = (16 - upload.head.len()).min(bytes.len());
        upload.head.extend_from_slice(&bytes[..take]);
    }
    if !last {
        return Ok(DaemonEvent::UploadPart {
            upload: upload.id.clone(),
            size: upload.size,
        });
    }
    upload.file.sync_all().map_err(io_error(&upload.part))?;
    if std::fs::symlink_metadata(&upload.done).is_ok() {
        return Err(UploadError::Io {
            path: upload.done.display().to_string(),
            message: "a file of that name is already there".into(),
        });
    }
    std::fs::rename(&upload.part, &upload.done).map_err(io_error(&upload.done))?;
    if let Some(dir) = upload.done.parent() {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_error(dir))?;
    }
    Ok(DaemonEvent::Uploaded {
        upload: upload.id.clone(),
        path: upload.done.display().to_string(),
        name: upload.name.clone(),
        size: upload.size,
        image: crate::files::image_type(&upload.head).is_some(),
    })
}

/// What a chunk asks for, read from the op.
struct Chunk {
    name: Option<String>,
    upload: Option<String>,
    offset: Option<u64>,
    data: String,
    last: bool,
}

impl Hub {
    /// The folder uploads go to (`<jucode home>/uploads`).
    pub(crate) fn uploads_dir(&self) -> PathBuf {
        self.config.home.join("uploads")
    }
}

impl Uploads {
    /// Starts an upload with its first chunk, under `dir` in the date folder of `now`.
    fn start(
        &self,
        (dir, now): (&Path, jiff::Timestamp),
        client: ClientId,
        name: &str,
        bytes: &[u8],
        last: bool,
        alive: &dyn Fn(ClientId) -> bool,
    ) -> Result<DaemonEvent, UploadError> {
        let name = clean_name(name).map_err(UploadError::BadName)?;
        self.sweep(client, alive);
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("u-{}-{n}", now.as_millisecond());
        // The date folder is the UTC date, so it does not move with the machine's zone.
        let dir = dir.join(now.strftime("%Y-%m-%d").to_string());
        std::fs::create_dir_all(&dir).map_err(io_error(&dir))?;
        let done = dir.join(format!("{id}-{name}"));
        let part = dir.join(format!("{id}-{name}.part"));
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&part)
            .map_err(io_error(&part))?;
        let mut upload = Open {
            id: id.clone(),
            client,
            part,
            done,
            name,
            size: 0,
            head: Vec::new(),
            file,
            seq: n,
        };
        let event = write(&mut upload, bytes, last)?;
        if !last {
            self.lock().insert(id, Arc::new(Mutex::new(Some(upload))));
        }
        Ok(event)
    }

    /// Continues an upload at `offset`.
    fn resume(
        &self,
        client: ClientId,
        id: &str,
        offset: u64,
        bytes: &[u8],
        last: bool,
    ) -> Result<DaemonEvent, UploadError> {
        let slot = self
            .lock()
            .get(id)
            .cloned()
            .ok_or_else(|| UploadError::Unknown(id.to_string()))?;
        let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
        let Some(upload) = guard.as_mut() else {
            return Err(UploadError::Unknown(id.to_string()));
        };
        if upload.client != client {
            return Err(UploadError::OtherClient(id.to_string()));
        }
        if offset != upload.size {
            return Err(UploadError::Offset {
                upload: id.to_string(),
                offset,
                size: upload.size,
            });
        }
        let written = write(upload, bytes, last);
        match &written {
            // Too large: the part stays as it was and the upload may still end.
            Err(UploadError::FileTooLarge(_)) => {}
            // Finished, or failed while writing: it is over (a failed one keeps its part
            // until the next start).
            Ok(DaemonEvent::UploadPart { .. }) => {}
            _ => {
                *guard = None;
                self.lock().remove(id);
            }
        }
        written
    }

    /// One `upload` op's chunk, for an upload under `dir`.
    fn chunk(
        &self,
        dir: &Path,
        now: jiff::Timestamp,
        client: ClientId,
        chunk: Chunk,
        alive: &dyn Fn(ClientId) -> bool,
    ) -> Result<DaemonEvent, UploadError> {
        match (chunk.name, chunk.upload) {
            (Some(_), Some(id)) => Err(UploadError::NameOnLater(id)),
            (None, Some(id)) => {
                let offset = chunk.offset.ok_or(UploadError::NoOffset)?;
                let bytes = decode(&chunk.data)?;
                self.resume(client, &id, offset, &bytes, chunk.last)
            }
            (Some(name), None) => {
                if let Some(offset) = chunk.offset.filter(|o| *o != 0) {
                    return Err(UploadError::FirstOffset(offset));
                }
                let bytes = decode(&chunk.data)?;
                self.start((dir, now), client, &name, &bytes, chunk.last, alive)
            }
            (None, None) => Err(UploadError::NoStart),
        }
    }
}

impl Chunk {
    fn of(op: UploadsOp) -> Chunk {
        let UploadsOp::Upload {
            name,
            upload,
            offset,
            data,
            last,
        } = op;
        Chunk {
            name,
            upload,
            offset,
            data,
            last,
        }
    }
}

/// The `upload` op's chunk handling alone, over a folder of its own and with the time and
/// the connections given by the caller: what the hub runs for every chunk, with nothing else
/// of the hub around it. The seam the `upload_chunks` fuzz target drives.
#[derive(Default)]
pub struct UploadDesk {
    uploads: Uploads,
}

impl std::fmt::Debug for UploadDesk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadDesk")
            .field("open", &self.uploads.lock().len())
            .finish()
    }
}

impl UploadDesk {
    /// Handles one chunk (an op as `DaemonOp` parsing gives it, limits checked, as the hub gets it)
    /// from `client` at `now`, for an upload under `dir`; `alive` says which connections
    /// are still there. The text of an error is the error frame's message.
    pub fn chunk(
        &self,
        dir: &Path,
        now: jiff::Timestamp,
        client: ClientId,
        op: UploadsOp,
        alive: &dyn Fn(ClientId) -> bool,
    ) -> Result<DaemonEvent, String> {
        self.uploads
            .chunk(dir, now, client, Chunk::of(op), alive)
            .map_err(|e| e.to_string())
    }
}

/// Answers `upload` off the connection's task: decoding and writing 4 MB takes a while, and
/// nothing else on the connection (or in the hub) should wait for it.
pub(crate) fn handle(cx: &OpCx<'_>, op: UploadsOp) -> Result<(), OpError> {
    let chunk = Chunk::of(op);
    let hub: Arc<Hub> = cx.hub.clone();
    let client = cx.client;
    let id = cx.id.clone();
    tokio::task::spawn_blocking(move || {
        let alive = |c: ClientId| hub.lock().clients.auth(c).is_some();
        let now = hub.config.clock.now();
        let reply = match hub
            .uploads
            .chunk(&hub.uploads_dir(), now, client, chunk, &alive)
        {
            Ok(event) => Reply::to(id, event),
            Err(e) => Reply::error(id, e.to_string()),
        };
        hub.lock().clients.send(client, &to_value(&reply));
    });
    Ok(())
}

/// Removes leftover `.part` files, and the files of date folders older than
/// [`UPLOAD_KEEP_DAYS`] on `today`, under `dir` (the uploads folder). Folders that are not
/// dates (`requirements/`) are left alone. Returns how many files went.
pub(crate) fn purge(dir: &Path, today: jiff::civil::Date) -> usize {
    let Ok(days) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for day in days.flatten() {
        let Some(date) = day
            .file_name()
            .to_str()
            .filter(|n| n.len() == 10)
            .and_then(|n| n.parse::<jiff::civil::Date>().ok())
        else {
            continue;
        };
        let is_dir = day.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if !is_dir {
            continue;
        }
        let old = today
            .since(date)
            .map(|span| span.get_days() > UPLOAD_KEEP_DAYS as i32)
            .unwrap_or(false);
        let Ok(files) = std::fs::read_dir(day.path()) else {
            continue;
        };
        for file in files.flatten() {
            let is_part = file.file_name().to_string_lossy().ends_with(".part");
            let is_file = file
                .file_type()
                .map(|t| t.is_file() || t.is_symlink())
                .unwrap_or(false);
            if is_file && (old || is_part) && std::fs::remove_file(file.path()).is_ok() {
                removed += 1;
            }
        }
        // Only an empty folder goes.
        let _ = std::fs::remove_dir(day.path());
    }
    removed
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
