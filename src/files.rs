//! Files the tool reads from the user and writes for the user, with the two promises every such file
//! gets: what is read is a regular file of a stated size at most (a device, a FIFO or a runaway file is
//! refused before it is read), and what is written replaces its target whole or not at all (a
//! temporary file in the target's folder, fsync, rename; on failure the old file is untouched, no
//! temporary is left, and the error names the path).
//!
//! Symbolic links: a target that is a symbolic link is refused, not followed and not replaced. Writing
//! through a link would let a planted link aim an export at any file the user can write; replacing the
//! link would silently turn it into a file. The error says so and names the path to give instead.

use crate::fault::{Classify, Fault};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// A file that could not be read or written. [`FileError::is_input`] tells what the user gave (a
/// device, a file too large, a link) from what the machine did (a full disk, a permission).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{}: not a regular file (a device, a FIFO or a folder cannot be read here)", shown(.0))]
    NotRegular(PathBuf),
    /// Where a file was to be written stands something that is not one.
    #[error(
        "{}: not a regular file (a device, a FIFO or a folder is never written over: give a file's path)",
        shown(.0)
    )]
    NotAFileToWrite(PathBuf),
    #[error("{}: larger than the {} allowed for {what}", shown(path), size(*limit))]
    TooLarge {
        path: PathBuf,
        limit: u64,
        what: &'static str,
    },
    #[error("{}:{line}:1: a line longer than the {} allowed for {what}", shown(path), size(*limit))]
    LineTooLong {
        path: PathBuf,
        line: usize,
        limit: u64,
        what: &'static str,
    },
    #[error("{}:{line}:{column}: not UTF-8 text", shown(path))]
    NotUtf8 { path: PathBuf, line: usize, column: usize },
    #[error(
        "{}: is a symbolic link; not written (links are never followed or replaced: give the path of the file it points to)",
        shown(.0)
    )]
    Symlink(PathBuf),
    /// An output the user named is, or would be, a file the workbench keeps (a session's journal, a
    /// scale, a model): writing over it would lose what it holds, a new one would be read as its own.
    #[error(
        "{}: is in a folder the workbench keeps its own files in ({}); not written: give a path outside it",
        shown(path),
        shown(folder)
    )]
    OwnFile { path: PathBuf, folder: PathBuf },
    /// An output the user named is the config file the workbench reads (every command after
    /// would stop at it).
    #[error("{}: is the workbench's config file; not written: give another path", shown(.0))]
    ConfigFile(PathBuf),
    /// An output the user named is in a folder that does not exist (a mistyped path).
    #[error("{}: the folder {} does not exist; nothing written (create it first)", shown(path), shown(folder))]
    NoFolder { path: PathBuf, folder: PathBuf },
    /// An output the user named is under a path that is a file, not a folder.
    #[error("{}: {} is a file, not a folder; nothing written", shown(path), shown(folder))]
    FileAsFolder { path: PathBuf, folder: PathBuf },
    // `error`, not `source`: the message says it already, and a `source` would print it twice.
    #[error("cannot read {}: {error}", shown(path))]
    Read { path: PathBuf, error: std::io::Error },
    #[error("cannot write {}: {error}", shown(path))]
    Write { path: PathBuf, error: std::io::Error },
}

impl Classify for FileError {
    /// The user's input (exit 2) or the machine (exit 1). A file that is
    /// not there was named by the user.
    fn fault(&self) -> Fault {
        let input = match self {
            FileError::Read { error, .. } => error.kind() == std::io::ErrorKind::NotFound,
            FileError::Write { .. } => false,
            FileError::NotRegular(_)
            | FileError::NotAFileToWrite(_)
            | FileError::TooLarge { .. }
            | FileError::LineTooLong { .. }
            | FileError::NotUtf8 { .. }
            | FileError::Symlink(_)
            | FileError::OwnFile { .. }
            | FileError::ConfigFile(_)
            | FileError::NoFolder { .. }
            | FileError::FileAsFolder { .. } => true,
        };
        if input { Fault::Input } else { Fault::Machine }
    }
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// The column serde_json says `text` broke at, from 1 and in characters as every `file:line:column`
/// here is: serde_json counts bytes (a line of Chinese text would be placed far past its end) and
/// says 0 when it broke before a line's first character (an empty file, a blank line).
pub fn json_column(text: &str, e: &serde_json::Error) -> usize {
    let line = text.split('\n').nth(e.line().saturating_sub(1)).unwrap_or("");
    match e.column() {
        0 => 1,
        column => char_column(line, column - 1),
    }
}

/// `file:line:column: message` for JSON in `text` (read from `file`) that serde_json refused.
pub fn json_error(file: &Path, text: &str, e: &serde_json::Error) -> String {
    format!("{}:{}:{}: {}", file.display(), e.line(), json_column(text, e), json_message(e))
}

/// The 1-based column, in characters, of the character holding the byte at (0-based) `byte` of
/// `line` (past its end: the column after its last character).
pub fn char_column(line: &str, byte: usize) -> usize {
    crate::domain::diagnostic::Source::new("", line).line_col(byte).1
}

/// serde_json's message without its own " at line L column C", for errors that name the place
/// themselves as `file:line:column`.
pub fn json_message(e: &serde_json::Error) -> String {
    let message = e.to_string();
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message,
    }
}

