//! Importing characters from other role-playing projects. A ChatHaruhi character folder
//! (`system_prompt.txt` + `texts/*.txt`, lines `Name:「utterance」`) becomes a character file
//! `<data dir>/characters/<id>.toml` and its memories `<id>.memories.json`. Sizes are bounded, ids are
//! checked (no path can escape the data dir), and nothing is written unless the whole import is valid.
//! (The original code silently fell back to Haruhi for a name it did not know; here the name must be
//! seen speaking in the texts.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::domain::character::Character;
use crate::domain::diagnostic::Source;
use crate::domain::scale::Scale;

const MAX_FILE: u64 = 1 << 20;
const MAX_FILES: usize = 5000;
const MAX_TOTAL: u64 = 64 << 20;

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
    pub character_file: PathBuf,
    pub memories_file: PathBuf,
    pub memories: usize,
}

fn read_bounded(path: &Path, total: &mut u64) -> Result<String, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    if meta.len() > MAX_FILE {
        return Err(format!(
            "{}: {} bytes is more than the {} allowed per file",
            path.display(),
            meta.len(),
            MAX_FILE
        ));
    }
    *total += meta.len();
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

#[derive(Serialize)]
struct CharacterFile<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reference_id: Option<&'a str>,
    name: &'a str,
    aliases: Vec<&'a str>,
    language: &'a str,
    experimenter: &'a str,
    work: &'a str,
    description: &'a str,
    labels: BTreeMap<&'static str, BTreeMap<String, BTreeMap<String, LabelOut>>>,
}

#[derive(Serialize)]
struct LabelOut {
    score: toml::Value,
    #[serde(rename = "type")]
    kind: String,
}

fn labels_of(c: &Character) -> BTreeMap<&'static str, BTreeMap<String, BTreeMap<String, LabelOut>>> {
    use crate::domain::character::LabelSource;
    let mut out = BTreeMap::new();
    for (key, source) in [("pdb", LabelSource::Pdb), ("annotation", LabelSource::Annotation)] {
        let set: BTreeMap<String, BTreeMap<String, LabelOut>> = c
            .labels
            .source(source)
            .iter()
            .map(|(scale, dims)| {
                let dims = dims
                    .iter()
                    .map(|(d, l)| {
                        let score = l.score.map_or(toml::Value::String("X".into()), toml::Value::Float);
                        (
                            d.clone(),
                            LabelOut {
                                score,
                                kind: format!("{:?}", l.kind),
                            },
                        )
                    })
                    .collect();
                (scale.clone(), dims)
            })
            .collect();
        if !set.is_empty() {
            out.insert(key, set);
        }
    }
    out
}

