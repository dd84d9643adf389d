//! The prompt templates of the InCharacter method as data: every text a model reads from the method
//! (the interviewer's framing of a question, the self-report questions, the judge's instructions and
//! its re-ask) is a file with named placeholders, bundled from `assets/prompts/` and replaceable per
//! run by a folder of the user's files. A placeholder is `{name}` with `name` matching
//! `[A-Za-z_][A-Za-z0-9_]*`; every other brace is literal text (the expert-rating template shows the
//! judge a JSON object). Each template allows some placeholders and requires the ones the method cannot
//! work without; a file that uses an unknown one, or lacks a required one, is refused with its
//! `file:line:column` before anything is sent. A file is used byte for byte, a final newline included.
//! A session records the templates it did not take from the bundle with their text ([`PromptSet`]),
//! so a resume or a re-assessment reads exactly what the run read.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::domain::diagnostic::{Diagnostic, Source};

/// The origin of a template compiled into the binary.
pub const BUNDLED: &str = "bundled";

/// One template of the method; its name is its file name without `.txt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Template {
    ExpertRating,
    ExpertConversation,
    OptionConversion,
    DimensionConversion,
    SelfReportEn,
    SelfReportZh,
    SelfReportCotEn,
    SelfReportCotZh,
    Interviewer,
    Reask,
}

/// A placeholder a template may use, and what the method puts in its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placeholder {
    pub name: &'static str,
    pub meaning: &'static str,
}

const fn slot(name: &'static str, meaning: &'static str) -> Placeholder {
    Placeholder { name, meaning }
}

const SCALE_NAME: Placeholder = slot("scale_name", "the scale's name");
const SCALE_ID: Placeholder = slot("scale_id", "the scale's id");
const EXPERIMENTER_MASK: Placeholder = slot("experimenter", "the experimenter's mask, <the experimenter>");
const PARTICIPANT_MASK: Placeholder = slot("participant", "the character's mask, <the participant>");
const DIMENSION: Placeholder = slot("dimension", "the dimension's name");
const DESCRIPTION: Placeholder = slot("description", "the dimension's description (English)");
const EXAMPLE: Placeholder = slot("example", "an example reply, a JSON object keyed by item id");
const STEM: Placeholder = slot(
    "stem",
    "the scale's self-report question with the item's statement in it",
);
const STATEMENT: Placeholder = slot("statement", "the item's statement alone");
const CHOICES: Placeholder = slot(
    "options",
    "the scale's options, numbered (\"1 = …; 2 = …\"), in the character's language",
);

