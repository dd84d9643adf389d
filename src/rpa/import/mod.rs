//! Importing characters and scales from other projects. A character (ChatHaruhi folder or jsonl,
//! RoleBench profile, character card) becomes `<data dir>/characters/<id>.toml` plus its memories
//! `<id>.memories.json`; a questionnaire (InCharacter or PsychoBench JSON) becomes
//! `<data dir>/scales/<id>.toml`. Sizes are bounded, ids are checked (no path can escape the data dir),
//! every file is validated by the same parser the catalog uses, and nothing is written unless the whole
//! import is valid. (The original code silently fell back to Haruhi for a name it did not know; here the
//! name must be seen speaking.)
//!
//! An import never replaces anything unasked: when its id is already held (by a user file, by a file at
//! the path it would write, or by a bundled character or scale), it is refused before anything is
//! written unless `replace` is given; then it replaces the user's file in place, or writes a user file
//! that overrides the bundled one, and says which in [`Replaced`].

mod card;
mod chatharuhi;
mod rolebench;
mod scale;

pub use card::character_card;
pub use chatharuhi::{chatharuhi_folder, chatharuhi_jsonl};
pub use rolebench::rolebench_profile;
pub use scale::{ScaleFormat, ScaleOptions, questionnaire};

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::domain::character::Character;
use crate::domain::diagnostic::Source;
use crate::domain::scale::{Language, Scale};
use crate::files::FileError;

const MAX_FILE: u64 = 1 << 20;
const MAX_FILES: usize = 5000;
const MAX_TOTAL: u64 = 64 << 20;
/// jsonl exports carry embeddings next to the text, so they are allowed to be larger.
const MAX_JSONL: u64 = 512 << 20;
/// One row of a jsonl export: a text and its embedding, with room to spare.
const MAX_JSONL_LINE: u64 = 16 << 20;
const MAX_ROWS: usize = 200_000;

/// Why an import wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// What was given cannot be imported: the user's to fix (exit 2).
    #[error("{0}")]
    Invalid(String),
    /// The data dir cannot be written (exit 1), or the target is not a file that may be replaced (a
    /// link: exit 2); [`FileError::is_input`] tells which.
    #[error(transparent)]
    Write(#[from] FileError),
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
    /// Replace what already holds the id (a user file, or a bundled character then overridden).
    pub replace: bool,
    /// Told (with the data dir) when another import into the same data dir is under way and this one
    /// waits for it to end.
    pub waiting: Option<fn(&Path)>,
}

/// What already holds an id an import would write, as the catalog knows it.
#[derive(Debug, Clone)]
pub struct Existing<'s, T> {
    /// What the catalog uses under the id; a replacing import keeps what is known of it (a
    /// character's labels, aliases, reference id and card).
    pub entry: Option<&'s T>,
    /// The user's files that hold the id: the one the catalog uses, or all those it refused to pick
    /// between.
    pub files: Vec<PathBuf>,
    /// The id of the bundled character or scale that has this id (overridden or not), as it is spelled.
    pub bundled: Option<String>,
}

impl<T> Existing<'_, T> {
    #[cfg(any(test, feature = "testing"))]
    /// Nothing holds the id.
    pub fn none() -> Self {
        Existing {
            entry: None,
            files: Vec::new(),
            bundled: None,
        }
    }
}

/// What a replacing import replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Replaced {
    /// The user's file, rewritten in place.
    User { path: PathBuf },
    /// The bundled character or scale of this id: the new user file overrides it.
    Bundled { id: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub id: String,
    /// The character's name.
    pub name: String,
    pub character_file: PathBuf,
    pub memories_file: PathBuf,
    pub memories: usize,
    /// What held the id before, when `replace` was given and something did.
    pub replaced: Option<Replaced>,
    /// What the import did with each part of what it read, one line each (a card's fields).
    pub report: Vec<String>,
}

