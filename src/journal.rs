//! Append-only JSONL files: a session's `journal.jsonl`, an annotator's answers. One JSON object per
//! line, flushed per record, so a crash or kill loses at most the line being written, and a torn last
//! line is ignored on load; and whole files written atomically (`results.json`, caches of imports).
//! Knows nothing of what the records mean.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A journal that cannot be read: the machine's fault (`Io`), or a file damaged by hand (`Damaged`,
/// which names the line and column).
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}:{line}:{column}: {message}", path.display())]
    Damaged {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
}

/// A journal damaged by hand is the user's to fix; one that cannot be read or written, the machine's.
impl crate::fault::Classify for JournalError {
    fn fault(&self) -> crate::fault::Fault {
        match self {
            JournalError::Damaged { .. } => crate::fault::Fault::Input,
            JournalError::Io { .. } => crate::fault::Fault::Machine,
        }
    }
}

/// Days since 1970-01-01 → (year, month, day) (Howard Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// RFC 3339 UTC timestamp of now.
pub fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let (y, m, d) = civil_from_days((now / 86_400) as i64);
    let rem = now % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Appends records to a journal, one flushed line each. It holds an OS advisory lock on the file
/// while it lives (released by the OS when the process dies, however it dies), so two processes
/// never append to one journal; readers never take the lock, so they can never make a writer fail.
pub struct Journal {
    file: File,
    pub path: PathBuf,
    /// The file beside the journal that names its writer ([`Journal::open_exclusive`]).
    writer: Option<PathBuf>,
    /// A record written only with the next one ([`Journal::defer`]).
    deferred: Option<String>,
}

/// Another process holds a journal's lock: `pid` is that process, when it said who it is.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{} is being written by another process", .path.display())]
    Busy { path: PathBuf, pid: Option<u32> },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Who writes a journal: a process, told apart from a later one with the same pid by its start.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Writer {
    pub pid: u32,
    /// When it took the journal (RFC 3339).
    pub since: String,
    /// The process's start in clock ticks since boot, where the system says (Linux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_start: Option<u64>,
}

impl Writer {
    pub(crate) fn me() -> Writer {
        let pid = std::process::id();
        Writer {
            pid,
            since: now_rfc3339(),
            process_start: process_start(pid),
        }
    }

    /// Whether the process is still the one that took the journal. Where the system cannot say
    /// (no `/proc`), no: a stale record must never make a session look busy forever, and the lock,
    /// not this record, is what keeps a second writer out.
    pub fn alive(&self) -> bool {
        match (self.process_start, process_start(self.pid)) {
            (Some(then), Some(now)) => then == now,
            _ => false,
        }
    }
}

/// A living process's start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`); `None`
/// for a process that has ended but is not yet reaped by its parent (state Z or X: killed, it writes
/// nothing more, though its record stays until the parent waits for it).
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    start_of_living(&stat)
}

