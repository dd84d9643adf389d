//! Questionnaires from InCharacter (`data/questionnaires/<NAME>.json`: statements and interview questions
//! in English and Chinese, dimension descriptions, the option wording in the conversion instruction) and
//! PsychoBench (`questionnaires.json`, a list of English-only questionnaires). What a source lacks is
//! filled so the scale validates: Chinese text falls back to the English, missing interview questions
//! and descriptions are generic, and the written file starts with a comment saying which fields were
//! filled so the user can review them. Items outside every category become fillers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::{Existing, MAX_FILE, Replaced, claim, clean, read_text};
use crate::domain::diagnostic::Source;
use crate::domain::scale::{Scale, range_problem};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleFormat {
    Incharacter,
    Psychobench,
}

#[derive(Debug, Default, Clone)]
pub struct ScaleOptions {
    /// Which questionnaire of a PsychoBench list (its `name`); an InCharacter file holds one.
    pub name: Option<String>,
    /// The scale id [default: the questionnaire's name].
    pub id: Option<String>,
    /// Replace what already holds that id (a user file, or a bundled scale then overridden).
    pub replace: bool,
    /// Told (with the data dir) when another import into the same data dir is under way and this one
    /// waits for it to end.
    pub waiting: Option<fn(&Path)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ImportedScale {
    pub id: String,
    pub file: PathBuf,
    pub items: usize,
    pub dimensions: usize,
    /// Fields the source did not have, filled by the importer.
    pub filled: Vec<String>,
    /// What held the id before, when `replace` was given and something did.
    pub replaced: Option<Replaced>,
}

#[derive(Serialize)]
struct Localized {
    en: String,
    zh: String,
}

#[derive(Serialize)]
struct ScaleFile {
    id: String,
    name: String,
    name_zh: String,
    citation: String,
    range: [i32; 2],
    #[serde(skip_serializing_if = "Option::is_none")]
    conversion_instruction: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    questionnaire_prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conversion_prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    questionnaire_setting: Option<String>,
    options: LocalizedList,
    self_report_stem: Localized,
    #[serde(skip_serializing_if = "Option::is_none")]
    self_report_instruction: Option<Localized>,
    dimensions: Vec<DimensionFile>,
    items: Vec<ItemFile>,
}

#[derive(Serialize)]
struct LocalizedList {
    en: Vec<String>,
    zh: Vec<String>,
}

#[derive(Serialize)]
struct DimensionFile {
    name: String,
    name_zh: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    poles: Option<[String; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conversion_instruction: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    option_labels: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conversion_prompt: Option<String>,
    low: Localized,
    high: Localized,
    description: Localized,
}

#[derive(Serialize)]
struct ItemFile {
    id: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimension: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keying: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    filler: bool,
    statement: Localized,
    question: Localized,
}

/// `N denotes 'label'` (or `N代表“label”`) pairs in an instruction text.
fn option_labels(text: &str) -> BTreeMap<i32, String> {
    let mut out = BTreeMap::new();
    for marker in [" denotes ", " means ", "代表", "表示"] {
        for (at, _) in text.match_indices(marker) {
            let digits = super::trailing_digits(text[..at].trim_end());
            let after = text[at + marker.len()..].trim_start();
            let mut chars = after.chars();
            if !chars.next().is_some_and(|c| "'\"“‘".contains(c)) {
                continue;
            }
            let label: String = chars.take_while(|c| !"'\"”’".contains(*c)).collect();
            if let (Ok(n), false) = (digits.parse::<i32>(), label.trim().is_empty()) {
                out.entry(n).or_insert_with(|| label.trim().to_string());
            }
        }
    }
    out
}

/// The numbers a prompt asks for: its first "A to B" ("from 1 to 7", "a scale of 1 to 7") or "between
/// A and B", else its first "A-B" / "A–B", the numbers signed ("from -3 to 3" is read as such, not
/// passed over for a range the prompt never said). Decimals, dates and numbering ("0.5 to 1.0",
/// "2023-2024-05") are no range of whole numbers.
fn stated_range(text: &str) -> Option<[i32; 2]> {
    /// The signed integer `text` starts with, and what follows it.
    fn number(text: &str) -> Option<(i32, &str)> {
        let sign = match text.chars().next() {
            Some(c @ ('-' | '−')) => c.len_utf8(),
            _ => 0,
        };
        let len = text[sign..].bytes().take_while(u8::is_ascii_digit).count();
        let n: i32 = text[sign..sign + len].parse().ok()?;
        Some((if sign > 0 { -n } else { n }, &text[sign + len..]))
    }
    // A number ends a range where no digit, letter, decimal point, further dash or slash goes on.
    let ends = |after: &str| {
        let mut rest = after.chars();
        match rest.next() {
            None => true,
            Some('.') => !rest.next().is_some_and(|c| c.is_ascii_digit()),
            Some(c) => !(c.is_alphanumeric() || matches!(c, '-' | '–' | '/')),
        }
    };
    let starts: Vec<usize> = text
        .char_indices()
        .filter(|&(i, c)| {
            (c.is_ascii_digit() || c == '-' || c == '−')
                && !text[..i].ends_with(|p: char| p.is_alphanumeric() || matches!(p, '.' | '/' | ':' | '-' | '–'))
        })
        .map(|(i, _)| i)
        .collect();
    for worded in [true, false] {
        for &i in &starts {
            let Some((a, rest)) = number(&text[i..]) else { continue };
            let head = text[..i].trim_end();
            let between = head.len() >= 7 && head.get(head.len() - 7..).is_some_and(|w| w.eq_ignore_ascii_case("between"));
            let joined = match (worded, between) {
                (true, true) => rest.strip_prefix(" and "),
                (true, false) => rest.strip_prefix(" to "),
                (false, _) => rest.strip_prefix(['-', '–']),
            };
            if let Some((b, after)) = joined.and_then(number)
                && ends(after)
            {
                return Some([a, b]);
            }
        }
    }
    None
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

struct Draft {
    name: String,
    range: [i32; 2],
    options_en: BTreeMap<i32, String>,
    options_zh: BTreeMap<i32, String>,
    /// (name, description en, description zh)
    dimensions: Vec<(String, Option<String>, Option<String>)>,
    /// The questionnaire's own texts, kept as they came (placeholders in the project's form).
    own: OwnTexts,
    /// (id, dimension, keying, statement en, zh, question en, zh)
    items: Vec<RawItem>,
    citation: String,
}

/// What a questionnaire says to the models in its own words: the self-report stem and instruction,
/// the conversion instructions (whole, and per dimension with its option wording), its prompt.
#[derive(Default)]
struct OwnTexts {
    stem: Option<(String, Option<String>)>,
    self_report_instruction: Option<(String, Option<String>)>,
    conversion_instruction: Option<String>,
    questionnaire_prompt: Option<String>,
    conversion_prompt: Option<String>,
    questionnaire_setting: Option<String>,
    /// Dimension name → its conversion instruction.
    dimension_instructions: BTreeMap<String, String>,
    /// Dimension name → its conversion task description.
    dimension_prompts: BTreeMap<String, String>,
}

/// A questionnaire text with its `<character>` and `<statement>` in the project's placeholder form,
/// kept whole (a task description that ends in a newline is followed by the instruction on its own
/// line); only control characters other than newlines and tabs are taken out.
fn own_text(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect::<String>()
        .replace("<character>", "{character}")
        .replace("<statement>", "{statement}")
}

struct RawItem {
    id: u32,
    dimension: Option<String>,
    keying: String,
    statement_en: String,
    statement_zh: Option<String>,
    question_en: Option<String>,
    question_zh: Option<String>,
}

/// Where a questionnaire comes from: its file and text, and for one of a PsychoBench list its index
/// and name. Its problems are named at the value they are about (`file:line:column`).
struct Origin<'a> {
    file: String,
    text: &'a str,
    /// The questionnaire's place in the file: empty, or its index in a PsychoBench list.
    within: Vec<String>,
    /// A PsychoBench questionnaire's name.
    name: Option<&'a str>,
}

impl Origin<'_> {
    /// `file:line:column` of the value at `path` within the questionnaire, else of the nearest
    /// enclosing value that is there.
    fn at(&self, path: &[&str]) -> String {
        let source = Source::new(&self.file, self.text);
        let full: Vec<&str> = self.within.iter().map(String::as_str).chain(path.iter().copied()).collect();
        let found = (0..=full.len()).rev().find_map(|n| source.json_at(&full[..n]));
        match found {
            Some((line, column)) => format!("{}:{line}:{column}", self.file),
            None => self.to_string(),
        }
    }
}

impl std::fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name {
            Some(name) => write!(f, "{} ({name})", self.file),
            None => f.write_str(&self.file),
        }
    }
}

