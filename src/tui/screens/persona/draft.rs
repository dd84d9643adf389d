//! The draft the Persona screen edits: a character's one-line fields as text, its prompt in an editor,
//! its targets, and what it reads back as.

use crate::domain::character::{self, Character};
use crate::domain::scale::Language;

/// The parts of the draft, in the order tab visits them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Id,
    Name,
    Language,
    Experimenter,
    Catchphrases,
    Prompt,
    Targets,
}

pub(super) const FIELDS: [Field; 7] = [
    Field::Id,
    Field::Name,
    Field::Language,
    Field::Experimenter,
    Field::Catchphrases,
    Field::Prompt,
    Field::Targets,
];

/// A character being written: the one-line fields as text, the prompt in its editor, the targets.
pub struct Draft {
    /// The character as it was when editing began (its labels, agents and card are kept as they are).
    pub base: Character,
    /// Whether the draft is a new file (a new character or a copy), not yet saved.
    pub new: bool,
    /// The character a copy was made from: its memories and card go with the copy.
    pub copy_of: Option<String>,
    pub id: String,
    pub name: String,
    pub language: Language,
    pub experimenter: String,
    /// Catchphrases separated by " | " (see [`phrases`]).
    pub catchphrases: String,
    pub prompt: tui_textarea::TextArea<'static>,
    pub targets: character::LabelSet,
    pub field: Field,
    /// The target dimension the cursor is on.
    pub target_cursor: usize,
    /// A number being typed for a target.
    pub typed: String,
    /// The character the draft described when editing began, to tell an edit from none.
    unedited: Character,
    /// Esc was pressed once with edits unsaved: a second leaves without saving.
    pub leaving: bool,
    /// Its save was asked and has not answered yet: the draft takes no key until it does.
    pub saving: bool,
}

impl Draft {
    pub(super) fn of(base: Character, new: bool) -> Draft {
        let mut prompt = tui_textarea::TextArea::new(base.description.lines().map(String::from).collect());
        prompt.set_placeholder_text("The role-play prompt: who the character is, how they speak");
        let mut draft = Draft {
            new,
            copy_of: None,
            id: base.id.clone(),
            name: base.name.clone(),
            language: base.language,
            experimenter: base.experimenter.clone(),
            catchphrases: phrases_line(&base.catchphrases),
            prompt,
            targets: base.labels.target.clone(),
            field: Field::Name,
            target_cursor: 0,
            typed: String::new(),
            unedited: base.clone(),
            leaving: false,
            saving: false,
            base,
        };
        draft.unedited = draft.character();
        draft
    }

    /// Whether the draft holds edits not saved (a new character is unsaved until saved).
    pub fn unsaved(&self) -> bool {
        self.new || self.character() != self.unedited
    }

    /// The character the draft describes. A field left as it was keeps its value exactly (no
    /// trimming of what was not typed); a name typed here (or a new character's) is one of the
    /// aliases, which judge prompts mask, the names before it kept.
    pub fn character(&self) -> Character {
        let base = &self.base;
        let typed = |now: &String, was: &String| {
            if now == was {
                was.clone()
            } else {
                now.trim().to_string()
            }
        };
        let mut c = base.clone();
        c.id = self.id.trim().to_string();
        c.name = typed(&self.name, &base.name);
        c.language = self.language;
        c.experimenter = typed(&self.experimenter, &base.experimenter);
        if self.catchphrases != phrases_line(&base.catchphrases) {
            c.catchphrases = kept_phrases(&self.catchphrases, &base.catchphrases);
        }
        let prompt = self.prompt.lines().join("\n");
        if prompt != base.description.lines().collect::<Vec<_>>().join("\n") {
            // Edited: trimmed, but ending as the prompt did (a final newline is part of its text).
            let description = base.description.trim_end_matches([' ', '\t']);
            let ending = &description[description.trim_end().len()..];
            c.description = format!("{}{ending}", prompt.trim());
        }
        c.labels.target = self.targets.clone();
        if c.name != base.name && !self.new {
            // Answers written before the rename still say the old name.
            add_alias(&mut c.aliases, &base.name);
        }
        if (self.new && self.copy_of.is_none()) || c.name != base.name {
            add_alias(&mut c.aliases, &c.name);
            // Questions address the character by its first alias: one the new name no longer
            // contains (the old name, or a part of it) gives way to the new name.
            if !words_within(c.first_alias(), &c.name) {
                let at = c.aliases.iter().position(|a| a.trim() == c.name).unwrap_or(0);
                let name = c.aliases.remove(at);
                c.aliases.insert(0, name);
            }
        }
        c
    }

