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

/// What tells a file from any other: device, inode, size and modification time (an inode number is
/// soon used again; with the size and the time to the nanosecond, another file does not pass for
/// this one). `None` where that cannot be told (a system without inodes): such a write is never
/// undone, only its kept copies removed.
pub(super) type Stamp = Option<(u64, u64, u64, i128)>;

#[cfg(unix)]
fn stamp_of(meta: &std::fs::Metadata) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let mtime = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
    Some((meta.dev(), meta.ino(), meta.len(), mtime))
}

#[cfg(not(unix))]
fn stamp_of(_: &std::fs::Metadata) -> Stamp {
    None
}

/// The stamp of the file (not a link's target) at `path`, if there is one.
fn stamp_at(path: &Path) -> Option<Stamp> {
    std::fs::symlink_metadata(path).ok().map(|m| stamp_of(&m))
}

/// The stamp of an open file.
pub(super) fn stamp_of_file(file: &File) -> Stamp {
    file.metadata().ok().and_then(|m| stamp_of(&m))
}

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
            let path = PathBuf::from(new.to_string_lossy().trim_end_matches("-new"));
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
    pub(super) fn record(&mut self, target: &Path, old: Option<&Path>, new: Option<Stamp>) -> io::Result<()> {
        let entry = Entry {
            target: Name::of(target),
            old: old.map(Name::of),
            new: new.map(|stamp| NewFile { stamp }),
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

/// Whether `folder` holds a record, finished or being made: its kept copies may be needed.
pub(super) fn any_record(folder: &Path) -> bool {
    std::fs::read_dir(folder).into_iter().flatten().flatten().any(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        ours(&name, "undo") || ours(&name, "undo-new")
    })
}

/// Puts back what writes killed in the middle changed, for every record in `folder` that no live
/// process holds: each target back to its old content (or removed, where it had none), in the
/// reverse order of the changes, then the record removed. A target that holds neither its old
/// content nor the write's new one was written since, and is left as it is. Returns the targets put
/// back. Cheap where there is nothing to do (one listing of the folder).
pub fn recover(folder: &Path) -> Vec<PathBuf> {
    let mut restored = Vec::new();
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        if !ours(&entry.file_name().to_string_lossy(), "undo") {
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
/// file of that name once locked (a writer that committed meanwhile has removed it).
fn held_by_none(path: &Path) -> Option<File> {
    let before = std::fs::symlink_metadata(path).ok().filter(std::fs::Metadata::is_file)?;
    let file = OpenOptions::new().read(true).open(path).ok()?;
    // Held: its write is going on. (Released when the process holding it ends, however.)
    file.try_lock().ok()?;
    let locked = stamp_of_file(&file);
    let same = |stamp: Stamp| stamp.map(|(dev, ino, ..)| (dev, ino));
    let now = stamp_at(path)?;
    (locked.is_some() && same(locked) == same(now) && same(now) == same(stamp_of(&before))).then_some(file)
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
    let new_in_place = match (now, e.new.as_ref().map(|n| n.stamp)) {
        (Some(now), Some(new)) => now.is_some() && now == new,
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