/// What the method knows about one template.
struct Spec {
    name: &'static str,
    bundled: &'static str,
    placeholders: &'static [Placeholder],
    /// Each group must be represented by at least one of its names.
    required: &'static [&'static [&'static str]],
}

/// The self-report questions (SR, SR-CoT; one per language) share their placeholders.
const fn self_report(name: &'static str, bundled: &'static str) -> Spec {
    Spec {
        name,
        bundled,
        placeholders: &[STEM, STATEMENT, CHOICES],
        required: &[&["stem", "statement"], &["options"]],
    }
}

/// In the order of [`Template::ALL`].
const SPECS: [Spec; 10] = [
    Spec {
        name: "expert_rating",
        bundled: include_str!("../assets/prompts/expert_rating.txt"),
        placeholders: &[
            SCALE_NAME,
            SCALE_ID,
            EXPERIMENTER_MASK,
            PARTICIPANT_MASK,
            DIMENSION,
            DESCRIPTION,
            slot(
                "rule",
                "how to rate: the scale's range and what its ends mean, or the two poles' percentages",
            ),
            slot("language", "the conversation's language, English or Chinese"),
            slot(
                "result_form",
                "the form of \"result\" in the reply: a number, or the poles' percentages",
            ),
        ],
        required: &[&["dimension"]],
    },
    Spec {
        name: "expert_conversation",
        bundled: include_str!("../assets/prompts/expert_conversation.txt"),
        placeholders: &[slot(
            "conversation",
            "the batch's exchanges, numbered, anonymized, each line wrapped in 「」",
        )],
        required: &[&["conversation"]],
    },
    Spec {
        name: "option_conversion",
        bundled: include_str!("../assets/prompts/option_conversion.txt"),
        placeholders: &[
            slot("character", "the character's name"),
            SCALE_NAME,
            SCALE_ID,
            slot("options", "the scale's options, numbered (\"1 = …, 2 = …\")"),
            EXAMPLE,
        ],
        required: &[&["options"]],
    },
    Spec {
        name: "dimension_conversion",
        bundled: include_str!("../assets/prompts/dimension_conversion.txt"),
        placeholders: &[
            SCALE_NAME,
            SCALE_ID,
            PARTICIPANT_MASK,
            EXPERIMENTER_MASK,
            DIMENSION,
            DESCRIPTION,
            slot("options", "one line per option, named by the dimension's poles"),
            EXAMPLE,
        ],
        required: &[&["dimension"], &["options"]],
    },
    self_report("self_report.en", include_str!("../assets/prompts/self_report.en.txt")),
    self_report("self_report.zh", include_str!("../assets/prompts/self_report.zh.txt")),
    self_report(
        "self_report_cot.en",
        include_str!("../assets/prompts/self_report_cot.en.txt"),
    ),
    self_report(
        "self_report_cot.zh",
        include_str!("../assets/prompts/self_report_cot.zh.txt"),
    ),
    Spec {
        name: "interviewer",
        bundled: include_str!("../assets/prompts/interviewer.txt"),
        placeholders: &[
            slot("experimenter", "the character's experimenter (who asks)"),
            slot("character", "the character's name"),
            slot("question", "the item's open question, in the character's language"),
        ],
        required: &[&["question"]],
    },
    Spec {
        name: "reask",
        bundled: include_str!("../assets/prompts/reask.txt"),
        placeholders: &[slot("problem", "why the judge's previous reply could not be used")],
        required: &[&["problem"]],
    },
];

impl Template {
    pub const ALL: [Template; 10] = [
        Template::ExpertRating,
        Template::ExpertConversation,
        Template::OptionConversion,
        Template::DimensionConversion,
        Template::SelfReportEn,
        Template::SelfReportZh,
        Template::SelfReportCotEn,
        Template::SelfReportCotZh,
        Template::Interviewer,
        Template::Reask,
    ];

    fn spec(self) -> &'static Spec {
        &SPECS[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    pub fn file_name(self) -> String {
        format!("{}.txt", self.name())
    }

    pub fn from_name(name: &str) -> Option<Template> {
        Template::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Whether the role-playing agent reads it (the interview's wording) rather than the judge.
    pub fn is_interview(self) -> bool {
        matches!(
            self,
            Template::Interviewer
                | Template::SelfReportEn
                | Template::SelfReportZh
                | Template::SelfReportCotEn
                | Template::SelfReportCotZh
        )
    }

    /// Every placeholder the template may use.
    pub fn placeholders(self) -> &'static [Placeholder] {
        self.spec().placeholders
    }

    /// Groups of placeholders of which the template must use at least one each.
    pub fn required(self) -> &'static [&'static [&'static str]] {
        self.spec().required
    }

    pub fn is_required(self, name: &str) -> bool {
        self.required().iter().any(|group| group.contains(&name))
    }

    /// The text compiled into the binary.
    pub fn bundled_text(self) -> &'static str {
        self.spec().bundled
    }
}

/// The largest prompt template a folder may hold: a session records the text of every template it
/// uses, and a prompt many times a model's context is a mistake, not a protocol.
pub const MAX_TEMPLATE: u64 = 256 * 1024;

/// What a template file is refused for. All of it is the user's input.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("{path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: not a prompt template; a prompt folder holds some of {known} (`incharacter prompts` lists them)")]
    UnknownFile { path: String, known: String },
    /// A placeholder the template does not allow, a required one it lacks, text that is not UTF-8.
    #[error(transparent)]
    Invalid(#[from] Diagnostic),
    /// A template file that is not a regular file, or larger than a template may be.
    #[error(transparent)]
    File(#[from] crate::files::FileError),
    /// A session's record of its prompt set that cannot be used as it is.
    #[error("the session's prompt set: {0}")]
    Record(String),
}

/// A template the user wrote (or chose) is at fault.
impl crate::fault::Classify for TemplateError {
    fn fault(&self) -> crate::fault::Fault {
        crate::fault::Fault::Input
    }
}

/// One template as a session records it: where it came from and the SHA-256 of its bytes; the text
/// of every template not taken from the bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptFile {
    pub origin: String,
    pub sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Templates by name.
pub type PromptSet = BTreeMap<String, PromptFile>;

/// The SHA-256 of `text`'s bytes, in hex.
pub fn sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A template's text cut into literal text and placeholders.
enum Piece<'a> {
    Text(&'a str),
    Slot { name: &'a str, at: usize },
}

fn pieces(text: &str) -> Vec<Piece<'_>> {
    let bytes = text.as_bytes();
    let name_len = |from: usize| -> usize {
        let rest = &bytes[from.min(bytes.len())..];
        match rest.first() {
            Some(c) if c.is_ascii_alphabetic() || *c == b'_' => rest
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count(),
            _ => 0,
        }
    };
    let mut out = Vec::new();
    let (mut literal, mut i) = (0, 0);
    while i < bytes.len() {
        let len = if bytes[i] == b'{' { name_len(i + 1) } else { 0 };
        if len > 0 && bytes.get(i + 1 + len) == Some(&b'}') {
            if literal < i {
                out.push(Piece::Text(&text[literal..i]));
            }
            out.push(Piece::Slot {
                name: &text[i + 1..i + 1 + len],
                at: i,
            });
            i += len + 2;
            literal = i;
        } else {
            i += 1;
        }
    }
    if literal < text.len() {
        out.push(Piece::Text(&text[literal..]));
    }
    out
}

/// `template` with each `{name}` that `values` names replaced by its value, in one pass (a value that
/// holds `{other}` stays as it is); other placeholders and braces are kept as they are.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    for piece in pieces(template) {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Slot { name, .. } => match values.iter().find(|(n, _)| *n == name) {
                Some((_, value)) => out.push_str(value),
                None => {
                    out.push('{');
                    out.push_str(name);
                    out.push('}');
                }
            },
        }
    }
    out
}

