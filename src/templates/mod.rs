//! The prompt templates of the InCharacter method as data: every text a model reads from the method
//! (the interviewer's framing of a question, the self-report questions, the judge's instructions and
//! its re-ask) is a file with named placeholders, bundled from `assets/prompts/` and replaceable per
//! run by a folder of the user's files. A placeholder is `{name}` or `{name.part}`, each part matching
//! `[A-Za-z_][A-Za-z0-9_]*`; every other brace is literal text (the expert-rating template shows the
//! judge a JSON object). Templates that write JSON (`oc_sample`, `doc_sample`, `expert_result_poles`)
//! get every value escaped as the inside of a JSON string; the keys, quotes and separators a model
//! reads are the template's own text. Each template allows some placeholders and requires the ones the method cannot
//! work without; a file that uses an unknown one, or lacks a required one, is refused with its
//! `file:line:column` before anything is sent. A file is used byte for byte, a final newline included.
//! A session records the templates it did not take from the bundle with their text ([`PromptSet`]),
//! so a resume or a re-assessment reads exactly what the run read.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::domain::diagnostic::{Diagnostic, Source};

mod specs;
pub use specs::Template;

/// The origin of a template compiled into the binary.
pub const BUNDLED: &str = "bundled";

/// The largest prompt template a folder may hold: a session records the text of every template it
/// uses, and a prompt many times a model's context is a mistake, not a protocol.
pub const MAX_TEMPLATE: u64 = 256 * 1024;

/// What a template file is refused for. All of it is the user's input.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    // `error`, not `source`: the message says it already, and a `source` would print it twice.
    #[error("{path}: {error}")]
    Read { path: String, error: std::io::Error },
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
    let ident = |from: usize| -> usize {
        let rest = &bytes[from.min(bytes.len())..];
        match rest.first() {
            Some(c) if c.is_ascii_alphabetic() || *c == b'_' => rest
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count(),
            _ => 0,
        }
    };
    // `name` or `name.name…`
    let name_len = |from: usize| -> usize {
        let mut len = ident(from);
        while len > 0 && bytes.get(from + len) == Some(&b'.') {
            match ident(from + len + 1) {
                0 => break,
                more => len += 1 + more,
            }
        }
        len
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
    // A placeholder's name after `{` with no `}` closing it: a typo that would otherwise be taken
    // for literal text (and then reported as a required placeholder missing, at the file's start).
    for (at, _) in text.match_indices('{') {
        let rest = &text[at + 1..];
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(rest.len());
        // A sentence's full stop after it is not part of the name.
        let name = rest[..name_len].trim_end_matches('.');
        if !rest[name.len()..].starts_with('}') && allowed.iter().any(|p| p.name == name) {
            return Err(source.at(
                at..at,
                format!("the placeholder {{{name} is not closed: write {{{name}}}"),
            ));
        }
    }
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
        // In errors, a name's control characters written out, so the file can be found.
        let shown = |p: &Path| crate::text::visible(&p.display().to_string());
        let read_error = |p: &Path| {
            let path = shown(p);
            move |error: std::io::Error| TemplateError::Read { path, error }
        };
        // A `prompts export` killed in the middle is undone first: never a mix of two sets.
        crate::files::recover(dir);
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
            // A byte order mark (which editors on Windows add unseen) is not text to send a model.
            let text = match text.strip_prefix('\u{feff}') {
                Some(rest) => rest.to_string(),
                None => text,
            };
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
        if template.is_json() {
            let escaped: Vec<(&str, String)> = values.iter().map(|(n, v)| (*n, json_escaped(v))).collect();
            let values: Vec<(&str, &str)> = escaped.iter().map(|(n, v)| (*n, v.as_str())).collect();
            return fill(self.text(template), &values);
        }
        fill(self.text(template), values)
    }

    /// Checks that `values` fill every required group of `template`: a group whose placeholders the
    /// template uses all render empty (an `option_conversion` that reads its options only from
    /// `{scale.conversion_instruction}`, on a scale that has none) would leave the model without what
    /// the method needs. `whose` says where the values come from ("scale gse"); the error names the
    /// first such placeholder at its `file:line:column`.
    pub fn filled(&self, template: Template, values: &[(&str, &str)], whose: &str) -> Result<(), Diagnostic> {
        let text = self.text(template);
        let used: Vec<(&str, usize)> = pieces(text)
            .into_iter()
            .filter_map(|p| match p {
                Piece::Slot { name, at } => Some((name, at)),
                Piece::Text(_) => None,
            })
            .collect();
        let empty = |name: &str| {
            values
                .iter()
                .find(|(n, _)| *n == name)
                .is_none_or(|(_, v)| v.trim().is_empty())
        };
        for group in template.required() {
            let in_group: Vec<&(&str, usize)> = used.iter().filter(|(n, _)| group.contains(n)).collect();
            let Some(&&(first, at)) = in_group.first() else {
                continue;
            };
            if in_group.iter().all(|(n, _)| empty(n)) {
                let others: Vec<String> = group
                    .iter()
                    .filter(|n| !in_group.iter().any(|(u, _)| u == *n))
                    .map(|n| format!("{{{n}}}"))
                    .collect();
                return Err(Source::new(self.origin(template), text).at(
                    at..at,
                    format!(
                        "{{{first}}} is empty for {whose}, and the {} template uses nothing in its place \
                         (it may use {}): the model would read the prompt without it",
                        template.name(),
                        others.join(" or ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// How a reply's `schema` is described in the prompt where it cannot go as `response_format`: the
    /// set's `schema_instruction`, or `None` for the bundled one (which the transports use themselves).
    pub fn schema_instruction(&self, schema: &serde_json::Value) -> Option<String> {
        self.overrides
            .contains_key(&Template::SchemaInstruction)
            .then(|| self.render(Template::SchemaInstruction, &[("schema", &schema.to_string())]))
    }

    /// `items` each rendered by `item`, joined by the text of `separator`.
    /// `values` is given each item's place, from 0.
    pub fn join<T>(
        &self,
        items: &[T],
        item: Template,
        separator: Template,
        values: impl Fn(usize, &T) -> Vec<(&'static str, String)>,
    ) -> String {
        items
            .iter()
            .enumerate()
            .map(|(i, it)| {
                let owned = values(i, it);
                let pairs: Vec<(&str, &str)> = owned.iter().map(|(n, v)| (*n, v.as_str())).collect();
                self.render(item, &pairs)
            })
            .collect::<Vec<_>>()
            .join(self.text(separator))
    }
}

/// `text` as it stands inside a JSON string (quotes, backslashes and control characters escaped as
/// serde_json writes them).
pub fn json_escaped(text: &str) -> String {
    let quoted = serde_json::Value::String(text.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
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

/// The templates every session's manifest lists; those after them (the layouts, option lists and
/// instructions that were written in code before they were templates) are listed only where a run
/// replaced them, so the manifests of earlier sessions stay as they were. An absent one is bundled.
const ALWAYS_LISTED: usize = 10;

/// Every template's origin and SHA-256, without text: `record`'s entries, the bundled ones for the rest
/// (see [`ALWAYS_LISTED`]).
pub fn manifest(record: &PromptSet) -> PromptSet {
    Template::ALL
        .into_iter()
        .filter(|t| (*t as usize) < ALWAYS_LISTED || record.contains_key(t.name()))
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
mod tests;
