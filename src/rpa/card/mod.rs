//! Character cards, the format role-play front ends share: V1 (a flat JSON object: name, description,
//! personality, scenario, first_mes, mes_example), V2 (`"spec": "chara_card_v2"`, the fields under
//! `data`, plus system_prompt, alternate_greetings, tags, creator, character_version, creator_notes)
//! and V3 (`"spec": "chara_card_v3"`, the same under `data`), as JSON or inside a PNG ([`png`]).
//! This module reads a card, resolves its macros (`{{char}}`, `{{user}}`, case-insensitive, and the
//! legacy `<BOT>`, `<USER>`), turns its example dialogues into memory lines `Name:「text」`, and writes
//! a character back as a V2 card whose `extensions.incharacter` says the description is the whole prompt.

pub mod png;

use serde_json::{Map, Value, json};

use super::memories::utterance;
use crate::domain::character::Character;

/// The most a card's JSON may hold (a file, or decoded from a PNG chunk).
pub const MAX_JSON: usize = 2 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spec {
    V1,
    V2,
    V3,
}

/// What a card says, its text as written (macros unresolved).
#[derive(Debug, Clone, PartialEq)]
pub struct Card {
    pub spec: Spec,
    pub name: String,
    pub description: String,
    pub personality: String,
    pub scenario: String,
    pub first_mes: String,
    pub mes_example: String,
    pub system_prompt: String,
    pub alternate_greetings: Vec<String>,
    pub tags: Vec<String>,
    pub creator: String,
    pub character_version: String,
    pub creator_notes: String,
    /// `extensions.incharacter` of a card this program exported: its description is the whole prompt.
    pub ours: Option<Ours>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ours {
    pub id: Option<String>,
    pub language: Option<String>,
    pub experimenter: Option<String>,
}

/// Why a text is not a card.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CardError {
    #[error("broken JSON at {line}:{column}: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{0}")]
    Shape(String),
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Reads a card's JSON (any of the three versions).
pub fn parse(text: &str) -> Result<Card, CardError> {
    let shape = |m: String| CardError::Shape(m);
    let value: Value = serde_json::from_str(text.strip_prefix('\u{feff}').unwrap_or(text)).map_err(|e| {
        let message = e.to_string();
        let message = message.rfind(" at line ").map_or(message.as_str(), |i| &message[..i]);
        CardError::Json {
            line: e.line(),
            column: e.column(),
            message: message.to_string(),
        }
    })?;
    // An imported card's text enters here: kept without what a terminal would act on (escape
    // sequences, control characters other than newline and tab, bidirectional overrides).
    let value = crate::text::inert(&value);
    let Value::Object(root) = value else {
        return Err(shape(format!(
            "not a character card: the JSON is {}, not an object",
            kind_of(&value)
        )));
    };
    let (spec, fields, prefix) = match root.get("spec") {
        None => (Spec::V1, &root, ""),
        Some(Value::String(s)) if s == "chara_card_v2" || s == "chara_card_v3" => {
            let spec = if s == "chara_card_v2" { Spec::V2 } else { Spec::V3 };
            match root.get("data") {
                Some(Value::Object(data)) => (spec, data, "data."),
                Some(other) => return Err(shape(format!("data must be an object, not {}", kind_of(other)))),
                None => return Err(shape(format!("a {s} card without \"data\""))),
            }
        }
        Some(other) => {
            return Err(shape(format!(
                "unknown spec {other}: a card is chara_card_v2, chara_card_v3, or has no spec (V1)"
            )));
        }
    };
    let text = |key: &str| match fields.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(shape(format!("{prefix}{key} must be a string, not {}", kind_of(other)))),
    };
    let list = |key: &str| match fields.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| shape(format!("{prefix}{key} must be a list of strings"))),
        Some(other) => Err(shape(format!("{prefix}{key} must be a list of strings, not {}", kind_of(other)))),
    };
    if !fields.contains_key("name") {
        return Err(shape(format!("not a character card: no \"{prefix}name\"")));
    }
    let name = text("name")?;
    if name.trim().is_empty() {
        return Err(shape(format!("{prefix}name is empty")));
    }
    let v1 = spec == Spec::V1;
    let later = |key: &str| if v1 { Ok(String::new()) } else { text(key) };
    Ok(Card {
        spec,
        name,
        description: text("description")?,
        personality: text("personality")?,
        scenario: text("scenario")?,
        first_mes: text("first_mes")?,
        mes_example: text("mes_example")?,
        system_prompt: later("system_prompt")?,
        alternate_greetings: if v1 { Vec::new() } else { list("alternate_greetings")? },
        tags: if v1 { Vec::new() } else { list("tags")? },
        creator: later("creator")?,
        character_version: later("character_version")?,
        creator_notes: later("creator_notes")?,
        ours: ours(fields),
    })
}