/// A size for people: `64 MiB`, `512 KiB`, `100 bytes`.
pub fn size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// Checks that `path` is a regular file (a link to one is read as it) of at most `limit` bytes,
/// before anything is read from it.
pub fn check_readable(path: &Path, limit: u64, what: &'static str) -> Result<u64, FileError> {
    let meta = std::fs::metadata(path).map_err(|error| FileError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    if !meta.is_file() {
        return Err(FileError::NotRegular(path.to_path_buf()));
    }
    if meta.len() > limit {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            limit,
            what,
        });
    }
    Ok(meta.len())
}

/// `path` opened for reading, if it is a regular file (a link to one is read as it): a FIFO would
/// block the open until something wrote to it, a device would never end.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    refuse_irregular(path)?;
    std::fs::File::open(path)
}

/// An error if `path` is there and is not a regular file (a folder, a FIFO, a device, a socket).
pub fn refuse_irregular(path: &Path) -> std::io::Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        )),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The bytes of the regular file `path`, at most `limit` of them (checked before reading, and again
/// while reading, for a file that grows meanwhile).
pub fn read_limited(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, FileError> {
    let len = check_readable(path, limit, what)?;
    let read_error = |error| FileError::Read {
        path: path.to_path_buf(),
        error,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(read_error)?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            limit,
            what,
        });
    }
    Ok(bytes)
}

/// The text of the regular file `path` (UTF-8, at most `limit` bytes); bad UTF-8 is located.
pub fn read_text_limited(path: &Path, limit: u64, what: &'static str) -> Result<String, FileError> {
    utf8_text(path, read_limited(path, limit, what)?)
}

/// The bytes read from `path` as text; bad UTF-8 is located.
pub fn utf8_text(path: &Path, bytes: Vec<u8>) -> Result<String, FileError> {
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
        let start = valid.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&valid[start..]).chars().count() + 1;
        FileError::NotUtf8 {
            path: path.to_path_buf(),
            line,
            column,
        }
    })
}

/// The lines of `reader` (without their newline, a `\r` before it kept), each at most `max_line`
/// bytes; a longer line is an error naming `path:line`, found without holding more than `max_line`
/// bytes of it. The last line's flag says whether it ended in a newline (a torn write does not).
pub fn lines_limited(
    reader: impl Read,
    path: &Path,
    max_line: u64,
    what: &'static str,
) -> impl Iterator<Item = Result<(usize, Vec<u8>, bool), FileError>> {
    let mut reader = std::io::BufReader::new(reader);
    let path = path.to_path_buf();
    let mut number = 0;
    let mut done = false;
    std::iter::from_fn(move || {
        use std::io::BufRead;
        if done {
            return None;
        }
        number += 1;
        let mut line = Vec::new();
        let read = (&mut reader).take(max_line + 1).read_until(b'\n', &mut line);
        match read {
            Err(error) => {
                done = true;
                Some(Err(FileError::Read {
                    path: path.clone(),
                    error,
                }))
            }
            Ok(0) => {
                done = true;
                None
            }
            Ok(_) => {
                let ended = line.last() == Some(&b'\n');
                if ended {
                    line.pop();
                }
                if line.len() as u64 > max_line {
                    done = true;
                    return Some(Err(FileError::LineTooLong {
                        path: path.clone(),
                        line: number,
                        limit: max_line,
                        what,
                    }));
                }
                Some(Ok((number, line, ended)))
            }
        }
    })
}

