//! Character cards ([`crate::rpa::card`]: V1, V2, V3; JSON or PNG) become characters. The role-play
//! prompt is written in the character's language from the card's parts, macros resolved (`{{user}}`
//! is the experimenter), empty parts left out, the parts separated by blank lines:
//!
//! ```text
//! {system_prompt}
//! You are {name}.                                                   你是{name}。
//! {description}
//! Personality: {personality}                                        性格：{personality}
//! Scenario: {scenario}                                              情景：{scenario}
//! Stay in character and answer every question as {name} would.     请始终以{name}的身份和口吻来回答，不要跳出角色。
//! ```
//!
//! `post_history_instructions` becomes the character's final instruction, sent after the question
//! ([`crate::rpa::prompt`]). A card this program exported from a character of its own
//! (`extensions.incharacter.id`) holds the whole prompt in its description, which is taken as it is,
//! with its language and experimenter. The memories are the greetings (`first_mes`, then
//! `alternate_greetings`): a greeting in the character's words becomes `Name:「…」`, a narrating one
//! (see [`card::is_narration`]) stays as it is written; then one chunk per `<START>` block of
//! `mes_example`. Line breaks and code blocks are kept. Targets in `extensions.incharacter.targets`
//! become the character's targets. The card itself (and the PNG it came in) is kept beside the
//! character for `export-card` (see [`crate::rpa::card`]). The name is `--name`, else the card's; the
//! experimenter is `--experimenter`, else the card's `extensions.incharacter.experimenter`, else that of
//! a character already under the id (whose labels and aliases the import keeps), else "User". A card
//! file is JSON of at most 2 MiB, or a PNG of at most 16 MiB whose card chunk holds at most 3 MiB of
//! base64 decoding to at most 2 MiB. The import says what it did with each field ([`Imported::report`]).

use std::path::Path;

use base64::Engine as _;

use super::{
    Existing, ImportError, Imported, Options, character_id, character_path, claim, detect_language, held_spelling,
    imported_character, read_bytes, write_files,
};
use crate::domain::character::{CardInfo, Character, LabelSet};
use crate::domain::scale::{Language, Scale};
use crate::rpa::card::{self, Card, CardError, MAX_JSON, MAX_PNG, MemoryKind, clean, one_line, png};

