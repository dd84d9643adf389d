//! The undo record of [`super::write_all_or_none`]: what a write of several files of one folder
//! changed, kept in that folder while it changes them, so that a process killed in the middle leaves a
//! way back. It names, in order, each target, where its old content was kept (none: there was no
//! file) and the file its new content came in, all by name in the record's own folder; it is locked
//! while its writer lives. A record that no live process holds is of a write that never finished:
//! [`recover`] puts every target it changed back, and removes it. Removing the record is what commits
//! the write.
//!
//! A record is trusted no further than its folder: a target is a plain name there, a kept copy one of
//! this module's `.incharacter-XXXXXX.old` names, and a record file that is not a regular file, or was
//! renamed or removed while it was being locked, is not read.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What tells the write's new content from any other: its length and SHA-256 (hex). Content, not an
/// inode: a data dir copied or restored elsewhere keeps it, and a later write of other content does
/// not pass for it.
pub(super) type Stamp = (u64, String);

/// The stamp of `bytes`.
pub(super) fn stamp_of(bytes: &[u8]) -> Stamp {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(bytes);
    (bytes.len() as u64, digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// The stamp of the file (not a link's target) at `path`: `None` where there is none, `Some(None)`
/// where it cannot be read (a folder, a file larger than any write of ours).
fn stamp_at(path: &Path) -> Option<Option<Stamp>> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_COMPARED {
        return Some(None);
    }
    Some(std::fs::read(path).ok().map(|b| stamp_of(&b)))
}

/// The largest target compared by content (a memories file may hold 128 MiB).
const MAX_COMPARED: u64 = 256 * 1024 * 1024;

/// One target of the write, as recorded before it changed: names in the record's folder.
#[derive(Serialize, Deserialize)]
struct Entry {
    target: Name,
    /// Where its old content is kept; none: it had none.
    old: Option<Name>,
    /// The file its new content came in; none: the target was to be removed.
    new: Option<NewFile>,
}

#[derive(Serialize, Deserialize)]
struct NewFile {
    stamp: Stamp,
}

/// A file name as its bytes (hex): exact whatever the name holds.
#[derive(Serialize, Deserialize)]
struct Name(String);

impl Name {
    fn of(path: &Path) -> Name {
        let name = path.file_name().map(name_bytes).unwrap_or_default();
        Name(name.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The name, if it is one a record may hold: a plain name, neither `.` nor `..`.
    fn get(&self) -> Option<std::ffi::OsString> {
        let bytes = (0..self.0.len())
            .step_by(2)
            .map(|i| self.0.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
            .collect::<Option<Vec<u8>>>()?;
        let plain = !bytes.is_empty() && !bytes.contains(&b'/') && !bytes.contains(&0) && bytes != b"." && bytes != b"..";
        plain.then(|| name_of(bytes))
    }
}

#[cfg(unix)]
fn name_bytes(name: &std::ffi::OsStr) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    name.as_bytes().to_vec()
}

#[cfg(unix)]
fn name_of(bytes: Vec<u8>) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStringExt;
    std::ffi::OsString::from_vec(bytes)
}

#[cfg(not(unix))]
fn name_bytes(name: &std::ffi::OsStr) -> Vec<u8> {
    name.to_string_lossy().into_owned().into_bytes()
}

#[cfg(not(unix))]
fn name_of(bytes: Vec<u8>) -> std::ffi::OsString {
    String::from_utf8_lossy(&bytes).into_owned().into()
}

/// The record of a write going on, locked until it is committed or dropped.
pub(super) struct Undo {
    file: File,
    path: PathBuf,
}

impl Undo {
    /// A new record in `folder`, locked before it takes its name there (so that no one reads it
    /// unlocked) and durable before anything changes.
    pub(super) fn begin(folder: &Path) -> io::Result<Undo> {
        loop {
            let (file, new) = tempfile::Builder::new()
                .prefix(".incharacter-")
                .suffix(".undo-new")
                .tempfile_in(folder)?
                .keep()
                .map_err(|e| e.error)?;
            file.lock()?;
            // (The name is ours and ASCII; the folder's is kept as it is, UTF-8 or not.)
            let name = new.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let path = new.with_file_name(name.trim_end_matches("-new"));
            // A second name for the same file, refused where another record has it (renamed, on a
            // filesystem without hard links).
            match std::fs::hard_link(&new, &path) {
                Ok(()) => {
                    let _ = std::fs::remove_file(&new);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let _ = std::fs::remove_file(&new);
                    continue;
                }
                Err(_) => std::fs::rename(&new, &path)?,
            }
            super::sync_folder(&path);
            return Ok(Undo { file, path });
        }
    }

    /// Records that `target` (in the record's folder) is about to change: its old content is to be
    /// kept at `old` (none: it has none), its new content comes in the file `new` (none: it is
    /// removed). Synced before it returns.
    pub(super) fn record(&mut self, target: &Path, old: Option<&Path>, new: Option<&Stamp>) -> io::Result<()> {
        let entry = Entry {
            target: Name::of(target),
            old: old.map(Name::of),
            new: new.map(|stamp| NewFile { stamp: stamp.clone() }),
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

/// `.incharacter-XXXXXX.<suffix>`, as this module and the staging name their files.
pub(super) fn ours(name: &str, suffix: &str) -> bool {
    let random = name
        .strip_prefix(".incharacter-")
        .and_then(|n| n.strip_suffix(suffix))
        .and_then(|n| n.strip_suffix('.'));
    random.is_some_and(|r| r.len() == 6 && r.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Whether `folder` holds a record: its kept copies may be needed.
pub(super) fn any_record(folder: &Path) -> bool {
    records(folder).next().is_some()
}

/// The records in `folder`, held or not.
fn records(folder: &Path) -> impl Iterator<Item = PathBuf> {
    std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| ours(&e.file_name().to_string_lossy(), "undo"))
        .map(|e| e.path())
}

/// The records left in `folder` that no live process holds: writes killed in the middle that
/// [`recover`] could not undo (a folder it may not write, say). What they changed may be half
/// written; the catalog says so.
pub fn stale(folder: &Path) -> Vec<PathBuf> {
    records(folder)
        .filter(|path| File::open(path).is_ok_and(|f| f.try_lock_shared().is_ok()))
        .collect()
}

/// How long a reader waits for a write going on in the folder to end before it reads anyway.
const WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Puts back what writes killed in the middle changed, for every record in `folder` that no live
/// process holds: each target back to its old content (or removed, where it had none), in the
/// reverse order of the changes, then the record removed. A target that holds neither its old
/// content nor the write's new one was written since, and is left as it is. Returns the targets put
/// back. Cheap where there is nothing to do (one listing of the folder).
pub fn recover(folder: &Path) -> Vec<PathBuf> {
    let mut restored = Vec::new();
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // A record its writer never named (killed before its first change): nothing to undo.
        if ours(&name, "undo-new") {
            if let Ok(file) = File::open(entry.path())
                && file.try_lock().is_ok()
            {
                let _ = std::fs::remove_file(entry.path());
            }
            continue;
        }
        if !ours(&name, "undo") {
            continue;
        }
        let path = entry.path();
        let Some(file) = held_by_none(&path) else {
            continue;
        };
        let mut text = String::new();
        if (&file).take(MAX_RECORD).read_to_string(&mut text).is_err() {
            continue;
        }
        // A line cut by the kill is of a change that had not begun.
        let entries: Vec<Entry> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let mut whole = true;
        for e in entries.iter().rev() {
            match undo(folder, e) {
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

/// The record at `path`, locked, when it is a regular file that no live process holds and still the
/// file of that name once locked (a writer that committed meanwhile has removed it). A write going
/// on is waited for (a few milliseconds, as a rule; [`WAIT`] at most).
fn held_by_none(path: &Path) -> Option<File> {
    std::fs::symlink_metadata(path).ok().filter(std::fs::Metadata::is_file)?;
    let file = OpenOptions::new().read(true).open(path).ok()?;
    let until = std::time::Instant::now() + WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(_) => return None,
        }
    }
    // Still the file of that name: the same inode, linked.
    let locked = file.metadata().ok()?;
    let now = std::fs::symlink_metadata(path).ok()?;
    same_file(&locked, &now).then_some(file)
}

#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.nlink() > 0 && (a.dev(), a.ino()) == (b.dev(), b.ino())
}

#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    false
}

/// Undoes one change; returns the target if it was put back.
fn undo(folder: &Path, e: &Entry) -> io::Result<Option<PathBuf>> {
    let Some(target) = e.target.get().map(|n| folder.join(n)) else {
        return Ok(None);
    };
    // A kept copy is one of ours, or the entry is not followed.
    let old = match &e.old {
        None => None,
        Some(name) => match name.get().filter(|n| ours(&n.to_string_lossy(), "old")) {
            Some(n) => Some(folder.join(n)),
            None => return Ok(None),
        },
    };
    let now = stamp_at(&target);
    let new_in_place = match (&now, e.new.as_ref().map(|n| &n.stamp)) {
        (Some(now), Some(new)) => now.as_ref() == Some(new),
        (Some(_), None) => false,
        // Removed by the write (or moved aside before its new content came): back, if kept.
        (None, _) => true,
    };
    let put_back = match &old {
        Some(old) if new_in_place && stamp_at(old).is_some() => {
            std::fs::rename(old, &target)?;
            true
        }
        None if new_in_place && now.is_some() => {
            std::fs::remove_file(&target)?;
            true
        }
        _ => false,
    };
    if let Some(old) = old.filter(|o| stamp_at(o).is_some() && !put_back) {
        let _ = std::fs::remove_file(old);
    }
    if put_back {
        super::sync_folder(&target);
    }
    Ok(put_back.then_some(target))
}