fn start_of_living(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces: count after its end.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    if matches!(fields.next()?, "Z" | "X" | "x") {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// Where the writer of the journal at `path` says who it is.
pub fn writer_path(path: &Path) -> PathBuf {
    path.with_extension("writer")
}

/// The live process writing the journal at `path`, if any: its record names a process still alive,
/// and the journal's lock is held (a record copied with its folder names a process that writes
/// another journal). Only tested, never waited for.
pub fn writer(path: &Path) -> Option<Writer> {
    let text = crate::files::read_text_limited(&writer_path(path), 64 * 1024, "a journal's writer").ok()?;
    let writer = serde_json::from_str::<Writer>(&text).ok().filter(Writer::alive)?;
    let held = match std::fs::File::open(path) {
        Ok(file) => matches!(file.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock)),
        // Cannot be told: the record is believed.
        Err(_) => true,
    };
    held.then_some(writer)
}

impl Journal {
    /// Opens (or creates) a journal for appending, waiting for another writer to finish first (an
    /// annotator's answers: each append is brief). A last line torn by a crash is cut off, so the
    /// next record starts on a line of its own.
    /// A file removed or replaced while its lock was waited for is not the journal any more: the
    /// path is opened again.
    pub fn open(path: &Path) -> std::io::Result<Journal> {
        use std::os::unix::fs::MetadataExt;
        loop {
            let file = create(path)?;
            file.lock()?;
            let (held, there) = (file.metadata()?, std::fs::metadata(path));
            if there.is_ok_and(|m| m.dev() == held.dev() && m.ino() == held.ino()) {
                return Self::locked(file, path, None);
            }
        }
    }

    /// The journal's length in bytes now.
    pub fn size(&self) -> std::io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// Takes back what was appended after the journal was `len` bytes long (an import that could
    /// not be written whole).
    pub fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.file.set_len(len)?;
        self.file.sync_data()
    }

    /// Opens (or creates) a journal as its one writer: [`OpenError::Busy`] at once, touching
    /// nothing, when another process writes it. The writer's pid and start are written beside the
    /// journal ([`writer`]) until this is dropped.
    pub fn open_exclusive(path: &Path) -> Result<Journal, OpenError> {
        let file = create(path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(OpenError::Busy {
                    path: path.to_path_buf(),
                    pid: writer(path).map(|w| w.pid),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
        }
        let record = writer_path(path);
        write_bytes_atomic(
            &record,
            &serde_json::to_vec(&Writer::me()).map_err(std::io::Error::other)?,
        )?;
        Self::locked(file, path, Some(record.clone())).map_err(|e| {
            let _ = std::fs::remove_file(&record);
            e.into()
        })
    }

    /// Creates a new journal holding `first` and opens it as its one writer ([`Self::open_exclusive`]):
    /// the journal never exists without its first record, whenever the process is killed. An
    /// existing `path` is an error of kind `AlreadyExists`, left untouched.
    pub fn create_exclusive<T: Serialize>(path: &Path, first: &T) -> Result<Journal, OpenError> {
        crate::files::write_new(path, Self::line(first)?.as_bytes()).map_err(io_error)?;
        Self::open_exclusive(path)
    }

    fn locked(mut file: File, path: &Path, writer: Option<PathBuf>) -> std::io::Result<Journal> {
        let len = file.metadata()?.len();
        if len > 0 {
            let whole = whole_lines(&mut file, len)?;
            if whole < len {
                // A last record whole but for its newline (a file an editor saved) is what a read
                // takes: ended, not cut. Anything else after the last newline a write tore.
                let mut tail = Vec::new();
                {
                    use std::io::{Read, Seek, SeekFrom};
                    file.seek(SeekFrom::Start(whole))?;
                    (&mut file).take(MAX_LINE + 1).read_to_end(&mut tail)?;
                }
                if serde_json::from_slice::<serde_json::Value>(&tail).is_ok_and(|v| v.is_object()) {
                    file.write_all(b"\n")?;
                    file.flush()?;
                } else {
                    file.set_len(whole)?;
                }
            }
        }
        Ok(Journal {
            file,
            path: path.to_path_buf(),
            writer,
            deferred: None,
        })
    }

    /// Appends `record`; an object record gets `ts_ms` (Unix milliseconds) so a replay can keep the
    /// original timing.
    pub fn append<T: Serialize>(&mut self, record: &T) -> std::io::Result<()> {
        let line = Self::line(record)?;
        let before = self.file.metadata()?.len();
        let first = self.deferred.take();
        let lines = first.clone().unwrap_or_default() + &line;
        // One write per record (with a deferred one before it): an interrupted write can only tear
        // the last line, and a failed one (disk full, read-only) is taken back so the journal ends on
        // a whole line; a deferred record waits for the next append then.
        if let Err(e) = self.file.write_all(lines.as_bytes()).and_then(|_| self.file.flush()) {
            let _ = self.file.set_len(before);
            self.deferred = first;
            return Err(e);
        }
        Ok(())
    }

    /// Keeps `record` (with the time it is given) to be written just before the next appended one: a
    /// record that only means something if more follows (a resume's), so a sitting that adds nothing
    /// (a batch export that could not write its file) leaves the journal as it was.
    pub fn defer<T: Serialize>(&mut self, record: &T) -> std::io::Result<()> {
        self.deferred = Some(Self::line(record)?);
        Ok(())
    }

    pub(crate) fn line<T: Serialize>(record: &T) -> std::io::Result<String> {
        let mut value = serde_json::to_value(record)?;
        if let serde_json::Value::Object(map) = &mut value {
            map.insert("ts_ms".into(), unix_ms().into());
        }
        let mut line = serde_json::to_string(&value)?;
        line.push('\n');
        // A line the journal would not read back makes the whole session unreadable: never written.
        if line.len() as u64 > MAX_LINE {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "a record of {} is more than the {} a journal line may hold; it was not written",
                    crate::files::size(line.len() as u64),
                    crate::files::size(MAX_LINE)
                ),
            ));
        }
        Ok(line)
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        // The lock goes with the file; the record of who held it goes now (a kill leaves it, and
        // readers then find its process gone).
        if let Some(record) = &self.writer {
            let _ = std::fs::remove_file(record);
        }
    }
}

