//! Characters to be role-played: names, language, the experimenter who interviews them, their profile
//! for the role-playing prompt, and their annotated personality labels. Parsing and validation are pure;
//! labels are checked against the scales they name.

use std::collections::BTreeMap;

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};
use toml::Spanned;

use super::diagnostic::{Diagnostic, Source};
use super::scale::{Language, Scale};

/// Labels within this distance of the 0.4 / 0.6 bounds count as on the bound (ICB has labels exactly there).
const BOUND_TOLERANCE: f64 = 1e-9;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LabelType {
    /// High: normalized score ≥ 0.6.
    H,
    /// Low: normalized score ≤ 0.4.
    L,
    /// Marginal: in between, or unknown; excluded from metrics.
    X,
}

impl LabelType {
    /// The type a normalized score in [0, 1] must have.
    pub fn of_normalized(norm: f64) -> LabelType {
        if norm >= 0.6 - BOUND_TOLERANCE {
            LabelType::H
        } else if norm <= 0.4 + BOUND_TOLERANCE {
            LabelType::L
        } else {
            LabelType::X
        }
    }

    /// H → Some(true), L → Some(false), X → None.
    pub fn is_high(self) -> Option<bool> {
        match self {
            LabelType::H => Some(true),
            LabelType::L => Some(false),
            LabelType::X => None,
        }
    }
}

/// One annotated dimension score. `score` is `None` where the source wrote "X" (unknown, marginal).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Label {
    pub score: Option<f64>,
    pub kind: LabelType,
}

impl Label {
    /// What a dimension the compared source gives no label for counts as: unknown, so its pairs are
    /// excluded as a marginal label's are (a character's dimension without a target, say).
    pub const NONE: Label = Label {
        score: None,
        kind: LabelType::X,
    };
}

impl Serialize for Label {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Label", 2)?;
        // "X": unknown, marginal; a letter target (H or L without a score) has none.
        match (self.score, self.kind) {
            (Some(score), _) => s.serialize_field("score", &score)?,
            (None, LabelType::X) => s.serialize_field("score", "X")?,
            (None, _) => s.serialize_field("score", &None::<f64>)?,
        }
        s.serialize_field("type", &self.kind)?;
        s.end()
    }
}

/// Where a label comes from: the Personality Database vote (BFI, 16P), the paper's expert annotation,
/// or the character's author (`[targets]`: the personality the author meant).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LabelSource {
    Pdb,
    Annotation,
    Target,
}

impl LabelSource {
    pub const ALL: [LabelSource; 3] = [LabelSource::Pdb, LabelSource::Annotation, LabelSource::Target];

    pub fn name(self) -> &'static str {
        match self {
            LabelSource::Pdb => "pdb",
            LabelSource::Annotation => "annotation",
            LabelSource::Target => "target",
        }
    }
}

/// scale id → dimension name → label.
pub type LabelSet = BTreeMap<String, BTreeMap<String, Label>>;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Labels {
    pub pdb: LabelSet,
    pub annotation: LabelSet,
    /// What the author meant: a letter target (H/L) has no score and counts as its band (see
    /// `metrics::alignment`); a numeric one is a label like the others.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub target: LabelSet,
}

impl Labels {
    pub fn source(&self, source: LabelSource) -> &LabelSet {
        match source {
            LabelSource::Pdb => &self.pdb,
            LabelSource::Annotation => &self.annotation,
            LabelSource::Target => &self.target,
        }
    }

    pub fn source_mut(&mut self, source: LabelSource) -> &mut LabelSet {
        match source {
            LabelSource::Pdb => &mut self.pdb,
            LabelSource::Annotation => &mut self.annotation,
            LabelSource::Target => &mut self.target,
        }
    }

    pub fn get(&self, source: LabelSource, scale: &str, dimension: &str) -> Option<&Label> {
        self.source(source).get(scale)?.get(dimension)
    }

    /// The labels that decide which dimensions are marginal: PDb where the character has PDb labels for
    /// the scale (BFI and 16P in the paper), the annotation where it has that, else the targets (a
    /// character of one's own has only those).
    pub fn exclusion_source(&self, scale: &str) -> LabelSource {
        if self.pdb.contains_key(scale) {
            LabelSource::Pdb
        } else if self.annotation.contains_key(scale) || !self.target.contains_key(scale) {
            LabelSource::Annotation
        } else {
            LabelSource::Target
        }
    }

    /// The labels that decide marginality when comparing with `source`: the targets decide for
    /// themselves (a dimension without a target is left out); the paper's sources as above.
    pub fn exclusion_for(&self, scale: &str, source: LabelSource) -> LabelSource {
        match source {
            LabelSource::Target => LabelSource::Target,
            _ => self.exclusion_source(scale),
        }
    }

