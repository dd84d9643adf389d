//! The scales and characters the workbench knows: the bundled ones compiled into the binary, plus user
//! files in `<data dir>/scales` and `<data dir>/characters` (a user file with a bundled id replaces it,
//! and says so). Also validates arbitrary files for `incharacter validate`.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::domain::character::Character;
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

#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub scales: Vec<Entry<Scale>>,
    pub characters: Vec<Entry<Character>>,
    /// Problems in user files; those files were skipped.
    pub problems: Vec<Diagnostic>,
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

    /// Bundled files plus the user's files under `data_dir` (if given). Invalid user files are skipped
    /// and reported in `problems`.
    pub fn load(data_dir: Option<&Path>) -> Result<Catalog, Vec<Diagnostic>> {
        let mut catalog = Catalog::bundled()?;
        let Some(dir) = data_dir else { return Ok(catalog) };
        for path in toml_files(&dir.join("scales"), &mut catalog.problems) {
            match read(&path).and_then(|text| Scale::parse(Source::new(&path.display().to_string(), &text))) {
                Ok(scale) => catalog.add_scale(scale, path),
                Err(e) => catalog.problems.extend(e),
            }
        }
        for path in toml_files(&dir.join("characters"), &mut catalog.problems) {
            let parsed = read(&path).and_then(|text| {
                Character::parse(Source::new(&path.display().to_string(), &text), |id| catalog.scale(id))
            });
            match parsed {
                Ok(c) => catalog.add_character(c, path),
                Err(e) => catalog.problems.extend(e),
            }
        }
        catalog.sort();
        Ok(catalog)
    }

    fn add_scale(&mut self, scale: Scale, path: PathBuf) {
        let existing = self.scales.iter().position(|e| e.value.id == scale.id);
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
        let existing = self.characters.iter().position(|e| e.value.id == character.id);
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

    /// Writes `character` as `<data dir>/characters/<id>.toml` (atomically: a crash leaves the old file
    /// or the new one), after checking that the file parses back to it. A bundled id is refused: a
    /// bundled character is edited as a copy under another id.
    pub fn save_character(&self, data_dir: &Path, character: &Character) -> Result<PathBuf, SaveError> {
        if self
            .character_entry(&character.id)
            .is_some_and(|e| e.origin == Origin::Bundled && e.value.id == character.id)
        {
            return Err(SaveError::Bundled(character.id.clone()));
        }
        let path = data_dir.join("characters").join(format!("{}.toml", character.id));
        let text = character.to_toml();
        let parsed = Character::parse(Source::new(&path.display().to_string(), &text), |id| self.scale(id))
            .map_err(|e| SaveError::Invalid(e.iter().map(|d| d.message.clone()).collect::<Vec<_>>().join("; ")))?;
        if parsed != *character {
            return Err(SaveError::Invalid("the file would not read back as written".into()));
        }
        crate::journal::write_bytes_atomic(&path, text.as_bytes())
            .map_err(|e| SaveError::Write(format!("{}: {e}", path.display())))?;
        Ok(path)
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
        self.characters
            .iter()
            .find(|e| e.value.id.eq_ignore_ascii_case(name.trim()))
            .or_else(|| self.characters.iter().find(|e| e.value.answers_to(name)))
    }

    /// Validates scale and character files (or directories of them). Scales are checked first so that
    /// characters may carry labels for scales given in the same call.
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
        let mut scales: Vec<Scale> = Vec::new();
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
            match toml::from_str::<toml::Table>(&text) {
                Err(e) => errors.push(source.toml_error(&e)),
                Ok(table) if table.contains_key("items") => {
                    checked += 1;
                    match Scale::parse(source) {
                        Ok(scale) => scales.push(scale),
                        Err(e) => errors.extend(e),
                    }
                }
                Ok(table) if table.contains_key("experimenter") => characters.push((name.clone(), text)),
                Ok(_) => errors
                    .push(source.whole("neither a scale file (no [[items]]) nor a character file (no `experimenter`)")),
            }
        }
        for (name, text) in &characters {
            checked += 1;
            let lookup = |id: &str| scales.iter().find(|s| s.id == id).or_else(|| self.scale(id));
            if let Err(e) = Character::parse(Source::new(name, text), lookup) {
                errors.extend(e);
            }
        }
        Validation { checked, errors }
    }
}

pub struct Validation {
    pub checked: usize,
    pub errors: Vec<Diagnostic>,
}

fn read(path: &Path) -> Result<String, Vec<Diagnostic>> {
    let name = path.display().to_string();
    let bytes = fs::read(path).map_err(|e| vec![Source::new(&name, "").whole(format!("cannot read: {e}"))])?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let text = String::from_utf8_lossy(&e.as_bytes()[..valid]).into_owned();
        vec![Source::new(&name, &text).at(valid..valid, "the file is not valid UTF-8 here")]
    })
}

/// The `.toml` files directly inside `dir`, sorted; a missing dir is simply empty.
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
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

/// Why a character was not saved.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    #[error("{0} is bundled and read-only: duplicate it to edit a copy")]
    Bundled(String),
    #[error("{0}")]
    Invalid(String),
    #[error("cannot write {0}")]
    Write(String),
}

