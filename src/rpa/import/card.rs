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
//! A card this program exported (`extensions.incharacter`) holds the whole prompt in its description,
//! which is taken as it is, with its language and experimenter. The memories are the greetings
//! (`first_mes`, then `alternate_greetings`), each a one-line chunk `Name:「…」`, then one chunk per
//! `<START>` block of `mes_example`. The name is `--name`, else the card's; the experimenter is
//! `--experimenter`, else the exported card's, else that of a character already under the id (whose
//! labels and aliases the import keeps), else "User". A card file is JSON of at most 2 MiB, or a PNG of
//! at most 16 MiB whose card chunk holds at most 3 MiB of base64 decoding to at most 2 MiB.

use std::path::Path;

use base64::Engine as _;

use super::{
    Existing, ImportError, Imported, Options, character_id, character_path, claim, clean, detect_language,
    imported_character, read_bytes, write_files,
};
use crate::domain::character::{CardInfo, Character};
use crate::domain::scale::{Language, Scale};
use crate::rpa::card::{self, Card, CardError, MAX_JSON, png};

const MAX_PNG: u64 = 16 << 20;

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
    let card = read(file)?;
    let ours = card.ours.clone();
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
    let holders = existing(&id);
    let (path, replaced) = claim(
        "character",
        &id,
        character_path(data_dir, &id),
        &holders,
        options.replace,
    )?;
    let existing = holders.entry;
    let experimenter = options
        .experimenter
        .as_deref()
        .or(ours.as_ref().and_then(|o| o.experimenter.as_deref()))
        .or(existing.map(|c| c.experimenter.as_str()))
        .map_or_else(|| "User".to_string(), one_line);
    let description = if ours.is_some() {
        // Written by `card::export`: the whole prompt already, tabs and line breaks as they were.
        card.description
            .chars()
            .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
            .collect()
    } else {
        prompt(&card, &name, &experimenter, language)
    };
    if description.trim().is_empty() {
        return Err(format!("{shown}: the card's description is empty").into());
    }
    let chunks: Vec<String> = std::iter::once(&card.first_mes)
        .chain(&card.alternate_greetings)
        .filter_map(|g| card::greeting(g, &name, &experimenter))
        .chain(card::examples(&card.mes_example, &name, &experimenter))
        .map(|chunk| clean(&chunk))
        .filter(|chunk| !chunk.is_empty())
        .collect();
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
    };
    let by = if info.creator.is_empty() {
        String::new()
    } else {
        format!(" by {}", info.creator)
    };
    let work = format!("imported from a character card{by}");
    // A card brings its own info, in place of the card an earlier import kept.
    let character = Character {
        card: (info != CardInfo::default()).then_some(info),
        ..imported_character(existing, id, name, language, experimenter, work, description)
    };
    write_files(data_dir, character, &chunks, scale, &shown.to_string(), path, replaced)
}

/// The card a file holds: a PNG's (by its signature or its name) or JSON.
fn read(file: &Path) -> Result<Card, String> {
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
        let text = String::from_utf8(bytes)
            .map_err(|e| format!("{shown}: not UTF-8 at byte {}", e.utf8_error().valid_up_to()))?;
        return card::parse(&text).map_err(|e| match e {
            CardError::Json { line, column, message } => format!("{shown}:{line}:{column}: broken JSON: {message}"),
            CardError::Shape(message) => format!("{shown}: {message}"),
        });
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
    card::parse(&json).map_err(|e| format!("{shown}: the card in its {keyword} chunk: {e}"))
}

/// Text on one line: control characters gone, runs of white space one space.
fn one_line(text: &str) -> String {
    clean(text).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The role-play prompt of a card (see the module's documentation).
fn prompt(card: &Card, name: &str, user: &str, language: Language) -> String {
    let part = |text: &str| Some(clean(&card::resolve(text, name, user))).filter(|t| !t.is_empty());
    let labelled = |label: &str, text: &str| part(text).map(|t| format!("{label}{t}"));
    let (you_are, personality, scenario, stay) = match language {
        Language::En => (
            format!("You are {name}."),
            "Personality: ",
            "Scenario: ",
            format!("Stay in character and answer every question as {name} would."),
        ),
        Language::Zh => (
            format!("你是{name}。"),
            "性格：",
            "情景：",
            format!("请始终以{name}的身份和口吻来回答，不要跳出角色。"),
        ),
    };
    [
        part(&card.system_prompt),
        Some(you_are),
        part(&card.description),
        labelled(personality, &card.personality),
        labelled(scenario, &card.scenario),
        Some(stay),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join("\n\n")
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
                "Seraphina:「*She smiles.* Welcome, Traveler.」",
                "Seraphina:「Hello again.」",
                "Traveler:「Who are you?」\nSeraphina:「The glade's guardian.」"
            ]
        );
        drop(dir);
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
        let bytes = png::with_text("chara", &b64(&exported.to_string())).unwrap();
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
