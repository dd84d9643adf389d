//! The undo record of [`super::write_all_or_none`]: what a write of several files changed, kept on
//! disk while it changes them, so that a process killed in the middle leaves a way back. It names, in
//! order, each target, where its old content was kept (none: there was no file) and the file the new
//! content came in (by device and inode), and it is locked while its writer lives. A record that no
//! live process holds is of a write that never finished: [`recover`] puts every target it changed
//! back, and removes it. Removing the record is what commits the write.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A file's identity on disk: device and inode (`None` where that cannot be told).
type FileId = Option<(u64, u64)>;

#[cfg(unix)]
fn id_of(meta: &std::fs::Metadata) -> FileId {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn id_of(_: &std::fs::Metadata) -> FileId {
    None
}

/// The identity of the file (not a link's target) at `path`, if there is one.
fn id_at(path: &Path) -> Option<FileId> {
    std::fs::symlink_metadata(path).ok().map(|m| id_of(&m))
}

/// The identity of an open file.
pub(super) fn id_of_file(file: &File) -> FileId {
    file.metadata().ok().and_then(|m| id_of(&m))
}

/// One target of the write, as recorded before it changed.
#[derive(Serialize, Deserialize)]
struct Entry {
    target: Bytes,
    /// Where its old content was kept (a second link, or the file moved aside); none: no old file.
    old: Option<Bytes>,
    /// The file its new content came in; none: the target was to be removed.
    new: Option<FileId>,
}

/// A path as its bytes (hex): exact whatever the name holds.
#[derive(Serialize, Deserialize)]
struct Bytes(String);

impl Bytes {
    fn of(path: &Path) -> Bytes {
        Bytes(path_bytes(path).iter().map(|b| format!("{b:02x}")).collect())
    }

    fn path(&self) -> Option<PathBuf> {
        let bytes = (0..self.0.len())
            .step_by(2)
            .map(|i| self.0.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
            .collect::<Option<Vec<u8>>>()?;
        Some(path_of(bytes))
    }
}

#[cfg(unix)]
fn path_bytes(path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes().to_vec()
}

#[cfg(unix)]
fn path_of(bytes: Vec<u8>) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(bytes))
}

#[cfg(not(unix))]
fn path_bytes(path: &Path) -> Vec<u8> {
    path.to_string_lossy().into_owned().into_bytes()
}

#[cfg(not(unix))]
fn path_of(bytes: Vec<u8>) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(&bytes).into_owned())
}

/// The record of a write going on, locked until it is committed or dropped.
pub(super) struct Undo {
    file: File,
    path: PathBuf,
}

impl Undo {
    /// A new record in `folder`, durable (and locked) before anything changes.
    pub(super) fn begin(folder: &Path) -> io::Result<Undo> {
        let (file, path) = tempfile::Builder::new()
            .prefix(".incharacter-")
            .suffix(".undo")
            .tempfile_in(folder)?
            .keep()
            .map_err(|e| e.error)?;
        let undo = Undo { file, path };
        undo.file.lock()?;
        super::sync_folder(&undo.path);
        Ok(undo)
    }

    /// Records that `target` is about to change: its old content is at `old` (none: it has none),
    /// its new content comes in the file `new` (none: it is removed). Synced before it returns.
    pub(super) fn record(&mut self, target: &Path, old: Option<&Path>, new: Option<FileId>) -> io::Result<()> {
        let entry = Entry {
            target: Bytes::of(target),
            old: old.map(Bytes::of),
            new,
        };
        let mut line = serde_json::to_vec(&entry).map_err(io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.sync_data()
    }

    /// Every target changed: the record goes, which makes the write final.
    pub(super) fn commit(&self) -> io::Result<()> {
        std::fs::remove_file(&self.path)?;
        super::sync_folder(&self.path);
        Ok(())
    }

    /// The write was undone where it failed: the record goes.
    pub(super) fn discard(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The most a record can hold (thousands of targets; a larger file is not one of ours).
const MAX_RECORD: u64 = 4 * 1024 * 1024;

fn record_name(name: &str) -> bool {
    let random = name.strip_prefix(".incharacter-").and_then(|n| n.strip_suffix(".undo"));
    random.is_some_and(|r| r.len() == 6 && r.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Puts back what writes killed in the middle changed, for every record in `folder` that no live
/// process holds: each target back to its old content (or removed, where it had none), in the
/// reverse order of the changes, then the record removed. A target that holds neither its old
/// content nor the write's new one was written since, and is left as it is. Returns the targets put
/// back. Cheap where there is nothing to do (one listing of the folder).
pub fn recover(folder: &Path) -> Vec<PathBuf> {
    let mut restored = Vec::new();
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        if !record_name(&entry.file_name().to_string_lossy()) {
            continue;
        }
        let path = entry.path();
        let Ok(file) = OpenOptions::new().read(true).write(true).open(&path) else {
            continue;
        };
        // Held: its write is going on. (Released when the process holding it ends, however.)
        if file.try_lock().is_err() {
            continue;
        }
        let mut text = String::new();
        if (&file).take(MAX_RECORD).read_to_string(&mut text).is_err() {
            continue;
        }
        // A line cut by the kill is of a change that had not begun.
        let entries: Vec<Entry> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let mut whole = true;
        for e in entries.iter().rev() {
            match undo(e) {
                Ok(Some(target)) => restored.push(target),
                Ok(None) => {}
                Err(error) => {
                    whole = false;
                    tracing::error!(record = %path.display(), %error, "could not undo an interrupted write");
                }
            }
        }
        if whole {
            let _ = std::fs::remove_file(&path);
            super::sync_folder(&path);
        }
    }
    restored
}

/// Undoes one change; returns the target if it was put back.
fn undo(e: &Entry) -> io::Result<Option<PathBuf>> {
    let (Some(target), old) = (e.target.path(), e.old.as_ref().and_then(Bytes::path)) else {
        return Ok(None);
    };
    let now = id_at(&target);
    let new_in_place = match (now, e.new) {
        (Some(now), Some(new)) => now.is_some() && now == new,
        (Some(_), None) => false,
        // Removed by the write (or moved aside before its new content came): back, if kept.
        (None, _) => true,
    };
    let put_back = match &old {
        Some(old) if new_in_place && id_at(old).is_some() => {
            std::fs::rename(old, &target)?;
            true
        }
        None if new_in_place && now.is_some() => {
            std::fs::remove_file(&target)?;
            true
        }
        _ => false,
    };
    if let Some(old) = old.filter(|o| id_at(o).is_some() && !put_back) {
        let _ = std::fs::remove_file(old);
    }
    if put_back {
        super::sync_folder(&target);
    }
    Ok(put_back.then_some(target))
}