/// A name as one line: its runs of white space (line breaks too) one space each.
fn one_line(text: &str) -> String {
    clean(text).split_whitespace().collect::<Vec<_>>().join(" ")
}

fn item_id(key: &str, origin: &Origin, questions: &[&str]) -> Result<u32, String> {
    key.trim().parse().map_err(|_| {
        let at = origin.at(&[questions, &[key]].concat());
        format!("{at}: item key \"{key}\" is not a number")
    })
}

fn categories(q: &Value, origin: &Origin) -> Result<Vec<(String, Vec<u32>)>, String> {
    let Some(list) = q.get("categories").and_then(Value::as_array) else {
        return Err(format!("{}: \"categories\" must be a list", origin.at(&["categories"])));
    };
    list.iter()
        .enumerate()
        .map(|(i, c)| {
            let i = i.to_string();
            let name = c
                .get("cat_name")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{}: a category has no \"cat_name\"", origin.at(&["categories", &i, "cat_name"])))?;
            let ids = c
                .get("cat_questions")
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    let at = origin.at(&["categories", &i, "cat_questions"]);
                    format!("{at}: category \"{name}\" has no \"cat_questions\" list")
                })?
                .iter()
                .enumerate()
                .map(|(j, v)| {
                    v.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| {
                        let at = origin.at(&["categories", &i, "cat_questions", &j.to_string()]);
                        format!("{at}: category \"{name}\": {v} is not an item number")
                    })
                })
                .collect::<Result<Vec<u32>, String>>()?;
            Ok((clean(name), ids))
        })
        .collect()
}

