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
    /// What a character file has and a card has not: the other names answers are masked by, the
    /// catchphrases, the work the character comes from.
    pub aliases: Vec<String>,
    pub catchphrases: Vec<String>,
    pub work: Option<String>,
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
            column: crate::files::json_column(raw, &e),
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
    // (the key of the root object, or of the one under the root's `"data"` for a V2/V3 field).
    let located = |within: &[&str], message: String| {
        let path: Vec<&str> = (!prefix.is_empty()).then_some("data").into_iter().chain(within.iter().copied()).collect();
        match crate::domain::diagnostic::Source::new("", raw).json_at(&path) {
            Some((line, column)) => CardError::Field { line, column, message },
            None => shape(message),
        }
    };
    let wrong = |key: &str, message: String| located(&[key], message);
    let card = Fields { object: fields, prefix, wrong: &wrong };
    let text = |key: &str| card.string(key).map(Option::unwrap_or_default);
    let list = |key: &str| card.list(key);
    if !fields.contains_key("name") {
        return Err(shape(format!("not a character card: no \"{prefix}name\"")));
    }
    let name = text("name")?;
    if name.chars().all(|c| c.is_whitespace() || crate::domain::shows_nothing(c)) {
        return Err(shape(format!("{prefix}name is empty, or shows nothing")));
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
        ours: ours(fields, &|key, message| located(&["extensions", "incharacter", key], message))?,
        json: value.clone(),
    })
}

/// What the workbench wrote into `extensions.incharacter`. A field of the wrong kind is refused
/// where it stands (`wrong`): read past, a card's targets or experimenter would vanish unsaid.
fn ours(fields: &Map<String, Value>, wrong: &dyn Fn(&str, String) -> CardError) -> Result<Option<Ours>, CardError> {
    let Some(ours) = fields.get("extensions").and_then(|e| e.get("incharacter")) else {
        return Ok(None);
    };
    let Value::Object(ours) = ours else {
        return Err(wrong("", format!("extensions.incharacter must be an object, not {}", kind_of(ours))));
    };
    let fields = Fields { object: ours, prefix: "extensions.incharacter.", wrong };
    let get = |k: &str| fields.string(k);
    let list = |k: &str| fields.list(k);
    let targets = match ours.get("targets") {
        None | Some(Value::Null) => None,
        Some(Value::Object(t)) => Some(t.clone()),
        Some(other) => {
            return Err(wrong(
                "targets",
                format!("extensions.incharacter.targets must be an object (scale → targets), not {}", kind_of(other)),
            ));
        }
    };
    Ok(Some(Ours {
        id: get("id")?,
        language: get("language")?,
        experimenter: get("experimenter")?,
        targets,
        aliases: list("aliases")?,
        catchphrases: list("catchphrases")?,
        work: get("work")?,
    }))
}

/// One object of a card, read field by field: a field of the wrong kind is refused where it
/// stands (`wrong`), named with its path (`prefix`, e.g. `data.`).
struct Fields<'a> {
    object: &'a Map<String, Value>,
    prefix: &'a str,
    wrong: &'a dyn Fn(&str, String) -> CardError,
}

impl Fields<'_> {
    /// A string field; absent or null is `None`.
    fn string(&self, key: &str) -> Result<Option<String>, CardError> {
        match self.object.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err((self.wrong)(key, format!("{}{key} must be a string, not {}", self.prefix, kind_of(other)))),
        }
    }

    /// A list of strings; absent or null is empty.
    fn list(&self, key: &str) -> Result<Vec<String>, CardError> {
        let prefix = self.prefix;
        match self.object.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| (self.wrong)(key, format!("{prefix}{key} must be a list of strings"))),
            Some(other) => Err((self.wrong)(key, format!("{prefix}{key} must be a list of strings, not {}", kind_of(other)))),
        }
    }
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
    // Escape sequences go whole, not their ESC alone (an option such as `--name` is not read as a card).
    crate::text::inert(&text.to_string())
        .chars()
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
    // The closing line is the workbench's own wherever it stands as a paragraph: text written after
    // it joins the part before it rather than taking the line out into the card with it.
    let unstayed = without_paragraph(body, &stay);
    let mut body = unstayed.trim();
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