    /// Whether `dimension` of `scale`, compared with the `source` labels, is left out as marginal:
    /// the labels that decide it ([`Labels::exclusion_for`]) say X or have none, or the compared label
    /// is X itself (say the annotation's, where the PDb decides: a type no prediction can match) or
    /// missing.
    pub fn marginal(&self, scale: &str, dimension: &str, source: LabelSource) -> bool {
        let x = |source| {
            self.get(source, scale, dimension)
                .is_none_or(|l: &Label| l.kind == LabelType::X)
        };
        x(self.exclusion_for(scale, source)) || x(source)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Character {
    pub id: String,
    /// The id in the InCharacter data, e.g. "Hermione-en".
    pub reference_id: Option<String>,
    pub name: String,
    pub aliases: Vec<String>,
    pub language: Language,
    /// The fellow character who asks the interview questions.
    pub experimenter: String,
    /// The work the character comes from; empty when not known (a ChatHaruhi or RoleBench import).
    /// A card import writes "imported from a character card…", which its export reads back.
    pub work: String,
    /// The role-playing system prompt, in the character's language.
    pub description: String,
    /// A final instruction sent after the question (a character card's `post_history_instructions`,
    /// which SillyTavern sends after the chat history); empty for most characters.
    #[serde(rename = "post_history_instructions", skip_serializing_if = "String::is_empty")]
    pub post_history: String,
    pub catchphrases: Vec<String>,
    /// Identifiers of this character in other role-playing projects (ChatHaruhi, RoleLLM, …).
    pub agents: BTreeMap<String, String>,
    pub labels: Labels,
    /// Kept from a character card it was imported from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card: Option<CardInfo>,
}

/// What a character card says about itself beyond the role-play: its tags, creator and version.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CardInfo {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub creator: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// The card's own notes (`creator_notes`), not part of the role-play.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub notes: String,
    /// The name and the experimenter the import wrote the prompt and the memories with, so that an
    /// export tells a renamed character (or one asked by another experimenter) from an edited one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub imported_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub imported_experimenter: String,
}

impl Character {
    /// The work the character comes from, as a prompt names it: `None` when unknown (empty). An
    /// earlier import's "imported from ChatHaruhi (Luna)" is read as written, so the sessions that
    /// sent it go on sending it.
    pub fn source_work(&self) -> Option<&str> {
        let work = self.work.trim();
        (!work.is_empty()).then_some(work)
    }

    /// The first alias, or the name when there is none (how some protocols address the character).
    pub fn first_alias(&self) -> &str {
        self.aliases.iter().map(|a| a.trim()).find(|a| !a.is_empty()).unwrap_or(&self.name)
    }

    /// A type code such as "SCOEN" (BFI) or "ESTJ" (16P): one letter per dimension, "X" for marginal.
    pub fn code(&self, scale: &Scale, source: LabelSource) -> Option<String> {
        let set = self.labels.source(source).get(&scale.id)?;
        Some(
            scale
                .dimensions
                .iter()
                .map(|d| d.letter(set.get(&d.name).and_then(|l| l.kind.is_high())).to_string())
                .collect(),
        )
    }

    /// Whether `name` (an id with or without its language suffix, the reference id, or a name/alias,
    /// case-insensitive) refers to this character.
    pub fn answers_to(&self, name: &str) -> bool {
        let n = name.trim();
        let suffix = format!("-{}", self.language.code());
        // A name in any Unicode normal form ("Zoë" composed, or e + U+0308) is the same name.
        let same = |a: &str| {
            use unicode_normalization::UnicodeNormalization;
            a.eq_ignore_ascii_case(n) || (!n.is_ascii() && a.nfc().eq(n.nfc()))
        };
        self.id.eq_ignore_ascii_case(n)
            || self
                .id
                .strip_suffix(&suffix)
                .is_some_and(|base| base.eq_ignore_ascii_case(n))
            || self.reference_id.as_deref().is_some_and(|r| r.eq_ignore_ascii_case(n))
            || same(&self.name)
            || self.aliases.iter().any(|a| same(a))
    }

