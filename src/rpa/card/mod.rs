//! Character cards, the format role-play front ends share: V1 (a flat JSON object: name, description,
//! personality, scenario, first_mes, mes_example), V2 (`"spec": "chara_card_v2"`, the fields under
//! `data`, plus system_prompt, post_history_instructions, alternate_greetings, character_book, tags,
//! creator, character_version, creator_notes, extensions) and V3 (`"spec": "chara_card_v3"`, the same
//! under `data`, plus nickname, group_only_greetings, creator_notes_multilingual, source, assets,
//! creation_date, modification_date), as JSON or inside a PNG ([`png`]).
//!
//! This module reads a card, resolves its macros (`{{char}}`, `{{user}}`, case-insensitive, and the
//! legacy `<BOT>`, `<USER>`), builds the role-play prompt from its parts ([`prompt`]) and the memories
//! from its greetings and example dialogues ([`memories`]), and writes cards back.
//!
//! **Round trip.** An import keeps the whole card it read (every field, unknown extensions included,
//! its text made inert) beside the character as `characters/<id>.card.json`, and a PNG card's file as
//! `characters/<id>.card.png`. `export-card` of such a character starts from that card
//! ([`export_stored`]) and writes into it only what was edited since: a field is written back when what
//! the import would make of the stored card differs from the character now. An edited prompt is split
//! back into system_prompt / description / personality / scenario along the import's own wrapper lines
//! (which are never exported), and the character's name and the experimenter become `{{char}}` and
//! `{{user}}` again. What the workbench adds lives in `extensions.incharacter`: the experimenter (when
//! not the default "User") and the personality targets. A PNG export copies every chunk of the stored
//! PNG byte for byte and replaces only the card's text chunks (`chara`, and `ccv3` for V3).
//! A character that was not imported from a card is written by [`export`] as a V2 card whose
//! `extensions.incharacter` (with an `id`) says that `description` is the whole role-play prompt; one
//! imported from a card before imports kept the card gets its prompt split back into the parts.

pub mod png;

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::memories::{Segment, segments, utterance};
use crate::domain::character::{Character, LabelSet, LabelType};
use crate::domain::scale::Language;

/// The most a card's JSON may hold (a file, or decoded from a PNG chunk).
pub const MAX_JSON: usize = 2 << 20;
/// The most a card's PNG file may hold.
pub const MAX_PNG: u64 = 16 << 20;

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
    pub post_history_instructions: String,
    pub alternate_greetings: Vec<String>,
    pub tags: Vec<String>,
    pub creator: String,
    pub character_version: String,
    pub creator_notes: String,
    /// `extensions.incharacter`: what this program wrote into the card.
    pub ours: Option<Ours>,
    /// The whole card as read (its text made inert), every field kept: what [`export_stored`] writes back.
    pub json: Value,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ours {
    /// Present in a card of a character that was not itself imported from a card: its description is
    /// the whole role-play prompt.
    pub id: Option<String>,
    pub language: Option<String>,
    pub experimenter: Option<String>,
    /// scale id → dimension → "H" | "L" | number, as a character file's `[targets]`.
    pub targets: Option<Map<String, Value>>,
}

impl Ours {
    /// Whether `description` is the whole role-play prompt (a card [`export`] wrote).
    pub fn whole_prompt(&self) -> bool {
        self.id.is_some()
    }
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
    /// A field of the wrong kind, where its value begins.
    #[error("{line}:{column}: {message}")]
    Field {
        line: usize,
        column: usize,
        message: String,
    },
}