/// Imports a character card (JSON, or a PNG carrying one) into `data_dir`. `scale` looks up scales for
/// validation; `existing` tells what already holds the new id (refused unless `options.replace`).
pub fn character_card<'s>(
    file: &Path,
    data_dir: &Path,
    options: &Options,
    scale: impl Fn(&str) -> Option<&'s Scale>,
    existing: impl Fn(&str) -> Existing<'s, Character>,
) -> Result<Imported, ImportError> {
    let shown = file.display();
    let (card, came) = read(file)?;
    let (image, json) = match came {
        Came::Png(bytes) => (Some(bytes), None),
        Came::Json(text) => (None, Some(text)),
    };
    let ours = card.ours.clone();
    let whole_prompt = ours.as_ref().is_some_and(card::Ours::whole_prompt);
    let name = one_line(options.name.as_deref().unwrap_or(&card.name));
    if name.is_empty() {
        return Err("--name is empty".into());
    }
    let language = match options.language.as_deref() {
        Some(code) => Language::parse(code).ok_or_else(|| format!("--language {code}: use en or zh"))?,
        None => match ours.as_ref().and_then(|o| o.language.as_deref()) {
            Some(code) => Language::parse(code)
                .ok_or_else(|| format!("{shown}: extensions.incharacter.language \"{code}\" is not en or zh"))?,
            None => detect_language(
                [
                    &card.system_prompt,
                    &card.description,
                    &card.personality,
                    &card.scenario,
                    &card.first_mes,
                    &card.mes_example,
                ]
                .into_iter()
                .chain(&card.alternate_greetings)
                .map(String::as_str),
            ),
        },
    };
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let id = character_id(options, &name, &stem, language.code())?;
    let _one = super::one_import_at_a_time(data_dir, options.waiting)?;
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
    let (existing, carried) = super::carried_over(holders.entry, &name);
    let experimenter = options
        .experimenter
        .as_deref()
        .or(ours.as_ref().and_then(|o| o.experimenter.as_deref()))
        .or(existing.map(|c| c.experimenter.as_str()))
        .map_or_else(|| "User".to_string(), one_line);
    let description = card::prompt(&card, &name, &experimenter, language);
    if description.trim().is_empty() {
        return Err(format!("{shown}: the card's description is empty").into());
    }
    let memories = card::memories(&card, &name, &experimenter);
    let chunks: Vec<String> = memories.iter().map(|(chunk, _)| chunk.clone()).collect();
    let info = CardInfo {
        tags: card
            .tags
            .iter()
            .map(|t| one_line(t))
            .filter(|t| !t.is_empty())
            .collect(),
        creator: one_line(&card.creator),
        version: one_line(&card.character_version),
        notes: clean(&card.creator_notes),
        imported_name: name.clone(),
        imported_experimenter: experimenter.clone(),
    };
    let by = if info.creator.is_empty() {
        String::new()
    } else {
        format!(" by {}", info.creator)
    };
    // A card the workbench wrote of a character of its own brings back what a card has no field for.
    let own = ours.as_ref().filter(|o| o.whole_prompt());
    let work = match own.and_then(|o| o.work.as_deref()).map(one_line) {
        Some(work)
            if !work.is_empty()
                && !work.chars().any(|c| crate::domain::acts_on_terminal(c) || crate::domain::shows_nothing(c)) =>
        {
            work
        }
        _ => format!("imported from a character card{by}"),
    };
    let targets = match ours.as_ref().and_then(|o| o.targets.as_ref()) {
        Some(targets) => Some(read_targets(targets, &scale).map_err(|(at, e)| {
            // Located in a JSON card (a V2 card's fields are under "data"); a PNG's has no lines.
            let place = json.as_deref().and_then(|text| {
                let source = crate::domain::diagnostic::Source::new("", text);
                let within = ["extensions", "incharacter", "targets"];
                let path: Vec<&str> = within.iter().copied().chain(at.iter().map(String::as_str)).collect();
                [vec!["data"], vec![]].into_iter().find_map(|outer| {
                    let full: Vec<&str> = outer.into_iter().chain(path.iter().copied()).collect();
                    source.json_at(&full)
                })
            });
            match place {
                Some((line, column)) => format!("{shown}:{line}:{column}: {e}"),
                None => format!("{shown}: {e}"),
            }
        })?),
        None => None,
    };
    // A card brings its own info, in place of the card an earlier import kept.
    let mut character = Character {
        card: Some(info),
        post_history: card::clean(&card::resolve(&card.post_history_instructions, &name, &experimenter)),
        ..imported_character(existing, id, name, language, experimenter, work, description)
    };
    if let Some(targets) = targets.clone() {
        character.labels.target = targets;
    }
    let restored = own.map(|own| restore(&mut character, own)).unwrap_or_default();
    let mut report = report(&card, &character, &memories, whole_prompt, image.is_some(), targets.as_ref());
    if !restored.is_empty() {
        report.push(format!("from extensions.incharacter: {}", restored.join("; ")));
    }
    report.extend(carried);
    let stored = kept(&card.json, &shown.to_string())?;
    let mut imported = write_files(
        data_dir,
        character,
        &chunks,
        scale,
        &shown.to_string(),
        path,
        replaced,
        Some((&stored, image.as_deref())),
    )?;
    imported.report = report;
    Ok(imported)
}

/// What a card the workbench wrote of a character of its own (`own`) brings back that a card has no
/// field for: its other aliases and catchphrases (its work is taken with the rest); what was taken,
/// and left out, in the report's words.
fn restore(character: &mut Character, own: &card::Ours) -> Vec<String> {
    let mut restored = Vec::new();
    // Aliases mask answers wherever they stand: one a file could not hold, or of one letter ("I",
    // "a"), would mask far more than a name; said in the report either way.
    let fit = |a: &String| {
        !a.chars().any(|c| crate::domain::acts_on_terminal(c) || crate::domain::shows_nothing(c))
            && a.chars().filter(|c| c.is_alphanumeric()).count() >= 2
    };
    // In the card's order when it places the name (a card the workbench wrote lists it where the
    // character had it), the character's own aliases after; else, as cards without it were read,
    // the character's (its name first) and then the card's new ones.
    let before = std::mem::take(&mut character.aliases);
    for alias in own.aliases.iter().map(|a| one_line(a)).filter(|a| !a.is_empty()) {
        if !fit(&alias) {
            restored.push(format!("alias {:?} left out (it would mask more than a name)", alias));
        } else if !character.aliases.contains(&alias) {
            if !before.contains(&alias) {
                restored.push(format!("alias {alias}"));
            }
            character.aliases.push(alias);
        }
    }
    let listed = std::mem::take(&mut character.aliases);
    character.aliases = match listed.contains(&character.name) {
        true => {
            let missing: Vec<String> = before.into_iter().filter(|a| !listed.contains(a)).collect();
            listed.into_iter().chain(missing).collect()
        }
        false => {
            let new: Vec<String> = listed.into_iter().filter(|a| !before.contains(a)).collect();
            before.into_iter().chain(new).collect()
        }
    };
    character.catchphrases = own.catchphrases.iter().map(|c| one_line(c)).filter(|c| !c.is_empty()).collect();
    if !character.catchphrases.is_empty() {
        restored.push(format!("{} catchphrase(s)", character.catchphrases.len()));
    }
    if !character.work.starts_with("imported from a character card") {
        restored.push(format!("work {}", character.work));
    }
    restored
}