/// Where the workbench keeps files of its own, which an output the user names never replaces: the
/// data dir's [`OWN_FOLDERS`], and the sample sessions' folder when it is elsewhere (all of it).
#[derive(Debug, Clone, Default)]
pub struct Kept {
    pub data_dir: Option<PathBuf>,
    /// The config file the workbench reads.
    pub config: Option<PathBuf>,
    pub samples: Option<PathBuf>,
    /// Whether the output is a prompt set, whose place is a folder of the data dir's `prompts`.
    pub prompt_set: bool,
}

/// Writes an output the user named (`-o`): as [`write_atomic`], but never over a file the
/// workbench keeps (an export aimed at a session's journal would replace its answers).
pub fn write_output(path: &Path, bytes: &[u8], kept: &Kept) -> Result<(), FileError> {
    check_output(path, kept)?;
    write_atomic(path, bytes)
}

/// Whether an output the user named (`-o`) may be written: not in one of the workbench's folders
/// ([`not_own`]), and in a folder that exists — the data dir's `exports`, made when it is wanted as
/// the workbench makes it, aside.
pub fn check_output(path: &Path, kept: &Kept) -> Result<(), FileError> {
    // `out/` names a folder, never a file to write.
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
        return Err(FileError::NotAFileToWrite(path.to_path_buf()));
    }
    not_own(path, kept)?;
    let exports = kept.data_dir.as_deref().and_then(resolved).map(|d| d.join("exports"));
    let into_exports = exports.is_some_and(|e| path.parent().and_then(resolved) == Some(e));
    match into_exports {
        true => Ok(()),
        false => folder_exists(path),
    }
}

/// The data dir's folders the workbench reads and writes its own files in: an output never goes
/// there. (Its `exports` and any folder of the user's own are the user's.)
pub const OWN_FOLDERS: [&str; 9] = [
    "sessions",
    "characters",
    "scales",
    "models",
    "cache",
    "logs",
    "prompts",
    "rolebench",
    "samples",
];

/// Refuses an output `path` whose folder does not exist: a mistyped folder is said, not made.
pub fn folder_exists(path: &Path) -> Result<(), FileError> {
    let folder = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let (path, folder) = (path.to_path_buf(), folder.to_path_buf());
    match std::fs::metadata(&folder) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(FileError::FileAsFolder { path, folder }),
        // A file further up (a/b/c where a is a file) is as much in the way.
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            let file = folder.ancestors().find(|a| a.is_file()).map(Path::to_path_buf);
            Err(FileError::FileAsFolder {
                path,
                folder: file.unwrap_or(folder),
            })
        }
        Err(_) => Err(FileError::NoFolder { path, folder }),
    }
}

/// `path` with links resolved as far as it exists, the rest (a file or folders not made yet)
/// appended as written, `..` taken lexically.
fn resolved(path: &Path) -> Option<PathBuf> {
    let path = std::path::absolute(path).ok()?;
    let mut rest = Vec::new();
    let mut at = path.as_path();
    loop {
        if let Ok(found) = std::fs::canonicalize(at) {
            let mut out = found;
            for part in rest.iter().rev() {
                match part {
                    std::path::Component::ParentDir => {
                        out.pop();
                    }
                    std::path::Component::CurDir => {}
                    other => out.push(other.as_os_str()),
                }
            }
            return Some(out);
        }
        rest.push(at.components().next_back()?);
        at = at.parent()?;
    }
}