/// `text` without the workbench's line `line` wherever it stands (text written after it on its line
/// or the next joins what comes before, a blank line between).
fn without_paragraph(text: &str, line: &str) -> String {
    let mut text = text.to_string();
    while let Some(i) = text.find(line) {
        let (before, after) = (text[..i].trim_end(), text[i + line.len()..].trim_start());
        text = match (before.is_empty(), after.is_empty()) {
            (true, _) => after.to_string(),
            (_, true) => before.to_string(),
            _ => format!("{before}\n\n{after}"),
        };
    }
    text
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
        // `Name:「…」` (or `Name:(action)「…」`) is already a memory line.
        (!rest.trim_start().starts_with('「') && !acted(line)).then(|| rest.trim().to_string())
    };
    // (`None`: a message that said nothing, left out.)
    let mut lines: Vec<Option<String>> = Vec::new();
    // The open message: its line in `lines`, speaker and text so far.
    let mut open: Option<(usize, &str, String)> = None;
    let close = |open: &mut Option<(usize, &str, String)>, lines: &mut Vec<Option<String>>| {
        if let Some((at, who, text)) = open.take() {
            lines[at] = Some(format!("{who}:「{}」", text.trim())).filter(|_| !text.trim().is_empty());
        }
    };
    for line in block.lines().map(str::trim_end) {
        if let Some((who, text)) = [name, user]
            .into_iter()
            .find_map(|who| speaking(line, who).map(|text| (who, text)))
        {
            close(&mut open, &mut lines);
            lines.push(None);
            open = Some((lines.len() - 1, who, text));
        } else if let Some((_, _, text)) = open
            .as_mut()
            .filter(|_| !own_line(line))
        {
            text.push('\n');
            text.push_str(line);
        } else if !line.trim().is_empty() {
            close(&mut open, &mut lines);
            lines.push(Some(line.trim().to_string()));
        }
    }
    close(&mut open, &mut lines);
    lines.into_iter().flatten().collect::<Vec<_>>().join("\n")
}

/// Whether a line of an example block is a memory's own, never the message before it going on: an
/// utterance `Name:「…」`, or narration written `:…` as memories write it.
fn own_line(line: &str) -> bool {
    utterance(line).is_some() || acted(line) || line.trim_start().starts_with([':', '：'])
}

/// Whether a line is a memory's utterance with an action before the words, as ChatHaruhi writes
/// them: `小明:(举手)「我知道答案！」`.
fn acted(line: &str) -> bool {
    // At the first colon of either width (the words may hold the other: `「3:00 见」`).
    line.find([':', '：'])
        .map(|at| (&line[..at], &line[at + line[at..].chars().next().map_or(1, char::len_utf8)..]))
        .is_some_and(|(who, rest)| {
            let who = who.trim();
            !who.is_empty() && who.chars().count() <= 40 && rest.contains('「') && rest.trim_end().ends_with('」')
        })
}