/// Holds the imports into `data_dir` to one at a time, from the claim of an id to the last file
/// written: two imports of one name at once would each find it free and write their files over each
/// other's. Its lock file sits in the data dir itself, so a refused import leaves the characters and
/// scales folders as they were. Released when dropped, or when the process ends. `waiting` is told
/// before this waits for another import. Once held, the staged files an import killed in the
/// middle left beside the characters (an hour old) are removed.
pub fn one_import_at_a_time(data_dir: &Path, waiting: Option<fn(&Path)>) -> Result<std::fs::File, ImportError> {
    let path = data_dir.join(".import.lock");
    let failed = |error| FileError::Write {
        path: path.clone(),
        error,
    };
    std::fs::create_dir_all(data_dir).map_err(failed)?;
    // Something else in its place (a FIFO would hold the open forever) is said, not waited on.
    if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
        return Err(FileError::NotAFileToWrite(path).into());
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(failed)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            if let Some(tell) = waiting {
                tell(data_dir);
            }
            file.lock().map_err(failed)?;
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(failed(e).into()),
    }
    // A write killed in the middle is undone before anything is looked at (what holds an id), and
    // what it left beside the characters goes with the next import.
    for folder in ["characters", "scales"] {
        crate::files::recover(&data_dir.join(folder));
    }
    crate::files::remove_abandoned(&data_dir.join("characters"));
    Ok(file)
}

/// Where an import of the `kind` ("character" or "scale") `id` writes its file, and what it
/// replaces there. `default` is `<id>.toml` in the data dir; a file already there counts as holding
/// the id whatever it says (it may be invalid, and the catalog then skipped it). Without `replace`
/// anything holding the id refuses the import; with it, the one user file holding the id is replaced
/// in place, or a user file overrides the bundled entry. Several user files holding the id are
/// refused even so: which one to replace is the user's choice.
fn claim<T>(
    kind: &str,
    id: &str,
    default: PathBuf,
    existing: &Existing<'_, T>,
    replace: bool,
) -> Result<(PathBuf, Option<Replaced>), ImportError> {
    let mut files = existing.files.clone();
    if std::fs::symlink_metadata(&default).is_ok() && !files.contains(&default) {
        files.push(default.clone());
    }
    let shown = |files: &[PathBuf]| {
        files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (files.as_slice(), &existing.bundled) {
        ([], None) => Ok((default, None)),
        ([], Some(bundled)) if replace => Ok((default, Some(Replaced::Bundled { id: bundled.clone() }))),
        ([], Some(bundled)) => Err(format!(
            "a {kind} \"{id}\" already exists: the bundled {kind} {bundled}; pass --id to import under another id, \
             or --replace to write a user file that overrides the bundled one"
        )
        .into()),
        ([file], _) if replace => Ok((file.clone(), Some(Replaced::User { path: file.clone() }))),
        ([file], _) => Err(format!(
            "a {kind} \"{id}\" already exists: {}; pass --id to import under another id, or --replace to replace it",
            file.display()
        )
        .into()),
        (several, _) => Err(format!(
            "{} files already hold the {kind} id \"{id}\": {}; --replace cannot choose between them: \
             give all but one of them another id (or remove them), or pass --id to import under another id",
            several.len(),
            shown(several)
        )
        .into()),
    }
}

/// An import reads regular files only, and no link (a link could point anywhere): checked on the
/// path itself, before anything is read.
fn not_a_link(path: &Path) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.file_type().is_symlink() {
        let to = std::fs::read_link(path).map_or_else(|_| "?".into(), |t| crate::text::visible(&t.to_string_lossy()));
        return Err(format!(
            "{}: a symbolic link (to {to}): an import reads no link, which could point anywhere; give the path of the file it points to",
            crate::text::visible(&path.display().to_string())
        ));
    }
    if !meta.is_file() {
        return Err(FileError::NotRegular(path.to_path_buf()).to_string());
    }
    Ok(())
}

/// The bytes of the regular file `path` (a link is refused, not followed), at most `max` of them:
/// checked before reading and bounded while reading (a file that grows meanwhile is refused too).
fn read_bytes(path: &Path, max: u64, what: &'static str) -> Result<Vec<u8>, String> {
    not_a_link(path)?;
    crate::files::read_limited(path, max, what).map_err(|e| e.to_string())
}

/// The UTF-8 text of the regular file `path`, as [`read_bytes`] (bad UTF-8 located), without a byte
/// order mark opening it (columns are then counted as an editor shows them).
fn read_text(path: &Path, max: u64, what: &'static str) -> Result<String, String> {
    not_a_link(path)?;
    let text = crate::files::read_text_limited(path, max, what).map_err(|e| e.to_string())?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    })
}