/// Checks `text` as `template`: every placeholder allowed, every required group present. `file` names
/// it in the error.
pub fn validate(template: Template, text: &str, file: &str) -> Result<(), Diagnostic> {
    let source = Source::new(file, text);
    let allowed = template.placeholders();
    let mut used = Vec::new();
    for piece in pieces(text) {
        if let Piece::Slot { name, at } = piece {
            if !allowed.iter().any(|p| p.name == name) {
                let names: Vec<String> = allowed.iter().map(|p| format!("{{{}}}", p.name)).collect();
                return Err(source.at(
                    at..at,
                    format!(
                        "unknown placeholder {{{name}}} in the {} template; it may use {}",
                        template.name(),
                        names.join(", ")
                    ),
                ));
            }
            used.push(name);
        }
    }
    for group in template.required() {
        if !group.iter().any(|name| used.contains(name)) {
            let names: Vec<String> = group.iter().map(|n| format!("{{{n}}}")).collect();
            let meaning = template
                .placeholders()
                .iter()
                .filter(|p| group.contains(&p.name))
                .map(|p| p.meaning)
                .collect::<Vec<_>>()
                .join("; or ");
            return Err(source.whole(format!(
                "the {} template needs the placeholder {} ({meaning})",
                template.name(),
                names.join(" or ")
            )));
        }
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Override {
    text: String,
    origin: String,
}

/// The templates a run uses: the bundled ones, some of them replaced by the user's files.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Templates {
    overrides: BTreeMap<Template, Override>,
}

static BUNDLED_SET: Templates = Templates {
    overrides: BTreeMap::new(),
};

impl Templates {
    /// Every template as bundled.
    pub fn bundled() -> &'static Templates {
        &BUNDLED_SET
    }

    /// The bundled templates, with those of which `dir` holds a `<name>.txt` read from there. Any other
    /// file (hidden ones aside) is refused, so a misspelt name never falls back to the bundled text.
    pub fn load_dir(dir: &Path) -> Result<Templates, TemplateError> {
        let shown = |p: &Path| p.display().to_string();
        let read_error = |p: &Path| {
            let path = shown(p);
            move |source: std::io::Error| TemplateError::Read { path, source }
        };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(read_error(dir))? {
            let entry = entry.map_err(read_error(dir))?;
            let path = entry.path();
            let file_name = entry.file_name().to_string_lossy().into_owned();
            if file_name.starts_with('.') {
                continue;
            }
            match file_name.strip_suffix(".txt").and_then(Template::from_name) {
                // A folder, device or FIFO under a template's name is refused when it is read.
                Some(t) => files.push((t, path)),
                _ => {
                    let known: Vec<String> = Template::ALL.iter().map(|t| t.file_name()).collect();
                    return Err(TemplateError::UnknownFile {
                        path: shown(&path),
                        known: known.join(", "),
                    });
                }
            }
        }
        files.sort();
        let mut overrides = BTreeMap::new();
        for (template, path) in files {
            let bytes = crate::files::read_limited(&path, MAX_TEMPLATE, "a prompt template")?;
            let text = String::from_utf8(bytes).map_err(|e| {
                let valid = e.utf8_error().valid_up_to();
                let prefix = String::from_utf8_lossy(&e.as_bytes()[..valid]).into_owned();
                let file = shown(&path);
                Source::new(&file, &prefix).at(valid..valid, "not UTF-8 text")
            })?;
            validate(template, &text, &shown(&path))?;
            let origin = std::path::absolute(&path).unwrap_or(path);
            overrides.insert(
                template,
                Override {
                    text,
                    origin: origin.to_string_lossy().into_owned(),
                },
            );
        }
        Ok(Templates { overrides })
    }

    /// The templates a session recorded ([`Templates::record`], or [`manifest`]'s bundled entries).
    pub fn from_record(record: &PromptSet) -> Result<Templates, TemplateError> {
        let mut overrides = BTreeMap::new();
        for (name, file) in record {
            let template = Template::from_name(name)
                .ok_or_else(|| TemplateError::Record(format!("unknown template \"{}\"", name)))?;
            match &file.text {
                Some(text) if sha256(text) == file.sha256 => {
                    validate(template, text, &file.origin)?;
                    overrides.insert(
                        template,
                        Override {
                            text: text.clone(),
                            origin: file.origin.clone(),
                        },
                    );
                }
                Some(_) => {
                    return Err(TemplateError::Record(format!(
                        "the text recorded for {name} does not have its recorded sha256"
                    )));
                }
                None if file.origin == BUNDLED && file.sha256 == sha256(template.bundled_text()) => {}
                None => {
                    return Err(TemplateError::Record(format!(
                        "{name} ({}) is recorded without its text, and it is not this build's bundled template",
                        file.origin
                    )));
                }
            }
        }
        Ok(Templates { overrides })
    }

    /// What a session records: the templates not taken from the bundle, with their text.
    pub fn record(&self) -> PromptSet {
        self.overrides
            .iter()
            .map(|(t, o)| {
                (
                    t.name().to_string(),
                    PromptFile {
                        origin: o.origin.clone(),
                        sha256: sha256(&o.text),
                        text: Some(o.text.clone()),
                    },
                )
            })
            .collect()
    }

    pub fn text(&self, template: Template) -> &str {
        self.overrides
            .get(&template)
            .map_or(template.bundled_text(), |o| o.text.as_str())
    }

    /// `bundled`, or the path of the file the template was read from.
    pub fn origin(&self, template: Template) -> &str {
        self.overrides.get(&template).map_or(BUNDLED, |o| o.origin.as_str())
    }

    /// The template with its placeholders replaced by `values` (one pass). Callers pass a value for
    /// every placeholder the template allows, since a user's file may use any of them.
    pub fn render(&self, template: Template, values: &[(&str, &str)]) -> String {
        debug_assert!(
            template
                .placeholders()
                .iter()
                .all(|p| values.iter().any(|(n, _)| *n == p.name)),
            "{} rendered without every placeholder it allows",
            template.name()
        );
        fill(self.text(template), values)
    }
}