/// The scales and characters built into the binary do not parse: a build problem, never the user's.
#[derive(Debug, thiserror::Error)]
#[error("the bundled assets are invalid (a build problem):\n{}", .0.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n"))]
pub struct BundledInvalid(pub Vec<Diagnostic>);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::character::{Label, LabelSource, LabelType};
    use crate::domain::diagnostic::Source;

    #[test]
    fn bundled_assets_load() {
        let c = Catalog::bundled()
            .unwrap_or_else(|e| panic!("{}", e.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n")));
        assert_eq!(c.scales.len(), 15);
        assert_eq!(c.characters.len(), 32);
        assert!(c.scale("bfi").is_some());
        assert_eq!(
            c.character("Hermione Granger").map(|h| h.id.as_str()),
            Some("hermione-en")
        );
        assert_eq!(c.character("钟离").map(|h| h.id.as_str()), Some("zhongli-zh"));
    }

    fn parse(c: &Catalog, text: &str) -> Result<Character, Vec<Diagnostic>> {
        Character::parse(Source::new("c.toml", text), |id| c.scale(id))
    }

    #[test]
    fn every_bundled_character_writes_back_to_itself() {
        let c = Catalog::bundled().unwrap();
        for e in &c.characters {
            let text = e.value.to_toml();
            assert_eq!(parse(&c, &text).as_ref(), Ok(&e.value), "{}:\n{text}", e.value.id);
        }
    }

    const AUTHORED: &str = r#"id = "wren-en"
name = "Wren"
language = "en"
experimenter = "User"
description = "You are Wren, a lighthouse keeper."

[card]
tags = ["sea", "quiet"]
creator = "someone"
version = "1.2"

[targets]
16Personalities = "INFP"

[targets.BFI]
Extraversion = "L"
Agreeableness = 4.5
Neuroticism = "h"
"#;

    #[test]
    fn targets_are_codes_letters_or_numbers_and_write_back() {
        let c = Catalog::bundled().unwrap();
        let wren = parse(&c, AUTHORED).unwrap();
        let t = &wren.labels.target;
        assert_eq!(t["BFI"]["Extraversion"], Label { score: None, kind: LabelType::L });
        assert_eq!(t["BFI"]["Agreeableness"], Label { score: Some(4.5), kind: LabelType::H });
        assert_eq!(t["BFI"]["Neuroticism"].kind, LabelType::H);
        assert_eq!(t["BFI"].len(), 3, "dimensions without a target have none");
        let p16 = c.scale("16Personalities").unwrap();
        assert_eq!(wren.code(p16, LabelSource::Target).as_deref(), Some("INFP"));
        assert_eq!(wren.labels.exclusion_source("BFI"), LabelSource::Target);
        assert_eq!(wren.card.as_ref().unwrap().tags, ["sea", "quiet"]);
        assert_eq!(parse(&c, &wren.to_toml()), Ok(wren));
    }

    #[test]
    fn bad_targets_are_located() {
        let c = Catalog::bundled().unwrap();
        let err = |from: &str, to: &str| {
            let e = parse(&c, &AUTHORED.replace(from, to)).unwrap_err();
            (e[0].line, e[0].message.clone())
        };
        let (line, m) = err("\"INFP\"", "\"INF\"");
        assert_eq!(line, 13);
        assert!(m.contains("one letter per dimension (E/I S/N T/F J/P)") || m.contains("one letter per dimension"), "{m}");
        let (_, m) = err("\"INFP\"", "\"IQFP\"");
        assert!(m.contains("\"Q\""), "{m}");
        let (line, m) = err("4.5", "7");
        assert_eq!(line, 17);
        assert!(m.contains("outside [1, 5]"), "{m}");
        let (_, m) = err("Neuroticism = \"h\"", "Neuroticism = \"maybe\"");
        assert!(m.contains("\"H\", \"L\" or a number"), "{m}");
        let (line, m) = err("Agreeableness", "Kindness");
        assert_eq!(line, 17);
        assert!(m.contains("no dimension \"Kindness\""), "{m}");
        let (_, m) = err("[targets.BFI]", "[targets.NOPE]");
        assert!(m.contains("unknown scale \"NOPE\""), "{m}");
    }

    #[test]
    fn the_version_follows_what_the_agent_is_given() {
        let c = Catalog::bundled().unwrap();
        let h = c.character("hermione-en").unwrap().clone();
        let v = h.version(&[]);
        assert_eq!(v.len(), 64);
        assert!(v.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        let mut renamed = h.clone();
        renamed.name = "H. Granger".into();
        renamed.labels.target.clear();
        assert_eq!(renamed.version(&[]), v, "names and labels do not change it");
        let mut edited = h.clone();
        edited.description.push('!');
        assert_ne!(edited.version(&[]), v);
        assert_ne!(h.version(&["Harry:「Hi」".into()]), v);
        let mut asked_by_ron = h.clone();
        asked_by_ron.experimenter = "Ron".into();
        assert_ne!(asked_by_ron.version(&[]), v);
    }
}