fn ours(fields: &Map<String, Value>) -> Option<Ours> {
    let ours = fields.get("extensions")?.get("incharacter")?.as_object()?;
    let get = |k: &str| ours.get(k).and_then(Value::as_str).map(str::to_string);
    Some(Ours {
        id: get("id"),
        language: get("language"),
        experimenter: get("experimenter"),
    })
}

/// `text` with `{{char}}` / `<BOT>` replaced by `name` and `{{user}}` / `<USER>` by `user`
/// (case-insensitive).
pub fn resolve(text: &str, name: &str, user: &str) -> String {
    const MACROS: [(&str, bool); 4] = [("{{char}}", true), ("<bot>", true), ("{{user}}", false), ("<user>", false)];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'scan: while let Some(c) = rest.chars().next() {
        for (pattern, is_char) in MACROS {
            if rest
                .get(..pattern.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(pattern))
            {
                out.push_str(if is_char { name } else { user });
                rest = &rest[pattern.len()..];
                continue 'scan;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A greeting as a one-line memory `Name:「greeting」` (its lines joined by spaces), if it says anything.
pub fn greeting(text: &str, name: &str, user: &str) -> Option<String> {
    let text = one_line(&resolve(text, name, user));
    (!text.is_empty()).then(|| format!("{name}:「{text}」"))
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `mes_example` as memory chunks, one per `<START>` block: a line beginning with the character's or
/// the user's name and a colon (after macros are resolved: `{{char}}: text`) begins a message
/// `Name:「text」`, and the lines after it continue that message; a line already in the `Name:「…」`
/// form, or before any message, is kept as it is.
pub fn examples(mes_example: &str, name: &str, user: &str) -> Vec<String> {
    split_blocks(&resolve(mes_example, name, user))
        .into_iter()
        .map(|block| dialogue(block, name, user))
        .filter(|chunk| !chunk.is_empty())
        .collect()
}

/// The `<START>`-separated blocks (case-insensitive), blank ones left out.
fn split_blocks(text: &str) -> Vec<&str> {
    let lower = text.to_ascii_lowercase();
    let mut blocks = Vec::new();
    let mut start = 0;
    for (i, _) in lower.match_indices("<start>") {
        blocks.push(&text[start..i]);
        start = i + "<start>".len();
    }
    blocks.push(&text[start..]);
    blocks.into_iter().filter(|b| !b.trim().is_empty()).collect()
}

fn dialogue(block: &str, name: &str, user: &str) -> String {
    let speaking = |line: &str, who: &str| {
        let rest = line.strip_prefix(who)?;
        let rest = rest.strip_prefix(':').or_else(|| rest.strip_prefix('：'))?;
        // `Name:「…」` is already a memory line.
        (!rest.trim_start().starts_with('「')).then(|| rest.trim().to_string())
    };
    let mut lines: Vec<String> = Vec::new();
    // The open message: its line in `lines`, speaker and text so far.
    let mut open: Option<(usize, &str, String)> = None;
    let close = |open: &mut Option<(usize, &str, String)>, lines: &mut Vec<String>| {
        if let Some((at, who, text)) = open.take() {
            lines[at] = format!("{who}:「{text}」");
        }
    };
    for line in block.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some((who, text)) = [name, user]
            .into_iter()
            .find_map(|who| speaking(line, who).map(|text| (who, text)))
        {
            close(&mut open, &mut lines);
            lines.push(String::new());
            open = Some((lines.len() - 1, who, text));
        } else if let Some((_, _, text)) = open.as_mut().filter(|_| utterance(line).is_none()) {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(line);
        } else {
            close(&mut open, &mut lines);
            lines.push(line.to_string());
        }
    }
    close(&mut open, &mut lines);
    lines.retain(|l| !l.ends_with(":「」"));
    lines.join("\n")
}

/// A memory chunk as an example block: the character's and the experimenter's `Name:「text」` lines
/// become `{{char}}: text` and `{{user}}: text`, other lines stay as they are.
fn example(chunk: &str, c: &Character) -> String {
    chunk
        .lines()
        .map(|line| match utterance(line) {
            Some((who, text)) if who == c.name => format!("{{{{char}}}}: {text}"),
            Some((who, text)) if who == c.experimenter => format!("{{{{user}}}}: {text}"),
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `character` (with its memory chunks) as a V2 card. Leading one-line memories of the character alone
/// are its greetings (`first_mes`, then `alternate_greetings`), the other memories its example
/// dialogues; `extensions.incharacter` keeps the id, language and experimenter, and says that
/// `description` is the whole role-play prompt.
pub fn export(character: &Character, memories: &[String]) -> Value {
    let c = character;
    let greeting_of = |chunk: &String| {
        utterance(chunk)
            .filter(|(who, _)| !chunk.contains('\n') && *who == c.name)
            .map(|(_, text)| text.to_string())
    };
    let mut greetings: Vec<String> = memories.iter().map_while(greeting_of).collect();
    let examples: Vec<String> = memories[greetings.len()..]
        .iter()
        .map(|chunk| format!("<START>\n{}", example(chunk, c)))
        .collect();
    let first_mes = if greetings.is_empty() { String::new() } else { greetings.remove(0) };
    let card = c.card.clone().unwrap_or_default();
    json!({
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": c.name,
            "description": c.description,
            "personality": "",
            "scenario": "",
            "first_mes": first_mes,
            "mes_example": examples.join("\n"),
            "creator_notes": card.notes,
            "system_prompt": "",
            "post_history_instructions": "",
            "alternate_greetings": greetings,
            "tags": card.tags,
            "creator": card.creator,
            "character_version": card.version,
            "extensions": {
                "incharacter": {
                    "id": c.id,
                    "language": c.language.code(),
                    "experimenter": c.experimenter,
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macros_resolve_in_any_case_and_the_legacy_forms() {
        assert_eq!(
            resolve("{{char}} greets {{User}}; <BOT> and <user>, {{CHAR}}. {{chars}} 钟离", "Zhongli", "Traveler"),
            "Zhongli greets Traveler; Zhongli and Traveler, Zhongli. {{chars}} 钟离"
        );
        assert_eq!(resolve("{{cha", "a", "b"), "{{cha");
    }

    #[test]
    fn the_three_versions_are_told_apart() {
        let v1 = parse(r#"{"name": "Ann", "description": "d", "tags": ["ignored in V1"]}"#).unwrap();
        assert_eq!((v1.spec, v1.description.as_str(), v1.tags.len()), (Spec::V1, "d", 0));
        let v2 = parse(
            r#"{"spec": "chara_card_v2", "name": "flat copy", "data": {"name": "Ann", "tags": ["a"], "system_prompt": "sp"}}"#,
        )
        .unwrap();
        assert_eq!((v2.spec, v2.name.as_str(), v2.system_prompt.as_str()), (Spec::V2, "Ann", "sp"));
        assert_eq!(v2.tags, ["a"]);
        let v3 = parse(
            r#"{"spec": "chara_card_v3", "spec_version": "3.0", "data": {"name": "Ann", "alternate_greetings": ["hi"],
                "extensions": {"incharacter": {"id": "ann-en", "experimenter": "Bo"}}}}"#,
        )
        .unwrap();
        assert_eq!((v3.spec, v3.alternate_greetings.len()), (Spec::V3, 1));
        assert_eq!(v3.ours.unwrap().experimenter.as_deref(), Some("Bo"));
    }

    #[test]
    fn what_is_not_a_card_says_why() {
        let shape = |text: &str| parse(text).unwrap_err().to_string();
        assert!(shape("[1]").contains("the JSON is a list, not an object"));
        assert!(shape(r#"{"description": "x"}"#).contains("no \"name\""));
        assert!(shape(r#"{"spec": "chara_card_v2", "data": {}}"#).contains("no \"data.name\""));
        assert!(shape(r#"{"spec": "chara_card_v9", "name": "x"}"#).contains("unknown spec"));
        assert!(shape(r#"{"spec": "chara_card_v2", "data": {"name": "x", "tags": "a"}}"#).contains("data.tags must be a list"));
        assert!(shape(r#"{"name": 3}"#).contains("name must be a string, not a number"));
        assert_eq!(
            parse("{\n  \"name\": \"x\",\n  oops\n}").unwrap_err(),
            CardError::Json {
                line: 3,
                column: 3,
                message: "key must be a string".into()
            }
        );
    }

    #[test]
    fn example_dialogues_split_on_start_and_become_memory_lines() {
        let mes = "<START>\n{{user}}: Hi there.\n{{char}}: *waves* Hello!\nHow are you?\n\n<start>\n<USER>：你好\n<BOT>: Fine.\nAnn:「Already a line」\n<START>\n\n";
        assert_eq!(
            examples(mes, "Ann", "Bo"),
            [
                "Bo:「Hi there.」\nAnn:「*waves* Hello! How are you?」",
                "Bo:「你好」\nAnn:「Fine.」\nAnn:「Already a line」"
            ]
        );
        assert_eq!(examples("a narration line\n{{char}}:", "Ann", "Bo"), ["a narration line"]);
        assert_eq!(greeting("*smiles*\n\nHello, {{user}}.", "Ann", "Bo").unwrap(), "Ann:「*smiles* Hello, Bo.」");
        assert_eq!(greeting(" \n", "Ann", "Bo"), None);
    }
}