/// The prompt sets kept as sub-folders of `dir` (`<data dir>/prompts/`), by folder name, each read as
/// [`Templates::load_dir`] reads it (as a session records it) or why it cannot be used. No folder, no
/// sets.
pub fn sets_in(dir: &Path) -> Vec<(String, Result<PromptSet, TemplateError>)> {
    let mut folders: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .collect();
    folders.sort();
    folders
        .into_iter()
        .map(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (name, Templates::load_dir(&p).map(|t| t.record()))
        })
        .collect()
}

/// Every template's origin and SHA-256, without text: `record`'s entries, the bundled ones for the rest.
pub fn manifest(record: &PromptSet) -> PromptSet {
    Template::ALL
        .into_iter()
        .map(|t| {
            let file = record.get(t.name()).map_or_else(
                || PromptFile {
                    origin: BUNDLED.to_string(),
                    sha256: sha256(t.bundled_text()),
                    text: None,
                },
                |f| PromptFile {
                    text: None,
                    ..f.clone()
                },
            );
            (t.name().to_string(), file)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        pieces(text)
            .into_iter()
            .filter_map(|p| match p {
                Piece::Slot { name, .. } => Some(name.to_string()),
                Piece::Text(_) => None,
            })
            .collect()
    }

    #[test]
    fn placeholders_are_identifiers_in_braces_and_every_other_brace_is_literal() {
        assert_eq!(names("{a} {_b2} {3c} { d} {e } {f-g} {} {"), vec!["a", "_b2"]);
        let json = r#"{"analysis": "<why>", "result": {result_form}}"#;
        assert_eq!(names(json), vec!["result_form"]);
        assert_eq!(
            fill(json, &[("result_form", "<a number>")]),
            r#"{"analysis": "<why>", "result": <a number>}"#
        );
        assert_eq!(fill("{{x}}", &[("x", "1")]), "{1}");
        assert_eq!(fill("钟离{x}。", &[("x", "「")]), "钟离「。");
        assert_eq!(fill("{unset} {x}", &[("x", "1")]), "{unset} 1");
    }

    #[test]
    fn rendering_is_one_pass() {
        let out = fill("{a}/{b}", &[("a", "{b}"), ("b", "{a}")]);
        assert_eq!(out, "{b}/{a}", "a value is never substituted again");
    }

    #[test]
    fn the_bundled_templates_are_valid_and_say_what_they_require() {
        for t in Template::ALL {
            validate(t, t.bundled_text(), &t.file_name()).unwrap();
            assert_eq!(Template::from_name(t.name()), Some(t));
            for group in t.required() {
                for name in *group {
                    assert!(t.placeholders().iter().any(|p| p.name == *name), "{}: {name}", t.name());
                }
            }
        }
        assert!(Template::SelfReportZh.is_required("stem") && Template::SelfReportZh.is_required("statement"));
        assert!(!Template::ExpertRating.is_required("rule"));
        assert_eq!(Template::from_name("expert_rating.txt"), None);
    }

    #[test]
    fn an_unknown_placeholder_is_located_by_line_and_character_column() {
        let text = "Dimension: {dimension}\n钟离 {options} and {dimensoin}\n";
        let e = validate(Template::ExpertRating, text, "p/expert_rating.txt").unwrap_err();
        assert_eq!((e.line, e.column), (2, 4));
        assert!(
            e.to_string().starts_with("p/expert_rating.txt:2:4: unknown placeholder {options} in the expert_rating template; it may use {scale_name}"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_required_placeholder_is_named_at_the_start_of_the_file() {
        let e = validate(Template::DimensionConversion, "Rate {dimension}.", "d.txt").unwrap_err();
        assert_eq!(
            e.to_string(),
            "d.txt:1:1: the dimension_conversion template needs the placeholder {options} (one line per option, named by the dimension's poles)"
        );
        let e = validate(Template::SelfReportEn, "{options}", "s.txt").unwrap_err();
        assert!(e.to_string().contains("{stem} or {statement}"), "{e}");
        validate(Template::SelfReportEn, "Agree? {statement} ({options})", "s.txt").unwrap();
    }

    fn folder(files: &[(&str, &[u8])]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in files {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        dir
    }

    #[test]
    fn a_folder_replaces_the_templates_it_holds_and_no_others() {
        let text = "Ask again: {problem}\n";
        let dir = folder(&[("reask.txt", text.as_bytes()), (".DS_Store", b"\0")]);
        let t = Templates::load_dir(dir.path()).unwrap();
        assert_eq!(t.text(Template::Reask), text);
        assert_eq!(
            t.render(Template::Reask, &[("problem", "no JSON")]),
            "Ask again: no JSON\n"
        );
        assert_eq!(t.origin(Template::ExpertRating), BUNDLED);
        assert_eq!(t.text(Template::ExpertRating), Template::ExpertRating.bundled_text());
        let origin = Path::new(t.origin(Template::Reask));
        assert!(origin.is_absolute() && origin.ends_with("reask.txt"), "{origin:?}");
        assert_eq!(Templates::load_dir(folder(&[]).path()).unwrap(), *Templates::bundled());
    }

    #[test]
    fn a_folder_with_an_unknown_or_bad_file_is_refused() {
        let dir = folder(&[
            ("expert_rating.txt", b"{dimension}"),
            ("expert-rating.txt", b"{dimension}"),
        ]);
        let e = Templates::load_dir(dir.path()).unwrap_err();
        assert!(
            matches!(&e, TemplateError::UnknownFile { path, known } if path.ends_with("expert-rating.txt") && known.contains("self_report_cot.zh.txt")),
            "{e}"
        );
        let dir = folder(&[("interviewer.txt", b"{experimenter}: \xff{question}")]);
        let e = Templates::load_dir(dir.path()).unwrap_err().to_string();
        assert!(e.ends_with("interviewer.txt:1:17: not UTF-8 text"), "{e}");
        let dir = folder(&[("interviewer.txt", b"\n  {speaker}: {question}")]);
        let e = Templates::load_dir(dir.path()).unwrap_err().to_string();
        assert!(e.contains("interviewer.txt:2:3: unknown placeholder {speaker}"), "{e}");
        let e = Templates::load_dir(&dir.path().join("absent")).unwrap_err();
        assert!(matches!(e, TemplateError::Read { .. }), "{e}");
    }

    #[test]
    fn each_sub_folder_is_a_prompt_set_read_or_refused_with_its_location() {
        let dir = tempfile::tempdir().unwrap();
        assert!(sets_in(&dir.path().join("absent")).is_empty());
        for (set, file, text) in [
            ("strict", "reask.txt", "Again: {problem}"),
            ("broken", "reask.txt", "Again: {problme}"),
            (".hidden", "reask.txt", "{problem}"),
        ] {
            std::fs::create_dir(dir.path().join(set)).unwrap();
            std::fs::write(dir.path().join(set).join(file), text).unwrap();
        }
        std::fs::write(dir.path().join("loose.txt"), "not a set").unwrap();
        let sets = sets_in(dir.path());
        let names: Vec<&str> = sets.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["broken", "strict"]);
        let e = sets[0].1.as_ref().unwrap_err().to_string();
        assert!(e.contains("reask.txt:1:8: unknown placeholder {problme}"), "{e}");
        let strict = sets[1].1.as_ref().unwrap();
        assert_eq!(strict["reask"].text.as_deref(), Some("Again: {problem}"));
    }

    #[test]
    fn a_record_holds_the_overrides_with_their_text_and_gives_them_back() {
        let dir = folder(&[("option_conversion.txt", b"Options: {options}\n")]);
        let t = Templates::load_dir(dir.path()).unwrap();
        let record = t.record();
        assert_eq!(record.len(), 1);
        let file = &record["option_conversion"];
        assert_eq!(
            file.sha256, "bb2a1466754e5ccf3307760a259f71212f4e5b96ad4948e2a4bc55eeca996ac2",
            "sha256 of the file's bytes"
        );
        assert_eq!(file.text.as_deref(), Some("Options: {options}\n"));
        // The file may change or go: the record is what the session reads.
        std::fs::remove_file(dir.path().join("option_conversion.txt")).unwrap();
        assert_eq!(Templates::from_record(&record).unwrap(), t);
        assert_eq!(
            Templates::from_record(&PromptSet::new()).unwrap(),
            *Templates::bundled()
        );

        let all = manifest(&record);
        assert_eq!(all.len(), Template::ALL.len());
        assert_eq!(all["option_conversion"].origin, file.origin);
        assert_eq!(all["option_conversion"].text, None);
        assert_eq!(all["reask"].origin, BUNDLED);
        assert_eq!(all["reask"].sha256, sha256(Template::Reask.bundled_text()));
        assert_eq!(
            Templates::from_record(&all).unwrap_err().to_string(),
            format!(
                "the session's prompt set: option_conversion ({}) is recorded without its text, and it is not this build's bundled template",
                file.origin
            )
        );
        assert_eq!(
            Templates::from_record(&manifest(&PromptSet::new())).unwrap(),
            *Templates::bundled()
        );
    }

    #[test]
    fn a_damaged_record_is_refused() {
        let file = |text: &str, sha: &str| PromptFile {
            origin: "/p/reask.txt".into(),
            sha256: sha.into(),
            text: Some(text.into()),
        };
        let one = |name: &str, f: PromptFile| PromptSet::from([(name.to_string(), f)]);
        let e = Templates::from_record(&one("reask", file("{problem}!", "00"))).unwrap_err();
        assert!(e.to_string().contains("does not have its recorded sha256"), "{e}");
        let e = Templates::from_record(&one("rehash", file("{problem}", &sha256("{problem}")))).unwrap_err();
        assert!(e.to_string().contains("unknown template \"rehash\""), "{e}");
        let e = Templates::from_record(&one("reask", file("{why}", &sha256("{why}")))).unwrap_err();
        assert!(
            e.to_string().starts_with("/p/reask.txt:1:1: unknown placeholder {why}"),
            "{e}"
        );
    }
}