fn create(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crate::files::refuse_irregular(path)?;
    OpenOptions::new().create(true).read(true).append(true).open(path)
}

/// The length of `file` up to and including its last newline.
fn whole_lines(file: &mut File, len: u64) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut end = len;
    let mut buf = [0u8; 4096];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A record with the `ts_ms` [`Journal::append`] gave it.
#[derive(serde::Deserialize)]
struct Timed<T> {
    ts_ms: Option<u64>,
    #[serde(flatten)]
    record: T,
}

/// Reads a journal with each record's `ts_ms` (absent in journals written before it existed).
pub fn read_timed<T: DeserializeOwned>(path: &Path) -> Result<Vec<(Option<u64>, T)>, JournalError> {
    // A flattened record is parsed from a buffer that has forgotten where its fields were: a record
    // that does not parse is parsed again alone, so its error names the column `read` names.
    let timed = |text: &str| {
        serde_json::from_str::<Timed<T>>(text)
            .map_err(|e| serde_json::from_str::<T>(text).err().unwrap_or(e))
            .map(|t| (t.ts_ms, t.record))
    };
    Ok(read_lines(path, timed)?.into_iter().map(|(_, r)| r).collect())
}

/// A journal's first record with its `ts_ms`, reading nothing after its first line (`None`: an
/// empty journal, or a first line torn or damaged).
pub fn read_first<T: DeserializeOwned>(path: &Path) -> Result<Option<(Option<u64>, T)>, JournalError> {
    let file = crate::files::open_regular(path).map_err(|source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    for line in crate::files::lines_limited(file, path, MAX_LINE, "a journal line") {
        let Ok((_, bytes, _)) = line else { return Ok(None) };
        let text = String::from_utf8_lossy(&bytes);
        if !text.trim().is_empty() {
            return Ok(serde_json::from_str::<Timed<T>>(&text)
                .ok()
                .map(|t| (t.ts_ms, t.record)));
        }
    }
    Ok(None)
}

/// The longest line a journal may hold: far above any record a run writes (prompt templates are
/// bounded well below it), so a longer one is damage, refused without reading it whole.
pub const MAX_LINE: u64 = 32 * 1024 * 1024;

/// Reads a journal. A *last* line that a write cut short (no newline after it) is skipped; any other
/// line that does not parse as a record is an error naming it, since that is not what a crash
/// leaves behind.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, JournalError> {
    Ok(read_numbered(path)?.into_iter().map(|(_, r)| r).collect())
}

