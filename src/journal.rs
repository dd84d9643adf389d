//! Append-only JSONL files: a session's `journal.jsonl`, an annotator's answers. One JSON object per
//! line, flushed per record, so a crash or kill loses at most the line being written, and a torn last
//! line is ignored on load; and whole files written atomically (`results.json`, caches of imports).
//! Knows nothing of what the records mean.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
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

/// Appends records to a journal, one flushed line each.
pub struct Journal {
    file: File,
    pub path: PathBuf,
}

impl Journal {
    /// Opens (or creates) a journal for appending. A last line torn by a crash is cut off first, so
    /// the next record starts on a line of its own.
    pub fn open(path: &Path) -> std::io::Result<Journal> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = OpenOptions::new().create(true).read(true).append(true).open(path)?;
        let len = file.metadata()?.len();
        if len > 0 {
            let whole = whole_lines(&mut file, len)?;
            if whole < len {
                file.set_len(whole)?;
            }
        }
        Ok(Journal {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Appends `record`; an object record gets `ts_ms` (Unix milliseconds) so a replay can keep the
    /// original timing.
    pub fn append<T: Serialize>(&mut self, record: &T) -> std::io::Result<()> {
        let mut value = serde_json::to_value(record)?;
        if let serde_json::Value::Object(map) = &mut value {
            map.insert("ts_ms".into(), unix_ms().into());
        }
        let mut line = serde_json::to_string(&value)?;
        line.push('\n');
        // One write per line: an interrupted write can only tear the last line, and a failed one
        // (disk full, read-only) is taken back so the journal ends on a whole line.
        let before = self.file.metadata()?.len();
        if let Err(e) = self.file.write_all(line.as_bytes()).and_then(|_| self.file.flush()) {
            let _ = self.file.set_len(before);
            return Err(e);
        }
        Ok(())
    }
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
    Ok(read::<Timed<T>>(path)?
        .into_iter()
        .map(|t| (t.ts_ms, t.record))
        .collect())
}

/// A journal's first record with its `ts_ms`, reading nothing after its first line (`None`: an
/// empty journal, or a first line torn or damaged).
pub fn read_first<T: DeserializeOwned>(path: &Path) -> Result<Option<(Option<u64>, T)>, JournalError> {
    let io = |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut reader = BufReader::new(File::open(path).map_err(io)?);
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(io)? == 0 {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&line);
        if !text.trim().is_empty() {
            return Ok(serde_json::from_str::<Timed<T>>(&text).ok().map(|t| (t.ts_ms, t.record)));
        }
    }
}

/// Reads a journal. A damaged *last* line (a write cut short) is skipped; a damaged line elsewhere is
/// an error naming it, since that is not what a crash leaves behind.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, JournalError> {
    let io = |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let lines: Vec<String> = BufReader::new(file)
        .split(b'\n')
        .map(|l| l.map(|b| String::from_utf8_lossy(&b).into_owned()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    let mut out = Vec::new();
    let last = lines.iter().rposition(|l| !l.trim().is_empty());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(r) => out.push(r),
            Err(_) if Some(i) == last => break,
            Err(e) => {
                return Err(JournalError::Damaged {
                    path: path.to_path_buf(),
                    line: i + 1,
                    column: e.column(),
                    message: e.to_string(),
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

/// Writes `bytes` to `path` atomically (temporary file + rename): a reader sees the old file or the
/// whole new one.
pub fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // Reopening cuts the torn line off, so the next record is not glued to it.
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

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_786), (2026, 11, 29));
    }
}