/// Where the value of `key` begins in the card's JSON `raw` (1-based line and column, in characters):
/// the key of the root object, or of the object under the root's `"data"` for a V2/V3 field
/// (`prefix` "data."); keys of deeper objects and text inside strings do not count.
fn locate(raw: &str, prefix: &str, key: &str) -> Option<(usize, usize)> {
    // The object whose keys are searched: the root (depth 1), or `data` (depth 2, once inside it).
    let (want_depth, mut in_data) = if prefix.is_empty() { (1, true) } else { (2, false) };
    let bytes = raw.as_bytes();
    let (mut depth, mut i) = (0usize, 0usize);
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if !prefix.is_empty() && depth < 2 {
                    in_data = false;
                }
            }
            b'"' => {
                // A string: find its end past escapes, then see whether a colon makes it a key.
                let mut j = i + 1;
                while j < bytes.len() && bytes[j] != b'"' {
                    j += if bytes[j] == b'\\' { 2 } else { 1 };
                }
                let text = raw.get(i + 1..j.min(raw.len()))?;
                let after = raw.get(j + 1..)?.trim_start();
                if let Some(rest) = after.strip_prefix(':') {
                    let value = raw.len() - rest.trim_start().len();
                    if depth == 1 && !prefix.is_empty() && text == "data" {
                        in_data = true;
                    } else if depth == want_depth && in_data && text == key {
                        let before = &raw[..value];
                        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
                        return Some((before.matches('\n').count() + 1, before[line_start..].chars().count() + 1));
                    }
                }
                i = j;
            }
            _ => {}
        }
        i += 1;
    }
    None
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
    let raw = text.strip_prefix('\u{feff}').unwrap_or(text);
    let value: Value = serde_json::from_str(raw).map_err(|e| {
        CardError::Json {
            line: e.line(),
            column: crate::files::json_column(&e),
            message: crate::files::json_message(&e),
        }
    })?;
    // An imported card's text enters here: kept without what a terminal would act on (escape
    // sequences, control characters other than newline and tab, bidirectional overrides).
    let value = crate::text::inert(&value);
    let Value::Object(root) = &value else {
        return Err(shape(format!(
            "not a character card: the JSON is {}, not an object",
            kind_of(&value)
        )));
    };
    let (spec, fields, prefix) = match root.get("spec") {
        None => (Spec::V1, root, ""),
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
    // A field of the wrong kind is named where its value begins, when it can be found.
    let wrong = |key: &str, message: String| match locate(raw, prefix, key) {
        Some((line, column)) => CardError::Field { line, column, message },
        None => shape(message),
    };
    let text = |key: &str| match fields.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(wrong(
            key,
            format!("{prefix}{key} must be a string, not {}", kind_of(other)),
        )),
    };
    let list = |key: &str| match fields.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| wrong(key, format!("{prefix}{key} must be a list of strings"))),
        Some(other) => Err(wrong(
            key,
            format!("{prefix}{key} must be a list of strings, not {}", kind_of(other)),
        )),
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
        post_history_instructions: later("post_history_instructions")?,
        alternate_greetings: if v1 { Vec::new() } else { list("alternate_greetings")? },
        tags: if v1 { Vec::new() } else { list("tags")? },
        creator: later("creator")?,
        character_version: later("character_version")?,
        creator_notes: later("creator_notes")?,
        ours: ours(fields),
        json: value.clone(),
    })
}