    pub(super) fn line_mut(&mut self) -> Option<&mut String> {
        match self.field {
            Field::Id if self.new => Some(&mut self.id),
            Field::Name => Some(&mut self.name),
            Field::Experimenter => Some(&mut self.experimenter),
            Field::Catchphrases => Some(&mut self.catchphrases),
            _ => None,
        }
    }
}

/// `name` among `aliases` (added last unless it is there, or empty).
pub(super) fn add_alias(aliases: &mut Vec<String>, name: &str) {
    let name = name.trim();
    if !name.is_empty() && !aliases.iter().any(|a| a.trim() == name) {
        aliases.push(name.to_string());
    }
}

/// Whether every word of `part` is a word of `name` (case aside): "Hermione" of "Hermione Granger";
/// a word of a script written without spaces (钟离 of 钟离先生) need only stand within it.
pub(super) fn words_within(part: &str, name: &str) -> bool {
    let name = name.to_lowercase();
    let words: Vec<&str> = name.split_whitespace().collect();
    part.split_whitespace().map(str::to_lowercase).all(|w| {
        if w.is_ascii() {
            words.contains(&w.as_str())
        } else {
            name.contains(&w)
        }
    })
}

/// Catchphrases as one line: separated by " | ", a `|` or `\\` within one written `\\|` or `\\\\`.
fn phrases_line(phrases: &[String]) -> String {
    phrases
        .iter()
        .map(|p| p.replace('\\', "\\\\").replace('|', "\\|"))
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The catchphrases of an edited line: each that reads as one the character had (the same text once
/// trimmed) is that one exactly, spaces and empty ones included; the others as the line gives them (trimmed, empty ones left out).
fn kept_phrases(line: &str, had: &[String]) -> Vec<String> {
    let mut unused: Vec<Option<&String>> = had.iter().map(Some).collect();
    let mut out = Vec::new();
    for (i, raw) in split_phrases(line).into_iter().enumerate() {
        let text = raw.trim();
        let same = |o: &Option<&String>| o.is_some_and(|o| o.trim() == text);
        let pick = if unused.get(i).is_some_and(same) {
            Some(i)
        } else {
            unused.iter().position(same)
        };
        match pick.and_then(|j| unused[j].take()) {
            Some(kept) => out.push(kept.clone()),
            None if text.is_empty() => {}
            None => out.push(text.to_string()),
        }
    }
    out
}

/// A catchphrase line split at its separators, escapes read, nothing trimmed.
fn split_phrases(line: &str) -> Vec<String> {
    let (mut out, mut phrase) = (Vec::new(), String::new());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => phrase.push(chars.next().unwrap_or('\\')),
            '|' => out.push(std::mem::take(&mut phrase)),
            c => phrase.push(c),
        }
    }
    out.push(phrase);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_of_a_name_is_within_it_word_by_word() {
        assert!(words_within("Hermione", "Hermione Jean Granger"));
        assert!(words_within("hermione granger", "Hermione Jean Granger"));
        assert!(!words_within("Ron", "Ronnie"));
        assert!(!words_within("Ron", "Harry Potter"));
        assert!(words_within("钟离", "钟离先生"));
        assert!(!words_within("钟离", "胡桃"));
    }

    /// A catchphrase holding the separator (or the escape) comes back whole from its line.
    #[test]
    fn catchphrases_go_through_their_line_unchanged() {
        let kept: Vec<String> = ["Yes | no | maybe", "Onward!", r"a \ b", r"\|", "|"]
            .map(String::from)
            .into();
        let line = phrases_line(&kept);
        assert_eq!(line, r"Yes \| no \| maybe | Onward! | a \\ b | \\\| | \|");
        assert_eq!(kept_phrases(&line, &[]), kept);
        assert_eq!(
            kept_phrases(" one |two|| three ", &[]),
            ["one", "two", "three"],
            "typed by hand"
        );
        assert_eq!(kept_phrases(r"trailing \", &[]), [r"trailing \"]);
        // An edit of the line keeps each catchphrase it still holds exactly as it was.
        let had: Vec<String> = ["  spaced  out  ", "", r"C:\path"].map(String::from).into();
        let line = format!("{} | new one", phrases_line(&had));
        let mut want = had.clone();
        want.push("new one".into());
        assert_eq!(kept_phrases(&line, &had), want);
    }
}