fn read_bounded(path: &Path, total: &mut u64) -> Result<String, String> {
    let text = read_text(path, MAX_FILE, "a ChatHaruhi text file")?;
    *total += text.len() as u64;
    if *total > MAX_TOTAL {
        return Err(format!(
            "the folder holds more than the {} of text allowed for a ChatHaruhi character",
            crate::files::size(MAX_TOTAL)
        ));
    }
    Ok(text)
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

type Row = serde_json::Map<String, serde_json::Value>;

/// The JSON objects of a jsonl file, each with its 1-based line number and its line's text (to
/// locate a field's problem); blank lines skipped. A malformed row is an error naming
/// file:line:column; the file and each of its lines are bounded.
fn jsonl_rows(path: &Path) -> Result<Vec<(usize, Row, String)>, String> {
    not_a_link(path)?;
    crate::files::check_readable(path, MAX_JSONL, "a jsonl export").map_err(|e| e.to_string())?;
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rows = Vec::new();
    let mut read = 0u64;
    // Bounded again while reading: a file that grows after the check is cut off and refused.
    for line in crate::files::lines_limited(file.take(MAX_JSONL + 1), path, MAX_JSONL_LINE, "a jsonl row") {
        let (n, line, _) = line.map_err(|e| e.to_string())?;
        read += line.len() as u64 + 1;
        if read > MAX_JSONL {
            return Err(FileError::TooLarge {
                path: path.to_path_buf(),
                limit: MAX_JSONL,
                what: "a jsonl export",
            }
            .to_string());
        }
        let line = String::from_utf8(line).map_err(|e| {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            let column = String::from_utf8_lossy(valid).chars().count() + 1;
            format!("{}:{n}:{column}: not UTF-8 text", path.display())
        })?;
        // A byte-order mark may open the file (as editors on Windows save it); it is not a column.
        let line = match line.strip_prefix('\u{feff}') {
            Some(rest) if n == 1 => rest.to_string(),
            _ => line,
        };
        if line.trim().is_empty() {
            continue;
        }
        if rows.len() == MAX_ROWS {
            return Err(format!("{}: more than {MAX_ROWS} rows", path.display()));
        }
        match serde_json::from_str::<serde_json::Value>(&line) {
            Ok(serde_json::Value::Object(map)) => rows.push((n, map, line)),
            Ok(_) => return Err(format!("{}:{n}:1: a row must be a JSON object", path.display())),
            Err(e) => return Err(format!("{}:{n}:{}: {}", path.display(), crate::files::json_column(&line, &e), crate::files::json_message(&e))),
        }
    }
    Ok(rows)
}

/// `file:line:column` of field `key`'s value in a jsonl row (`line`: its number, `text`: its text);
/// the row's start when it has no such field.
fn row_at(file: &Path, line: usize, text: &str, key: &str) -> String {
    let column = crate::domain::diagnostic::Source::new("", text).json_at(&[key]).map_or(1, |(_, c)| c);
    format!("{}:{line}:{column}", file.display())
}

/// Text without control characters other than newlines, trimmed.
fn clean(text: &str) -> String {
    // Escape sequences go whole (`ESC [ 2 J`, not `[2J` left in the text), then what is left of a
    // terminal's controls.
    crate::text::inert(&text.to_string())
        .chars()
        .filter(|c| !c.is_control() || *c == '\n')
        .collect::<String>()
        .trim()
        .to_string()
}

/// The ASCII digits at the end of `s` ("text_12" → "12").
fn trailing_digits(s: &str) -> &str {
    &s[s.trim_end_matches(|c: char| c.is_ascii_digit()).len()..]
}

/// `name` in lower-case ASCII letters and digits joined by `-`; accents are taken off ("Zoë",
/// composed or not, is `zoe`), any other character is a break.
fn slug(name: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let slug: String = name
        .nfkd()
        .filter(|c| !unicode_normalization::char::is_combining_mark(*c))
        .collect::<String>()
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
    // The rule every character file's id follows, so an imported character is one `validate` accepts.
    if !crate::domain::is_id(&id) {
        // Said of what was wrong, the id shown escaped and cut: it may come from a file.
        let shown = crate::text::fit(&format!("{id:?}"), 80);
        let why = if id.len() > 64 {
            format!("is {} bytes long; an id is at most 64", id.len())
        } else {
            format!("must be {}", crate::domain::ID_RULE)
        };
        let hint = if options.id.is_some() { "" } else { " (pass --id)" };
        return Err(format!("id {shown} {why}{hint}").into());
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
    existing: impl Fn(&str) -> Existing<'s, Character>,
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
    // The prompt the agent reads: without what a terminal would act on, as a card's is.
    let description = crate::rpa::card::clean(&description);
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
    let _one = one_import_at_a_time(data_dir, options.waiting)?;
    let holders = existing(&id);
    // Ids are one in any case: a replace keeps the spelling of the id it replaces, so the files
    // named after it (memories, card) are the ones written, not others beside them.
    let id = held_spelling(id, holders.entry);
    let (path, replaced) = claim(
        "character",
        &id,
        character_path(data_dir, &id),
        &holders,
        options.replace,
    )?;
    let (existing, carried) = carried_over(holders.entry, &name);
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
    // The work the character comes from, when the one it replaces named it (not an earlier
    // import's note of where it came from); else not known: prompts then name none.
    let kept_work = existing.and_then(Character::source_work).filter(|w| !w.starts_with("imported from "));
    let work = kept_work.unwrap_or_default().to_string();
    let carried = carried.map(|line| match kept_work {
        Some(work) => format!("{line}, work {work}"),
        None => line,
    });
    let character = imported_character(
        existing,
        id,
        name,
        language,
        experimenter,
        work,
        description.trim().to_string(),
    );
    let mut imported = write_files(data_dir, character, &chunks, scale, &origin, path, replaced, None)?;
    imported.report.extend(carried);
    Ok(imported)
}

/// What a replace carries over from the character it replaces, and the report's line on it. What is
/// known about a character (its labels and targets, aliases, experimenter, reference id) stays when
/// the import is of the same character, its name being the old one's or one of its aliases; a
/// different character under the id starts without them, else it would be scored against the
/// other's labels and its answers masked with the other's names.
pub(super) fn carried_over<'a>(existing: Option<&'a Character>, name: &str) -> (Option<&'a Character>, Option<String>) {
    let Some(old) = existing else {
        return (None, None);
    };
    let folded = |s: &str| s.trim().to_lowercase();
    let same = std::iter::once(&old.name)
        .chain(&old.aliases)
        .any(|n| folded(n) == folded(name));
    let labels: Vec<&str> = old
        .labels
        .pdb
        .keys()
        .chain(old.labels.annotation.keys())
        .chain(old.labels.target.keys())
        .map(String::as_str)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let labels = match labels.is_empty() {
        true => "no labels".to_string(),
        false => format!("labels ({})", labels.join(", ")),
    };
    let line = match same {
        true => format!(
            "kept from the {} it replaces: {labels}, aliases ({}), experimenter {}",
            old.name,
            old.aliases.join(", "),
            old.experimenter
        ),
        false => format!(
            "replaces {}, another name: its {}aliases and experimenter are not carried over",
            old.name,
            if labels == "no labels" { String::new() } else { format!("{labels}, ") }
        ),
    };
    (same.then_some(old), Some(line))
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
        post_history: String::new(),
        catchphrases: Vec::new(),
        agents: BTreeMap::new(),
        labels: existing.map(|c| c.labels.clone()).unwrap_or_default(),
        card: existing.and_then(|c| c.card.clone()),
    }
}