/// `extensions.incharacter.targets` (scale → dimension → "H" | "L" | number) as the character's targets,
/// checked against the scales as a character file's `[targets]` are.
/// A problem is said with where it is: the keys under the targets (scale, then dimension).
fn read_targets<'s>(
    targets: &serde_json::Map<String, serde_json::Value>,
    scale: &impl Fn(&str) -> Option<&'s Scale>,
) -> Result<LabelSet, (Vec<String>, String)> {
    let mut set = LabelSet::new();
    for (id, dims) in targets {
        let at = |keys: &[&str]| keys.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        let s = scale(id).ok_or_else(|| {
            (at(&[id]), format!("extensions.incharacter.targets: unknown scale \"{id}\""))
        })?;
        let dims = dims.as_object().ok_or_else(|| {
            (at(&[id]), format!("extensions.incharacter.targets.{id} must be an object of dimensions"))
        })?;
        let mut labels = std::collections::BTreeMap::new();
        for (dim, value) in dims {
            if s.dimension_index(dim).is_none() {
                return Err((
                    at(&[id, dim]),
                    format!("extensions.incharacter.targets.{id}: scale {} has no dimension \"{dim}\"", s.id),
                ));
            }
            let value = match value {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                _ => {
                    return Err((
                        at(&[id, dim]),
                        format!("extensions.incharacter.targets.{id}.{dim}: use \"H\", \"L\" or a number"),
                    ));
                }
            };
            let label = crate::domain::character::target(s, dim, &value)
                .map_err(|e| (at(&[id, dim]), format!("extensions.incharacter.targets.{id}: {e}")))?;
            labels.insert(dim.clone(), label);
        }
        // Kept under the scale's own id, as a character file's are read in any case.
        if set.insert(s.id.clone(), labels).is_some() {
            return Err((
                at(&[id]),
                format!("extensions.incharacter.targets: scale {} again (as \"{id}\")", s.id),
            ));
        }
    }
    Ok(set)
}

