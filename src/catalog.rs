//! The scales and characters the workbench knows: the bundled ones compiled into the binary, plus user
//! files in `<data dir>/scales` and `<data dir>/characters` (a user file with a bundled id replaces it,
//! and says so). Two user files with one id (ids compare case-insensitively, as lookups do) are never
//! chosen between: neither is used, and a problem names both. Every file read is a regular file of at
//! most [`MAX_FILE`] bytes. Also validates arbitrary files for `incharacter validate`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::domain::character::{Character, LabelSource};
use crate::domain::diagnostic::{Diagnostic, Source};
use crate::domain::scale::Scale;

pub(crate) mod bundled {
    include!(concat!(env!("OUT_DIR"), "/bundled.rs"));
}

/// Where a scale or character came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Origin {
    Bundled,
    User { path: PathBuf, overrides_bundled: bool },
}

impl Origin {
    pub fn describe(&self) -> String {
        match self {
            Origin::Bundled => "bundled".into(),
            Origin::User {
                path,
                overrides_bundled: true,
            } => format!("user (overrides bundled): {}", path.display()),
            Origin::User {
                path,
                overrides_bundled: false,
            } => format!("user: {}", path.display()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Entry<T> {
    pub value: T,
    pub origin: Origin,
}

/// Characters and scales whose file is there but cannot be read now (caught half-written, broken by
/// an edit), as the workbench tells them from removed ones between two reads: by id, that file.
#[derive(Debug, Clone, Default)]
pub struct Unreadable {
    pub characters: BTreeMap<String, String>,
    pub scales: BTreeMap<String, String>,
}

/// The file `old` with the keys whose values differ from `new`'s (both TOML documents) replaced,
/// added or removed as in `new`, and everything else — comments, blank lines, key order, how each
/// untouched value is written — as it was. `None` when either does not parse.
fn keep_layout(old: &str, new: &str) -> Option<String> {
    let mut doc: toml_edit::DocumentMut = old.parse().ok()?;
    let new: toml_edit::DocumentMut = new.parse().ok()?;
    merge_table(doc.as_table_mut(), new.as_table());
    Some(doc.to_string())
}

/// What `item` reads as, to tell a change from another way of writing the same value.
fn value_of(item: &toml_edit::Item) -> Option<toml::Table> {
    let mut d = toml_edit::DocumentMut::new();
    d.insert("x", item.clone());
    toml::from_str(&d.to_string()).ok()
}

fn merge_table(old: &mut toml_edit::Table, new: &toml_edit::Table) {
    let gone: Vec<String> = old.iter().map(|(k, _)| k.to_string()).filter(|k| !new.contains_key(k)).collect();
    for k in gone {
        old.remove(&k);
    }
    for (k, item) in new.iter() {
        let Some(was) = old.get_mut(k) else {
            // A key the file leaves out reads as empty: not written while it is.
            let empty = match item {
                toml_edit::Item::Value(toml_edit::Value::String(s)) => s.value().is_empty(),
                toml_edit::Item::Value(toml_edit::Value::Array(a)) => a.is_empty(),
                toml_edit::Item::Table(t) => t.is_empty(),
                _ => false,
            };
            if !empty {
                old.insert(k, item.clone());
            }
            continue;
        };
        if value_of(was).is_some_and(|v| Some(v) == value_of(item)) {
            continue;
        }
        match (was, item) {
            (toml_edit::Item::Table(was), toml_edit::Item::Table(now)) => merge_table(was, now),
            (was, now) => {
                // A changed value keeps the spaces and the comment around it.
                let decor = was.as_value().map(|v| v.decor().clone());
                *was = now.clone();
                if let (Some(decor), Some(v)) = (decor, was.as_value_mut()) {
                    *v.decor_mut() = decor;
                }
            }
        }
    }
}

/// The most a scale or character file may hold.
pub const MAX_FILE: u64 = 4 << 20;
const WHAT: &str = "a scale or character file";

/// Which of the catalog's two namespaces an id is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Scale,
    Character,
}

impl Kind {
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Scale => "scale",
            Kind::Character => "character",
        }
    }
}

/// User files that share one id; the catalog uses none of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicate {
    pub kind: Kind,
    pub id: String,
    /// Sorted; at least two.
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub scales: Vec<Entry<Scale>>,
    pub characters: Vec<Entry<Character>>,
    /// Problems in user files; those files were skipped.
    pub problems: Vec<Diagnostic>,
    /// Ids held by several user files (each also reported in `problems`).
    pub duplicates: Vec<Duplicate>,
    /// What user files change that is said though nothing was skipped (bundled labels a replaced
    /// scale no longer fits).
    pub notes: Vec<Diagnostic>,
    /// What each user character file held when it was read: a save checks it is still there.
    read_as: BTreeMap<PathBuf, String>,
}

