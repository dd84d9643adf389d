//! Importing characters and scales from other projects. A character (ChatHaruhi folder or jsonl,
//! RoleBench profile, character card) becomes `<data dir>/characters/<id>.toml` plus its memories
//! `<id>.memories.json`; a questionnaire (InCharacter or PsychoBench JSON) becomes
//! `<data dir>/scales/<id>.toml`. Sizes are bounded, ids are checked (no path can escape the data dir),
//! every file is validated by the same parser the catalog uses, and nothing is written unless the whole
//! import is valid. (The original code silently fell back to Haruhi for a name it did not know; here the
//! name must be seen speaking.)

mod card;
mod chatharuhi;
mod rolebench;
mod scale;

pub use card::character_card;
pub use chatharuhi::{chatharuhi_folder, chatharuhi_jsonl};
pub use rolebench::rolebench_profile;
pub use scale::{ScaleFormat, ScaleOptions, questionnaire};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::domain::character::Character;
use crate::domain::diagnostic::Source;
use crate::domain::scale::{Language, Scale};

const MAX_FILE: u64 = 1 << 20;
const MAX_FILES: usize = 5000;
const MAX_TOTAL: u64 = 64 << 20;
/// jsonl exports carry embeddings next to the text, so they are allowed to be larger.
const MAX_JSONL: u64 = 512 << 20;
const MAX_ROWS: usize = 200_000;

/// Why an import wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// What was given cannot be imported: the user's to fix (exit 2).
    #[error("{0}")]
    Invalid(String),
    /// The data dir cannot be written (exit 1).
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

impl From<String> for ImportError {
    fn from(message: String) -> Self {
        ImportError::Invalid(message)
    }
}

impl From<&str> for ImportError {
    fn from(message: &str) -> Self {
        ImportError::Invalid(message.into())
    }
}

#[derive(Debug, Default, Clone)]
pub struct Options {
    pub id: Option<String>,
    pub name: Option<String>,
    pub experimenter: Option<String>,
    pub language: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub id: String,
    /// The character's name.
    pub name: String,
    pub character_file: PathBuf,
    pub memories_file: PathBuf,
    pub memories: usize,
}

/// Size of a regular file (symlinks and devices refused), at most `max` bytes.
fn checked_size(path: &Path, max: u64) -> Result<u64, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    if meta.len() > max {
        return Err(format!(
            "{}: {} bytes is more than the {max} allowed",
            path.display(),
            meta.len()
        ));
    }
    Ok(meta.len())
}

fn read_bounded(path: &Path, total: &mut u64) -> Result<String, String> {
    let len = checked_size(path, MAX_FILE)?;
    *total += len;
    if *total > MAX_TOTAL {
        return Err(format!("the folder holds more than {MAX_TOTAL} bytes of text"));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    String::from_utf8(bytes)
        .map_err(|e| format!("{}: not UTF-8 at byte {}", path.display(), e.utf8_error().valid_up_to()))
}

/// Speakers of `Name:「…」` lines (ASCII or full-width colon).
fn speakers(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(':').or_else(|| line.split_once('：'))?;
            let name = name.trim();
            (rest.trim_start().starts_with('「') && !name.is_empty() && name.chars().count() <= 40)
                .then(|| name.to_string())
        })
        .collect()
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !id.starts_with('-')
}

type Row = serde_json::Map<String, serde_json::Value>;

/// The JSON objects of a jsonl file, each with its 1-based line number; blank lines skipped.
/// A malformed row is an error naming file:line:column.
fn jsonl_rows(path: &Path) -> Result<Vec<(usize, Row)>, String> {
    use std::io::BufRead;
    checked_size(path, MAX_JSONL)?;
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rows = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| format!("{}:{n}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        if rows.len() == MAX_ROWS {
            return Err(format!("{}: more than {MAX_ROWS} rows", path.display()));
        }
        match serde_json::from_str::<serde_json::Value>(&line) {
            Ok(serde_json::Value::Object(map)) => rows.push((n, map)),
            Ok(_) => return Err(format!("{}:{n}:1: a row must be a JSON object", path.display())),
            Err(e) => return Err(format!("{}:{n}:{}: {e}", path.display(), e.column())),
        }
    }
    Ok(rows)
}

/// Text without control characters other than newlines, trimmed.
fn clean(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || *c == '\n')
        .collect::<String>()
        .trim()
        .to_string()
}

/// The ASCII digits at the end of `s` ("text_12" → "12").
fn trailing_digits(s: &str) -> &str {
    &s[s.trim_end_matches(|c: char| c.is_ascii_digit()).len()..]
}

fn slug(name: &str) -> String {
    let slug: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    slug.split('-').filter(|s| !s.is_empty()).collect::<Vec<_>>().join("-")
}

/// `--id`, else the slug of the name (of `fallback` when the name has no ASCII letters or digits) and
/// the language: `luna-en`.
fn character_id(options: &Options, name: &str, fallback: &str, language: &str) -> Result<String, ImportError> {
    let id = options.id.clone().unwrap_or_else(|| {
        let s = slug(name);
        let s = if s.is_empty() { slug(fallback) } else { s };
        format!("{s}-{language}")
    });
    if !valid_id(&id) {
        return Err(format!("id \"{id}\" must be lower-case letters, digits and '-' (pass --id)").into());
    }
    Ok(id)
}