/// `id`, or the id of the character that holds it when that is spelled in another case.
fn held_spelling(id: String, holder: Option<&Character>) -> String {
    match holder {
        Some(c) if c.id != id && c.id.eq_ignore_ascii_case(&id) => c.id.clone(),
        _ => id,
    }
}

fn character_path(data_dir: &Path, id: &str) -> PathBuf {
    data_dir.join("characters").join(format!("{id}.toml"))
}

/// Refuses a scale or character file the catalog would not read (it skips one over
/// [`crate::catalog::MAX_FILE`]): nothing is written that could only be skipped afterwards.
pub(super) fn too_large_for_the_catalog(origin: &str, what: &str, bytes: usize) -> Result<(), ImportError> {
    if bytes as u64 > crate::catalog::MAX_FILE {
        return Err(format!(
            "{origin}: the {what} file would take {}, more than the {} a scale or character file may hold; nothing was written",
            crate::files::size(bytes as u64),
            crate::files::size(crate::catalog::MAX_FILE)
        )
        .into());
    }
    Ok(())
}

/// The most a memories file may hold: what the catalog and the agents will read back.
pub(crate) const MAX_MEMORIES: u64 = super::memories::MAX_FILE;

/// Writes `character` to `character_file` (claimed by [`claim`]) and its memories, once the file is
/// known to read back as it, all files or none.
/// `origin` names what was imported. `card` is the character card it came from (its JSON, and the
/// PNG it came in), kept for `export-card`; without one, a card kept by an earlier import is removed.
#[allow(clippy::too_many_arguments)]
fn write_files<'s>(
    data_dir: &Path,
    character: Character,
    chunks: &[String],
    scale: impl Fn(&str) -> Option<&'s Scale>,
    origin: &str,
    character_file: PathBuf,
    replaced: Option<Replaced>,
    card: Option<(&[u8], Option<&[u8]>)>,
) -> Result<Imported, ImportError> {
    let text = character.to_toml();
    too_large_for_the_catalog(origin, "character", text.len())?;
    let parsed = Character::parse(Source::new(&character_file.display().to_string(), &text), scale)
        .map_err(|e| e.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n"))?;
    if parsed != character {
        return Err(format!("{origin}: the character file would not read back as imported").into());
    }
    let memories_file = super::memories::path(data_dir, &character.id);
    let memories = serde_json::to_vec_pretty(&chunks).map_err(|e| e.to_string())?;
    if memories.len() as u64 > MAX_MEMORIES {
        return Err(format!(
            "{origin}: the memories would take {} bytes, more than the {} a memories file may hold",
            memories.len(),
            crate::files::size(MAX_MEMORIES)
        )
        .into());
    }
    // The memories, the card and the character file together or not at all: a character never
    // appears without its memories, and a failed import (a replace included) changes none of them.
    let (card_json, card_png) = super::card::stored_paths(data_dir, &character.id);
    let (json, png) = card.map_or((None, None), |(json, png)| (Some(json), png));
    crate::files::write_all_or_none(&[
        (memories_file.clone(), Some(&memories)),
        (card_json, json),
        (card_png, png),
        (character_file.clone(), Some(text.as_bytes())),
    ])?;
    Ok(Imported {
        id: character.id,
        name: character.name,
        character_file,
        memories_file,
        memories: chunks.len(),
        replaced,
        report: Vec::new(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slug_takes_accents_off_whatever_the_normal_form() {
        assert_eq!(slug("Zo\u{eb}"), "zoe");
        assert_eq!(slug("Zoe\u{308}"), "zoe");
        assert_eq!(slug("Jos\u{e9} Mar\u{ed}a"), "jose-maria");
        assert_eq!(slug("\u{949f}\u{79bb}"), "", "no Latin letters: the fallback names it");
    }

    fn held(files: &[&Path], bundled: bool) -> Existing<'static, Character> {
        Existing {
            entry: None,
            files: files.iter().map(|f| f.to_path_buf()).collect(),
            bundled: bundled.then(|| "Hermione-EN".to_string()),
        }
    }

    #[test]
    fn a_free_id_is_written_at_its_own_path() {
        let dir = tempfile::tempdir().unwrap();
        let default = dir.path().join("luna-en.toml");
        let got = claim("character", "luna-en", default.clone(), &held(&[], false), false).unwrap();
        assert_eq!(got, (default, None));
    }

    #[test]
    fn a_user_file_holding_the_id_is_replaced_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let default = dir.path().join("luna-en.toml");
        // The catalog found the id in a file of another name.
        let other = dir.path().join("my-luna.toml");
        let e = claim("character", "luna-en", default.clone(), &held(&[&other], false), false)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "a character \"luna-en\" already exists: {}; pass --id to import under another id, or --replace to replace it",
                other.display()
            )
        );
        let got = claim("character", "luna-en", default, &held(&[&other], true), true).unwrap();
        assert_eq!(got, (other.clone(), Some(Replaced::User { path: other })));
    }

    #[test]
    fn a_file_at_the_path_counts_even_when_the_catalog_skipped_it() {
        let dir = tempfile::tempdir().unwrap();
        let default = dir.path().join("Tide.toml");
        std::fs::write(&default, "not a scale").unwrap();
        let e = claim("scale", "Tide", default.clone(), &held(&[], false), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("already exists: {};", default.display())), "{e}");
        let got = claim("scale", "Tide", default.clone(), &held(&[], false), true).unwrap();
        assert_eq!(got.1, Some(Replaced::User { path: default }));
    }

    #[test]
    fn a_bundled_id_is_overridden_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let default = dir.path().join("hermione-en.toml");
        let e = claim("character", "hermione-en", default.clone(), &held(&[], true), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("a character \"hermione-en\" already exists: the bundled character Hermione-EN;"),
            "{e}"
        );
        assert!(
            e.contains("--replace to write a user file that overrides the bundled one"),
            "{e}"
        );
        let got = claim("character", "hermione-en", default.clone(), &held(&[], true), true).unwrap();
        assert_eq!(
            got,
            (
                default,
                Some(Replaced::Bundled {
                    id: "Hermione-EN".into()
                })
            )
        );
    }

    #[test]
    fn several_files_holding_the_id_are_never_chosen_between() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.toml"), dir.path().join("b.toml"));
        for replace in [false, true] {
            let e = claim(
                "character",
                "x",
                dir.path().join("x.toml"),
                &held(&[&a, &b], false),
                replace,
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains(&format!("{}, {}", a.display(), b.display())), "{e}");
            assert!(e.contains("--replace cannot choose"), "{e}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn readers_refuse_fifos_and_links_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.jsonl");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        // Opening a FIFO with no writer would block: these return at once.
        let e = jsonl_rows(&fifo).unwrap_err();
        assert!(
            e.ends_with("pipe.jsonl: not a regular file (a device, a FIFO or a folder cannot be read here)"),
            "{e}"
        );
        let e = read_text(&fifo, MAX_FILE, "a test file").unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let link = dir.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = read_bytes(&link, MAX_FILE, "a test file").unwrap_err();
        assert!(e.contains("zero.json: a symbolic link (to /dev/zero)"), "{e}");
    }

    #[test]
    fn a_jsonl_row_longer_than_its_limit_is_refused_at_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("big.jsonl");
        let mut text = b"{\"text\": \"a\"}\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', MAX_JSONL_LINE as usize + 1));
        std::fs::write(&file, text).unwrap();
        let e = jsonl_rows(&file).unwrap_err();
        assert!(
            e.ends_with("big.jsonl:2:1: a line longer than the 16 MiB allowed for a jsonl row"),
            "{e}"
        );
    }

    #[test]
    fn jsonl_rows_read_past_a_byte_order_mark_and_are_located_in_characters() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rows.jsonl");
        std::fs::write(&file, "\u{feff}{\"text\": \"a\"}\n{\"text\":\"日本語日本語日本語\", x}\n").unwrap();
        let e = jsonl_rows(&file).unwrap_err();
        assert!(e.ends_with("rows.jsonl:2:22: key must be a string"), "{e}");
        std::fs::write(&file, "\u{feff}{\"text\": \"a\"}\n").unwrap();
        assert_eq!(jsonl_rows(&file).unwrap()[0].1["text"], "a");
    }

    /// Where the waiting import says so: the test's channel (one test uses it).
    static TOLD: std::sync::Mutex<Option<std::sync::mpsc::Sender<PathBuf>>> = std::sync::Mutex::new(None);

    fn tell(data_dir: &Path) {
        if let Some(tx) = TOLD.lock().unwrap().as_ref() {
            tx.send(data_dir.to_path_buf()).unwrap();
        }
    }

    #[test]
    fn an_import_waiting_for_another_says_so_then_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        *TOLD.lock().unwrap() = Some(tx);
        // Alone, it takes the lock without a word.
        let first = one_import_at_a_time(dir.path(), Some(tell)).unwrap();
        assert!(rx.try_recv().is_err(), "nothing waited");
        // A second one, while the first holds the lock, is told it waits, and gets the lock once the
        // first lets go of it.
        let data = dir.path().to_path_buf();
        let second = std::thread::spawn(move || one_import_at_a_time(&data, Some(tell)).map(drop));
        assert_eq!(rx.recv().unwrap(), dir.path());
        drop(first);
        second.join().unwrap().unwrap();
        assert!(rx.try_recv().is_err(), "told once");
    }
}