    /// The version of what the role-playing agent is given: the lowercase hex SHA-256 of the prompt,
    /// the memories (dialogue chunks), the experimenter and the language. Names, labels, targets and
    /// card metadata do not change it; any edit that can change an answer does.
    pub fn version(&self, memories: &[String]) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        // Length-prefixed fields, so no two different inputs hash the same bytes.
        let mut field = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        field(self.description.as_bytes());
        // Hashed only when there is one, so the characters without it keep their versions.
        if !self.post_history.is_empty() {
            field(b"post_history_instructions");
            field(self.post_history.as_bytes());
        }
        field(self.experimenter.as_bytes());
        field(self.language.code().as_bytes());
        field(&(memories.len() as u64).to_le_bytes());
        for m in memories {
            field(m.as_bytes());
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The character file that parses back to `self` (`Character::parse(to_toml(c)) == c`), its
    /// fields in the order people read them.
    pub fn to_toml(&self) -> String {
        #[derive(Serialize)]
        struct File<'a> {
            id: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            reference_id: Option<&'a str>,
            name: &'a str,
            aliases: &'a [String],
            language: &'a str,
            experimenter: &'a str,
            #[serde(skip_serializing_if = "str::is_empty")]
            work: &'a str,
            #[serde(skip_serializing_if = "<[String]>::is_empty")]
            catchphrases: &'a [String],
            description: &'a str,
            #[serde(skip_serializing_if = "str::is_empty")]
            post_history_instructions: &'a str,
            #[serde(skip_serializing_if = "BTreeMap::is_empty")]
            agents: &'a BTreeMap<String, String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            card: Option<&'a CardInfo>,
            #[serde(skip_serializing_if = "toml::Table::is_empty")]
            labels: toml::Table,
            #[serde(skip_serializing_if = "toml::Table::is_empty")]
            targets: toml::Table,
        }
        let s = |v: &str| toml::Value::String(v.to_string());
        let set_table = |set: &LabelSet, full: bool| -> toml::Table {
            set.iter()
                .map(|(scale, dims)| {
                    let dims = dims
                        .iter()
                        .map(|(d, l)| {
                            let kind = s(&format!("{:?}", l.kind));
                            let value = if full {
                                let mut t = toml::Table::new();
                                t.insert("score".into(), l.score.map_or_else(|| s("X"), toml::Value::Float));
                                t.insert("type".into(), kind);
                                toml::Value::Table(t)
                            } else {
                                l.score.map_or(kind, toml::Value::Float)
                            };
                            (d.clone(), value)
                        })
                        .collect();
                    (scale.clone(), toml::Value::Table(dims))
                })
                .collect()
        };
        let mut labels = toml::Table::new();
        for source in [LabelSource::Pdb, LabelSource::Annotation] {
            let set = self.labels.source(source);
            if !set.is_empty() {
                labels.insert(source.name().into(), toml::Value::Table(set_table(set, true)));
            }
        }
        let file = File {
            id: &self.id,
            reference_id: self.reference_id.as_deref(),
            name: &self.name,
            aliases: &self.aliases,
            language: self.language.code(),
            experimenter: &self.experimenter,
            work: &self.work,
            catchphrases: &self.catchphrases,
            description: &self.description,
            post_history_instructions: &self.post_history,
            agents: &self.agents,
            card: self.card.as_ref(),
            labels,
            targets: set_table(&self.labels.target, false),
        };
        toml::to_string(&file).unwrap_or_default()
    }

