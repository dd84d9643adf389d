//! Psychological scales: items, dimensions, keying and score ranges, parsed and validated from the
//! project's scale TOML files. Parsing is pure (text in, `Scale` or located diagnostics out).

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::diagnostic::{Diagnostic, Source};

/// The two languages every scale and prompt is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    En,
    Zh,
}

impl Language {
    pub fn code(self) -> &'static str {
        match self {
            Language::En => "en",
            Language::Zh => "zh",
        }
    }

    pub fn parse(code: &str) -> Option<Self> {
        match code {
            "en" => Some(Language::En),
            "zh" => Some(Language::Zh),
            _ => None,
        }
    }
}

/// A text (or list of texts) in both languages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Localized<T> {
    pub en: T,
    pub zh: T,
}

impl<T> Localized<T> {
    pub fn get(&self, language: Language) -> &T {
        match language {
            Language::En => &self.en,
            Language::Zh => &self.zh,
        }
    }
}

/// The inclusive range of item options, e.g. 1–5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ScoreRange {
    pub min: i32,
    pub max: i32,
}

impl ScoreRange {
    pub fn midpoint(self) -> f64 {
        f64::from(self.min + self.max) / 2.0
    }

    pub fn span(self) -> f64 {
        f64::from(self.max - self.min)
    }

    pub fn contains(self, option: i32) -> bool {
        (self.min..=self.max).contains(&option)
    }

    /// The number of options a respondent chooses from.
    pub fn len(self) -> usize {
        (self.max - self.min + 1) as usize
    }

    pub fn is_empty(self) -> bool {
        self.max < self.min
    }
}

/// How an item's option maps onto its dimension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Keying {
    /// Agreeing means more of the dimension.
    Positive,
    /// Reverse-keyed: agreeing means less of the dimension (score = min + max − option).
    Negative,
    /// 16Personalities: agreeing points to this pole; the first pole of the dimension counts as positive.
    Pole { letter: String, first: bool },
}

impl Keying {
    /// Whether agreement raises the dimension score.
    pub fn is_positive(&self) -> bool {
        match self {
            Keying::Positive => true,
            Keying::Negative => false,
            Keying::Pole { first, .. } => *first,
        }
    }