/// What every character source yields before it is written.
struct Profile {
    /// The name as it speaks in the chunks.
    name: String,
    description: String,
    chunks: Vec<String>,
    /// Where it came from, e.g. "ChatHaruhi (Luna)".
    origin: String,
    /// Fallback for the id when the name has no ASCII letters (e.g. a Chinese name).
    fallback_slug: String,
}

/// Checks a profile against the options and the catalog, then writes the character and its memories.
fn write_character<'s>(
    profile: Profile,
    data_dir: &Path,
    options: &Options,
    scale: impl Fn(&str) -> Option<&'s Scale>,
    known: impl Fn(&str) -> Option<&'s Character>,
) -> Result<Imported, ImportError> {
    let Profile {
        name,
        description,
        chunks,
        origin,
        fallback_slug,
    } = profile;
    if chunks.is_empty() {
        return Err(format!("{origin}: no dialogue to use as memories").into());
    }
    if description.trim().is_empty() {
        return Err(format!("{origin}: the profile has no description").into());
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for c in &chunks {
        for s in speakers(c) {
            *counts.entry(s).or_default() += 1;
        }
    }
    if !counts.contains_key(&name) {
        let mut top: Vec<(&String, &usize)> = counts.iter().collect();
        top.sort_by(|a, b| b.1.cmp(a.1));
        let seen: Vec<&str> = top.iter().take(8).map(|(n, _)| n.as_str()).collect();
        return Err(format!(
            "\"{name}\" never speaks in {origin} (speakers seen: {}); pass --name with the speaker's name as written",
            seen.join(", ")
        )
        .into());
    }
    let language = options
        .language
        .clone()
        .unwrap_or_else(|| detect_language(chunks.iter().map(String::as_str)).code().into());
    let id = character_id(options, &name, &fallback_slug, &language)?;
    let existing = known(&id).filter(|c| c.id == id);
    let experimenter = match (&options.experimenter, existing) {
        (Some(e), _) => e.clone(),
        (None, Some(c)) => c.experimenter.clone(),
        (None, None) => counts
            .iter()
            .filter(|(n, _)| **n != name)
            .max_by_key(|(_, c)| **c)
            .map(|(n, _)| n.clone())
            .ok_or("nobody else speaks in the dialogue: pass --experimenter")?,
    };
    let language = Language::parse(&language).ok_or_else(|| format!("--language {language}: use en or zh"))?;
    let work = format!("imported from {origin}");
    let character = imported_character(existing, id, name, language, experimenter, work, description.trim().to_string());
    write_files(data_dir, character, &chunks, scale, &origin)
}

/// The character an import makes: the profile it brings, and what the catalog already knows of the
/// character under the same id (`existing`), which stays: its reference id, its aliases (the name
/// joins them), its labels with the author's targets, the card it came from. (An import adds a profile
/// and memories; it does not erase what is known about the character.)
fn imported_character(
    existing: Option<&Character>,
    id: String,
    name: String,
    language: Language,
    experimenter: String,
    work: String,
    description: String,
) -> Character {
    let mut aliases = existing.map(|c| c.aliases.clone()).unwrap_or_default();
    if !aliases.contains(&name) {
        aliases.push(name.clone());
    }
    Character {
        id,
        reference_id: existing.and_then(|c| c.reference_id.clone()),
        name,
        aliases,
        language,
        experimenter,
        work,
        description,
        catchphrases: Vec::new(),
        agents: BTreeMap::new(),
        labels: existing.map(|c| c.labels.clone()).unwrap_or_default(),
        card: existing.and_then(|c| c.card.clone()),
    }
}

fn character_path(data_dir: &Path, id: &str) -> PathBuf {
    data_dir.join("characters").join(format!("{id}.toml"))
}

/// Writes `character` and its memories, once its file is known to read back as it: the memories first,
/// so the character never appears without them. `origin` names what was imported.
fn write_files<'s>(
    data_dir: &Path,
    character: Character,
    chunks: &[String],
    scale: impl Fn(&str) -> Option<&'s Scale>,
    origin: &str,
) -> Result<Imported, ImportError> {
    let text = character.to_toml();
    let character_file = character_path(data_dir, &character.id);
    let parsed = Character::parse(Source::new(&character_file.display().to_string(), &text), scale)
        .map_err(|e| e.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n"))?;
    if parsed != character {
        return Err(format!("{origin}: the character file would not read back as imported").into());
    }
    let memories_file = super::memories::path(data_dir, &character.id);
    crate::journal::write_atomic(&memories_file, &chunks).map_err(|source| ImportError::Write {
        path: memories_file.clone(),
        source,
    })?;
    write_text_atomic(&character_file, &text)?;
    Ok(Imported {
        id: character.id,
        name: character.name,
        character_file,
        memories_file,
        memories: chunks.len(),
    })
}

fn write_text_atomic(path: &Path, text: &str) -> Result<(), ImportError> {
    crate::journal::write_bytes_atomic(path, text.as_bytes()).map_err(|source| ImportError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// The language of a character's text: Chinese when CJK ideographs are more than a third of its
/// letters.
fn detect_language<'a>(texts: impl Iterator<Item = &'a str> + Clone) -> Language {
    let cjk = texts
        .clone()
        .flat_map(str::chars)
        .filter(|c| ('\u{4e00}'..='\u{9fff}').contains(c))
        .count();
    let letters = texts.flat_map(str::chars).filter(|c| c.is_alphabetic()).count().max(1);
    if cjk * 3 > letters { Language::Zh } else { Language::En }
}