/// Refuses `path` when it is, or would be, a file the workbench keeps: one in the sample sessions'
/// folder, or in one of the data dir's [`OWN_FOLDERS`] (links resolved on both sides, a file or
/// folders not made yet too). The data dir's `exports` folder, folders of the user's own and files
/// beside them are the user's. The data dir is also recognised by its identity on disk (device and
/// inode) among the path's folders, so a second way to it that no link resolves (a bind mount) leads
/// to the same refusal.
pub fn not_own(path: &Path, kept: &Kept) -> Result<(), FileError> {
    let Some(file) = resolved(path) else {
        return Ok(());
    };
    let refused = |folder: PathBuf| {
        Err(FileError::OwnFile {
            path: path.to_path_buf(),
            folder,
        })
    };
    // The config file, by its path (links resolved) or as the same file on disk (a hard link).
    if let Some(config) = &kept.config {
        let same_file = |a: &Path, b: &Path| {
            use std::os::unix::fs::MetadataExt;
            match (std::fs::metadata(a), std::fs::metadata(b)) {
                (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
                _ => false,
            }
        };
        if resolved(config).as_deref() == Some(file.as_path()) || same_file(config, path) {
            return Err(FileError::ConfigFile(path.to_path_buf()));
        }
    }
    let samples = kept.samples.as_deref().and_then(resolved);
    if let Some(samples) = &samples
        && file.starts_with(samples)
    {
        return refused(samples.clone());
    }
    let dir = kept.data_dir.as_deref().and_then(resolved);
    // The own folder `inside` (a path within the data dir) is in, when it is in one.
    let own = |inside: &Path| -> Option<PathBuf> {
        let mut parts = inside.components();
        let folder = parts.next()?.as_os_str();
        let kept_folder = OWN_FOLDERS.iter().any(|own| folder == *own) && !(kept.prompt_set && folder == "prompts");
        (parts.next().is_some() && kept_folder).then(|| PathBuf::from(folder))
    };
    if let Some(dir) = &dir
        && let Some(folder) = file.strip_prefix(dir).ok().and_then(own)
    {
        return refused(dir.join(folder));
    }
    // By the folders' identity on disk too: a second way to one of them (a bind mount of the data
    // dir, of one of its own folders or of a session's; of the samples or of one sample) that no
    // link resolves.
    let Some(identity) = identity() else {
        return Ok(());
    };
    let ancestors: Vec<(&Path, (u64, u64))> = file
        .ancestors()
        .skip(1)
        .filter_map(|a| Some((a, identity(a)?)))
        .collect();
    if let Some(dir) = &dir
        && let Some(id) = identity(dir)
        && let Some(folder) = ancestors
            .iter()
            .filter(|(_, i)| *i == id)
            .find_map(|(a, _)| file.strip_prefix(a).ok().and_then(own))
    {
        return refused(dir.join(folder));
    }
    // Folders kept whole, and the folders in them (a session's, its annotations'): the samples; the
    // data dir's own folders (the cache's shards aside: many, and only the cache reads them).
    let mut whole: Vec<PathBuf> = Vec::new();
    if let Some(samples) = &samples {
        folders_within(samples, KEPT_DEPTH, &mut whole);
    }
    if let Some(dir) = &dir {
        for own in OWN_FOLDERS.into_iter().filter(|own| !(kept.prompt_set && *own == "prompts")) {
            folders_within(&dir.join(own), if own == "cache" { 0 } else { KEPT_DEPTH }, &mut whole);
        }
    }
    let whole: std::collections::HashSet<(u64, u64)> = whole.iter().filter_map(|f| identity(f)).collect();
    match ancestors.iter().find(|(_, i)| whole.contains(i)) {
        Some((a, _)) => refused(a.to_path_buf()),
        None => Ok(()),
    }
}

/// How deep the folders of a kept folder are told by their identity: a session, its annotations and
/// anything one level below.
const KEPT_DEPTH: usize = 3;

/// `folder` and the folders in it down to `depth` levels (links not followed), into `out`.
fn folders_within(folder: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if !std::fs::symlink_metadata(folder).is_ok_and(|m| m.is_dir()) {
        return;
    }
    out.push(folder.to_path_buf());
    if depth == 0 {
        return;
    }
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            folders_within(&entry.path(), depth - 1, out);
        }
    }
}

/// A folder's identity on disk: device and inode.
type Identity = fn(&Path) -> Option<(u64, u64)>;

/// How to tell a folder's [`Identity`] (`None` where that is not known).
#[cfg(unix)]
fn identity() -> Option<Identity> {
    use std::os::unix::fs::MetadataExt;
    Some(|folder: &Path| std::fs::metadata(folder).ok().filter(|m| m.is_dir()).map(|m| (m.dev(), m.ino())))
}

#[cfg(not(unix))]
fn identity() -> Option<Identity> {
    None
}