/// `n` `thing`s, in the singular for one: "1 memory", "3 memories".
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What the import did with each field of `card`, one line each.
fn report(
    card: &Card,
    c: &Character,
    memories: &[(String, MemoryKind)],
    whole_prompt: bool,
    image: bool,
    targets: Option<&LabelSet>,
) -> Vec<String> {
    let mut lines = Vec::new();
    let given = |fields: &[(&str, &str)]| -> Vec<String> {
        fields
            .iter()
            .filter(|(_, text)| !text.trim().is_empty())
            .map(|(key, _)| key.to_string())
            .collect()
    };
    if whole_prompt {
        lines.push("prompt: the description as it is (a card incharacter exported)".to_string());
    } else {
        let parts = given(&[
            ("system_prompt", &card.system_prompt),
            ("description", &card.description),
            ("personality", &card.personality),
            ("scenario", &card.scenario),
        ]);
        lines.push(format!(
            "prompt: {} ({{{{char}}}} → {}, {{{{user}}}} → {})",
            parts.join(", "),
            c.name,
            c.experimenter
        ));
    }
    if !c.post_history.is_empty() {
        lines.push("post_history_instructions: sent after each question, as the final instruction".into());
    }
    let greetings = memories.iter().filter(|(_, k)| *k != MemoryKind::Example).count();
    if greetings > 0 {
        let narration = memories.iter().filter(|(_, k)| *k == MemoryKind::Narration).count();
        let from = if card.alternate_greetings.is_empty() {
            "first_mes".to_string()
        } else {
            format!("first_mes and {}", count(card.alternate_greetings.len(), "alternate greeting", "alternate greetings"))
        };
        let kinds: Vec<String> = [
            (greetings - narration, "in the character's words"),
            (narration, "as narration"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, how)| format!("{n} {how}"))
        .collect();
        lines.push(format!(
            "greetings: {from} → {} ({})",
            count(greetings, "memory", "memories"),
            kinds.join(", ")
        ));
    }
    let examples = memories.len() - greetings;
    if examples > 0 {
        lines.push(format!(
            "mes_example: {} → {}",
            count(examples, "example dialogue", "example dialogues"),
            count(examples, "memory", "memories")
        ));
    }
    if let Some(targets) = targets {
        let n: usize = targets.values().map(|d| d.len()).sum();
        lines.push(format!("targets: {} from extensions.incharacter", count(n, "dimension", "dimensions")));
    }
    let fields = card.json.get("data").unwrap_or(&card.json);
    let present = |key: &str| fields.get(key).is_some_and(|v| !is_empty(v));
    let info: Vec<&str> = ["tags", "creator", "character_version", "creator_notes"]
        .into_iter()
        .filter(|key| present(key))
        .collect();
    if !info.is_empty() {
        lines.push(format!("card info: {}", info.join(", ")));
    }
    let unused: Vec<&str> = fields
        .as_object()
        .map(|m| {
            m.keys()
                .map(String::as_str)
                .filter(|key| {
                    !matches!(
                        *key,
                        "name"
                            | "description"
                            | "personality"
                            | "scenario"
                            | "system_prompt"
                            | "post_history_instructions"
                            | "first_mes"
                            | "alternate_greetings"
                            | "mes_example"
                            | "tags"
                            | "creator"
                            | "character_version"
                            | "creator_notes"
                            | "spec"
                            | "spec_version"
                    ) && present(key)
                })
                .collect()
        })
        .unwrap_or_default();
    if !unused.is_empty() {
        lines.push(format!("not used in the role-play, kept: {}", unused.join(", ")));
    }
    let image = if image { ", and its PNG image" } else { "" };
    lines.push(format!("kept for export-card: the card as written{image}"));
    lines
}