    /// Parses and validates a character file; `scale` looks up the scales its labels name.
    pub fn parse<'s>(
        source: Source<'_>,
        scale: impl Fn(&str) -> Option<&'s Scale>,
    ) -> Result<Character, Vec<Diagnostic>> {
        let raw: RawCharacter = toml::from_str(source.text).map_err(|e| vec![source.toml_error(&e)])?;
        raw.validate(source, scale)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCharacter {
    id: Spanned<String>,
    reference_id: Option<String>,
    name: Spanned<String>,
    #[serde(default)]
    aliases: Vec<Spanned<String>>,
    language: Spanned<String>,
    experimenter: Spanned<String>,
    work: Option<Spanned<String>>,
    description: Spanned<String>,
    post_history_instructions: Option<Spanned<String>>,
    #[serde(default)]
    catchphrases: Vec<Spanned<String>>,
    #[serde(default)]
    agents: BTreeMap<String, String>,
    #[serde(default)]
    labels: RawLabels,
    #[serde(default)]
    targets: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    card: Option<CardInfo>,
}

/// A scale's targets: a type code for the whole scale ("ENFP"), or a table of dimension → "H" | "L" |
/// number.
enum RawTargets {
    Code(String),
    Dimensions(Vec<(String, RawScore)>),
}

impl RawTargets {
    fn of(value: toml::Value) -> Result<RawTargets, String> {
        match value {
            toml::Value::String(code) => Ok(RawTargets::Code(code)),
            toml::Value::Table(t) => t
                .into_iter()
                .map(|(d, v)| match v {
                    toml::Value::String(s) => Ok((d, RawScore::Text(s))),
                    toml::Value::Float(x) => Ok((d, RawScore::Number(x))),
                    toml::Value::Integer(i) => Ok((d, RawScore::Number(i as f64))),
                    other => Err(format!("target of {d}: {} is not \"H\", \"L\" or a number", other.type_str())),
                })
                .collect::<Result<_, _>>()
                .map(RawTargets::Dimensions),
            other => Err(format!(
                "targets: a {} is not a type code (\"ENFP\") or a table of dimensions",
                other.type_str()
            )),
        }
    }
}

type RawLabelSet = BTreeMap<Spanned<String>, BTreeMap<Spanned<String>, Spanned<RawLabel>>>;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLabels {
    #[serde(default)]
    pdb: RawLabelSet,
    #[serde(default)]
    annotation: RawLabelSet,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLabel {
    score: RawScore,
    #[serde(rename = "type")]
    kind: LabelType,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawScore {
    Number(f64),
    Text(String),
}

impl RawCharacter {
    fn validate<'s>(
        self,
        src: Source<'_>,
        scale: impl Fn(&str) -> Option<&'s Scale>,
    ) -> Result<Character, Vec<Diagnostic>> {
        let mut errors = Vec::new();
        if !super::is_id(self.id.get_ref()) {
            errors.push(src.at(self.id.span(), format!("a character id is {}", super::ID_RULE)));
        }
        for (what, field) in [
            ("name", &self.name),
            ("experimenter", &self.experimenter),
            ("description", &self.description),
        ] {
            if field.get_ref().trim().is_empty() {
                errors.push(src.at(field.span(), format!("{what} is empty")));
            } else if what != "description" {
                super::one_line(src, (what, field.get_ref(), field.span()), &mut errors);
            }
        }
        // What the agent reads: lines, but nothing else a terminal would act on (an escape sequence
        // would reach the model, and every screen that shows the prompt).
        let prose = std::iter::once(("description", &self.description))
            .chain(self.post_history_instructions.iter().map(|p| ("post_history_instructions", p)))
            .chain(self.catchphrases.iter().map(|c| ("a catchphrase", c)));
        for (what, field) in prose {
            super::prose(src, (what, field.get_ref(), field.span()), &mut errors);
        }
        // Shown wherever the character is named or listed: one line too.
        for (what, field) in self.aliases.iter().map(|a| ("an alias", a)).chain(self.work.iter().map(|w| ("work", w))) {
            super::one_line(src, (what, field.get_ref(), field.span()), &mut errors);
        }
        let language = Language::parse(self.language.get_ref()).unwrap_or_else(|| {
            errors.push(src.at(
                self.language.span(),
                format!("language \"{}\" must be \"en\" or \"zh\"", self.language.get_ref()),
            ));
            Language::En
        });
        let mut labels = Labels::default();
        for (source, raw_set) in [
            (LabelSource::Pdb, self.labels.pdb),
            (LabelSource::Annotation, self.labels.annotation),
        ] {
            let set = labels.source_mut(source);
            for (scale_id, dims) in raw_set {
                let Some(scale) = scale(scale_id.get_ref()) else {
                    errors.push(src.at(
                        scale_id.span(),
                        format!("labels name unknown scale \"{}\"", scale_id.get_ref()),
                    ));
                    continue;
                };
                // Scale ids are read in any case; the labels are kept under the scale's own.
                if set.contains_key(&scale.id) {
                    errors.push(src.at(
                        scale_id.span(),
                        format!(
                            "{} labels for scale {} again (as \"{}\"): one table per scale",
                            source.name(),
                            scale.id,
                            scale_id.get_ref()
                        ),
                    ));
                    continue;
                }
                let (min, max) = scale.dimension_range();
                let mut out = BTreeMap::new();
                for (dim, raw) in dims {
                    if scale.dimension_index(dim.get_ref()).is_none() {
                        errors.push(src.at(
                            dim.span(),
                            scale.no_dimension(dim.get_ref()),
                        ));
                        continue;
                    }
                    let span = raw.span();
                    let raw = raw.into_inner();
                    let score = match raw.score {
                        RawScore::Number(x) if x.is_finite() && (min..=max).contains(&x) => Some(x),
                        RawScore::Number(x) => {
                            errors.push(src.at(
                                span.clone(),
                                format!("{} {}: label {x} is outside [{min}, {max}]", scale.id, dim.get_ref()),
                            ));
                            continue;
                        }
                        RawScore::Text(t) if t == "X" => None,
                        RawScore::Text(t) => {
                            errors.push(src.at(
                                span.clone(),
                                format!(
                                    "{} {}: score \"{t}\" must be a number or \"X\"",
                                    scale.id,
                                    dim.get_ref()
                                ),
                            ));
                            continue;
                        }
                    };
                    let expected = score.map_or(LabelType::X, |s| LabelType::of_normalized((s - min) / (max - min)));
                    if expected != raw.kind {
                        errors.push(src.at(
                            span,
                            format!(
                                "{} {}: type {:?} contradicts score {} (H needs ≥ 0.6 of the range, L ≤ 0.4, else X): expected {:?}",
                                scale.id,
                                dim.get_ref(),
                                raw.kind,
                                score.map_or("X".to_string(), |s| s.to_string()),
                                expected
                            ),
                        ));
                        continue;
                    }
                    out.insert(dim.into_inner(), Label { score, kind: raw.kind });
                }
                set.insert(scale.id.clone(), out);
            }
        }
        read_targets(src, &scale, self.targets, &mut labels, &mut errors);
        if !errors.is_empty() {
            errors.sort_by_key(|d| (d.line, d.column));
            return Err(errors);
        }
        Ok(Character {
            id: self.id.into_inner(),
            reference_id: self.reference_id,
            name: self.name.into_inner(),
            aliases: self.aliases.into_iter().map(Spanned::into_inner).collect(),
            language,
            experimenter: self.experimenter.into_inner(),
            work: self.work.map(Spanned::into_inner).unwrap_or_default(),
            description: self.description.into_inner(),
            post_history: self.post_history_instructions.map(Spanned::into_inner).unwrap_or_default(),
            catchphrases: self.catchphrases.into_iter().map(Spanned::into_inner).collect(),
            agents: self.agents,
            labels,
            card: self.card,
        })
    }
}

/// The target of one dimension: "H" / "L", or a score in the scale's dimension range.
pub fn target(scale: &Scale, dimension: &str, value: &str) -> Result<Label, String> {
    let raw = match value.trim().parse::<f64>() {
        Ok(x) => RawScore::Number(x),
        Err(_) => RawScore::Text(value.trim().to_string()),
    };
    dimension_target(scale, dimension, raw)
}

fn dimension_target(scale: &Scale, dimension: &str, raw: RawScore) -> Result<Label, String> {
    let (min, max) = scale.dimension_range();
    match raw {
        RawScore::Number(x) if x.is_finite() && (min..=max).contains(&x) => Ok(Label {
            score: Some(x),
            kind: LabelType::of_normalized((x - min) / (max - min)),
        }),
        RawScore::Number(x) => Err(format!(
            "{} {dimension}: target {x} is outside [{min}, {max}]",
            scale.id
        )),
        RawScore::Text(t) if t.eq_ignore_ascii_case("H") => Ok(Label {
            score: None,
            kind: LabelType::H,
        }),
        RawScore::Text(t) if t.eq_ignore_ascii_case("L") => Ok(Label {
            score: None,
            kind: LabelType::L,
        }),
        RawScore::Text(t) => Err(format!(
            "{} {dimension}: target \"{t}\" must be \"H\", \"L\" or a number in [{min}, {max}]",
            scale.id
        )),
    }
}

/// A character file's `[targets]`, read into `labels.target` under each scale's own id; what is wrong
/// with them into `errors`, located.
fn read_targets<'s>(
    src: Source<'_>,
    scale: &impl Fn(&str) -> Option<&'s Scale>,
    raw_targets: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    labels: &mut Labels,
    errors: &mut Vec<Diagnostic>,
) {
    for (scale_id, raw) in raw_targets {
        let Some(scale) = scale(scale_id.get_ref()) else {
            errors.push(src.at(
                scale_id.span(),
                format!("targets name unknown scale \"{}\"", scale_id.get_ref()),
            ));
            continue;
        };
        if labels.target.contains_key(&scale.id) {
            errors.push(src.at(
                scale_id.span(),
                format!(
                    "targets for scale {} again (as \"{}\"): one entry per scale",
                    scale.id,
                    scale_id.get_ref()
                ),
            ));
            continue;
        }
        let span = raw.span();
        // A dimension's error points at its line within the scale's entry.
        let at = |dimension: Option<&str>| {
            // (A table's span may cover only its header: look on from its start.)
            let text = src.text.get(span.start..).unwrap_or("");
            let offset = dimension.and_then(|d| key_at(text, d)).unwrap_or(0);
            span.start + offset..span.end
        };
        match RawTargets::of(raw.into_inner())
            .map_err(|e| vec![e])
            .and_then(|raw| targets(scale, raw))
        {
            Ok(set) => {
                labels.target.insert(scale.id.clone(), set);
            }
            Err(messages) => {
                let mut located: Vec<Diagnostic> = messages
                    .into_iter()
                    .map(|message| {
                        let dimension = scale.dimensions.iter().map(|d| d.name.as_str()).find(|d| message.contains(&format!(" {d}:")) || message.contains(&format!("\"{d}\"")));
                        let unknown = message.split('"').nth(1).filter(|_| message.contains("no dimension"));
                        src.at(at(dimension.or(unknown)), message)
                    })
                    .collect();
                // In the file's order, as they are read.
                located.sort_by_key(|d| (d.line, d.column));
                errors.extend(located);
            }
        }
    }
}

/// Where `key` is written as a key in `text` (bare or quoted, then `=`), outside comments: not a
/// longer name it begins ("Extra" in "Extraversion") nor a word in a comment.
fn key_at(text: &str, key: &str) -> Option<usize> {
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let code = line.split('#').next().unwrap_or("");
        for (i, _) in code.match_indices(key) {
            let before = code[..i].chars().next_back();
            let after = code[i + key.len()..].trim_start_matches('"').trim_start();
            let starts = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'));
            if starts && after.starts_with('=') {
                return Some(line_start + i);
            }
        }
        line_start += line.len();
    }
    None
}

/// A scale's targets, from a type code (one letter per dimension, as `Character::code` writes them;
/// "X" leaves a dimension without a target) or per dimension.
fn targets(scale: &Scale, raw: RawTargets) -> Result<BTreeMap<String, Label>, Vec<String>> {
    let mut out = BTreeMap::new();
    match raw {
        RawTargets::Code(code) => {
            let letters: Vec<char> = code.trim().chars().collect();
            let expected: String = scale.dimensions.iter().map(|d| d.letter(Some(true)).to_string() + "/" + d.letter(Some(false))).collect::<Vec<_>>().join(" ");
            if letters.len() != scale.dimensions.len() {
                return Err(vec![format!(
                    "{}: the code \"{code}\" needs one letter per dimension ({expected})",
                    scale.id
                )]);
            }
            for (d, c) in scale.dimensions.iter().zip(letters) {
                let is = |high: bool| d.letter(Some(high)).eq_ignore_ascii_case(&c.to_string());
                let kind = if is(true) {
                    LabelType::H
                } else if is(false) {
                    LabelType::L
                } else if c.eq_ignore_ascii_case(&'x') {
                    continue;
                } else {
                    return Err(vec![format!(
                        "{}: \"{c}\" in \"{code}\" is not a letter of {} ({})",
                        scale.id, d.name, expected
                    )]);
                };
                out.insert(d.name.clone(), Label { score: None, kind });
            }
        }
        RawTargets::Dimensions(dims) => {
            // Every dimension's problem, as labels are checked: not only the first.
            let mut problems = Vec::new();
            for (dim, raw) in dims {
                if scale.dimension_index(&dim).is_none() {
                    problems.push(scale.no_dimension(&dim));
                    continue;
                }
                match dimension_target(scale, &dim, raw) {
                    Ok(label) => {
                        out.insert(dim, label);
                    }
                    Err(problem) => problems.push(problem),
                }
            }
            if !problems.is_empty() {
                return Err(problems);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_letter_target_has_no_score_and_an_unknown_label_says_x() {
        let json = |label: Label| serde_json::to_value(label).unwrap();
        assert_eq!(
            json(Label { score: None, kind: LabelType::H }),
            serde_json::json!({"score": null, "type": "H"})
        );
        assert_eq!(
            json(Label { score: None, kind: LabelType::X }),
            serde_json::json!({"score": "X", "type": "X"})
        );
        assert_eq!(
            json(Label { score: Some(4.5), kind: LabelType::H }),
            serde_json::json!({"score": 4.5, "type": "H"})
        );
    }
    use crate::domain::scale::tests::TINY;

    const ANNA: &str = r#"id = "anna-en"
name = "Anna"
language = "en"
experimenter = "Bo"
description = "You are Anna."

[labels.annotation.TINY]
Warmth = { score = 4.2, type = "H" }
"#;

    fn parse(text: &str) -> Result<Character, Vec<Diagnostic>> {
        let scale = Scale::parse(Source::new("tiny.toml", TINY)).unwrap();
        Character::parse(Source::new("anna.toml", text), |id| (id == "TINY").then_some(&scale))
    }

    #[test]
    fn every_bad_target_of_a_table_is_said_in_the_files_order() {
        let bad = ANNA.to_string() + "\n[targets.TINY]\nWarmth = 7\nNope = 2\n";
        let e = parse(&bad).unwrap_err();
        let said: Vec<(usize, &str)> = e.iter().map(|d| (d.line, d.message.as_str())).collect();
        assert_eq!(said.len(), 2, "{said:?}");
        assert_eq!((said[0].0, said[1].0), (11, 12), "{said:?}");
        assert!(said[0].1.contains("Warmth") && said[1].1.contains("no dimension \"Nope\""), "{said:?}");
        // A name that begins another, or stands in a comment above, is not where the key is.
        let prefix = ANNA.to_string() + "\n[targets.TINY]\n# Warm is the short of it\nWarmth = \"H\"\nWarm = \"L\"\n";
        let e = parse(&prefix).unwrap_err();
        assert_eq!((e[0].line, e[0].column), (13, 1), "{}", e[0]);
        assert!(e[0].message.contains("no dimension \"Warm\" (it has: Warmth)"), "{}", e[0]);
    }

    #[test]
    fn parses_labels_and_codes() {
        let c = parse(ANNA).unwrap();
        assert_eq!(
            c.labels.get(LabelSource::Annotation, "TINY", "Warmth"),
            Some(&Label {
                score: Some(4.2),
                kind: LabelType::H
            })
        );
        assert_eq!(c.labels.exclusion_source("TINY"), LabelSource::Annotation);
        let scale = Scale::parse(Source::new("tiny.toml", TINY)).unwrap();
        assert_eq!(c.code(&scale, LabelSource::Annotation).as_deref(), Some("H"));
        assert!(c.answers_to("ANNA-EN") && c.answers_to("anna") && !c.answers_to("anna-zh"));
        // A name in either Unicode normal form is the same name.
        let mut zoe = c.clone();
        zoe.name = "Zo\u{eb}".into();
        zoe.aliases = vec!["Chlo\u{e9}".into()];
        assert!(zoe.answers_to("Zoe\u{308}") && zoe.answers_to("Zo\u{eb}") && zoe.answers_to("Chloe\u{301}"));
        assert!(!zoe.answers_to("Zoe"));
    }

    /// A scale id is read in any case, as everywhere: labels and targets under `tiny` are TINY's
    /// (they were validated, then kept under "tiny" where nothing looked them up). The same scale
    /// twice is refused where the second stands.
    #[test]
    fn labels_and_targets_under_a_scale_id_in_another_case_are_the_scales() {
        let scale = Scale::parse(Source::new("tiny.toml", TINY)).unwrap();
        let parse = |text: &str| {
            Character::parse(Source::new("anna.toml", text), |id| id.eq_ignore_ascii_case("TINY").then_some(&scale))
        };
        let lower = ANNA.replace("[labels.annotation.TINY]", "[labels.annotation.tiny]")
            + "\n[targets.tiny]\nWarmth = \"L\"\n";
        let c = parse(&lower).unwrap();
        assert_eq!(c.labels.get(LabelSource::Annotation, "TINY", "Warmth").map(|l| l.kind), Some(LabelType::H));
        assert_eq!(c.labels.get(LabelSource::Target, "TINY", "Warmth").map(|l| l.kind), Some(LabelType::L));
        let twice = ANNA.to_string() + "\n[labels.annotation.tiny]\nWarmth = { score = 1.0, type = \"L\" }\n";
        let e = parse(&twice).unwrap_err();
        assert_eq!((e[0].line, e[0].column), (10, 20), "{}", e[0]);
        assert!(e[0].message.contains("annotation labels for scale TINY again (as \"tiny\")"), "{}", e[0]);
        let targets = ANNA.to_string() + "\n[targets]\nTINY = \"H\"\ntiny = \"L\"\n";
        let e = parse(&targets).unwrap_err();
        assert!(e[0].message.contains("targets for scale TINY again (as "), "{}", e[0]);
    }

    #[test]
    fn the_bounds_are_inclusive() {
        // [1, 5]: 0.6 of the range is exactly 3.4, 0.4 is 2.6.
        assert!(parse(&ANNA.replace("4.2, type = \"H\"", "3.4, type = \"H\"")).is_ok());
        assert!(parse(&ANNA.replace("4.2, type = \"H\"", "2.6, type = \"L\"")).is_ok());
        assert!(parse(&ANNA.replace("4.2, type = \"H\"", "3.0, type = \"X\"")).is_ok());
        assert!(parse(&ANNA.replace("4.2, type = \"H\"", "\"X\", type = \"X\"")).is_ok());
    }

    #[test]
    fn contradicting_types_and_bad_labels_are_located() {
        let e = parse(&ANNA.replace("type = \"H\"", "type = \"L\"")).unwrap_err();
        assert_eq!(e[0].line, 8);
        assert!(e[0].message.contains("contradicts"), "{}", e[0]);
        let e = parse(&ANNA.replace("4.2", "6.0")).unwrap_err();
        assert!(e[0].message.contains("outside [1, 5]"));
        let e = parse(&ANNA.replace("Warmth =", "Coldness =")).unwrap_err();
        assert!(e[0].message.contains("no dimension \"Coldness\""));
        let e = parse(&ANNA.replace("annotation.TINY", "annotation.HUGE")).unwrap_err();
        assert!(e[0].message.contains("unknown scale \"HUGE\""));
        let e = parse(&ANNA.replace("\"X\"", "\"Y\"").replace("4.2", "\"Y\"")).unwrap_err();
        assert!(e[0].message.contains("must be a number or \"X\""));
        let e = parse(&ANNA.replace("language = \"en\"", "language = \"fr\"")).unwrap_err();
        assert!(e[0].message.contains("\"en\" or \"zh\""));
    }

    /// What the agent reads takes lines (and a file's CRLF) but no escape sequence or other control
    /// character, located where the value stands.
    #[test]
    fn a_prompt_that_would_act_on_a_terminal_is_located() {
        let esc = ANNA.replace("\"You are Anna.\"", "\"You are \\u001b[2JAnna.\"");
        let e = parse(&esc).unwrap_err();
        assert_eq!((e[0].line, e[0].column), (5, 15), "{}", e[0]);
        assert!(e[0].message.starts_with("description holds \\u{1b}"), "{}", e[0]);
        let more = ANNA.replace(
            "language = \"en\"",
            "post_history_instructions = \"Short.\\u0007\"\ncatchphrases = [\"Well\", \"Oh\\u009b2J\", \"Ah\\u202e\"]\nlanguage = \"en\"",
        );
        let e = parse(&more).unwrap_err();
        let said: Vec<&str> = e.iter().map(|d| d.message.split(',').next().unwrap()).collect();
        // A direction mark (which earlier imports kept) is no control character: shown inert.
        assert_eq!(said, ["post_history_instructions holds \\u{7}", "a catchphrase holds \\u{9b}"]);
        let lines = ANNA.replace("\"You are Anna.\"", "\"You are Anna.\\r\\n\\tKind.\\nBrave.\"");
        assert!(parse(&lines).is_ok());
    }

    /// Aliases and the work are shown wherever the character is listed: a control character or a
    /// bidirectional override there is refused where it stands, as in the name.
    #[test]
    fn an_alias_or_work_that_would_act_on_a_terminal_is_located() {
        let alias = ANNA.replace("language = \"en\"", "aliases = [\"Ann\", \"A\u{202e}nna\"]\nlanguage = \"en\"");
        let e = parse(&alias).unwrap_err();
        assert_eq!((e[0].line, e[0].column), (3, 19), "{}", e[0]);
        assert!(e[0].message.starts_with("an alias is one line"), "{}", e[0]);
        let work = ANNA.replace("language = \"en\"", "work = \"Saga\\u2067\"\nlanguage = \"en\"");
        let e = parse(&work).unwrap_err();
        assert_eq!((e[0].line, e[0].column), (3, 8), "{}", e[0]);
        assert!(e[0].message.starts_with("work is one line"), "{}", e[0]);
        // A name or alias of invisible characters alone looks blank wherever it is listed.
        let blank = ANNA.replace("language = \"en\"", "aliases = [\"\\u200b \\u2060\"]\nlanguage = \"en\"");
        let e = parse(&blank).unwrap_err();
        assert_eq!(e[0].message, "an alias shows nothing: it holds only invisible characters", "{}", e[0]);
        let fine = ANNA.replace("language = \"en\"", "aliases = [\"Ann\"]\nwork = \"Saga\"\nlanguage = \"en\"");
        let c = parse(&fine).unwrap();
        assert_eq!((c.aliases, c.work.as_str()), (vec!["Ann".to_string()], "Saga"));
    }

    #[test]
    fn a_final_instruction_reads_back_and_changes_the_version_only_when_there_is_one() {
        let c = parse(ANNA).unwrap();
        assert_eq!(c.post_history, "");
        let with = Character {
            post_history: "[Answer in one line.]\nNo lists.".into(),
            ..c.clone()
        };
        let text = with.to_toml();
        assert!(text.contains("post_history_instructions"), "{text}");
        assert_eq!(parse(&text).unwrap(), with);
        assert!(!c.to_toml().contains("post_history_instructions"));
        // Fields a file may leave out are left out when empty, and read back empty.
        let bare = Character { work: String::new(), catchphrases: Vec::new(), ..c.clone() };
        let text = bare.to_toml();
        assert!(!text.contains("work =") && !text.contains("catchphrases ="), "{text}");
        assert_eq!(parse(&text).unwrap(), bare);
        assert_ne!(with.version(&[]), c.version(&[]));
        // The version every character without one had before the field existed.
        assert_eq!(parse(&c.to_toml()).unwrap().version(&[]), c.version(&[]));
    }
}