/// Writes `bytes` to `path` whole or not at all: a temporary file in the target's folder, fsync,
/// rename (see the module's paragraph for links). A new file gets mode 0644, a replaced one keeps
/// its mode.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    // A write of several files killed in this folder is undone first: this one is not undone by it.
    recover(folder_of(path));
    let tmp = staged(path, bytes)?;
    tmp.persist(path).map_err(|e| FileError::Write {
        path: path.to_path_buf(),
        error: e.error,
    })?;
    sync_folder(path);
    // What writes killed before this one left there (staged copies, whole or not).
    remove_abandoned(folder_of(path));
    Ok(())
}

/// Writes a new file `path` holding `bytes` whole, or nothing: as [`write_atomic`], but an existing
/// `path` is never replaced (its error kind is `AlreadyExists`).
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    recover(folder_of(path));
    let tmp = staged(path, bytes)?;
    tmp.persist_noclobber(path).map_err(|e| FileError::Write {
        path: path.to_path_buf(),
        error: e.error,
    })?;
    sync_folder(path);
    Ok(())
}

/// What [`write_all_or_none`] does to one file: write these bytes, or remove it (`None`).
pub type Change<'a> = (PathBuf, Option<&'a [u8]>);

/// Writes (or removes) several files that only make sense together — all of them or none. Every
/// new content is first written beside its target and synced, so a refused target (a link, a folder)
/// or a full disk changes nothing; then each old file is kept aside (a second link to it, so the
/// target never goes missing) and its new content renamed over it; a failure there puts every old
/// file back. The files are of one folder: while they change, an undo record there names each
/// change, so that a kill in between leaves it, and the next write in that folder (or [`recover`])
/// puts every old file back. Removing the record makes the write final; the kept copies are removed
/// last.
pub fn write_all_or_none(changes: &[Change<'_>]) -> Result<(), FileError> {
    let Some((first, _)) = changes.first() else {
        return Ok(());
    };
    let folder = folder_of(first);
    if let Some((apart, _)) = changes.iter().find(|(path, _)| folder_of(path) != folder) {
        return Err(FileError::Write {
            path: apart.clone(),
            error: std::io::Error::other(format!("not in {}, where the files written with it are", folder.display())),
        });
    }
    recover(folder);
    let mut prepared = Vec::new();
    for (path, bytes) in changes {
        let tmp = match bytes {
            Some(bytes) => Some(staged(path, bytes)?),
            None => {
                target_permissions(path)?;
                None
            }
        };
        prepared.push((path.as_path(), tmp));
    }
    let write_error = |path: &Path| {
        let path = path.to_path_buf();
        move |error| FileError::Write { path, error }
    };
    let mut record = undo::Undo::begin(folder).map_err(write_error(first))?;
    let mut done: Vec<(&Path, Option<tempfile::TempPath>, bool)> = Vec::new();
    let mut failed = None;
    for (index, (path, tmp)) in prepared.into_iter().enumerate() {
        let new = changes[index].1.map(undo::stamp_of);
        let before = |old: Option<&Path>| record.record(path, old, new.as_ref());
        match failing_swap(index, path).and_then(|()| swap_in(path, tmp, before)) {
            Ok((old, placed)) => done.push((path, old, placed)),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
        #[cfg(test)]
        if KILL_AFTER_SWAP.with(std::cell::Cell::get) == Some(index) {
            // As a kill leaves it: the kept copies and the record stay, its lock released with its file.
            for (_, old, _) in done {
                if let Some(old) = old {
                    let _ = old.keep();
                }
            }
            drop(record);
            return Ok(());
        }
    }
    let failed = match failed {
        None => record.commit().err().map(write_error(first)),
        failed => failed,
    };
    if let Some(e) = failed {
        let whole = done
            .into_iter()
            .rev()
            .fold(true, |whole, (path, old, placed)| put_back(path, old, placed) && whole);
        if whole {
            record.discard();
        }
        return Err(e);
    }
    for (path, old, _) in done {
        drop(old);
        sync_folder(path);
        remove_abandoned(folder_of(path));
    }
    Ok(())
}

#[cfg(test)]
thread_local! {
    /// The swap of [`write_all_or_none`] that fails in a test (by its index).
    static FAIL_SWAP: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
    /// The swap of [`write_all_or_none`] after which a test's process is as if killed.
    static KILL_AFTER_SWAP: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// The failure a test asks of swap `index`, as a rename can fail (the target's folder gone, a disk
/// error); none outside tests.
fn failing_swap(index: usize, path: &Path) -> Result<(), FileError> {
    #[cfg(test)]
    if FAIL_SWAP.with(std::cell::Cell::get) == Some(index) {
        return Err(FileError::Write {
            path: path.to_path_buf(),
            error: std::io::Error::other("the test's failure"),
        });
    }
    let _ = (index, path);
    Ok(())
}

/// Undoes [`swap_in`]: the old file back at `path` (over the new one), or the new one removed where
/// there was none. An old file that cannot be put back stays where it was kept, and the log says so;
/// returns whether it was put back.
fn put_back(path: &Path, old: Option<tempfile::TempPath>, placed: bool) -> bool {
    match old {
        Some(old) => match old.persist(path) {
            Ok(()) => true,
            Err(e) => {
                let kept = e.path.keep().ok();
                tracing::error!(path = %path.display(), kept = ?kept, error = %e.error, "could not put the old file back");
                false
            }
        },
        None if placed => std::fs::remove_file(path).is_ok(),
        None => true,
    }
}

/// Keeps `path`'s file aside (returned, removed when dropped) and renames `tmp` over it (`placed`),
/// or removes it (no `tmp`). `before` is told where the old file is kept (none: there is none)
/// before the target changes; an error from it changes nothing.
fn swap_in(
    path: &Path,
    tmp: Option<tempfile::NamedTempFile>,
    mut before: impl FnMut(Option<&Path>) -> std::io::Result<()>,
) -> Result<(Option<tempfile::TempPath>, bool), FileError> {
    let write_error = |error| FileError::Write {
        path: path.to_path_buf(),
        error,
    };
    // (`to_move`: kept by moving it aside, over a placeholder, once `before` has been told; `told`:
    // `before` was told of the second link before it was made.)
    let mut told = false;
    let (old, to_move) = match std::fs::symlink_metadata(path) {
        Ok(_) => {
            let kept = tempfile::Builder::new()
                .prefix(".incharacter-")
                .suffix(".old")
                .make_in(folder_of(path), |aside| {
                    before(Some(aside))?;
                    told = true;
                    std::fs::hard_link(path, aside)
                });
            match kept {
                Ok(linked) => (Some(linked.into_temp_path()), false),
                // A filesystem without hard links: the old file is moved aside instead.
                Err(_) => {
                    let aside = tempfile::Builder::new()
                        .prefix(".incharacter-")
                        .suffix(".old")
                        .tempfile_in(folder_of(path))
                        .map_err(|e| write_error(unnamed(e)))?
                        .into_temp_path();
                    (Some(aside), true)
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, false),
        Err(e) => return Err(write_error(e)),
    };
    let mut moved = false;
    let told = if told && !to_move { Ok(()) } else { before(old.as_deref()) };
    let result = told.and_then(|()| {
        if let (true, Some(aside)) = (to_move, &old) {
            std::fs::rename(path, aside)?;
            moved = true;
        }
        match tmp {
            Some(tmp) => tmp.persist(path).map(|_| true).map_err(|e| e.error),
            None if old.is_some() && !moved => std::fs::remove_file(path).map(|_| false),
            None => Ok(false),
        }
    });
    match result {
        Ok(placed) => Ok((old, placed)),
        Err(error) => {
            // The target is as it was, but for an old file moved aside: that goes back.
            if moved {
                put_back(path, old, false);
            }
            Err(write_error(error))
        }
    }
}

/// The folder a file is written in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// The permissions of the file at `path` to keep (`None`: no file there yet); a link or something
/// that is not a file is refused.
fn target_permissions(path: &Path) -> Result<Option<std::fs::Permissions>, FileError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(FileError::Symlink(path.to_path_buf())),
        Ok(meta) if !meta.is_file() => Err(FileError::NotAFileToWrite(path.to_path_buf())),
        Ok(meta) => Ok(Some(meta.permissions())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(FileError::Write {
            path: path.to_path_buf(),
            error: e,
        }),
    }
}

/// How old a staged file must be to count as abandoned: a write takes a moment, not an hour.
const ABANDONED: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes from `dir` the staged files (`.incharacter-*.tmp`) that a killed write left behind: those
/// older than an hour. They never hold the only copy of anything (the target keeps its old content
/// until the staged file is renamed over it). Kept old files (`.incharacter-*.old`) an hour old go
/// too, unless the folder holds an undo record, which may need them (a kill after a write's commit
/// leaves them named by none).
pub fn remove_abandoned(dir: &Path) {
    let records = undo::any_record(dir);
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !staged_name(&name) && (records || !undo::ours(&name, "old")) {
            continue;
        }
        let old = entry
            .metadata()
            .ok()
            .filter(std::fs::Metadata::is_file)
            .and_then(|m| m.modified().ok())
            .and_then(|at| at.elapsed().ok())
            .is_some_and(|age| age > ABANDONED);
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Removes the folder `dir` when nothing in it was ever written whole: it holds only staged files
/// (`.incharacter-*.tmp`) or nothing, and neither it nor they changed for an hour (a run killed as it
/// began, between making its folder and linking its first record into place). Returns whether it
/// was removed; a folder with anything else in it, or a fresh one (a run just starting), is left.
pub fn remove_abandoned_folder(dir: &Path) -> bool {
    let abandoned = |metadata: &std::fs::Metadata| {
        metadata
            .modified()
            .ok()
            .and_then(|at| at.elapsed().ok())
            .is_some_and(|age| age > ABANDONED)
    };
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && abandoned(&m)) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut staged = Vec::new();
    for entry in entries {
        let Ok(entry) = entry else {
            return false;
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        let old_staged = staged_name(&name) && entry.metadata().is_ok_and(|m| m.is_file() && abandoned(&m));
        if !old_staged {
            return false;
        }
        staged.push(entry.path());
    }
    staged.iter().all(|path| std::fs::remove_file(path).is_ok()) && std::fs::remove_dir(dir).is_ok()
}

/// Whether `name` is one [`staged`] gives (`.incharacter-` and six random letters or digits before
/// `.tmp`): nothing else is removed as one.
fn staged_name(name: &str) -> bool {
    undo::ours(name, "tmp")
}

/// `bytes` in a synced temporary file beside `path`, with the mode `path` will have; `path` itself
/// untouched. Dropping it removes it.
/// A temporary file's error without the temporary's name, which tempfile adds ("at path
/// .../.incharacter-6z23HN.tmp") and which names a file that never came to exist: the message is the
/// target's.
pub fn unnamed(error: std::io::Error) -> std::io::Error {
    // Its type is private to tempfile: only its words say where the path begins.
    let text = error.to_string();
    let Some(at) = text.rfind(" at path ") else {
        return error;
    };
    let said = &text[..at];
    let code = said
        .rsplit_once("(os error ")
        .and_then(|(_, n)| n.strip_suffix(')'))
        .and_then(|n| n.parse::<i32>().ok());
    match code {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::new(error.kind(), said),
    }
}

fn staged(path: &Path, bytes: &[u8]) -> Result<tempfile::NamedTempFile, FileError> {
    let write_error = |error| FileError::Write {
        path: path.to_path_buf(),
        error,
    };
    let existing = target_permissions(path)?;
    let dir = folder_of(path);
    std::fs::create_dir_all(dir).map_err(write_error)?;
    // Dropped on any error below, which removes the temporary.
    let mut tmp = tempfile::Builder::new()
        .prefix(".incharacter-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| write_error(unnamed(e)))?;
    tmp.as_file_mut().write_all(bytes).map_err(write_error)?;
    tmp.as_file().sync_all().map_err(write_error)?;
    if let Some(permissions) = existing.or_else(new_file_permissions) {
        tmp.as_file().set_permissions(permissions).map_err(write_error)?;
    }
    Ok(tmp)
}

/// The rename itself is durable once the folder is synced (not possible on every system).
fn sync_folder(path: &Path) {
    if let Ok(folder) = std::fs::File::open(folder_of(path)) {
        let _ = folder.sync_all();
    }
}

/// The mode of a new file: 0644, as the user's other files, not the temporary's 0600.
#[cfg(unix)]
fn new_file_permissions() -> Option<std::fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    Some(std::fs::Permissions::from_mode(0o644))
}

#[cfg(not(unix))]
fn new_file_permissions() -> Option<std::fs::Permissions> {
    None
}

#[cfg(test)]
mod tests;
mod undo;

pub use undo::{recover, stale};