/// [`read`], each record with its line number (for errors that point at a record).
pub fn read_numbered<T: DeserializeOwned>(path: &Path) -> Result<Vec<(usize, T)>, JournalError> {
    read_lines(path, |text: &str| serde_json::from_str::<T>(text))
}

/// [`read_numbered`] with each line's own parser.
fn read_lines<T>(
    path: &Path,
    parse: impl Fn(&str) -> Result<T, serde_json::Error>,
) -> Result<Vec<(usize, T)>, JournalError> {
    let file = crate::files::open_regular(path).map_err(|source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for line in crate::files::lines_limited(file, path, MAX_LINE, "a journal line") {
        let (number, bytes, ended) = line.map_err(|e| match e {
            crate::files::FileError::Read { error: source, .. } => JournalError::Io {
                path: path.to_path_buf(),
                source,
            },
            other => JournalError::Damaged {
                path: path.to_path_buf(),
                line: match &other {
                    crate::files::FileError::LineTooLong { line, .. } => *line,
                    _ => 0,
                },
                column: 1,
                message: format!(
                    "a line longer than the {} a journal line may hold",
                    crate::files::size(MAX_LINE)
                ),
            },
        })?;
        let text = String::from_utf8_lossy(&bytes);
        // A byte-order mark an editor put before the first record is not part of it.
        let (text, marked) = match text.strip_prefix('\u{feff}') {
            Some(rest) if number == 1 => (rest, 1),
            _ => (&*text, 0),
        };
        if text.trim().is_empty() {
            continue;
        }
        match parse(text) {
            Ok(r) => out.push((number, r)),
            Err(_) if !ended => break,
            Err(e) => {
                return Err(JournalError::Damaged {
                    path: path.to_path_buf(),
                    line: number,
                    column: crate::files::json_column(text, &e) + marked,
                    message: crate::files::json_message(&e),
                });
            }
        }
    }
    Ok(out)
}

/// Writes `value` as pretty JSON to `path` atomically (temporary file + rename).
pub fn write_atomic<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    write_bytes_atomic(path, &serde_json::to_vec_pretty(value)?)
}

/// Writes `bytes` to `path` whole or not at all ([`crate::files::write_atomic`]), for the files a
/// session keeps: the caller names the path in its error.
pub fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    crate::files::write_atomic(path, bytes).map_err(io_error)
}