fn incharacter(q: &Value, origin: &Origin) -> Result<Draft, String> {
    if q.is_array() {
        return Err(format!(
            "{}: a list of questionnaires is a PsychoBench file, which an InCharacter one never is \
             (import it with --format psychobench)",
            origin.at(&[])
        ));
    }
    let name = q
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{}: no \"name\"", origin.at(&["name"])))?;
    let at_range = || origin.at(&["range"]);
    let range = match q.get("range").and_then(Value::as_array).map(Vec::as_slice) {
        Some([a, b]) => match (a.as_i64(), b.as_i64()) {
            (Some(a), Some(b)) => match (i32::try_from(a), i32::try_from(b)) {
                (Ok(a), Ok(b)) => [a, b],
                _ => return Err(format!("{}: \"range\" is out of bounds", at_range())),
            },
            _ => return Err(format!("{}: \"range\" must be two integers", at_range())),
        },
        _ => return Err(format!("{}: \"range\" must be [min, max]", at_range())),
    };
    if let Some(problem) = range_problem(range) {
        return Err(format!("{}: {problem}", at_range()));
    }
    let cats = categories(q, origin)?;
    let desc = |dim: &str| str_at(q, &["prompts", "dim_desc", dim]).map(clean);
    let dimensions = cats.iter().map(|(n, _)| (n.clone(), desc(n), None)).collect();
    let Some(questions) = q.get("questions").and_then(Value::as_object) else {
        return Err(format!("{}: \"questions\" must be an object", origin.at(&["questions"])));
    };
    let mut items = Vec::new();
    for (key, it) in questions {
        let id = item_id(key, origin, &["questions"])?;
        let at = |field: &str| origin.at(&["questions", key, field]);
        let statement_en = it
            .get("origin_en")
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| format!("{}: item {id} has no \"origin_en\" statement", at("origin_en")))?;
        let dimension = it.get("dimension").and_then(Value::as_str).map(clean);
        // A dimension that no category has, or whose category does not list the item, is a mistake
        // that would silently leave the item unscored. (An item without a dimension is unscored
        // whatever lists it, as InCharacter's LOT-R item 9 is.)
        if let Some(d) = &dimension {
            match cats.iter().find(|(c, _)| c == d) {
                None => {
                    let known: Vec<&str> = cats.iter().map(|(c, _)| c.as_str()).collect();
                    return Err(format!(
                        "{}: item {id}: dimension \"{d}\" is not a category (categories: {})",
                        at("dimension"),
                        known.join(", ")
                    ));
                }
                Some((_, ids)) if !ids.contains(&id) => {
                    return Err(format!(
                        "{}: item {id} names dimension \"{d}\", whose cat_questions do not list it",
                        at("dimension")
                    ));
                }
                Some(_) => {}
            }
        }
        let category = it.get("category").and_then(Value::as_str).unwrap_or("positive");
        for field in ["rewritten_en", "rewritten_zh", "origin_zh"] {
            if it.get(field).is_some_and(|v| v.as_str().is_none_or(|s| s.trim().is_empty())) {
                return Err(format!("{}: item {id}: \"{field}\" must be a non-empty text", at(field)));
            }
        }
        items.push(RawItem {
            id,
            dimension,
            keying: clean(category),
            statement_en: clean(statement_en),
            statement_zh: it.get("origin_zh").and_then(Value::as_str).map(clean),
            question_en: it.get("rewritten_en").and_then(Value::as_str).map(clean),
            question_zh: it.get("rewritten_zh").and_then(Value::as_str).map(clean),
        });
    }
    for (i, (name, ids)) in cats.iter().enumerate() {
        if let Some((j, id)) = ids.iter().enumerate().find(|(_, id)| !items.iter().any(|it: &RawItem| it.id == **id)) {
            let at = origin.at(&["categories", &i.to_string(), "cat_questions", &j.to_string()]);
            return Err(format!(
                "{at}: category \"{name}\" lists item {id}, which is not among the questions"
            ));
        }
    }
    let instruction = |lang: &str| {
        str_at(q, &["prompts", "llm_choice_instruction", lang])
            .map(option_labels)
            .unwrap_or_default()
    };
    let full = q.get("full_name").and_then(Value::as_str).unwrap_or(name);
    let both = |key: &str| {
        str_at(q, &["prompts", key, "en"]).map(|en| (own_text(en), str_at(q, &["prompts", key, "zh"]).map(own_text)))
    };
    let own = OwnTexts {
        stem: both("rpa_choose_prefix"),
        self_report_instruction: both("rpa_choice_instruction"),
        conversion_instruction: str_at(q, &["prompts", "llm_choice_instruction", "en"]).map(own_text),
        questionnaire_prompt: q.get("psychobench_prompt").and_then(Value::as_str).map(own_text),
        conversion_prompt: str_at(q, &["prompts", "convert_to_choice", "en"]).map(own_text),
        questionnaire_setting: None,
        dimension_prompts: cats
            .iter()
            .filter_map(|(n, _)| {
                let text = str_at(q, &["prompts", "convert_to_choice_adjoption", n, "en"])?;
                Some((n.clone(), own_text(text)))
            })
            .collect(),
        dimension_instructions: cats
            .iter()
            .filter_map(|(n, _)| {
                let text = str_at(q, &["prompts", "llm_choice_instruction_adjoption", n, "en"])?;
                Some((n.clone(), own_text(text)))
            })
            .collect(),
    };
    Ok(Draft {
        name: one_line(name),
        range,
        options_en: instruction("en"),
        options_zh: instruction("zh"),
        dimensions,
        own,
        items,
        citation: format!(
            "{} ({}), as distributed with InCharacter (Wang et al., ACL 2024); imported from {origin}. \
             Add the instrument's own citation.",
            clean(full),
            clean(name)
        ),
    })
}