fn ours(fields: &Map<String, Value>) -> Option<Ours> {
    let ours = fields.get("extensions")?.get("incharacter")?.as_object()?;
    let get = |k: &str| ours.get(k).and_then(Value::as_str).map(str::to_string);
    Some(Ours {
        id: get("id"),
        language: get("language"),
        experimenter: get("experimenter"),
        targets: ours.get("targets").and_then(Value::as_object).cloned(),
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

/// The inverse of [`resolve`] for text the workbench wrote: `name` becomes `{{char}}` and `user`
/// `{{user}}` where they stand as whole words.
pub fn unresolve(text: &str, name: &str, user: &str) -> String {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    'scan: while i < text.len() {
        let before = text[..i].chars().next_back();
        for (who, with) in [(name, "{{char}}"), (user, "{{user}}")] {
            let cjk = who.chars().next().is_some_and(|c| !c.is_ascii());
            if !who.is_empty()
                && text[i..].starts_with(who)
                && (cjk || (!word(before) && !word(text[i + who.len()..].chars().next())))
            {
                out.push_str(with);
                i += who.len();
                continue 'scan;
            }
        }
        let c = text[i..].chars().next().unwrap_or_default();
        out.push(c);
        i += c.len_utf8().max(1);
    }
    out
}

/// Text without control characters other than newlines and tabs, trimmed.
pub(crate) fn clean(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
        .collect::<String>()
        .trim()
        .to_string()
}

/// Text on one line: control characters gone, runs of white space one space.
pub(crate) fn one_line(text: &str) -> String {
    clean(text).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A card's text as the role-play uses it: macros resolved, cleaned.
fn part(text: &str, name: &str, user: &str) -> String {
    clean(&resolve(text, name, user))
}

/// The workbench's own lines around a card's parts: "You are {name}.", the personality and scenario
/// labels, and the closing "Stay in character …".
fn wrapper(name: &str, language: Language) -> (String, &'static str, &'static str, String) {
    match language {
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
    }
}

/// The role-play prompt of a card, written in `language` with `name` and the experimenter `user`
/// (see `import card`); a card [`export`] wrote holds it whole in its description.
pub fn prompt(card: &Card, name: &str, user: &str, language: Language) -> String {
    if card.ours.as_ref().is_some_and(Ours::whole_prompt) {
        return clean(&card.description);
    }
    let part = |text: &str| Some(part(text, name, user)).filter(|t| !t.is_empty());
    let labelled = |label: &str, text: &str| part(text).map(|t| format!("{label}{t}"));
    let (you_are, personality, scenario, stay) = wrapper(name, language);
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

/// A prompt made by [`prompt`] (perhaps edited since) split back into the card's parts: system_prompt,
/// description, personality, scenario, the wrapper lines left out. A prompt without the "You are"
/// line is all description.
fn split_prompt(prompt: &str, name: &str, language: Language) -> [String; 4] {
    let (you_are, personality, scenario, stay) = wrapper(name, language);
    let prompt = prompt.trim();
    let Some(at) = prompt
        .match_indices(&you_are)
        .map(|(i, _)| i)
        .find(|&i| i == 0 || prompt[..i].ends_with("\n\n"))
    else {
        return [String::new(), prompt.to_string(), String::new(), String::new()];
    };
    let system = prompt[..at].trim().to_string();
    let body = prompt[at + you_are.len()..].trim();
    let mut body = body.strip_suffix(stay.as_str()).unwrap_or(body).trim();
    let mut take = |label: &str| {
        let (rest, text) = match body.rfind(&format!("\n\n{label}")) {
            Some(i) => (&body[..i], &body[i + 2 + label.len()..]),
            None if body.starts_with(label) => ("", &body[label.len()..]),
            None => return String::new(),
        };
        body = rest.trim();
        text.trim().to_string()
    };
    let scenario = take(scenario);
    let personality = take(personality);
    [system, body.to_string(), personality, scenario]
}

/// What a memory made from a card is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// A greeting in the character's words: `Name:「text」`.
    Greeting,
    /// A greeting that narrates (not said by the character): its text as it is.
    Narration,
    /// One `<START>` block of the example dialogues.
    Example,
}

/// A greeting as a memory: `Name:「greeting」`, or the text itself when it is narration (see
/// [`is_narration`]); line breaks and code blocks kept. `None` if it says nothing.
pub fn greeting(text: &str, name: &str, user: &str) -> Option<(String, MemoryKind)> {
    let text = part(text, name, user);
    if text.is_empty() {
        None
    } else if is_narration(&text, name) {
        Some((text, MemoryKind::Narration))
    } else {
        Some((format!("{name}:「{text}」"), MemoryKind::Greeting))
    }
}

/// Whether a greeting narrates rather than speaks: it has no quoted speech ("…", “…”, 「…」, «…») and,
/// outside its `*actions*`, either nothing at all or text about the character (its name or a
/// capitalised word of it, he, she, they; 他, 她) with nothing in the first person (I, me, my, we; 我, 咱).
pub fn is_narration(text: &str, name: &str) -> bool {
    if text.contains(['"', '“', '”', '「', '『', '«']) {
        return false;
    }
    let outside: String = text.split('*').step_by(2).collect::<Vec<_>>().join(" ");
    let outside = outside.trim();
    if outside.is_empty() {
        return true;
    }
    let lower = outside.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .filter(|w| !w.is_empty())
        .collect();
    let has = |list: &[&str]| words.iter().any(|w| list.contains(w));
    const FIRST: [&str; 14] = [
        "i", "i'm", "i'll", "i've", "i'd", "i’m", "me", "my", "mine", "myself", "we", "us", "our", "we're",
    ];
    const THIRD: [&str; 10] = ["he", "she", "they", "him", "her", "his", "hers", "them", "their", "it's"];
    let first = has(&FIRST) || outside.contains(['我', '咱']);
    // The character named: in full, or by a capitalised word of its name ("Flux" of "Flux the Cat").
    let named = lower.contains(&name.to_lowercase())
        || name
            .split_whitespace()
            .filter(|w| w.chars().count() >= 3 && w.starts_with(char::is_uppercase))
            .any(|w| words.contains(&w.to_lowercase().as_str()));
    let third = has(&THIRD) || outside.contains(['他', '她']) || named;
    !first && third
}

/// `mes_example` as memory chunks, one per `<START>` block: a line beginning with the character's or
/// the user's name and a colon (after macros are resolved: `{{char}}: text`) begins a message
/// `Name:「text」`, and the lines after it continue that message, line breaks and indentation kept (a
/// code block stays a code block); a line already in the `Name:「…」` form, or before any message, is
/// kept as it is.
pub fn examples(mes_example: &str, name: &str, user: &str) -> Vec<String> {
    split_blocks(&resolve(mes_example, name, user))
        .into_iter()
        .map(|block| dialogue(block, name, user))
        .filter(|chunk| !chunk.is_empty())
        .collect()
}

/// The memories of a card, in order: its greetings (`first_mes`, then `alternate_greetings`), then
/// one chunk per block of its example dialogues; each cleaned, empty ones left out.
pub fn memories(card: &Card, name: &str, user: &str) -> Vec<(String, MemoryKind)> {
    std::iter::once(&card.first_mes)
        .chain(&card.alternate_greetings)
        .filter_map(|g| greeting(g, name, user))
        .chain(
            examples(&card.mes_example, name, user)
                .into_iter()
                .map(|chunk| (chunk, MemoryKind::Example)),
        )
        .map(|(chunk, kind)| (clean(&chunk), kind))
        .filter(|(chunk, _)| !chunk.is_empty())
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
        let rest = line.trim().strip_prefix(who)?;
        let rest = rest.strip_prefix(':').or_else(|| rest.strip_prefix('：'))?;
        // `Name:「…」` is already a memory line.
        (!rest.trim_start().starts_with('「')).then(|| rest.trim().to_string())
    };
    let mut lines: Vec<String> = Vec::new();
    // The open message: its line in `lines`, speaker and text so far.
    let mut open: Option<(usize, &str, String)> = None;
    let close = |open: &mut Option<(usize, &str, String)>, lines: &mut Vec<String>| {
        if let Some((at, who, text)) = open.take() {
            lines[at] = format!("{who}:「{}」", text.trim());
        }
    };
    for line in block.lines().map(str::trim_end) {
        if let Some((who, text)) = [name, user]
            .into_iter()
            .find_map(|who| speaking(line, who).map(|text| (who, text)))
        {
            close(&mut open, &mut lines);
            lines.push(String::new());
            open = Some((lines.len() - 1, who, text));
        } else if let Some((_, _, text)) = open.as_mut().filter(|_| utterance(line).is_none()) {
            text.push('\n');
            text.push_str(line);
        } else if !line.trim().is_empty() {
            close(&mut open, &mut lines);
            lines.push(line.trim().to_string());
        }
    }
    close(&mut open, &mut lines);
    lines.retain(|l| !l.ends_with(":「」"));
    lines.join("\n")
}

/// A memory chunk as an example block: the character's and the experimenter's `Name:「text」`
/// utterances become `{{char}}: text` and `{{user}}: text`, other lines stay as they are.
fn example(chunk: &str, c: &Character) -> String {
    segments(chunk)
        .into_iter()
        .map(|s| match s {
            Segment::Said(who, text) if who == c.name => format!("{{{{char}}}}: {text}"),
            Segment::Said(who, text) if who == c.experimenter => format!("{{{{user}}}}: {text}"),
            Segment::Said(who, text) => format!("{who}:「{text}」"),
            Segment::Line(line) => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Greetings (`first_mes`, `alternate_greetings`) and `mes_example` from memory chunks: leading
/// chunks that are one utterance of the character alone are its greetings, the others example
/// dialogues.
fn greetings_and_examples(c: &Character, memories: &[String]) -> (String, Vec<String>, String) {
    let greeting_of = |chunk: &String| match segments(chunk).as_slice() {
        [Segment::Said(who, text)] if *who == c.name => Some(text.to_string()),
        _ => None,
    };
    let mut greetings: Vec<String> = memories.iter().map_while(greeting_of).collect();
    let examples: Vec<String> = memories[greetings.len()..]
        .iter()
        .map(|chunk| format!("<START>\n{}", example(chunk, c)))
        .collect();
    let first_mes = if greetings.is_empty() { String::new() } else { greetings.remove(0) };
    (first_mes, greetings, examples.join("\n"))
}

/// The message a chat with the character opens on, as chat UIs open on a card's greeting: the kept
/// card's `first_mes` (its names filled in, narration as it is) when an import kept the card, else
/// the first memory when it is one utterance of the character alone; `None` without either.
pub fn opening(data_dir: &Path, c: &Character, memories: &[String]) -> Option<String> {
    if let Ok(Some(stored)) = stored(data_dir, &c.id) {
        let text = part(&stored.card.first_mes, &c.name, &c.experimenter);
        return (!text.is_empty()).then_some(text);
    }
    match segments(memories.first()?).as_slice() {
        [Segment::Said(who, text)] if *who == c.name => Some(text.to_string()),
        _ => None,
    }
}

/// A character's targets as `extensions.incharacter.targets`: scale → dimension → "H" | "L" | number.
fn targets_json(targets: &LabelSet) -> Value {
    targets
        .iter()
        .map(|(scale, dims)| {
            let dims: Map<String, Value> = dims
                .iter()
                .map(|(d, l)| {
                    let value = match (l.score, l.kind) {
                        (Some(x), _) => json!(x),
                        (None, LabelType::H) => json!("H"),
                        (None, LabelType::L) => json!("L"),
                        (None, LabelType::X) => json!("X"),
                    };
                    (d.clone(), value)
                })
                .collect();
            (scale.clone(), Value::Object(dims))
        })
        .collect::<Map<_, _>>()
        .into()
}

/// `character` (with its memory chunks) as a V2 card. Leading memories that are one utterance of the
/// character alone are its greetings (`first_mes`, then `alternate_greetings`), the other memories its
/// example dialogues; `extensions.incharacter` keeps the id, language, experimenter and targets, and
/// says that `description` is the whole role-play prompt. A character imported from a card before
/// imports kept the card (its `work` says so, its prompt has the "You are" line) has its prompt split
/// back into the card's parts instead, names made macros again, and no id in `extensions.incharacter`.
pub fn export(character: &Character, memories: &[String]) -> Value {
    let c = character;
    let (name, user) = (c.name.as_str(), c.experimenter.as_str());
    let (first_mes, greetings, examples) = greetings_and_examples(c, memories);
    let card = c.card.clone().unwrap_or_default();
    let from_card = c.work.starts_with("imported from a character card")
        && c.description.contains(&wrapper(name, c.language).0);
    let mut ours = Map::new();
    if !from_card {
        ours.insert("id".into(), json!(c.id));
        ours.insert("language".into(), json!(c.language.code()));
    }
    if !from_card || user != "User" {
        ours.insert("experimenter".into(), json!(user));
    }
    if !c.labels.target.is_empty() {
        ours.insert("targets".into(), targets_json(&c.labels.target));
    }
    let text = |t: &str| if from_card { unresolve(t, name, user) } else { t.to_string() };
    let [system, description, personality, scenario] = if from_card {
        split_prompt(&c.description, name, c.language).map(|p| unresolve(&p, name, user))
    } else {
        [String::new(), c.description.clone(), String::new(), String::new()]
    };
    let extensions = if ours.is_empty() { json!({}) } else { json!({ "incharacter": ours }) };
    json!({
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": c.name,
            "description": description,
            "personality": personality,
            "scenario": scenario,
            "first_mes": text(&first_mes),
            "mes_example": text(&examples),
            "creator_notes": card.notes,
            "system_prompt": system,
            "post_history_instructions": text(&c.post_history),
            "alternate_greetings": greetings.iter().map(|g| text(g)).collect::<Vec<_>>(),
            "tags": card.tags,
            "creator": card.creator,
            "character_version": card.version,
            "extensions": extensions
        }
    })
}

/// The card `character` was imported from (`card`, as stored), with what was edited since written
/// into it (see the module's documentation); unedited, it is the card as it was read.
pub fn export_stored(card: &Card, character: &Character, memories: &[String]) -> Value {
    let c = character;
    let (name, user) = (c.name.as_str(), c.experimenter.as_str());
    let mut root = card.json.clone();
    let data = match card.spec {
        Spec::V1 => root.as_object_mut(),
        Spec::V2 | Spec::V3 => root.get_mut("data").and_then(Value::as_object_mut),
    };
    let Some(data) = data else {
        return card.json.clone();
    };
    let mut set = |key: &str, value: Value| {
        data.insert(key.to_string(), value);
    };
    let now = |text: &str| Value::String(unresolve(text, name, user));
    if name != one_line(&card.name) {
        set("name", Value::String(name.to_string()));
    }
    if c.description != prompt(card, name, user, c.language) {
        if card.ours.as_ref().is_some_and(Ours::whole_prompt) {
            set("description", Value::String(c.description.clone()));
        } else {
            let parts = split_prompt(&c.description, name, c.language);
            let was = [&card.system_prompt, &card.description, &card.personality, &card.scenario];
            for ((key, was), is) in ["system_prompt", "description", "personality", "scenario"]
                .into_iter()
                .zip(was)
                .zip(&parts)
            {
                if part(was, name, user) != *is {
                    set(key, now(is));
                }
            }
        }
    }
    if part(&card.post_history_instructions, name, user) != c.post_history.trim() {
        set("post_history_instructions", now(&c.post_history));
    }
    let made: Vec<String> = self::memories(card, name, user).into_iter().map(|(m, _)| m).collect();
    if made != memories {
        let (first_mes, greetings, examples) = greetings_and_examples(c, memories);
        set("first_mes", Value::String(first_mes));
        set("alternate_greetings", json!(greetings));
        set("mes_example", Value::String(examples));
    }
    let info = c.card.clone().unwrap_or_default();
    let tags: Vec<String> = card.tags.iter().map(|t| one_line(t)).filter(|t| !t.is_empty()).collect();
    if tags != info.tags {
        set("tags", json!(info.tags));
    }
    for (key, was, is) in [
        ("creator", one_line(&card.creator), &info.creator),
        ("character_version", one_line(&card.character_version), &info.version),
        ("creator_notes", clean(&card.creator_notes), &info.notes),
    ] {
        if was != *is {
            set(key, Value::String(is.clone()));
        }
    }
    // What the workbench adds: the experimenter and the targets, in `extensions.incharacter`.
    let was = card.ours.clone().unwrap_or_default();
    let mut adds: Vec<(&str, Option<Value>)> = Vec::new();
    let experimenter = (user != "User").then(|| user.to_string());
    if was.experimenter != experimenter {
        adds.push(("experimenter", experimenter.map(Value::String)));
    }
    let targets = (!c.labels.target.is_empty()).then(|| targets_json(&c.labels.target));
    if was.targets.map(Value::Object) != targets {
        adds.push(("targets", targets));
    }
    if !adds.is_empty() {
        let extensions = data.entry("extensions").or_insert_with(|| json!({}));
        if !extensions.is_object() {
            *extensions = json!({});
        }
        let ours = extensions
            .as_object_mut()
            .map(|e| e.entry("incharacter").or_insert_with(|| json!({})));
        if let Some(Value::Object(ours)) = ours {
            for (key, value) in adds {
                match value {
                    Some(value) => ours.insert(key.to_string(), value),
                    None => ours.remove(key),
                };
            }
        }
    }
    root
}

/// The text chunks a PNG carries for `card` (JSON), keyword and base64: `chara`, and for a V3 card
/// also `ccv3` (the `chara` then holds the same card marked V2, for readers that know only V2).
pub fn png_texts(card: &Value) -> Vec<(&'static str, String)> {
    let b64 = |v: &Value| base64::engine::general_purpose::STANDARD.encode(v.to_string());
    if card.get("spec").and_then(Value::as_str) == Some("chara_card_v3") {
        let mut v2 = card.clone();
        v2["spec"] = json!("chara_card_v2");
        v2["spec_version"] = json!("2.0");
        vec![("chara", b64(&v2)), ("ccv3", b64(card))]
    } else {
        vec![("chara", b64(card))]
    }
}

/// Where an import keeps the card it read (`.card.json`) and the PNG it came in (`.card.png`).
pub fn stored_paths(data_dir: &Path, id: &str) -> (PathBuf, PathBuf) {
    let folder = data_dir.join("characters");
    (folder.join(format!("{id}.card.json")), folder.join(format!("{id}.card.png")))
}

/// A card kept by an import, and its PNG if it came as one.
pub struct Stored {
    pub card: Card,
    pub png: Option<Vec<u8>>,
}

/// The card kept for the character `id`, if an import kept one.
pub fn stored(data_dir: &Path, id: &str) -> Result<Option<Stored>, String> {
    let (json, png) = stored_paths(data_dir, id);
    if std::fs::symlink_metadata(&json).is_err() {
        return Ok(None);
    }
    let text =
        crate::files::read_text_limited(&json, MAX_JSON as u64, "a character card").map_err(|e| e.to_string())?;
    let card = parse(&text).map_err(|e| format!("{}: {e}", json.display()))?;
    let png = match std::fs::symlink_metadata(&png) {
        Err(_) => None,
        Ok(_) => Some(crate::files::read_limited(&png, MAX_PNG, "a character card").map_err(|e| e.to_string())?),
    };
    Ok(Some(Stored { card, png }))
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
        let ours = v3.ours.unwrap();
        assert_eq!(ours.experimenter.as_deref(), Some("Bo"));
        assert!(ours.whole_prompt(), "an id says the description is the whole prompt");
        let v2 = parse(r#"{"spec": "chara_card_v2", "data": {"name": "Ann", "extensions": {"incharacter": {"experimenter": "Bo"}}}}"#)
            .unwrap();
        assert!(!v2.ours.unwrap().whole_prompt());
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
        // A field of the wrong kind is located where its value begins: in a V2 card, the one under
        // "data" (not a top-level key of the same name, nor the words inside a string).
        let card = "{\"spec\": \"chara_card_v2\", \"name\": \"Top\",\n \"data\": {\"name\": \"x\",\n  \"description\": \"says \\\"mes_example\\\": no\",\n  \"mes_example\":  [1]}}";
        assert_eq!(
            parse(card).unwrap_err(),
            CardError::Field {
                line: 4,
                column: 19,
                message: "data.mes_example must be a string, not a list".into()
            }
        );
        // A nested object's key of the same name comes first: the field itself is named.
        let nested = "{\"spec\": \"chara_card_v2\", \"data\": {\"character_book\": {\"name\": \"Bök\"},\n\"name\": 5}}";
        assert_eq!(
            parse(nested).unwrap_err(),
            CardError::Field {
                line: 2,
                column: 9,
                message: "data.name must be a string, not a number".into()
            }
        );
        let v1 = "{\"extensions\": {\"tags\": 1},\n \"name\": \"é\", \"tags\": 3, \"mes_example\": {}}";
        assert_eq!(
            parse(v1).unwrap_err(),
            CardError::Field {
                line: 2,
                column: 41,
                message: "mes_example must be a string, not an object".into()
            }
        );
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
                "Bo:「Hi there.」\nAnn:「*waves* Hello!\nHow are you?」",
                "Bo:「你好」\nAnn:「Fine.」\nAnn:「Already a line」"
            ]
        );
        assert_eq!(examples("a narration line\n{{char}}:", "Ann", "Bo"), ["a narration line"]);
        assert_eq!(
            greeting("*smiles*\n\nHello, {{user}}.", "Ann", "Bo").unwrap(),
            ("Ann:「*smiles*\n\nHello, Bo.」".to_string(), MemoryKind::Greeting)
        );
        assert_eq!(greeting(" \n", "Ann", "Bo"), None);
    }

    #[test]
    fn code_blocks_and_line_breaks_stay_as_written() {
        let mes = "<START>\n{{user}}: Show me a loop.\n{{char}}: Here:\n```python\nfor i in range(3):\n    print(i)\n\nprint(\"done\")\n```\nRun it.";
        let chunk = &examples(mes, "Ann", "Bo")[0];
        assert_eq!(
            chunk,
            "Bo:「Show me a loop.」\nAnn:「Here:\n```python\nfor i in range(3):\n    print(i)\n\nprint(\"done\")\n```\nRun it.」"
        );
        let said = segments(chunk);
        assert_eq!(said.len(), 2);
        assert_eq!(
            said[1],
            Segment::Said("Ann", "Here:\n```python\nfor i in range(3):\n    print(i)\n\nprint(\"done\")\n```\nRun it.".into())
        );
        let pairs = crate::rpa::memories::dialogue_pairs(std::slice::from_ref(chunk), "Ann");
        assert_eq!(pairs[0].0, "Bo:「Show me a loop.」");
        assert!(pairs[0].1.ends_with("```\nRun it."), "{:?}", pairs[0]);
    }

    #[test]
    fn narration_greetings_are_told_from_the_characters_words() {
        let narration = [
            "*The kettle clicks off somewhere behind the counter.*",
            "One day you got yourself a cat. Her name is Flux, and she has opinions.",
            "Flux stretches across the keyboard and ignores you.",
            "雨停了。她推开门，看了你一眼。",
        ];
        for text in narration {
            assert!(is_narration(text, "Flux"), "{text}");
        }
        let flux = "One day you got yourself a cat because the flat felt too quiet. It was called Flux at the \
                    pet shop, and it mostly rides your robot vacuum.";
        assert!(is_narration(flux, "Flux the Cat"));
        assert!(!is_narration("The weather is fine, isn't it?", "Flux the Cat"));
        let spoken = [
            "Hello again.",
            "Ah, a visitor.",
            "*smiles* Welcome, Bo.",
            "*She looks up.* \"You're late.\"",
            "I told her you would come. She never listens to me.",
            "我等你很久了。",
        ];
        for text in spoken {
            assert!(!is_narration(text, "Flux"), "{text}");
        }
        assert_eq!(
            greeting("{{char}} yawns.\n\n*The screen flickers.*", "Flux", "Bo").unwrap(),
            ("Flux yawns.\n\n*The screen flickers.*".to_string(), MemoryKind::Narration)
        );
    }

    #[test]
    fn names_become_macros_again_on_word_boundaries() {
        assert_eq!(
            unresolve("Ann meets Bo; Annabel and Bob stay. 钟离说", "Ann", "Bo"),
            "{{char}} meets {{user}}; Annabel and Bob stay. 钟离说"
        );
        assert_eq!(unresolve("钟离见到旅行者", "钟离", "旅行者"), "{{char}}见到{{user}}");
        let text = "{{char}} keeps watch for {{user}}.";
        assert_eq!(unresolve(&resolve(text, "Mira Vance", "Captain"), "Mira Vance", "Captain"), text);
    }

    const CARD: &str = r#"{"spec": "chara_card_v3", "spec_version": "3.0", "data": {
        "name": "Ann", "description": "{{char}} runs the ferry.", "personality": "calm",
        "scenario": "Dawn at the pier.", "system_prompt": "Be brief.", "first_mes": "Morning, {{user}}.",
        "mes_example": "<START>\n{{user}}: Busy?\n{{char}}: Always.", "post_history_instructions": "[Reply as {{char}}.]",
        "tags": ["sea"], "creator": "me", "nickname": "Annie", "extensions": {"depth_prompt": {"depth": 4}}}}"#;

    fn imported(card: &Card) -> Character {
        let text = format!(
            "id = \"ann-en\"\nname = \"Ann\"\nlanguage = \"en\"\nexperimenter = \"Bo\"\ndescription = \"\"\"{}\"\"\"\n",
            prompt(card, "Ann", "Bo", Language::En)
        );
        let mut c = Character::parse(crate::domain::diagnostic::Source::new("ann", &text), |_| None).unwrap();
        c.post_history = part(&card.post_history_instructions, "Ann", "Bo");
        c.card = Some(crate::domain::character::CardInfo {
            tags: card.tags.clone(),
            creator: card.creator.clone(),
            ..Default::default()
        });
        c
    }

    #[test]
    fn an_unedited_card_exports_as_it_was_read() {
        let card = parse(CARD).unwrap();
        let mut c = imported(&card);
        let chunks: Vec<String> = memories(&card, "Ann", "Bo").into_iter().map(|(m, _)| m).collect();
        c.experimenter = "User".into();
        let chunks_user: Vec<String> = memories(&card, "Ann", "User").into_iter().map(|(m, _)| m).collect();
        c.description = prompt(&card, "Ann", "User", Language::En);
        c.post_history = part(&card.post_history_instructions, "Ann", "User");
        assert_eq!(export_stored(&card, &c, &chunks_user), card.json);
        // Another experimenter is the workbench's own: it goes into `extensions.incharacter`.
        let c = imported(&card);
        let got = export_stored(&card, &c, &chunks);
        assert_eq!(got["data"]["extensions"]["incharacter"], json!({"experimenter": "Bo"}));
        assert_eq!(got["data"]["extensions"]["depth_prompt"], json!({"depth": 4}));
        assert_eq!(got["data"]["first_mes"], "Morning, {{user}}.");
    }

    #[test]
    fn edits_are_written_back_in_the_authors_form() {
        let card = parse(CARD).unwrap();
        let mut c = imported(&card);
        let chunks: Vec<String> = memories(&card, "Ann", "Bo").into_iter().map(|(m, _)| m).collect();
        c.description = c
            .description
            .replace("calm", "calm, but tired of Bo's questions");
        assert!(c.description.contains("Stay in character"), "{}", c.description);
        c.post_history = "[Keep it under 50 words.]".into();
        c.labels.target.insert(
            "BFI".into(),
            [(
                "Openness".to_string(),
                crate::domain::character::Label {
                    score: None,
                    kind: LabelType::H,
                },
            )]
            .into(),
        );
        let got = export_stored(&card, &c, &chunks);
        let data = &got["data"];
        assert_eq!(data["personality"], "calm, but tired of {{user}}'s questions");
        assert_eq!(data["description"], "{{char}} runs the ferry.", "unedited: as written");
        assert_eq!(data["system_prompt"], "Be brief.");
        assert_eq!(data["scenario"], "Dawn at the pier.", "the scenario line is still there");
        assert_eq!(data["post_history_instructions"], "[Keep it under 50 words.]");
        assert_eq!(data["nickname"], "Annie");
        assert_eq!(data["extensions"]["incharacter"]["targets"], json!({"BFI": {"Openness": "H"}}));
        // A prompt rewritten without the workbench's lines is the description, the other parts empty.
        c.description = "Ann runs the ferry and never smiles at Bo.".into();
        let data = export_stored(&card, &c, &chunks)["data"].clone();
        assert_eq!(data["description"], "{{char}} runs the ferry and never smiles at {{user}}.");
        assert_eq!((&data["system_prompt"], &data["personality"], &data["scenario"]), (&json!(""), &json!(""), &json!("")));
    }

    #[test]
    fn a_split_prompt_gives_back_its_parts() {
        let card = parse(CARD).unwrap();
        let made = prompt(&card, "Ann", "Bo", Language::En);
        assert_eq!(
            split_prompt(&made, "Ann", Language::En),
            ["Be brief.", "Ann runs the ferry.", "calm", "Dawn at the pier."].map(String::from)
        );
        assert_eq!(
            split_prompt("你是胡桃。\n\n性格：古灵精怪\n\n请始终以胡桃的身份和口吻来回答，不要跳出角色。", "胡桃", Language::Zh),
            ["", "", "古灵精怪", ""].map(String::from)
        );
    }

    #[test]
    fn a_character_imported_before_cards_were_kept_exports_the_cards_parts() {
        let card = parse(CARD).unwrap();
        let mut c = imported(&card);
        let chunks: Vec<String> = memories(&card, "Ann", "Bo").into_iter().map(|(m, _)| m).collect();
        c.work = "imported from a character card by me".into();
        let data = export(&c, &chunks)["data"].clone();
        for key in ["system_prompt", "description", "personality", "scenario", "first_mes", "post_history_instructions"] {
            assert_eq!(data[key], card.json["data"][key], "{key}");
        }
        assert_eq!(data["mes_example"], "<START>\n{{user}}: Busy?\n{{char}}: Always.");
        assert_eq!(data["extensions"], json!({"incharacter": {"experimenter": "Bo"}}));
        // Bundled and other characters: the whole prompt, and the id that says so.
        c.work = "Harry Potter".into();
        let data = export(&c, &chunks)["data"].clone();
        assert_eq!(data["description"], json!(c.description));
        assert_eq!(data["extensions"]["incharacter"]["id"], "ann-en");
    }

    #[test]
    fn a_v3_png_card_carries_a_v2_copy_for_older_readers() {
        let card = parse(CARD).unwrap();
        let texts = png_texts(&card.json);
        assert_eq!(texts.iter().map(|(k, _)| *k).collect::<Vec<_>>(), ["chara", "ccv3"]);
        let decode = |t: &str| {
            let bytes = base64::engine::general_purpose::STANDARD.decode(t).unwrap();
            serde_json::from_slice::<Value>(&bytes).unwrap()
        };
        assert_eq!(decode(&texts[1].1), card.json);
        assert_eq!(decode(&texts[0].1)["spec"], "chara_card_v2");
        assert_eq!(decode(&texts[0].1)["data"], card.json["data"]);
    }
}