/// A file operation's failure as the I/O error it is (a refusal as one of its own).
fn io_error(e: crate::files::FileError) -> std::io::Error {
    use crate::files::FileError;
    match e {
        FileError::Write { error, .. } | FileError::Read { error, .. } => error,
        refused => std::io::Error::other(refused.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_journal_holds_its_first_record_from_the_start_and_never_replaces_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s").join("journal.jsonl");
        let mut j = Journal::create_exclusive(&path, &serde_json::json!({"event": "run_started"})).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(r#"{"event":"run_started","ts_ms":"#) && text.ends_with("}\n"), "{text}");
        j.append(&serde_json::json!({"a": 1})).unwrap();
        drop(j);
        let before = std::fs::read(&path).unwrap();
        let Err(e) = Journal::create_exclusive(&path, &serde_json::json!({"event": "other"})) else {
            panic!("a second journal made over the first");
        };
        assert!(
            matches!(&e, OpenError::Io(io) if io.kind() == std::io::ErrorKind::AlreadyExists),
            "{e:?}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before, "the journal there is untouched");
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["journal.jsonl"], "no temporary left");
    }

    #[test]
    fn torn_last_line_is_ignored_but_damage_elsewhere_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let mut j = Journal::open(&path).unwrap();
        j.append(&serde_json::json!({"a": 1})).unwrap();
        j.append(&serde_json::json!({"a": 2})).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"a\": 3, \"b\"")
            .unwrap();
        let records: Vec<serde_json::Value> = read(&path).unwrap();
        assert_eq!(records.len(), 2);
        // Reopening cuts the torn line off, so the next record is not glued to it (once the first
        // writer is gone: `open` waits for it).
        drop(j);
        let mut j = Journal::open(&path).unwrap();
        j.append(&serde_json::json!({"a": 4})).unwrap();
        let records: Vec<serde_json::Value> = read(&path).unwrap();
        assert_eq!(
            records.iter().map(|r| r["a"].as_i64().unwrap()).collect::<Vec<_>>(),
            [1, 2, 4]
        );
        let timed: Vec<(Option<u64>, serde_json::Value)> = read_timed(&path).unwrap();
        assert!(timed.iter().all(|(t, _)| t.is_some_and(|t| t > 1_700_000_000_000)));
        std::fs::write(&path, "{\"a\": 1}\n{oops\n{\"a\": 2}\n").unwrap();
        let e = read::<serde_json::Value>(&path).unwrap_err().to_string();
        assert!(e.contains("j.jsonl:2:"), "{e}");
    }

    /// A journal saved by an editor that leaves no newline after its last record: a read takes that
    /// record, and a reopen keeps it (ended with its newline) rather than cutting it as torn.
    #[test]
    fn a_whole_last_record_without_its_newline_is_kept_by_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        std::fs::write(&path, "{\"a\": 1}\n{\"a\": 2}").unwrap();
        assert_eq!(read::<serde_json::Value>(&path).unwrap().len(), 2);
        let mut j = Journal::open(&path).unwrap();
        j.append(&serde_json::json!({"a": 3})).unwrap();
        let records: Vec<serde_json::Value> = read(&path).unwrap();
        assert_eq!(
            records.iter().map(|r| r["a"].as_i64().unwrap()).collect::<Vec<_>>(),
            [1, 2, 3]
        );
    }

    #[test]
    fn a_whole_last_line_that_does_not_parse_is_damage_not_a_torn_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        std::fs::write(&path, "{\"a\": 1}\n{\"a\": 2, \"b\"\n").unwrap();
        let e = read::<serde_json::Value>(&path).unwrap_err().to_string();
        assert!(e.contains("journal.jsonl:2:"), "{e}");
        // Read with the times, a record missing a field is located where it is read alone.
        #[derive(serde::Deserialize, Debug)]
        struct Two {
            #[allow(dead_code)]
            a: u32,
            #[allow(dead_code)]
            b: u32,
        }
        std::fs::write(&path, "{\"a\": 1, \"b\": 2}\n{\"ts_ms\": 5, \"a\": 2}\n").unwrap();
        let alone = read::<Two>(&path).unwrap_err().to_string();
        let timed = read_timed::<Two>(&path).unwrap_err().to_string();
        assert!(alone.contains("journal.jsonl:2:20: missing field `b`"), "{alone}");
        assert_eq!(timed, alone);
        std::fs::write(&path, "{\"a\": 1}\n{\"a\": 2, \"b\"").unwrap();
        assert_eq!(read::<serde_json::Value>(&path).unwrap().len(), 1);
        let numbered: Vec<(usize, serde_json::Value)> = read_numbered(&path).unwrap();
        assert_eq!(numbered[0].0, 1);
    }

    #[test]
    fn a_deferred_record_is_written_with_the_next_one_or_never() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let mut j = Journal::open(&path).unwrap();
        j.append(&serde_json::json!({"a": 1})).unwrap();
        j.defer(&serde_json::json!({"a": 2})).unwrap();
        let a = |path: &Path| -> Vec<i64> {
            read::<serde_json::Value>(path).unwrap().iter().map(|r| r["a"].as_i64().unwrap()).collect()
        };
        assert_eq!(a(&path), [1], "not written yet");
        j.append(&serde_json::json!({"a": 3})).unwrap();
        j.append(&serde_json::json!({"a": 4})).unwrap();
        assert_eq!(a(&path), [1, 2, 3, 4], "once, before the next");
        j.defer(&serde_json::json!({"a": 5})).unwrap();
        drop(j);
        assert_eq!(a(&path), [1, 2, 3, 4], "nothing followed it");
    }

    /// A record longer than a journal line may be is refused, not written: the journal stays one
    /// that reads back (and a new one is not made).
    #[test]
    fn a_record_too_long_to_read_back_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let huge = serde_json::json!({"a": "x".repeat(MAX_LINE as usize)});
        let e = Journal::create_exclusive(&dir.path().join("new.jsonl"), &huge).err().expect("refused");
        assert!(e.to_string().contains("a journal line may hold"), "{e}");
        assert!(!dir.path().join("new.jsonl").exists());
        let mut j = Journal::open(&path).unwrap();
        j.append(&serde_json::json!({"a": 1})).unwrap();
        let e = j.append(&huge).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        let a: Vec<serde_json::Value> = read(&path).unwrap();
        assert_eq!(a.len(), 1, "the journal reads back as it was");
    }

    #[test]
    fn a_process_that_ended_is_not_a_writer_even_before_it_is_reaped() {
        let living = "4242 (incharacter run) S 1 4242 4242 0 -1 4194560 1 0 0 0 2 1 0 0 20 0 3 0 987654 0";
        assert_eq!(start_of_living(living), Some(987_654));
        assert_eq!(start_of_living(&living.replace(") S ", ") Z ")), None);
        assert_eq!(start_of_living("7 (a) b) R 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0"), Some(55));
        // A real zombie: a child that ended and is not yet waited for.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let ended = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
        });
        if ended {
            assert_eq!(process_start(pid), None);
        }
        child.wait().unwrap();
    }

    #[test]
    fn a_second_writer_is_refused_at_once_and_told_who_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let mut first = Journal::open_exclusive(&path).unwrap();
        first.append(&serde_json::json!({"a": 1})).unwrap();
        let me = writer(&path).expect("the writer is recorded and alive");
        assert_eq!(me.pid, std::process::id());
        // flock is per open file description: a second open in this process is refused like
        // another process would be.
        match Journal::open_exclusive(&path) {
            Err(OpenError::Busy { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("{:?}", other.map(|j| j.path.clone())),
        }
        assert_eq!(
            read::<serde_json::Value>(&path).unwrap().len(),
            1,
            "the refused writer touched nothing"
        );
        drop(first);
        assert!(writer(&path).is_none(), "the record goes with the writer");
        assert!(!writer_path(&path).exists());
        let mut again = Journal::open_exclusive(&path).unwrap();
        again.append(&serde_json::json!({"a": 2})).unwrap();
    }

    #[test]
    fn a_writer_record_copied_with_its_folder_is_not_a_writer_of_the_copy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let mut first = Journal::open_exclusive(&path).unwrap();
        first.append(&serde_json::json!({"a": 1})).unwrap();
        let copy = dir.path().join("copy");
        std::fs::create_dir(&copy).unwrap();
        std::fs::copy(&path, copy.join("journal.jsonl")).unwrap();
        std::fs::copy(writer_path(&path), writer_path(&copy.join("journal.jsonl"))).unwrap();
        assert!(writer(&path).is_some(), "the original is written");
        assert!(writer(&copy.join("journal.jsonl")).is_none(), "nobody holds the copy");
        drop(first);
    }

    #[test]
    fn a_writer_record_of_a_dead_process_is_not_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let stale = Writer {
            pid: std::process::id(),
            since: "2026-01-01T00:00:00Z".into(),
            // Not this process's start: the pid was reused.
            process_start: process_start(std::process::id()).map(|t| t + 1),
        };
        std::fs::write(writer_path(&path), serde_json::to_vec(&stale).unwrap()).unwrap();
        assert!(writer(&path).is_none());
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_786), (2026, 11, 29));
    }
}