fn psychobench(q: &Value, origin: &Origin) -> Result<Draft, String> {
    let name = q
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{}: no \"name\"", origin.at(&["name"])))?;
    // PsychoBench reverses an answer as `scale - x`, so the range is [1, scale - 1] or [0, scale]; the
    // prompt's "from A to B" says which.
    let top = q
        .get("scale")
        .and_then(Value::as_i64)
        .and_then(|t| i32::try_from(t).ok())
        .ok_or_else(|| format!("{}: \"scale\" must be an integer", origin.at(&["scale"])))?;
    let prompt = q.get("prompt").and_then(Value::as_str).unwrap_or_default();
    let range = match stated_range(prompt) {
        Some([0, b]) if b == top => [0, top],
        None => [1, top.saturating_sub(1)],
        Some([1, b]) if b == top.saturating_sub(1) => [1, b],
        // A prompt that asks for other numbers than the scores would read: which is meant cannot
        // be told, and a guess would score every answer on the wrong range.
        Some([a, b]) => {
            return Err(format!(
                "{}: the prompt asks for numbers from {a} to {b}, but \"scale\" {top} reads them as {} to {} \
                 (or 0 to {top}); make the two agree",
                origin.at(&["prompt"]),
                1,
                top.saturating_sub(1)
            ));
        }
    };
    if let Some(problem) = range_problem(range) {
        return Err(format!("{}: \"scale\" {top}: {problem}", origin.at(&["scale"])));
    }
    let cats = categories(q, origin)?;
    let reverse: Vec<u32> = match q.get("reverse") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(j, v)| {
                v.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| {
                    let at = origin.at(&["reverse", &j.to_string()]);
                    format!("{at}: \"reverse\": {v} is not an item number")
                })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(format!(
                "{}: \"reverse\" must be a list of item numbers",
                origin.at(&["reverse"])
            ));
        }
    };
    let Some(questions) = q.get("questions").and_then(Value::as_object) else {
        return Err(format!("{}: \"questions\" must be an object", origin.at(&["questions"])));
    };
    let mut items = Vec::new();
    for (key, text) in questions {
        let id = item_id(key, origin, &["questions"])?;
        let at = || origin.at(&["questions", key]);
        let statement = text
            .as_str()
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| format!("{}: item {id} is not a non-empty text", at()))?;
        let dims: Vec<&String> = cats
            .iter()
            .filter(|(_, ids)| ids.contains(&id))
            .map(|(n, _)| n)
            .collect();
        if dims.len() > 1 {
            return Err(format!(
                "{}: item {id} belongs to several categories ({}); a scale item scores one dimension",
                at(),
                dims.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        items.push(RawItem {
            id,
            dimension: dims.first().map(|s| s.to_string()),
            keying: if reverse.contains(&id) { "negative" } else { "positive" }.into(),
            statement_en: clean(statement),
            statement_zh: None,
            question_en: None,
            question_zh: None,
        });
    }
    // Every item number "reverse" and the categories list is a question, listed once.
    let asked = |n: &u32| items.iter().any(|i: &RawItem| i.id == *n);
    if let Some(j) = reverse.iter().position(|n| !asked(n)) {
        let at = origin.at(&["reverse", &j.to_string()]);
        return Err(format!("{at}: \"reverse\" lists item {}, which is not among the questions", reverse[j]));
    }
    for (i, (name, ids)) in cats.iter().enumerate() {
        for (j, n) in ids.iter().enumerate() {
            let at = || origin.at(&["categories", &i.to_string(), "cat_questions", &j.to_string()]);
            if !asked(n) {
                return Err(format!("{}: category \"{name}\" lists item {n}, which is not among the questions", at()));
            }
            if ids[..j].contains(n) {
                return Err(format!("{}: category \"{name}\" lists item {n} twice", at()));
            }
        }
    }
    Ok(Draft {
        name: one_line(name),
        range,
        options_en: option_labels(prompt),
        options_zh: BTreeMap::new(),
        dimensions: cats.into_iter().map(|(n, _)| (n, None, None)).collect(),
        own: OwnTexts {
            questionnaire_prompt: Some(own_text(prompt)).filter(|p| !p.is_empty()),
            questionnaire_setting: q.get("inner_setting").and_then(Value::as_str).map(own_text),
            ..OwnTexts::default()
        },
        items,
        citation: format!(
            "{} as distributed with PsychoBench (Huang et al., ICLR 2024); imported from {origin}. \
             Add the instrument's own citation.",
            clean(name)
        ),
    })
}

/// The self-report stem and instruction: the questionnaire's own when it has a stem that names the
/// statement, the importer's otherwise; and which Chinese texts were copied from the English.
fn self_report(own: &OwnTexts) -> (Localized, Option<Localized>, Vec<&'static str>) {
    let mut copied = Vec::new();
    let stem = own.stem.clone().filter(|(en, zh)| {
        en.contains("{statement}") && zh.as_deref().is_none_or(|zh| zh.contains("{statement}"))
    });
    let stem = match stem {
        Some((en, zh)) => Localized {
            zh: zh.unwrap_or_else(|| {
                copied.push("self_report_stem.zh (copied from English)");
                en.clone()
            }),
            en,
        },
        None => Localized {
            en: "How much do you agree with the following statement about you? \"{statement}\"".into(),
            zh: "你在多大程度上同意下面这句关于你的描述？“{statement}”".into(),
        },
    };
    let instruction = own.self_report_instruction.clone().map(|(en, zh)| Localized {
        zh: zh.unwrap_or_else(|| {
            copied.push("self_report_instruction.zh (copied from English)");
            en.clone()
        }),
        en,
    });
    (stem, instruction, copied)
}

fn build(d: Draft, id: &str) -> (ScaleFile, Vec<String>) {
    let mut filled = Vec::new();
    let mut note = |what: &str| {
        if !filled.iter().any(|f| f == what) {
            filled.push(what.to_string());
        }
    };
    let points: Vec<i32> = (d.range[0]..=d.range[1]).collect();
    let mut labels = |map: &BTreeMap<i32, String>, what: &str| -> Vec<String> {
        if points.iter().any(|p| !map.contains_key(p)) {
            note(what);
        }
        points
            .iter()
            .map(|p| map.get(p).cloned().unwrap_or_else(|| p.to_string()))
            .collect()
    };
    let options = LocalizedList {
        en: labels(&d.options_en, "options.en (numbers)"),
        zh: labels(&d.options_zh, "options.zh (numbers)"),
    };
    let poled = !d.dimensions.is_empty()
        && d.dimensions.iter().all(|(n, _, _)| {
            let parts: Vec<&str> = n.split('/').collect();
            parts.len() == 2 && parts.iter().all(|p| !p.trim().is_empty()) && parts[0] != parts[1]
        });
    let dimensions = d
        .dimensions
        .iter()
        .map(|(name, en, zh)| {
            let en = en.clone().unwrap_or_else(|| {
                note("dimension descriptions (generic)");
                format!(
                    "{name}, as measured by the {} questionnaire. No description came with the import: \
                     rate how strongly the character shows {name}, judging from the statements of this \
                     dimension's items.",
                    d.name
                )
            });
            let zh = zh.clone().unwrap_or_else(|| {
                note("dimension descriptions in Chinese (copied from English)");
                en.clone()
            });
            let poles = poled.then(|| {
                let (a, b) = name.split_once('/').unwrap_or_default();
                [a.trim().to_string(), b.trim().to_string()]
            });
            let (low, high) = match &poles {
                Some([hi, lo]) => (lo.clone(), hi.clone()),
                None => (format!("low {name}"), format!("high {name}")),
            };
            let instruction = d.own.dimension_instructions.get(name).cloned();
            let labels = instruction.as_deref().map(option_labels).unwrap_or_default();
            let option_labels = points
                .iter()
                .map(|p| labels.get(p).cloned())
                .collect::<Option<Vec<String>>>();
            DimensionFile {
                name: name.clone(),
                name_zh: name.clone(),
                poles,
                conversion_instruction: instruction,
                option_labels,
                conversion_prompt: d.own.dimension_prompts.get(name).cloned(),
                low: Localized {
                    en: low.clone(),
                    zh: low,
                },
                high: Localized {
                    en: high.clone(),
                    zh: high,
                },
                description: Localized { en, zh },
            }
        })
        .collect();
    let mut items: Vec<ItemFile> = d
        .items
        .into_iter()
        .map(|it| {
            let statement_zh = it.statement_zh.unwrap_or_else(|| {
                note("statements in Chinese (copied from English)");
                it.statement_en.clone()
            });
            let question_en = it.question_en.unwrap_or_else(|| {
                note("interview questions (generic)");
                format!(
                    "Would you say this describes you: \"{}\"? Tell me about it.",
                    it.statement_en
                )
            });
            let question_zh = it.question_zh.unwrap_or_else(|| {
                note("interview questions in Chinese (generic)");
                format!("你觉得“{statement_zh}”这句话说的是你吗？说说看。")
            });
            ItemFile {
                id: it.id,
                filler: it.dimension.is_none(),
                keying: it.dimension.as_ref().map(|_| it.keying.clone()),
                dimension: it.dimension,
                statement: Localized {
                    en: it.statement_en,
                    zh: statement_zh,
                },
                question: Localized {
                    en: question_en,
                    zh: question_zh,
                },
            }
        })
        .collect();
    items.sort_by_key(|i| i.id);
    let (self_report_stem, self_report_instruction, copied) = self_report(&d.own);
    for what in copied {
        note(what);
    }
    let file = ScaleFile {
        id: id.to_string(),
        name: d.name.clone(),
        name_zh: d.name.clone(),
        citation: d.citation,
        range: d.range,
        options,
        self_report_stem,
        self_report_instruction,
        conversion_instruction: d.own.conversion_instruction,
        questionnaire_prompt: d.own.questionnaire_prompt,
        conversion_prompt: d.own.conversion_prompt,
        questionnaire_setting: d.own.questionnaire_setting,
        dimensions,
        items,
    };
    (file, filled)
}

/// Where in questionnaire `q` a problem of the scale converted from it is: the item a message
/// `item N: …` names (its key in `"questions"`), else the questionnaire.
fn item_path(q: &Value, message: &str) -> Vec<String> {
    // A category named twice: its second entry.
    if let Some(name) = message
        .strip_prefix("duplicate dimension \"")
        .and_then(|rest| rest.strip_suffix('"'))
    {
        let named = |c: &Value| c.get("cat_name").and_then(Value::as_str).is_some_and(|n| n.trim() == name);
        let categories = q.get("categories").and_then(Value::as_array);
        if let Some(i) = categories.and_then(|all| all.iter().enumerate().filter(|(_, c)| named(c)).nth(1)).map(|(i, _)| i) {
            return vec!["categories".into(), i.to_string(), "cat_name".into()];
        }
    }
    let id = message
        .strip_prefix("item ")
        .and_then(|rest| rest.split_once(':'))
        .and_then(|(id, _)| id.parse::<u32>().ok());
    let key = id.and_then(|id| {
        q.get("questions")?
            .as_object()?
            .keys()
            .find(|k| k.trim().parse() == Ok(id))
    });
    key.map_or_else(Vec::new, |k| vec!["questions".into(), k.clone()])
}

/// Imports one questionnaire from `file` into `<data_dir>/scales/<id>.toml`. `existing` tells what
/// already holds the id (which only `replace` may replace).
pub fn questionnaire<'s>(
    file: &Path,
    format: ScaleFormat,
    data_dir: &Path,
    options: &ScaleOptions,
    existing: impl Fn(&str) -> Existing<'s, Scale>,
) -> Result<ImportedScale, super::ImportError> {
    let text = read_text(file, MAX_FILE * 16, "a questionnaire file")?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| crate::files::json_error(file, &text, &e))?;
    let mut origin = Origin {
        file: file.display().to_string(),
        text: &text,
        within: Vec::new(),
        name: None,
    };
    let (draft, questionnaire) = match format {
        ScaleFormat::Incharacter => (incharacter(&value, &origin)?, &value),
        ScaleFormat::Psychobench => {
            let Some(list) = value.as_array() else {
                return Err(format!("{origin}: a PsychoBench file is a list of questionnaires").into());
            };
            let names: Vec<&str> = list.iter().filter_map(|q| q.get("name")?.as_str()).collect();
            let Some(wanted) = &options.name else {
                return Err(format!("{origin}: pass --name with one of: {}", names.join(", ")).into());
            };
            let (index, q) = list
                .iter()
                .enumerate()
                .find(|(_, q)| q.get("name").and_then(Value::as_str) == Some(wanted))
                .ok_or_else(|| {
                    format!(
                        "{origin}: no questionnaire \"{wanted}\" (there are: {})",
                        names.join(", ")
                    )
                })?;
            origin.within = vec![index.to_string()];
            origin.name = Some(wanted);
            (psychobench(q, &origin)?, q)
        }
    };
    if draft.dimensions.is_empty() {
        return Err(format!(
            "{}: the questionnaire has no categories, so no item would be scored",
            origin.at(&["categories"])
        )
        .into());
    }
    let id = options.id.clone().unwrap_or_else(|| draft.name.clone());
    if !crate::domain::is_id(&id) {
        return Err(format!(
            "scale id {} must be {} (pass --id)",
            crate::text::fit(&format!("{id:?}"), 82),
            crate::domain::ID_RULE
        )
        .into());
    }
    let default = data_dir.join("scales").join(format!("{id}.toml"));
    let _one = super::one_import_at_a_time(data_dir, options.waiting)?;
    let (path, replaced) = claim("scale", &id, default, &existing(&id), options.replace)?;
    let (scale_file, filled) = build(draft, &id);
    let body = toml::to_string(&scale_file).map_err(|e| e.to_string())?;
    // A comment is one line: a name or path with a line break (or another control character) in it
    // would end it and make the rest TOML.
    let comment = |text: String| -> String { text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect() };
    let header = if filled.is_empty() {
        format!("# Imported from {}.\n\n", comment(origin.to_string()))
    } else {
        format!(
            "# Imported from {}.\n# Filled by the importer (review before use): {}.\n\n",
            comment(origin.to_string()),
            comment(filled.join("; "))
        )
    };
    let generated = header + &body;
    super::too_large_for_the_catalog(&origin.to_string(), "scale", generated.len())?;
    // What the questionnaire's own checks above do not catch (an item's keying that names no pole
    // of its dimension, say) is found in the scale file it would become, which is not written: each
    // problem is named at its item in the questionnaire, or at the questionnaire.
    let scale = Scale::parse(Source::new(&path.display().to_string(), &generated)).map_err(|e| {
        e.iter()
            .map(|d| {
                let path = item_path(questionnaire, &d.message);
                let path: Vec<&str> = path.iter().map(String::as_str).collect();
                format!("{}: {}", origin.at(&path), d.message)
            })
            .collect::<Vec<_>>()
            .join("\n")
    })?;
    crate::files::write_atomic(&path, generated.as_bytes())?;
    Ok(ImportedScale {
        id,
        file: path,
        items: scale.items.len(),
        dimensions: scale.dimensions.len(),
        filled,
        replaced,
    })
}

#[cfg(test)]
mod tests;