/// Imports a ChatHaruhi character folder into `data_dir`. `scale` looks up scales for validation;
/// `known` finds a character the catalog already has under the new id, whose labels, reference id,
/// aliases and experimenter the import keeps (an import adds a profile and memories, it does not
/// erase what is known about the character).
pub fn chatharuhi_folder<'s>(
    dir: &Path,
    data_dir: &Path,
    options: &Options,
    scale: impl Fn(&str) -> Option<&'s Scale>,
    known: impl Fn(&str) -> Option<&'s Character>,
) -> Result<Imported, String> {
    let mut total = 0;
    let description = read_bounded(&dir.join("system_prompt.txt"), &mut total)?;
    let texts_dir = dir.join("texts");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&texts_dir)
        .map_err(|e| format!("{}: {e}", texts_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    if files.is_empty() {
        return Err(format!("{}: no .txt memories", texts_dir.display()));
    }
    if files.len() > MAX_FILES {
        return Err(format!(
            "{}: {} files, at most {MAX_FILES}",
            texts_dir.display(),
            files.len()
        ));
    }
    // Natural order: text_2 before text_10.
    files.sort_by_key(|p| {
        let stem = p
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let digits: String = stem
            .chars()
            .rev()
            .take_while(char::is_ascii_digit)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        (
            stem.trim_end_matches(|c: char| c.is_ascii_digit()).to_string(),
            digits.parse::<u64>().unwrap_or(0),
            stem,
        )
    });
    let mut chunks = Vec::new();
    for f in &files {
        let text = read_bounded(f, &mut total)?;
        let clean: String = text.chars().filter(|c| !c.is_control() || *c == '\n').collect();
        if !clean.trim().is_empty() {
            chunks.push(clean.trim().to_string());
        }
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for c in &chunks {
        for s in speakers(c) {
            *counts.entry(s).or_default() += 1;
        }
    }
    let folder = dir
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = options.name.clone().unwrap_or_else(|| folder.clone());
    if !counts.contains_key(&name) {
        let mut top: Vec<(&String, &usize)> = counts.iter().collect();
        top.sort_by(|a, b| b.1.cmp(a.1));
        let seen: Vec<&str> = top.iter().take(8).map(|(n, _)| n.as_str()).collect();
        return Err(format!(
            "\"{name}\" never speaks in {} (speakers seen: {}); pass --name with the speaker's name as written",
            texts_dir.display(),
            seen.join(", ")
        ));
    }
    let cjk = chunks
        .iter()
        .flat_map(|c| c.chars())
        .filter(|c| ('\u{4e00}'..='\u{9fff}').contains(c))
        .count();
    let letters = chunks
        .iter()
        .flat_map(|c| c.chars())
        .filter(|c| c.is_alphabetic())
        .count()
        .max(1);
    let language = options
        .language
        .clone()
        .unwrap_or_else(|| if cjk * 3 > letters { "zh".into() } else { "en".into() });
    let id = options.id.clone().unwrap_or_else(|| {
        let slug: String = name
            .to_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let slug = slug.split('-').filter(|s| !s.is_empty()).collect::<Vec<_>>().join("-");
        format!(
            "{}-{language}",
            if slug.is_empty() { folder.to_lowercase() } else { slug }
        )
    });
    if !valid_id(&id) {
        return Err(format!(
            "id \"{id}\" must be lower-case letters, digits and '-' (pass --id)"
        ));
    }
    let existing = known(&id).filter(|c| c.id == id);
    let experimenter = match (&options.experimenter, existing) {
        (Some(e), _) => e.clone(),
        (None, Some(c)) => c.experimenter.clone(),
        (None, None) => counts
            .iter()
            .filter(|(n, _)| **n != name)
            .max_by_key(|(_, c)| **c)
            .map(|(n, _)| n.clone())
            .ok_or("nobody else speaks in the texts: pass --experimenter")?,
    };
    let work = format!("imported from ChatHaruhi ({folder})");
    let mut aliases: Vec<&str> = existing
        .map(|c| c.aliases.iter().map(String::as_str).collect())
        .unwrap_or_default();
    if !aliases.contains(&name.as_str()) {
        aliases.push(&name);
    }
    let file = CharacterFile {
        id: &id,
        reference_id: existing.and_then(|c| c.reference_id.as_deref()),
        name: &name,
        aliases,
        language: &language,
        experimenter: &experimenter,
        work: &work,
        description: description.trim(),
        labels: existing.map(labels_of).unwrap_or_default(),
    };
    let text = toml::to_string(&file).map_err(|e| e.to_string())?;
    let characters = data_dir.join("characters");
    let character_file = characters.join(format!("{id}.toml"));
    Character::parse(Source::new(&character_file.display().to_string(), &text), scale)
        .map_err(|e| e.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n"))?;
    let memories_file = super::memories::path(data_dir, &id);
    std::fs::create_dir_all(&characters).map_err(|e| format!("{}: {e}", characters.display()))?;
    crate::session::write_atomic(&memories_file, &chunks).map_err(|e| format!("{}: {e}", memories_file.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(&characters).map_err(|e| e.to_string())?;
    std::io::Write::write_all(&mut tmp, text.as_bytes()).map_err(|e| e.to_string())?;
    tmp.persist(&character_file).map_err(|e| e.to_string())?;
    Ok(Imported {
        id,
        character_file,
        memories_file,
        memories: chunks.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(texts: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let luna = dir.path().join("Luna");
        std::fs::create_dir_all(luna.join("texts")).unwrap();
        std::fs::write(luna.join("system_prompt.txt"), "I want you to act like Luna.").unwrap();
        for (name, text) in texts {
            std::fs::write(luna.join("texts").join(name), text).unwrap();
        }
        dir
    }

    #[test]
    fn imports_a_folder_with_inferred_experimenter_and_language() {
        let src = folder(&[
            ("text_10.txt", "Harry:「Hello」\nLuna:「Nargles.」"),
            ("text_2.txt", "Harry:「Luna?」\nLuna:「Yes?」\nGinny:「Hi」"),
        ]);
        let data = tempfile::tempdir().unwrap();
        let got = chatharuhi_folder(
            &src.path().join("Luna"),
            data.path(),
            &Options::default(),
            |_| None,
            |_| None,
        )
        .unwrap();
        assert_eq!(got.id, "luna-en");
        assert_eq!(got.memories, 2);
        let toml = std::fs::read_to_string(&got.character_file).unwrap();
        assert!(toml.contains("experimenter = \"Harry\""), "{toml}");
        let chunks: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&got.memories_file).unwrap()).unwrap();
        assert!(chunks[0].contains("Luna?"), "natural order: text_2 first");
    }

    #[test]
    fn unknown_names_and_bad_ids_write_nothing() {
        let src = folder(&[("text_0.txt", "Harry:「Hello」\nLuna:「Hi」")]);
        let data = tempfile::tempdir().unwrap();
        let opts = Options {
            name: Some("Haruhi".into()),
            ..Options::default()
        };
        let e = chatharuhi_folder(&src.path().join("Luna"), data.path(), &opts, |_| None, |_| None).unwrap_err();
        assert!(e.contains("\"Haruhi\" never speaks") && e.contains("Luna"), "{e}");
        let opts = Options {
            id: Some("../../etc".into()),
            ..Options::default()
        };
        assert!(
            chatharuhi_folder(&src.path().join("Luna"), data.path(), &opts, |_| None, |_| None)
                .unwrap_err()
                .contains("must be lower-case")
        );
        assert!(
            std::fs::read_dir(data.path()).unwrap().next().is_none(),
            "nothing written"
        );
    }
}