/// Whether a chunk written as `{{char}}:`/`{{user}}:` messages imports back as it was: not when a
/// line after one of them would be read as that message going on (narration such as `旁白: …`, an
/// utterance with an action after it, someone's utterance over several lines, a blank line), nor
/// when one of them is empty (an import leaves out an empty message).
fn comes_back(segments: &[Segment<'_>], c: &Character) -> bool {
    let mut open = false;
    for s in segments {
        match s {
            Segment::Said(who, text) if *who == c.name || *who == c.experimenter => {
                if text.trim().is_empty() {
                    return false;
                }
                open = true;
            }
            Segment::Said(_, text) if open && text.contains('\n') => return false,
            Segment::Said(..) => open = false,
            Segment::Line(line) if own_line(line) => open = false,
            Segment::Line(_) if open => return false,
            Segment::Line(_) => {}
        }
    }
    true
}

/// A memory chunk as an example block: the character's and the experimenter's `Name:「text」`
/// utterances become `{{char}}: text` and `{{user}}: text`, other lines stay as they are. A chunk
/// that would not import back so (see [`comes_back`]) is written as memories write it, each line
/// its own, which an import keeps as it is.
fn example(chunk: &str, c: &Character) -> String {
    let parts = segments(chunk);
    if !comes_back(&parts, c) {
        return chunk.to_string();
    }
    let written = parts
        .into_iter()
        .map(|s| match s {
            Segment::Said(who, text) if who == c.name => format!("{{{{char}}}}: {text}"),
            Segment::Said(who, text) if who == c.experimenter => format!("{{{{user}}}}: {text}"),
            Segment::Said(who, text) => format!("{who}:「{text}」"),
            Segment::Line(line) => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    // What the reading of an utterance trims (a space inside 「 」) would not come back either.
    let back = dialogue(&resolve(&written, &c.name, &c.experimenter), &c.name, &c.experimenter);
    if clean(&back) == clean(chunk) { written } else { chunk.to_string() }
}

/// Greetings (`first_mes`, `alternate_greetings`) and `mes_example` from memory chunks: leading
/// chunks that are one utterance of the character alone are its greetings, the others example
/// dialogues. An utterance an import would take for narration (an action alone, words about someone
/// in the third person: see [`is_narration`]) is written as an example, where its speaker stays.
fn greetings_and_examples(c: &Character, memories: &[String]) -> (String, Vec<String>, String) {
    let greeting_of = |chunk: &String| match segments(chunk).as_slice() {
        [Segment::Said(who, text)] if *who == c.name && !is_narration(text, &c.name) => Some(text.to_string()),
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
/// example dialogues; `extensions.incharacter` keeps the id, language, experimenter, targets,
/// other aliases, catchphrases and work, and
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
        // The other aliases; all of them, the name in its place (or last, where it is none), when
        // the name is not the first (the first alias is the one prompts name, so their order comes
        // back too: import puts the name first unless the list places it).
        let aliases: Vec<&String> = match c.aliases.first() {
            Some(first) if *first != c.name => {
                let mut all: Vec<&String> = c.aliases.iter().collect();
                if !c.aliases.contains(&c.name) {
                    all.push(&c.name);
                }
                all
            }
            _ => c.aliases.iter().filter(|a| **a != c.name).collect(),
        };
        if !aliases.is_empty() {
            ours.insert("aliases".into(), json!(aliases));
        }
        if !c.catchphrases.is_empty() {
            ours.insert("catchphrases".into(), json!(c.catchphrases));
        }
        if !c.work.is_empty() {
            ours.insert("work".into(), json!(c.work));
        }
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
    let info = c.card.clone().unwrap_or_default();
    // The name and experimenter the import wrote the texts with: what it says it used, else (an
    // older import did not say) the candidates under which the texts read back unedited — the
    // card's name, the present one; the experimenter now, the card's, `User`.
    let candidate = |said: &str, others: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = Vec::new();
        for n in std::iter::once(said).chain(others.iter().copied()) {
            if !n.is_empty() && !all.iter().any(|a| a == n) {
                all.push(n.to_string());
            }
        }
        all
    };
    let card_name = one_line(&card.name);
    let ours_user = card.ours.as_ref().and_then(|o| o.experimenter.clone()).unwrap_or_default();
    let names = candidate(&info.imported_name, &[&card_name, name]);
    let users = candidate(&info.imported_experimenter, &[user, &ours_user, "User"]);
    let unedited = |n: &str, u: &str| {
        usize::from(c.description == prompt(card, n, u, c.language))
            + usize::from(self::memories(card, n, u).into_iter().map(|(m, _)| m).eq(memories.iter().cloned()))
            + usize::from(part(&card.post_history_instructions, n, u) == c.post_history.trim())
    };
    let (was_name, was_user) = names
        .iter()
        .flat_map(|n| users.iter().map(move |u| (n.clone(), u.clone())))
        .enumerate()
        .max_by_key(|(i, (n, u))| (unedited(n, u), std::cmp::Reverse(*i)))
        .map(|(_, pair)| pair)
        .unwrap_or_else(|| (name.to_string(), user.to_string()));
    let (was_name, was_user) = (was_name.as_str(), was_user.as_str());
    let mut root = card.json.clone();
    let data = match card.spec {
        Spec::V1 => root.as_object_mut(),
        Spec::V2 | Spec::V3 => root.get_mut("data").and_then(Value::as_object_mut),
    };
    let Some(data) = data else {
        return card.json.clone();
    };
    // What this export writes that only a V2 card has: a V1 card given one becomes V2 (below), else
    // an import would read past it (a V1 card has no alternate greetings).
    let mut beyond_v1 = false;
    let mut set = |key: &str, value: Value| {
        let empty = value.as_str() == Some("") || value.as_array().is_some_and(Vec::is_empty);
        beyond_v1 |= !empty && !V1_FIELDS.contains(&key);
        data.insert(key.to_string(), value);
    };
    // An edited text in the author's form: either name, and either experimenter, as placeholders.
    // The longer name first: "Ann Birch" renamed "Ann" is never left "{{char}} Birch".
    let (first, second) = match name.chars().count() >= was_name.chars().count() {
        true => ((name, user), (was_name, was_user)),
        false => ((was_name, was_user), (name, user)),
    };
    let now = |text: &str| Value::String(unresolve(&unresolve(text, first.0, first.1), second.0, second.1));
    if name != one_line(&card.name) {
        set("name", Value::String(name.to_string()));
    }
    if c.description != prompt(card, was_name, was_user, c.language) {
        if card.ours.as_ref().is_some_and(Ours::whole_prompt) {
            set("description", Value::String(c.description.clone()));
        } else {
            // The import's lines name the character as it was, or (updated with a rename) as it is.
            let wrapped = |n: &str| c.description.contains(&wrapper(n, c.language).0);
            let split_name = if !wrapped(was_name) && wrapped(name) { name } else { was_name };
            let parts = split_prompt(&c.description, split_name, c.language);
            let was = [&card.system_prompt, &card.description, &card.personality, &card.scenario];
            for ((key, was), is) in ["system_prompt", "description", "personality", "scenario"]
                .into_iter()
                .zip(was)
                .zip(&parts)
            {
                if part(was, was_name, was_user) != *is {
                    set(key, now(is));
                }
            }
        }
    }
    if part(&card.post_history_instructions, was_name, was_user) != c.post_history.trim() {
        set("post_history_instructions", now(&c.post_history));
    }
    let made: Vec<String> = self::memories(card, was_name, was_user).into_iter().map(|(m, _)| m).collect();
    if made != memories {
        let (first_mes, greetings, examples) = greetings_and_examples(c, memories);
        set("first_mes", Value::String(first_mes));
        set("alternate_greetings", json!(greetings));
        set("mes_example", Value::String(examples));
    }
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
        beyond_v1 = true;
    }
    match (card.spec, beyond_v1) {
        (Spec::V1, true) => json!({"spec": "chara_card_v2", "spec_version": "2.0", "data": root}),
        _ => root,
    }
}

/// The fields of a V1 card (flat JSON).
const V1_FIELDS: [&str; 6] = ["name", "description", "personality", "scenario", "first_mes", "mes_example"];

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
mod tests;