    /// The keying as written in the scale file.
    pub fn as_str(&self) -> &str {
        match self {
            Keying::Positive => "positive",
            Keying::Negative => "negative",
            Keying::Pole { letter, .. } => letter,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Letters {
    pub low: String,
    pub high: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dimension {
    pub name: String,
    pub name_zh: String,
    /// 16Personalities: the two pole letters, first pole first (the score is the % of the first pole).
    pub poles: Option<[String; 2]>,
    /// Letters used in type codes (e.g. BFI "SCOEN"); derived from `poles` when those exist.
    pub letters: Option<Letters>,
    /// d-OC anchor words for the two ends.
    pub low: Localized<String>,
    pub high: Localized<String>,
    /// Guidance for the expert rater.
    pub description: Localized<String>,
    /// An extra instruction for this dimension only, which the judge templates may carry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// A questionnaire's own instruction for converting answers on this dimension (InCharacter's
    /// dimension-specific choice instruction); `{character}` in it is the character.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversion_instruction: Option<String>,
    /// The dimension-specific wording of each option (lowest first), for d-OC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub option_labels: Option<Vec<String>>,
    /// A questionnaire's own d-OC task description for this dimension (InCharacter's
    /// `convert_to_choice_adjoption`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversion_prompt: Option<String>,
}

impl Dimension {
    /// The letter for a label type (H/L), or "X" for a marginal one.
    pub fn letter(&self, high: Option<bool>) -> &str {
        match (high, &self.letters) {
            (Some(true), Some(l)) => &l.high,
            (Some(false), Some(l)) => &l.low,
            (Some(true), None) => "H",
            (Some(false), None) => "L",
            (None, _) => "X",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ItemRole {
    /// `dimension` indexes `Scale::dimensions`.
    Scored { dimension: usize, keying: Keying },
    /// Present in the instrument, never scored (BSRI 41–60, LOT-R 2/5/6/8/9).
    Filler,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    pub id: u32,
    #[serde(flatten)]
    pub role: ItemRole,
    /// The published statement (en) and the project's translation (zh).
    pub statement: Localized<String>,
    /// The open-ended interview question asked in place of the statement.
    pub question: Localized<String>,
}

impl Item {
    pub fn dimension(&self) -> Option<usize> {
        match self.role {
            ItemRole::Scored { dimension, .. } => Some(dimension),
            ItemRole::Filler => None,
        }
    }

    pub fn keying(&self) -> Option<&Keying> {
        match &self.role {
            ItemRole::Scored { keying, .. } => Some(keying),
            ItemRole::Filler => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scale {
    pub id: String,
    pub name: String,
    pub name_zh: String,
    pub citation: String,
    pub range: ScoreRange,
    pub options: Localized<Vec<String>>,
    pub self_report_stem: Localized<String>,
    /// A questionnaire's own instruction for answering with a number, read after the stem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_report_instruction: Option<Localized<String>>,
    /// A questionnaire's own instruction for converting answers into options (English); `{character}`
    /// in it is the character.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversion_instruction: Option<String>,
    /// A questionnaire's own prompt for the whole questionnaire (PsychoBench's `prompt`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub questionnaire_prompt: Option<String>,
    /// A questionnaire's own OC task description (InCharacter's `convert_to_choice`, English).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversion_prompt: Option<String>,
    /// A questionnaire's own system setting (PsychoBench's `inner_setting`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub questionnaire_setting: Option<String>,
    /// In the scale's own order (the order of type codes and charts).
    pub dimensions: Vec<Dimension>,
    /// In questionnaire order.
    pub items: Vec<Item>,
}

impl Scale {
    /// The version of what a session asks and scores with this scale: the lowercase hex SHA-256 of
    /// its definition (items, wordings, keying, dimensions, options, range, its own prompts), its
    /// names and citation left out. A resume is refused when a scale of one's own changed, as the
    /// session's items would then be asked in two versions.
    pub fn version(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut value = serde_json::to_value(self).expect("a scale serializes");
        if let Some(object) = value.as_object_mut() {
            for cosmetic in ["name", "name_zh", "citation"] {
                object.remove(cosmetic);
            }
        }
        let mut h = Sha256::new();
        h.update(b"scale-version-1\n");
        h.update(value.to_string().as_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// 16Personalities-style scales report each dimension as the % of its first pole.
    pub fn is_pole_percent(&self) -> bool {
        self.dimensions.iter().any(|d| d.poles.is_some())
    }

    /// The range of dimension scores and labels: [0, 100] for pole-percent scales, else the item range.
    pub fn dimension_range(&self) -> (f64, f64) {
        if self.is_pole_percent() {
            (0.0, 100.0)
        } else {
            (f64::from(self.range.min), f64::from(self.range.max))
        }
    }

    pub fn dimension_index(&self, name: &str) -> Option<usize> {
        self.dimensions.iter().position(|d| d.name == name)
    }

    /// What to say of a dimension name this scale does not have: the names it does have.
    pub fn no_dimension(&self, name: &str) -> String {
        let names: Vec<&str> = self.dimensions.iter().map(|d| d.name.as_str()).collect();
        format!("scale {} has no dimension \"{name}\" (it has: {})", self.id, names.join(", "))
    }

    pub fn scored_items(&self) -> impl Iterator<Item = &Item> {
        self.items.iter().filter(|i| i.dimension().is_some())
    }

    pub fn items_of(&self, dimension: usize) -> impl Iterator<Item = &Item> {
        self.items.iter().filter(move |i| i.dimension() == Some(dimension))
    }

    pub fn item(&self, id: u32) -> Option<&Item> {
        self.items.iter().find(|i| i.id == id)
    }

    /// Parses and validates a scale file; all problems found are returned, each located.
    pub fn parse(source: Source<'_>) -> Result<Scale, Vec<Diagnostic>> {
        let raw: RawScale = toml::from_str(source.text).map_err(|e| vec![source.toml_error(&e)])?;
        raw.validate(source)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScale {
    id: Spanned<String>,
    name: Spanned<String>,
    name_zh: Spanned<String>,
    citation: Spanned<String>,
    /// `[min, max]`: read as a list so that one of another length is refused, not cut to two.
    range: Spanned<Vec<i32>>,
    options: Spanned<Localized<Vec<String>>>,
    self_report_stem: Spanned<Localized<String>>,
    self_report_instruction: Option<Spanned<Localized<String>>>,
    conversion_instruction: Option<Spanned<String>>,
    questionnaire_prompt: Option<Spanned<String>>,
    conversion_prompt: Option<Spanned<String>>,
    questionnaire_setting: Option<Spanned<String>>,
    dimensions: Spanned<Vec<RawDimension>>,
    items: Spanned<Vec<RawItem>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDimension {
    name: Spanned<String>,
    name_zh: Spanned<String>,
    poles: Option<Spanned<[String; 2]>>,
    letters: Option<RawLetters>,
    low: Spanned<Localized<String>>,
    high: Spanned<Localized<String>>,
    description: Spanned<Localized<String>>,
    note: Option<Spanned<String>>,
    conversion_instruction: Option<Spanned<String>>,
    option_labels: Option<Spanned<Vec<String>>>,
    conversion_prompt: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLetters {
    low: Spanned<String>,
    high: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawItem {
    id: Spanned<u32>,
    dimension: Option<Spanned<String>>,
    keying: Option<Spanned<String>>,
    #[serde(default)]
    filler: bool,
    statement: Spanned<Localized<String>>,
    question: Spanned<Localized<String>>,
}

/// The placeholders a scale text may hold (filled when it is sent).
type Known = &'static [&'static str];
/// A scale text to check: what it is, the text, where it stands, its placeholders.
type Text<'a> = (String, &'a str, std::ops::Range<usize>, Known);

/// Bounds that keep range arithmetic far from overflow; real instruments use 0–9.
const MAX_OPTION: i32 = 1000;
const MAX_OPTIONS: i64 = 101;

/// What is wrong with a score range `[min, max]`, if anything: the minimum must be below the
/// maximum, both within ±[`MAX_OPTION`], with at most [`MAX_OPTIONS`] options.
pub fn range_problem([min, max]: [i32; 2]) -> Option<String> {
    let sane = |v: i32| (-MAX_OPTION..=MAX_OPTION).contains(&v);
    let ok = sane(min) && sane(max) && min < max && i64::from(max) - i64::from(min) < MAX_OPTIONS;
    (!ok).then(|| {
        format!(
            "range [{min}, {max}]: the minimum must be below the maximum, both within ±{MAX_OPTION}, \
             with at most {MAX_OPTIONS} options"
        )
    })
}

/// Empty, or nothing a reader would see.
fn blank(s: &str) -> bool {
    s.chars().all(|c| c.is_whitespace() || super::shows_nothing(c))
}

impl RawScale {
    fn validate(self, src: Source<'_>) -> Result<Scale, Vec<Diagnostic>> {
        let mut errors = Vec::new();
        let range = self.check_header(src, &mut errors);
        self.check_texts(src, &mut errors);
        for d in self.dimensions.get_ref() {
            let Some(labels) = &d.option_labels else { continue };
            if range.min < range.max && labels.get_ref().len() != range.len() || labels.get_ref().iter().any(|l| blank(l)) {
                errors.push(src.at(
                    labels.span(),
                    format!(
                        "dimension \"{}\": option_labels needs one non-empty label for each of the range's {} points",
                        d.name.get_ref(),
                        range.len()
                    ),
                ));
            }
        }
        // Shown in headers and lists: one line each.
        for (what, field) in [("name", &self.name), ("name_zh", &self.name_zh)] {
            super::one_line(src, (what, field.get_ref(), field.span()), &mut errors);
        }
        let named_at: Vec<_> = self.dimensions.get_ref().iter().map(|d| d.name.span()).collect();
        let dimensions = dimensions(self.dimensions, src, &mut errors);
        let items = items(self.items, &dimensions, src, &mut errors);
        for (index, d) in dimensions.iter().enumerate() {
            if errors.is_empty() && !items.iter().any(|i| i.dimension() == Some(index)) {
                let message = format!("dimension \"{}\" has no items", d.name);
                errors.push(match named_at.get(index) {
                    Some(span) => src.at(span.clone(), message),
                    None => src.whole(message),
                });
            }
        }
        if !errors.is_empty() {
            errors.sort_by_key(|d| (d.line, d.column));
            return Err(errors);
        }
        Ok(Scale {
            id: self.id.into_inner(),
            name: self.name.into_inner(),
            name_zh: self.name_zh.into_inner(),
            citation: self.citation.into_inner(),
            range,
            options: self.options.into_inner(),
            self_report_stem: self.self_report_stem.into_inner(),
            self_report_instruction: self.self_report_instruction.map(Spanned::into_inner),
            conversion_instruction: self.conversion_instruction.map(Spanned::into_inner),
            questionnaire_prompt: self.questionnaire_prompt.map(Spanned::into_inner),
            conversion_prompt: self.conversion_prompt.map(Spanned::into_inner),
            questionnaire_setting: self.questionnaire_setting.map(Spanned::into_inner),
            dimensions,
            items,
        })
    }

    /// Checks that no text the model reads holds a control character, and that the placeholders in
    /// each are ones it fills: a stray one would be sent as written.
    fn check_texts(&self, src: Source<'_>, errors: &mut Vec<Diagnostic>) {
        fn localized<'a>(texts: &mut Vec<Text<'a>>, what: &str, field: &'a Spanned<Localized<String>>, known: Known) {
            for language in [Language::En, Language::Zh] {
                texts.push((format!("{what}.{}", language.code()), field.get_ref().get(language), field.span(), known));
            }
        }
        fn plain<'a>(texts: &mut Vec<Text<'a>>, what: String, field: Option<&'a Spanned<String>>, known: Known) {
            texts.extend(field.map(|f| (what, f.get_ref().as_str(), f.span(), known)));
        }
        let mut texts = Vec::new();
        localized(&mut texts, "self_report_stem", &self.self_report_stem, &["statement"]);
        if let Some(i) = &self.self_report_instruction {
            localized(&mut texts, "self_report_instruction", i, &[]);
        }
        for (what, field, known) in [
            ("conversion_instruction", &self.conversion_instruction, &["character"][..]),
            ("questionnaire_prompt", &self.questionnaire_prompt, &[]),
            ("conversion_prompt", &self.conversion_prompt, &["character"]),
            ("questionnaire_setting", &self.questionnaire_setting, &[]),
        ] {
            plain(&mut texts, what.into(), field.as_ref(), known);
        }
        for d in self.dimensions.get_ref() {
            let name = format!("dimension \"{}\"", d.name.get_ref());
            localized(&mut texts, &format!("{name}: description"), &d.description, &[]);
            localized(&mut texts, &format!("{name}: low"), &d.low, &[]);
            localized(&mut texts, &format!("{name}: high"), &d.high, &[]);
            for (what, field, known) in [
                ("note", &d.note, &[][..]),
                ("conversion_instruction", &d.conversion_instruction, &["character"]),
                ("conversion_prompt", &d.conversion_prompt, &["character"]),
            ] {
                plain(&mut texts, format!("{name}: {what}"), field.as_ref(), known);
            }
        }
        for it in self.items.get_ref() {
            localized(&mut texts, &format!("item {}: statement", it.id.get_ref()), &it.statement, &[]);
            localized(&mut texts, &format!("item {}: question", it.id.get_ref()), &it.question, &[]);
        }
        // The citation is shown, never sent: braces there (BibTeX's) are no placeholders.
        super::prose(src, ("citation", self.citation.get_ref(), self.citation.span()), errors);
        for (what, text, span, known) in texts {
            super::prose(src, (&what, text, span.clone()), errors);
            if let Some(other) = placeholders(text).find(|p| !known.contains(p)) {
                let filled = match known {
                    [] => "it has none".to_string(),
                    known => format!("it has {}", known.iter().map(|k| format!("{{{k}}}")).collect::<Vec<_>>().join(", ")),
                };
                errors.push(src.at(span, format!("{what}: unknown placeholder {{{other}}}; {filled}")));
            }
        }
        let labels = self.options.get_ref();
        for (language, options) in [("en", &labels.en), ("zh", &labels.zh)] {
            for label in options.iter().filter(|l| !blank(l)) {
                super::one_line(src, (&format!("an option label in options.{language}"), label, self.options.span()), errors);
            }
        }
        for d in self.dimensions.get_ref() {
            for label in d.option_labels.iter().flat_map(|l| l.get_ref()) {
                let what = format!("dimension \"{}\": an option label", d.name.get_ref());
                super::one_line(src, (&what, label, d.option_labels.as_ref().map_or(d.name.span(), Spanned::span)), errors);
            }
        }
    }

    /// Checks the id, citation, range, option labels and self-report stem; the range as given.
    fn check_header(&self, src: Source<'_>, errors: &mut Vec<Diagnostic>) -> ScoreRange {
        if !super::is_id(self.id.get_ref()) {
            errors.push(src.at(self.id.span(), format!("a scale id is {}", super::ID_RULE)));
        }
        if blank(self.citation.get_ref()) {
            errors.push(src.at(self.citation.span(), "citation is empty: cite the published instrument"));
        }
        let (problem, [min, max]) = match self.range.get_ref().as_slice() {
            &[min, max] => (range_problem([min, max]), [min, max]),
            other => (
                Some(format!(
                    "range holds {} numbers: give two, [min, max] (e.g. [1, 5])",
                    other.len()
                )),
                [1, 2],
            ),
        };
        let range_ok = problem.is_none();
        if let Some(problem) = problem {
            errors.push(src.at(self.range.span(), problem));
        }
        let range = ScoreRange { min, max };
        for language in [Language::En, Language::Zh] {
            let options = self.options.get_ref().get(language);
            if range_ok && options.len() != range.len() {
                errors.push(src.at(
                    self.options.span(),
                    format!(
                        "options.{} has {} labels but range [{min}, {max}] has {} points",
                        language.code(),
                        options.len(),
                        range.len()
                    ),
                ));
            }
            if let Some(at) = options.iter().position(|o| blank(o)) {
                errors.push(src.at(
                    self.options.span(),
                    format!("options.{}: label {} is empty", language.code(), at + 1),
                ));
            }
            if !self.self_report_stem.get_ref().get(language).contains("{statement}") {
                errors.push(src.at(
                    self.self_report_stem.span(),
                    format!(
                        "self_report_stem.{} must contain the placeholder {{statement}}",
                        language.code()
                    ),
                ));
            }
        }
        range
    }
}

/// The `[[dimensions]]`: each checked, then all together (unique names, poles on all or none).
fn dimensions(raw: Spanned<Vec<RawDimension>>, src: Source<'_>, errors: &mut Vec<Diagnostic>) -> Vec<Dimension> {
    let mut dimensions = Vec::new();
    let mut names = HashSet::new();
    let dimensions_span = raw.span();
    for d in raw.into_inner() {
        if blank(d.name.get_ref()) {
            errors.push(src.at(d.name.span(), "dimension name is empty"));
        } else {
            super::one_line(src, ("a dimension name", d.name.get_ref(), d.name.span()), errors);
        }
        // Two names that differ only by characters that show nothing would read as one in every
        // table (an emoji's variation selector or a Persian ZWNJ in a single name is fine).
        let seen: String = d.name.get_ref().chars().filter(|c| !super::shows_nothing(*c)).collect();
        if !names.insert(seen.trim().to_string()) {
            let hidden = match seen == *d.name.get_ref() {
                true => "",
                false => " (it differs from another only by characters that show nothing)",
            };
            errors.push(src.at(d.name.span(), format!("duplicate dimension \"{}\"{hidden}", d.name.get_ref().escape_debug())));
        }
        dimensions.push(dimension(d, src, errors));
    }
    let poled = dimensions.iter().filter(|d| d.poles.is_some()).count();
    if poled != 0 && poled != dimensions.len() {
        errors.push(src.at(
            dimensions_span.clone(),
            "either every dimension has poles (16Personalities-style) or none does",
        ));
    }
    if dimensions.is_empty() {
        errors.push(src.at(dimensions_span, "a scale needs at least one [[dimensions]] entry"));
    }
    dimensions
}

/// The `{word}` placeholders in a template text.
fn placeholders(text: &str) -> impl Iterator<Item = &str> {
    text.split('{').skip(1).filter_map(|rest| {
        let word = rest.split_once('}')?.0;
        // As templates read them: a name, or names joined by dots (`{e.g.}` is none).
        let ident = |part: &str| {
            part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        word.split('.').all(ident).then_some(word)
    })
}

/// One dimension: both descriptions, and two different poles if it has any (whose letters stand
/// for its ends unless `letters` says otherwise).
fn dimension(d: RawDimension, src: Source<'_>, errors: &mut Vec<Diagnostic>) -> Dimension {
    let desc = d.description.get_ref();
    if blank(&desc.en) || blank(&desc.zh) {
        errors.push(src.at(
            d.description.span(),
            format!(
                "dimension \"{}\": description.en and description.zh are required",
                d.name.get_ref()
            ),
        ));
    }
    // Shown in headers, legends and type codes: one line each.
    let mut shown: Vec<(&str, &Spanned<String>)> = vec![("name_zh", &d.name_zh)];
    if let Some(l) = &d.letters {
        shown.extend([("a letter", &l.low), ("a letter", &l.high)]);
    }
    for (what, field) in shown {
        super::one_line(src, (what, field.get_ref(), field.span()), errors);
    }
    if let Some(p) = &d.poles {
        super::one_line(src, ("a pole", &p.get_ref().concat(), p.span()), errors);
    }
    let mut letters = d.letters.map(|l| Letters {
        low: l.low.into_inner(),
        high: l.high.into_inner(),
    });
    let poles = match d.poles {
        Some(p) => {
            let [a, b] = p.get_ref();
            if blank(a) || blank(b) || a == b {
                errors.push(src.at(p.span(), "poles must be two different, non-empty letters"));
            }
            letters.get_or_insert_with(|| Letters {
                low: b.clone(),
                high: a.clone(),
            });
            Some(p.into_inner())
        }
        None => None,
    };
    Dimension {
        name: d.name.into_inner(),
        name_zh: d.name_zh.into_inner(),
        poles,
        letters,
        low: d.low.into_inner(),
        high: d.high.into_inner(),
        description: d.description.into_inner(),
        note: d.note.map(Spanned::into_inner),
        conversion_instruction: d.conversion_instruction.map(Spanned::into_inner),
        option_labels: d.option_labels.map(Spanned::into_inner),
        conversion_prompt: d.conversion_prompt.map(Spanned::into_inner),
    }
}

/// The `[[items]]` with unique ids and both texts; an item whose role is wrong is left out.
fn items(
    raw: Spanned<Vec<RawItem>>,
    dimensions: &[Dimension],
    src: Source<'_>,
    errors: &mut Vec<Diagnostic>,
) -> Vec<Item> {
    let mut items = Vec::new();
    let mut ids = BTreeMap::new();
    for it in raw.into_inner() {
        let id = *it.id.get_ref();
        if ids.insert(id, ()).is_some() {
            errors.push(src.at(it.id.span(), format!("duplicate item id {id}")));
        }
        for (what, text) in [("statement", &it.statement), ("question", &it.question)] {
            let t = text.get_ref();
            if blank(&t.en) || blank(&t.zh) {
                errors.push(src.at(text.span(), format!("item {id}: {what}.en and {what}.zh are required")));
            }
        }
        if let Some(role) = item_role(&it, dimensions, src, errors) {
            items.push(Item {
                id,
                role,
                statement: it.statement.into_inner(),
                question: it.question.into_inner(),
            });
        }
    }
    items
}

/// An item's role: a filler (no dimension), or scored on a known dimension with a keying that
/// dimension takes.
fn item_role(
    it: &RawItem,
    dimensions: &[Dimension],
    src: Source<'_>,
    errors: &mut Vec<Diagnostic>,
) -> Option<ItemRole> {
    let id = *it.id.get_ref();
    match (it.filler, &it.dimension, &it.keying) {
        (true, None, _) => Some(ItemRole::Filler),
        (true, Some(d), _) => {
            errors.push(src.at(d.span(), format!("item {id}: a filler item has no dimension")));
            None
        }
        (false, None, _) => {
            errors.push(src.at(
                it.id.span(),
                format!("item {id}: needs `dimension = \"…\"` or `filler = true`"),
            ));
            None
        }
        (false, Some(d), keying) => match dimensions.iter().position(|x| x.name == *d.get_ref()) {
            None => {
                let known: Vec<&str> = dimensions.iter().map(|x| x.name.as_str()).collect();
                errors.push(src.at(
                    d.span(),
                    format!(
                        "item {id}: unknown dimension \"{}\" (this scale has: {})",
                        d.get_ref(),
                        known.join(", ")
                    ),
                ));
                None
            }
            Some(index) => match keying {
                None => {
                    errors.push(src.at(it.id.span(), format!("item {id}: keying is missing")));
                    None
                }
                Some(k) => match parse_keying(k.get_ref(), &dimensions[index]) {
                    Ok(keying) => Some(ItemRole::Scored {
                        dimension: index,
                        keying,
                    }),
                    Err(message) => {
                        errors.push(src.at(k.span(), format!("item {id}: {message}")));
                        None
                    }
                },
            },
        },
    }
}

fn parse_keying(text: &str, dimension: &Dimension) -> Result<Keying, String> {
    match (&dimension.poles, text) {
        (None, "positive") => Ok(Keying::Positive),
        (None, "negative") => Ok(Keying::Negative),
        (None, other) => Err(format!("keying \"{other}\" must be \"positive\" or \"negative\"")),
        (Some([a, b]), letter) if letter == a || letter == b => Ok(Keying::Pole {
            letter: letter.to_string(),
            first: letter == a,
        }),
        (Some([a, b]), other) => Err(format!(
            "keying \"{other}\" names no pole of dimension \"{}\" (expected \"{a}\" or \"{b}\")",
            dimension.name
        )),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const TINY: &str = r#"id = "TINY"
name = "Tiny"
name_zh = "小"
citation = "Nobody (2024)."
range = [1, 5]

[options]
en = ["1", "2", "3", "4", "5"]
zh = ["1", "2", "3", "4", "5"]

[self_report_stem]
en = "Does \"{statement}\" fit you?"
zh = "“{statement}”符合你吗？"

[[dimensions]]
name = "Warmth"
name_zh = "温暖"
low = { en = "cold", zh = "冷" }
high = { en = "warm", zh = "暖" }

[dimensions.description]
en = "How warm."
zh = "多暖。"

[[items]]
id = 1
dimension = "Warmth"
keying = "positive"
statement = { en = "Is warm.", zh = "暖。" }
question = { en = "Warm?", zh = "暖吗？" }

[[items]]
id = 2
dimension = "Warmth"
keying = "negative"
statement = { en = "Is cold.", zh = "冷。" }
question = { en = "Cold?", zh = "冷吗？" }

[[items]]
id = 3
filler = true
statement = { en = "Likes tea.", zh = "喜欢茶。" }
question = { en = "Tea?", zh = "茶吗？" }
"#;

    fn parse(text: &str) -> Result<Scale, Vec<Diagnostic>> {
        Scale::parse(Source::new("tiny.toml", text))
    }

    #[test]
    fn parses_a_valid_scale() {
        let s = parse(TINY).unwrap();
        assert_eq!(s.items.len(), 3);
        assert_eq!(s.scored_items().count(), 2);
        assert_eq!(s.items[1].keying(), Some(&Keying::Negative));
        assert_eq!(s.items[2].role, ItemRole::Filler);
        assert_eq!(s.range.midpoint(), 3.0);
        assert!(!s.is_pole_percent());
    }

    #[test]
    fn unknown_dimension_is_located_and_named() {
        let text = TINY.replacen(
            "dimension = \"Warmth\"\nkeying = \"negative\"",
            "dimension = \"NoSuchDimension\"\nkeying = \"negative\"",
            1,
        );
        let errs = parse(&text).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        let line = text.lines().position(|l| l.contains("NoSuchDimension")).unwrap() + 1;
        assert_eq!((errs[0].line, errs[0].column), (line, 13));
        assert!(
            errs[0].message.contains("unknown dimension \"NoSuchDimension\""),
            "{}",
            errs[0]
        );
    }

    #[test]
    fn duplicate_ids_bad_keying_and_syntax_are_reported() {
        let dup = TINY.replace("id = 2\n", "id = 1\n");
        assert!(parse(&dup).unwrap_err()[0].message.contains("duplicate item id 1"));
        let keying = TINY.replace("keying = \"negative\"", "keying = \"sideways\"");
        assert!(
            parse(&keying).unwrap_err()[0]
                .message
                .contains("\"positive\" or \"negative\"")
        );
        let syntax = TINY.replace("name = \"Tiny\"", "name = \"Tiny");
        let e = &parse(&syntax).unwrap_err()[0];
        assert_eq!(e.line, 2);
        assert!(e.message.contains("string"), "{e}");
        let unknown_field = TINY.replace("name_zh = \"小\"", "name_zh = \"小\"\ncolour = 1");
        assert!(parse(&unknown_field).unwrap_err()[0].message.contains("colour"));
    }

    #[test]
    fn what_would_read_wrongly_in_a_prompt_or_a_table_is_located() {
        let said = |text: &str| parse(text).unwrap_err().into_iter().map(|e| format!("{}:{} {}", e.line, e.column, e.message)).collect::<Vec<_>>();
        let empty_option = TINY.replace("en = [\"1\", \"2\", \"3\"", "en = [\"1\", \" \", \"3\"");
        assert_eq!(said(&empty_option), ["7:1 options.en: label 2 is empty"]);
        let typo = TINY.replace("Does \\\"{statement}\\\" fit you?", "Does {statment} fit {statement}?");
        let typo = said(&typo);
        assert!(typo.len() == 1 && typo[0].contains("unknown placeholder {statment}"), "{typo:?}");
        // JSON-like braces in a stem are not placeholders.
        assert!(parse(&TINY.replace("fit you?", "fit you? {\\\"a\\\": 1}")).is_ok());
        let twin = TINY.replace(
            "[[items]]\nid = 1",
            "[[dimensions]]\nname = \"War\u{200b}mth\"\nname_zh = \"暖\"\nlow = { en = \"a\", zh = \"a\" }\nhigh = { en = \"b\", zh = \"b\" }\ndescription = { en = \"d\", zh = \"d\" }\n\n[[items]]\nid = 1",
        );
        let twin = said(&twin);
        assert!(twin.iter().any(|e| e.contains("duplicate dimension \"War\\u{200b}mth\" (it differs from another only by characters that show nothing)")), "{twin:?}");
        // BibTeX in a citation, which no model reads, and `{e.g.}` in a note are not placeholders.
        assert!(parse(&TINY.replace("citation = \"Nobody (2024).\"", "citation = \"publisher={Guilford}\"")).is_ok());
        assert!(parse(&TINY.replace("high = { en = \"warm\"", "note = \"warmth {e.g.} kindness\"\nhigh = { en = \"warm\"")).is_ok());
        let invisible = TINY.replace("en = [\"1\", \"2\"", "en = [\"1\", \"\\u200b\"");
        assert_eq!(said(&invisible), ["7:1 options.en: label 2 is empty"]);
        // Every text a model reads: no escape sequence, no placeholder that nothing fills.
        let escape = TINY.replace("question = { en = \"Warm?\"", "question = { en = \"\\u001b]0;x\\u0007Warm?\"");
        let escape = said(&escape);
        assert!(escape.len() == 1 && escape[0].contains("item 1: question.en holds \\u{1b}"), "{escape:?}");
        let note = TINY.replace("high = { en = \"warm\"", "note = \"Judge {participant}\"\nhigh = { en = \"warm\"");
        let note = said(&note);
        assert!(note.len() == 1 && note[0].contains("dimension \"Warmth\": note: unknown placeholder {participant}; it has none"), "{note:?}");
        let named = TINY.replace("range = [1, 5]", "range = [1, 5]\nconversion_instruction = \"Rate {character}, not {charcter}.\"");
        let named = said(&named);
        assert!(named.len() == 1 && named[0].starts_with("6:26 conversion_instruction: unknown placeholder {charcter}; it has {character}"), "{named:?}");
    }

    #[test]
    fn options_must_cover_the_range_and_stem_needs_placeholder() {
        let text = TINY
            .replace("range = [1, 5]", "range = [1, 7]")
            .replace("Does \\\"{statement}\\\" fit you?", "Does it fit?");
        let errs = parse(&text).unwrap_err();
        assert!(errs.iter().any(|e| {
            e.message
                .contains("options.en has 5 labels but range [1, 7] has 7 points")
        }));
        assert!(errs.iter().any(|e| e.message.contains("self_report_stem.en")));
    }

    #[test]
    fn absurd_ranges_are_rejected_without_overflow() {
        for range in ["[5, 1]", "[3, 3]", "[-2147483648, 2147483647]", "[0, 500]"] {
            let errs = parse(&TINY.replace("range = [1, 5]", &format!("range = {range}"))).unwrap_err();
            assert!(
                errs.iter().any(|e| e.message.starts_with("range [") && e.line == 5),
                "{range}: {errs:?}"
            );
        }
        // Two numbers, no more, no fewer: extra ones were cut off in silence.
        for range in ["[1, 5, 9]", "[1]", "[]"] {
            let errs = parse(&TINY.replace("range = [1, 5]", &format!("range = {range}"))).unwrap_err();
            assert!(
                errs.iter().any(|e| e.message.starts_with("range holds") && e.line == 5),
                "{range}: {errs:?}"
            );
        }
        let errs = parse(&TINY.replace("range = [1, 5]", "range = [1, 5, \"junk\"]")).unwrap_err();
        assert_eq!((errs[0].line, errs[0].column), (5, 16), "{errs:?}");
    }

    #[test]
    fn pole_keying_must_name_a_pole() {
        let text = TINY
            .replace("name = \"Warmth\"\n", "name = \"E/I\"\npoles = [\"E\", \"I\"]\n")
            .replace("dimension = \"Warmth\"", "dimension = \"E/I\"")
            .replacen("keying = \"positive\"", "keying = \"E\"", 1)
            .replacen("keying = \"negative\"", "keying = \"Q\"", 1);
        let errs = parse(&text).unwrap_err();
        assert!(
            errs[0].message.contains("names no pole of dimension \"E/I\""),
            "{errs:?}"
        );
        let ok = parse(&text.replace("keying = \"Q\"", "keying = \"I\"")).unwrap();
        assert!(ok.is_pole_percent());
        assert_eq!(
            ok.items[1].keying(),
            Some(&Keying::Pole {
                letter: "I".into(),
                first: false
            })
        );
        assert_eq!(ok.dimensions[0].letter(Some(true)), "E");
        assert_eq!(ok.dimension_range(), (0.0, 100.0));
    }

    /// A dimension's Chinese name, poles and letters are shown in headers, legends and type codes:
    /// a control character or a bidirectional override there is refused where it stands.
    #[test]
    fn dimension_labels_that_would_act_on_a_terminal_are_located() {
        let zh = TINY.replace("name_zh = \"温暖\"", "name_zh = \"温\u{202e}暖\"");
        let e = parse(&zh).unwrap_err();
        assert_eq!((e[0].line, e[0].column), (17, 11), "{e:?}");
        assert!(e[0].message.starts_with("name_zh is one line"), "{e:?}");
        let poled = TINY.replace("name = \"Warmth\"\n", "name = \"E/I\"\npoles = [\"E\", \"I\\u2066\"]\n");
        let e = parse(&poled).unwrap_err();
        assert_eq!((e[0].line, e[0].column), (17, 9), "{e:?}");
        assert!(e[0].message.starts_with("a pole is one line"), "{e:?}");
        let letters = TINY.replace("name = \"Warmth\"\n", "name = \"Warmth\"\nletters = { low = \"C\", high = \"\\u001b\" }\n");
        let e = parse(&letters).unwrap_err();
        assert_eq!((e[0].line, e[0].column), (17, 31), "{e:?}");
        assert!(e[0].message.starts_with("a letter is one line"), "{e:?}");
        let named = TINY.replacen("name = \"Tiny\"", "name = \"Ti\\u202eny\"", 1);
        let e = parse(&named).unwrap_err();
        assert_eq!((e[0].line, e[0].column), (2, 8), "{e:?}");
        assert!(e[0].message.starts_with("name is one line"), "{e:?}");
    }

    #[test]
    fn filler_with_dimension_and_item_without_either_are_errors() {
        let a = TINY.replace("id = 3\nfiller = true", "id = 3\nfiller = true\ndimension = \"Warmth\"");
        assert!(
            parse(&a).unwrap_err()[0]
                .message
                .contains("filler item has no dimension")
        );
        let b = TINY.replace("id = 3\nfiller = true", "id = 3");
        assert!(parse(&b).unwrap_err()[0].message.contains("`filler = true`"));
    }
}