fn is_empty(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Null => true,
        serde_json::Value::String(s) => s.trim().is_empty(),
        serde_json::Value::Array(a) => a.is_empty(),
        serde_json::Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// The card a file holds (a PNG's, by its signature or its name, or JSON), and the PNG's bytes.
/// What a card came in: a PNG image (kept for export-card), or JSON text (to locate its fields).
enum Came {
    Png(Vec<u8>),
    Json(String),
}

/// The card as it is kept beside the character: readable, unless that would pass the size a card may
/// have (a card near it, read compact), then compact, as it came, so that export-card reads it back.
/// (Written again, a card may grow: `1e2` becomes `100.0`.) One that would still pass it is refused.
fn kept(json: &serde_json::Value, shown: &str) -> Result<Vec<u8>, String> {
    let stored = match serde_json::to_vec_pretty(json).map_err(|e| e.to_string())? {
        pretty if pretty.len() <= MAX_JSON => pretty,
        _ => serde_json::to_vec(json).map_err(|e| e.to_string())?,
    };
    if stored.len() > MAX_JSON {
        return Err(format!(
            "{shown}: {} bytes once kept, more than the {MAX_JSON} a card may hold",
            stored.len()
        ));
    }
    Ok(stored)
}

fn read(file: &Path) -> Result<(Card, Came), String> {
    let shown = file.display();
    let bytes = read_bytes(file, MAX_PNG, "a character card")?;
    let named_png = file.extension().is_some_and(|x| x.eq_ignore_ascii_case("png"));
    if !png::is_png(&bytes) && !named_png {
        if bytes.len() > MAX_JSON {
            return Err(format!(
                "{shown}: {} bytes is more than the {MAX_JSON} a card may hold",
                bytes.len()
            ));
        }
        let text = crate::files::utf8_text(file, bytes).map_err(|e| e.to_string())?;
        let card = card::parse(&text).map_err(|e| match e {
            CardError::Json { line, column, message } => format!("{shown}:{line}:{column}: broken JSON: {message}"),
            CardError::Shape(message) => format!("{shown}: {message}"),
            CardError::Field { line, column, message } => format!("{shown}:{line}:{column}: {message}"),
        })?;
        return Ok((card, Came::Json(text)));
    }
    let (keyword, text) = png::card_text(&bytes).map_err(|e| format!("{shown}: {e}"))?;
    let base64 = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let compact: String = text.split_ascii_whitespace().collect();
    let json = base64
        .decode(compact)
        .map_err(|e| format!("{shown}: the {keyword} chunk is not base64: {e}"))?;
    if json.len() > MAX_JSON {
        return Err(format!(
            "{shown}: the {keyword} chunk's card is {} bytes, more than the {MAX_JSON} allowed",
            json.len()
        ));
    }
    let json = String::from_utf8(json).map_err(|e| {
        format!(
            "{shown}: the {keyword} chunk's card is not UTF-8 at byte {}",
            e.utf8_error().valid_up_to()
        )
    })?;
    let card = card::parse(&json).map_err(|e| format!("{shown}: the card in its {keyword} chunk: {e}"))?;
    Ok((card, Came::Png(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::diagnostic::Source;
    use crate::rpa::card::png::tests::{png, text};

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn import(name: &str, bytes: &[u8], options: &Options) -> (tempfile::TempDir, Result<Imported, ImportError>) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(name);
        std::fs::write(&file, bytes).unwrap();
        let data = dir.path().join("data");
        let got = character_card(&file, &data, options, |_| None, |_| Existing::none());
        (dir, got)
    }

    const SERAPHINA: &str = r#"{"spec": "chara_card_v2", "data": {
        "name": "Seraphina", "description": "{{char}} guards the glade.",
        "personality": "kind, protective, wary of {{user}}", "scenario": "",
        "first_mes": "*She smiles.*\nWelcome, {{user}}.", "alternate_greetings": ["Hello again."],
        "mes_example": "<START>\n{{user}}: Who are you?\n{{char}}: The glade's guardian.",
        "system_prompt": "Write in prose.", "tags": ["fantasy", " "], "creator": "Ann\u001b[31m",
        "character_version": "1.2", "creator_notes": "Be nice."}}"#;

    #[test]
    fn a_card_becomes_a_prompt_memories_and_card_info() {
        let options = Options {
            experimenter: Some("Traveler".into()),
            ..Options::default()
        };
        let (dir, got) = import("s.json", SERAPHINA.as_bytes(), &options);
        let got = got.unwrap();
        assert_eq!(
            (got.id.as_str(), got.name.as_str(), got.memories),
            ("seraphina-en", "Seraphina", 3)
        );
        let c = Character::parse(
            Source::new("s", &std::fs::read_to_string(&got.character_file).unwrap()),
            |_| None,
        )
        .unwrap();
        assert_eq!(
            c.description,
            "Write in prose.\n\nYou are Seraphina.\n\nSeraphina guards the glade.\n\n\
             Personality: kind, protective, wary of Traveler\n\n\
             Stay in character and answer every question as Seraphina would."
        );
        let card = c.card.unwrap();
        assert_eq!(
            (card.tags, card.creator.as_str(), card.version.as_str()),
            (vec!["fantasy".to_string()], "Ann", "1.2")
        );
        let chunks: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&got.memories_file).unwrap()).unwrap();
        assert_eq!(
            chunks,
            [
                "Seraphina:「*She smiles.*\nWelcome, Traveler.」",
                "Seraphina:「Hello again.」",
                "Traveler:「Who are you?」\nSeraphina:「The glade's guardian.」"
            ]
        );
        drop(dir);
    }

    const FLUX: &str = r#"{"spec": "chara_card_v2", "data": {
        "name": "Flux", "description": "A grey cat who lives on {{user}}'s desk.",
        "first_mes": "One day you found a cat on your desk. She is called Flux.",
        "alternate_greetings": ["*blinks slowly*\n\"Mrrp. I was here first.\""],
        "mes_example": "<START>\n{{user}}: Code?\n{{char}}: ```\nwhile true:\n    nap()\n```",
        "post_history_instructions": "[System note: {{char}} answers only in cat logic.]",
        "character_book": {"entries": []}, "extensions": {"fav": true}}}"#;

    #[test]
    fn a_card_keeps_its_final_instruction_narration_and_code_and_says_what_it_did() {
        let (dir, got) = import("flux.png", &png(&[text("chara", &b64(FLUX)), (b"IDAT", vec![9])]), &Options::default());
        let got = got.unwrap();
        let c = Character::parse(
            Source::new("f", &std::fs::read_to_string(&got.character_file).unwrap()),
            |_| None,
        )
        .unwrap();
        assert_eq!(c.post_history, "[System note: Flux answers only in cat logic.]");
        assert!(!c.description.contains("System note"), "{}", c.description);
        let chunks: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&got.memories_file).unwrap()).unwrap();
        assert_eq!(
            chunks,
            [
                "One day you found a cat on your desk. She is called Flux.",
                "Flux:「*blinks slowly*\n\"Mrrp. I was here first.\"」",
                "User:「Code?」\nFlux:「```\nwhile true:\n    nap()\n```」",
            ]
        );
        assert_eq!(
            got.report,
            [
                "prompt: description ({{char}} → Flux, {{user}} → User)",
                "post_history_instructions: sent after each question, as the final instruction",
                "greetings: first_mes and 1 alternate greeting → 2 memories (1 in the character's words, 1 as narration)",
                "mes_example: 1 example dialogue → 1 memory",
                "not used in the role-play, kept: character_book, extensions",
                "kept for export-card: the card as written, and its PNG image",
            ]
        );
        let (json, image) = card::stored_paths(&dir.path().join("data"), "flux-en");
        assert_eq!(card::parse(&std::fs::read_to_string(&json).unwrap()).unwrap(), card::parse(FLUX).unwrap());
        assert!(std::fs::read(&image).unwrap().starts_with(&crate::png::SIGNATURE));
        // Imported again from JSON, the PNG an earlier import kept is gone.
        let file = dir.path().join("flux.json");
        std::fs::write(&file, FLUX).unwrap();
        let options = Options {
            replace: true,
            ..Options::default()
        };
        character_card(&file, &dir.path().join("data"), &options, |_| None, |_| Existing::none()).unwrap();
        assert!(json.exists() && !image.exists());
    }

    #[test]
    fn chinese_cards_get_a_chinese_prompt() {
        let card = r#"{"name": "胡桃", "description": "往生堂堂主。", "personality": "古灵精怪"}"#;
        let (_dir, got) = import("hutao.json", card.as_bytes(), &Options::default());
        let got = got.unwrap();
        assert_eq!(got.id, "hutao-zh", "the file name when the name has no ASCII letters");
        let toml = std::fs::read_to_string(&got.character_file).unwrap();
        assert!(toml.contains("你是胡桃。") && toml.contains("性格：古灵精怪"), "{toml}");
    }

    #[test]
    fn malformed_cards_name_the_file_and_write_nothing() {
        let cases: [(&str, Vec<u8>, &str); 6] = [
            (
                "a.json",
                b"{\"name\": \"x\",\n oops}".to_vec(),
                "a.json:2:2: broken JSON: key must be a string",
            ),
            ("b.json", b"[]".to_vec(), "b.json: not a character card"),
            (
                "c.png",
                png(&[text("chara", "not base64!")]),
                "c.png: the chara chunk is not base64",
            ),
            (
                "d.png",
                png(&[text("chara", &b64("{\n\"name\" 1}"))]),
                "d.png: the card in its chara chunk: broken JSON at 2:8",
            ),
            ("e.png", b"{\"name\": \"x\"}".to_vec(), "e.png: not a PNG file"),
            (
                "f.png",
                png(&[text("ccv3", &b64("{\"spec\": \"chara_card_v3\", \"data\": {}}"))]),
                "f.png: the card in its ccv3 chunk: not a character card",
            ),
        ];
        for (name, bytes, expect) in cases {
            let (dir, got) = import(name, &bytes, &Options::default());
            let e = got.unwrap_err().to_string();
            assert!(e.contains(expect), "{name}: {e}");
            assert!(!dir.path().join("data").exists(), "{name}: nothing written");
        }
    }

    #[test]
    fn an_exported_card_imports_back_to_the_same_character() {
        let (_dir, got) = import("s.json", SERAPHINA.as_bytes(), &Options::default());
        let got = got.unwrap();
        let c = Character::parse(
            Source::new("s", &std::fs::read_to_string(&got.character_file).unwrap()),
            |_| None,
        )
        .unwrap();
        let chunks: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&got.memories_file).unwrap()).unwrap();
        let exported = card::export(&c, &chunks);
        let bytes = png::with_texts(&card::png_texts(&exported)).unwrap();
        let options = Options {
            id: Some("other".into()),
            ..Options::default()
        };
        let (_dir2, again) = import("s.png", &bytes, &options);
        let again = again.unwrap();
        let d = Character::parse(
            Source::new("s", &std::fs::read_to_string(&again.character_file).unwrap()),
            |_| None,
        )
        .unwrap();
        assert_eq!(
            (d.description, d.experimenter, d.card),
            (c.description, c.experimenter, c.card)
        );
        let again: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&again.memories_file).unwrap()).unwrap();
        assert_eq!(again, chunks);
    }
}
