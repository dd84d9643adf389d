//! Masks who is talking before a judge reads a conversation: every alias of the character becomes
//! `<the participant>` and the experimenter becomes `<the experimenter>`, longest name first, on word
//! boundaries. (The original code replaced every capital "M" when James Bond's experimenter was M,
//! mangling "Mission" and "Moneypenny"; a name is only replaced where it stands as a word.)
//! CJK text has no spaces: a Chinese name is masked wherever it appears.

use crate::text::is_cjk;

pub const PARTICIPANT: &str = "<the participant>";
pub const EXPERIMENTER: &str = "<the experimenter>";

/// Names and what replaces them.
#[derive(Debug, Clone)]
pub struct Masker {
    names: Vec<(Vec<char>, &'static str)>,
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

impl Masker {
    pub fn new(aliases: &[String], experimenter: &str) -> Self {
        Masker::with(aliases, &[experimenter.to_string()])
    }

    /// Masks every name of `aliases` and every one of `experimenters` (a character's names across
    /// its edits).
    pub fn with(aliases: &[String], experimenters: &[String]) -> Self {
        let mut names: Vec<(Vec<char>, &'static str)> = aliases
            .iter()
            .filter(|a| !a.trim().is_empty())
            .map(|a| (a.trim().chars().collect(), PARTICIPANT))
            .collect();
        names.extend(
            experimenters
                .iter()
                .filter(|e| !e.trim().is_empty())
                .map(|e| (e.trim().chars().collect(), EXPERIMENTER)),
        );
        // Longest first, so "Hermione Granger" wins over "Hermione".
        names.sort_by_key(|n| std::cmp::Reverse(n.0.len()));
        names.dedup_by(|a, b| a.0 == b.0);
        Masker { names }
    }

    pub fn mask(&self, text: &str) -> String {
        let chars: Vec<char> = text.chars().collect();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        'scan: while i < chars.len() {
            for (name, replacement) in &self.names {
                let end = i + name.len();
                if end > chars.len() || chars[i..end] != name[..] {
                    continue;
                }
                let first_cjk = name.first().is_some_and(|c| is_cjk(*c));
                let last_cjk = name.last().is_some_and(|c| is_cjk(*c));
                // A word boundary, or CJK text on either side (it has no spaces between words).
                let boundary = |c: char| !is_word_char(c) || is_cjk(c);
                let before_ok = first_cjk || i == 0 || boundary(chars[i - 1]);
                let after_ok = last_cjk || end == chars.len() || boundary(chars[end]);
                if before_ok && after_ok {
                    out.push_str(replacement);
                    i = end;
                    continue 'scan;
                }
            }
            out.push(chars[i]);
            i += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn james_bond_keeps_mission_and_moneypenny() {
        let m = Masker::new(&["James Bond".into()], "M");
        let text = "M:「What about the Mission, Bond?」James Bond: Moneypenny told M's office. M.";
        assert_eq!(
            m.mask(text),
            "<the experimenter>:「What about the Mission, Bond?」<the participant>: Moneypenny told <the experimenter>'s office. <the experimenter>."
        );
    }

    #[test]
    fn longest_alias_first_and_word_boundaries() {
        let m = Masker::new(&["Hermione".into(), "Hermione Granger".into()], "Harry");
        assert_eq!(
            m.mask("Hermione Granger met Harry; Hermione's cat. Harrying"),
            "<the participant> met <the experimenter>; <the participant>'s cat. Harrying"
        );
    }

    #[test]
    fn chinese_names_are_masked_inside_running_text() {
        let m = Masker::new(&["钟离".into(), "Zhong Li".into()], "旅行者");
        assert_eq!(
            m.mask("旅行者：「钟离先生，你好。」Zhong Li答道"),
            "<the experimenter>：「<the participant>先生，你好。」<the participant>答道"
        );
    }
}