/// A user file parsed, before the catalog knows whether its id is its own.
struct Parsed<T> {
    value: T,
    id: String,
    path: PathBuf,
    text: String,
}

impl Catalog {
    /// Only what is compiled in. Fails (never panics) if a bundled file is invalid.
    pub fn bundled() -> Result<Catalog, Vec<Diagnostic>> {
        let mut catalog = Catalog::default();
        let mut errors = Vec::new();
        for (name, text) in bundled::SCALES {
            match Scale::parse(Source::new(name, text)) {
                Ok(scale) => catalog.scales.push(Entry {
                    value: scale,
                    origin: Origin::Bundled,
                }),
                Err(e) => errors.extend(e),
            }
        }
        for (name, text) in bundled::CHARACTERS {
            match Character::parse(Source::new(name, text), |id| catalog.scale(id)) {
                Ok(c) => catalog.characters.push(Entry {
                    value: c,
                    origin: Origin::Bundled,
                }),
                Err(e) => errors.extend(e),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        catalog.sort();
        Ok(catalog)
    }

    /// Bundled files plus the files in the user's data dir (`$INCHARACTER_DATA_DIR`, else the
    /// platform's). Invalid user files are skipped and reported in `problems`.
    pub fn load_user() -> Result<Catalog, BundledInvalid> {
        Catalog::load(crate::paths::data_dir().as_deref()).map_err(BundledInvalid)
    }

    /// Bundled files plus the user's files under `data_dir` (if given). Invalid user files, and user
    /// files sharing an id, are skipped and reported in `problems`.
    pub fn load(data_dir: Option<&Path>) -> Result<Catalog, Vec<Diagnostic>> {
        let mut catalog = Catalog::bundled()?;
        let Some(dir) = data_dir else { return Ok(catalog) };
        // A write of several files killed in the middle (an import, a save) is undone first: a
        // character is read as it was before it, never half old and half new.
        for folder in ["scales", "characters"] {
            crate::files::recover(&dir.join(folder));
            // One that could not be undone (a folder this user may not write) is said, not read past.
            for record in crate::files::stale(&dir.join(folder)) {
                catalog.problems.push(Source::new(&record.display().to_string(), "").whole(
                    "a write killed in the middle could not be undone here (see the log): the files it \
                     changed may be half old and half new; run any import as a user who may write this \
                     folder to undo it",
                ));
            }
        }
        let bundled_scales: Vec<Scale> = catalog.scales.iter().map(|e| e.value.clone()).collect();
        let mut scales = Vec::new();
        for path in toml_files(&dir.join("scales"), &mut catalog.problems) {
            let parsed = read(&path).and_then(|text| {
                let scale = Scale::parse(Source::new(&path.display().to_string(), &text))?;
                Ok(Parsed {
                    id: scale.id.clone(),
                    value: scale,
                    path: path.clone(),
                    text,
                })
            });
            match parsed {
                Ok(p) => scales.push(p),
                Err(e) => catalog.problems.extend(e),
            }
        }
        for group in by_id(scales) {
            match <[_; 1]>::try_from(group) {
                Ok([one]) => catalog.add_scale(one.value, one.path),
                Err(several) => catalog.refuse(Kind::Scale, several),
            }
        }
        // Characters after every scale: their labels name scales.
        let mut characters = Vec::new();
        for path in toml_files(&dir.join("characters"), &mut catalog.problems) {
            let parsed = read(&path).and_then(|text| {
                let c = Character::parse(Source::new(&path.display().to_string(), &text), |id| catalog.scale(id))?;
                Ok(Parsed {
                    id: c.id.clone(),
                    value: c,
                    path: path.clone(),
                    text,
                })
            });
            match parsed {
                Ok(p) => characters.push(p),
                Err(e) => catalog.problems.extend(e),
            }
        }
        for group in by_id(characters) {
            match <[_; 1]>::try_from(group) {
                Ok([one]) => {
                    catalog.read_as.insert(one.path.clone(), one.text);
                    catalog.add_character(one.value, one.path);
                }
                Err(several) => catalog.refuse(Kind::Character, several),
            }
        }
        // The bundled characters still in use, once the user's have replaced theirs.
        catalog.recheck_bundled_characters(&bundled_scales);
        catalog.sort();
        Ok(catalog)
    }

    /// The bundled characters' labels on a bundled scale a user file replaces (the bundled ones are
    /// `bundled_scales`) mean what they meant only if the replacement keeps the range and the
    /// dimensions (names, poles, letters, in order): otherwise they would be measured against what
    /// they were not given for (a 1–5 label on a 1–7 range, a % of E read as a % of I), silently.
    /// They are then left out for that scale, and that is said at the user's file. Kept, they are
    /// filed under the replacement's id as it is spelled (`bfi` for BFI), where they are looked up.
    fn recheck_bundled_characters(&mut self, bundled_scales: &[Scale]) {
        let mut said = Vec::new();
        for entry in &self.scales {
            let Origin::User {
                path,
                overrides_bundled: true,
            } = &entry.origin
            else {
                continue;
            };
            let new = &entry.value;
            let Some(old) = bundled_scales.iter().find(|s| s.id.eq_ignore_ascii_case(&new.id)) else {
                continue;
            };
            let changed = changes_for_labels(old, new);
            if changed.is_empty() {
                if old.id != new.id {
                    for c in self.characters.iter_mut().filter(|c| c.origin == Origin::Bundled) {
                        for source in LabelSource::ALL {
                            let set = c.value.labels.source_mut(source);
                            if let Some(labels) = set.remove(&old.id) {
                                set.insert(new.id.clone(), labels);
                            }
                        }
                    }
                }
                continue;
            }
            let mut left_out = Vec::new();
            for c in self.characters.iter_mut().filter(|c| c.origin == Origin::Bundled) {
                let mut had = false;
                for source in LabelSource::ALL {
                    had |= c.value.labels.source_mut(source).remove(&old.id).is_some();
                }
                if had {
                    left_out.push(c.value.id.clone());
                }
            }
            if left_out.is_empty() {
                continue;
            }
            let shown: Vec<&str> = left_out.iter().take(4).map(String::as_str).collect();
            let more = match left_out.len() - shown.len() {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            said.push(Diagnostic {
                file: path.display().to_string(),
                line: 1,
                column: 1,
                message: format!(
                    "scale {} changes {} of the bundled one: the bundled characters' labels on it are left out ({}{more})",
                    new.id,
                    changed.join(" and "),
                    shown.join(", ")
                ),
            });
        }
        self.notes.extend(said);
    }

    /// Uses none of `files` (which share an id) and says so at each of them, naming the others.
    fn refuse<T>(&mut self, kind: Kind, files: Vec<Parsed<T>>) {
        let id = files[0].id.clone();
        let bundled = match kind {
            Kind::Scale => self.scale_entry(&id).is_some(),
            Kind::Character => self.character_by_id(&id).is_some(),
        };
        let meanwhile = if bundled {
            format!("; meanwhile the bundled {} {id} is used", kind.noun())
        } else {
            String::new()
        };
        let paths: Vec<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
        for f in &files {
            let message = format!("{}{meanwhile}", duplicate_message(kind, &f.id, &f.path, &paths));
            self.problems.push(id_diagnostic(&f.path, &f.text, message));
        }
        self.duplicates.push(Duplicate { kind, id, files: paths });
    }

    fn add_scale(&mut self, scale: Scale, path: PathBuf) {
        let existing = self
            .scales
            .iter()
            .position(|e| e.value.id.eq_ignore_ascii_case(&scale.id));
        let overrides_bundled = existing.is_some_and(|i| self.scales[i].origin == Origin::Bundled);
        let entry = Entry {
            value: scale,
            origin: Origin::User {
                path,
                overrides_bundled,
            },
        };
        match existing {
            Some(i) => self.scales[i] = entry,
            None => self.scales.push(entry),
        }
    }

    fn add_character(&mut self, character: Character, path: PathBuf) {
        let existing = self
            .characters
            .iter()
            .position(|e| e.value.id.eq_ignore_ascii_case(&character.id));
        let overrides_bundled = existing.is_some_and(|i| self.characters[i].origin == Origin::Bundled);
        let entry = Entry {
            value: character,
            origin: Origin::User {
                path,
                overrides_bundled,
            },
        };
        match existing {
            Some(i) => self.characters[i] = entry,
            None => self.characters.push(entry),
        }
    }

    fn sort(&mut self) {
        self.scales.sort_by_key(|e| e.value.id.to_lowercase());
        self.characters.sort_by(|a, b| a.value.id.cmp(&b.value.id));
    }

    /// Writes `character` to its user file (see [`Catalog::character_file`]) atomically: a crash
    /// leaves the old file or the new one.
    pub fn save_character(&self, data_dir: &Path, character: &Character, was: Option<&Character>) -> Result<PathBuf, SaveError> {
        let (path, text) = self.character_file(data_dir, character, was)?;
        crate::files::write_atomic(&path, text.as_bytes()).map_err(|e| SaveError::Write(e.to_string()))?;
        Ok(path)
    }

    /// Where `character` is to be written and what: its user file (the one the catalog read it from,
    /// else `<data dir>/characters/<id>.toml`) and its text, checked to parse back to it. `was`: the
    /// character as the edit began (`None`: a new one). Nothing is replaced unasked, so these are
    /// refused:
    /// - a bundled id (a bundled character is edited as a copy under another id);
    /// - an id another character has, told apart from it only by case, and a new character's id
    ///   any character has;
    /// - an id several user files hold (which one to write is the user's choice);
    /// - a new character whose `<id>.toml` is already there holding something else (a file the
    ///   catalog skipped, or another id);
    /// - a file that no longer holds `was` (another program changed it since it was read).
    pub fn character_file(&self, data_dir: &Path, character: &Character, was: Option<&Character>) -> Result<(PathBuf, String), SaveError> {
        let entry = self.character_by_id(&character.id);
        if let Some(e) = entry {
            if e.value.id != character.id || was.is_none() {
                return Err(SaveError::Invalid(format!(
                    "the id \"{}\" is taken by the character {} (ids are the same whatever their case): \
                     choose another id",
                    character.id, e.value.id
                )));
            }
            if e.origin == Origin::Bundled {
                // An edit that began from the user's file of this id, broken or removed since: the
                // bundled one stands in, but it is not what was edited.
                if was.is_some_and(|w| w.id == character.id && *w != e.value) {
                    return Err(SaveError::Gone(character.id.clone()));
                }
                return Err(SaveError::Bundled(character.id.clone()));
            }
        }
        let held = self.user_files(Kind::Character, &character.id);
        let default = data_dir.join("characters").join(format!("{}.toml", character.id));
        let path = match held.as_slice() {
            // An edit of a character the catalog no longer holds: its file was removed, or cannot be
            // read now, since the edit began. Which file it was is not known here; `default` may be
            // another one.
            [] if was.is_some_and(|w| w.id == character.id) => {
                return Err(SaveError::Gone(character.id.clone()));
            }
            [] if fs::symlink_metadata(&default).is_ok() => {
                return Err(SaveError::Invalid(format!(
                    "{} is there already and is not this character's file (it holds another id, or it is \
                     invalid): move it away or choose another id",
                    default.display()
                )));
            }
            [] => default,
            [one] => one.clone(),
            several => {
                return Err(SaveError::Invalid(format!(
                    "{} files hold the id \"{}\": {}; give all but one of them another id first",
                    several.len(),
                    character.id,
                    several
                        .iter()
                        .map(|f| f.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        };
        // An edit of this very character whose file is gone: removed since it was read, not to be
        // written anew without a word.
        if was.is_some_and(|w| w.id == character.id) && fs::symlink_metadata(&path).is_err() {
            return Err(SaveError::Removed(path));
        }
        // Read once: what is checked for changes is what an edit keeps the layout of.
        let current = was.filter(|_| fs::symlink_metadata(&path).is_ok()).and_then(|_| read(&path).ok());
        if let Some(was) = was
            && fs::symlink_metadata(&path).is_ok()
        {
            // Changed: any byte of what was read (a comment too), or what it reads as.
            let text = current.clone();
            let other_text = self.read_as.get(&path).is_some_and(|read| text.as_ref() != Some(read));
            let now = text.map(|text| {
                Character::parse(Source::new(&path.display().to_string(), &text), |id| self.scale(id))
            });
            if other_text || !matches!(now, Some(Ok(now)) if now == *was) {
                return Err(SaveError::Changed(path));
            }
        }
        let parse = |text: &str| Character::parse(Source::new(&path.display().to_string(), text), |id| self.scale(id));
        let whole = character.to_toml();
        // An edit keeps the file as its author wrote it (comments, layout, strings' quoting) but for
        // the keys that changed; whatever does not read back to the character is written whole.
        let kept = current
            .as_deref()
            .and_then(|old| keep_layout(old, &whole))
            .filter(|text| parse(text).is_ok_and(|c| c == *character));
        let text = kept.unwrap_or(whole);
        let parsed = parse(&text)
            .map_err(|e| SaveError::Invalid(e.iter().map(|d| d.message.clone()).collect::<Vec<_>>().join("; ")))?;
        if parsed != *character {
            return Err(SaveError::Invalid("the file would not read back as written".into()));
        }
        Ok((path, text))
    }

    /// A scale by id, case-insensitively.
    pub fn scale(&self, id: &str) -> Option<&Scale> {
        self.scale_entry(id).map(|e| &e.value)
    }

    pub fn scale_entry(&self, id: &str) -> Option<&Entry<Scale>> {
        self.scales.iter().find(|e| e.value.id.eq_ignore_ascii_case(id.trim()))
    }

    /// A character by id, reference id, name or alias, case-insensitively.
    pub fn character(&self, name: &str) -> Option<&Character> {
        self.character_entry(name).map(|e| &e.value)
    }

    pub fn character_entry(&self, name: &str) -> Option<&Entry<Character>> {
        self.character_by_id(name)
            .or_else(|| self.characters.iter().find(|e| e.value.answers_to(name)))
    }

    /// The character a person named: by its id, else the one character whose id without its
    /// language, reference id, name or alias answers to `name`. `Err` holds the ids of all that answer
    /// (none: an unknown name; several: a name that is not enough, say "Hermione Granger" once a card
    /// of that name is imported beside the bundled one).
    pub fn named_character(&self, name: &str) -> Result<&Character, Vec<String>> {
        if let Some(e) = self.character_by_id(name) {
            return Ok(&e.value);
        }
        let answering: Vec<&Entry<Character>> = self.characters.iter().filter(|e| e.value.answers_to(name)).collect();
        match answering.as_slice() {
            [one] => Ok(&one.value),
            several => Err(several.iter().map(|e| e.value.id.clone()).collect()),
        }
    }

    /// [`Catalog::named_character`]'s id, where a name several characters answer to is the one of
    /// them `has` holds (a session's characters); `Err` holds those of them it holds (none: the name
    /// is unknown, or none of those it names is there).
    pub fn named_character_among(&self, name: &str, has: impl Fn(&str) -> bool) -> Result<String, Vec<String>> {
        match self.named_character(name) {
            Ok(c) => Ok(c.id.clone()),
            Err(several) => match several.into_iter().filter(|id| has(id)).collect::<Vec<_>>().as_slice() {
                [one] => Ok(one.clone()),
                here => Err(here.to_vec()),
            },
        }
    }

    /// A character by its id only, case-insensitively.
    pub fn character_by_id(&self, id: &str) -> Option<&Entry<Character>> {
        self.characters
            .iter()
            .find(|e| e.value.id.eq_ignore_ascii_case(id.trim()))
    }

    /// The user files that hold the `kind` id `id`: the one the catalog uses, or all of those it
    /// refused to pick between. (A file the catalog could not read or parse holds no known id.)
    pub fn user_files(&self, kind: Kind, id: &str) -> Vec<PathBuf> {
        let origin = match kind {
            Kind::Scale => self.scale_entry(id).map(|e| &e.origin),
            Kind::Character => self.character_by_id(id).map(|e| &e.origin),
        };
        let mut files: Vec<PathBuf> = match origin {
            Some(Origin::User { path, .. }) => vec![path.clone()],
            _ => Vec::new(),
        };
        for d in &self.duplicates {
            if d.kind == kind && d.id.eq_ignore_ascii_case(id.trim()) {
                files.extend(d.files.iter().cloned());
            }
        }
        files
    }

    /// The id of the bundled scale or character that has the id `id` (compared case-insensitively),
    /// overridden by a user file or not (then as the user's file spells it).
    pub fn bundled_id(&self, kind: Kind, id: &str) -> Option<String> {
        let (origin, id) = match kind {
            Kind::Scale => self.scale_entry(id).map(|e| (&e.origin, &e.value.id))?,
            Kind::Character => self.character_by_id(id).map(|e| (&e.origin, &e.value.id))?,
        };
        match origin {
            Origin::Bundled
            | Origin::User {
                overrides_bundled: true,
                ..
            } => Some(id.clone()),
            Origin::User { .. } => None,
        }
    }

    /// Validates scale and character files (or directories of them). Scales are checked first so that
    /// characters may carry labels for scales given in the same call. Files given that share an id are
    /// errors, and so is a file given that shares an id with another of the user's files.
    pub fn validate_files(&self, paths: &[PathBuf]) -> Validation {
        let mut files = Vec::new();
        let mut errors = Vec::new();
        for path in paths {
            if path.is_dir() {
                files.extend(toml_files(path, &mut errors));
            } else {
                files.push(path.clone());
            }
        }
        // A file named twice (by itself and by its folder, say) is one file, not a duplicate.
        let mut seen = std::collections::HashSet::new();
        files.retain(|p| seen.insert(canonical(p)));
        let mut scales: Vec<Parsed<Scale>> = Vec::new();
        // The scales whose files have errors, by their id (or, unread, their file's name): a
        // character naming one is told why it is unknown.
        let mut broken: Vec<String> = Vec::new();
        let mut characters = Vec::new();
        let mut checked = 0;
        for path in &files {
            let name = path.display().to_string();
            let text = match read(path) {
                Ok(t) => t,
                Err(e) => {
                    errors.extend(e);
                    continue;
                }
            };
            let source = Source::new(&name, &text);
            let stem = || path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            match toml::from_str::<toml::Table>(&text) {
                Err(e) => {
                    errors.push(source.toml_error(&e));
                    broken.push(stem());
                }
                Ok(table) if table.contains_key("items") => {
                    checked += 1;
                    match Scale::parse(source) {
                        Ok(scale) => scales.push(Parsed {
                            id: scale.id.clone(),
                            value: scale,
                            path: path.clone(),
                            text,
                        }),
                        Err(e) => {
                            errors.extend(e);
                            broken.push(table.get("id").and_then(|v| v.as_str()).map_or_else(stem, str::to_string));
                        }
                    }
                }
                Ok(table) if table.contains_key("experimenter") => characters.push((path.clone(), text)),
                Ok(_) => errors
                    .push(source.whole("neither a scale file (no [[items]]) nor a character file (no `experimenter`)")),
            }
        }
        let mut parsed_characters = Vec::new();
        for (path, text) in characters {
            checked += 1;
            let lookup = |id: &str| {
                scales
                    .iter()
                    .find(|s| s.value.id == id)
                    .map(|s| &s.value)
                    .or_else(|| self.scale(id))
            };
            match Character::parse(Source::new(&path.display().to_string(), &text), lookup) {
                Ok(c) => parsed_characters.push(Parsed {
                    id: c.id.clone(),
                    value: (),
                    path,
                    text,
                }),
                Err(e) => errors.extend(e.into_iter().map(|d| because_broken(d, &broken))),
            }
        }
        let scales = scales.into_iter().map(|s| Parsed {
            value: (),
            id: s.id,
            path: s.path,
            text: s.text,
        });
        let mut flagged = std::collections::HashSet::new();
        let mut valid = BTreeMap::new();
        for (kind, parsed) in [(Kind::Scale, scales.collect()), (Kind::Character, parsed_characters)] {
            for group in by_id(parsed) {
                let paths: Vec<PathBuf> = group.iter().map(|f| f.path.clone()).collect();
                for f in group {
                    if paths.len() > 1 {
                        let message = duplicate_message(kind, &f.id, &f.path, &paths);
                        errors.push(id_diagnostic(&f.path, &f.text, message));
                        flagged.insert(canonical(&f.path));
                    }
                    valid.insert(canonical(&f.path), f);
                }
            }
        }
        // The user's files the catalog refused to pick between, where only some were given here.
        for d in &self.duplicates {
            for file in &d.files {
                let at = canonical(file);
                if let (Some(f), false) = (valid.get(&at), flagged.contains(&at)) {
                    let message = duplicate_message(d.kind, &f.id, &f.path, &d.files);
                    errors.push(id_diagnostic(&f.path, &f.text, message));
                }
            }
        }
        Validation { checked, errors }
    }
}

pub struct Validation {
    pub checked: usize,
    pub errors: Vec<Diagnostic>,
}

/// What `new` changes of `old` that a label on the scale depends on: the range its dimensions are
/// scored on, and the dimensions (their names in order, poles and letters as type codes read them).
fn changes_for_labels(old: &Scale, new: &Scale) -> Vec<String> {
    let mut changed = Vec::new();
    let (a, b) = (old.dimension_range(), new.dimension_range());
    if a != b {
        changed.push(format!("the range ([{}, {}] to [{}, {}])", a.0, a.1, b.0, b.1));
    }
    let names = |s: &Scale| s.dimensions.iter().map(|d| d.name.clone()).collect::<Vec<_>>();
    let read = |d: &crate::domain::scale::Dimension| (d.poles.clone(), d.letter(Some(false)).to_string(), d.letter(Some(true)).to_string());
    if names(old) != names(new) {
        changed.push("the dimensions".into());
    } else if old.dimensions.iter().zip(&new.dimensions).any(|(a, b)| read(a) != read(b)) {
        changed.push("the poles or letters".into());
    }
    changed
}

/// A path as the file system resolves it, to tell one file named twice from two files.
fn canonical(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Parsed files grouped by id, compared case-insensitively as lookups compare them; the groups in
/// the order of their ids, the files of a group in the order given.
fn by_id<T>(files: Vec<Parsed<T>>) -> Vec<Vec<Parsed<T>>> {
    let mut groups: BTreeMap<String, Vec<Parsed<T>>> = BTreeMap::new();
    for f in files {
        groups.entry(f.id.to_lowercase()).or_default().push(f);
    }
    groups.into_values().collect()
}

/// Why `path`, one of the `files` that share the `kind` id `id`, is not used.
fn duplicate_message(kind: Kind, id: &str, path: &Path, files: &[PathBuf]) -> String {
    let others: Vec<String> = files
        .iter()
        .filter(|f| canonical(f) != canonical(path))
        .map(|f| f.display().to_string())
        .collect();
    let noun = kind.noun();
    if files.len() == 2 {
        format!(
            "{noun} id \"{id}\" is also the id of {}: neither file is used until one of them has another id",
            others.join(", ")
        )
    } else {
        format!(
            "{noun} id \"{id}\" is also the id of {}: none of these {} files is used until each has an id of its own",
            others.join(", "),
            files.len()
        )
    }
}

/// A diagnostic at the top-level `id = …` line of a file's `text` (else at its start).
fn id_diagnostic(path: &Path, text: &str, message: String) -> Diagnostic {
    let name = path.display().to_string();
    let source = Source::new(&name, text);
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let key = line.trim_start();
        if key.starts_with('[') {
            break;
        }
        if key
            .strip_prefix("id")
            .is_some_and(|rest| rest.trim_start().starts_with('='))
        {
            let at = offset + line.len() - key.len();
            return source.at(at..at, message);
        }
        offset += line.len();
    }
    source.whole(message)
}

/// The text of a scale or character file: a regular file (a device or a FIFO is refused before it
/// is read) of at most [`MAX_FILE`] bytes, in UTF-8.
fn read(path: &Path) -> Result<String, Vec<Diagnostic>> {
    use crate::files::FileError;
    let name = path.display().to_string();
    crate::files::read_text_limited(path, MAX_FILE, WHAT).map_err(|e| {
        let whole = |message: String| vec![Source::new(&name, "").whole(message)];
        match e {
            FileError::NotUtf8 { line, column, .. } => vec![Diagnostic {
                file: name.clone(),
                line,
                column,
                message: "the file is not valid UTF-8 here".into(),
            }],
            FileError::NotRegular(_) => {
                whole("not a regular file (a device, a FIFO or a folder cannot be read here)".into())
            }
            FileError::TooLarge { limit, what, .. } => whole(format!(
                "larger than the {} allowed for {what}",
                crate::files::size(limit)
            )),
            FileError::Read { error, .. } => whole(format!("cannot read: {error}")),
            other => whole(other.to_string()),
        }
    })
}

/// The `.toml` entries directly inside `dir` other than folders, sorted; a missing dir is simply
/// empty. (A device or a FIFO named `.toml` is listed, so that reading it is refused aloud.)
fn toml_files(dir: &Path, problems: &mut Vec<Diagnostic>) -> Vec<PathBuf> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            problems.push(Source::new(&dir.display().to_string(), "").whole(format!("cannot list directory: {e}")));
            return Vec::new();
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_catalog_file(p))
        .collect();
    files.sort();
    files
}

/// Whether the catalog reads `path` (in a data folder's `characters/` or `scales/`): a `.toml`
/// entry other than a folder. Hidden files are an editor's (Emacs' `.#name.toml` lock links,
/// backups), not the user's.
pub fn is_catalog_file(path: &Path) -> bool {
    !path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))
        && !path.is_dir()
        && path.extension().is_some_and(|x| x == "toml")
}

/// Why a character was not saved.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    #[error("{0} is bundled and read-only: duplicate it to edit a copy")]
    Bundled(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Write(String),
    /// The file no longer holds the character the edit began from.
    #[error(
        "{} changed since it was read (another program wrote it): nothing saved; the list now shows it as \
         it is; this edit stays open to copy from, and Esc leaves it (its changes are not saved)",
        .0.display()
    )]
    Changed(PathBuf),
    /// The file the edit began from is gone.
    #[error(
        "{} was removed since it was read (by another program): nothing saved; this edit stays open to \
         copy from, and Esc leaves it (its changes are not saved)",
        .0.display()
    )]
    Removed(PathBuf),
    /// The character the edit began from is no longer in the catalog: its file removed, or
    /// unreadable now.
    #[error(
        "character {0} is no longer in the data folder as the edit found it (its file removed, given another \
         id, or unreadable now: `incharacter validate` says which): nothing saved; this edit stays open to \
         copy from, and Esc leaves it (its changes are not saved)"
    )]
    Gone(String),
}

/// The scales and characters built into the binary do not parse: a build problem, never the user's.
#[derive(Debug, thiserror::Error)]
#[error("the bundled assets are invalid (a build problem):\n{}", .0.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n"))]
pub struct BundledInvalid(pub Vec<Diagnostic>);

/// `d`, said of a scale whose file was checked beside it and has errors (`broken`), with that reason:
/// "unknown scale" alone sent one looking for a missing file.
fn because_broken(mut d: Diagnostic, broken: &[String]) -> Diagnostic {
    let named = d.message.split('"').nth(1).filter(|_| d.message.contains("name unknown scale \""));
    if let Some(id) = named
        && broken.iter().any(|b| b.eq_ignore_ascii_case(id))
    {
        d.message.push_str(": its file, checked here, has errors (said above)");
    }
    d
}

#[cfg(test)]
mod tests;
